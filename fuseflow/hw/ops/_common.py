"""Shared machinery of the op modules: port construction from the registry and the firing rule.

Firing rule (docs/hardware.md): each cycle the op's combinational logic looks at its state and the
heads of the input streams it needs and decides ``go`` (every inspected head is valid), which outputs
it would write (``push[p]``) and which inputs it would pop (``pop[p]``). The op fires when ``go`` and
every output it writes is ready::

    fire          = go & AND_q(~push[q] | o_q.ready)
    o_p.valid     = go & push[p] & AND_{q != p}(~push[q] | o_q.ready)     (never o_p.ready itself)
    i_p.ready     = fire & pop[p]

State registers update on ``fire``. An output is thus transferred (valid & ready) exactly in firing
cycles that write it, so a multi-output op never writes one output without the others it writes in
the same firing.
"""

import math
from dataclasses import dataclass, field

from amaranth.hdl import Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ...errors import HardwareError
from ...samml.registry import MEMORY_READ_LATENCY, get_op, op_latency
from ...tensors.fixed import FixedFormat
from ..stream import all_of
from ..token import DONE, EMPTY, STOP, token_layout, token_signature

__all__ = ["OpComponent", "Fire", "MemPorts", "kind_width", "set_tok", "set_data", "set_stop",
           "set_done", "set_empty", "copy_ctrl", "copy_tok", "kept"]


def kind_width(kind, crd_width=16, fixed=None, block=()):
    """(width, signed) of a stream of ``kind`` (crd, ref, repsig: crd_width unsigned; val: value width
    signed; a val stream of block shape ``block``: prod(block) values side by side, element 0 at the LSBs)."""
    fixed = fixed or FixedFormat()
    if kind == "val":
        return fixed.width * math.prod(block), True
    if block:
        raise HardwareError("stream kind", f"a {kind} stream cannot carry blocks")
    if kind in ("crd", "ref", "repsig"):
        return crd_width, False
    raise HardwareError("stream kind", f"unknown stream kind {kind!r}")


@dataclass
class MemPorts:
    """How an op reaches one tensor array.

    ``reads``: prefixes of read interfaces (``<prefix>_addr`` Out, ``<prefix>_data`` In). A prefix in
    ``sync_reads`` is a read of latency ``registry.MEMORY_READ_LATENCY`` (2; a
    :meth:`fuseflow.hw.memory.TensorMemory.read_port`): ``<prefix>_addr`` in cycle t is the address of the data
    in cycle t + 2, so the op drives it from its next state and its inputs' next heads (``i_<p>_after``) and
    takes the data one cycle after its firing. A prefix in ``held_reads`` is a read of latency ``held_latency``
    (1 or 2) with an enable (``<prefix>_en`` Out): ``<prefix>_data`` holds the entry ``<prefix>_addr`` named at
    the last clock edge with the enable set (a register that loads a read; in block RAM the block's address
    register with its clock enable), or with latency 2 that entry one cycle later (then a register after it; in
    block RAM the block's output register). The others are combinational (latency 0). ``offsets``: prefix -> k for a port whose data is
    the entry ``<prefix>_addr + k`` (a copy of the memory shifted by k entries:
    :meth:`fuseflow.hw.memory.TensorMemory.read_port`; no adder before the read). ``plus_one``: prefixes whose
    port also gives the entry + 1 (``<prefix>_data1`` In; in block RAM from blocks of their own that hold every
    entry + 1, so no adder follows the read; in LUT RAM the data register + 1).
    ``writes``: prefixes of write interfaces (``<prefix>_waddr``, ``<prefix>_wdata``, ``<prefix>_wen``,
    all Out; the memory's write port is synchronous). ``count``: name of the Out signal holding the number
    of entries written. ``width``/``signed``: element width (values: the fixed-point width, signed).
    """
    width: int
    signed: bool = False
    reads: list = field(default_factory=list)
    sync_reads: set = field(default_factory=set)
    held_reads: set = field(default_factory=set)
    offsets: dict = field(default_factory=dict)
    plus_one: set = field(default_factory=set)
    #: prefixes of held reads attached to a block memory (set by ``fuseflow.hw.memory.attach_read``, which runs
    #: before the op elaborates): their data is then a block's output, late in the cycle
    in_block: set = field(default_factory=set)
    #: the latency of the reads with an enable (level_scan's ``bounds_latency``: 1, or 2 as a block's output register)
    held_latency: int = 1
    writes: list = field(default_factory=list)
    count: str | None = None
    addr_width: int = 16

    def latency(self, prefix):
        """The read latency of interface ``prefix`` (0, ``held_latency`` with an enable, or
        ``MEMORY_READ_LATENCY``)."""
        return MEMORY_READ_LATENCY if prefix in self.sync_reads else self.held_latency if prefix in self.held_reads \
            else 0

    def block_copies(self):
        """Copies of the array these reads need in block RAM: one per read port, one more per ``plus_one``."""
        return len(self.reads) + len(self.plus_one)


