"""Simulating a tiled program (graph.json with a ``tiling`` plan; docs/tiling.md).

Each kernel runs once per non-empty tile, on the compiled engine (the Python engine when it is not built, as
everywhere): the tile's sub-tensors are cut from the full tensors in off-chip memory (SciPy slicing), padded to
the tile shape and packed; the kernel's cycles are the ordinary simulation of that tile's data, exactly. The
transfers around it follow the plan and the off-chip contract (:mod:`fuseflow.samml.offchip`):

- a tile's loads: every input of the kernel whose tile changed since the previous tile run (with ``buffers`` 2,
  every input that changes anywhere in the kernel's grid: the banks alternate); a resident input (one tile for the
  whole grid) is loaded once. One transfer per tensor memory the tile fills
  (:func:`fuseflow.samml.storage.memory_entries`: ``seg``, ``crd``, ``first`` per compressed level, ``vals``;
  :func:`~fuseflow.samml.offchip.beats` long, the entries packed at the hardware's memory widths,
  :func:`~fuseflow.samml.storage.memory_width`), each ``read_cycles`` long at its address in the image, one
  after the other, after the tile record's read (:func:`~fuseflow.samml.offchip.record_cycles`);
- the partial output of a split reduction stays in the kernel's output memory (its accumulator input) while
  consecutive tiles belong to the same output partition; a partition visited again after another one would be
  read back (read-modify-write); the output is stored (``write_cycles`` per memory, each memory's whole
  capacity, as the RTL stores it) when the partition changes and after the last tile;
- a tile where a ``skip_empty`` tensor has no entries is never visited: 0 cycles, no transfer;
- a tile whose data does not fit the declared capacities is split in two along its largest split dimension,
  recursively (each half runs as a tile of its own).

The kernel's total is :func:`~fuseflow.samml.offchip.tiled_cycles` over its tiles' (load, run, store) cycles
(:func:`~fuseflow.samml.offchip.tile_steps` at the addresses of :func:`~fuseflow.samml.offchip.layout` from
byte 0): exactly what the RTL's tile sequencer takes for the same tiles (:mod:`fuseflow.hw.tiled` builds its
off-chip image from these steps; docs/tiling.md, "On hardware"); the program's is the sum over kernels (a
tile-fused pair's two kernels run side by side: :func:`_run_wavefront`). ``memory`` maps a roofline preset onto
the contract: the DMA port gets the largest AXI width (4, 8, 16, 32 or 64 bytes) not above the preset's bytes per
cycle and the preset's latency
(hbm2: 32 bytes, 100 cycles; ddr4: 16 bytes, 80 cycles); ``onchip`` (the default) keeps the plan's contract.
"""

from __future__ import annotations

import itertools
import math
import time
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..errors import FuseFlowError, TensorError
from ..samml.graph import Kernel, Program
from ..samml.offchip import WORD_BYTES, OffchipContract, beats, layout, tile_steps, tiled_cycles
from ..samml.storage import array_depth, build_capacity, memory_entries, memory_width, tensor_memories
from ..samml.tileplan import contract_of, full_shape, kernel_tensors
from ..samml.wavefront import UnitStep, unit_schedule, wavefront_order, wavefront_split
from ..tensors import PackedTensor, TensorFormat
from . import engine as _engine
from .memory import memory_system

__all__ = ["run", "run_tiled", "contract_for", "TileStep", "unpadded_inputs", "describe", "retime"]


@dataclass
class TileStep:
    """One tile run: the kernel, the box of full-tensor coordinates per split dimension, the transfers before and
    after it (``(tensor, memory, entries)``, in order), its cycles, and ``memories`` (the kernel top's memory count:
    its tile record's size); ``widths``: the bits per entry of every memory it moves (what a beat packs). What the
    RTL's tile sequencer replays (:mod:`fuseflow.hw.tiled`). With
    ``run_tiled(keep_tiles=True)``, ``packed`` holds the tile's packed inputs."""
    kernel: str
    box: dict                                 # split dimension -> (start, stop)
    loads: list = field(default_factory=list)
    stores: list = field(default_factory=list)
    load_cycles: int = 0
    run_cycles: int = 0
    store_cycles: int = 0
    memories: int = 0
    packed: dict | None = None
    widths: dict = field(default_factory=dict)

    def beats(self, contract: OffchipContract) -> list[int]:
        """Beats of each transfer (loads, then stores) under ``contract``."""
        return [beats(n, self.widths[mem], contract) for _, mem, n in self.loads + self.stores]

    def load(self, sub: Program, name: str, tensor: PackedTensor, contract: OffchipContract) -> int:
        """Load input ``name`` (packed as ``tensor``): one transfer per non-empty memory; returns the bytes moved."""
        decl = sub.tensors[name]
        cap = build_capacity(decl, tensor.capacities())
        widths = {mem: memory_width(sub, decl, cap, lv, arr) for lv, arr, mem in tensor_memories(decl)}
        moved = 0
        for mem, n in memory_entries(decl, tensor):
            if n:                                 # an empty array: no transfer
                moved += self._transfer(self.loads, name, mem, n, widths[mem], contract)
        return moved

    def load_accumulator(self, sub: Program, name: str, contract: OffchipContract) -> int:
        """Read accumulator input ``name`` back whole (read-modify-write); returns the bytes moved."""
        return self._transfer(self.loads, name, f"{name}.vals", math.prod(sub.tensors[name].shape),
                              memory_width(sub, sub.tensors[name], None, None, "vals"), contract)

    def store(self, sub: Program, name: str, tensor: PackedTensor, contract: OffchipContract) -> int:
        """Store output ``name`` (the run's ``tensor``): every memory, its whole capacity (as the RTL); returns
        the bytes moved."""
        decl = sub.tensors[name]
        cap = build_capacity(decl, tensor.capacities())
        return sum(self._transfer(self.stores, name, mem, array_depth(cap, lv, arr),
                                  memory_width(sub, decl, cap, lv, arr), contract)
                   for lv, arr, mem in tensor_memories(decl))

    def _transfer(self, transfers: list, name: str, mem: str, n: int, width: int, contract: OffchipContract) -> int:
        transfers.append((name, mem, n))
        self.widths[mem] = width
        return beats(n, width, contract) * contract.word_bytes


