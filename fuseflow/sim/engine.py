"""The reference simulator's engine: binds tensors to a program's kernels and runs the op models.

Each op model is a generator with a local clock (or a tuple of generators, one per process of the op, e.g. the
two sides of a double-buffered spacc; they share the node's counters, and each waits on its own). The engine
resumes them in rounds; a model runs until it needs a token or a free slot that has not been simulated yet and
then yields. Ops that are idle cost nothing per cycle: time advances by the cycle stamps carried on tokens and
slot credits (the DAM approach, exact for the timing contract in docs/samml.md). A round in which no op fires is a deadlock and is reported with the
streams every blocked op waits on.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np

from .. import limits
from ..errors import DeadlockError, FuseFlowError, GraphError, TensorError
from ..samml import Program
from ..samml import io as samml_io
from ..samml.registry import OPS, REDUCE_OPS, UNARY_ALU_OPS, get_op, memory_role, port_kind
from ..samml.storage import bounds_latency, build_capacity
from ..samml.widths import INDEX_KINDS, check_fits_width, stream_width
from ..tensors import PackedTensor, TensorFormat
from ..tensors.fixed import FixedFormat, binary_op, matmul_op, row_reduce_op, unary_op
from ..tensors.packed import CompressedLevel, DenseLevel
from . import compiled, progress as _progress
from .channel import Channel, Out, TracingOut
from .memory import memory_stages, memory_system
from .ops import MODELS
from .blocks import blockwise, node_blocks, row_reducer, run_op_block
from .tokens import Block, as_block, normalize

if TYPE_CHECKING:
    from ..samml.graph import Kernel, Node

#: ``progress(tokens, cycles)``: a running kernel's counts (:func:`run_kernel`)
ProgressCallback = Callable[[int, int], None]

UNBOUNDED = 1 << 62


class Env:
    """Number mode: the arithmetic every op model uses (one definition: fuseflow.tensors.fixed).

    With ``blocks=True`` (a program with blocked tensors) every binary and unary op also takes block tokens
    (:class:`~fuseflow.sim.tokens.Block`), element-wise by the vectorised rules of the same module, a scalar
    operand broadcast, a B-vector broadcast over a B x B block's rows; ``row_reduce`` reduces a block's rows
    (``reduce`` with ``rows``); :meth:`for_block` gives a node whose values are blocks its zero block (what N
    loads)."""

    def __init__(self, mode: str = "float", fixed: FixedFormat | None = None, blocks: bool = False) -> None:
        if mode not in ("float", "fixed"):
            raise GraphError("mode", f"unknown number mode {mode!r} (expected float or fixed)")
        self.mode = mode
        self.blocks = bool(blocks)                          # block tokens may occur (the compiled engine reads it)
        self.fixed = fixed or FixedFormat()
        self.zero: int | float | Block = 0 if mode == "fixed" else 0.0
        names_b = ("add", "sub", "mul", "div", "max", "min")
        names_u = UNARY_ALU_OPS
        self.binary = {n: binary_op(n, mode, self.fixed) for n in names_b}
        self.unary = {n: unary_op(n, mode, self.fixed) for n in names_u}
        self.matmul = matmul_op(mode, self.fixed)           # block_matmul's a @ b
        self.row_reduce = {n: row_reducer(row_reduce_op(n, mode, self.fixed)) for n in REDUCE_OPS}
        if blocks:
            self.binary = {n: blockwise(f, binary_op(n, mode, self.fixed, vectorised=True))
                           for n, f in self.binary.items()}
            self.unary = {n: blockwise(f, unary_op(n, mode, self.fixed, vectorised=True))
                          for n, f in self.unary.items()}

    def for_block(self, shape: tuple[int, ...]) -> Env:
        """This arithmetic for a node whose values are blocks of ``shape``: its zero is a zero block."""
        env = copy.copy(self)
        env.zero = as_block(np.zeros(shape, np.int64 if self.mode == "fixed" else np.float64))
        return env

    def encode(self, x: float) -> int | float:
        return self.fixed.encode(float(x)) if self.mode == "fixed" else float(x)


class NodeState:
    """A node's parameters (with bound arrays) and its counters."""
    __slots__ = ("id", "op", "params", "env", "busy", "blocked", "clock", "alu_ops", "mem_reads",
                 "mem_writes", "result", "moved")

    def __init__(self, node_id: str, op: str, params: dict, env: Env) -> None:
        self.id, self.op, self.params, self.env = node_id, op, params, env
        self.busy = self.blocked = self.alu_ops = self.mem_reads = self.mem_writes = 0
        self.moved = 0            # outputs a pipeline delivered after their firing (progress, not firings)
        self.clock = -1
        self.result: Any = None


