"""Tiling: run a program whose tensors do not fit on chip as a sequence of tiles (docs/tiling.md).

The pass cuts dimensions of the program into tiles and compiles the ordinary SAMML program at *tile shape*: the
rest of the pipeline does not know tiling happened and one hardware build serves every tile. The plan
(graph.json's ``tiling``, :mod:`fuseflow.samml.tileplan`) says how the full tensors are cut, what each kernel
loads and stores per tile and how partial outputs merge; :mod:`fuseflow.sim.tiled` runs it.

Dimensions: the program's index names are per statement, so the pass first joins every (statement, index) and
(tensor, mode) that must have the same extent into *dimensions* (union-find over every tensor access): in a GCN
layer ``T(i,j) = A(i,k) * X(k,j)``, the ``k`` of ``A(i,k)`` and the rows of ``X`` are one dimension. ``tile i
1024`` splits every dimension one of whose indices is called ``i``.

Partial outputs: a kernel whose tile grid has a split dimension its output does not have (a split reduction) gets
an accumulator input: ``y(i) = A(i,j) * x(j)`` becomes ``y(i) = (A(i,j) * x(j)) + y_acc(i)``; only sums can be
split. Tiles are visited output-partition major, so the partial stays in the kernel's output memory between the
tiles of one partition (merge ``on-chip``); it is stored once, after the partition's last tile.

Automatic tiling (``onchip_bits``): Scorch's rules. The candidates are the output rows of every statement and
the *gathered* dimensions (a dense operand's dimension indexed by a sparse operand's compressed level: the
window of the dense operand); a sparse operand's own levels are split only when nothing else is left. Starting
from no split, the candidate whose halving lowers the estimated bits of one tile most is halved until the tile
fits (inputs that change between tiles count twice: double buffering); a tile size stays a multiple of the
index's ``parallel`` factor (the lanes get equal rows) and of a blocked tensor's block. Tiles that the data
makes larger than the declared capacities are split again recursively when they run (:mod:`fuseflow.sim.tiled`).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field

from ..errors import ProgramError
from ..samml.registry import DMA
from ..samml.tileplan import banked_inputs, kernel_tensors

__all__ = ["parse_tiles", "TileChoice", "compile_tiled", "render_tiles", "DEFAULT_BUFFERS"]

#: automatic tiling keeps row tiles at least this tall while it can shrink the windows instead
ROW_FLOOR = 64

#: the plan's default DMA buffering: the next tile's loads overlap the current tile's run
DEFAULT_BUFFERS = 2


def parse_tiles(spec) -> dict:
    """``"i=1024,j=64"`` (or a list of such strings, or a dict) -> {index: size}; sizes positive integers."""
    if spec is None:
        return {}
    items = []
    if isinstance(spec, dict):
        items = [(str(k), v, "tiles") for k, v in spec.items()]
    else:
        for part in ([spec] if isinstance(spec, str) else list(spec)):
            for item in str(part).split(","):
                m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(\S+)\s*", item)
                if not m:
                    raise ProgramError("--tile", f"expected INDEX=SIZE (e.g. i=1024), got {item.strip()!r}")
                items.append((m.group(1), m.group(2), "--tile"))
    out = {}
    for index, size, where in items:
        if index in out:
            raise ProgramError(where, f"index {index} is given twice")
        out[index] = check_size(index, size, where)
    return out


def check_size(index: str, size, where: str) -> int:
    """A tile size as an int >= 1 (one-line ProgramError otherwise)."""
    if isinstance(size, str) and re.fullmatch(r"[+-]?\d+", size.strip()):
        size = int(size)
    if isinstance(size, float) and size.is_integer():
        size = int(size)
    if isinstance(size, bool) or not isinstance(size, int):
        raise ProgramError(where, f"tile {index}: the size must be a positive integer, got {size!r}")
    if size < 1:
        raise ProgramError(where, f"tile {index}: the size must be at least 1, got {size}")
    return size


# ---- dimensions -------------------------------------------------------------------------------------------------
class _Dims:
    """Union-find over ("t", tensor, mode) and ("s", statement, index) keys."""

    def __init__(self):
        self.parent = {}

    def find(self, k):
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@dataclass
class Dimension:
    """A dimension of the program: the tensor modes and statement indices that share one extent."""
    name: str
    extent: int
    indices: list                    # index names on it, in statement order
    modes: list                      # (tensor, mode)
    size: int | None = None          # tile size (None: not split)

    @property
    def tiles(self) -> int:
        return -(-self.extent // self.size) if self.size else 1


def dimensions(ir) -> tuple:
    """(``{name: Dimension}``, ``{(tensor, mode): name}``, ``{(stmt id, index): name}``) of a program."""
    from .ir import is_mask
    uf = _Dims()
    for st in ir.stmts:
        for m, i in enumerate(st.idx):
            uf.union(("s", st.id, i), ("t", st.lhs, m))
        for leaf in st.rhs.leaves():
            if is_mask(leaf.tensor) or leaf.tensor not in ir.tensors:
                continue
            for m, i in enumerate(leaf.idx):
                if isinstance(i, str):
                    uf.union(("s", st.id, i), ("t", leaf.tensor, m))
        for i in st.indices:
            uf.find(("s", st.id, i))
    for t in ir.tensors.values():
        for m in range(t.order):
            uf.find(("t", t.name, m))
    groups = {}
    for k in list(uf.parent):
        groups.setdefault(uf.find(k), []).append(k)
    dims, by_mode, by_index, used = {}, {}, {}, set()
    for root in sorted(groups, key=lambda r: min(_key_rank(k, ir) for k in groups[r])):
        keys = sorted(groups[root], key=lambda k: _key_rank(k, ir))
        indices = []
        for k in keys:
            if k[0] == "s" and k[2] not in indices:
                indices.append(k[2])
        modes = [(k[1], k[2]) for k in keys if k[0] == "t"]
        if not modes:
            continue
        extent = int(ir.tensors[modes[0][0]].shape[modes[0][1]])
        base = indices[0] if indices else f"{modes[0][0]}{modes[0][1]}"
        name, n = base, 2
        while name in used:
            name, n = f"{base}{n}", n + 1
        used.add(name)
        dims[name] = Dimension(name, extent, indices, modes)
        for k in keys:
            (by_mode if k[0] == "t" else by_index)[(k[1], k[2])] = name
    return dims, by_mode, by_index


def _key_rank(k, ir):
    if k[0] == "s":
        return (k[1], 0, str(k[2]))
    prod = ir.producer(k[1])
    return (prod.id if prod is not None else -1, 1, f"{k[1]}.{k[2]}")


# ---- choosing sizes -----------------------------------------------------------------------------------------------
@dataclass
class TileChoice:
    """The sizes chosen and why."""
    sizes: dict                      # dimension -> tile size (split dimensions only)
    chosen: str                      # "manual" | "auto"
    onchip_bits: int | None
    estimate_bits: int | None = None
    notes: list = field(default_factory=list)
    fits: bool = False               # the whole program fits the budget (split only for min_tiles)


def _multiple_of(dim, ir, parallel):
    """What a tile size of ``dim`` must be a multiple of: {what: factor} (parallel lanes, blocks)."""
    need = {}
    for i in dim.indices:
        if parallel.get(i, 1) > 1:
            need[f"parallel {i} {parallel[i]}"] = parallel[i]
    for t, m in dim.modes:
        b = getattr(ir.tensors[t], "block", None)
        if b:
            need[f"tensor {t}'s {b}x{b} blocks"] = b
    return need


def manual_sizes(tiles: dict, dims: dict, ir, parallel: dict, where: str) -> dict:
    """{dimension: size} for the user's {index: size}; one-line errors for unknown indices and sizes that do not
    divide where they must."""
    known = sorted({i for d in dims.values() for i in d.indices})
    sizes = {}
    for index, size in tiles.items():
        hit = [d for d in dims.values() if index in d.indices]
        if not hit:
            raise ProgramError(where, f"tile {index}: no statement has an index {index} (indices: {', '.join(known)})")
        for d in hit:
            for what, f in _multiple_of(d, ir, parallel).items():
                if size % f and size < d.extent:
                    raise ProgramError(where, f"tile {index} {size}: not a multiple of {f} ({what}: every tile "
                                              f"must hold whole lanes/blocks); use {size - size % f or f}")
            if d.name in sizes and sizes[d.name] != size:
                raise ProgramError(where, f"tile {index}: dimension {d.name} is already tiled by {sizes[d.name]}")
            sizes[d.name] = min(size, d.extent)       # at least the extent: one tile (a tiled program still)
    return sizes


def tensor_bits(shape, levels, mode_order, nnz, crd_bits, val_bits) -> int:
    """On-chip bits of a tensor tile: per compressed level its seg and crd arrays, then the values; ``nnz`` the
    stored entries of its last level (None: every position)."""
    bits, parent = 0, 1
    full = 1
    for lv, fmt in enumerate(levels):
        dim = int(shape[mode_order[lv]])
        full *= dim
        if fmt == "dense":
            parent *= dim
        else:
            n = full if nnz is None else min(full, max(int(nnz), 0), parent * dim)
            bits += (parent + 1) * crd_bits + n * crd_bits
            parent = n
    return bits + parent * val_bits


def _estimate_bits(ir, dims, by_mode, sizes, densities, tile_nnz, crd_bits=16, val_bits=32, buffers=2) -> int:
    """Estimated on-chip bits of one tile of every tensor (inputs that change between tiles twice)."""
    total = 0
    for t in ir.tensors.values():
        shape = [sizes.get(by_mode.get((t.name, m)), t.shape[m]) for m in range(t.order)]
        split = any(by_mode.get((t.name, m)) in sizes for m in range(t.order))
        if t.role == "input" and t.levels is not None:
            levels, order = list(t.levels), list(t.mode_order)
            nnz = None
            if tile_nnz is not None and t.name in tile_nnz:
                nnz = tile_nnz[t.name](sizes)
            elif "compressed" in levels:       # the capacity the compiler will declare (samml/capacities.py)
                from ..samml.capacities import declared_capacity
                from ..samml.graph import TensorDecl
                nnz = declared_capacity(TensorDecl(t.name, "input", list(shape), levels, order,
                                                   density=densities.get(t.name)))[-1]
            bits = tensor_bits(shape, levels, order, nnz, crd_bits, val_bits)
            total += bits * (buffers if split else 1)
        else:                          # written: its format is the compiler's; count it dense (an upper bound)
            bits = math.prod(shape) * val_bits
            reduced = any(by_mode.get((t.name, m)) not in sizes for m in range(t.order)) and sizes
            total += bits * (2 if reduced else 1)       # and its accumulator
    return total


def auto_sizes(ir, dims, by_mode, by_index, onchip_bits: int, parallel: dict, inputs=None,
               exclude=(), min_tiles=None) -> TileChoice:
    """Tile sizes under ``onchip_bits`` by Scorch's rules (module docstring). ``min_tiles``: the output rows are
    then halved (not below ``ROW_FLOOR`` rows) until they make at least that many tiles, even when the program
    fits: with ``buffers`` 2 every tile's loads but the first overlap a run, so data that lives off chip streams
    (one tile pays its whole load before it runs)."""
    densities = {t.name: t.density for t in ir.tensors.values() if t.role == "input"}
    tile_nnz = _tile_counters(ir, by_mode, inputs) if inputs else None
    if inputs:
        for name, a in inputs.items():
            if name in ir.tensors and hasattr(a, "nnz") and name not in (tile_nnz or {}):
                densities[name] = a.nnz / max(math.prod(a.shape), 1)
    candidates, gathered, rows = [], set(), set()
    for st in ir.stmts:
        if st.idx:
            rows.add(by_mode[(st.lhs, 0)])
        sparse_idx = set()
        for leaf in st.rhs.leaves():
            t = ir.tensors.get(leaf.tensor)
            if t is not None and t.levels is not None and "compressed" in t.levels:
                sparse_idx |= {leaf.idx[t.mode_order[lv]] for lv, f in enumerate(t.levels) if f == "compressed"}
        for leaf in st.rhs.leaves():
            t = ir.tensors.get(leaf.tensor)
            if t is None or (t.levels is not None and "compressed" in t.levels):
                continue
            for m, i in enumerate(leaf.idx):
                if i in sparse_idx:
                    gathered.add(by_mode[(leaf.tensor, m)])
    unsplittable = set(exclude)
    for st in ir.stmts:
        unsplittable |= _reduced_dims(st, ir, by_index, own=True) - linear_dims(st.rhs, st, ir, by_index)
    candidates = [d for d in dims if (d in rows or d in gathered) and d not in unsplittable]
    others = [d for d in dims if d not in candidates and d not in unsplittable]
    sizes = {}
    notes = [f"candidates (output rows, gathered windows): {', '.join(candidates) or 'none'}"]
    guessed = sorted(t.name for t in ir.tensors.values() if t.role == "input" and t.levels is not None
                     and "compressed" in t.levels and densities.get(t.name) is None
                     and not (tile_nnz and t.name in tile_nnz))
    if guessed:
        notes.append(f"{', '.join(guessed)}: no declared density and no data, so sized for the default capacity "
                     f"(declare 'density' in the program, or give --inputs / tile_inputs, for tiles that fit "
                     f"the data)")

    def bits(sz):
        return _estimate_bits(ir, dims, by_mode, sz, densities, tile_nnz)

    est = bits(sizes)
    windows = [d for d in candidates if d in gathered]
    row_dims = [d for d in candidates if d not in gathered]

    def mult(d):
        return max(_multiple_of(dims[d], ir, parallel).values(), default=1)

    def streamed(choice):
        if not min_tiles or min_tiles <= 1 or not row_dims:
            return choice
        sz = dict(choice.sizes)
        d = row_dims[0]
        while -(-dims[d].extent // sz.get(d, dims[d].extent)) < min_tiles:
            new = _halve(sz.get(d, dims[d].extent), mult(d))
            if new < ROW_FLOOR or new >= sz.get(d, dims[d].extent):
                break
            sz[d] = new
        if sz != choice.sizes:
            choice.notes.append(f"{d} split into at least {min_tiles} tiles (min_tiles: the loads stream)")
        return TileChoice(sz, choice.chosen, choice.onchip_bits, bits(sz), choice.notes, not choice.sizes)

    if est <= onchip_bits:
        return streamed(TileChoice({}, "auto", onchip_bits, est, notes))

    # Fewest windows first: every window tile makes the rows be visited again (a sparse row's cost is paid
    # once per window), while a row tile costs a DMA round trip that double buffering hides; so the windows
    # are the largest that leave row tiles of at least ROW_FLOOR rows.
    g = {}
    for _ in range(64):
        trial = dict(g)
        while bits(trial) > onchip_bits:
            d = max((d for d in row_dims if _halve(trial.get(d, dims[d].extent), mult(d)) >= ROW_FLOOR
                     and _halve(trial.get(d, dims[d].extent), mult(d)) < trial.get(d, dims[d].extent)),
                    key=lambda d: trial.get(d, dims[d].extent), default=None)
            if d is None:
                break
            trial[d] = _halve(trial.get(d, dims[d].extent), mult(d))
        if bits(trial) <= onchip_bits:
            notes.append(f"windows as large as row tiles of at least {ROW_FLOOR} rows allow")
            return streamed(TileChoice(trial, "auto", onchip_bits, bits(trial), notes))
        shrunk = False
        for d in windows:
            new = _halve(g.get(d, dims[d].extent), mult(d))
            if new < g.get(d, dims[d].extent):
                g[d], shrunk = new, True
        if not shrunk:
            break
    steps = 0
    while est > onchip_bits:
        best = None
        for pool in (candidates, others):
            for d in pool:
                cur = sizes.get(d, dims[d].extent)
                mult = max(_multiple_of(dims[d], ir, parallel).values(), default=1)
                new = _halve(cur, mult)
                if new >= cur:
                    continue
                trial = {**sizes, d: new}
                b = bits(trial)
                rank = (cur, -b)                  # the largest tile side first (balanced tiles), then the fewest bits
                if best is None or rank > best[3]:
                    best = (b, d, new, rank)
            if best is not None:
                if pool is others:
                    notes.append(f"split {best[1]} (not a window: capacity forces it)")
                break
        if best is None:
            smallest = ", ".join(f"{d}={sizes.get(d, dims[d].extent)}" for d in dims)
            raise ProgramError("--onchip-bits", f"{onchip_bits} bits hold no tile: the smallest tile ({smallest}) "
                                                f"needs about {est} bits")
        est, d, new, _ = best
        sizes[d] = new
        steps += 1
    return streamed(TileChoice(sizes, "auto", onchip_bits, est, notes))


def _halve(size: int, mult: int) -> int:
    """The next smaller tile size: a power of two below ``size`` (a multiple of ``mult``)."""
    p = 1 << max(0, (size - 1).bit_length() - 1)
    if p >= size:
        p //= 2
    p = max(p, 1)
    return max(mult, p - p % mult) if mult > 1 else p


def _tile_counters(ir, by_mode, inputs):
    """{tensor: sizes -> the most nonzeros of one tile} for 2-D sparse inputs given as data (memoised)."""
    import numpy as np
    out = {}
    for name, a in inputs.items():
        t = ir.tensors.get(name)
        if t is None or not hasattr(a, "tocoo") or t.order != 2:
            continue
        coo = a.tocoo()
        r, c = coo.row.astype(np.int64), coo.col.astype(np.int64)
        d0, d1 = by_mode.get((name, 0)), by_mode.get((name, 1))
        memo = {}

        def most(sizes, r=r, c=c, d0=d0, d1=d1, shape=a.shape, memo=memo):
            s0, s1 = sizes.get(d0), sizes.get(d1)
            if (s0, s1) in memo:
                return memo[(s0, s1)]
            if not (s0 or s1) or r.size == 0:
                memo[(s0, s1)] = int(r.size)
                return int(r.size)
            t1 = -(-int(shape[1]) // s1) if s1 else 1
            t0 = -(-int(shape[0]) // s0) if s0 else 1
            key = (r // s0 if s0 else 0) * t1 + (c // s1 if s1 else 0)
            if t0 * t1 <= 1 << 26:
                n = int(np.bincount(key, minlength=1).max())
            else:
                n = int(np.unique(key, return_counts=True)[1].max())
            memo[(s0, s1)] = n
            return n
        out[name] = most
    return out


# ---- the tiled program --------------------------------------------------------------------------------------------
def _retiled_source(src, ir, by_mode, sizes, acc):
    """A copy of ``src`` at tile shape, with an accumulator term on the statements in ``acc`` ({lhs: acc name})."""
    new = copy.deepcopy(src)
    new._tiles = {}
    for name, d in new._decls.items():
        d.shape = tuple(sizes.get(by_mode.get((name, m)), s) for m, s in enumerate(d.shape))
    for lhs, acc_name in acc.items():
        st = ir.producer(lhs)
        ss = new._stmts[st.id]
        left, _, right = ss.text.partition("=")
        ss.text = f"{left}= ({right.strip()}) + {acc_name}({','.join(st.idx)})"
        shape = tuple(sizes.get(by_mode.get((lhs, m)), s) for m, s in enumerate(ir.tensors[lhs].shape))
        new.tensor(acc_name, shape, "dense", line=10 ** 6 + len(new._decls))
    return new


_ZERO_PRESERVING = {"neg", "relu", "tanh", "gelu", "sqrt", "abs", "square"}


def annihilators(node, ir, seen=None) -> set:
    """Tensors whose being zero makes ``node`` zero (a product's operands, every term's of a sum)."""
    from .ir import Bin, Fn, Leaf, Red
    seen = seen or set()
    if isinstance(node, Leaf):
        out = {node.tensor}
        prod = ir.producer(node.tensor)
        if prod is not None and node.tensor not in seen:
            out |= annihilators(prod.rhs, ir, seen | {node.tensor})
        return out
    if isinstance(node, Bin):
        a, b = annihilators(node.a, ir, seen), annihilators(node.b, ir, seen)
        if node.op == "*":
            return a | b
        if node.op in ("+", "-"):
            return a & b
        return set()
    if isinstance(node, Fn):
        return annihilators(node.a, ir, seen) if node.fn in _ZERO_PRESERVING else set()
    if isinstance(node, Red):
        return annihilators(node.body, ir, seen)
    return set()


def linear_dims(node, st, ir, by_index, seen=frozenset()) -> set:
    """Dimensions whose sums ``node`` (of statement ``st``) is linear in: splitting one into tiles and adding the
    tiles' results gives the whole. Sums are; so are terms of a sum that all have it, and a product or quotient
    whose other side does not use it; a function, a max/min or a softmax is not. An intermediate read by ``node``
    contributes its own statement's (when it is fused into the kernel, its sums run inside)."""
    from .ir import Bin, Leaf, Red

    def dims_of(n, stmt):
        return {by_index.get((stmt.id, i)) for i in n.all_indices()}
    if isinstance(node, Red):
        if node.op != "sum":
            return set()
        return {by_index.get((st.id, i)) for i in node.idx} | linear_dims(node.body, st, ir, by_index, seen)
    if isinstance(node, Bin):
        la = linear_dims(node.a, st, ir, by_index, seen)
        lb = linear_dims(node.b, st, ir, by_index, seen)
        if node.op in ("+", "-"):
            return la & lb
        if node.op == "*":
            return (la - dims_of(node.b, st)) | (lb - dims_of(node.a, st))
        if node.op == "/":
            return la - dims_of(node.b, st)
        return set()
    if isinstance(node, Leaf):
        prod = ir.producer(node.tensor)
        if prod is None or node.tensor in seen:
            return set()
        return linear_dims(prod.rhs, prod, ir, by_index, seen | {node.tensor})
    return set()


