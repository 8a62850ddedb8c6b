"""The blocks pass: a program whose operands are declared blocked (``bcsr:B``, ``bdcsr:B``, ``bdv:B``) is compiled
at block granularity (issue #15; docs/compiler.md, "Blocked programs").

:func:`lower_blocks` runs on the Einsum IR before fusion. It checks the program (one block size B for every
blocked tensor; every operand blocked; shapes divisible by B) and divides every tensor's shape by B, so fusion,
fusion tables and code generation iterate BLOCK coordinates; each tensor keeps ``block = B`` (graph.json then
declares the element shape and ``"block"``). Values are blocks: element-wise operations stay ``alu`` (on
blocks), and :func:`block_product` tells the planner which ``*`` is a block matrix product (``block_matmul``):
a product of two blocked operands that share one index which the statement sums over. The reduction over that
index then sums the product blocks element-wise (``reduce`` / ``spacc`` on blocks).

Softmax across the blocks of a row (BigBird attention): :func:`block_axes` names the indices a value's block
dimensions stand for (``S(i,j)``: rows i, columns j). A reduction over a block's column index also reduces
inside the block (``reduce`` with ``rows``: ``[B, B]`` -> ``[B]``), and a B-vector indexed by a block's row
index meets the block as an ``alu`` broadcast over its rows (``S(i,j) - m(i)``). Reductions over a block's row
index and vectors along its columns are refused with one line.
"""

from __future__ import annotations

import dataclasses

from ..errors import ProgramError
from .ir import Bin, Fn, Leaf, ProgramIR, Red, is_mask


def _spelling(t) -> str:
    return t.format_name if t.levels is not None else "dense"