class _Unbounded:
    """Credits of a sink that is always ready."""
    __slots__ = ()

    def __bool__(self) -> bool:
        return True

    def __getitem__(self, i: int) -> int:
        return 0

    def popleft(self) -> int:
        return 0

    def append(self, x: int) -> None:
        pass


def run_kernel(nodes: list[NodeState], streams: list[tuple], depth_default: int = 2, models: dict = MODELS,
               out_class: type[Out] = Out, widths: dict[str, int] | None = None,
               progress: ProgressCallback | None = None) -> tuple[int, dict[str, Out], dict[str, list[Channel]]]:
    """Simulate one kernel.

    ``nodes``: list of NodeState in a topological order. ``streams``: list of (stream_id, (src_node, src_port),
    [(dst_node, dst_port), ...], depth). ``widths``: {stream_id: bits} of the streams whose data tokens are
    checked to fit (crd, ref, repsig). Unconnected outputs are discarded (always ready). Returns
    (cycles, {stream_id: Out}, {stream_id: [Channel]}). ``progress(tokens, cycles)`` is called about twice a
    second; a KeyboardInterrupt (Ctrl-C) leaves with ``partial = (cycles, outs)`` set on it: the counts so far.
    """
    widths = widths or {}
    ins: dict[str, dict[str, Channel]] = {st.id: {} for st in nodes}
    outs: dict[str, dict[str, Out]] = {st.id: {} for st in nodes}
    out_by_stream, chans_by_stream = {}, {}
    for sid, (src, sport), dsts, depth in streams:
        chans = []
        for dnode, dport in dsts:
            ch = Channel(f"{sid} -> {dnode}.{dport}", 0 if depth == UNBOUNDED else depth or depth_default,
                         f"{dnode}.{dport}")
            if depth == UNBOUNDED:
                ch.credits = _Unbounded()
            ins[dnode][dport] = ch
            chans.append(ch)
        if sid in widths:
            o = _width_checked(out_class)(sid, chans)
            o.limit = 1 << widths[sid]
        else:
            o = out_class(sid, chans)
        outs[src][sport] = o
        out_by_stream[sid] = o
        chans_by_stream[sid] = chans
    live = []
    for st in nodes:
        spec = OPS.get(st.op)
        for name, _ in (spec.output_ports(st.params) if spec else ()):
            if name not in outs[st.id]:
                outs[st.id][name] = Out(f"{st.id}.{name}", [])
        gens = models[st.op](st, ins[st.id], outs[st.id])
        for gen in (gens if gens.__class__ is tuple else (gens,)):
            live.append([st, gen, None])        # node, generator, what it waits for (a Channel or an Out)
    try:
        _schedule(live, nodes, out_by_stream, progress)
    except KeyboardInterrupt as exc:
        setattr(exc, "partial", (_cycles(nodes), out_by_stream))     # an attribute of this run's interrupt
        raise
    return _cycles(nodes), out_by_stream, chans_by_stream


def _cycles(nodes: Iterable[NodeState]) -> int:
    """The cycles simulated so far: one past the latest firing."""
    return max((st.clock for st in nodes), default=-1) + 1