def _reduced_dims(st, ir, by_index, seen=frozenset(), own=False) -> set:
    """Dimensions reduced anywhere in ``st`` or (``own`` False) the statements it reads (its inlined producers)."""
    from .ir import Leaf, Red, Sugar
    out = set()
    for n in st.rhs.walk():
        if isinstance(n, (Red, Sugar)):
            out |= {by_index.get((st.id, i)) for i in n.idx}
        if isinstance(n, Leaf) and n.tensor not in seen and not own:
            prod = ir.producer(n.tensor)
            if prod is not None:
                out |= _reduced_dims(prod, ir, by_index, seen | {n.tensor})
    return out


def _check_sum(ir, lhs, split_dims, by_index, where):
    """Only dimensions the output is linear in may be split (a sum under a relu, a max or a softmax, or a term
    without the sum, does not merge by adding partials)."""
    st = ir.producer(lhs)
    ok = linear_dims(st.rhs, st, ir, by_index)
    bad = [d for d in split_dims if d not in ok]
    if bad:
        raise _MergeError(where, f"{lhs} (line {st.line}): partial results over tiles of "
                                 f"{', '.join(sorted(bad))} do not merge by adding (the sum is under a function or "
                                 f"a max, or a term does not sum over it): write the sum as a statement of its own, "
                                 f"or tile another index", bad)


