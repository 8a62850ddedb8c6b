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
  :func:`~fuseflow.samml.storage.memory_width`), each ``read_cycles`` long at its address in the image, one after the other, after the tile
  record's read (:func:`~fuseflow.samml.offchip.record_cycles`);
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
off-chip image from these steps; docs/tiling.md, "On hardware"); the program's is the sum over kernels. ``memory`` maps a roofline preset onto the contract: the DMA port gets the
largest AXI width (4, 8, 16, 32 or 64 bytes) not above the preset's bytes per cycle and the preset's latency
(hbm2: 32 bytes, 100 cycles; ddr4: 16 bytes, 80 cycles); ``onchip`` (the default) keeps the plan's contract.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

from ..errors import FuseFlowError, TensorError
from ..samml.graph import Program
from ..samml.offchip import WORD_BYTES, OffchipContract, beats, layout, tile_steps, tiled_cycles
from ..samml.storage import array_depth, build_capacity, memory_entries, memory_width, tensor_memories
from ..samml.tileplan import contract_of, full_shape, kernel_tensors
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
    kernels = {}
    for s in steps:
        kernels.setdefault(s.kernel, []).append(replace(s))
    return sum(_time_steps(k, contract) for k in kernels.values())


def contract_for(tiling: dict, memory=None) -> OffchipContract:
    """The plan's contract, or a roofline preset mapped onto it (module docstring)."""
    base = contract_of(tiling)
    mem = memory_system(memory)
    if mem.bytes_per_cycle is None:
        return base
    widths = [w for w in WORD_BYTES if w <= mem.bytes_per_cycle] or [WORD_BYTES[0]]
    return replace(base, word_bytes=widths[-1], latency=max(1, int(mem.latency)))


def describe(rep: dict) -> str:
    """One line of a tiled run's report (``stats["tiling"]``)."""
    c = rep["contract"]
    return (f"tiles: {rep['tiles_run']} run, {rep['tiles_skipped']} empty skipped, {rep['tiles_split']} split; "
            f"run {rep['run_cycles']}, load {rep['load_cycles']}, store {rep['store_cycles']} cycles; "
            f"{rep['bytes_read']} B loaded, {rep['bytes_written']} B stored (DMA {c['word_bytes']} B/beat, latency "
            f"{c['latency']}, burst {c['burst']}, outstanding {c['outstanding']}, buffers {c['buffers']}; memory "
            f"{rep['memory']})")


def run(graph_or_program, inputs, mode="float", fifo_depth=None, trace=False, memory=None, engine="auto",
        progress=False):
    """:func:`fuseflow.sim.engine.run`, or :func:`run_tiled` for a tiled program (same arguments)."""
    prog = _engine.load_program(graph_or_program)
    if prog.tiling is None:
        return _engine.run(prog, inputs, mode=mode, fifo_depth=fifo_depth, trace=trace, memory=memory,
                           engine=engine, progress=progress)
    if trace:
        raise FuseFlowError("trace", "a tiled program is traced one tile at a time: simulate its kernel graph")
    return run_tiled(prog, inputs, mode=mode, fifo_depth=fifo_depth, memory=memory, engine=engine)


