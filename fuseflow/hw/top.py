"""The kernel top: a whole SAMML program as one Amaranth component with tensor memories and a host port.

Ports (all in the ``sync`` domain)::

    start       In(1)    pulse (while idle) to run the program
    busy        Out(1)   high from the cycle after start until done
    done        Out(1)   high once the last kernel has finished, until the next start
    cycles      Out(32)  kernel cycles of the last run (sum over kernels, the simulator's definition)
    host_sel    In(s)    memory index (manifest "sel"), or the register file (manifest "reg_sel")
    host_addr   In(a)    entry of the selected memory / register index
    host_wdata  In(d)    data to write (raw bits; values in two's complement)
    host_we     In(1)    write enable (memories only; ignored while busy)
    host_rdata  Out(d)   the entry selected by host_sel/host_addr HOST_READ_LATENCY (2) cycles earlier (a
                         read of latency 2, or of latency 1 and a register, before the last OR; memories read
                         back while idle: a memory shares its op's read port of latency 2 with the host)

Per kernel: one op module per node (``fuseflow.hw.ops.MODULES``), one channel FIFO per stream consumer (depth
from the stream or the program's ``fifo_depth``), fan-out written together when every consumer has room, and
unconnected outputs always ready; an op with a look-ahead rule (intersect) gets it when all its input channels
are deep enough (:func:`lookahead`) and reads its channels' second entries (``StreamFIFO.r_next``). Kernels run
in order; kernel k's ops and FIFOs are held in reset until its turn and keep their state (write counts) after it
until the next ``start``. Intermediates pass through the tensor memories.

Cycle counting matches the reference simulator exactly: cycle 0 of a kernel is its first cycle out of reset
(the root pushes reference 0 then), and the kernel's cycle count is 1 + the last cycle in which any of its
ops fired (any push or pop on any of its streams). A kernel is finished when every channel has delivered its
D and every unconnected output has emitted its D.

Probes (``probes=True``, the default): per channel a token counter and the FIFO level, readable as registers,
so a harness can name where a stuck run stopped.
"""

import copy
from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, ResetInserter, Shape, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..errors import HardwareError
from ..samml.blocks import block_shape
from ..samml.widths import INDEX_KINDS, stream_width
from ..tensors.fixed import FixedFormat
from . import token as tk
from ..samml.registry import MEMORY_READ_LATENCY, POLY_KINDS
from ..samml.storage import bounds_latency
from .memory import HOST_READ_LATENCY, REG_WIDTH, TensorMemory, attach_banked_read, attach_read, banked_port
from .ops.lanes import LANE_OPS, BlockLanes
from .stream import PeekFIFO, StreamFIFO

COUNTER_WIDTH = 32


@dataclass
class Channel:
    """One FIFO of the elaborated program (a stream consumer), as the manifest and harness see it."""
    kernel: str
    stream: str
    src: str
    dst: str
    kind: str
    depth: int
    width: int

    @property
    def name(self):
        return f"{self.stream} -> {self.dst}"


def _any_kind(kernel, node, program=None):
    """The kind of an op's ``any`` ports: the kind of the streams on its ``any`` inputs. The op modules take one
    kind for all of them, and a joiner may mix references and values on its ``ref<i>`` ports (the compiler does
    that for a union over a value stream): then the wider kind is taken (references and values are passed
    through unchanged, and consumers take the low bits they need)."""
    params = node.spec.resolve_params(dict(node.params), f"node {node.id}")
    ports = [name for name, port in node.spec.input_ports(params) if port.kind in POLY_KINDS]
    if not ports:
        return "ref"
    kinds = {s.kind for s in (kernel.driver(node.id, p) for p in ports) if s is not None}
    if not kinds:
        return "ref"
    if len(kinds) == 1:
        return kinds.pop()
    cfg = program.config if program is not None else {}
    crd_w = int(cfg.get("crd_width", 16))
    val_w = int(cfg.get("value", {}).get("width", 32))
    return "val" if val_w >= crd_w else "ref"


def op_params(program, node):
    """The node's parameters as the op module wants them (dense sizes filled in from the tensor)."""
    p = {k: v for k, v in node.params.items() if k not in ("seg", "crd", "vals")}
    name = p.get("tensor")
    if node.spec.memory_array == "level" and name is not None and p.get("dim") is None:
        decl = program.tensors[name]
        p["dim"] = decl.level_dim(p.get("level", 0))
    return p


def with_bounds_latency(program, plan, node):
    """``node``, or for a compressed level_scan of a tensor without ``bounds_latency`` a copy whose params give it
    as its memories' storage decides (:func:`fuseflow.samml.storage.bounds_latency`, the simulator's rule)."""
    p = node.params
    if not node.spec.has_param("bounds_latency") or p.get("format", "compressed") != "compressed" \
            or p.get("tensor") is None or p.get("bounds_latency") is not None:
        return node
    out = copy.copy(node)
    out.params = dict(p, bounds_latency=bounds_latency(program, program.tensors[p["tensor"]],
                                                       plan.capacities[p["tensor"]], p.get("level", 0)))
    return out


def default_factory(program, kernel, node):
    """Instantiate the op module of ``node`` from ``fuseflow.hw.ops.MODULES``."""
    from .ops import MODULES
    cls = MODULES.get(node.op)
    if cls is None:
        raise HardwareError(f"node {node.id}", f"no hardware module for op '{node.op}' "
                                               f"(have: {', '.join(sorted(MODULES))})")
    cfg = program.config
    value = cfg.get("value", {})
    fixed = FixedFormat(int(value.get("width", 32)), int(value.get("frac", 16)))
    connected = {pname for pname, _ in node.spec.input_ports(node.params) if kernel.driver(node.id, pname)}
    blocks = node_blocks(kernel, node)
    kw = dict(crd_width=int(cfg.get("crd_width", 16)), fixed=fixed, any_kind=_any_kind(kernel, node, program),
              connected=connected, lookahead=lookahead(cls, program, kernel, node))
    if blocks and node.op in LANE_OPS:          # element-wise on blocks: one scalar op per element
        return BlockLanes(cls, op_params(program, node), blocks=blocks, **kw)
    return cls(op_params(program, node), blocks=blocks, **kw)


