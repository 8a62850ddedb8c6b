"""One model object from a PyTorch module to checked hardware (hls4ml's ``ModelGraph`` idea).

    import fuseflow
    m = fuseflow.compile(model, example_inputs, fuse="regions", mode="fixed")
    res = m.simulate(inputs)         # outputs (torch tensors), cycles, counters
    m.check(inputs)                  # against the PyTorch model itself (float64 copy)
    m.build("build/")                # Verilog + manifest (+ graph.json, model.ff)
    m.rtl_sim(inputs)                # Verilator, bit-compared with the fixed-mode simulator
    print(m.report())                # per kernel: cycles, tokens, ALU ops, bytes, FIFO slots
    m.save("out/m"); m2 = fuseflow.load("out/m", model)
    m = fuseflow.compile(model, example_inputs, fuse="auto")   # the autoscheduler picks fusion and orders
    m.schedule                       # what it chose (per-region fusion groups, orders, simulated cycles)

A ``.ff`` program (a path, its text, or a parsed :class:`~fuseflow.compiler.EinsumProgram`) gives the same
object; its shapes and formats are declared, so the example inputs are optional (default: deterministic data,
:func:`fuseflow.models.program_inputs`), inputs are {tensor name: array or SciPy matrix}, outputs {name: array},
and :meth:`~CompiledModel.check` compares with the NumPy evaluation of the program's Einsum expression:

    m = fuseflow.compile("fuseflow/programs/gcn2.ff")
    m.simulate().outputs["H2"]; m.check(); m.build("build/"); m.rtl_sim(); print(m.report())

The command line (``fuseflow compile model.py:Class ...``) calls exactly these methods.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import FuseFlowError, ProgramError, TensorError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .compiler.codegen import CompileResult
    from .compiler.frontend import EinsumProgram
    from .samml.graph import Program
    from .sim.engine import SimResult
    from .tensors.fixed import FixedFormat

FUSE_CHOICES = ("none", "regions", "full", "auto")


@dataclass
class Simulation:
    """What :meth:`CompiledModel.simulate` returns."""
    outputs: object                  # torch tensors (structured like the model's outputs) or NumPy arrays
    arrays: list                     # NumPy float64 arrays, one per output
    cycles: int
    kernel_cycles: list
    stats: dict
    mode: str
    raw: object = None               # the simulator's SimResult

    def summary(self) -> str:
        s = self.stats
        return (f"{self.cycles} cycles, {s['tokens']} tokens, {s['alu_ops']} ALU ops, "
                f"{s['mem_read_bytes']} B read, {s['mem_write_bytes']} B written ({self.mode} mode)")

    def __repr__(self) -> str:
        # short: the outputs and counters are attributes (printing them all buried the answer)
        return f"<Simulation: {self.summary()}>"

    def _repr_html_(self) -> str:
        s = self.stats
        rows = "".join(f"<tr><td>{k['name']}</td><td>{k['cycles']:,}</td><td>{k['tokens']:,}</td>"
                       f"<td>{k['alu_ops']:,}</td></tr>" for k in s.get("kernels", []))
        return (f"<b>Simulation</b> ({self.mode} mode, {s.get('engine', '?')} engine): {self.cycles:,} cycles"
                f"<table><tr><th>kernel</th><th>cycles</th><th>tokens</th><th>ALU ops</th></tr>{rows}</table>")


@dataclass
class Check:
    """What :meth:`CompiledModel.check` returns; true when every output is within tolerance."""
    ok: bool
    mode: str
    rtol: float
    atol: float
    max_abs_error: float
    max_rel_error: float
    problems: list = field(default_factory=list)
    simulation: Simulation | None = None
    against: str = "PyTorch"         # what the reference is: the PyTorch model, or NumPy (a .ff program)

    def __bool__(self) -> bool:
        return self.ok

    def summary(self) -> str:
        verdict = f"matches {self.against}" if self.ok else "MISMATCH"
        return (f"{verdict} ({self.mode} mode): max abs error {self.max_abs_error:.3g}, max rel error "
                f"{self.max_rel_error:.3g} (rtol {self.rtol:g}, atol {self.atol:g})")

    def __repr__(self) -> str:
        cycles = f", {self.simulation.cycles} cycles" if self.simulation is not None else ""
        problems = f", {len(self.problems)} problem(s)" if self.problems else ""
        return f"<Check ok={self.ok}: {self.summary()}{cycles}{problems}>"

    def _repr_html_(self) -> str:
        sim = self.simulation._repr_html_() if self.simulation is not None else ""
        items = "".join(f"<li>{p}</li>" for p in self.problems[:20])
        return f"<b>Check</b>: {self.summary()}<ul>{items}</ul>{sim}"


def tolerance(mode: str, fixed: FixedFormat | None = None) -> tuple[float, float]:
    """(rtol, atol) of :meth:`CompiledModel.check`: float mode 1e-6 relative; fixed mode docs/numbers.md."""
    if mode == "float":
        return 1e-6, 1e-9
    from .sim.check import tolerance as sim_tolerance
    return sim_tolerance("fixed", fixed)


class CompiledModel:
    """A PyTorch model or a ``.ff`` program compiled to a SAMML program, with its data bindings.

    Attributes: ``program`` (the :class:`~fuseflow.samml.Program`, i.e. graph.json), ``einsum`` (the
    :class:`~fuseflow.compiler.EinsumProgram` the front end produced, or the one parsed), ``ff_text`` (the same as
    ``.ff`` text), ``result`` (the compiler's :class:`~fuseflow.compiler.CompileResult`, ``None`` after
    :func:`load`), ``compile_seconds``, ``source`` (``"pytorch"`` or ``"ff"``). For a ``.ff`` program ``inputs``
    and ``outputs`` are the program's input and output tensors (``.name``, ``.shape``), inputs and outputs are
    dicts keyed by tensor name, and the reference is NumPy (:func:`fuseflow.sim.check.golden`).
    """

    def __init__(self, *, name: str, program: Program, ff_text: str, inputs: list, outputs: list,
                 output_structure: str, constants: dict, mode: str, fuse: Any, order: Any, torch_model: Any = None,
                 example_inputs: Any = None, einsum: EinsumProgram | None = None, result: CompileResult | None = None,
                 compile_seconds: float = 0.0, statements: Iterable = (), schedule: Any = None,
                 candidates: Iterable = (), source: str = "pytorch", redundancies: Iterable = (),
                 schedule_report: Any = None) -> None:
        self.source = source
        self.name = name
        self.program = program
        self.ff_text = ff_text
        self.inputs = inputs
        self.outputs = outputs
        self.output_structure = output_structure
        self.constants = constants
        self.mode = mode
        self.fuse = fuse
        self.order = order
        self.torch_model = torch_model
        self.example_inputs = example_inputs
        self.einsum = einsum
        self.result = result
        self.compile_seconds = compile_seconds
        self.statements = list(statements)
        self.schedule = schedule              # fuse="auto": the autoscheduler's choice (a Schedule)
        self.candidates = list(candidates)    # fuse="auto": every schedule it ranked, best estimate first
        # fused kernels that do more work than unfused, by the cost model (fuseflow.compiler.redundancy.Redundancy;
        # .line() is the one-line warning), with what the compiler did about them
        self.redundancies = list(redundancies)
        self.schedule_report = schedule_report  # fuse="auto": the AutoResult (tried, skipped and why, seconds)
        self._last: Simulation | None = None

    # ---- data ------------------------------------------------------------------------------------
    def _inputs(self, inputs: Any) -> dict:
        if inputs is None:
            if self.example_inputs is None:
                raise FuseFlowError("inputs", "give the inputs (this model was loaded without example inputs)")
            inputs = self.example_inputs
        if self.source == "ff":
            return bind_named(self.inputs, self.constants, inputs)
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        return bind_inputs(self.inputs, self.constants, inputs)

    def _outputs(self, res: SimResult, as_torch: bool = True) -> tuple[Any, list[np.ndarray]]:
        if self.source == "ff":
            arrays = [np.asarray(res.outputs[t.name], dtype=np.float64).reshape(tuple(t.shape))
                      for t in self.outputs]
            return {t.name: a for t, a in zip(self.outputs, arrays)}, arrays
        arrays = []
        for b in self.outputs:
            dense = np.asarray(res.outputs[b.name], dtype=np.float64)
            order = [p for slots in b.dims for p in slots]
            arrays.append(np.transpose(dense, order).reshape(b.shape) if order else dense.reshape(b.shape))
        outs: list = arrays
        if as_torch:
            try:
                import torch
                outs = [torch.from_numpy(a.copy()) for a in arrays]
            except ImportError:
                pass
        if self.output_structure == "single":
            return outs[0], arrays
        return (tuple(outs) if self.output_structure == "tuple" else list(outs)), arrays

    # ---- the user's calls ------------------------------------------------------------------------------
    def simulate(self, inputs: Any = None, mode: str | None = None, fifo_depth: int | None = None,
                 engine: str = "auto") -> Simulation:
        """Run the simulator; outputs come back shaped like the PyTorch model's (a ``.ff`` program: {output tensor
        name: NumPy array}; ``inputs`` {tensor name: array or SciPy matrix}). ``engine``: ``"auto"`` (the
        compiled engine when it is built), ``"compiled"`` or ``"python"`` (the reference); results are identical."""
        from .sim import run
        mode = mode or self.mode
        res = run(self.program, self._inputs(inputs), mode=mode, fifo_depth=fifo_depth, engine=engine)
        outs, arrays = self._outputs(res)
        sim = Simulation(outs, arrays, res.cycles, list(res.kernel_cycles), res.stats, mode, res)
        self._last = sim
        return sim

    def reference(self, inputs: Any = None) -> Any:
        """The PyTorch model's own outputs in float64 (a double-precision copy of the model); for a ``.ff``
        program the dense NumPy evaluation of its Einsum expression, {output tensor name: array}."""
        if self.source == "ff":
            from .sim.check import golden
            gold = golden(self.program, self._inputs(inputs))
            return {t.name: np.asarray(_dense(gold[t.name]), dtype=np.float64) for t in self.outputs}
        if self.torch_model is None:
            raise FuseFlowError("check", "no PyTorch model attached (fuseflow.load(path, model) attaches one)")
        import torch
        ref_model = copy.deepcopy(self.torch_model).double().eval()
        if inputs is None:
            inputs = self.example_inputs
        if not isinstance(inputs, (tuple, list)):
            inputs = (inputs,)
        args = [x.to(torch.float64) if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x, np.float64))
                for x in inputs]
        with torch.no_grad():
            out = ref_model(*args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return [_to_numpy(o) for o in outs]

    def check(self, inputs: Any = None, mode: str | None = None, engine: str = "auto") -> Check:
        """Simulate and compare with the PyTorch model, or for a ``.ff`` program with NumPy (float mode: rtol 1e-6;
        fixed: docs/numbers.md)."""
        from .sim.engine import Env
        mode = mode or self.mode
        want = self.reference(inputs)
        against = "NumPy" if self.source == "ff" else "PyTorch"
        if self.source == "ff":
            want = [want[t.name] for t in self.outputs]
        sim = self.simulate(inputs, mode, engine=engine)
        rtol, atol = tolerance(mode, Env(mode).fixed)
        problems, max_abs, max_rel = [], 0.0, 0.0
        for b, got, ref in zip(self.outputs, sim.arrays, want):
            diff = np.abs(got - ref)
            if diff.size:
                max_abs = max(max_abs, float(np.nanmax(diff)))
                scale = float(np.nanmax(np.abs(ref))) or 1.0
                max_rel = max(max_rel, float(np.nanmax(diff)) / scale)
            bad = ~np.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
            if bad.any():
                ix = tuple(int(i) for i in np.argwhere(bad)[0])
                problems.append(f"output {b.name}: {int(bad.sum())} of {bad.size} entries differ, e.g. at {ix}: "
                                f"simulator {got[ix]:.6g}, {against} {ref[ix]:.6g}")
        return Check(not problems, mode, rtol, atol, max_abs, max_rel, problems, sim, against)

    def build(self, out_dir: str, inputs: Any = None, bake: bool = False, interface: str = "host",
              testbench: bool = False) -> dict:
        """Verilog + manifest (fuseflow.hw), graph.json and model.ff in ``out_dir``; returns the paths.

        Without ``inputs`` the memories take the capacities the graph declares; with them, the capacities
        these inputs (and the reference run on them) need. ``interface`` and ``testbench``: as
        ``python -m fuseflow.hw build`` (the same writer, :func:`fuseflow.hw.build.build_design`)."""
        from .hw.build import build_design
        data = self._inputs(inputs) if (bake or inputs is not None) else None
        return build_design(self.program, out_dir, data, bake=bake and data is not None, interface=interface,
                            testbench=testbench, write_graph=True, ff_text=self.ff_text).paths

    def rtl_sim(self, inputs: Any = None, simulator: str = "verilator", out_dir: str | None = None,
                compile_fast: bool | None = None, progress: bool | None = None) -> dict:
        """Run the RTL (Verilator) and compare every written tensor bit for bit with the fixed-mode simulator.

        Returns the summary of :func:`fuseflow.hw.build.run_sim` (``ok``, ``rtl_cycles``, ``sim_cycles``,
        ``cycles_equal``, ``mismatches``); with ``out_dir`` also the paths of :meth:`build` (``paths``), written
        from the very design that ran (elaborated once). ``compile_fast``: the design's C++ at -O0 (about half
        the Verilator compile time; for short runs); None: for large designs only (see
        :func:`fuseflow.hw.verilator.build_verilator`). ``progress``: say on stderr what is being elaborated and
        built and how far the Verilator build is (None: when stderr is a terminal). The Verilator build is cached
        (``summary["build"]["cached"]``) and does not depend on the data: a second run with new inputs of the
        same shapes reuses it."""
        import sys
        from .hw.build import run_sim, write_build
        from .hw.elaborate import build, reference_run
        if progress is None:
            progress = sys.stderr.isatty()
        data = self._inputs(inputs)
        b = build(self.program, data, reference=reference_run(self.program, data))
        if out_dir is not None:
            b.verilog(progress=progress)
        paths = (write_build(b, out_dir, graph=self.program, ff_text=self.ff_text).paths
                 if out_dir is not None else None)
        summary = run_sim(self.program, data, simulator, cache=None, compile_fast=compile_fast, prebuilt=b,
                          progress=progress)
        if paths is not None:
            summary["paths"] = paths
        return summary

    def report(self, inputs: Any = None, mode: str | None = None) -> str:
        """A table per kernel: cycles, tokens, ALU ops, bytes read/written, FIFO slots (simulated)."""
        sim = self.simulate(inputs, mode)
        depth = self.program.config.get("fifo_depth", 2)
        rows: list[tuple] = [("kernel", "cycles", "tokens", "ALU ops", "bytes read", "bytes written", "FIFO slots", "deepest")]
        for k, ks in zip(self.program.kernels, sim.stats["kernels"]):
            depths = [(s.depth or depth) * len(s.dsts) for s in k.streams.values()]
            deepest = max((s.depth or depth for s in k.streams.values()), default=0)
            rows.append((k.name, ks["cycles"], ks["tokens"], ks.get("alu_ops", "-"), ks.get("mem_read_bytes", "-"),
                         ks.get("mem_write_bytes", "-"), sum(depths), deepest))
        s = sim.stats
        rows.append(("total", sim.cycles, s["tokens"], s["alu_ops"], s["mem_read_bytes"], s["mem_write_bytes"],
                     sum(r[6] for r in rows[1:]), max((r[7] for r in rows[1:]), default=0)))
        widths = [max(len(str(r[c])) for r in rows) for c in range(len(rows[0]))]
        lines = [f"{self.name}: fuse={self.fuse}, {sim.mode} mode, compiled in {self.compile_seconds:.2f} s"]
        for i, r in enumerate(rows):
            lines.append("  ".join(str(v).ljust(w) if c == 0 else str(v).rjust(w) for c, (v, w) in
                                   enumerate(zip(r, widths))))
            if i == 0 or i == len(rows) - 2:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    # ---- persistence -------------------------------------------------------------------------------
    def save(self, path: str) -> str:
        """Write the compiled model to directory ``path``: graph.json, model.ff, model.json, constants.npz."""
        from .cli import atomic_write
        from .samml import io as samml_io
        os.makedirs(path, exist_ok=True)
        samml_io.save(self.program, os.path.join(path, "graph.json"))
        with atomic_write(os.path.join(path, "model.ff")) as f:
            f.write(self.ff_text)
        with atomic_write(os.path.join(path, "constants.npz"), "wb") as f:
            # the keys are the constants' tensor names: one named "allow_pickle" would clash with savez's option
            np.savez(f, **{k: _dense(v) for k, v in self.constants.items()})  # type: ignore[arg-type]
        meta = {"fuseflow_model": 1, "name": self.name, "mode": self.mode, "fuse": self.fuse, "order": self.order,
                "output_structure": self.output_structure, "compile_seconds": self.compile_seconds,
                "inputs": [_binding_json(b) for b in self.inputs], "outputs": [_binding_json(b) for b in self.outputs],
                "statements": [list(s) for s in self.statements], "source": self.source,
                "schedule": self.schedule.key() if self.schedule is not None else None}
        with atomic_write(os.path.join(path, "model.json")) as f:
            json.dump(meta, f, indent=1)
        return path


def bind_inputs(bindings: Sequence, constants: dict, inputs: Sequence) -> dict:
    """The simulator's inputs: the model's constants and each forward argument under its tensor's name."""
    if len(inputs) != len(bindings):
        raise TensorError("inputs", f"the model takes {len(bindings)} input(s), got {len(inputs)}")
    data = dict(constants)
    for b, x in zip(bindings, inputs):
        arr = _to_numpy(x)
        if tuple(arr.shape) != tuple(b.shape):
            raise TensorError(f"input {b.name}", f"shape {tuple(arr.shape)} but the model was compiled for "
                                                 f"{tuple(b.shape)}")
        data[b.name] = arr.reshape(b.sizes)
    return data