def _time_steps(steps: list, contract: OffchipContract) -> int:
    """Set the load and store cycles of one kernel's ``steps`` (at their image addresses from byte 0) and return
    the kernel's total (:func:`~fuseflow.samml.offchip.tiled_cycles`)."""
    if not steps:
        return tiled_cycles([], contract)
    memories = steps[0].memories
    words = [s.beats(contract) for s in steps]
    _, addresses, _ = layout(memories, words, contract)
    transfers = [[("load" if i < len(s.loads) else "store", a, n) for i, (n, a) in enumerate(zip(w, row))]
                 for s, w, row in zip(steps, words, addresses)]
    timed = tile_steps(memories, transfers, [s.run_cycles for s in steps], contract)
    for s, (load, _, store) in zip(steps, timed):
        s.load_cycles, s.store_cycles = load, store
    return tiled_cycles(timed, contract)


def retime(steps: list, contract: OffchipContract) -> int:
    """The total cycles of the same tile runs under another contract (same ``buffers``; the runs' cycles do not
    depend on the memory): every transfer recomputed at its address under ``contract`` (the steps' own cycles
    are left as they are)."""
    kernels: dict[str, list[TileStep]] = {}
    for s in steps:
        kernels.setdefault(s.kernel, []).append(replace(s))
    return sum(_time_steps(k, contract) for k in kernels.values())


def contract_for(tiling: dict, memory: str | None = None) -> OffchipContract:
    """The plan's contract, or a roofline preset mapped onto it (module docstring)."""
    base = contract_of(tiling)
    return replace(base, **preset_dma(memory))


def preset_dma(memory: str | None) -> dict:
    """The DMA parameters a roofline preset (``hbm2``, ``ddr4``) sets on a plan's contract: the widest beat within
    its bytes per cycle and its latency (none for ``None``/on chip). Compiling with them (``dma=``, ``--dma``) lets
    the tile-fusion cost model see the memory the simulation will charge."""
    mem = memory_system(memory)
    if mem.bytes_per_cycle is None:
        return {}
    widths = [w for w in WORD_BYTES if w <= mem.bytes_per_cycle] or [WORD_BYTES[0]]
    return {"word_bytes": widths[-1], "latency": max(1, int(mem.latency))}


def describe(rep: dict) -> str:
    """One line of a tiled run's report (``stats["tiling"]``)."""
    c = rep["contract"]
    return (f"tiles: {rep['tiles_run']} run, {rep['tiles_skipped']} empty skipped, {rep['tiles_split']} split; "
            f"run {rep['run_cycles']}, load {rep['load_cycles']}, store {rep['store_cycles']} cycles; "
            f"{rep['bytes_read']} B loaded, {rep['bytes_written']} B stored (DMA {c['word_bytes']} B/beat, latency "
            f"{c['latency']}, burst {c['burst']}, outstanding {c['outstanding']}, buffers {c['buffers']}; memory "
            f"{rep['memory']})" + _describe_wavefront(rep.get("wavefront")))


def _describe_wavefront(w: dict | None) -> str:
    if not w:
        return ""
    side = (f", the kernels side by side (busy {w['producer_busy']} and {w['consumer_busy']} cycles)"
            if w.get("units", 2) == 2 else ", one kernel at a time")
    return (f"; wavefronts (lag {w['lag']}, tile {w['tile']}): {w['wavefront1_tiles']} + {w['wavefront2_tiles']} "
            f"tiles, {w['wavefront1_cycles']} + {w['wavefront2_cycles']} cycles{side}; fused ratio {w['fused_ratio']} "
            f"of the rows, {w['fused_nnz_ratio']} of the nonzeros read from T's tile on chip, "
            f"{w['wave1_nnz_ratio']} in wavefront 1")


