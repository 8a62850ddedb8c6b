"""Tile fusion of two consecutive products (seed 003): the region's pair, and the cost model that chooses between
fusing it in two wavefronts, recomputing the first product inside the second, and materialising the first product
(docs/tiling.md, "Tile fusion").

The pair is ``T(i,k) = X(i,j) * W(j,k)`` then ``G(i,k) = A(i,l) * T(l,k)`` in one ``fuse { }`` region, with ``A`` a
square sparse input and ``T`` read by ``G`` only (the GCN layer: GeMM-SpMM when ``X`` is dense, SpMM-SpMM when it
is sparse). Tiled, the region runs one of three ways:

- ``materialise``: two kernels, tiled independently; ``G``'s tiles load ``T``'s windows from off-chip;
- ``recompute``: one kernel (the fused dataflow): every nonzero of ``A`` recomputes its row of ``X W``;
- ``wavefront``: two kernels tiled alike (``G``'s row tile is ``T``'s row tile), run in seed 003's two wavefronts
  (:func:`fuseflow.samml.wavefront.wavefront_split`): the first computes ``T``'s row tile ``k`` and, with it on chip,
  ``A``'s diagonal block ``(k, k)``; the second the off-diagonal blocks, reading ``T`` from off-chip.

The cost model estimates each one's cycles tile by tile: a tile's loads are the contract's read cycles of its
transfers (one memory entry per beat: a sparse tile's ``seg``, ``first``, ``crd`` and values, a dense window's
entries), its run ``h`` cycles (the product's width) per output row of the tile (the accumulator is dense) plus
``h`` per product term, its store the write cycles of the output tile; the sequences are totalled as the tiled
simulator totals them (:func:`fuseflow.samml.offchip.tiled_cycles`, double buffering). Recompute's tiles are
costed as the larger of loads and run. For the wavefront, every lag of :func:`lags` is costed and the cheapest
kept. The per-tile counts come from the data
when given (``tile_inputs`` / ``--inputs``), else from the declared densities (uniform nonzeros: a fraction
``tile / n`` of ``A``'s nonzeros lies in the diagonal blocks).
"""

from __future__ import annotations

import numpy as np

from .defaults import TILE_FUSION

__all__ = ["product_pair", "estimates", "STRATEGIES"]

STRATEGIES = TILE_FUSION

#: the density assumed for a sparse input declared without one
DEFAULT_DENSITY = 0.05


def product_pair(ir, by_mode) -> dict | None:
    """The region's product pair (module docstring) as ``{"producer", "consumer", "tensor", "sparse", "x", "w",
    "rows", "window", "inner", "region"}`` (``rows``/``window``/``inner``: the dimensions of ``A``'s rows, of its
    columns (``T``'s rows) and of the first product's sum), or None."""
    for region in ir.regions:
        ids = set(region)
        for st in ir.stmts:
            if st.id not in ids or len(st.idx) != 2:
                continue
            leaves = list(st.rhs.leaves())
            if len(leaves) != 2:
                continue
            for a, b in (leaves, leaves[::-1]):
                A = ir.tensors.get(a.tensor)
                prod = ir.producer(b.tensor)
                if A is None or A.role != "input" or A.order != 2 or not A.levels or "compressed" not in A.levels:
                    continue
                if prod is None or prod.id not in ids or prod.id >= st.id or len(prod.idx) != 2:
                    continue
                if tuple(a.idx) != (st.idx[0], b.idx[0]) or tuple(b.idx) != (a.idx[1], st.idx[1]):
                    continue
                if A.shape[0] != A.shape[1] or not _sum_of_product(st.rhs):
                    continue
                if ir.tensors[b.tensor].role == "output" or any(
                        l.tensor == b.tensor for s in ir.stmts if s.id != st.id for l in s.rhs.leaves()):
                    continue
                pl = list(prod.rhs.leaves())
                if len(pl) != 2 or not _sum_of_product(prod.rhs):
                    continue
                xl = next((l for l in pl if tuple(l.idx)[0] == prod.idx[0]), None)
                wl = next((l for l in pl if l is not xl), None)
                if xl is None or wl is None or tuple(wl.idx)[-1] != prod.idx[1] or xl.idx[1] != wl.idx[0]:
                    continue
                if any(ir.tensors.get(l.tensor) is None or ir.tensors[l.tensor].role != "input" for l in pl):
                    continue
                return {"producer": prod.lhs, "consumer": st.lhs, "tensor": b.tensor, "sparse": a.tensor,
                        "x": xl.tensor, "w": wl.tensor, "rows": by_mode[(a.tensor, 0)],
                        "window": by_mode[(a.tensor, 1)], "inner": by_mode[(xl.tensor, 1)],
                        "region": sorted(ids)}
    return None