def bind_named(tensors: Iterable, constants: dict, inputs: Any) -> dict:
    """The simulator's inputs of a ``.ff`` program: ``inputs`` {tensor name: array or SciPy matrix}, one for each of
    the program's input ``tensors``, checked against their declared shapes."""
    if not isinstance(inputs, dict):
        raise TensorError("inputs", f"a .ff program takes a dict {{tensor name: array}}, got {type(inputs).__name__}")
    names = [t.name for t in tensors]
    unknown = sorted(set(inputs) - set(names) - set(constants))
    if unknown:
        raise TensorError("inputs", f"{', '.join(map(str, unknown))} not an input of the program "
                                    f"(its inputs: {', '.join(names)})")
    missing = [n for n in names if n not in inputs and n not in constants]
    if missing:
        raise TensorError("inputs", f"missing {', '.join(missing)} (the program's inputs: {', '.join(names)})")
    data = dict(constants)
    for t in tensors:
        if t.name not in inputs:
            continue
        x = inputs[t.name]
        if not hasattr(x, "toarray") and not isinstance(x, np.ndarray):
            x = _to_numpy(x)
        if tuple(x.shape) != tuple(t.shape):
            raise TensorError(f"input {t.name}", f"shape {tuple(x.shape)} but the program declares {tuple(t.shape)}")
        data[t.name] = x
    return data