def run(graph_or_program: Program | str | os.PathLike, inputs: dict[str, Any], mode: str = "float",
        fifo_depth: int | None = None, trace: bool = False, memory: str | None = None, engine: str = "auto",
        progress: bool | _engine.ProgressCallback = False) -> _engine.SimResult:
    """:func:`fuseflow.sim.engine.run`, or :func:`run_tiled` for a tiled program (same arguments)."""
    prog = _engine.load_program(graph_or_program)
    if prog.tiling is None:
        return _engine.run(prog, inputs, mode=mode, fifo_depth=fifo_depth, trace=trace, memory=memory,
                           engine=engine, progress=progress)
    if trace:
        raise FuseFlowError("trace", "a tiled program is traced one tile at a time: simulate its kernel graph")
    return run_tiled(prog, inputs, mode=mode, fifo_depth=fifo_depth, memory=memory, engine=engine)


def _kernel_program(prog: Program, kernel: Kernel, reads: list[str], writes: list[str]) -> Program:
    """The kernel alone as a program: what it reads is an input, what it writes an output."""
    p = Program(f"{prog.name}.{kernel.name}", None, prog.config)
    for name in reads + writes:
        d = prog.tensors[name]
        t = p.tensor(name, "output" if name in writes else "input", d.shape, d.levels, d.mode_order, d.capacity,
                     d.dtype, d.density, d.block)
        t.capacity = d.capacity
    p.kernels.append(kernel)
    return p