def _schedule(live: list[list], nodes: list[NodeState], outs: dict[str, Out],
              report: ProgressCallback | None = None) -> None:
    """Resume the processes in rounds until all have finished (the DAM engine's loop)."""
    rounds = 0
    every = _progress.PROGRESS_SECONDS
    next_report = time.monotonic() + every
    while live:
        rounds += 1
        if report is not None and rounds & 255 == 0 and time.monotonic() >= next_report:
            next_report = time.monotonic() + every
            report(sum(o.count for o in outs.values()), _cycles(nodes))
        progress = False
        still = []
        for item in live:
            st, gen, w = item
            # skip ops whose awaited token or slot has not appeared: resuming them would yield at once
            if w is not None:
                if w.__class__ is Channel:
                    if not w.toks:
                        still.append(item)
                        continue
                elif w.room() is None:
                    still.append(item)
                    continue
            before = st.busy + st.moved
            try:
                item[2] = next(gen)
            except StopIteration:
                progress = True
                continue
            still.append(item)
            if st.busy + st.moved != before:
                progress = True
        if not progress:
            raise DeadlockError(_deadlock_message(still))
        live = still


_CHECKED: dict[type, type] = {}


def _width_checked(out_class: type[Out]) -> type:
    """``out_class`` whose pushes check that a data token fits the stream's width (``limit = 1 << width``)."""
    cls = _CHECKED.get(out_class)
    if cls is None:
        push = out_class.push

        def too_wide(self: Any, tok: int) -> TensorError:
            need = int(tok).bit_length()
            return TensorError(f"stream {self.name}", f"token {tok} needs {need} bits, the stream is "
                                                      f"{self.limit.bit_length() - 1} bits wide (the graph's "
                                                      f"widths do not hold this data: recompile it)")

        if out_class is Out:
            # Out.push inlined: this runs once per token of every index stream
            def checked_push(self: Any, tok: Any, t: int) -> None:
                if tok.__class__ is not str and tok >= self.limit:
                    raise too_wide(self, tok)
                self.count += 1
                toks = self.toks
                if toks is not None:
                    self.credits.popleft()
                    toks.append(tok)
                    self.times.append(t)
                    return
                for ch in self.chans:
                    ch.credits.popleft()
                    ch.toks.append(tok)
                    ch.times.append(t)
        else:
            def checked_push(self: Any, tok: Any, t: int) -> None:
                if tok.__class__ is not str and tok >= self.limit:
                    raise too_wide(self, tok)
                push(self, tok, t)
        cls = _CHECKED[out_class] = type(f"WidthChecked{out_class.__name__}", (out_class,),
                                         {"__slots__": ("limit",), "push": checked_push})
    return cls


def _deadlock_message(blocked: list[list]) -> str:
    parts = []
    for st, _, w in blocked:
        if hasattr(w, "describe_wait"):
            parts.append(w.describe_wait())
        elif isinstance(w, Channel):
            held = f"holds {len(w.toks)}, needs another" if w.toks else "empty"   # look-ahead waits for a second
            parts.append(f"{st.id} waits for a token on '{w.name}' ({held})")
        elif isinstance(w, Out):
            full = [ch.name for ch in w.chans if not ch.credits]
            parts.append(f"{st.id} waits to write '{w.name}' (full: {', '.join(full) or '?'})")
        else:
            parts.append(f"{st.id} waits")
    return "no op can fire: " + "; ".join(parts)


# --- run_op: one op in isolation -------------------------------------------------------------

@overload
def run_op(op: str, params: dict | None = None, inputs: dict | None = None, mode: str = "float",
           stats: Literal[False] = False, engine: str = "python") -> dict[str, Any]: ...


@overload
def run_op(op: str, params: dict | None, inputs: dict | None, mode: str, stats: Literal[True],
           engine: str = "python") -> tuple[dict[str, Any], dict[str, int]]: ...


@overload
def run_op(op: str, params: dict | None = None, inputs: dict | None = None, mode: str = "float", *,
           stats: Literal[True], engine: str = "python") -> tuple[dict[str, Any], dict[str, int]]: ...