def node_blocks(kernel, node):
    """``{"i_<p>"/"o_<p>": block shape}`` of the node's ports whose streams carry blocks
    (:func:`fuseflow.samml.blocks.block_shape`, the one definition)."""
    out = {}
    for pname, _ in node.spec.input_ports(node.params):
        s = kernel.driver(node.id, pname)
        if s is not None and block_shape(s):
            out[f"i_{pname}"] = block_shape(s)
    for s in kernel.streams.values():
        if s.src.node == node.id and block_shape(s):
            out[f"o_{s.src.port}"] = block_shape(s)
    return out


def lookahead(cls, program, kernel, node):
    """Whether op module ``cls`` gets its look-ahead rule at ``node``: every input channel holds at least
    ``cls.lookahead_depth`` tokens, and the registry asks for that depth at its parameters (``input_depth_for``:
    the intersect at arity 2); the reference simulator decides the same from the same depths."""
    if cls.lookahead_depth is None or node.spec.input_depth_for(node.params) is None:
        return False
    depth_default = int(program.config.get("fifo_depth", 2))
    streams = [kernel.driver(node.id, pname) for pname, _ in node.spec.input_ports(node.params)]
    return all(int(s.depth or depth_default) >= cls.lookahead_depth for s in streams if s is not None)


def _payload_width(port):
    return Shape.cast(port.signature.members["payload"].shape).width


def channel_width(program, stream, src) -> int:
    """Token bits (data field + ctrl) of a stream's FIFOs: a crd/ref/repsig stream's own width (its ``width``,
    from :mod:`fuseflow.samml.widths`), at most the producing port's; other streams the producing port's."""
    full = _payload_width(src)
    if stream.kind not in INDEX_KINDS or stream.width is None:
        return full
    return min(full, tk.field_width(stream_width(program, stream)) + 1)



def _token_eq(dst, src):
    """Assign token ``src`` to token ``dst``: field by field when their data widths differ (truncating or
    zero-extending the data), else as a whole (the Verilog of a program without narrow streams is unchanged)."""
    if Shape.cast(dst.shape()).width == Shape.cast(src.shape()).width:
        return [dst.eq(src)]
    return [dst.data.eq(src.data), dst.ctrl.eq(src.ctrl)]