def _kernel_program(prog, kernel, reads, writes):
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

    def __init__(self, data, shape, dims, sizes):
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

    def _key(self, box):
        k = 0
        for m, d in enumerate(self.dims):
            if d is not None:
                k = k * (self.shape[m] // self.sizes[d] + 2) + box[d][0] // self.sizes[d]
        return k

    def entries(self, box):
        """Stored entries of the tile holding ``box`` (before cutting a sub-box)."""
        if self.dense is not None:
            return None
        k = self._key(box)
        return int(np.searchsorted(self.key, k, "right") - np.searchsorted(self.key, k, "left"))

    def tile(self, box, tile_shape):
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


def unpadded_inputs(prog, inputs) -> dict:
    """The user's inputs of a tiled program (its accumulators excluded); checks their full shapes."""
    t = prog.tiling
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


def run_tiled(prog, inputs, mode="float", fifo_depth=None, memory=None, engine="auto", on_step=None,
              keep_tiles=False):
    """Simulate a tiled program (module docstring); returns a :class:`~fuseflow.sim.engine.SimResult` with the full
    outputs, ``stats["tiling"]`` and ``stats["steps"]`` (:class:`TileStep` per tile run, in order).
    ``on_step(TileStep)`` is called after every tile run; ``keep_tiles``: each step keeps its packed inputs
    (``TileStep.packed``, for an off-chip image: :func:`fuseflow.hw.tiled.tiled_image`)."""
    t = prog.tiling
    contract = contract_for(t, memory)
    sizes = {d: v["size"] for d, v in t["dims"].items()}
    extents = {d: v["extent"] for d, v in t["dims"].items()}
    data = unpadded_inputs(prog, inputs)
    offchip = {}                                  # the full tensors in off-chip memory
    for name, d in data.items():
        offchip[name] = _Source(d, full_shape(t, name), t["tensors"][name]["dims"], sizes)
    t0, c0 = time.perf_counter(), time.process_time()
    kernel_cycles, kstats, steps_all = [], [], []
    totals = {"tokens": 0, "alu_ops": 0, "mem_read_bytes": 0, "mem_write_bytes": 0}
    engines = set()
    written = {}
    for kplan, kernel in zip(t["kernels"], prog.kernels):
        reads, writes = kernel_tensors(kernel)
        sub = _kernel_program(prog, kernel, reads, writes)
        memories = sum(len(tensor_memories(d)) for d in sub.tensors.values())
        accs = kplan["acc"]
        outs = {o: np.zeros(full_shape(t, o)) for o in writes}
        touched = {o: set() for o in writes}
        grid = kplan["grid"]
        steps, ks = [], {"name": kernel.name, "tiles_run": 0, "tiles_skipped": 0, "tiles_split": 0,
                         "load_cycles": 0, "run_cycles": 0, "store_cycles": 0, "read_bytes": 0, "write_bytes": 0,
                         "tokens": 0, "alu_ops": 0}
        prev_region, prev_out, pending = {}, None, None
        loaded_once = set()

        def region(name, box):
            dims = t["tensors"][name]["dims"]
            return tuple(box[d] if d is not None else None for d in dims)

        def store(step, res_tensors, box):
            for o in writes:                  # every memory of the output, its whole capacity (as the RTL)
                decl = sub.tensors[o]
                cap = build_capacity(decl, res_tensors[o].capacities())
                for lv, arr, mem in tensor_memories(decl):
                    n = array_depth(cap, lv, arr)
                    step.stores.append((o, mem, n))
                    step.widths[mem] = memory_width(sub, decl, cap, lv, arr)
                    ks["write_bytes"] += beats(n, step.widths[mem], contract) * contract.word_bytes

        def visit(box):
            nonlocal prev_out, pending
            tile_inputs, packed = {}, {}
            for name in reads:
                if name in accs.values():
                    continue
                src = offchip[name]
                decl = sub.tensors[name]
                arr = src.tile(box, decl.shape)
                fmt = TensorFormat(tuple(decl.levels), tuple(decl.mode_order), tuple(decl.block or ()))
                packed[name] = PackedTensor.pack(arr, fmt)
                tile_inputs[name] = packed[name]
            for o, a in accs.items():
                full = outs[o]
                rg = [box[d] if d is not None else (0, full.shape[m]) for m, d in enumerate(t["tensors"][o]["dims"])]
                part = full[tuple(slice(x, y) for x, y in rg)]
                acc = np.zeros(sub.tensors[a].shape)
                acc[tuple(slice(0, s) for s in part.shape)] = part
                tile_inputs[a] = acc
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
                if name in kplan["resident"]:
                    if name in loaded_once:
                        continue
                    loaded_once.add(name)
                elif contract.buffers == 1 and prev_region.get(name) == region(name, box):
                    continue
                prev_region[name] = region(name, box)
                decl = sub.tensors[name]
                cap = build_capacity(decl, packed[name].capacities())
                widths = {mem: memory_width(sub, decl, cap, lv, arr) for lv, arr, mem in tensor_memories(decl)}
                for mem, n in memory_entries(decl, packed[name]):
                    if n:                             # an empty array: no transfer
                        step.loads.append((name, mem, n))
                        step.widths[mem] = widths[mem]
                        ks["read_bytes"] += beats(n, widths[mem], contract) * contract.word_bytes
            out_region = tuple(region(o, box) for o in writes)
            if pending is not None and out_region != prev_out:
                store(*pending)                  # the previous partition is complete
            for o, a in accs.items():            # a partition visited before: read back (read-modify-write)
                if out_region != prev_out and region(o, box) in touched[o]:
                    n = math.prod(sub.tensors[a].shape)
                    step.loads.append((a, f"{a}.vals", n))
                    step.widths[f"{a}.vals"] = memory_width(sub, sub.tensors[a], None, None, "vals")
                    ks["read_bytes"] += beats(n, step.widths[f"{a}.vals"], contract) * contract.word_bytes
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

        def _split(box, exc):
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
                        "bytes_read": totals["mem_read_bytes"], "bytes_written": totals["mem_write_bytes"]},
             "steps": steps_all}
    return _engine.SimResult(outputs, tensors, sum(kernel_cycles), kernel_cycles, stats, mode)