def run_op(op: str, params: dict | None = None, inputs: dict | None = None, mode: str = "float", stats: bool = False,
           engine: str = "python") -> dict[str, Any] | tuple[dict[str, Any], dict[str, int]]:
    """Run one op on SAM-style token lists; returns {output port: token list}.

    Inputs are visible from cycle 0 and outputs never stall, so with ``stats=True`` the returned
    ``(outputs, info)`` has ``info["cycles"]``, the op's cycle count without stalls.
    Memory-backed ops take their arrays in ``params`` (``seg``/``crd``/``dim`` for level_scan, ``vals`` for
    array). Values are floats in float mode and raw fixed-point ints in fixed mode.
    """
    spec = get_op(op)
    params = spec.resolve_params(dict(params or {}), f"op {op}")
    inputs = dict(inputs or {})
    reads_level = spec.memory == "read" and spec.memory_array == "level"
    reads_vals = spec.memory == "read" and spec.memory_array == "vals"
    vals = params.get("vals") if reads_vals else None
    blocked = spec.input_blocks is not None or any(t.__class__ is not str and getattr(t, "ndim", 0) or
                                                   isinstance(t, (list, tuple))
                                                   for toks in inputs.values() for t in toks) \
        or vals is not None and len(vals) and np.ndim(vals[0]) > 0
    env = Env(mode, blocks=bool(blocked))
    if blocked:
        shape = run_op_block(spec, params, inputs)
        env = env.for_block(shape) if shape else env
    st = NodeState(op, op, _list_params(params), env)
    in_ports = [n for n, _ in spec.input_ports(params)]
    unknown = set(inputs) - set(in_ports)
    if unknown:
        raise GraphError(f"op {op}", f"no input port(s) {', '.join(sorted(unknown))} (inputs: {', '.join(in_ports)})")
    for port in spec.required_inputs(params):
        if port not in inputs:
            raise GraphError(f"op {op}", f"input '{port}' needs a token list")
    if reads_level and params["format"] == "compressed" and (params.get("seg") is None or params.get("crd") is None):
        raise GraphError(f"op {op}", f"a compressed {op} needs 'seg' and 'crd' in params")
    if reads_level and params["format"] == "dense" and params.get("dim") is None:
        raise GraphError(f"op {op}", f"a dense {op} needs 'dim' in params")
    if reads_vals and params.get("vals") is None:
        raise GraphError(f"op {op}", f"{op} needs 'vals' in params")
    nodes, streams = [], []
    for port, toks in inputs.items():
        kind = port_kind(spec, port)
        toks = normalize(toks, kind)
        src = NodeState(f"src_{port}", "_source", {"tokens": toks}, env)
        nodes.append(src)
        streams.append((f"in.{port}", (src.id, "out"), [(st.id, port)], UNBOUNDED))
    nodes.append(st)
    sinks = {}
    for port, _ in spec.output_ports(params):
        sink = NodeState(f"sink_{port}", "_sink", {}, env)
        sinks[port] = sink
        nodes.append(sink)
        streams.append((f"out.{port}", (st.id, port), [(sink.id, "in")], UNBOUNDED))
    if engine == "compiled":
        if not compiled.available() or op not in compiled.compiled_ops():
            raise FuseFlowError("engine compiled", f"no compiled model for op {op}")
        compiled.run_kernel(nodes, streams, 2, {}, env, False, UNBOUNDED)
        if isinstance(st.result, dict):
            st.result = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in st.result.items()}
    elif engine == "python":
        _run_with_test_nodes(nodes, streams)
    else:
        raise FuseFlowError("engine", f"unknown engine {engine!r} (expected python or compiled)")
    outputs = {port: sink.result for port, sink in sinks.items()}
    if spec.memory == "write":
        outputs = dict(st.result or {})
    if stats:
        return outputs, {"cycles": st.clock + 1, "busy": st.busy}
    return outputs


def _source(st: NodeState, ins: dict[str, Channel], outs: dict[str, Out]) -> Iterator[Any]:
    """Test source: all tokens visible from cycle 0, one per cycle."""
    out = outs["out"]
    for k, tok in enumerate(st.params["tokens"]):
        out.push(tok, -1)
    return
    yield


def _sink(st: NodeState, ins: dict[str, Channel], outs: dict[str, Out]) -> Iterator[Any]:
    inp = ins["in"]
    got = []
    while True:
        while not inp.toks:
            yield inp
        tok = inp.pop(0)
        got.append(tok)
        if tok == "D":
            st.result = got
            return


def _run_with_test_nodes(nodes: list[NodeState], streams: list[tuple]
                         ) -> tuple[int, dict[str, Out], dict[str, list[Channel]]]:
    return run_kernel(nodes, streams, models={**MODELS, "_source": _source, "_sink": _sink})