class ProgramTop(wiring.Component):
    """A whole program in hardware. ``plan``: :class:`fuseflow.hw.memory.MemoryPlan`; ``init``: optional
    ``{memory name: [raw words]}`` baked into the memories; ``op_factory(program, kernel, node)`` builds op
    modules (default: :func:`default_factory`); ``block_ram``: the implementation of the block memories
    (:class:`fuseflow.hw.memory.TensorMemory`'s ``impl``; None: by the platform)."""

    def __init__(self, program, plan, init=None, op_factory=None, probes=True, block_ram=None):
        self.program = program
        self.block_ram = block_ram
        self.row_host = None              # pack_host: the AXI4 master's DMA writes and reads rows of entries
        self.banks = None                 # double_buffer: memories of two banks (a tiled build with buffers 2)
        self.plan = plan = copy.deepcopy(plan)      # the top adds its registers to its own copy
        self.init = dict(init or {})
        self.probes = probes
        factory = op_factory or default_factory
        unknown = set(self.init) - set(plan.by_name)
        if unknown:
            raise HardwareError("init", f"no memory called {', '.join(sorted(unknown))}")
        # ops, channels, probes: decided here so the manifest is known before elaboration
        self.ops = []                       # per kernel: {node id: component}
        self.channels = []                  # per kernel: [Channel]
        for k in program.kernels:
            ops = {}
            for nid, node in k.nodes.items():
                ops[nid] = op = factory(program, k, with_bounds_latency(program, plan, node))
                op._MustUse__silence = True      # the top owns it; the top itself warns if unused
            self.ops.append(ops)
            chans = []
            depth_default = int(program.config.get("fifo_depth", 2))
            for sid, s in k.streams.items():
                src = getattr(ops[s.src.node], f"o_{s.src.port}", None)
                if src is None:
                    raise HardwareError(f"stream {sid}", f"op module of '{s.src.node}' has no port o_{s.src.port}")
                for d in s.dsts:
                    if getattr(ops[d.node], f"i_{d.port}", None) is None:
                        raise HardwareError(f"stream {sid}", f"op module of '{d.node}' has no port i_{d.port}")
                    chans.append(Channel(k.name, sid, str(s.src), str(d), s.kind, int(s.depth or depth_default),
                                         channel_width(program, s, src)))
            self.channels.append(chans)
        check_kernel_reads(program, plan, self.ops)
        # what can fire in each kernel, in the order elaborate() lists it (for the last_event register)
        self.events = []
        for k in program.kernels:
            ev = []
            for sid, s in k.streams.items():
                ev += [f"{sid} -> {d} popped" for d in s.dsts]
                ev.append(f"{sid} pushed")
            for nid, node in k.nodes.items():
                for pname, _ in node.spec.output_ports(node.params):
                    if k.output_stream(nid, pname) is None and getattr(self.ops[len(self.events)][nid],
                                                                       f"o_{pname}", None) is not None:
                        ev.append(f"{nid}.{pname} emitted (unconnected)")
            self.events.append(ev)
        for k in program.kernels:
            plan.add_register(f"kernel.{k.name}.last_event",
                              doc="1 + index in the manifest's kernel events of what fired last (0: nothing)")
        # registers: the plan's fixed ones, then writer counts, then probes
        self.count_regs = []                # (register, kernel index, node id, count member)
        for ki, (k, ops) in enumerate(zip(program.kernels, self.ops)):
            for nid, op in ops.items():
                for array, mp in getattr(op, "memories", {}).items():
                    if mp.writes and mp.count:
                        r = plan.add_register(f"count.{k.name}.{nid}.{mp.count}",
                                              doc=f"entries {nid} wrote to {array}")
                        self.count_regs.append((r, ki, nid, mp.count))
        # ops with a sticky capacity flag (spacc: a coordinate beyond its dim)
        self.overflow_ops = [(ki, nid) for ki, ops in enumerate(self.ops) for nid, op in ops.items()
                             if "overflow" in op.signature.members and op.signature.members["overflow"].flow == Out]
        if self.overflow_ops:
            plan.add_register("op_overflow", doc="bit i: op i of manifest 'overflow_ops' exceeded its capacity")
        self.probe_regs = []
        if probes:
            for ki, chans in enumerate(self.channels):
                for ci, ch in enumerate(chans):
                    r1 = plan.add_register(f"probe.{ch.kernel}.{ch.name}.tokens", doc="tokens popped")
                    r2 = plan.add_register(f"probe.{ch.kernel}.{ch.name}.level", doc="tokens waiting")
                    self.probe_regs.append((ki, ci, r1, r2))
        dw, aw, sw = plan.data_width, plan.addr_width, plan.sel_width
        super().__init__({
            "start": In(1),
            "busy": Out(1),
            "done": Out(1),
            "cycles": Out(COUNTER_WIDTH),
            "host_sel": In(sw),
            "host_addr": In(aw),
            "host_wdata": In(dw),
            "host_we": In(1),
            "host_rdata": Out(dw),
        })

    def pack_host(self, beat_bits: int, packs: dict) -> None:
        """Before elaboration, for the AXI4 master's DMA (:mod:`fuseflow.hw.axi_master`): memory ``name`` holds
        rows of ``packs[name]`` entries (:class:`~fuseflow.hw.memory.TensorMemory`'s ``pack``); ``host_addr``
        then names a row of the selected memory, ``row_host.wdata`` (``beat_bits``) writes the row with
        ``host_we`` (entry j in slot j of ``beat_bits // packs[name]`` bits, as
        :func:`fuseflow.samml.offchip.pack_beats` lays a beat out) and ``row_host.rdata`` shows it so
        ``HOST_READ_LATENCY`` cycles after ``host_sel``/``host_addr``. Without this call nothing changes."""
        from types import SimpleNamespace
        self.row_host = SimpleNamespace(packs=dict(packs), bits=beat_bits,
                                        wdata=Signal(beat_bits, name="host_row_wdata"),
                                        rdata=Signal(beat_bits, name="host_row_rdata"))

    def double_buffer(self, names) -> None:
        """Before elaboration, for the AXI4 master's tile sequencer with ``buffers`` 2 (:mod:`fuseflow.hw.sequencer`):
        the memories ``names`` get two banks (two memories of the planned depth); the kernel reads bank
        ``banks.run``, the host port writes bank ``banks.host`` (also while the top runs: the sequencer never
        writes the bank the kernel reads) and reads it while idle. Without this call nothing changes."""
        from types import SimpleNamespace
        unknown = set(names) - set(self.plan.by_name)
        if unknown:
            raise HardwareError("double buffer", f"no memory called {', '.join(sorted(unknown))}")
        self.banks = SimpleNamespace(names=set(names), run=Signal(name="bank_run"), host=Signal(name="bank_host"),
                                     read=Signal(name="bank_read"), mems={})

    # -----------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        plan, program = self.plan, self.program
        self.fifo_handles = []            # (Channel, StreamFIFO, payload layout): for stream tracing in simulation
        self.finish_handles = []          # (StreamFIFO, consumer's In port, its finish flag, kernel enable): tests

        # memories --------------------------------------------------------------------------------
        mems = {}
        host_rd = {}
        writers = {}                      # memory name -> [(waddr, wdata, wen)]
        for spec in plan.memories:
            mem = TensorMemory.from_spec(spec, self.init.get(spec.name), impl=self.block_ram, pack=self._pack(spec))
            mems[spec.name] = mem
            m.submodules[f"mem_{_ident(spec.name)}"] = mem
            writers[spec.name] = []
            if self._banked(spec):                # the second bank (double_buffer)
                other = TensorMemory.from_spec(spec, self.init.get(spec.name), impl=self.block_ram,
                                               pack=self._pack(spec))
                m.submodules[f"mem_{_ident(spec.name)}_bank1"] = other
                self.banks.mems[spec.name] = (mem, other)

        idle = Signal()                   # no run: the host may write, and reads memories through an op's port
        if self.banks is not None:        # the bank a read shows: the host's while idle, else the kernel's
            m.d.comb += self.banks.read.eq(Mux(idle, self.banks.host, self.banks.run))
        # kernel control ----------------------------------------------------------------------------
        en = [Signal(name=f"en_{_ident(k.name)}") for k in program.kernels]
        kdone = [Signal(name=f"kdone_{_ident(k.name)}") for k in program.kernels]
        kcycles = [Signal(COUNTER_WIDTH, name=f"kcycles_{_ident(k.name)}") for k in program.kernels]

        fifo_stats = []                    # per kernel: [(count, level)]
        last_events = []
        for ki, k in enumerate(program.kernels):
            km = Module()
            stats, last = self._kernel(km, ki, k, mems, writers, host_rd, idle, en, kdone, kcycles)
            last_events.append(last)
            m.submodules[f"kernel_{_ident(k.name)}"] = ResetInserter(~en[ki])(km)
            fifo_stats.append(stats)

        total, wall, overflow = self._sequencer(m, idle, en, kdone, kcycles)
        self._write_ports(m, mems, writers, host_rd, idle, overflow)
        regs = self._registers(total, wall, overflow, kcycles, last_events, fifo_stats)
        self._host_read(m, regs, host_rd)
        return m

    def _banked(self, spec):
        """Whether memory ``spec`` has two banks (:meth:`double_buffer`)."""
        return self.banks is not None and spec.name in self.banks.names

    def _pack(self, spec):
        """Entries per row of memory ``spec`` (1 unless :meth:`pack_host` packs it)."""
        return self.row_host.packs.get(spec.name, 1) if self.row_host is not None else 1

    def _host_entry(self, spec):
        """The host's entry address in memory ``spec`` (with rows of several entries: the row's first)."""
        return self.host_addr if self._pack(spec) == 1 else self.host_addr << (self._pack(spec).bit_length() - 1)

    def _kernel(self, km, ki, k, mems, writers, host_rd, idle, en, kdone, kcycles):
        """Kernel ``k`` (index ``ki``) into ``km``: its ops, channels, memory ports, cycle count and finish.
        Returns its probe counters per channel (count, level) and its last-event register."""
        ops = self.ops[ki]
        for nid, op in ops.items():
            km.submodules[f"op_{_ident(nid)}"] = op
        fires, dones, stats = [], [], []
        self._channels(km, ki, k, ops, en, fires, dones, stats)
        self._open_outputs(km, k, ops, fires, dones)
        self._memory_ports(km, ki, k, ops, mems, writers, host_rd, idle, en)
        return stats, self._finish(km, ki, k, fires, dones, kdone, kcycles)

    def _channels(self, km, ki, k, ops, en, fires, dones, stats):
        """One FIFO per (stream, consumer) between the ops; appends each transfer to ``fires``, each
        consumer's done flag to ``dones`` and (probes) each channel's counters to ``stats``."""
        chans = iter(self.channels[ki])
        for sid, s in k.streams.items():
            src = getattr(ops[s.src.node], f"o_{s.src.port}")
            qs = []
            for d in s.dsts:
                ch = next(chans)
                # the stream's width: narrower than the producer's port when the stream's data allows
                # (the op keeps crd_width inside; its output is truncated into the FIFO and the consumer's
                # input zero-extended from it; docs/hardware.md, "Stream widths")
                dop = ops[d.node]
                if d.port in dop.pop2_ports():
                    q = PeekFIFO(ch.width - 1, ch.depth, held=d.port not in dop.passed_ports())
                else:
                    q = StreamFIFO(ch.width - 1, ch.depth)
                self.fifo_handles.append((ch, q, tk.token_layout(ch.width - 1), en[ki]))
                km.submodules[f"q_{_ident(sid)}__{_ident(str(d))}"] = q
                qs.append(q)
                dst = getattr(ops[d.node], f"i_{d.port}")
                view = q.r.payload
                km.d.comb += [
                    dst.payload.data.eq(view.data),
                    dst.payload.ctrl.eq(view.ctrl),
                    dst.valid.eq(q.r.valid),
                    q.r.ready.eq(dst.ready),
                ]
                if d.port in ops[d.node].peek_ports():
                    if ch.depth < ops[d.node].lookahead_depth:
                        raise HardwareError(f"node {d.node}", f"look-ahead on port {d.port} needs a channel "
                                                              f"of depth >= {ops[d.node].lookahead_depth}, "
                                                              f"got {ch.depth}")
                    nxt = getattr(ops[d.node], f"i_{d.port}_next")
                    km.d.comb += [
                        nxt.data.eq(q.r_next.data),
                        nxt.ctrl.eq(q.r_next.ctrl),
                        getattr(ops[d.node], f"i_{d.port}_next_valid").eq(q.r_next_valid),
                    ]
                if d.port in dop.third_ports():
                    km.d.comb += [*_token_eq(getattr(dop, f"i_{d.port}_third"), q.r_third),
                                  getattr(dop, f"i_{d.port}_third_valid").eq(q.r_third_valid)]
                if d.port in dop.pop2_ports():
                    km.d.comb += q.r_pop2.eq(getattr(dop, f"pop2_{d.port}"))
                if d.port in ops[d.node].after_ports():
                    behind = getattr(ops[d.node], f"i_{d.port}_behind")
                    stay = getattr(ops[d.node], f"i_{d.port}_stay")
                    km.d.comb += [*_token_eq(behind, q.r_behind), *_token_eq(stay, q.r_stay)]
                pop = Signal(name=f"pop_{_ident(sid)}__{_ident(str(d))}")
                km.d.comb += pop.eq(q.r.valid & dst.ready)
                fires.append(pop)
                if self.probes:
                    cnt = Signal(COUNTER_WIDTH, name=f"n_{_ident(sid)}__{_ident(str(d))}")
                    with km.If(pop):
                        # a channel read twice in a cycle (PeekFIFO) counts both tokens
                        two = q.r_pop2 & q.r_next_valid if isinstance(q, PeekFIFO) else 0
                        km.d.sync += cnt.eq(cnt + 1 + two)
                    stats.append((cnt, q.level))
            # fan-out: written together when every FIFO has room
            room = Const(1)
            for q in qs:
                room = room & q.w.ready
            km.d.comb += src.ready.eq(room)
            for q in qs:
                km.d.comb += [*_token_eq(q.w.payload, src.payload), q.w.valid.eq(src.valid & room)]
            push = Signal(name=f"push_{_ident(sid)}")
            km.d.comb += push.eq(src.valid & room)
            fires.append(push)
            # a consumer has taken the done token (the stream's last) once the FIFO that received it is
            # empty again: a register set by the push and the FIFO's level, equal in every cycle to a flag
            # set by the pop, whose enable (the consumer's ready) would end the consumer's firing path
            pushed_done = Signal(name=f"pushedD_{_ident(sid)}")
            with km.If(push & tk.is_done(qs[0].w.payload)):
                km.d.sync += pushed_done.eq(1)
            for q, d in zip(qs, s.dsts):
                seen = Signal(name=f"seenD_{_ident(sid)}__{_ident(str(d))}")
                km.d.comb += seen.eq(pushed_done & ~q.r.valid)      # level == 0, a registered flag
                dones.append(seen)
                self.finish_handles.append((q, getattr(ops[d.node], f"i_{d.port}"), seen, en[ki]))

    def _open_outputs(self, km, k, ops, fires, dones):
        """Outputs without a stream (always ready) and ops that report their own completion."""
        # unconnected outputs: always ready
        for nid, op in ops.items():
            node = k.nodes[nid]
            for pname, _ in node.spec.output_ports(node.params):
                if k.output_stream(nid, pname) is not None:
                    continue
                o = getattr(op, f"o_{pname}", None)
                if o is None:
                    continue
                km.d.comb += o.ready.eq(1)
                fires.append(o.valid)
                seen = Signal(name=f"seenD_{_ident(nid)}_{pname}")
                with km.If(o.valid & tk.is_done(o.payload)):
                    km.d.sync += seen.eq(1)
                dones.append(seen)
        # ops that report their own completion (writers: every write landed)
        for nid, op in ops.items():
            if "done" in op.signature.members and op.signature.members["done"].flow == Out:
                dones.append(op.done)

    def _memory_ports(self, km, ki, k, ops, mems, writers, host_rd, idle, en):
        """The ops' memory reads (the first of latency 2 shared with the host while idle) and writers."""
        plan = self.plan
        # memory interfaces
        for nid, op in ops.items():
            node = k.nodes[nid]
            for array, mp in getattr(op, "memories", {}).items():
                spec = plan.memory(node.params.get("tensor"), node.params.get("level", 0), array)
                if spec is None:
                    raise HardwareError(f"node {nid}", f"no memory for array '{array}' of tensor "
                                                       f"'{node.params.get('tensor')}'")
                for prefix in mp.reads:
                    latency = mp.latency(prefix)
                    if spec.storage == "block" and latency == 0:
                        raise HardwareError(f"node {nid}", f"reads block-RAM memory {spec.name} "
                                                           f"combinationally")
                    # the host reads through the first op port of latency 2 (or, in block RAM, of latency 1)
                    # while idle: a block RAM then has one write and one read port (no copy for a port of
                    # the host's own); a port with an enable reads whenever the top is idle
                    share = spec.name not in host_rd and (latency == MEMORY_READ_LATENCY or
                                                          (latency == 1 and spec.storage == "block"))
                    addr = read_en = None
                    if share:
                        addr = Mux(idle, self._host_entry(spec), getattr(op, f"{prefix}_addr"))
                        if prefix in mp.held_reads:
                            read_en = idle | getattr(op, f"{prefix}_en")
                    if self._banked(spec):
                        rp = attach_banked_read(km, self.banks.mems[spec.name], self.banks.read, op, prefix, mp,
                                                addr, read_en)
                    else:
                        rp = attach_read(km, mems[spec.name], op, prefix, mp, addr, read_en)
                    if share:
                        host_rd[spec.name] = rp
                for prefix in mp.writes:
                    # gated by the kernel's enable: an op held in reset may drive its write enable
                    writers[spec.name].append((getattr(op, f"{prefix}_waddr"), getattr(op, f"{prefix}_wdata"),
                                               getattr(op, f"{prefix}_wen") & en[ki]))

    def _finish(self, km, ki, k, fires, dones, kdone, kcycles):
        """The kernel's cycle count, last event and registered finish flag. Returns the last-event value."""
        # cycle counting and finish. The transfers are registered first (one flip-flop per event) and
        # counted a cycle later: an OR over every transfer of the kernel would otherwise end each op's
        # firing path (the critical path of the kernel tops). cyc_next keeps the value kcycles took from
        # the firing cycle, so kcycles is the count of the event's own cycle, settled a cycle after it.
        cyc = Signal(COUNTER_WIDTH, name=f"cyc_{_ident(k.name)}")
        cyc_next = Signal(COUNTER_WIDTH, name=f"cyc_next_{_ident(k.name)}")
        fired = Signal(len(fires), name=f"fired_{_ident(k.name)}")
        km.d.sync += [fired.eq(Cat(*fires)), cyc_next.eq(cyc + 1)]
        fire = Signal(name=f"fire_{_ident(k.name)}")
        km.d.comb += fire.eq(fired.any())
        assert len(fires) == len(self.events[ki])
        last = Signal(range(len(fires) + 1), name=f"last_event_{_ident(k.name)}")
        if fires:                                # the highest-numbered event of the last firing cycle
            # found by trees (log2 levels), not a priority chain over every event of the kernel, in two
            # registered stages: each part of EVENT_PART events its highest, then the highest part (one tree
            # over a whole kernel's events ended at last_idx: fused_chain3's critical path at some placements).
            # last_event settles three cycles after the event, before the host can see done
            any_part, top_idx = _highest_in_parts(km, fired, f"events_{_ident(k.name)}")
            last_idx = Signal(range(max(len(fires), 2)), name=f"last_idx_{_ident(k.name)}")
            seen = Signal(name=f"seen_event_{_ident(k.name)}")
            with km.If(any_part):
                km.d.sync += [last_idx.eq(top_idx), seen.eq(1)]
            km.d.comb += last.eq(Mux(seen, last_idx + 1, 0))
        # the finish, registered: the AND over every finish flag of the kernel (spread over the whole
        # kernel) ends at a flip-flop, not at the sequencer. Nothing fires in a finished kernel, so a cycle
        # later kcycles holds the count of its last firing (the hand-over takes two cycles)
        finished = Signal(name=f"finished_{_ident(k.name)}")
        km.d.comb += finished.eq(_all(dones))
        km.d.sync += kdone[ki].eq(finished)
        with km.If(~kdone[ki]):
            km.d.sync += cyc.eq(cyc + 1)
        with km.If(fire):
            km.d.sync += kcycles[ki].eq(cyc_next)
        return last

    def _sequencer(self, m, idle, en, kdone, kcycles):
        """Runs the kernels one after another from ``start``. Returns the cycle and overflow registers."""
        plan, nk = self.plan, len(self.program.kernels)
        phase = Signal(2)                 # 0 idle, 1 launch, 2 run
        cur = Signal(range(max(nk, 2)))
        total = Signal(COUNTER_WIDTH)
        wall = Signal(COUNTER_WIDTH)
        overflow = Signal(len(plan.memories) or 1)
        m.d.comb += [self.busy.eq(phase != 0), self.cycles.eq(total), idle.eq(phase == 0)]
        with m.Switch(phase):
            with m.Case(0):
                with m.If(self.start):
                    m.d.sync += [phase.eq(1), self.done.eq(0), total.eq(0), wall.eq(0), overflow.eq(0),
                                 cur.eq(0)]
                    m.d.sync += [e.eq(0) for e in en]
            with m.Case(1):
                m.d.sync += [en[0].eq(1), phase.eq(2), wall.eq(wall + 1)]
            with m.Case(2):
                m.d.sync += wall.eq(wall + 1)
                for ki in range(nk):
                    with m.If((cur == ki) & kdone[ki]):
                        m.d.sync += total.eq(total + kcycles[ki])
                        if ki + 1 < nk:
                            m.d.sync += [en[ki + 1].eq(1), cur.eq(ki + 1)]
                        else:
                            m.d.sync += [phase.eq(0), self.done.eq(1)]
        return total, wall, overflow

    def _write_ports(self, m, mems, writers, host_rd, idle, overflow):
        """Memory write ports: the writers' (registered) and the host's while idle; host reads of their own."""
        plan, rh, pack = self.plan, self.row_host, self._pack
        for spec in plan.memories:
            if self._banked(spec):
                self._banked_write_ports(m, spec, writers, host_rd)
                continue
            mem = mems[spec.name]
            wp = mem.write_port()
            host_w = self.host_we & (self.host_sel == spec.sel) & idle
            if pack(spec) > 1:                    # a row from the DMA's beat (pack_host)
                k, slot = pack(spec), rh.bits // pack(spec)
                m.d.comb += [wp.row_addr.eq(self.host_addr), wp.row_en.eq(host_w),
                             wp.row_data.eq(Cat(*[rh.wdata[j * slot:j * slot + spec.width] for j in range(k)]))]
            else:
                m.d.comb += [wp.addr.eq(self.host_addr), wp.data.eq(self.host_wdata if rh is None else rh.wdata),
                             wp.en.eq(host_w)]
            if writers[spec.name]:
                # the writers' write, registered and applied in the next cycle: a writer's firing (from its
                # input FIFO's head through its decision) then ends at flip-flops, not at the memory's write
                # enable (LUT RAM's WRE on every cell, a block's port B). Nothing reads a written memory in the
                # writer's kernel (check_kernel_reads), and the hand-over to the next kernel and the host's
                # done come two cycles after the last firing. The capacity check reads the registered address
                # (the writer's address multiplexers and the compare are not one path)
                ident = _ident(spec.name)
                w_addr = Signal(max(len(a) for a, _, _ in writers[spec.name]), name=f"waddr_{ident}")
                w_data, w_en = Signal.like(wp.data, name=f"wdata_{ident}"), Signal(name=f"wen_{ident}")
                m.d.sync += w_en.eq(0)
                for waddr, wdata, wen in writers[spec.name]:
                    with m.If(wen):
                        m.d.sync += [w_addr.eq(waddr), w_data.eq(wdata), w_en.eq(1)]
                fits = w_addr < spec.capacity
                with m.If(w_en):
                    m.d.comb += [wp.addr.eq(w_addr), wp.data.eq(w_data), wp.en.eq(fits)]
                    with m.If(~fits):
                        m.d.sync += overflow[spec.sel].eq(1)
            if spec.name not in host_rd:          # no op port of latency 2 to share: one of its own (a block
                # memory's of latency 2 like every block read, the others' of 1, registered after their multiplexer)
                host_rd[spec.name] = mem.read_port(MEMORY_READ_LATENCY if spec.storage == "block" else 1)
                m.d.comb += host_rd[spec.name].addr.eq(self._host_entry(spec))

    def _banked_write_ports(self, m, spec, writers, host_rd):
        """A memory of two banks (:meth:`double_buffer`): the host writes bank ``banks.host``, also while the top
        runs; no writer op (an input); a host read port of its own when no op port is shared."""
        if writers[spec.name]:
            raise HardwareError(f"memory {spec.name}", "is written by the kernel: it cannot have two banks")
        rh, pack = self.row_host, self._pack(spec)
        banks = self.banks.mems[spec.name]
        for b, mem in enumerate(banks):
            wp = mem.write_port()
            host_w = self.host_we & (self.host_sel == spec.sel) & (self.banks.host == b)
            if pack > 1:
                slot = rh.bits // pack
                m.d.comb += [wp.row_addr.eq(self.host_addr), wp.row_en.eq(host_w),
                             wp.row_data.eq(Cat(*[rh.wdata[j * slot:j * slot + spec.width] for j in range(pack)]))]
            else:
                m.d.comb += [wp.addr.eq(self.host_addr), wp.data.eq(self.host_wdata if rh is None else rh.wdata),
                             wp.en.eq(host_w)]
        if spec.name not in host_rd:
            host_rd[spec.name] = banked_port(m, banks, self.banks.read,
                                             MEMORY_READ_LATENCY if spec.storage == "block" else 1,
                                             self._host_entry(spec))

    def _registers(self, total, wall, overflow, kcycles, last_events, fifo_stats):
        """The register file: register name -> value."""
        program = self.program
        regs = {}                          # register name -> value
        op_over = Cat(*[self.ops[ki][nid].overflow for ki, nid in self.overflow_ops]) if self.overflow_ops else Const(0)
        regs["status"] = Cat(self.busy, self.done, overflow.any(), op_over.any())
        if self.overflow_ops:
            regs["op_overflow"] = op_over
        regs["cycles"] = total
        regs["wall_cycles"] = wall
        for ki, k in enumerate(program.kernels):
            regs[f"kernel.{k.name}.cycles"] = kcycles[ki]
            regs[f"kernel.{k.name}.last_event"] = last_events[ki]
        regs["overflow"] = overflow
        for r, ki, nid, member in self.count_regs:
            regs[r.name] = getattr(self.ops[ki][nid], member)
        for ki, ci, r1, r2 in self.probe_regs:
            cnt, lvl = fifo_stats[ki][ci]
            regs[r1.name], regs[r2.name] = cnt, lvl
        return regs

    def _host_read(self, m, regs, host_rd):
        """The host port's read data (HOST_READ_LATENCY 2) from the memories and the register file."""
        plan, rh, pack = self.plan, self.row_host, self._pack
        # host read (HOST_READ_LATENCY = 2): a memory read through a port of latency 2 (its op's, or a block
        # memory's own) shows the entry from a register (on ECP5 a block memory's is the DP16KD's output
        # register) and is picked after it by an AND with its one-hot select registered twice; memories with a
        # port of latency 1 of their own and the register file (picked by the select of the previous cycle) are
        # multiplexed into one more register; host_rdata is the OR of those
        reg_rdata = Signal(plan.data_width)
        m.d.sync += reg_rdata.eq(0)
        with m.Switch(self.host_addr):
            for r in plan.registers:
                with m.Case(r.index):
                    m.d.sync += reg_rdata.eq(regs[r.name])
        sel_q = Signal.like(self.host_sel)
        m.d.sync += sel_q.eq(self.host_sel)
        rest = Signal(plan.data_width, name="host_rdata_rest")
        rest_q = Signal(plan.data_width, name="host_rdata_rest_q")
        m.d.sync += rest_q.eq(rest)
        picked = [rest_q]
        with m.Switch(sel_q):
            for spec in plan.memories:
                if host_rd[spec.name].latency == 1:
                    with m.Case(spec.sel):
                        m.d.comb += rest.eq(host_rd[spec.name].data)
            with m.Case(plan.reg_sel):
                m.d.comb += rest.eq(reg_rdata)
        hots = {}
        for spec in plan.memories:
            if host_rd[spec.name].latency != MEMORY_READ_LATENCY:
                continue
            hot = Signal(name=f"host_sel_{_ident(spec.name)}")
            hot_q = Signal(name=f"host_sel_q_{_ident(spec.name)}")
            m.d.sync += [hot.eq(self.host_sel == spec.sel), hot_q.eq(hot)]
            hots[spec.name] = hot_q
            picked.append(Mux(hot_q, host_rd[spec.name].data, 0))
        m.d.comb += self.host_rdata.eq(_or_all(picked))
        if rh is not None:                        # rows for the DMA (pack_host), picked the same way
            rest_row, rest_row_q = Signal(rh.bits, name="host_row_rest"), Signal(rh.bits, name="host_row_rest_q")
            m.d.sync += rest_row_q.eq(rest_row)
            rows = [rest_row_q]
            for spec in plan.memories:
                port, k = host_rd[spec.name], pack(spec)
                slot = rh.bits // k
                beat = Cat(*[Cat(port.row[j * spec.width:(j + 1) * spec.width], Const(0, slot - spec.width))
                             for j in range(k)]) if k > 1 else port.data
                if spec.name in hots:
                    rows.append(Mux(hots[spec.name], beat, 0))
                else:
                    with m.If(sel_q == spec.sel):
                        m.d.comb += rest_row.eq(beat)
            m.d.comb += rh.rdata.eq(_or_all(rows))
        assert HOST_READ_LATENCY == MEMORY_READ_LATENCY == 2


