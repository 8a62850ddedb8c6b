"""Block tokens in the simulator (docs/samml.md, "Blocks"): element-wise arithmetic on blocks, a block's rows
reduced, and which block a node's N and empty fibres stand for (its zero block)."""

import numpy as np

from ..errors import GraphError
from .tokens import Block, as_block


def blockwise(scalar, vectorised):
    """An op that applies ``scalar`` to scalars and ``vectorised`` (element-wise, broadcasting) to blocks; a
    B-vector meeting a B x B block is broadcast over the block's rows (element (r, c) meets ``v[r]``)."""
    def op(*args):
        for a in args:
            if a.__class__ is Block:
                if len(args) == 2 and {np.ndim(args[0]), np.ndim(args[1])} == {1, 2}:
                    args = tuple(x[:, None] if np.ndim(x) == 1 else x for x in args)
                return as_block(vectorised(*args))
        return scalar(*args)
    return op


def row_reducer(f):
    """``f`` (a block's rows -> B-vector) on B x B block tokens only."""
    def reduce_rows(x):
        if np.ndim(x) != 2:
            raise GraphError("reduce", f"rows reduces the rows of B x B blocks, got the value {x!r}")
        return as_block(f(x))
    return reduce_rows


def run_op_block(spec, params, inputs):
    """The block shape of run_op's node (what its N and empty fibres load): an output's block by the op rules
    (``fuseflow.samml.blocks.output_block``, as :func:`node_blocks` does for a program), else an input's."""
    from ..samml.blocks import output_block
    # block_matmul's blocks come from its params: an input of only N and stops carries none to look at
    shapes = dict(spec.input_blocks(params)) if spec.input_blocks is not None else {}
    for port, toks in inputs.items():
        tok = next((t for t in toks if not isinstance(t, str)), None)
        if tok is not None and (getattr(tok, "ndim", 0) or isinstance(tok, (list, tuple))):
            shapes[port] = tuple(np.shape(tok))
    if (spec.memory, spec.memory_array) == ("read", "vals") and params.get("vals") is not None and len(params["vals"]):
        return tuple(np.shape(params["vals"][0]))                # an array's blocks are its values'
    for port, p in spec.output_ports(params):
        if p.kind == "val":
            out = output_block(spec.name, params, port, shapes, f"op {spec.name}")
            if out:
                return out
    return next(iter(shapes.values()), ())


def node_blocks(kernel):
    """``{node: block shape}`` for the nodes whose values are blocks (a val output, else a val input, carries
    them): what their N and empty fibres stand for (a zero block)."""
    from ..samml.blocks import block_shape
    out = {}
    for s in kernel.streams.values():
        b = block_shape(s)
        if b:
            for d in s.dsts:
                out.setdefault(d.node, b)
    for s in kernel.streams.values():            # an output's block wins over an input's (block_matmul: b's)
        if block_shape(s):
            out[s.src.node] = block_shape(s)
    return out