class _Source:
    """A full tensor in off-chip memory, cut into tiles: SciPy COO entries grouped by tile, or a dense array."""

    def __init__(self, data: Any, shape: tuple[int, ...], dims: list[str | None], sizes: dict[str, int]) -> None:
        self.shape, self.dims, self.sizes = tuple(shape), list(dims), sizes
        if sp.issparse(data):
            coo = data.tocoo()
            self.dense = None
            coords = [coo.row.astype(np.int64), coo.col.astype(np.int64)]
            vals = coo.data.astype(np.float64)
            key = np.zeros(len(vals), dtype=np.int64)
            for m, d in enumerate(self.dims):
                if d is not None:
                    key = key * (self.shape[m] // sizes[d] + 2) + coords[m] // sizes[d]
            order = np.argsort(key, kind="stable")
            self.key = key[order]
            self.coords = [c[order] for c in coords]
            self.vals = vals[order]
        else:
            self.dense = np.asarray(data.to_dense() if isinstance(data, PackedTensor) else data, dtype=np.float64)

    def _key(self, box: dict[str, tuple[int, int]]) -> int:
        k = 0
        for m, d in enumerate(self.dims):
            if d is not None:
                k = k * (self.shape[m] // self.sizes[d] + 2) + box[d][0] // self.sizes[d]
        return k

    def entries(self, box: dict[str, tuple[int, int]]) -> int | None:
        """Stored entries of the tile holding ``box`` (before cutting a sub-box)."""
        if self.dense is not None:
            return None
        k = self._key(box)
        return int(np.searchsorted(self.key, k, "right") - np.searchsorted(self.key, k, "left"))

    def tile(self, box: dict[str, tuple[int, int]], tile_shape: tuple[int, ...]) -> Any:
        """The sub-tensor of ``box``, at ``tile_shape`` (zero padded)."""
        ranges = [box[d] if d is not None else (0, self.shape[m]) for m, d in enumerate(self.dims)]
        if self.dense is not None:
            sub = self.dense[tuple(slice(a, b) for a, b in ranges)]
            if sub.shape == tuple(tile_shape):
                return sub
            out = np.zeros(tile_shape)
            out[tuple(slice(0, s) for s in sub.shape)] = sub
            return out
        k = self._key(box)
        lo, hi = np.searchsorted(self.key, k, "left"), np.searchsorted(self.key, k, "right")
        r, c, v = self.coords[0][lo:hi], self.coords[1][lo:hi], self.vals[lo:hi]
        keep = (r >= ranges[0][0]) & (r < ranges[0][1]) & (c >= ranges[1][0]) & (c < ranges[1][1])
        if not keep.all():
            r, c, v = r[keep], c[keep], v[keep]
        return sp.csr_matrix((v, (r - ranges[0][0], c - ranges[1][0])), shape=tuple(tile_shape))


def _tiling(prog: Program) -> dict:
    """The program's ``tiling`` section; a program without one is refused in one line."""
    if prog.tiling is None:
        raise FuseFlowError("tiling", f"program {prog.name} has no tiling section (not a tiled graph)")
    return prog.tiling


def unpadded_inputs(prog: Program, inputs: dict[str, Any]) -> dict:
    """The user's inputs of a tiled program (its accumulators excluded); checks their full shapes."""
    t = _tiling(prog)
    accs = {n for n, info in t["tensors"].items() if "acc_of" in info}
    out = {}
    for decl in prog.inputs:
        if decl.name in accs:
            continue
        if decl.name not in inputs:
            raise TensorError(f"tensor {decl.name}", f"no data given (inputs: {', '.join(sorted(inputs)) or 'none'})")
        data = inputs[decl.name]
        shape = tuple(getattr(data, "shape", np.shape(data)))
        if shape != full_shape(t, decl.name):
            raise TensorError(f"tensor {decl.name}", f"shape {shape} but the tiled program declares "
                                                     f"{full_shape(t, decl.name)} (tiles of {tuple(decl.shape)})")
        out[decl.name] = data
    extra = set(inputs) - set(out) - accs
    if extra:
        raise TensorError("inputs", f"no input tensor called {', '.join(sorted(extra))} in program '{prog.name}'")
    return out


def run_tiled(prog: Program, inputs: dict[str, Any], mode: str = "float", fifo_depth: int | None = None,
              memory: str | None = None, engine: str = "auto", on_step: Callable[[TileStep], None] | None = None,
              keep_tiles: bool = False) -> _engine.SimResult:
    """Simulate a tiled program (module docstring); returns a :class:`~fuseflow.sim.engine.SimResult` with the full
    outputs, ``stats["tiling"]`` and ``stats["steps"]`` (:class:`TileStep` per tile run, in order).
    ``on_step(TileStep)`` is called after every tile run; ``keep_tiles``: each step keeps its packed inputs
    (``TileStep.packed``, for an off-chip image: :func:`fuseflow.hw.tiled.tiled_image`)."""
    t = _tiling(prog)
    contract = contract_for(t, memory)
    sizes = {d: v["size"] for d, v in t["dims"].items()}
    extents = {d: v["extent"] for d, v in t["dims"].items()}
    data = unpadded_inputs(prog, inputs)
    offchip = {}                                  # the full tensors in off-chip memory
    for name, d in data.items():
        offchip[name] = _Source(d, full_shape(t, name), t["tensors"][name]["dims"], sizes)
    t0, c0 = time.perf_counter(), time.process_time()
    wf_stats = None
    kernel_cycles, kstats, steps_all = [], [], []
    totals = {"tokens": 0, "alu_ops": 0, "mem_read_bytes": 0, "mem_write_bytes": 0}
    engines = set()
    written = {}
    wf = t.get("wavefront")
    for kplan, kernel in zip(t["kernels"], prog.kernels):
        if wf is not None and kernel.name in (wf["producer"], wf["consumer"]):
            if kernel.name == wf["consumer"]:
                continue                      # run with its producer, in two wavefronts
            pair = _run_wavefront(prog, offchip, contract, mode, fifo_depth, engine, keep_tiles)
            for ks, cycles, outs in pair["kernels"]:
                kernel_cycles.append(cycles)
                for o, full in outs.items():
                    offchip[o] = _Source(full, full_shape(t, o), t["tensors"][o]["dims"], sizes)
                    written[o] = full
                kstats.append({**ks, "cycles": cycles, "nodes": {},
                               "memory": {"compute": ks["run_cycles"], "transfer": ks["load_cycles"]
                                          + ks["store_cycles"], "latency": 0, "stages": 0,
                                          "read_bytes": ks["read_bytes"], "write_bytes": ks["write_bytes"]}})
                for key in ("tokens", "alu_ops"):
                    totals[key] += ks[key]
                totals["mem_read_bytes"] += ks["read_bytes"]
                totals["mem_write_bytes"] += ks["write_bytes"]
            for s in pair["steps"]:
                if on_step is not None:
                    on_step(s)
            steps_all += pair["steps"]
            engines |= pair["engines"]
            wf_stats = pair["stats"]
            continue
        reads, writes = kernel_tensors(kernel)
        sub = _kernel_program(prog, kernel, reads, writes)
        memories = sum(len(tensor_memories(d)) for d in sub.tensors.values())
        accs = kplan["acc"]
        outs = {o: np.zeros(full_shape(t, o)) for o in writes}
        touched: dict[str, set] = {o: set() for o in writes}
        grid = kplan["grid"]
        steps, ks = [], {"name": kernel.name, "tiles_run": 0, "tiles_skipped": 0, "tiles_split": 0,
                         "load_cycles": 0, "run_cycles": 0, "store_cycles": 0, "read_bytes": 0, "write_bytes": 0,
                         "tokens": 0, "alu_ops": 0}
        prev_region: dict[str, tuple] = {}
        prev_out, pending = None, None
        loaded_once: set[str] = set()

        def region(name: str, box: dict[str, tuple[int, int]]) -> tuple:
            return _region(t, name, box)

        def store(step: TileStep, res_tensors: dict[str, PackedTensor], box: dict[str, tuple[int, int]]) -> None:
            for o in writes:
                ks["write_bytes"] += step.store(sub, o, res_tensors[o], contract)

        def visit(box: dict[str, tuple[int, int]]) -> None:
            nonlocal prev_out, pending
            tile_inputs, packed = {}, {}
            for name in reads:
                if name in accs.values():
                    continue
                packed[name] = _pack_tile(offchip[name], sub.tensors[name], box)
                tile_inputs[name] = packed[name]
            for o, a in accs.items():
                full = outs[o]
                rg = [box[d] if d is not None else (0, full.shape[m]) for m, d in enumerate(t["tensors"][o]["dims"])]
                tile_inputs[a] = _accumulator(full, tuple(slice(x, y) for x, y in rg), sub.tensors[a].shape)
            try:
                res = _engine.run(sub, tile_inputs, mode=mode, fifo_depth=fifo_depth, engine=engine)
            except TensorError as exc:
                if "capacity is" not in exc.why:
                    raise
                return _split(box, exc)
            engines.add(res.stats.get("engine"))
            step = TileStep(kernel.name, dict(box), memories=memories, packed=packed if keep_tiles else None)
            for name in reads:
                if name in accs.values():
                    continue
                if _loads(name, region(name, box), kplan["resident"], loaded_once, prev_region, contract):
                    ks["read_bytes"] += step.load(sub, name, packed[name], contract)
            out_region = tuple(region(o, box) for o in writes)
            if pending is not None and out_region != prev_out:
                store(*pending)                  # the previous partition is complete
            for o, a in accs.items():            # a partition visited before: read back (read-modify-write)
                if out_region != prev_out and region(o, box) in touched[o]:
                    ks["read_bytes"] += step.load_accumulator(sub, a, contract)
            for o in writes:
                touched[o].add(region(o, box))
                full = outs[o]
                rg = [box[d] if d is not None else (0, full.shape[m]) for m, d in enumerate(t["tensors"][o]["dims"])]
                view = tuple(slice(x, y) for x, y in rg)
                full[view] = np.asarray(res.outputs[o])[tuple(slice(0, y - x) for x, y in rg)]
            step.run_cycles = res.cycles
            pending = (step, res.tensors, box)
            prev_out = out_region
            steps.append(step)
            ks["tiles_run"] += 1
            for key in ("tokens", "alu_ops"):
                ks[key] += res.stats[key]
            return None

        def _split(box: dict[str, tuple[int, int]], exc: TensorError) -> None:
            spans = {d: box[d][1] - box[d][0] for d in grid}
            d = max(spans, key=lambda x: spans[x]) if spans else None
            if d is None or spans[d] <= 1:
                raise FuseFlowError(f"tile of kernel {kernel.name}",
                                    f"{', '.join(f'{k} {a}..{b - 1}' for k, (a, b) in box.items())}: {exc.what}: "
                                    f"{exc.why}, and the tile cannot be split further (declare a larger capacity "
                                    f"or a smaller budget's tiles)") from None
            mid = box[d][0] + (spans[d] + 1) // 2
            ks["tiles_split"] += 1
            visit({**box, d: (box[d][0], mid)})
            visit({**box, d: (mid, box[d][1])})
            return None

        ranges = [range(0, extents[d], sizes[d]) for d in grid]
        for starts in itertools.product(*ranges):
            box = {d: (s, min(s + sizes[d], extents[d])) for d, s in zip(grid, starts)}
            if any(offchip[n].entries(box) == 0 for n in kplan["skip_empty"]):
                ks["tiles_skipped"] += 1
                continue
            visit(box)
        if pending is not None:
            store(*pending)
        cycles = _time_steps(steps, contract)
        for s in steps:
            ks["load_cycles"] += s.load_cycles
            ks["run_cycles"] += s.run_cycles
            ks["store_cycles"] += s.store_cycles
            if on_step is not None:
                on_step(s)
        ks["cycles"] = cycles
        kernel_cycles.append(cycles)
        steps_all += steps
        for o in writes:
            offchip[o] = _Source(outs[o], full_shape(t, o), t["tensors"][o]["dims"], sizes)
            written[o] = outs[o]
        kstats.append({**ks, "memory": {"compute": ks["run_cycles"],
                                        "transfer": ks["load_cycles"] + ks["store_cycles"], "latency": 0,
                                        "stages": 0, "read_bytes": ks["read_bytes"],
                                        "write_bytes": ks["write_bytes"]}, "nodes": {}})
        totals["tokens"] += ks["tokens"]
        totals["alu_ops"] += ks["alu_ops"]
        totals["mem_read_bytes"] += ks["read_bytes"]
        totals["mem_write_bytes"] += ks["write_bytes"]
    outputs = {o.name: written[o.name] for o in prog.outputs}
    tensors = {}
    for name, full in written.items():
        d = prog.tensors[name]
        tensors[name] = PackedTensor.pack(full, TensorFormat(tuple(d.levels), tuple(d.mode_order)))
    c = contract
    stats = {**totals, "engine": "+".join(sorted(e for e in engines if e)) or "none",
             "wall_seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
             "kernels": kstats,
             "tiling": {"contract": {"word_bytes": c.word_bytes, "latency": c.latency, "burst": c.burst,
                                     "outstanding": c.outstanding, "buffers": c.buffers, "pack": c.pack},
                        "memory": memory_system(memory).name,
                        "tiles_run": sum(k["tiles_run"] for k in kstats),
                        "tiles_skipped": sum(k["tiles_skipped"] for k in kstats),
                        "tiles_split": sum(k["tiles_split"] for k in kstats),
                        "load_cycles": sum(k["load_cycles"] for k in kstats),
                        "run_cycles": sum(k["run_cycles"] for k in kstats),
                        "store_cycles": sum(k["store_cycles"] for k in kstats),
                        "bytes_read": totals["mem_read_bytes"], "bytes_written": totals["mem_write_bytes"],
                        **({"wavefront": wf_stats} if wf_stats is not None else {})},
             "steps": steps_all}
    return _engine.SimResult(outputs, tensors, sum(kernel_cycles), kernel_cycles, stats, mode)


def _region(tiling: dict, name: str, box: dict) -> tuple:
    """The part of tensor ``name`` a tile ``box`` covers: per dimension its (start, stop), None when unsplit."""
    return tuple(box[d] if d is not None else None for d in tiling["tensors"][name]["dims"])


def _loads(name: str, region: tuple, resident: Any, once: set, prev: dict, contract: OffchipContract) -> bool:
    """Whether a tile loads input ``name`` (its part ``region``): a resident input the first time only; with
    ``buffers`` 1 an input whose part is still in its memory (``prev``: the part each memory holds) not again;
    with ``buffers`` 2 every time (the banks alternate). Records what it loads in ``once`` and ``prev``."""
    if name in resident:
        if name in once:
            return False
        once.add(name)
    elif contract.buffers == 1 and prev.get(name) == region:
        return False
    prev[name] = region
    return True


def _pack_tile(source: Any, decl: Any, box: dict) -> PackedTensor:
    """The tile ``box`` of an off-chip tensor ``source``, packed in the tile-shaped declaration ``decl``'s format."""
    fmt = TensorFormat(tuple(decl.levels), tuple(decl.mode_order), tuple(decl.block or ()))
    return PackedTensor.pack(source.tile(box, decl.shape), fmt)


def _accumulator(full: np.ndarray, view: tuple, shape: tuple) -> np.ndarray:
    """A tile's accumulator input: the partition's partial so far (``full[view]``), zero-padded to the tile
    ``shape``."""
    part = full[view]
    acc = np.zeros(shape)
    acc[tuple(slice(0, s) for s in part.shape)] = part
    return acc


# ---- tile fusion in two wavefronts (docs/tiling.md, "Tile fusion") ------------------------------------------------
def _time_mixed(steps: list, contract: OffchipContract) -> int:
    """Total cycles of a tile sequence whose tiles belong to several kernels (a wavefront): every tile's transfers
    at their addresses in one image (records at the largest kernel's stride), each tile's record its own
    kernel's, the runs in sequence (:func:`~fuseflow.samml.offchip.tiled_cycles`); sets the steps' cycles."""
    if not steps:
        return 0
    memories = max(s.memories for s in steps)
    words = [s.beats(contract) for s in steps]
    _, addresses, _ = layout(memories, words, contract)
    timed = []
    for s, w, row in zip(steps, words, addresses):
        transfers = [("load" if i < len(s.loads) else "store", a, n) for i, (n, a) in enumerate(zip(w, row))]
        (load, run, store), = tile_steps(s.memories, [transfers], [s.run_cycles], contract)
        s.load_cycles, s.store_cycles = load, store
        timed.append((load, run, store))
    return tiled_cycles(timed, contract)


def _run_wavefront(prog: Program, offchip: dict[str, Any], contract: OffchipContract, mode: str,
                   fifo_depth: int | None, engine: str, keep_tiles: bool) -> dict:
    """Run the plan's ``wavefront`` pair (``T = X W`` then ``G = A T``, each a kernel of its own) as tile fusion
    (seed 003) with a lag ``L`` (``wavefront["lag"]``, default 0), its tiles in
    :func:`~fuseflow.samml.wavefront.wavefront_order`'s order: wavefront 1 visits the row tiles ``k`` of ``T``,
    runs the producer's tiles of row tile ``k`` (``T``'s tile stays in its output memory, and is stored once if
    some block loads it), then the consumer's row tile ``m = k - L`` on ``A``'s blocks ``(m, w)``, ``w <= k``:
    block ``(m, k)`` reads ``T``'s tile on chip (no load), the others load ``T``'s window ``w``; the row tile's
    partial stays on chip between its blocks and is stored after them. Wavefront 2 runs the blocks ``w > m + L``,
    reading ``G``'s row tile back (read-modify-write) when wavefront 1 stored one
    (:func:`~fuseflow.samml.wavefront.wavefront_split`). Timing: ``wavefront["units"]`` 2 (default), both kernels
    side by side (:func:`~fuseflow.samml.wavefront.unit_schedule`; the producer's cycles are until its last run
    ends, the consumer's the rest); 1, the two wavefronts in sequence, one kernel at a time.
    Returns ``{"kernels": [(stats, cycles, {output: full array})], "steps", "engines", "stats"}``."""
    t = _tiling(prog)
    wf = t["wavefront"]
    sizes = {d: v["size"] for d, v in t["dims"].items()}
    extents = {d: v["extent"] for d, v in t["dims"].items()}
    rows_d, win_d, tname, aname = wf["rows"], wf["window"], wf["tensor"], wf["sparse"]
    tile = sizes[win_d]
    if sizes.get(rows_d) != tile or extents[rows_d] != extents[win_d]:
        raise FuseFlowError("tiling.wavefront", f"the rows ({rows_d}) and the window ({win_d}) need the same tile "
                                                f"size and extent")
    A = offchip[aname]
    Afull = (sp.csr_matrix(A.dense) if A.dense is not None
             else sp.csr_matrix((A.vals, (A.coords[0], A.coords[1])), shape=A.shape))
    lag = int(wf.get("lag", 0))
    first, second, wstats = wavefront_split(Afull, tile, lag)
    srcs = {"wave1": _Source(first, A.shape, A.dims, sizes), "wave2": _Source(second, A.shape, A.dims, sizes)}
    engines = set()
    ctx = {}
    for kplan, kernel in zip(t["kernels"], prog.kernels):
        if kernel.name not in (wf["producer"], wf["consumer"]):
            continue
        reads, writes = kernel_tensors(kernel)
        sub = _kernel_program(prog, kernel, reads, writes)
        ctx[kernel.name] = {
            "plan": kplan, "sub": sub, "reads": reads, "writes": writes, "accs": kplan["acc"],
            "memories": sum(len(tensor_memories(d)) for d in sub.tensors.values()),
            "outs": {o: np.zeros(full_shape(t, o)) for o in writes}, "prev": {}, "once": set(),
            "ks": {"name": kernel.name, "tiles_run": 0, "tiles_skipped": 0, "tiles_split": 0, "load_cycles": 0,
                   "run_cycles": 0, "store_cycles": 0, "read_bytes": 0, "write_bytes": 0, "tokens": 0,
                   "alu_ops": 0}}
    P, C = ctx[wf["producer"]], ctx[wf["consumer"]]
    # the consumer reads T as the producer writes it (the same array: a row tile is complete before it is read)
    offchip[tname] = _Source(P["outs"][tname], full_shape(t, tname), t["tensors"][tname]["dims"], sizes)

    def rng(o: str, box: dict, full: Any) -> tuple:
        return tuple(slice(*box[d]) if d is not None else slice(0, full.shape[m])
                     for m, d in enumerate(t["tensors"][o]["dims"]))

    def region(name: str, box: dict) -> tuple:
        return _region(t, name, box)

    def run_tile(K: dict, box: dict, source: Any = None, onchip: tuple | set = (), rmw: bool = False) -> Any:
        """One tile of kernel K: cut, pack, run; its loads (``onchip``: inputs already in on-chip memory, not
        loaded; ``source``: the part of A this tile reads); returns (step, result) or None for an empty tile."""
        sub = K["sub"]
        tile_inputs, packed = {}, {}
        for name in K["reads"]:
            if name in K["accs"].values():
                continue
            src = source if (name == aname and source is not None) else offchip[name]
            packed[name] = _pack_tile(src, sub.tensors[name], box)
            tile_inputs[name] = packed[name]
        for o, a in K["accs"].items():
            full = K["outs"][o]
            tile_inputs[a] = _accumulator(full, rng(o, box, full), sub.tensors[a].shape)
        try:
            res = _engine.run(sub, tile_inputs, mode=mode, fifo_depth=fifo_depth, engine=engine)
        except TensorError as exc:
            if "capacity is" not in exc.why:
                raise
            raise FuseFlowError(f"tile of kernel {K['ks']['name']}",
                                f"{', '.join(f'{k} {a}..{b - 1}' for k, (a, b) in box.items())}: {exc.what}: "
                                f"{exc.why} (a wavefront tile is not split at run time: compile with the data, "
                                f"tile_inputs/--inputs, for its capacities)") from None
        engines.add(res.stats.get("engine"))
        step = TileStep(K["ks"]["name"], dict(box), memories=K["memories"], packed=packed if keep_tiles else None)
        ks = K["ks"]
        for name in K["reads"]:
            if name in K["accs"].values() or name in onchip:
                continue
            if _loads(name, region(name, box), K["plan"]["resident"], K["once"], K["prev"], contract):
                ks["read_bytes"] += step.load(sub, name, packed[name], contract)
        for name in onchip:
            K["prev"].pop(name, None)            # the memory now holds another tile
        if rmw:
            for a in K["accs"].values():
                ks["read_bytes"] += step.load_accumulator(sub, a, contract)
        for o in K["writes"]:
            full = K["outs"][o]
            view = rng(o, box, full)
            full[view] = np.asarray(res.outputs[o])[tuple(slice(0, v.stop - v.start) for v in view)]
        step.run_cycles = res.cycles
        ks["tiles_run"] += 1
        for key in ("tokens", "alu_ops"):
            ks[key] += res.stats[key]
        return step, res

    def store(K: dict, step: Any, res: Any) -> None:
        for o in K["writes"]:
            K["ks"]["write_bytes"] += step.store(K["sub"], o, res.tensors[o], contract)

    ntiles = -(-extents[win_d] // tile)
    box_of = [(k * tile, min((k + 1) * tile, extents[win_d])) for k in range(ntiles)]
    pgrid = [d for d in P["plan"]["grid"] if d != win_d]
    cgrid = [d for d in C["plan"]["grid"] if d not in (rows_d, win_d)]
    if cgrid:
        raise FuseFlowError("tiling.wavefront", f"the consumer's grid splits {', '.join(cgrid)} besides its rows "
                                                f"and window")
    producer: dict[int, list] = {}
    for k in range(ntiles):
        for starts in itertools.product(*[range(0, extents[d], sizes[d]) for d in pgrid]):
            box = {win_d: box_of[k], **{d: (s, min(s + sizes[d], extents[d])) for d, s in zip(pgrid, starts)}}
            if any(offchip[n].entries(box) == 0 for n in P["plan"]["skip_empty"]):
                P["ks"]["tiles_skipped"] += 1
            else:
                producer.setdefault(k, []).append(box)
    blocks: dict[str, dict[int, list]] = {"wave1": {}, "wave2": {}}
    for wave, part in blocks.items():
        for m in range(ntiles):
            for w in (range(min(m + lag, ntiles - 1) + 1) if wave == "wave1" else range(m + lag + 1, ntiles)):
                if srcs[wave].entries({rows_d: box_of[m], win_d: box_of[w]}) == 0:
                    C["ks"]["tiles_skipped"] += 1
                else:
                    part.setdefault(m, []).append(w)
    order = wavefront_order(ntiles, lag, producer, blocks["wave1"], blocks["wave2"])
    steps: list[TileStep] = []
    for v in order:
        if v.unit == 0:
            step, res = run_tile(P, v.item)
            if v.store:
                store(P, step, res)       # T's row tile: stored once, for the tiles that load it
        else:
            box = {rows_d: box_of[v.row], win_d: box_of[v.item]}
            step, res = run_tile(C, box, srcs[f"wave{v.wave}"], onchip={tname} if v.onchip else (), rmw=v.rmw)
            if v.store:
                store(C, step, res)       # G's row tile after its last block of the wavefront
        steps.append(step)
    n_wave1 = sum(1 for v in order if v.wave == 1)
    wave1, wave2 = steps[:n_wave1], steps[n_wave1:]
    units = int(wf.get("units", 2))
    if units == 1:                                 # one kernel at a time: the wavefronts in sequence
        c1, c2 = _time_mixed(wave1, contract), _time_mixed(wave2, contract)
        p_cycles, c_cycles = c1, c2
    else:
        _time_mixed(steps, contract)               # each step's load and store cycles at its address
        total, runs = unit_schedule([UnitStep(v.unit, s.load_cycles, s.run_cycles, s.store_cycles, v.run_after,
                                              v.load_after) for s, v in zip(steps, order)], contract)
        p_cycles = max((e for (_, e), v in zip(runs, order) if v.unit == 0), default=0)
        c_cycles = total - p_cycles                # the producer until its last run ends, the consumer's rest
        c1 = max((e for (_, e) in runs[:n_wave1]), default=0)
        c2 = total - c1
    for s in steps:
        ks = ctx[s.kernel]["ks"]
        ks["load_cycles"] += s.load_cycles
        ks["run_cycles"] += s.run_cycles
        ks["store_cycles"] += s.store_cycles
    busy = [0, 0]                                  # each kernel's run cycles
    for s, v in zip(steps, order):
        busy[v.unit] += s.run_cycles
    wstats.update({"units": units, "wavefront1_tiles": len(wave1), "wavefront2_tiles": len(wave2),
                   "wavefront1_cycles": c1, "wavefront2_cycles": c2, "producer_busy": busy[0],
                   "consumer_busy": busy[1], "producer": wf["producer"], "consumer": wf["consumer"]})
    return {"kernels": [(P["ks"], p_cycles, P["outs"]), (C["ks"], c_cycles, C["outs"])], "steps": steps,
            "engines": engines, "stats": wstats}