class _MergeError(ProgramError):
    def __init__(self, what, why, dims):
        super().__init__(what, why)
        self.dims = dims


def compile_tiled(src, compile_fn, tiles=None, onchip_bits=None, parallel=None, inputs=None,
                  contract=None, where="tiles", fusion=None, regions=True, min_tiles=None):
    """Compile ``src`` tiled: ``compile_fn(source) -> CompileResult`` compiles a source at tile shape.

    ``tiles``: {index: size} (manual) or None with ``onchip_bits`` (automatic). Returns the CompileResult of the
    tiled program (``result.program.tiling`` is the plan, ``result.reports["tiling"]`` its :class:`TileChoice`), or
    None when nothing needs splitting (every tile size at least its dimension: the untiled program stays as it is).
    A ``fuse { }`` region of two consecutive products (:func:`.tilefuse.product_pair`) is compiled three ways
    (wavefront, recompute, materialise) and the cost model's fastest is kept (:func:`_compile_region`), or
    ``fusion`` when given; ``regions`` False (``--fuse none`` or ``full``): the regions are not what is fused,
    nothing is chosen.
    """
    from .lanes import parse_parallel
    from .tilefuse import product_pair
    ir = src.to_ir()
    dims, by_mode, by_index = dimensions(ir)
    lanes = {**getattr(src, "parallel_factors", {}), **parse_parallel(parallel)}
    if not tiles and onchip_bits is None:
        return None
    # onchip_bits and fusion are checked where they are given (fuseflow.compiler.options.CompileOptions)
    pair = product_pair(ir, by_mode) if regions else None
    if pair is not None:
        return _compile_region(src, ir, pair, compile_fn, tiles, onchip_bits, lanes, inputs, contract, where,
                               fusion)
    if fusion is not None:
        raise ProgramError("--tile-fusion", "the program has no fuse region of two products (T = X W; G = A T, A "
                                            "square and sparse) to tile-fuse" + ("" if regions else
                                                                                 " (only --fuse regions has one)"))
    return _compile_sizes(src, compile_fn, tiles, onchip_bits, lanes, inputs, contract, where, min_tiles=min_tiles)


