"""Block values: which streams carry dense blocks, and of what shape (issue #15, docs/samml.md "Blocks").

A blocked tensor (``TensorDecl.block``, e.g. ``[4, 4]`` for ``bcsr:4``) stores its levels over BLOCK
coordinates and one dense block per stored entry. A ``val`` stream that carries such blocks says so with
``"block": [B, B]`` (or ``[B]`` for B-vectors); absent means scalar values, so every graph without blocked
tensors is unchanged. One token is one block (one beat in hardware).

This module is the one definition of a stream's block shape: :func:`block_shape` reads it (the simulator and
the hardware call it), :func:`infer_blocks` derives every stream's shape from the tensors and the op rules,
:func:`apply_blocks` writes the derived shapes into a program and :func:`check_blocks` (part of
``validate_program``) rejects a file whose stated shapes disagree with the rules.

Op rules
--------
The rules of alu, reduce and block_matmul are declared with those ops in the registry (``OpSpec.output_block``,
``OpSpec.input_blocks``).

- ``array`` of a blocked tensor: its values carry the tensor's block; ``value_write`` takes them.
- ``alu``: element-wise; blocks of equal shape, one block and one scalar (the scalar is broadcast), or a
  ``[B, B]`` block and a ``[B]`` vector (element (r, c) meets ``v[r]``: the vector is broadcast over each
  block's rows; softmax's ``S - max`` and ``E / sum``).
- ``reduce`` with ``rows``: ``[B, B]`` blocks in, ``[B]`` vectors out (each block's rows reduced too).
- ``block_matmul``: ``a`` is ``[B, B]``, ``b`` is ``[B, B]`` (``rhs="matrix"``) or ``[B]`` (``rhs="vector"``);
  ``out`` has ``b``'s shape.
- every other op passes values unchanged: an output carries the block of the input it forwards.
"""

from __future__ import annotations

import networkx as nx

from ..errors import GraphError
from .registry import OPS

Block = tuple  # () for a scalar stream, (B,) or (B, B) for a blocked one

#: the input each value-forwarding output copies (default: the input port of the same name)
_FORWARD = {"repeat": {"out": "in"}, "parallelize": {"out{i}": "in"}, "serialize": {"out": "in0"},
            "reduce": {"val": "val"}, "spacc": {"val": "val"}}


def block_shape(stream) -> Block:
    """The block shape a stream's value tokens carry: ``()`` (scalar), ``(B,)`` or ``(B, B)``."""
    b = getattr(stream, "block", None)
    return tuple(b) if b else ()


def tensor_block(tensor) -> Block:
    """The block shape of a tensor declaration: ``()`` when it is not blocked."""
    b = getattr(tensor, "block", None)
    return tuple(b) if b else ()


def check_tensor_block(t, where: str) -> None:
    """Raise GraphError (one line) for a tensor block that does not fit the tensor's order and shape."""
    b = tensor_block(t)
    if not b:
        return
    if len(b) != len(t.shape):
        raise GraphError(f"{where}.block", f"tensor '{t.name}' of order {len(t.shape)} has a block of {len(b)} "
                                           f"dimensions {list(b)}")
    if any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in b):
        raise GraphError(f"{where}.block", f"block sizes must be integers >= 1, got {list(b)}")
    if len(set(b)) != 1:
        raise GraphError(f"{where}.block", f"tensor '{t.name}' has a non-square block {list(b)} (blocks are B x B)")
    for d, (n, bb) in enumerate(zip(t.shape, b)):
        if n % bb:
            raise GraphError(f"{where}.block", f"tensor '{t.name}' dimension {d} of size {n} is not divisible by "
                                               f"the block size {bb}")


def output_block(op: str, params: dict, port: str, blocks_in: dict, where: str = "op",
                 name: str = "") -> Block:
    """The block of output ``port`` of an ``op`` with ``params`` given its inputs' blocks (``{input port:
    block}``): the op's own rule (``OpSpec.output_block``), else the input it forwards (also what ``run_op``
    loads for N)."""
    label = f"{op} '{name}'" if name else op
    rule = OPS[op].output_block if op in OPS else None
    if rule is not None:
        out = rule(params, port, blocks_in, label, where)
        if out is not None:
            return out
    fwd = _FORWARD.get(op, {})
    src = None
    for template, inp in fwd.items():
        if template == port or ("{i}" in template and port.startswith(template.split("{")[0])):
            src = inp
    if src is None:
        src = port
    return blocks_in.get(src, ())


def infer_blocks(program, kernel, where: str = "kernel") -> dict:
    """``{stream id: block}`` for every stream of ``kernel``, derived from the tensors and the op rules.

    An ``array`` without a tensor (run_op style) keeps the block its output stream states."""
    by_src = {(s.src.node, s.src.port): s for s in kernel.streams.values()}
    out = {}
    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        blocks_in = {}
        for port, _ in node.spec.input_ports(node.params):
            s = kernel.driver(nid, port)
            if s is not None:
                blocks_in[port] = out.get(s.id, ())
        for port, _ in node.spec.output_ports(node.params):
            s = by_src.get((nid, port))
            if s is None:
                continue
            if s.kind != "val":
                out[s.id] = ()
                continue
            nwhere = f"{where}: node {nid}"
            if (node.spec.memory, node.spec.memory_array) == ("read", "vals"):
                t = program.tensors.get(node.params.get("tensor"))
                out[s.id] = tensor_block(t) if t is not None else block_shape(s)
            else:
                out[s.id] = output_block(node.op, node.params, port, blocks_in, nwhere, node.id)
        if (node.spec.memory, node.spec.memory_array) == ("write", "vals"):
            t = program.tensors.get(node.params.get("tensor"))
            got = blocks_in.get("val", ())
            if t is not None and got != tensor_block(t):
                raise GraphError(f"{where}: node {nid}", f"value_write '{nid}' writes {list(got) or 'scalars'} into "
                                                         f"tensor '{t.name}' of block {list(tensor_block(t)) or 'none'}")
    return out


def apply_blocks(program) -> None:
    """Write the derived block shape into every stream of ``program`` (what the compiler calls before saving);
    a program without blocked tensors is left as it is."""
    if not any(tensor_block(t) for t in program.tensors.values()):
        return
    for k in program.kernels:
        for sid, b in infer_blocks(program, k, f"kernel {k.name}").items():
            k.streams[sid].block = list(b) if b else None


def check_blocks(program, kernel, where: str) -> None:
    """Raise GraphError when a stream's stated block differs from the derived one (or sits on a non-val stream)."""
    if not any(tensor_block(t) for t in program.tensors.values()) \
            and not any(block_shape(s) for s in kernel.streams.values()) \
            and not any(n.spec.input_blocks is not None for n in kernel.nodes.values()):
        return                                  # the common, scalar case costs nothing
    derived = infer_blocks(program, kernel, where)
    for i, (sid, s) in enumerate(kernel.streams.items()):
        stated = block_shape(s)
        if stated and s.kind != "val":
            raise GraphError(f"{where}.streams[{i}].block", f"stream '{sid}' is {s.kind}: only val streams carry "
                                                            f"blocks")
        if stated != derived.get(sid, ()):
            raise GraphError(f"{where}.streams[{i}].block",
                             f"stream '{sid}' states block {list(stated) or 'none'} but its producer gives "
                             f"{list(derived.get(sid, ())) or 'scalars'}")