def _list_params(params: dict) -> dict:
    out = dict(params)
    for k in ("seg", "crd", "vals"):
        if out.get(k) is not None:
            out[k] = [as_block(x) if getattr(x, "ndim", 0) or isinstance(x, (list, tuple)) else
                      x.item() if hasattr(x, "item") else x for x in out[k]]
    return out


# --- whole programs ------------------------------------------------------------------------

@dataclass
class SimResult:
    """What :func:`run` returns."""
    outputs: dict                 # output name -> dense float64 array (tensor-dimension order)
    tensors: dict                 # every written tensor -> PackedTensor (raw fixed ints in fixed mode)
    cycles: int
    kernel_cycles: list
    stats: dict = field(default_factory=dict)
    mode: str = "float"
    trace: list | None = None         # with trace=True: per kernel {stream id: [cycle of every push]}
    trace_tokens: list | None = None  # with trace=True: per kernel {stream id: [every token pushed, in order]}

    def summary(self) -> str:
        s = self.stats
        return (f"{self.cycles} cycles, {s['tokens']} tokens, {s['alu_ops']} ALU ops, "
                f"{s['mem_read_bytes']} B read, {s['mem_write_bytes']} B written")

    def __repr__(self) -> str:
        return f"<SimResult: {self.summary()}, outputs {', '.join(self.outputs)}>"


def load_program(graph_or_program: Program | str | os.PathLike) -> Program:
    if isinstance(graph_or_program, Program):
        return graph_or_program.validate()
    return samml_io.load(graph_or_program)