class OpComponent(wiring.Component):
    """Base of every op module. Subclasses set ``op_name`` and implement ``elaborate``.

    Constructor: ``Cls(params=None, *, crd_width=16, fixed=None, any_kind="ref", connected=None,
    lookahead=False)``. ``params`` are the
    node's registry parameters (resolved here; tensor arrays such as seg/crd/vals are ignored: the op
    reaches its arrays through its memory interfaces). ``fixed`` is the :class:`FixedFormat` of values;
    ``any_kind`` ("ref" or "val"; "crd" too for ``token`` ports) sets the width of the op's ``any`` and ``token``
    ports (repeat, intersect, union, parallelize, serialize).
    ``connected``: the input ports that are driven (default: the registry's required inputs for these
    params); an optional input (alu ``b``, reduce ``crd``) exists only when listed. ``lookahead``: the
    op's look-ahead rule is on (only ops with a ``lookahead_depth``, i.e. intersect): it then has, for
    each port of :meth:`peek_ports`, the inputs ``i_<p>_next`` (token layout) and ``i_<p>_next_valid``,
    to be driven by the channel's ``StreamFIFO.r_next``/``r_next_valid``. Turn it on exactly when every
    input channel holds at least ``lookahead_depth`` tokens, as the simulator does. ``blocks``: ``{"i_<p>" or
    "o_<p>": block shape}`` for val ports that carry blocks (a port is then prod(shape) values wide); only ops
    with a block form accept it (:meth:`_port_blocks`).
    """

    op_name = None
    #: minimum depth of every input channel for the op's look-ahead rule (None: the op has none)
    lookahead_depth = None

    def __init__(self, params=None, *, crd_width=16, fixed=None, any_kind="ref", connected=None,
                 lookahead=False, blocks=None):
        self.spec = get_op(self.op_name)
        self.params = self.spec.resolve_params(dict(params or {}), f"op {self.op_name}")
        if lookahead and (self.lookahead_depth is None or self.spec.input_depth_for(self.params) is None):
            self._MustUse__silence = True            # never constructed: nothing to warn about
            at = "" if self.lookahead_depth is None else f" at {self.params}"    # (intersect: arity 2 only)
            raise HardwareError(f"op {self.op_name}", f"has no look-ahead rule{at}")
        self.lookahead = bool(lookahead)
        self.crd_width = int(crd_width)
        self.fixed = fixed or FixedFormat()
        if any_kind not in ("ref", "val", "crd"):
            raise HardwareError(f"op {self.op_name}", f"any_kind must be 'ref' or 'val', got {any_kind!r}")
        self.any_kind = any_kind
        required = self.spec.required_inputs(self.params)
        self.connected = set(required) if connected is None else set(connected)
        missing = set(required) - self.connected
        if missing:
            raise HardwareError(f"op {self.op_name}", f"input(s) {', '.join(sorted(missing))} must be connected")
        self.blocks = self._port_blocks(dict(blocks or {}))
        self.port_info = {}          # "i_<port>"/"o_<port>" -> (kind, width, signed)
        members = {}
        for name, port in self.spec.input_ports(self.params):
            if not self._has_input(name):
                continue
            kind = any_kind if port.kind in ("any", "token") else port.kind
            w, s = kind_width(kind, self.crd_width, self.fixed, self.blocks.get(f"i_{name}", ()))
            self.port_info[f"i_{name}"] = (kind, w, s)
            members[f"i_{name}"] = In(token_signature(w))
        for name, port in self.spec.output_ports(self.params):
            kind = any_kind if port.kind in ("any", "token") else port.kind
            w, s = kind_width(kind, self.crd_width, self.fixed, self.blocks.get(f"o_{name}", ()))
            self.port_info[f"o_{name}"] = (kind, w, s)
            members[f"o_{name}"] = Out(token_signature(w))
        self.memories = {}
        self._add_members(members)
        super().__init__(members)

    # hooks -----------------------------------------------------------------------------------
    def harness_cycles(self):
        """Cycles a test harness (fuseflow.hw.testing) allows beyond what the tokens take before it times
        out: the op's latency; ops that first walk their memories allow for that."""
        return op_latency(self.op_name, self.params, self.fixed)

    def _port_blocks(self, blocks):
        """``{"i_<port>"/"o_<port>": block shape}`` of the val ports that carry blocks (docs/samml.md, "Blocks")
        from the ``blocks`` argument. By default only ``any``/``token`` ports may (repeat, intersect, union, ...:
        they pass their payloads on unchanged, so a wider one is no different); an op with its own block form
        overrides this."""
        kinds = {f"i_{n}": p.kind for n, p in self.spec.input_ports(self.params)}
        kinds.update({f"o_{n}": p.kind for n, p in self.spec.output_ports(self.params)})
        return self._accept_blocks(blocks, [p for p, k in kinds.items() if k in ("any", "token")])

    def _accept_blocks(self, blocks, ports):
        """:meth:`_port_blocks` for an op whose val ``ports`` may carry blocks (one value per beat either way:
        its memories then hold one block per word)."""
        bad = set(blocks) - set(ports)
        if bad:
            self._MustUse__silence = True
            raise HardwareError(f"op {self.op_name}", f"port(s) {', '.join(sorted(bad))} cannot carry blocks")
        return {p: tuple(s) for p, s in blocks.items() if s}

    def _has_input(self, name):
        """Whether input ``name`` exists: required inputs always, optional ones when ``connected``."""
        return name in self.connected

    def _add_members(self, members):
        """Add memory interface / status members (subclasses)."""

    # helpers ---------------------------------------------------------------------------------
    def _add_read(self, members, array, prefix, width, signed=False, sync=False, offset=0, held=False,
                  plus_one=False):
        mp = self.memories.setdefault(array, MemPorts(width, signed, addr_width=self.crd_width))
        mp.reads.append(prefix)
        if plus_one:
            mp.plus_one.add(prefix)
            members[f"{prefix}_data1"] = In(width)
        if sync:
            mp.sync_reads.add(prefix)
        if held:
            mp.held_reads.add(prefix)
            members[f"{prefix}_en"] = Out(1)
        if offset:
            mp.offsets[prefix] = offset
        members[f"{prefix}_addr"] = Out(self.crd_width)
        members[f"{prefix}_data"] = In(width)

    def _add_write(self, members, array, prefix, width, count, signed=False):
        mp = self.memories.setdefault(array, MemPorts(width, signed, addr_width=self.crd_width))
        mp.writes.append(prefix)
        mp.count = count
        members[f"{prefix}_waddr"] = Out(self.crd_width)
        members[f"{prefix}_wdata"] = Out(width)
        members[f"{prefix}_wen"] = Out(1)
        members[count] = Out(self.crd_width + 1)

    def peek_ports(self):
        """Input ports with a look-ahead view (``i_<p>_next``, ``i_<p>_next_valid``); none by default."""
        return []

    def third_ports(self):
        """Input ports that also see their channel's third entry (``i_<p>_third``, ``i_<p>_third_valid``: a
        :class:`~fuseflow.hw.stream.PeekFIFO`'s ``r_third``); none by default."""
        return []

    def pop2_ports(self):
        """Input ports whose channel may be read twice in a cycle (the op's output ``pop2_<p>`` drives a
        :class:`~fuseflow.hw.stream.PeekFIFO`'s ``r_pop2``); none by default."""
        return []

    def passed_ports(self):
        """Input ports of :meth:`pop2_ports` whose payloads the op only passes on to an output (it never compares
        or computes with them, nor with the entries behind the head): their
        :class:`~fuseflow.hw.stream.PeekFIFO` reads the payloads from its storage (``held=False``), so that the
        op's pops drive pointer registers, not every payload bit; none by default."""
        return []

    def after_ports(self):
        """Input ports with a next-head view (the payload the head will have in the next cycle, to address
        synchronous memory reads): ``i_<p>_behind`` and ``i_<p>_stay``, driven by the channel's
        ``StreamFIFO.r_behind``/``r_stay``; :meth:`after` chooses between them."""
        return []

    def _add_after(self, members, port):
        """Add the next-head view of an input (call from ``_add_members``): its two candidates, the payload
        behind the head (the next head when the head is read this cycle) and the one that stays."""
        layout = token_layout(self.port_info[f"i_{port}"][1])
        members[f"i_{port}_behind"] = In(layout)
        members[f"i_{port}_stay"] = In(layout)

    def head_taken(self, port):
        """The head of input ``port`` is read this cycle."""
        i = getattr(self, f"i_{port}")
        return i.valid & i.ready

    def compare_heads_ahead(self, m, ports, key, relations, taken=None):
        """Pairwise relations of the heads of the inputs ``ports`` (``port[i]``'s head against ``port[j]``'s,
        i < j), each computed a cycle ahead so that this cycle's firing starts at flip-flops and a multiplexer:
        every pair of next-head candidates (the payload that stays and the one behind, which do not depend on
        this cycle's firing) is compared into a register, and so is this cycle's pop of each input, which picks
        among the registered comparisons in the next cycle (as a channel's head register loads ``r_after``).
        ``key``: payload -> the value compared; ``relations``: {name: rel(a, b)}. Returns
        {name: {(i, j): rel(key(head_i), key(head_j))}}; the registers are named ``<name>_<i><s|b>_<j><s|b>``.
        ``taken`` (optional): per port a signal, driven by the caller, equal to :meth:`head_taken` (valid & ready)
        but written shallower (serialize: the chosen lane's bit ANDed with the firing as if that lane were
        chosen, not the firing through the chosen lane's valid), registered instead of valid & ready."""
        regs = []
        for i, port in enumerate(ports):
            t = Signal(name=f"taken{i}")
            m.d.sync += t.eq(self.head_taken(port) if taken is None else taken[i])
            regs.append(t)
        taken = regs
        cands = []
        for port in ports:
            layout = token_layout(self.port_info[f"i_{port}"][1])
            cands.append((key(layout(Value.cast(getattr(self, f"i_{port}_stay")))),
                          key(layout(Value.cast(getattr(self, f"i_{port}_behind"))))))
        out = {name: {} for name in relations}
        for i in range(len(ports)):
            for j in range(i + 1, len(ports)):
                for name, rel in relations.items():
                    pick = [[Signal(name=f"{name}_{i}{'sb'[x]}_{j}{'sb'[y]}") for y in range(2)]
                            for x in range(2)]
                    for x in range(2):
                        for y in range(2):
                            m.d.sync += pick[x][y].eq(rel(cands[i][x], cands[j][y]))
                    r = out[name][i, j] = Signal(name=f"{name}_{i}_{j}")
                    m.d.comb += r.eq(Mux(taken[i], Mux(taken[j], pick[1][1], pick[1][0]),
                                         Mux(taken[j], pick[0][1], pick[0][0])))
        return out

    def after(self, port):
        """The next cycle's head of input ``port`` (junk when it has none): the payload behind the head when
        the head is read this cycle, else the one that stays (the channel's ``r_after``)."""
        layout = token_layout(self.port_info[f"i_{port}"][1])
        return layout(Mux(self.head_taken(port), Value.cast(getattr(self, f"i_{port}_behind")),
                          Value.cast(getattr(self, f"i_{port}_stay"))))

    def inputs(self):
        return [n[2:] for n in self.port_info if n.startswith("i_")]

    def outputs(self):
        return [n[2:] for n in self.port_info if n.startswith("o_")]

    def fire_logic(self):
        return Fire(self, self.outputs(), self.inputs())