def compile(model: Any, example_inputs: Any = None, fuse: str | list = "regions", order: Any = None,
            mode: str = "fixed", formats: dict | None = None, name: str | None = None, max_nodes: int | None = None,
            max_kernels: int | None = None, memory: str = "hbm2", parallel: dict | str | None = None,
            max_lanes: int | None = None, redundancy: str = "warn", budget: float | None = None,
            simulate: bool = True, progress: Any = None, tiles: dict | str | None = None,
            onchip_bits: int | None = None, dma: dict | str | None = None, tile_fusion: str | None = None,
            min_tiles: int | None = None) -> CompiledModel:
    """Trace a PyTorch ``model`` with torch.fx and compile it (see :mod:`fuseflow.model`); or compile a ``.ff``
    program: ``model`` a path to a ``.ff`` file, ``.ff`` source text, or a parsed
    :class:`~fuseflow.compiler.EinsumProgram` (:func:`compile_ff`; ``example_inputs`` optional, a dict).

    ``fuse``: ``"none"`` (one kernel per op), ``"regions"`` (one region per child module: the paper's partial
    fusion; default), ``"full"``, or a list of module names / lists of names (one region each; a statement
    joins the region with the longest matching module-path prefix), or ``"auto"``: the autoscheduler
    (:mod:`fuseflow.compiler.autoschedule`) chooses, per child module's region, to fuse or split it (or to fuse
    everything) and the dataflow orders, ranking the schedules with the cost heuristic under ``memory`` and
    simulating the best few on ``example_inputs``, within ``max_nodes`` SAMML nodes and ``max_kernels`` kernels
    (its choice is ``.schedule``), and with ``max_lanes`` also the parallel factors (at most that many lanes
    per kernel). ``order``: a dataflow order for the compiler (not with ``"auto"``).
    ``formats``: {input or parameter name: format} overriding what the tensors say. ``parallel``: {index: lanes}
    (or ``"i=4"``), the compiler's parallel lanes (docs/compiler.md, "Parallel lanes"; with ``"auto"``: every
    schedule it considers gets these lanes).
    ``mode``: the default number mode of :meth:`~CompiledModel.simulate` and :meth:`~CompiledModel.check`.
    ``tiles``: {index: tile size} (or ``"i=1024"``), ``onchip_bits``: tile sizes chosen to fit that many bits on
    chip (docs/tiling.md; not with ``"auto"``); the program then runs once per non-empty tile; ``dma``: its
    off-chip contract (``"buffers=1,latency=20"`` or a dict; :func:`fuseflow.compiler.compile_program`);
    ``tile_fusion``: how a tiled fuse region of two products runs (``wavefront`` | ``recompute`` | ``materialise``;
    default the cost model's choice); ``min_tiles`` (with ``onchip_bits``): at least that many row tiles even when
    the program fits (:class:`~fuseflow.compiler.CompileOptions`)."""
    from .compiler import EinsumProgram, compile_program
    if mode not in ("float", "fixed"):
        raise FuseFlowError("mode", f"expected 'float' or 'fixed', got {mode!r}")
    if isinstance(fuse, str) and fuse not in FUSE_CHOICES:
        raise FuseFlowError("fuse", f"expected one of {', '.join(FUSE_CHOICES)} or a list of module names, got {fuse!r}")
    if isinstance(model, (str, os.PathLike, EinsumProgram)):
        if formats is not None:
            raise FuseFlowError("formats", "a .ff program declares its formats (change its 'tensor' lines)")
        return compile_ff(model, example_inputs, fuse=fuse, order=order, mode=mode, name=name, max_nodes=max_nodes,
                          max_kernels=max_kernels, memory=memory, parallel=parallel, max_lanes=max_lanes,
                          redundancy=redundancy, budget=budget, simulate=simulate, progress=progress, tiles=tiles,
                          onchip_bits=onchip_bits, dma=dma, tile_fusion=tile_fusion, min_tiles=min_tiles)
    if example_inputs is None:
        raise FuseFlowError("example_inputs", "a PyTorch model needs example inputs (its forward arguments) to be "
                                              "traced")
    from .frontends.pytorch import lower
    if not isinstance(example_inputs, (tuple, list)):
        example_inputs = (example_inputs,)
    _check_options(fuse, order, max_nodes, max_kernels, max_lanes, redundancy, budget, tiles, onchip_bits)
    check_input_sizes(model, example_inputs)        # before the forward pass: a huge input fails in seconds
    t0 = time.perf_counter()
    low = lower(model, example_inputs, formats=formats, fuse="regions" if fuse == "auto" else fuse, name=name)
    candidates: Sequence = ()
    redundancies: list = []
    result: CompileResult | None
    schedule, schedule_report = None, None
    if fuse == "auto":
        from .compiler.autoschedule import autoschedule
        from .compiler.lanes import parse_parallel
        auto = autoschedule(low.program, inputs=bind_inputs(low.inputs, low.constants, tuple(example_inputs)),
                            max_nodes=max_nodes, max_kernels=max_kernels, memory=memory, max_lanes=max_lanes,
                            parallel=parse_parallel(parallel) or None, simulate=simulate, progress=progress,
                            budget=DEFAULT_BUDGET if budget is None else budget, sources=_reassociated(low.program))
        result, schedule, candidates, schedule_report = auto.result, auto.chosen, auto.candidates, auto
        order = schedule.order
    else:
        data = bind_inputs(low.inputs, low.constants, tuple(example_inputs))
        result = _compile_tiled(low.program, fuse if isinstance(fuse, str) else "regions", order, parallel, tiles,
                                onchip_bits, data, {"dma": dma, "tile_fusion": tile_fusion, "min_tiles": min_tiles})
        if result is None:
            result, redundancies = _compile_checked(low.program, fuse if isinstance(fuse, str) else "regions", order,
                                                    parallel, data, memory, redundancy)
    seconds = time.perf_counter() - t0
    return CompiledModel(name=low.program.name, program=result.program, ff_text=ff_text(low), inputs=low.inputs,
                         outputs=low.outputs, output_structure=low.output_structure, constants=low.constants,
                         mode=mode, fuse=fuse, order=order, torch_model=model, example_inputs=tuple(example_inputs),
                         einsum=low.program, result=result, compile_seconds=seconds, statements=low.statements,
                         schedule=schedule, candidates=candidates, redundancies=redundancies,
                         schedule_report=schedule_report)