def check_kernel_reads(program, plan, ops):
    """Raise :class:`HardwareError` when a kernel both writes and reads a memory: a writer's write lands a cycle
    after its firing (the top registers it), and a DP16KD read of the entry its other port writes in the same cycle
    is undefined (:mod:`fuseflow.hw.block_ram`), so no kernel may rely on reading what it writes. ``ops``: per
    kernel {node id: module}."""
    for k, kops in zip(program.kernels, ops):
        written, read = {}, {}
        for nid, op in kops.items():
            node = k.nodes[nid]
            for array, mp in getattr(op, "memories", {}).items():
                spec = plan.memory(node.params.get("tensor"), node.params.get("level", 0), array)
                if spec is None:
                    continue
                if mp.writes:
                    written[spec.name] = nid
                if mp.reads:
                    read[spec.name] = nid
        for name in sorted(set(written) & set(read)):
            raise HardwareError(f"kernel {k.name}", f"{written[name]} writes memory {name} while {read[name]} "
                                                    f"reads it (writes land a cycle after the firing; read during "
                                                    f"write is undefined in block RAM)")


#: events per part of the last_event encoder's first stage
EVENT_PART = 16


def _highest(bits):
    """(any bit set, index of the highest set bit of ``bits``; 0 when none) as a tree of multiplexers."""
    n = len(bits)
    if n == 1:
        return bits[0], Const(0, 0)
    h = 1 << ((n - 1).bit_length() - 1)              # the largest power of two below n
    lo_any, lo_idx = _highest(bits[:h])
    hi_any, hi_idx = _highest(bits[h:])
    k = (h - 1).bit_length()                         # index bits within the lower half
    low = Mux(hi_any, hi_idx, lo_idx)[:k] if k else Const(0, 0)
    return lo_any | hi_any, Cat(low, hi_any)