def _compile_sizes(src, compile_fn, tiles, onchip_bits, lanes, inputs, contract, where, equal=None,
                   min_tiles=None):
    """The tiled CompileResult of ``src`` at manual or automatic sizes (None: nothing to split). ``equal``:
    ``(rows, window)`` dimensions that must get the same tile size (a wavefront plan): automatic sizes take the
    window's (the rows' when the window is whole) for both and halve it until the compiled tile fits."""
    ir = src.to_ir()
    dims, by_mode, by_index = dimensions(ir)
    if tiles:
        choice = TileChoice(manual_sizes(tiles, dims, ir, lanes, where), "manual", onchip_bits)
        if equal and choice.sizes.get(equal[0]) != choice.sizes.get(equal[1]):
            raise ProgramError(where, f"a wavefront needs the rows ({equal[0]}) and the window ({equal[1]}) tiled "
                                      f"alike")
    else:
        choice = auto_sizes(ir, dims, by_mode, by_index, onchip_bits, lanes, inputs, min_tiles=min_tiles)
    if not choice.sizes:
        return None
    if equal:
        r, w = equal
        size = choice.sizes.get(w) or choice.sizes.get(r)
        if size is None:
            raise ProgramError(where, "a wavefront needs A's rows or columns split")
        for _ in range(16):
            choice.sizes.update({r: min(size, dims[r].extent), w: min(size, dims[w].extent)})
            result = _tiled(src, ir, dims, by_mode, by_index, choice, compile_fn, inputs, contract, onchip_bits,
                            where)
            if tiles or result.program.tiling["tile_bits"] <= onchip_bits or size <= ROW_FLOOR // 4:
                if not tiles:
                    choice.notes.append(f"wavefront: the rows and the window tiled alike ({size})")
                return result
            size //= 2
        return result
    if tiles or onchip_bits is None:
        return _tiled(src, ir, dims, by_mode, by_index, choice, compile_fn, inputs, contract, onchip_bits, where)
    target, exclude = onchip_bits, set()
    for _ in range(8):                         # the estimate is below the compiled capacities: shrink and retry
        try:
            result = _tiled(src, ir, dims, by_mode, by_index, choice, compile_fn, inputs, contract, onchip_bits,
                            where)
        except _MergeError as exc:             # a fused kernel reduces it inside a function: keep it whole
            exclude |= set(exc.dims)
            choice = auto_sizes(ir, dims, by_mode, by_index, target, lanes, inputs, exclude, min_tiles)
            choice.notes.append(f"{', '.join(sorted(exc.dims))} kept whole: a fused kernel's partials over it do "
                                f"not merge by adding")
            continue
        if result is None or result.program.tiling["tile_bits"] <= onchip_bits:
            return result
        target = int(target * onchip_bits / result.program.tiling["tile_bits"] * 0.95)
        choice = auto_sizes(ir, dims, by_mode, by_index, target, lanes, inputs, exclude, min_tiles)
        choice.onchip_bits = onchip_bits
        choice.notes.append(f"sized for {target} bits: the compiled tile at the first sizes was over the budget")
    return result