REDUNDANCY_CHOICES = ("warn", "rewrite", "ignore")
DEFAULT_BUDGET = 60.0              # seconds: fuse="auto"'s default time budget (the autoscheduler's)


def _compile_tiled(einsum: EinsumProgram, fuse: str, order: Any, parallel: Any, tiles: Any, onchip_bits: int | None,
                   inputs: dict | None, tiling: dict | None = None) -> CompileResult | None:
    """The tiled CompileResult (fuseflow.compiler.tiling), or None when no tiling is asked for or nothing splits;
    ``tiling``: the compile options ``dma``, ``tile_fusion``, ``min_tiles``."""
    if not (tiles or onchip_bits is not None or getattr(einsum, "tile_sizes", None)):
        return None
    from .compiler import compile_program
    result = compile_program(einsum, fuse=fuse, order=order, parallel=parallel, tiles=tiles, onchip_bits=onchip_bits,
                             tile_inputs=inputs, **{k: v for k, v in (tiling or {}).items() if v is not None})
    return result if result.program.tiling is not None else None


def _compile_checked(einsum: EinsumProgram, fuse: str, order: Any, parallel: Any, inputs: dict | None, memory: str,
                     redundancy: str, unfused: CompileResult | None = None) -> tuple[CompileResult, list]:
    """(CompileResult, redundancies): ``einsum`` compiled at ``fuse`` and every fused kernel checked against the
    unfused program with the cost model (:mod:`fuseflow.compiler.redundancy`): ``"warn"`` reports each kernel
    that does more work than unfused in one line (a :class:`~fuseflow.compiler.redundancy.FusionRedundancyWarning`),
    ``"rewrite"`` materialises what it recomputes (and reports that), ``"ignore"`` skips the check. ``unfused``:
    the program already compiled unfused (not compiled again)."""
    import warnings
    from .compiler import compile_program
    if fuse == "none" or redundancy == "ignore":
        return compile_program(einsum, fuse=fuse, order=order, parallel=parallel), []
    from .compiler.redundancy import FusionRedundancyWarning, compile_checked
    c = compile_checked(einsum, fuse, order=order, parallel=parallel, inputs=inputs, memory=memory,
                        rewrite=redundancy == "rewrite", unfused=unfused)
    for r in c.redundancies:
        warnings.warn(r.line(), FusionRedundancyWarning, stacklevel=4)
    return c.result, c.redundancies