def _highest_in_parts(m, bits, name, part=EVENT_PART):
    """(any bit set, index of the highest set bit) of ``bits`` as they were a cycle ago: each part of ``part`` bits
    finds its highest (a tree, :func:`_highest`) into registers, then a tree over the parts picks the highest
    part and a multiplexer its index."""
    parts = [bits[i:i + part] for i in range(0, len(bits), part)]
    part_any = Signal(len(parts), name=f"{name}_any")
    part_idx = [Signal(range(part), name=f"{name}_idx{pi}") for pi in range(len(parts))]
    for pi, p in enumerate(parts):
        a, idx = _highest(p)
        m.d.sync += [part_any[pi].eq(a), part_idx[pi].eq(idx)]
    any_part, top_part = _highest(part_any)
    return any_part, Cat(Array(part_idx)[top_part], top_part)


def _or_all(values):
    r = values[0]
    for v in values[1:]:
        r = r | v
    return r


def _any(values):
    values = list(values)
    if not values:
        return Const(0)
    return Cat(*values).any()


def _all(values):
    values = list(values)
    if not values:
        return Const(1)
    return Cat(*values).all()


def _ident(name):
    return "".join(c if c.isalnum() else "_" for c in str(name))


assert REG_WIDTH == COUNTER_WIDTH