def lower_blocks(ir: ProgramIR) -> ProgramIR:
    """The IR at block granularity (``ir`` itself when no tensor is blocked); raises ProgramError (one line)
    for mixed, mismatched or indivisible blocks and for products that are not block products."""
    blocked = {n: t for n, t in ir.tensors.items() if t.role == "input" and t.block}
    if not blocked:
        return ir
    sizes = sorted({t.block for t in blocked.values()})
    if len(sizes) > 1:
        first = {b: next(t for t in blocked.values() if t.block == b) for b in sizes}
        a, b = first[sizes[0]], first[sizes[-1]]
        raise ProgramError(f"line {b.line}", f"mismatched block sizes: {a.name} is {_spelling(a)} but {b.name} is "
                                             f"{_spelling(b)}: declare every blocked tensor with the same B")
    size = sizes[0]
    for s in ir.stmts:
        for leaf in s.rhs.leaves():
            if is_mask(leaf.tensor):
                raise ProgramError(f"line {s.line}", f"a coordinate mask in {s.text!r} has no blocks: give the mask "
                                                     f"as a blocked input tensor (bcsr:{size})")
            t = ir.tensors[leaf.tensor]
            if t.role == "input" and not t.block and t.order > 0:
                other = next(iter(blocked))
                want = f"bdv:{size} (or bsv:{size})" if t.order == 1 else f"bcsr:{size} (or bdcsr:{size})"
                raise ProgramError(f"line {t.line}", f"{other} is blocked ({_spelling(blocked[other])}) but "
                                                     f"{t.name} is not: declare {t.name} as {want}")
        reduced = reduced_indices(s.rhs)
        for node in s.rhs.walk():
            if isinstance(node, Bin) and node.op == "*":
                block_product(node, reduced, where=f"line {s.line}")
        block_axes(s.rhs, reduced, where=f"line {s.line}")
    tensors = {}
    for name, t in ir.tensors.items():
        if t.order > 2:
            raise ProgramError(f"line {t.line}", f"tensor {name} has order {t.order}: blocked programs take "
                                                 f"vectors and matrices")
        for d, n in enumerate(t.shape):
            if n % size:
                raise ProgramError(f"line {t.line}", f"tensor {name}{tuple(t.shape)}: dimension {d} of size {n} is "
                                                     f"not divisible by the block size {size}")
        tensors[name] = dataclasses.replace(t, shape=tuple(n // size for n in t.shape),
                                            block=size if t.order else None)
    return ProgramIR(ir.name, tensors, ir.stmts, ir.regions)


def reduced_indices(expr) -> set:
    """Every index some reduction of ``expr`` sums (or maxes) over."""
    return {i for n in expr.walk() if isinstance(n, Red) for i in n.idx}


def block_product(node, reduced, where="program"):
    """``(a, b, rhs)`` when the product ``node`` is a block matrix product ``a @ b`` (``rhs`` ``"matrix"`` or
    ``"vector"``), else None (an element-wise product: blocks of the same indices, or a block and a scalar).

    A block product multiplies two blocked accesses that share exactly one index, summed by the statement:
    ``A(i,k) * B(k,j)`` (or the operands swapped) and ``A(i,k) * c(k)``. Every other product of blocks that is
    not element-wise (a transposed operand, a block times a vector without a sum, an outer product) is refused
    with one line."""
    a, b = node.a, node.b
    if not (isinstance(a, Leaf) and isinstance(b, Leaf)):
        if set(a.free) & set(b.free) & reduced:
            raise ProgramError(where, f"the blocked product {node!r} sums over an index of a computed operand: "
                                      f"write the contraction as a product of two tensors (A(i,k) * B(k,j))")
        return None
    if not a.idx or not b.idx or tuple(a.idx) == tuple(b.idx):
        return None                                    # a scalar times a block, or element-wise
    shared = [i for i in a.idx if i in b.idx]
    vector, block = sorted((a, b), key=lambda x: len(x.idx))
    if len(vector.idx) == 1 and len(block.idx) == 2 and vector.idx[0] == block.idx[0] and shared[0] not in reduced:
        return None                                    # a vector over the block's rows: broadcast (alu)
    if len(shared) == 1 and shared[0] in reduced:
        k = shared[0]
        for x, y in ((a, b), (b, a)):
            if len(x.idx) == 2 and x.idx[1] == k and y.idx[0] == k:
                return x, y, "matrix" if len(y.idx) == 2 else "vector"
        raise ProgramError(where, f"the blocked product {node!r} needs the layout A(i,k) * B(k,j) or A(i,k) * c(k) "
                                  f"(a block product is a @ b): declare the transposed operand instead")
    raise ProgramError(where, f"the blocked product {node!r} is neither element-wise (the same indices) nor a "
                              f"block product (one shared index, summed)")


def block_axes(expr, reduced=None, where="program") -> tuple:
    """The indices the block dimensions of ``expr``'s values stand for: ``(i, j)`` for B x B blocks whose rows
    run over i and columns over j, ``(i,)`` for B-vectors, ``()`` for scalars. Raises ProgramError (one line)
    for what blocks cannot do: a vector broadcast along a block's columns, a reduction over a block's row index
    (or over a vector's own index)."""
    if reduced is None:
        reduced = reduced_indices(expr)
    if isinstance(expr, Leaf):
        return () if is_mask(expr.tensor) else tuple(expr.idx)
    if isinstance(expr, Fn):
        return block_axes(expr.a, reduced, where)
    if isinstance(expr, Red):
        axes = block_axes(expr.body, reduced, where)
        gone = [x for x in axes if x in expr.idx]
        if not gone:
            return axes                                 # over blocks only (a contraction's k): element-wise
        if len(axes) == 2 and gone == [axes[1]]:
            return axes[:1]                             # over the block columns: each block's rows (reduce rows)
        what = "a vector's index" if len(axes) == 1 else ("both block indices" if len(gone) == 2
                                                          else "a block's row index")
        raise ProgramError(where, f"{expr!r} reduces over {what} ({', '.join(gone)}): blocked reductions run over "
                                  f"a block's column index (max[j](S(i,j))); write the reduction over the "
                                  f"columns of a transposed operand")
    if isinstance(expr, Bin):
        if expr.op == "*":
            product = block_product(expr, reduced, where)
            if product is not None:
                x, y, rhs = product
                return (x.idx[0], y.idx[1]) if rhs == "matrix" else (x.idx[0],)
        a, b = block_axes(expr.a, reduced, where), block_axes(expr.b, reduced, where)
        if len(a) == len(b) or not a or not b:
            return a or b
        block, vector = (a, b) if len(a) == 2 else (b, a)
        if vector[0] != block[0]:
            raise ProgramError(where, f"{expr!r} broadcasts a vector over {vector[0]}, a block's column index: "
                                      f"blocks take vectors along their rows ({block[0]}) only")
        return block
    return ()