def _without_region(src, region):
    """A copy of ``src`` whose statements ``region`` (statement ids) are not in a fuse region (compiled apart)."""
    new = copy.deepcopy(src)
    for i in region:
        new._stmts[i].region = None
    return new


def _compile_region(src, ir, pair, compile_fn, tiles, onchip_bits, lanes, inputs, contract, where, fusion=None):
    """A tiled fuse region of two products: compiled as ``recompute`` (the fused kernel), ``materialise`` (two
    kernels) and ``wavefront`` (two kernels tiled alike, run in two wavefronts); the plan of the one the cost model
    (:func:`.tilefuse.estimates`) finds fastest, with the three estimates and the reason in ``tiling["fusion"]``
    (and, for a wavefront, ``tiling["wavefront"]``, which the tiled simulator runs). ``fusion``: that strategy
    instead of the cheapest (the estimates are still reported)."""
    from .tilefuse import estimates, why
    plain = _without_region(src, pair["region"])
    results, failed = {}, {}
    for strategy, source, equal in (("wavefront", plain, (pair["rows"], pair["window"])),
                                    ("recompute", src, None), ("materialise", plain, None)):
        try:
            results[strategy] = _compile_sizes(source, compile_fn, tiles, onchip_bits, lanes, inputs, contract,
                                               where, equal)
        except ProgramError as exc:
            failed[strategy] = exc
    if "recompute" in failed and not results:
        raise failed["recompute"]
    if any(r is None for r in results.values()) or not results:
        return results.get("recompute")           # it fits untiled: nothing to split
    densities = {t.name: t.density for t in ir.tensors.values() if t.role == "input"}
    sizes_of = {s: {d: v["size"] for d, v in r.program.tiling["dims"].items()} for s, r in results.items()}
    plan_contract = next(iter(results.values())).program.tiling["contract"]     # the contract the plans run
    est = estimates(pair, ir, sizes_of, inputs, densities, plan_contract)
    chosen = min(results, key=lambda s: est[s])
    reason = why(chosen, est)
    if fusion is not None:
        if fusion not in results:
            raise ProgramError("--tile-fusion", f"{fusion} is not possible here: {failed[fusion].why}")
        reason = f"{fusion} as asked; the cost model would choose {chosen} ({reason})"
        chosen = fusion
    result = results[chosen]
    t = result.program.tiling
    t["fusion"] = {"region": [pair["producer"], pair["consumer"]], "chosen": chosen,
                   "estimates": {s: est[s] for s in results},
                   "why": reason + "".join(f"; {s} not possible: {e.why}" for s, e in failed.items()),
                   "from": "data" if inputs and pair["sparse"] in inputs else "declared densities"}
    if chosen == "wavefront":
        stores = {o: k["name"] for k in t["kernels"] for o in k["stores"]}
        t["wavefront"] = {"producer": stores[pair["tensor"]], "consumer": stores[pair["consumer"]],
                          "tensor": pair["tensor"], "sparse": pair["sparse"], "rows": pair["rows"],
                          "window": pair["window"], "lag": int(est.get("lag", 0)), "units": 2}
        if "fused_nnz_ratio" in est:
            t["wavefront"]["fused_nnz_ratio"] = est["fused_nnz_ratio"]
        if inputs and pair["sparse"] in inputs:
            from ..samml.wavefront import wavefront_split
            *_, ws = wavefront_split(inputs[pair["sparse"]], t["dims"][pair["window"]]["size"],
                                     t["wavefront"]["lag"])
            t["wavefront"]["fused_ratio"] = ws["fused_ratio"]
    result.program.validate()
    return result