# --- host protocol (simulator-independent) --------------------------------------------------------

class HostDriver:
    """What :func:`host_run` needs from a simulator: bursts on the host port, a start pulse, and a free run
    until ``done`` (no per-cycle Python where the simulator allows it). All methods are coroutines."""

    async def write_burst(self, sel, base, words):
        raise NotImplementedError

    async def read_burst(self, sel, base, n):
        raise NotImplementedError

    async def pulse_start(self):
        raise NotImplementedError

    async def wait_done(self, max_cycles):
        """Run until ``done`` rises or ``max_cycles`` pass; return whether done rose."""
        raise NotImplementedError

    def now(self):
        import time
        return time.perf_counter()


def _signed(word, width):
    word &= (1 << width) - 1
    return word - (1 << width) if word >> (width - 1) else word


async def host_run(drv, man, images, max_cycles, read_probes=None):
    """Load ``images`` ({memory name: raw words}) through the host port, pulse start, wait for done (at most
    ``max_cycles``), then read the registers and every written tensor. Returns a JSON-able dict.

    ``man``: the build manifest (:func:`fuseflow.hw.elaborate.manifest`)."""
    host = man["host"]
    mems = {m["name"]: m for m in host["memories"]}
    regs = {r["name"]: r["index"] for r in host["registers"]}
    reg_sel = host["reg_sel"]
    t0 = drv.now()
    for name, words in images.items():
        if words:
            await drv.write_burst(mems[name]["sel"], 0, [int(w) for w in words])
    t1 = drv.now()
    await drv.pulse_start()
    ok = await drv.wait_done(max_cycles)
    t2 = drv.now()
    names = list(regs)
    want = [n for n in names if not n.startswith("probe.")]
    if read_probes or (read_probes is None and not ok):
        want = names
    vals = {}
    # registers are contiguous: read them in one burst up to the highest wanted index
    top = max(regs[n] for n in want) + 1
    words = await drv.read_burst(reg_sel, 0, top)
    for n in want:
        vals[n] = words[regs[n]]
    out = {
        "done": bool(ok),
        "status": vals["status"],
        "cycles": vals["cycles"],
        "wall_cycles": vals["wall_cycles"],
        "overflow": vals["overflow"],
        "op_overflow": vals.get("op_overflow", 0),
        "kernel_cycles": {k["name"]: vals[f"kernel.{k['name']}.cycles"] for k in man["kernels"]},
        "last_event": {k["name"]: (k["events"][vals[f"kernel.{k['name']}.last_event"] - 1]
                                   if vals.get(f"kernel.{k['name']}.last_event") else None)
                       for k in man["kernels"] if "events" in k},
        "counts": {n[len("count."):]: v for n, v in vals.items() if n.startswith("count.")},
        "probes": {},
        "load_seconds": t1 - t0,
        "run_seconds": t2 - t1,
        "tensors": {},
    }
    for n, v in vals.items():
        if n.startswith("probe."):
            key, what = n[len("probe."):].rsplit(".", 1)
            out["probes"].setdefault(key, {})[what] = v
    if ok:
        for t in man["tensors"]:
            if t["role"] != "input":
                out["tensors"][t["name"]] = await _read_tensor(drv, t, mems, man)
    return out


