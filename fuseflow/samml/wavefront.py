"""The two wavefronts of a tile-fused ``T = X W; G = A T`` region: which nonzeros of ``A`` each runs on.

One definition for the compiler's cost model (:mod:`fuseflow.compiler.tilefuse`) and the tiled simulator
(:mod:`fuseflow.sim.tiled`), with the timing of the two kernels' tiles (:func:`unit_schedule`); docs/tiling.md,
"Tile fusion".
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from .offchip import OVERLAP_OVERHEAD, RUN_OVERHEAD, TILE_OVERHEAD, OffchipContract

__all__ = ["wavefront_split", "Visit", "wavefront_order", "UnitStep", "unit_schedule"]


def wavefront_split(A, tile: int, lag: int = 0):
    """The dependence of ``G = A T`` on the row tiles of ``T`` (``A`` square, SciPy sparse; row tile ``k`` of both
    is rows ``k*tile`` to ``(k+1)*tile``) in a wavefront plan of lag ``lag`` (docs/tiling.md, "Tile fusion"): row
    tile ``m`` of ``G`` runs in wavefront 1 right after ``T``'s row tile ``m + lag`` (the last one for the last
    tiles), on the blocks ``(m, w)`` of ``A`` with ``w <= m + lag``; its block ``(m, min(m + lag, last))`` reads
    ``T``'s tile on chip (fused). The other blocks are wavefront 2's. Returns ``(wave1, wave2, stats)``: the two
    parts of A and the counts: ``rows`` (non-empty rows of A), ``fused_rows`` (rows whose every nonzero reads
    ``T``'s tile on chip: seed 003's fused iterations; with lag 0, the rows whose dependence stays inside their own
    tile), ``wave1_rows`` (rows complete after wavefront 1), ``nnz``, ``fused_nnz``, ``wave1_nnz`` and the ratios
    ``fused_ratio`` (rows, seed 003's), ``fused_nnz_ratio``, ``wave1_ratio`` and ``wave1_nnz_ratio``."""
    coo = sp.coo_matrix(A)
    coo.sum_duplicates()
    n = coo.shape[0]
    last = max(-(-n // tile) - 1, 0)
    br, bc = coo.row // tile, coo.col // tile
    onchip_col = np.minimum(br + lag, last)
    first = bc <= onchip_col
    fused = bc == onchip_col
    nonempty = np.zeros(n, bool)
    nonempty[coo.row] = True

    def complete(keep):
        out = np.zeros(n, bool)
        out[coo.row[~keep]] = True
        return int((nonempty & ~out).sum())
    rows = int(nonempty.sum())
    nnz = int(coo.nnz)

    def part(keep):
        return sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)

    def ratio(a, b):
        return round(a / b, 4) if b else 1.0
    stats = {"tile": tile, "lag": lag, "rows": rows, "fused_rows": complete(fused), "wave1_rows": complete(first),
             "nnz": nnz, "fused_nnz": int(fused.sum()), "wave1_nnz": int(first.sum())}
    stats.update({"fused_ratio": ratio(stats["fused_rows"], rows), "fused_nnz_ratio": ratio(stats["fused_nnz"], nnz),
                  "wave1_ratio": ratio(stats["wave1_rows"], rows), "wave1_nnz_ratio": ratio(stats["wave1_nnz"], nnz)})
    return part(first), part(~first), stats


@dataclass
class Visit:
    """One tile run of a wavefront plan, in order (:func:`wavefront_order`): the producer's tile ``item`` of
    ``T``'s row tile ``row`` (``unit`` 0), or the consumer's block ``(row, item)`` of ``A`` (``unit`` 1) in
    wavefront ``wave``. ``onchip``: the block reads ``T``'s tile from the producer's memory (no load);
    ``loads_t``: it loads ``T``'s window ``item``; ``store``: the row tile is stored after this run (``T``'s,
    because some block loads it; ``G``'s, its last block); ``rmw``: ``G``'s row tile is read back before the run.
    ``run_after``/``load_after``: the visits (indices) whose run/store this one waits for (:class:`UnitStep`)."""
    unit: int
    row: int
    item: Any
    wave: int = 1
    onchip: bool = False
    loads_t: bool = False
    store: bool = False
    rmw: bool = False
    run_after: tuple = ()
    load_after: tuple = ()


def wavefront_order(ntiles: int, lag: int, producer: dict, blocks1: dict, blocks2: dict) -> list[Visit]:
    """The tile runs of a wavefront plan in order (docs/tiling.md, "Tile fusion"), one definition for the tiled
    simulator and the cost model. ``producer``: per row tile ``k`` of ``T``, its non-empty producer tiles (any
    objects, in order); ``blocks1``/``blocks2``: per row tile ``m`` of ``G``, the column tiles ``w`` of ``A``'s
    non-empty blocks in wavefront 1 (``w <= m + lag``) and 2 (the rest), ascending (:func:`wavefront_split`).

    Wavefront 1 visits ``k`` in order: the producer's tiles of row tile ``k``, then every row tile ``m`` of ``G``
    with ``m + lag <= k`` (after the last ``k``: all the rest), its blocks in order; the block with ``w`` equal to
    ``min(m + lag, last)`` reads ``T``'s tile on chip when the producer ran on that row tile. ``T``'s row tile is
    stored when some block loads it. Wavefront 2 runs the blocks right of ``m + lag``, reading back ``G``'s row
    tile when wavefront 1 stored it. Dependences: an on-chip block runs after the producer's last tile of that row
    tile, and the producer's next row tile (which overwrites that memory) after the block; a block that loads
    ``T``'s window waits for its store; a read-back for ``G``'s store."""
    last = max(ntiles - 1, 0)
    loaded = {w for m, ws in blocks1.items() for w in ws if w != min(m + lag, last)}
    loaded |= {w for ws in blocks2.values() for w in ws}
    out: list[Visit] = []
    t_store: dict[int, int] = {}
    g_store: dict[int, int] = {}
    onchip_read = None
    m = 0
    for k in range(ntiles):
        tiles = producer.get(k, [])
        last_p = None
        for j, item in enumerate(tiles):
            after = (onchip_read,) if j == 0 and onchip_read is not None else ()
            out.append(Visit(0, k, item, run_after=after))
            last_p = len(out) - 1
        if last_p is not None and k in loaded:
            out[last_p].store = True
            t_store[k] = last_p
        while m < ntiles and (m + lag <= k or k == last):
            ws = blocks1.get(m, [])
            for i, w in enumerate(ws):
                on = w == k and last_p is not None
                out.append(Visit(1, m, w, onchip=on, loads_t=not on, store=i == len(ws) - 1,
                                 run_after=(last_p,) if on else (),
                                 load_after=(t_store[w],) if not on and w in t_store else ()))
                if on:
                    onchip_read = len(out) - 1
            if ws:
                g_store[m] = len(out) - 1
            m += 1
    for m in range(ntiles):
        ws = blocks2.get(m, [])
        for i, w in enumerate(ws):
            rmw = i == 0 and m in g_store
            out.append(Visit(1, m, w, wave=2, loads_t=True, store=i == len(ws) - 1, rmw=rmw,
                             load_after=((t_store[w],) if w in t_store else ()) + ((g_store[m],) if rmw else ())))
    return out


@dataclass
class UnitStep:
    """One tile of a wavefront plan for :func:`unit_schedule`: the kernel ``unit`` that runs it, its ``load``
    (with its tile record), ``run`` and ``store`` cycles (without the sequencer's), ``run_after`` (steps whose
    runs end before this run starts: it reads their output on chip, or it overwrites the tile they read on chip)
    and ``load_after`` (steps whose stores end before this tile's loads start: it loads what they stored)."""
    unit: int
    load: int
    run: int
    store: int
    run_after: tuple = ()
    load_after: tuple = ()


class _Port:
    """The one off-chip port: busy stretches, each transfer placed at the first idle stretch that holds it."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def reserve(self, ready: int, cycles: int) -> int:
        """Place a transfer of ``cycles`` ready at ``ready``; returns its end."""
        if cycles <= 0:
            return ready
        i = bisect.bisect_right(self.ends, ready)     # the first stretch ending after ready
        start = ready
        while i < len(self.starts) and self.starts[i] < start + cycles:
            start = max(start, self.ends[i])
            i += 1
        self.starts.insert(i, start)
        self.ends.insert(i, start + cycles)
        return start + cycles


def unit_schedule(steps: list[UnitStep], contract: OffchipContract) -> tuple[int, list[tuple[int, int]]]:
    """The cycles of a wavefront plan whose two kernels are both on the chip, each its own unit (their memories
    are all in the plan's ``tile_bits``), sharing the off-chip port; returns ``(total, [(run start, run end)])``.

    Each unit runs its steps in order under the contract's ``buffers`` rule of
    :func:`~fuseflow.samml.offchip.tiled_cycles` (1: load, run, store in turn, :data:`TILE_OVERHEAD` after each
    tile; 2: :data:`OVERLAP_OVERHEAD` on each tile, whose loads start once the unit's previous run has started and
    whose run starts once its loads and the previous tile's store are done), and waits for
    ``run_after``/``load_after``; plus :data:`RUN_OVERHEAD`. The port moves one transfer at a time: the
    steps are placed in order, each transfer at the first idle stretch of the port, after it is ready, long enough
    to hold it (the schedule is static: every cycle count is known when the plan is made). One unit alone gives
    :func:`~fuseflow.samml.offchip.tiled_cycles` exactly."""
    if contract.buffers != 1:                 # the sequencer's cycles of an overlapped tile
        dl, dr, ds = OVERLAP_OVERHEAD
        steps = [UnitStep(s.unit, s.load + dl, s.run + dr, s.store + ds, s.run_after, s.load_after) for s in steps]
    port = _Port()
    runs: list[tuple[int, int]] = []
    store_end: list[int] = []
    state: dict[int, dict] = {}               # unit -> its previous run and the step whose store is pending

    def place_store(u: dict) -> int:
        """Place the unit's pending store (buffers 2); returns its end (the previous run's end if none)."""
        j = u["pending"]
        if j is None:
            return u["run_end"]
        store_end[j] = port.reserve(u["run_end"], steps[j].store)
        u["pending"] = None
        return store_end[j]

    for i, s in enumerate(steps):
        u = state.setdefault(s.unit, {"free": 0, "run_start": 0, "run_end": 0, "pending": None})
        for j in s.load_after:                # a store this tile loads is placed first (buffers 2)
            if state[steps[j].unit]["pending"] == j:
                place_store(state[steps[j].unit])
        if contract.buffers == 1:
            ready = max([store_end[j] for j in s.load_after], default=0)
            load_end = port.reserve(max(u["free"], ready), s.load)
            start = max([load_end] + [runs[j][1] for j in s.run_after])
            runs.append((start, start + s.run))
            store_end.append(port.reserve(start + s.run, s.store))
            u["free"] = store_end[-1] + TILE_OVERHEAD
            continue
        ready = max([store_end[j] for j in s.load_after], default=0)
        load_end = port.reserve(max(u["run_start"], ready), s.load)
        prev_store = place_store(u)           # the previous tile's store follows this tile's loads
        start = max([load_end, prev_store] + [runs[j][1] for j in s.run_after])
        runs.append((start, start + s.run))
        store_end.append(start + s.run)       # its store is placed after the unit's next loads
        u.update(run_start=start, run_end=start + s.run, pending=i)
    for u in state.values():
        if contract.buffers != 1:
            place_store(u)
    if not steps:
        return RUN_OVERHEAD, runs
    if contract.buffers == 1:
        return max(u["free"] for u in state.values()) + RUN_OVERHEAD, runs
    return max(store_end) + RUN_OVERHEAD, runs
