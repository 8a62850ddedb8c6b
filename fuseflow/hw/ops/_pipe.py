"""Pipeline stages of the arithmetic datapaths (:class:`Pipe`) and the ECP5 primitives they use when elaborated
for ECP5: MULT18X18D with its input and output registers (the multiplies of ``alu``) and DP16KD with its output
register (the function tables), which Yosys would map without those registers (docs/hardware.md, "alu
datapath")."""

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Mux, Signal, Value, signed, unsigned
from amaranth.lib.memory import Memory

from ...errors import HardwareError


class Pipe:
    """Pipeline registers of a datapath: :meth:`stage` registers the values it is given (free running: no
    enable, the stages never stall; docs/hardware.md) and counts the stage. ``Pipe(m, prefix, comb=True)``
    registers nothing (a combinational datapath for tests of the arithmetic alone)."""

    def __init__(self, m, prefix="alu", comb=False, dsp=None):
        self.m, self.prefix, self.comb = m, prefix, comb
        # "ecp5": multiplies in MULT18X18D blocks (:func:`dsp_family`); "ecp5-model": the same wiring around
        # a behavioural model of the block (Amaranth-simulated in the tests)
        self.dsp = None if comb else dsp
        self.stages = 0
        self._dsps = 0
        self._input_of = {}                    # register -> the value it registers (:meth:`early`)

    def stage(self, *values):
        """One stage: the values registered (one value: itself, else a tuple)."""
        out = self.stage_tuple(*values)
        return out[0] if len(out) == 1 else out

    def stage_tuple(self, *values):
        """One stage: always a tuple of the registered values (for unpacking with ``*rest``)."""
        self.stages += 1
        return self._registered(values)

    def _registered(self, values):
        if self.comb:
            return tuple(values)
        out = []
        for i, v in enumerate(values):
            v = Value.cast(v)
            r = Signal(v.shape(), name=f"{self.prefix}_p{self.stages}_{i}")
            self.m.d.sync += r.eq(v)
            self._input_of[id(r)] = v
            out.append(r)
        return tuple(out)

    def early(self, reg):
        """The value that register ``reg`` (from :meth:`stage`) registers: a block RAM's own address register
        takes it, standing for ``reg`` (itself in a combinational pipe)."""
        return self._input_of.get(id(reg), reg)

    def dsp_for(self, *operands):
        """This pipe's ``dsp`` if every operand fits a MULT18X18D (18 signed or 17 unsigned bits), else None
        (the multiply is then ``*`` between fabric registers)."""
        fits = all(len(v) <= (18 if Value.cast(v).shape().signed else 17) for v in operands)
        return self.dsp if fits else None

    def operands(self, a, b, dsp=None, beside=()):
        """Stage 1 of a multiply: the operands registered (a Const stays a constant) and ``beside``; returns
        ``(a, b, *beside)``. With ``dsp`` (:meth:`dsp_for`) the operand registers are the MULT18X18D's input
        registers (:meth:`products`), so only ``beside`` is registered here."""
        self.stages += 1
        keep = [isinstance(v, Const) or bool(dsp) for v in (a, b)]
        regs = iter(self._registered([v for v, k in zip((a, b), keep) if not k] + list(beside)))
        return tuple(v if k else next(regs) for v, k in zip((a, b), keep)) + tuple(regs)

    def products(self, pairs, dsp=None, beside=()):
        """Stage 2 of a multiply: the products of the operand pairs registered, and ``beside``; returns
        ``(*products, *beside)``. With ``dsp="ecp5"`` each product is one MULT18X18D whose input and output
        registers are stages 1 and 2 (Yosys maps ``*`` to the block without them, leaving its 4.5 ns between
        two fabric registers); otherwise ``*`` between fabric registers."""
        if self.comb or not dsp:
            return self.stage_tuple(*[x * y for x, y in pairs], *beside)
        self.stages += 1
        return tuple(self._mult18x18d(x, y, dsp) for x, y in pairs) + self._registered(beside)

    def _mult18x18d(self, x, y, dsp):
        """``x * y`` through an ECP5 MULT18X18D with REG_INPUTA/B and REG_OUTPUT on this clock (two cycles
        late). Operands are extended to signed 18 bits (SIGNEDA/B = 1): an unsigned operand of at most 17
        bits reads the same."""
        x, y = Value.cast(x), Value.cast(y)
        shape = (x * y).shape()
        ops = []
        for v in (x, y):
            if len(v) > (18 if v.shape().signed else 17):
                raise HardwareError("MULT18X18D", f"operand of {len(v)} bits does not fit 18 signed bits")
            e = Signal(signed(18), name=f"{self.prefix}_dsp{self._dsps}_{'ab'[len(ops)]}")
            self.m.d.comb += e.eq(v)
            ops.append(e)
        p = Signal(signed(36), name=f"{self.prefix}_dsp{self._dsps}_p")
        if dsp == "ecp5-model":            # its documented behaviour, for the Amaranth simulator (tests)
            ra, rb = Signal(signed(18)), Signal(signed(18))
            self.m.d.sync += [ra.eq(ops[0]), rb.eq(ops[1]), p.eq(ra * rb)]
        else:
            ports = {f"i_A{i}": ops[0][i] for i in range(18)}
            ports.update({f"i_B{i}": ops[1][i] for i in range(18)})
            ports.update({f"i_C{i}": 0 for i in range(18)})
            ports.update({f"o_P{i}": p[i] for i in range(36)})
            ports.update({f"i_CLK{i}": ClockSignal("sync") if i == 0 else 0 for i in range(4)})
            ports.update({f"i_CE{i}": 1 for i in range(4)})
            ports.update({f"i_RST{i}": 0 for i in range(4)})
            self.m.submodules[f"{self.prefix}_dsp{self._dsps}"] = Instance(
                "MULT18X18D", p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
                p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE", p_GSR="DISABLED",
                i_SIGNEDA=1, i_SIGNEDB=1, i_SOURCEA=0, i_SOURCEB=0, **ports)
        self._dsps += 1
        out = Signal(shape, name=f"{self.prefix}_dsp{self._dsps - 1}_y")
        self.m.d.comb += out.eq(p)
        return out

    def fit(self, value, width):
        """``value`` as unsigned(width): truncated or zero-extended."""
        r = Signal(unsigned(width))
        self.m.d.comb += r.eq(value)
        return r