def check_input_sizes(model: Any, example_inputs: Any) -> None:
    """Refuse example inputs whose declared sizes exceed the limits (:mod:`fuseflow.limits`) before anything runs
    on them: a dimension beyond 32-bit coordinates or ``FUSEFLOW_MAX_DIMENSION``, a dense tensor (or a sparse
    matrix's CSR row pointers) beyond ``FUSEFLOW_MAX_DENSE_ENTRIES``. Names the ``forward()`` argument."""
    import inspect
    from . import limits
    from .samml.widths import WIDTHS
    try:
        names = list(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError, AttributeError):
        names = []
    for i, x in enumerate(example_inputs):
        shape = getattr(x, "shape", None)
        if shape is None:
            continue
        name = f"input {names[i] if i < len(names) else i}"
        dims = [int(d) for d in shape]
        what = f"{name} ({' x '.join(map(str, dims))})"
        for d in dims:
            try:
                limits.DIMENSION.check(d, what)
            except FuseFlowError as exc:
                raise TensorError(exc.what, exc.why) from None
            if d - 1 >= (1 << WIDTHS[-1]):
                raise TensorError(what, f"dimension {d} needs coordinates wider than {WIDTHS[-1]} bits, the widest "
                                        f"the simulator and hardware have")
        layout = str(getattr(x, "layout", "torch.strided"))
        sparse = "sparse" in layout or hasattr(x, "tocsr")
        dense = math.prod(dims) if not sparse else (dims[0] if dims else 1)
        limit = limits.DENSE_ENTRIES.value
        if dense > limit:
            held = (f"its {dense} rows are a dense level of its CSR form" if sparse else
                    f"it holds {dense} dense entries")
            raise TensorError(what, f"{held}, more than the limit of {limit} {limits.DENSE_ENTRIES.name} (set "
                                    f"{limits.DENSE_ENTRIES.env} to raise it; see docs/errors.md)")