async def _read_tensor(drv, t, mems, man):
    name = t["name"]
    block = t.get("block") or [1] * len(t["shape"])     # levels are over block coordinates
    dims = [t["shape"][m] // block[m] for m in t["mode_order"]]
    positions = 1
    levels = []
    for lv, fmt in enumerate(t["levels"]):
        if fmt == "dense":
            positions *= dims[lv]
            levels.append({"dense": dims[lv]})
            continue
        seg_m, crd_m = mems[f"{name}.{lv}.seg"], mems[f"{name}.{lv}.crd"]
        seg = await drv.read_burst(seg_m["sel"], 0, min(positions + 1, seg_m["depth"]))
        n = min(seg[-1] if seg else 0, crd_m["capacity"])
        crd = await drv.read_burst(crd_m["sel"], 0, n) if n else []
        levels.append({"seg": seg, "crd": crd})
        positions = n
    vm = mems[f"{name}.vals"]
    n = min(positions, vm["capacity"])
    vals = await drv.read_burst(vm["sel"], 0, n) if n else []
    if t.get("block"):                                  # one block per word
        width = man["config"].get("value", {}).get("width", 32)
        return {"levels": levels, "vals": [tk.unpack_block(v, t["block"], width).tolist() for v in vals]}
    return {"levels": levels, "vals": [_signed(v, vm["width"]) for v in vals]}


def compare_tensors(reference, rtl):
    """Bit-for-bit comparison of the reference simulator's written tensors (PackedTensor, raw fixed ints) with
    the tensors :func:`host_run` read back. Returns a list of mismatch descriptions (empty = identical)."""
    problems = []
    for name, p in reference.items():
        got = rtl.get(name)
        if got is None:
            problems.append(f"{name}: not read back")
            continue
        for lv, level in enumerate(p.levels):
            g = got["levels"][lv]
            if level.kind == "dense":
                continue
            for array in ("seg", "crd"):
                want = [int(x) for x in getattr(level, array)]
                have = list(g.get(array, []))
                if want != have:
                    problems.append(f"{name} level {lv} {array}: {_diff(want, have)}")
        want = [x.tolist() if p.format.block else int(x) for x in p.vals]
        if want != list(got["vals"]):
            problems.append(f"{name} vals: {_diff(want, got['vals'])}")
    return problems


def _diff(want, have):
    if len(want) != len(have):
        return f"{len(have)} entries, expected {len(want)} (expected {want[:8]}..., got {list(have)[:8]}...)"
    for i, (a, b) in enumerate(zip(want, have)):
        if a != b:
            return f"entry {i} is {b}, expected {a}"
    return "differs"


def stuck_report(man, res, max_cycles):
    """A one-paragraph description of where a run that never finished stopped."""
    parts = [f"done never rose within {max_cycles} cycles"]
    kc = res.get("kernel_cycles", {})
    for k in man["kernels"]:
        n = kc.get(k["name"], 0)
        if n:
            ev = res.get("last_event", {}).get(k["name"])
            parts.append(f"kernel {k['name']}: last firing in cycle {n - 1}" + (f" ({ev})" if ev else ""))
    waiting, idle = [], []
    for ch in man["channels"]:
        pr = res.get("probes", {}).get(f"{ch['kernel']}.{ch['stream']} -> {ch['dst']}")
        if not pr:
            continue
        if pr.get("level"):
            waiting.append(f"{ch['stream']} -> {ch['dst']} holds {pr['level']} token(s) after {pr['tokens']} popped")
        elif pr.get("tokens", 0) == 0:
            idle.append(f"{ch['stream']} -> {ch['dst']}")
    if waiting:
        parts.append("tokens waiting on: " + "; ".join(waiting))
    if idle:
        parts.append("no token ever reached: " + ", ".join(idle[:12]) + (" ..." if len(idle) > 12 else ""))
    return "; ".join(parts)
