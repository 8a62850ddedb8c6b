"""Graph elaboration: a validated :class:`~fuseflow.samml.Program` -> kernel top, memory plan, manifest, Verilog.

>>> from fuseflow.samml import kernels
>>> b = build(kernels.vector("add", n=6), inputs=kernels.random_inputs(kernels.vector("add", n=6)))
>>> text = b.verilog()          # doctest: +SKIP

Capacities: declared ``capacity`` in graph.json wins; otherwise the data given (inputs packed; outputs and
intermediates measured by a fixed-mode run of the reference simulator) sizes the memories; with neither,
:class:`~fuseflow.errors.HardwareError`. ``bake=True`` puts the input data into the memories' initial contents
(a self-contained build); otherwise the host port loads it at run time, and one build serves any data that fits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from ..errors import HardwareError
from ..samml import Program
from ..samml import io as samml_io
from ..tensors.fixed import FixedFormat
from .memory import MemoryPlan, plan_memories, tensor_images
from .top import ProgramTop

if TYPE_CHECKING:
    from ..sim.engine import SimResult
    from ..tensors import PackedTensor

MANIFEST_VERSION = 1


def module_name(program_name: str) -> str:
    """A Verilog identifier for a program name."""
    ident = "".join(c if c.isalnum() or c == "_" else "_" for c in program_name) or "top"
    if ident[0].isdigit():
        ident = "k_" + ident
    return ident


@dataclass
class Build:
    """An elaborated program: the top component, its memory plan, and (when data was given) the reference run."""
    program: Program
    plan: MemoryPlan
    top: ProgramTop
    name: str
    images: dict = field(default_factory=dict)      # memory name -> raw words of the given inputs
    reference: SimResult | None = None              # fuseflow.sim SimResult (fixed mode) when data was given
    baked: bool = False
    packed: dict | None = None                      # input tensors as packed (raw fixed-point values)
    _verilog: str | None = None

    def verilog(self, progress: bool | None = False) -> str:
        """Verilog text of the top (memoised: elaborating twice is not allowed). ``progress``: say on stderr what
        is being elaborated and how long it took (large programs take minutes)."""
        if self._verilog is None:
            import sys
            import time
            from amaranth.back import verilog
            t0 = time.perf_counter()
            if progress:
                nodes = sum(len(k.nodes) for k in self.program.kernels)
                sys.stderr.write(f"elaborating {self.name}: {len(self.program.kernels)} kernel(s), {nodes} nodes "
                                 f"(Amaranth to Verilog)\n")
                sys.stderr.flush()
            self._verilog = verilog.convert(self.top, name=self.name, emit_src=False)
            if progress:
                sys.stderr.write(f"elaborated {self.name}: {len(self._verilog) / 1e6:.1f} MB of Verilog in "
                                 f"{time.perf_counter() - t0:.0f} s\n")
                sys.stderr.flush()
        return self._verilog

    def manifest(self) -> dict:
        return manifest(self)


def load_program(graph: Program | str | os.PathLike) -> Program:
    if isinstance(graph, Program):
        return graph.validate()
    return samml_io.load(graph)


def reference_run(program: Program, inputs: dict[str, Any]) -> SimResult:
    """Fixed-mode reference run; its written tensors size outputs and are the golden results."""
    from ..sim import run
    return run(program, inputs, mode="fixed")


def packed_inputs(program: Program, inputs: dict[str, Any]) -> dict[str, PackedTensor]:
    """Input tensors packed into their declared formats, values encoded as raw fixed point."""
    from ..sim.engine import Env, pack_inputs
    value = program.config.get("value", {})
    env = Env("fixed", FixedFormat(int(value.get("width", 32)), int(value.get("frac", 16))))
    return pack_inputs(program, inputs, env)


def build(graph: Program | str | os.PathLike, inputs: dict[str, Any] | None = None, *, bake: bool = False,
          probes: bool = True, op_factory: Callable | None = None, reference: SimResult | None = None) -> Build:
    """Elaborate ``graph`` (a Program or a graph.json path).

    ``inputs``: ``{name: array | scipy matrix | PackedTensor}`` for every input tensor (optional unless the
    graph lacks capacities). Returns a :class:`Build`.
    """
    program = load_program(graph)
    caps, images, ref = {}, {}, reference
    packed = None
    if inputs is not None:
        packed = packed_inputs(program, inputs)
        if ref is None:
            ref = reference_run(program, inputs)
        for name, p in packed.items():
            caps[name] = p.capacities()
        for name, p in ref.tensors.items():
            caps[name] = p.capacities()
    plan = plan_memories(program, caps)
    if packed is not None:
        for name, p in packed.items():
            images.update(tensor_images(plan, name, p))
    top = ProgramTop(program, plan, init=images if bake else None, op_factory=op_factory, probes=probes)
    return Build(program, top.plan, top, module_name(program.name), images, ref, bake, packed)


def wrapper_manifest(b: Build, wrapper: Any, module: str, interface: str) -> dict:
    """The manifest of ``b`` wrapped in ``wrapper`` (an interface top: AXI4-Lite, AXI4 master): its module name,
    interface and ports (clk, rst, then the wrapper's signature members)."""
    from amaranth.lib.wiring import In
    man = manifest(b)
    man["module"] = module
    man["interface"] = interface
    man["ports"] = [{"name": "clk", "dir": "in", "width": 1}, {"name": "rst", "dir": "in", "width": 1}] + [
        {"name": name, "dir": "in" if member.flow == In else "out", "width": member.shape.width
         if hasattr(member.shape, "width") else int(member.shape)}
        for name, member in wrapper.signature.members.items()]
    return man


def manifest(b: Build) -> dict:
    """The build's manifest (JSON-able): ports, memories, capacities, widths, host address map, channels."""
    program, plan, top = b.program, b.plan, b.top
    ports = []
    for name, member in top.signature.members.items():
        ports.append({"name": name, "dir": "in" if member.flow.name == "In" else "out",
                      "width": member.shape.width if hasattr(member.shape, "width") else int(member.shape)})
    ports = [{"name": "clk", "dir": "in", "width": 1}, {"name": "rst", "dir": "in", "width": 1}] + ports
    return {
        "fuseflow_hw": MANIFEST_VERSION,
        "name": program.name,
        "module": b.name,
        "baked": b.baked,
        "config": program.config,
        "ports": ports,
        "tensors": [{"name": t.name, "role": t.role, "shape": list(t.shape), "levels": list(t.levels),
                     "mode_order": list(t.mode_order), "block": list(t.block) if t.block else None,
                     "capacity": plan.capacities[t.name],
                     "capacity_source": plan.capacity_source[t.name]} for t in program.tensors.values()],
        "kernels": [{"name": k.name, "nodes": {nid: n.op for nid, n in k.nodes.items()}, "events": ev}
                    for k, ev in zip(program.kernels, top.events)],
        "channels": [{"kernel": c.kernel, "stream": c.stream, "src": c.src, "dst": c.dst, "kind": c.kind,
                      "depth": c.depth, "width": c.width} for chans in top.channels for c in chans],
        "overflow_ops": [f"{program.kernels[ki].name}.{nid}" for ki, nid in top.overflow_ops],
        "host": plan.to_json(),
    }


def check_inputs_fit(b: Build, inputs: dict[str, Any]) -> dict:
    """Raw memory images of ``inputs`` for an existing build; HardwareError when they do not fit."""
    packed = packed_inputs(b.program, inputs)
    images = {}
    for name, p in packed.items():
        images.update(tensor_images(b.plan, name, p))
    return images


def check_outputs_fit(plan: MemoryPlan, ref: SimResult) -> None:
    """Raise HardwareError if the reference run wrote more than the build's capacities hold."""
    from .memory import check_fits
    for name, p in ref.tensors.items():
        check_fits(name, plan.capacities[name], p.capacities())


__all__ = ["Build", "build", "manifest", "module_name", "reference_run", "packed_inputs", "HardwareError"]


# --- the Amaranth simulator ------------------------------------------------------------------------

class AmaranthDriver:
    """:class:`fuseflow.hw.top.HostDriver` on Amaranth's simulator (an async testbench context)."""

    def __init__(self, ctx: Any, top: ProgramTop) -> None:
        self.ctx, self.top = ctx, top

    def now(self) -> float:
        import time
        return time.perf_counter()

    async def write_burst(self, sel: int, base: int, words: list[int]) -> None:
        ctx, t = self.ctx, self.top
        ctx.set(t.host_sel, sel)
        ctx.set(t.host_we, 1)
        for i, w in enumerate(words):
            ctx.set(t.host_addr, base + i)
            ctx.set(t.host_wdata, w)
            await ctx.tick()
        ctx.set(t.host_we, 0)

    async def read_burst(self, sel: int, base: int, n: int) -> list[int]:
        # pipelined: entry base + i is addressed in cycle i and on host_rdata HOST_READ_LATENCY cycles later
        from .memory import HOST_READ_LATENCY
        ctx, t = self.ctx, self.top
        ctx.set(t.host_sel, sel)
        out = []
        for i in range(n + HOST_READ_LATENCY - 1):
            ctx.set(t.host_addr, base + min(i, n - 1))
            await ctx.tick()
            if i >= HOST_READ_LATENCY - 1:
                out.append(ctx.get(t.host_rdata))
        return out

    async def pulse_start(self) -> None:
        self.ctx.set(self.top.start, 1)
        await self.ctx.tick()
        self.ctx.set(self.top.start, 0)

    async def wait_done(self, max_cycles: int) -> bool:
        for _ in range(max_cycles):
            await self.ctx.tick()
            if self.ctx.get(self.top.done):
                return True
        return False


def run_amaranth(b: Build, images: dict | None = None, max_cycles: int = 100_000, vcd: str | None = None,
                 read_probes: Any = None, trace: bool = False) -> dict:
    """Run a :class:`Build` in Amaranth's simulator: load ``images`` (default: the build's own input images,
    unless baked), start, wait for done, read back. Returns :func:`fuseflow.hw.top.host_run`'s dict.

    ``trace=True`` also records every token pushed into every channel: ``result["trace"]`` maps
    ``"<kernel>.<stream> -> <node.port>"`` to the SAM-style token list (see :func:`localise`)."""
    import contextlib

    from amaranth.sim import Simulator

    from .top import host_run
    if images is None:
        images = {} if b.baked else b.images
    man = b.manifest()
    sim = Simulator(b.top)
    sim.add_clock(1e-8)
    result: dict[str, Any] = {}

    async def bench(ctx: Any) -> None:
        result.update(await host_run(AmaranthDriver(ctx, b.top), man, images, max_cycles, read_probes))

    sim.add_testbench(bench)
    traces: dict[str, list] = {}
    if trace:
        from amaranth.hdl import Value
        from amaranth.lib import data

        from ..samml.blocks import block_shape
        from .token import decode_fields, decode_value
        handles = list(b.top.fifo_handles)
        kernels = {k.name: k for k in b.program.kernels}
        blocks = [block_shape(kernels[ch.kernel].streams[ch.stream]) for ch, *_ in handles]

        async def monitor(ctx: Any) -> None:
            for ch, *_ in handles:
                traces[f"{ch.kernel}.{ch.name}"] = []
            sigs = [x for _, q, _, en in handles for x in (q.w.valid, q.w.ready, Value.cast(q.w.payload), en)]
            async for _clk, _rst, *vals in ctx.tick().sample(*sigs):
                for i, (ch, q, layout, _) in enumerate(handles):
                    w_valid, w_ready, raw, enabled = vals[4 * i:4 * i + 4]
                    if w_valid and w_ready and enabled:        # a kernel held in reset pushes nothing
                        view = data.Const(layout, raw)
                        block = blocks[i]
                        if block:                               # one block per token (docs/hardware.md, "Blocks")
                            tok = decode_value(raw, _kind_width(b.program, "val"), block)
                        else:
                            tok = decode_fields(view.data, view.ctrl, _kind_width(b.program, ch.kind),
                                                ch.kind == "val", repsig=ch.kind == "repsig")
                        traces[f"{ch.kernel}.{ch.name}"].append(tok)

        sim.add_process(monitor)
    cm = sim.write_vcd(vcd) if vcd else contextlib.nullcontext()
    with cm:
        sim.run()
    if trace:
        result["trace"] = traces
    return result


def _kind_width(program: Program, kind: str) -> int:
    if kind == "val":
        return int(program.config.get("value", {}).get("width", 32))
    return int(program.config.get("crd_width", 16))


def localise(b: Build, trace: dict[str, list]) -> list[tuple]:
    """Find the first op whose RTL output tokens differ from the reference model's on the RTL's own inputs.

    ``trace``: ``run_amaranth(..., trace=True)["trace"]``. Each node is re-run with ``fuseflow.sim.run_op``
    (fixed mode) on the tokens the RTL fed it (memory-backed ops get their arrays from the reference run);
    returns ``[(kernel, node, port, expected tokens, rtl tokens)]`` for the ops that disagree."""
    from ..sim import run_op
    from ..tensors.packed import DenseLevel
    program = b.program
    if b.reference is None:
        raise HardwareError("localise", "needs a build made with inputs (the reference run it replays)")
    packed = dict(b.packed or {})
    packed.update(b.reference.tensors)
    bad: list[tuple] = []
    for k in program.kernels:
        for nid, node in k.nodes.items():
            ins, outs = {}, {}
            for sid, s in k.streams.items():
                for d in s.dsts:
                    key = f"{k.name}.{sid} -> {d}"
                    if d.node == nid:
                        ins[d.port] = trace.get(key)
                    if s.src.node == nid and s.src.port not in outs:
                        outs[s.src.port] = trace.get(key)
            if any(v is None or not v or v[-1] != "D" for v in ins.values()):
                continue                                  # the RTL never completed this op's inputs
            params = {kk: v for kk, v in node.params.items() if kk != "tensor"}
            name = node.params.get("tensor")
            if name in packed and node.spec.memory == "read":
                t = packed[name]
                if node.spec.memory_array == "vals":
                    params["vals"] = [int(x) for x in t.vals]
                else:
                    lv = t.levels[node.params.get("level", 0)]
                    if isinstance(lv, DenseLevel):
                        params["dim"] = lv.size
                    else:
                        params["seg"], params["crd"] = [int(x) for x in lv.seg], [int(x) for x in lv.crd]
            if node.spec.memory == "write" or not node.spec.inputs:     # writers and root: nothing to replay
                continue
            try:
                want = run_op(node.op, params, ins, mode="fixed")
            except Exception as exc:  # noqa: BLE001 - the model rejects the RTL's inputs: report that
                bad.append((k.name, nid, "*", f"the model rejects the RTL's inputs: {exc}", ins))
                continue
            for port, got in outs.items():
                if got is not None and want.get(port) != got:
                    bad.append((k.name, nid, port, want.get(port), got))
    return bad