def read_ff(src: str | os.PathLike | EinsumProgram) -> tuple[EinsumProgram, str, str | None]:
    """``src`` (a ``.ff`` path, ``.ff`` source text, or an :class:`~fuseflow.compiler.EinsumProgram`) ->
    (EinsumProgram, its ``.ff`` text, the file's path or None). A string is a path when it names a file or ends in
    ``.ff`` (and has no line break), else source text."""
    from .cli import read_text
    from .compiler import EinsumProgram
    from .compiler.frontend import parse_file
    if isinstance(src, EinsumProgram):
        return src, ff_source(src), None
    path = os.fspath(src)
    is_path = isinstance(src, os.PathLike) or ("\n" not in path and (path.endswith(".ff") or os.path.isfile(path)))
    if not is_path:
        return EinsumProgram.parse(path), path, None
    if not os.path.isfile(path):
        raise ProgramError(path, "no such .ff file" if not os.path.exists(path) else "not a file")
    try:
        with _in_file(path):
            return parse_file(path), read_text(path), path
    except OSError as exc:
        raise ProgramError(path, exc.strerror or str(exc)) from None


@contextlib.contextmanager
def _in_file(path: str | None) -> Iterator[None]:
    """ProgramErrors (syntax, declarations: ``line 3, column 16: ...``) name the ``.ff`` file they are in."""
    try:
        yield
    except ProgramError as exc:
        if path is None or exc.what.startswith(path):
            raise
        raise ProgramError(f"{path}, {exc.what}", exc.why) from None


def compile_ff(src: str | os.PathLike | EinsumProgram, example_inputs: dict | None = None, fuse: str | list = "regions",
               order: Any = None, mode: str = "fixed", name: str | None = None, max_nodes: int | None = None,
               max_kernels: int | None = None, memory: str = "hbm2", parallel: dict | str | None = None,
               max_lanes: int | None = None, redundancy: str = "warn", budget: float | None = None,
               simulate: bool = True, progress: Any = None, tiles: dict | str | None = None,
               onchip_bits: int | None = None, dma: dict | str | None = None, tile_fusion: str | None = None,
               min_tiles: int | None = None) -> CompiledModel:
    """Compile a ``.ff`` program (:func:`read_ff`) into the model object. ``example_inputs``: {tensor name: array or
    SciPy matrix}, by default deterministic data from the declared shapes and formats
    (:func:`fuseflow.models.program_inputs`); ``fuse``: ``none`` | ``regions`` | ``full`` | ``auto`` (the
    autoscheduler, on the example inputs); the rest as :func:`compile`."""
    if mode not in ("float", "fixed"):
        raise FuseFlowError("mode", f"expected 'float' or 'fixed', got {mode!r}")
    if not isinstance(fuse, str) or fuse not in FUSE_CHOICES:
        raise FuseFlowError("fuse", f"expected one of {', '.join(FUSE_CHOICES)} for a .ff program, got {fuse!r}")
    _check_options(fuse, order, max_nodes, max_kernels, max_lanes, redundancy, budget, tiles, onchip_bits)
    einsum, text, path = read_ff(src)
    if name is not None:
        einsum.name = name
    with _in_file(path):
        return _compile_ff(einsum, text, example_inputs, fuse, order, mode, max_nodes, max_kernels, memory, parallel,
                           max_lanes, redundancy, budget, simulate, progress, tiles, onchip_bits,
                           {"dma": dma, "tile_fusion": tile_fusion, "min_tiles": min_tiles})