def _sum_of_product(node) -> bool:
    """``sum[..](a * b)`` of two tensors."""
    from .ir import Bin, Leaf, Red
    return (isinstance(node, Red) and node.op == "sum" and isinstance(node.body, Bin) and node.body.op == "*"
            and isinstance(node.body.a, Leaf) and isinstance(node.body.b, Leaf))


class _Blocks:
    """Nonzeros of a 2-D tensor per (row tile, column tile) block: from data (SciPy sparse or dense) or expected
    from a density (uniform)."""

    def __init__(self, shape, data=None, density=None):
        self.shape = tuple(int(s) for s in shape)
        self.density = density
        self.row = self.col = None
        if data is not None:
            import scipy.sparse as sp
            coo = sp.coo_matrix(data) if sp.issparse(data) else sp.coo_matrix(np.asarray(data))
            coo.sum_duplicates()
            keep = coo.data != 0
            self.row, self.col = coo.row[keep].astype(np.int64), coo.col[keep].astype(np.int64)

    def blocks(self, r, c):
        """``(block row, block col, nonzeros, non-empty rows)`` arrays of the non-empty blocks (expected ones: all
        blocks with their expected counts, weighted by the chance they are non-empty)."""
        nr, nc = -(-self.shape[0] // r), -(-self.shape[1] // c)
        if self.row is not None:
            key = (self.row // r) * nc + self.col // c
            k, n = np.unique(key, return_counts=True)
            rows_of = np.unique(key * self.shape[0] + self.row) // self.shape[0]     # (block, row) pairs
            ne = np.searchsorted(rows_of, k, side="right") - np.searchsorted(rows_of, k, side="left")
            return k // nc, k % nc, n.astype(np.float64), ne.astype(np.float64)
        d = self.density if self.density is not None else DEFAULT_DENSITY
        br, bc = np.meshgrid(np.arange(nr), np.arange(nc), indexing="ij")
        hr = np.minimum(r, self.shape[0] - br * r)
        hc = np.minimum(c, self.shape[1] - bc * c)
        ne = hr * (1 - (1 - d) ** hc)
        return br.ravel(), bc.ravel(), (d * hr * hc).ravel().astype(np.float64), ne.ravel().astype(np.float64)

    def nonempty(self, r, c) -> float:
        br, _, n, _ = self.blocks(r, c)
        if self.row is not None:
            return float(len(n))
        d = self.density if self.density is not None else DEFAULT_DENSITY
        return float(np.sum(1 - (1 - d) ** np.maximum(n / max(d, 1e-12), 1)))

    def row_nnz(self, c):
        """Nonzeros per row and column tile (rows x column tiles)."""
        nc = -(-self.shape[1] // c)
        out = np.zeros((self.shape[0], nc))
        if self.row is not None:
            np.add.at(out, (self.row, self.col // c), 1)
        else:
            d = self.density if self.density is not None else DEFAULT_DENSITY
            out[:] = d * np.minimum(c, self.shape[1] - np.arange(nc) * c)
        return out


#: the bits of an entry the estimates pack into beats: the default fixed-point value width (index arrays are at
#: most as wide on the graphs tiled here), :func:`fuseflow.samml.storage.memory_width`
ENTRY_BITS = 32


def _read(n, contract):
    """Cycles to read ``n`` entries (packed into beats as the contract says)."""
    from ..samml.offchip import beats, read_cycles
    return read_cycles(0, beats(int(round(n)), ENTRY_BITS, contract), contract) if n >= 0.5 else 0


def _write(n, contract):
    """Cycles to write ``n`` entries (packed into beats as the contract says)."""
    from ..samml.offchip import beats, write_cycles
    return write_cycles(0, beats(int(round(n)), ENTRY_BITS, contract), contract) if n >= 0.5 else 0


def _sparse_load(rows, nnz, contract):
    """A CSR tile's transfers: seg, first, crd, values."""
    return (_read(rows + 1, contract) + _read(rows, contract) + 2 * _read(nnz, contract)) if nnz >= 0.5 else 0


#: a product tile's fixed run cycles (its pipeline filling and draining); with :func:`_run`'s per-row and
#: per-nonzero terms fitted to the simulator's runs of the GCN layer's tiles on Cora (``tests/sim/test_tilefuse.py``
#: checks the estimates against the simulator on other graphs)
RUN_FILL = 128


def _run(rows, nnz, nonempty_rows, h, acc=True):
    """A product tile's run: :data:`RUN_FILL`, ``h + 1`` cycles per nonzero (a row of ``h`` products and its
    coordinate), and, when the tile merges a dense accumulator, ``h`` per row without a nonzero (the accumulator's
    row streams through)."""
    return RUN_FILL + (h + 1) * nnz + (h * max(rows - nonempty_rows, 0) if acc else 0)


def _sequence(steps, contract) -> int:
    from ..samml.offchip import record_cycles, tiled_cycles
    rec = record_cycles(8, contract)
    return tiled_cycles([(load + rec, run, store) for load, run, store in steps], contract)


def _producer_steps(xb, win, jw, h, f, contract):
    """Per row tile of T: ``[load, run]`` of its (row tile, inner window) tiles."""
    br, bc, xn, xne = xb.blocks(win, jw)
    split = jw < f
    per = {}
    for r, c, n, ne in zip(br, bc, xn, xne):
        load = _sparse_load(win, n, contract) + (_read(jw * h, contract) if split else 0)
        per.setdefault(int(r), []).append([load, _run(win, n, ne, h, acc=split)])
    if not split and per:
        per[min(per)][0][0] += _read(f * h, contract)       # W resident: loaded once
    return per


def _wavefront_cycles(ab, prod, win, h, lag, contract) -> float:
    """The wavefront plan's cycles (:func:`fuseflow.samml.wavefront.wavefront_order`, the order the tiled simulator
    runs), its tiles timed as :func:`fuseflow.samml.wavefront.unit_schedule` (both kernels on chip, the plan's
    ``units`` 2)."""
    from ..samml.offchip import record_cycles
    from ..samml.wavefront import UnitStep, unit_schedule, wavefront_order
    nt = -(-ab.shape[0] // win)
    br, bc, an, ane = ab.blocks(win, win)
    cost, wave1, wave2 = {}, {}, {}
    for r, c, n, ne in sorted(zip(br.tolist(), bc.tolist(), an, ane)):
        cost[(r, c)] = (n, ne)
        (wave1 if c <= min(r + lag, nt - 1) else wave2).setdefault(r, []).append(c)
    order = wavefront_order(nt, lag, prod, wave1, wave2)
    tile_io, rec = _read(win * h, contract), record_cycles(8, contract)
    steps = []
    for v in order:
        if v.unit == 0:
            load, run = v.item
        else:
            n, ne = cost[(v.row, v.item)]
            load = _sparse_load(win, n, contract) + tile_io * (int(v.loads_t) + int(v.rmw))
            run = _run(win, n, ne, h)
        steps.append(UnitStep(v.unit, load + rec, run, _write(win * h, contract) if v.store else 0, v.run_after,
                              v.load_after))
    return unit_schedule(steps, contract)[0]


def lags(nt: int) -> list:
    """The lags the cost model tries: 0, 1, 2, 4, ... and the last (every row tile after the last of T)."""
    out, lag = [0], 1
    while lag < nt - 1:
        out.append(lag)
        lag *= 2
    return sorted(set(out + [max(nt - 1, 0)]))


def estimates(pair, ir, sizes_of: dict, inputs=None, densities=None, contract=None) -> dict:
    """{strategy: estimated cycles of the region} (module docstring) for the strategies in ``sizes_of``
    ({strategy: {dimension: tile size}}; a dimension left out is whole), with, for the wavefront, ``"lag"`` (the
    best of :func:`lags`) and ``"fused_nnz_ratio"`` (its share of A's nonzeros read from T's tile on chip).
    ``contract``: the plan's DMA parameters (its ``tiling["contract"]``; default the registry's)."""
    from ..samml.offchip import OffchipContract
    from ..samml.registry import DMA
    contract = OffchipContract(**{**DMA.defaults(), **(contract or {})})
    inputs, densities = inputs or {}, densities or {}
    A, X, W = (ir.tensors[pair[k]] for k in ("sparse", "x", "w"))
    h = int(W.shape[1])
    ab = _Blocks(A.shape, inputs.get(A.name), densities.get(A.name, A.density))
    xsparse = bool(X.levels and "compressed" in X.levels)
    xb = _Blocks(X.shape, inputs.get(X.name) if xsparse else None,
                 densities.get(X.name, X.density) if xsparse else 1.0)
    n, f = int(A.shape[0]), int(X.shape[1])
    out = {}
    for strategy, sizes in sizes_of.items():
        rows = min(sizes.get(pair["rows"], n), n)
        win = min(sizes.get(pair["window"], n), n)
        jw = min(sizes.get(pair["inner"], f), f)
        if strategy == "recompute":
            # per (row tile, window, inner window): A's block, X's block, W's window; the run recomputes X W's
            # row per nonzero of A
            br, bc, an, _ = ab.blocks(rows, win)
            xr = xb.row_nnz(jw)                              # X's nonzeros per row and inner window
            if ab.row is not None:
                key = (ab.row // rows) * (-(-n // win)) + ab.col // win
                order = np.argsort(key, kind="stable")
                k_sorted = key[order]
                starts = np.searchsorted(k_sorted, np.unique(k_sorted))
                work = np.add.reduceat(xr[ab.col[order]], starts, axis=0) if len(order) else np.zeros((0, 1))
            else:
                work = an[:, None] * xr.mean(axis=0)[None, :]
            xwin = np.zeros((-(-n // win), xr.shape[1]))
            np.add.at(xwin, np.arange(n) // win, xr)
            xn = xwin[bc]                                    # X's block nonzeros per A block and inner window
            wload = _read(jw * h, contract) if jw < f else 0
            steps = []
            for i in range(len(an)):
                for j in range(work.shape[1]):
                    if work[i, j] <= 0 and xn[i, j] <= 0:
                        continue
                    steps.append([_sparse_load(rows, an[i], contract) + _sparse_load(win, xn[i, j], contract)
                                  + wload, RUN_FILL + h * rows + (h + 1) * work[i, j], 0])
                if steps and (i + 1 == len(an) or br[i + 1] != br[i]):
                    steps[-1][2] += _write(rows * h, contract)
            if steps and jw >= f:
                steps[0][0] += _read(f * h, contract)
            out[strategy] = _sequence(steps, contract)
            continue
        prod = _producer_steps(xb, win, jw, h, f, contract)
        if strategy == "materialise":
            seq_t = []
            for k in sorted(prod):
                seq_t += [x + [0] for x in prod[k]]
                seq_t[-1][2] += _write(win * h, contract)
            br, bc, an, ane = ab.blocks(rows, win)
            seq_g = []
            for i, (r, c, nn, ne) in enumerate(zip(br, bc, an, ane)):
                seq_g.append([_sparse_load(rows, nn, contract) + _read(win * h, contract), _run(rows, nn, ne, h), 0])
                if i + 1 == len(br) or br[i + 1] != r:
                    seq_g[-1][2] += _write(rows * h, contract)
            out[strategy] = _sequence(seq_t, contract) + _sequence(seq_g, contract)
            continue
        nt = -(-n // win)
        best = min((_wavefront_cycles(ab, prod, win, h, lag, contract), lag) for lag in lags(nt))
        out[strategy], out["lag"] = best
        br, bc, an, _ = ab.blocks(win, win)
        onchip = bc == np.minimum(br + best[1], nt - 1)
        nnz = float(np.sum(an))
        out["fused_nnz_ratio"] = round(float(np.sum(an[onchip])) / nnz, 4) if nnz else 1.0
    return {k: (round(v) if k in STRATEGIES else v) for k, v in out.items()}


def why(chosen: str, est: dict) -> str:
    """One line: the estimates and the choice."""
    parts = ", ".join(f"{s} {est[s]:,}" for s in STRATEGIES if s in est)
    others = [est[s] for s in STRATEGIES if s in est and s != chosen]
    lead = f" ({min(others) / est[chosen]:.2f}x the next)" if others and est[chosen] else ""
    return f"estimated cycles: {parts}; {chosen} is the fastest{lead}"