def _tiled(src, ir, dims, by_mode, by_index, choice, compile_fn, inputs, contract, onchip_bits, where):
    """The tiled CompileResult of one choice of sizes (see :func:`compile_tiled`)."""
    if not choice.sizes:
        return None
    for d in dims.values():
        d.size = None
    for d, s in choice.sizes.items():
        dims[d].size = s
    first = compile_fn(_retiled_source(src, ir, by_mode, choice.sizes, {}))
    acc = {}
    kinfo = []
    for k in first.program.kernels:
        reads, writes = kernel_tensors(k)
        grid = []
        for t in writes + reads:
            for m in range(len(first.program.tensors[t].shape)):
                d = by_mode.get((t, m))
                if d in choice.sizes and d not in grid:
                    grid.append(d)
        for out in writes:
            out_dims = {by_mode.get((out, m)) for m in range(len(first.program.tensors[out].shape))}
            split_red = [d for d in grid if d not in out_dims and dims[d].tiles > 1]
            if split_red:
                _check_sum(ir, out, split_red, by_index, where)
                name, n = f"{out}_acc", 2
                while name in ir.tensors:
                    name, n = f"{out}_acc{n}", n + 1
                acc[out] = name
        kinfo.append((k.name, grid, reads, writes))
    result = compile_fn(_retiled_source(src, ir, by_mode, choice.sizes, acc)) if acc else first
    if [k.name for k in result.program.kernels] != [k for k, *_ in kinfo]:
        raise ProgramError(where, "the accumulator terms changed the kernels; tile a dimension no sum runs over")
    prog = result.program
    prog.expr = first.program.expr            # the program's meaning: the untiled statements
    for name, data in (inputs or {}).items():  # capacities: the largest tile of the data (the others fit)
        decl = prog.tensors.get(name)
        if decl is None or decl.role != "input":
            continue
        sizes_of = [choice.sizes.get(by_mode.get((name, m))) for m in range(decl.order)]
        cap = data_capacity(decl, data, sizes_of)
        if cap is not None:
            decl.capacity = cap
    buffers = DEFAULT_BUFFERS if contract is None else contract.get("buffers", DEFAULT_BUFFERS)
    plan_kernels = []
    for name, grid, reads, writes in kinfo:
        out_dims = []
        for out in writes:
            for m in range(len(prog.tensors[out].shape)):
                d = by_mode.get((out, m))
                if d in grid and d not in out_dims:
                    out_dims.append(d)
        order = out_dims + [d for d in grid if d not in out_dims]
        kacc = {o: acc[o] for o in writes if o in acc}
        loads = [t for t in reads if t not in kacc.values()]
        resident = [t for t in loads if not any(by_mode.get((t, m)) in grid and dims[by_mode[(t, m)]].tiles > 1
                                                for m in range(len(prog.tensors[t].shape)))]
        ann = set()
        for i, out in enumerate(writes):
            st = ir.producer(out)
            a = annihilators(st.rhs, ir) if st is not None else set()
            ann = a if i == 0 else ann & a
        skip = [t for t in loads if t in ann and "compressed" in prog.tensors[t].levels and t not in resident]
        plan_kernels.append({"name": name, "grid": order, "loads": loads, "stores": list(writes),
                             "resident": resident, "acc": kacc, "skip_empty": skip})
    tensors = {}
    for t in ir.tensors.values():
        if t.name not in prog.tensors:
            continue                   # an intermediate fused inside a kernel
        tensors[t.name] = {"shape": [int(s) for s in t.shape],
                           "dims": [by_mode.get((t.name, m)) if by_mode.get((t.name, m)) in choice.sizes else None
                                    for m in range(t.order)]}
    for out, a in acc.items():
        tensors[a] = {**copy.deepcopy(tensors[out]), "acc_of": out}
    contract_params = {**DMA.defaults(), "buffers": buffers, **(contract or {})}
    bits = program_tile_bits(prog, plan_kernels, buffers)
    notes = list(choice.notes)
    if onchip_bits is not None and bits > onchip_bits:
        notes.append(f"the compiled tile holds {bits} bits, over the budget of {onchip_bits} (declared capacities "
                     f"are larger than the estimate; tiles split again at run time if their data does not fit)")
    prog.tiling = {
        "dims": {d: {"size": s, "extent": dims[d].extent, "tiles": dims[d].tiles, "indices": dims[d].indices}
                 for d, s in choice.sizes.items()},
        "tensors": tensors,
        "kernels": plan_kernels,
        "merge": "on-chip",
        "contract": contract_params,
        "chosen": choice.chosen,
        "onchip_bits": onchip_bits,
        "tile_bits": bits,
        "notes": notes,
    }
    prog.validate()
    result.reports["tiling"] = choice
    return result