def _check_options(fuse: Any, order: Any, max_nodes: int | None, max_kernels: int | None, max_lanes: int | None,
                   redundancy: str, budget: float | None, tiles: Any = None, onchip_bits: int | None = None) -> None:
    if fuse == "auto" and (tiles or onchip_bits is not None):
        raise FuseFlowError("tiles" if tiles else "onchip_bits", "tiling does not combine with fuse='auto'")
    if fuse == "auto" and order is not None:
        raise FuseFlowError("order", "fuse='auto' chooses the dataflow orders; leave order unset")
    if fuse != "auto" and (max_nodes is not None or max_kernels is not None or max_lanes is not None):
        raise FuseFlowError("max_nodes" if max_lanes is None else "max_lanes", "a resource budget is for fuse='auto'")
    if fuse != "auto" and budget is not None:
        raise FuseFlowError("budget", "a time budget is for fuse='auto'")
    if redundancy not in REDUNDANCY_CHOICES:
        raise FuseFlowError("redundancy", f"expected one of {', '.join(REDUNDANCY_CHOICES)}, got {redundancy!r}")


def _reassociated(einsum: EinsumProgram) -> list:
    """The other associations of the program's product chains, for the autoscheduler to rank ([] when none)."""
    from .compiler.redundancy import reassociations
    return reassociations(einsum)


def _compile_ff(einsum: EinsumProgram, text: str, example_inputs: dict | None, fuse: str, order: Any, mode: str,
                max_nodes: int | None, max_kernels: int | None, memory: str, parallel: Any, max_lanes: int | None,
                redundancy: str = "warn", budget: float | None = None, simulate: bool = True, progress: Any = None,
                tiles: Any = None, onchip_bits: int | None = None, tiling: dict | None = None) -> CompiledModel:
    from .compiler import compile_program
    from .models import program_inputs
    t0 = time.perf_counter()
    candidates: Sequence = ()
    redundancies: list = []
    result: CompileResult | None
    schedule, schedule_report = None, None
    if fuse == "auto":
        from .compiler.autoschedule import autoschedule
        from .compiler.lanes import parse_parallel
        if example_inputs is None:       # the data the autoscheduler simulates on: from an unfused compile
            example_inputs = program_inputs(compile_program(einsum, fuse="none").program)[0]
        auto = autoschedule(einsum, inputs=example_inputs, max_nodes=max_nodes, max_kernels=max_kernels,
                            memory=memory, max_lanes=max_lanes, parallel=parse_parallel(parallel) or None,
                            simulate=simulate, progress=progress, budget=DEFAULT_BUDGET if budget is None else budget,
                            sources=_reassociated(einsum))
        result, schedule, candidates, schedule_report = auto.result, auto.chosen, auto.candidates, auto
        order = schedule.order
    else:
        result = _compile_tiled(einsum, fuse, order, parallel, tiles, onchip_bits, example_inputs, tiling)
        if result is None:
            data, unfused = example_inputs, None
            if data is None and fuse != "none" and redundancy != "ignore":   # the cost model's data, as auto's
                unfused = compile_program(einsum, fuse="none", parallel=parallel)
                data = program_inputs(unfused.program)[0]
            result, redundancies = _compile_checked(einsum, fuse, order, parallel, data, memory, redundancy,
                                                    unfused)
    seconds = time.perf_counter() - t0
    return ff_model(einsum, text, result, fuse=fuse, order=order, mode=mode, example_inputs=example_inputs,
                    compile_seconds=seconds, schedule=schedule, candidates=candidates, redundancies=redundancies,
                    schedule_report=schedule_report)


def ff_model(einsum: EinsumProgram, text: str, result: CompileResult, fuse: str = "regions", order: Any = None,
             mode: str = "fixed", example_inputs: dict | None = None, compile_seconds: float = 0.0,
             schedule: Any = None, candidates: Iterable = (), redundancies: Iterable = (),
             schedule_report: Any = None) -> CompiledModel:
    """The model object of a compiled ``.ff`` program (``result``: :func:`fuseflow.compiler.compile_program`'s);
    ``example_inputs`` {tensor name: array}, by default deterministic data from the declared shapes and formats.
    ``fuseflow compile PROGRAM.ff --check/--report/--build`` use it as the PyTorch path does."""
    from .models import program_inputs
    from .samml.tileplan import full_view
    program = result.program
    view = full_view(program)         # a tiled program's inputs and outputs have their full shapes
    m = CompiledModel(name=program.name, program=program, ff_text=text, inputs=list(view.inputs),
                      outputs=list(view.outputs), output_structure="dict", constants={}, mode=mode, fuse=fuse,
                      order=order, einsum=einsum, result=result, compile_seconds=compile_seconds, schedule=schedule,
                      candidates=candidates, source="ff", redundancies=list(redundancies),
                      schedule_report=schedule_report)
    m.example_inputs = (bind_named(m.inputs, {}, example_inputs) if example_inputs is not None
                        else program_inputs(program)[0])
    return m