def run(graph_or_program: Program | str | os.PathLike, inputs: dict[str, Any], mode: str = "float",
        fifo_depth: int | None = None, trace: bool = False, memory: str | None = None, engine: str = "auto",
        progress: bool | ProgressCallback = False) -> SimResult:
    """Simulate a program (a :class:`~fuseflow.samml.Program` or a graph.json path) on ``inputs``.

    ``inputs`` maps input tensor names to NumPy arrays, SciPy sparse matrices or PackedTensors (packed into the
    declared formats here). Returns a :class:`SimResult` with dense outputs, cycles and counters; with
    ``trace=True`` also the cycle and the token of every push on every stream (slower; for diagnosis). ``memory``: where
    tensors live (:mod:`fuseflow.sim.memory`: ``"onchip"``, the default and the RTL's contract, ``"hbm2"``,
    ``"ddr4"``, ``"bw=B,latency=L"``); off chip, each kernel is charged for the bytes it moved. ``engine``:
    ``"auto"`` (the compiled engine when it is built and can run the program, else this module's, saying why in
    one line on a terminal), ``"compiled"`` or ``"python"``; both give identical results
    (:mod:`fuseflow.sim.compiled`). ``progress=True`` shows tokens and simulated cycles per second on stderr
    while a kernel runs (a callable ``progress(tokens, cycles)`` is called instead, about every
    :data:`fuseflow.sim.progress.PROGRESS_SECONDS`). Ctrl-C stops
    the run: the KeyboardInterrupt carries ``stats`` (tokens and cycles so far, per kernel).
    """
    mem = memory_system(memory)
    prog = load_program(graph_or_program)
    use_compiled = compiled.choose(engine, prog) == "compiled"
    if fifo_depth is not None:
        if not isinstance(fifo_depth, (int, np.integer)) or isinstance(fifo_depth, bool) or fifo_depth < 1:
            raise FuseFlowError("--fifo-depth", f"must be an integer >= 1, got {fifo_depth!r}")
        limits.FIFO_DEPTH.check(int(fifo_depth), "--fifo-depth")
    check_output_sizes(prog)
    cfg = prog.config
    env = Env(mode, FixedFormat(cfg["value"].get("width", 32), cfg["value"].get("frac", 16)),
              blocks=any(t.block for t in prog.tensors.values()))
    depth_default = fifo_depth or cfg.get("fifo_depth", 2)
    crd_bytes = math.ceil(cfg.get("crd_width", 16) / 8)
    val_bytes = math.ceil(env.fixed.width / 8) if mode == "fixed" else 8
    store = pack_inputs(prog, inputs, env)
    kernel_cycles: list[int] = []
    kstats: list[dict[str, Any]] = []
    traces: list[dict] = []
    sent: list[dict] = []
    totals = {"tokens": 0, "alu_ops": 0, "mem_read_bytes": 0, "mem_write_bytes": 0}
    arena: dict[str, int] = {}          # the compiled engine's block arena counters (compiled.ARENA_COUNTERS)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in prog.kernels:
        order = _topo_order(k)
        states = {}
        blocks = node_blocks(k)
        for nid in order:
            node = k.nodes[nid]
            node_env = env.for_block(blocks[nid]) if nid in blocks else env
            states[nid] = NodeState(nid, node.op, _bind(prog, node, store, env, not use_compiled), node_env)
        streams = [(s.id, (s.src.node, s.src.port), [(d.node, d.port) for d in s.dsts], s.depth)
                   for s in k.streams.values()]
        widths = {s.id: stream_width(prog, s) for s in k.streams.values() if s.kind in INDEX_KINDS}
        report = _progress.reporter(progress, k.name)
        try:
            if use_compiled:
                karena: dict[str, int] = {}
                compute, outs, _ = compiled.run_kernel([states[n] for n in order], streams, depth_default, widths,
                                                       env, trace, UNBOUNDED, report, _progress.PROGRESS_SECONDS,
                                                       karena)
                for key, v in karena.items():
                    arena[key] = max(arena.get(key, 0), v) if key in compiled.ARENA_PEAKS else arena.get(key, 0) + v
            else:
                compute, outs, _ = run_kernel([states[n] for n in order], streams, depth_default,
                                              out_class=TracingOut if trace else Out, widths=widths, progress=report)
        except KeyboardInterrupt as exc:
            setattr(exc, "stats", _progress.interrupted_stats(kstats, k.name, getattr(exc, "partial", (0, {})), t0))
            raise
        finally:
            if isinstance(report, _progress.ProgressLine):
                report.close()
        read_b = sum(_read_bytes(st, crd_bytes, val_bytes) for st in states.values())
        write_b = sum(_write_bytes(st, crd_bytes, val_bytes) for st in states.values())
        moved = {nid for nid, st in states.items() if st.mem_reads or st.mem_writes}
        timing = mem.kernel_cycles(compute, read_b + write_b, memory_stages(k, moved) if moved else 0)
        cycles = timing["cycles"]
        if trace:
            traces.append({sid: list(o.log) for sid, o in outs.items()})
            sent.append({sid: list(o.sent) for sid, o in outs.items()})
        kernel_cycles.append(cycles)
        for name in _collect_writes(prog, k, states, store, env):
            # what a kernel writes must fit the same width as hardware memories and streams
            check_fits_width(prog, name, prog.tensors[name].shape, store[name].capacities())
        tokens = {sid: o.count for sid, o in outs.items()}
        reads = sum(st.mem_reads for st in states.values())
        writes = sum(st.mem_writes for st in states.values())
        k_alu = sum(st.alu_ops for st in states.values())
        kstats.append({
            "name": k.name, "cycles": cycles, "tokens": sum(tokens.values()), "streams": tokens,
            "memory": {"read_bytes": read_b, "write_bytes": write_b, **timing},
            "alu_ops": k_alu, "mem_read_bytes": read_b, "mem_write_bytes": write_b,
            # lower bounds: no kernel finishes before its busiest stream has carried every token, nor before
            # its busiest op has fired as often as it must
            "stream_bound": max(tokens.values(), default=0),
            "op_bound": max((st.busy for st in states.values()), default=0),
            "nodes": {nid: {"op": st.op, "busy": st.busy, "blocked": st.blocked,
                            "idle": cycles - st.busy - st.blocked} for nid, st in states.items()},
        })
        totals["tokens"] += sum(tokens.values())
        totals["alu_ops"] += k_alu
        # references/coordinates and values are counted at their widths
        totals["mem_read_bytes"] += read_b
        totals["mem_write_bytes"] += write_b
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    outputs = {}
    for t in prog.outputs:
        if t.name not in store:
            raise GraphError(f"tensor {t.name}", "no kernel writes this output")
        packed = store[t.name]
        if mode == "fixed":
            packed = packed.decode_fixed(env.fixed)
        outputs[t.name] = packed.to_dense()
    stats: dict[str, Any] = dict(totals, cycles=sum(kernel_cycles), kernels=kstats, wall_seconds=wall, cpu_seconds=cpu,
                                 memory=mem.name, engine="compiled" if use_compiled else "python")
    if use_compiled and env.blocks:
        stats["block_arena"] = arena
    written = {t.name: store[t.name] for t in prog.tensors.values() if t.role != "input" and t.name in store}
    return SimResult(outputs, written, sum(kernel_cycles), kernel_cycles, stats, mode, traces if trace else None,
                     sent if trace else None)