def data_capacity(decl, data, tile_of_mode) -> list | None:
    """The capacity a 2-D sparse input needs for its largest tile: per level the most entries of one tile, then
    values. ``tile_of_mode``: the tile size per mode (None: not split). None for data that is not SciPy sparse."""
    import numpy as np
    if not hasattr(data, "tocoo") or decl.order != 2 or decl.block:
        return None
    coo = data.tocoo()
    coo.sum_duplicates()
    coords = [coo.row.astype(np.int64), coo.col.astype(np.int64)]
    key = np.zeros(len(coo.data), dtype=np.int64)
    for m, size in enumerate(tile_of_mode):
        if size:
            key = key * (int(coo.shape[m]) // size + 2) + coords[m] // size
    caps, parent = [], 1
    for lv, fmt in enumerate(decl.levels):
        dim = int(decl.shape[decl.mode_order[lv]])
        if fmt == "dense":
            parent *= dim
        else:
            if lv == len(decl.levels) - 1:
                per = np.unique(key, return_counts=True)[1] if key.size else np.zeros(1, np.int64)
            else:
                prefix = np.stack([key] + [coords[decl.mode_order[k]] for k in range(lv + 1)], axis=1)
                uniq = np.unique(prefix, axis=0) if key.size else np.zeros((0, 1), np.int64)
                per = np.unique(uniq[:, 0], return_counts=True)[1] if len(uniq) else np.zeros(1, np.int64)
            parent = max(1, min(int(per.max()), parent * dim))
        caps.append(parent)
    return caps + [parent]


def program_tile_bits(prog, plan_kernels, buffers: int) -> int:
    """On-chip bits of one tile of the compiled program: every tensor memory at its declared capacity (seg and
    crd arrays at ``crd_width`` bits, values at the value width), inputs that change between tiles ``buffers``
    times."""
    crd = prog.config["crd_width"]
    val = prog.config["value"].get("width", 32)
    banked = banked_inputs(plan_kernels, buffers)
    total = 0
    for t in prog.tensors.values():
        cap = t.capacity or t.worst_case_capacity()
        bits, parent = 0, 1
        for lv, fmt in enumerate(t.levels):
            if fmt == "compressed":
                bits += (parent + 1) * crd + cap[lv] * crd
            parent = cap[lv]
        bits += cap[-1] * val * (math.prod(t.block) if t.block else 1)
        total += bits * (buffers if t.name in banked else 1)
    return total


def render_tiles(prog) -> str:
    """The plan as text (``--list-tiles`` and ``--dump-table``)."""
    t = prog.tiling
    if t is None:
        return "tiles: none (the program is not tiled)"
    c = t["contract"]
    budget = f"a budget of {t['onchip_bits']}" if t.get("onchip_bits") is not None else "no budget given"
    lines = [f"tiles ({t['chosen']}): " + ", ".join(
        f"{d} {v['size']} of {v['extent']} ({v['tiles']} tiles; indices {','.join(v.get('indices', []))})"
        for d, v in t["dims"].items()),
        f"  on-chip bits of one tile: {t['tile_bits']} ({budget}); inputs that change between tiles are "
        f"counted {c['buffers']}x (buffers {c['buffers']})",
        f"  DMA contract: word_bytes {c['word_bytes']}, latency {c['latency']}, burst {c['burst']}, "
        f"outstanding {c['outstanding']}, buffers {c['buffers']}, pack {c.get('pack', 1)}"]
    for k in t["kernels"]:
        count = math.prod(t["dims"][d]["tiles"] for d in k["grid"])
        lines.append(f"  kernel {k['name']}: grid {' x '.join(k['grid']) or '-'} ({count} tiles, outer to inner); "
                     f"loads {', '.join(k['loads']) or 'none'}"
                     + (f" (resident, loaded once: {', '.join(k['resident'])})" if k["resident"] else "")
                     + f"; stores {', '.join(k['stores'])}")
        if k["skip_empty"]:
            lines.append(f"    a tile where {' or '.join(k['skip_empty'])} is empty is skipped (costs 0 cycles)")
        for out, a in k["acc"].items():
            lines.append(f"    partials of {out} over {', '.join(d for d in k['grid'] if d not in _out_dims(t, out))}"
                         f" merge {t['merge']}: {a} is {out}'s output memory, kept between the tiles of one "
                         f"partition; stored after the partition's last tile")
    fu = t.get("fusion")
    if fu is not None:
        lines.append(f"  fuse region {', '.join(fu['region'])}: {fu['chosen']} (cost model, from the "
                     f"{fu.get('from', 'data')}): {fu['why']}")
    wf = t.get("wavefront")
    if wf is not None:
        ratio = (f"fused ratio {wf['fused_ratio']:.3f} of {wf['sparse']}'s rows (seed 003's), "
                 if "fused_ratio" in wf else "")
        share = (f"{wf['fused_nnz_ratio']:.3f} of its nonzeros read from the tile on chip"
                 if "fused_nnz_ratio" in wf else "")
        lag = wf.get("lag", 0)
        lines.append(f"    wavefront 1: per row tile k of {wf['tensor']}, kernel {wf['producer']}, then kernel "
                     f"{wf['consumer']} on row tile k{f' - {lag}' if lag else ''} of {wf['sparse']} (lag {lag}), "
                     f"blocks up to column tile k, block k reading {wf['tensor']}'s tile on chip (the others load "
                     f"{wf['tensor']}'s windows, stored once); wavefront 2: the blocks right of that, loading "
                     f"{wf['tensor']}'s windows"
                     + (f"; {ratio}{share}" if ratio or share else "")
                     + ("; both kernels on chip, running side by side" if wf.get("units", 2) == 2 else
                        "; one kernel at a time"))
    for n in t.get("notes", []):
        lines.append(f"  note: {n}")
    return "\n".join(lines)


def _out_dims(t, out):
    return {d for d in t["tensors"][out]["dims"] if d is not None}