class Fire:
    """The firing rule of one op (see the module docstring). Drive ``go``, ``push[p]``, ``pop[p]`` from
    comb logic, then call :meth:`build`; use ``fire`` for state updates."""

    def __init__(self, comp, outs, ins):
        self.comp = comp
        self.go = Signal(name="go")
        self.fire = Signal(name="fire")
        self.push = {p: Signal(name=f"push_{p}") for p in outs}
        self.pop = {p: Signal(name=f"pop_{p}") for p in ins}

    def build(self, m, valid=None, ready=None):
        """Drive ``fire``, every output's valid and every input's ready. ``valid`` / ``ready`` (optional):
        {port: expression} for outputs' valids / inputs' readies the op writes itself, each equal to the rule's
        in every reachable state but shallower (serialize: the chosen lane enters last)."""
        c = self.comp
        valid, ready = valid or {}, ready or {}
        outs = {p: getattr(c, f"o_{p}") for p in self.push}
        ok = {p: (~self.push[p] | outs[p].ready) for p in self.push}
        m.d.comb += self.fire.eq(self.go & all_of(ok.values()))
        for p, o in outs.items():
            m.d.comb += o.valid.eq(valid[p] if p in valid else
                                   self.go & self.push[p] & all_of(ok[q] for q in outs if q != p))
        for p, sig in self.pop.items():
            m.d.comb += getattr(c, f"i_{p}").ready.eq(ready[p] if p in ready else self.fire & sig)


# ---- payload helpers (comb) -------------------------------------------------------------------

def set_tok(m, out, data, ctrl):
    m.d.comb += [out.payload.data.eq(data), out.payload.ctrl.eq(ctrl)]


def set_data(m, out, value):
    set_tok(m, out, value, 0)


def set_stop(m, out, level):
    set_tok(m, out, STOP(level), 1)


def set_done(m, out):
    set_tok(m, out, DONE, 1)


def set_empty(m, out):
    set_tok(m, out, EMPTY, 1)


def copy_ctrl(m, out, tok):
    """Copy a control token (its low 10 data bits) to a stream of any width."""
    set_tok(m, out, tok.data[0:10], 1)


def copy_tok(m, out, tok):
    """Copy a token between streams of the same width."""
    set_tok(m, out, tok.data, tok.ctrl)


def kept(m, value, name=None):
    """``value`` through a wire Yosys keeps: a boundary for the logic mapper (it merges two reads of one memory
    whose data a multiplexer chooses into one read at the multiplexed address, and folds a late signal, a block
    RAM's output or a comparator's carry, into the logic before the last multiplexer, unless the values on
    either side are kept)."""
    w = Signal.like(value, attrs={"keep": 1}, name=name)
    m.d.comb += w.eq(value)
    return w