def _read_bytes(st: NodeState, crd_bytes: int, val_bytes: int) -> int:
    return st.mem_reads * (val_bytes * _values_per_token(st) if memory_role(st.op)[1] == "vals" else crd_bytes)


def _write_bytes(st: NodeState, crd_bytes: int, val_bytes: int) -> int:
    return st.mem_writes * (val_bytes * _values_per_token(st) if memory_role(st.op)[1] == "vals" else crd_bytes)


def _values_per_token(st: NodeState) -> int:
    """Numbers in one value token of the node: B*B (or B) for blocks, else 1."""
    return getattr(st.env.zero, "size", 1)


def _topo_order(kernel: Kernel) -> list[str]:
    import networkx as nx
    return list(nx.lexicographical_topological_sort(kernel.graph(), key=lambda n: n))


def _as_numbers(data: Any, what: str) -> Any:
    """Tensor data from a file or the caller as numbers: integer arrays are values like floats (raw fixed point
    is only ever a PackedTensor's int64 vals), so an integer-valued .npz means the same in both modes."""
    import scipy.sparse as sp
    from ..tensors.io import check_no_nan
    check_no_nan(data, what)
    if sp.issparse(data):
        return data.astype(np.float64) if data.dtype.kind in "biu" else data
    arr = np.asarray(data)
    if arr.dtype.kind in "biu":
        if arr.size and arr.dtype.kind in "iu" and (arr.max() > 2 ** 53 or arr.min() < -2 ** 53):
            raise TensorError(what, "integer values beyond 2**53 cannot be represented exactly")
        return arr.astype(np.float64)
    return data


def check_output_sizes(prog: Program) -> None:
    """The simulator returns every output as a dense float64 array: refuse before simulating what would not fit
    (limit fuseflow.limits.DENSE_ENTRIES)."""
    from ..samml.graph import dense_entries
    for t in prog.outputs:
        limits.DENSE_ENTRIES.check(dense_entries(t.shape), f"output tensor {t.name} (dense result)")


def pack_inputs(prog: Program, inputs: dict[str, Any], env: Env) -> dict[str, PackedTensor]:
    """Pack every input tensor into its declared format; raise TensorError on a mismatch."""
    store = {}
    for t in prog.inputs:
        if t.name not in inputs:
            raise TensorError(f"tensor {t.name}", f"no data given (inputs: {', '.join(sorted(inputs)) or 'none'})")
        data = inputs[t.name]
        fmt = TensorFormat(tuple(t.levels), tuple(t.mode_order), tuple(t.block or ()))
        if isinstance(data, PackedTensor):
            packed = data
            if tuple(packed.shape) != tuple(t.shape):
                raise TensorError(f"tensor {t.name}", f"shape {tuple(packed.shape)} but the program declares {tuple(t.shape)}")
            if packed.format != fmt:
                raise TensorError(f"tensor {t.name}", f"packed as {packed.format} but the program declares {fmt}")
        else:
            shape = tuple(getattr(data, "shape", np.shape(data)))
            if shape != tuple(t.shape):
                raise TensorError(f"tensor {t.name}", f"shape {shape} but the program declares {tuple(t.shape)}")
            packed = PackedTensor.pack(_as_numbers(data, f"tensor {t.name}"), fmt)
        check_fits_width(prog, t.name, t.shape, packed.capacities())
        if t.capacity is not None:
            caps = packed.capacities()
            for lv, (have, cap) in enumerate(zip(caps, t.capacity)):
                if have > cap:
                    raise TensorError(f"tensor {t.name}", f"level {lv} holds {have} entries, capacity is {cap}")
        if env.mode == "fixed":
            packed = packed.encode_fixed(env.fixed, checked=True)
        store[t.name] = packed
    extra = set(inputs) - {t.name for t in prog.inputs}
    if extra:
        raise TensorError("inputs", f"no input tensor called {', '.join(sorted(extra))} in program '{prog.name}'")
    return store