def dsp_family(platform) -> str | None:
    """``"ecp5"`` when elaborating for an ECP5 (an Amaranth Lattice platform, or
    :class:`fuseflow.boards.synth.SynthTarget`): multiplies then instantiate MULT18X18D blocks with their
    registers. ``None`` otherwise (simulation, Verilator, iCE40): portable ``*``."""
    return "ecp5" if getattr(platform, "family", None) == "ecp5" else None


def rom_outreg(m, P, words, width, addr, prefix):
    """A ROM read in two cycles on ECP5: DP16KD blocks (1024 x 18 each, side by side) whose address register
    takes ``addr`` (the value the previous pipeline stage registers) and whose output register (REGMODE
    OUTREG) is the current stage; Yosys maps a registered read to the block without its output register,
    whose 5.8 ns clock-to-output then starts the next stage (:mod:`fuseflow.hw.block_ram`).
    ``P.dsp == "ecp5-model"``: the same two registers around an Amaranth memory (tests). Returns the word
    (``width`` bits)."""
    from ..block_ram import BLOCK_DEPTH, block_memory
    if len(words) > BLOCK_DEPTH:
        raise HardwareError("DP16KD", f"table of {len(words)} words is deeper than {BLOCK_DEPTH}")
    word = Signal(width, name=f"{prefix}_word")
    if P.dsp == "ecp5-model":
        rom = Memory(shape=unsigned(width), depth=len(words), init=words)
        m.submodules[f"{prefix}_table"] = rom
        rp = rom.read_port(domain="sync")
        m.d.comb += rp.addr.eq(addr)
        m.d.sync += word.eq(rp.data)
        return word
    block_memory(m, f"{prefix}_table", len(words), width, words, Value.cast(addr), word)
    return word


class OutputPipeline:
    """The output side of an op of latency L >= 2 (``registry.op_latency``; docs/hardware.md, "Pipelines"):
    the op fires while fewer than L tokens are in flight (a firing that pushes nothing needs no room); a valid
    bit travels beside the op's free-running stages (:meth:`beside` registers other values the same way); the
    last stage's tokens leave at once when every output is ready and nothing waits before them, else they wait
    in a first-word-fall-through FIFO of depth L. Several outputs leave together (one firing writes all of
    them), as :class:`._common.Fire` pushes them.

    ``go``: the op could fire; ``push``: the firing writes its outputs (None: always); ``fire``: a signal
    to drive (else one is made). Call :meth:`connect` with the last stage's payloads."""

    def __init__(self, m, outs, latency, go, push=None, fire=None):
        if latency < 2:
            raise HardwareError("output pipeline", f"latency {latency} needs no pipeline")
        self.m, self.outs, self.latency = m, list(outs), latency
        self.fire = Signal(name="fire") if fire is None else fire
        self.valid = [Signal(name=f"stage{i}_valid") for i in range(latency)]
        self.inflight = Signal(range(latency + 1))     # fired, not yet transferred (= stage valids + skid level)
        room = self.inflight != latency
        if push is None:
            m.d.comb += [self.fire.eq(go & room), self.valid[0].eq(self.fire)]
        else:
            m.d.comb += [self.fire.eq(go & (~push | room)), self.valid[0].eq(self.fire & push)]
        m.d.sync += [self.valid[i].eq(self.valid[i - 1]) for i in range(1, latency)]

    def beside(self, value, name):
        """``value`` (taken in the firing's cycle) registered L - 1 times beside the stages: its copy at the last
        stage."""
        v = Value.cast(value)
        prev = Signal(v.shape(), name=f"stage0_{name}")
        self.m.d.comb += prev.eq(v)
        for i in range(1, self.latency):
            r = Signal(v.shape(), name=f"stage{i}_{name}")
            self.m.d.sync += r.eq(prev)
            prev = r
        return prev

    def connect(self, lasts):
        """Drive the outputs from ``lasts``, the last stage's payload of each output (as raw bits)."""
        from amaranth.lib.fifo import SyncFIFO

        from ..stream import all_of
        m = self.m
        widths = [len(Value.cast(o.payload)) for o in self.outs]
        last = Signal(sum(widths))
        m.d.comb += last.eq(Cat(*[Value.cast(v)[:w] for v, w in zip(lasts, widths)]))
        fifo = m.submodules.skid = SyncFIFO(width=len(last), depth=self.latency)
        head = Mux(fifo.r_rdy, fifo.r_data, last)
        have = self.valid[-1] | fifo.r_rdy
        ready = [o.ready for o in self.outs]
        lo = 0
        for i, (o, w) in enumerate(zip(self.outs, widths)):
            m.d.comb += [o.valid.eq(have & all_of(r for j, r in enumerate(ready) if j != i)),
                         Value.cast(o.payload).eq(head[lo:lo + w])]
            lo += w
        all_ready = all_of(ready)
        m.d.sync += self.inflight.eq(self.inflight + self.valid[0] - (have & all_ready))
        m.d.comb += [fifo.r_en.eq(all_ready), fifo.w_data.eq(last),
                     fifo.w_en.eq(self.valid[-1] & (fifo.r_rdy | ~all_ready))]