def ff_source(p: EinsumProgram) -> str:
    """``.ff`` text of an :class:`~fuseflow.compiler.EinsumProgram` built in Python (declarations, statements with
    their orders, fuse regions, barriers, parallel lines, outputs)."""
    from .compiler.frontend import _parse_format
    from .tensors import TensorFormat
    lines = [f"program {p.name}"]
    for d in p._decls.values():
        fmt = ""
        if d.fmt is not None:
            levels, mode_order, block = _parse_format(d, len(d.shape))
            spec = str(TensorFormat(levels, mode_order)) if block is None else (d.fmt if isinstance(d.fmt, str)
                                                                                 else None)
            fmt = f" : {spec}" if spec else ""
        dens = f" density {d.density:g}" if d.density is not None else ""
        lines.append(f"tensor {d.name}({', '.join(map(str, d.shape))}){fmt}{dens}")
    for i, (f, _, _) in p._parallel.items():
        lines.append(f"parallel {i} {f}")
    region, segment = None, 0
    for st in p._stmts:
        if st.region != region and region is not None:
            lines.append("}")
        while segment < st.segment:
            lines.append("barrier")
            segment += 1
        if st.region != region and st.region is not None:
            lines.append("fuse {")
        region = st.region
        pad = "  " if region is not None else ""
        lines.append(pad + st.text.strip())
        lines.extend(f"{pad}order {','.join(chain)}" for chain, _, _ in st.orders)
    if region is not None:
        lines.append("}")
    if p._outputs:
        lines.append(f"output {', '.join(n for n, _, _ in p._outputs)}")
    return "\n".join(lines) + "\n"


def load(path: str, model: Any = None) -> CompiledModel:
    """Read a model written by :meth:`CompiledModel.save`; attach ``model`` to :meth:`~CompiledModel.check`."""
    from .samml import io as samml_io
    try:
        with open(os.path.join(path, "model.json")) as f:
            meta = json.load(f)
    except json.JSONDecodeError as exc:
        raise FuseFlowError(os.path.join(path, "model.json"), f"not JSON: {exc.msg}") from None
    if meta.get("fuseflow_model") != 1:
        raise FuseFlowError(path, "not a saved fuseflow model (model.json lacks 'fuseflow_model': 1)")
    program = samml_io.load(os.path.join(path, "graph.json"))
    with open(os.path.join(path, "model.ff")) as f:
        text = f.read()
    with np.load(os.path.join(path, "constants.npz")) as z:
        constants = {k: z[k] for k in z.files}

    if meta.get("source") == "ff":
        from .models import program_inputs
        m = CompiledModel(name=meta["name"], program=program, ff_text=text, inputs=list(program.inputs),
                          outputs=list(program.outputs), output_structure="dict", constants=constants,
                          mode=meta["mode"], fuse=meta["fuse"], order=meta["order"],
                          compile_seconds=meta.get("compile_seconds", 0.0), source="ff")
        m.example_inputs = program_inputs(program)[0]
        return m

    from .frontends.pytorch.lower import Binding

    def binding(d: dict) -> Binding:
        return Binding(d["name"], tuple(d["shape"]), [list(x) for x in d["dims"]], tuple(d["sizes"]),
                       d.get("format", "dense"), d.get("sparse", False))
    return CompiledModel(name=meta["name"], program=program, ff_text=text,
                         inputs=[binding(d) for d in meta["inputs"]], outputs=[binding(d) for d in meta["outputs"]],
                         output_structure=meta["output_structure"], constants=constants, mode=meta["mode"],
                         fuse=meta["fuse"], order=meta["order"], torch_model=model,
                         compile_seconds=meta.get("compile_seconds", 0.0),
                         statements=[tuple(s) for s in meta.get("statements", [])])


def ff_text(low: Any) -> str:
    """The lowered program as ``.ff`` text (docs/language.md), one comment per statement naming its module."""
    lines = [f"# traced from PyTorch by fuseflow.frontends.pytorch", f"program {low.program.name}"]
    for st in low.stored.values():
        if st.role in ("input", "const"):
            what = "model input" if st.role == "input" else f"constant {st.source}"
            lines.append(f"tensor {st.name}({', '.join(map(str, st.sizes))}) : {st.format}   # {what}")
    current = None
    for text, path, key in low.statements:
        if key != current:
            if current is not None:
                lines.append("}")
            if key is not None:
                lines.append("fuse {")
            current = key
        pad = "  " if key is not None else ""
        lines.append(f"{pad}{text}" + (f"   # {path}" if path else ""))
    if current is not None:
        lines.append("}")
    outs = sorted({b.name for b in low.outputs})
    if outs:
        lines.append(f"output {', '.join(outs)}")
    return "\n".join(lines) + "\n"


def _binding_json(b: Any) -> dict:
    if not hasattr(b, "dims"):           # a .ff program's tensor
        return {"name": b.name, "shape": list(b.shape)}
    return {"name": b.name, "shape": list(b.shape), "dims": [list(x) for x in b.dims], "sizes": list(b.sizes),
            "format": b.format, "sparse": b.sparse}


def _dense(v: Any) -> np.ndarray:
    return v.toarray() if hasattr(v, "toarray") else np.asarray(v)


def _to_numpy(x: Any) -> np.ndarray:
    """A torch tensor (dense or sparse), SciPy matrix or array-like as a dense float64 NumPy array."""
    if hasattr(x, "toarray"):
        return np.asarray(x.toarray(), dtype=np.float64)
    try:
        import torch
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided:
                x = x.to_dense()
            return x.detach().to(torch.float64).cpu().numpy()
    except ImportError:
        pass
    return np.asarray(x, dtype=np.float64)


_ = ProgramError