def _bind(prog: Program, node: Node, store: dict[str, PackedTensor], env: Env, lists: bool = True) -> dict:
    """Parameters of a node with its tensor arrays attached (as Python lists for fast indexing; as the packed
    NumPy arrays with ``lists=False``, for the compiled engine)."""
    p = dict(node.params)
    name = p.get("tensor")
    memory, array = memory_role(node.op)
    reads = memory == "read"
    if reads and name is not None:
        if name not in store:
            raise GraphError(f"node {node.id}", f"reads tensor '{name}' before any kernel writes it")
        packed = store[name]
        if array == "vals":
            if packed.format.block:        # the compiled engine takes the (n, B[, B]) array as it is
                p["vals"] = [as_block(v) for v in packed.vals] if lists or not len(packed.vals) else packed.vals
            else:
                p["vals"] = packed.vals.tolist() if lists else packed.vals
        else:
            level = packed.levels[p["level"]]
            if isinstance(level, DenseLevel):
                p["dim"] = int(level.size)
            else:
                p["seg"] = level.seg.tolist() if lists else level.seg
                p["crd"] = level.crd.tolist() if lists else level.crd
                if p.get("bounds_latency") is None:     # the hardware's storage of seg and first decides
                    decl = prog.tensors[name]
                    p["bounds_latency"] = bounds_latency(prog, decl, build_capacity(decl, packed.capacities()),
                                                         p["level"])
    elif reads and array == "level" and p.get("format") == "dense" and p.get("dim") is None:
        raise GraphError(f"node {node.id}", f"a dense {node.op} needs a tensor or 'dim'")
    elif reads:
        p = _list_params(p)
    if (memory, array) == ("write", "level") and name is not None:
        decl = prog.tensors[name]
        p.setdefault("dim", decl.level_dim(p["level"]))
    return p


def _collect_writes(prog: Program, kernel: Kernel, states: dict[str, NodeState], store: dict[str, PackedTensor],
                    env: Env) -> list[str]:
    """Assemble the tensors a kernel wrote into PackedTensors."""
    written: dict[str, dict] = {}
    for nid, st in states.items():
        memory, array = memory_role(st.op)
        if memory == "write" and st.params.get("tensor"):
            written.setdefault(st.params["tensor"], {})[
                ("level", st.params["level"]) if array == "level" else ("vals",)] = st.result
    for name, parts in written.items():
        decl = prog.tensors[name]
        levels: list[DenseLevel | CompressedLevel] = []
        for lv in range(decl.order):
            if decl.levels[lv] == "dense":
                levels.append(DenseLevel(decl.level_dim(lv)))
                continue
            part = parts.get(("level", lv))
            if part is None:
                raise GraphError(f"kernel {kernel.name}", f"writes tensor '{name}' but not its level {lv}")
            levels.append(CompressedLevel(np.asarray(part["seg"], dtype=np.int64),
                                          np.asarray(part["crd"], dtype=np.int64)))
        if ("vals",) not in parts:
            raise GraphError(f"kernel {kernel.name}", f"writes tensor '{name}' but not its values")
        vals = parts[("vals",)]["vals"]
        dtype = np.int64 if env.mode == "fixed" else np.float64
        if decl.block:                       # blocks (a scalar 0, from N, is a zero block)
            vals = np.asarray([np.broadcast_to(v, tuple(decl.block)) for v in vals], dtype=dtype).reshape(
                (len(vals),) + tuple(decl.block))
        else:
            vals = np.asarray(vals, dtype=dtype)
        fmt = TensorFormat(tuple(decl.levels), tuple(decl.mode_order), tuple(decl.block or ()))
        try:
            store[name] = PackedTensor.from_levels(tuple(decl.shape), fmt, levels, vals)
        except TensorError as exc:
            raise TensorError(f"kernel {kernel.name} wrote tensor {name}", exc.why) from None
    return list(written)
