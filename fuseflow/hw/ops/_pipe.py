"""Pipeline stages of the arithmetic datapaths (:class:`Pipe`) and the ECP5 primitives they use when elaborated
for ECP5: MULT18X18D with its input and output registers (the multiplies of ``alu``) and DP16KD with its output
register (the function tables), which Yosys would map without those registers (docs/hardware.md, "alu
datapath")."""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib.memory import Memory

from ...errors import HardwareError
from ._cells import CELLS


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

    def operands(self, a, b, dsp=None, beside=(), b_en=None):
        """Stage 1 of a multiply: the operands registered (a Const stays a constant) and ``beside``; returns
        ``(a, b, *beside)``. With ``dsp`` (:meth:`dsp_for`) the operand registers are the MULT18X18D's input
        registers (:meth:`products`), so only ``beside`` is registered here. ``b_en``: b's register loads only
        when it is 1 (else holds; pass the same to :meth:`products`)."""
        self.stages += 1
        keep = [isinstance(v, Const) or bool(dsp) for v in (a, b)]
        held = [False, b_en is not None and not keep[1] and not self.comb]
        regs = iter(self._registered([v for v, k, h in zip((a, b), keep, held) if not (k or h)] + list(beside)))
        out = []
        for v, k, h in zip((a, b), keep, held):
            if h:
                r = Signal(Value.cast(v).shape(), name=f"{self.prefix}_p{self.stages}_held")
                with self.m.If(b_en):
                    self.m.d.sync += r.eq(v)
                out.append(r)
            else:
                out.append(v if k else next(regs))
        return tuple(out) + tuple(regs)

    def products(self, pairs, dsp=None, beside=(), b_en=None):
        """Stage 2 of a multiply: the products of the operand pairs registered, and ``beside``; returns
        ``(*products, *beside)``. With ``dsp="ecp5"`` each product is one MULT18X18D whose input and output
        registers are stages 1 and 2 (Yosys maps ``*`` to the block without them, leaving its 4.5 ns between
        two fabric registers); otherwise ``*`` between fabric registers. ``b_en`` (with ``dsp``): the input
        register of each pair's second operand loads only when it is 1 (the block's CE1)."""
        if self.comb or not dsp:
            return self.stage_tuple(*[x * y for x, y in pairs], *beside)
        self.stages += 1
        return tuple(self._mult18x18d(x, y, dsp, b_en) for x, y in pairs) + self._registered(beside)

    def _mult18x18d(self, x, y, dsp, y_en=None):
        """``x * y`` through an ECP5 MULT18X18D with REG_INPUTA/B and REG_OUTPUT on this clock (two cycles
        late). Operands are extended to signed 18 bits (SIGNEDA/B = 1): an unsigned operand of at most 17
        bits reads the same. ``y_en``: y's input register loads only when it is 1 (its CE1)."""
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
            self.m.d.sync += [ra.eq(ops[0]), p.eq(ra * rb)]
            with self.m.If(1 if y_en is None else y_en):
                self.m.d.sync += rb.eq(ops[1])
        else:
            CELLS[dsp].mult18x18d(self.m, f"{self.prefix}_dsp{self._dsps}", ops[0], ops[1], p, y_en)
        self._dsps += 1
        out = Signal(shape, name=f"{self.prefix}_dsp{self._dsps - 1}_y")
        self.m.d.comb += out.eq(p)
        return out

    def fit(self, value, width):
        """``value`` as unsigned(width): truncated or zero-extended."""
        r = Signal(unsigned(width))
        self.m.d.comb += r.eq(value)
        return r


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


#: an OutputPipeline of latency above this keeps its skid FIFO in a :class:`SkidFIFO` (the head in a register, the
#: memory written at every last-stage token); shallower ones in Amaranth's ``SyncFIFO`` (one LUT-RAM block)
SKID_FIFO_MIN_LATENCY = 17
#: ... or whose tokens are this wide (block_matmul at B = 4: 522 bits): SyncFIFO's level compares then fan out over
#: every LUT-RAM block's write enable and every output multiplexer, SkidFIFO's flags are registers
SKID_FIFO_MIN_WIDTH = 256


class SkidFIFO(Elaboratable):
    """The skid FIFO of a deep :class:`OutputPipeline` (latency > 16: sqrt, div, rsqrt; or a wide one: block_matmul at
    B = 4): first-word-fall-through
    with the timing of Amaranth's ``SyncFIFO`` (a word kept in cycle t is readable from t + 1), ``depth`` entries
    in a memory (LUT RAM), and no late signal on the memory's write enable or on its read data's way out:

    - the memory is written at ``wptr`` whenever the last stage holds a token (``w_en``: a register), and
      ``wptr`` advances only when the FIFO keeps it (``w_keep``: it cannot leave at once). A token that leaves
      at once leaves a junk word in a free entry: the op's in-flight count (at most ``depth`` tokens between
      firing and leaving, the last stage's one included) means the entry at ``wptr`` is always free. So the
      write enable (fanned out to every LUT-RAM block) comes from flip-flops, not from the output's ready;
    - the head is a register, loaded from the entry behind it (read combinationally at ``rnext``, a register)
      when the head is read, or from the word being written when the FIFO holds at most one entry: the
      memory's read feeds that register, not the output. ``r_rdy`` and ``two`` (an entry behind the head) are
      registers, chosen by this cycle's keep and read among values of the registered level.

    Ports: ``w_data``, ``w_en`` (the last stage holds a token), ``w_keep`` (the FIFO keeps it: only with
    ``w_en``; the caller guarantees room), ``r_data``, ``r_rdy``, ``r_en`` (a read when ``r_rdy``)."""

    def __init__(self, width, depth):
        if depth < 2:
            raise HardwareError("skid FIFO", f"depth {depth} < 2")
        self.width, self.depth = width, depth
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.w_keep = Signal()
        self.r_data = Signal(width)
        self.r_rdy = Signal()
        self.r_en = Signal()

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        m.submodules.storage = storage = Memory(shape=unsigned(self.width), depth=depth, init=[])
        wp = storage.write_port()
        rp = storage.read_port(domain="comb")
        wptr = Signal(range(depth))
        rptr = Signal(range(depth))                      # the head's entry
        rnext = Signal(range(depth), init=1)             # the entry behind it (rptr + 1, kept beside it)
        level = Signal(range(depth + 1))
        two = Signal()                                   # level >= 2: an entry behind the head
        head = Signal(self.width)
        read = Signal()
        m.d.comb += [read.eq(self.r_en & self.r_rdy), self.r_data.eq(head),
                     wp.addr.eq(wptr), wp.data.eq(self.w_data), wp.en.eq(self.w_en),
                     rp.addr.eq(rnext)]
        with m.If(self.w_keep):
            m.d.sync += wptr.eq(_incr(wptr, depth))
        with m.If(read):
            m.d.sync += [rptr.eq(rnext), rnext.eq(_incr(rnext, depth))]
        # the next level and flags chosen by the keep and the read (late: the output's ready) among values of
        # the registered level, so no adder or compare follows the ready
        inc = self.w_keep & ~read
        dec = read & ~self.w_keep
        up, down = Signal.like(level), Signal.like(level)
        m.d.comb += [up.eq(level + 1), down.eq(level - 1)]
        m.d.sync += [level.eq(Mux(inc, up, Mux(dec, down, level))),
                     self.r_rdy.eq(Mux(inc, 1, Mux(dec, level >= 2, level >= 1))),
                     two.eq(Mux(inc, level >= 1, Mux(dec, level >= 3, level >= 2))),
                     head.eq(Mux(read, Mux(two, rp.data, self.w_data), Mux(self.r_rdy, head, self.w_data)))]
        return m


def _incr(ptr, depth):
    """``ptr + 1`` modulo ``depth``."""
    return Mux(ptr == depth - 1, 0, ptr + 1)


class OutputPipeline:
    """The output side of an op of latency L >= 2 (``registry.op_latency``; docs/hardware.md, "Pipelines"):
    the op fires while fewer than L tokens are in flight (a firing that pushes nothing needs no room); a valid
    bit travels beside the op's free-running stages (:meth:`beside` registers other values the same way); the
    last stage's tokens leave at once when every output is ready and nothing waits before them, else they wait
    in a first-word-fall-through FIFO of depth L (Amaranth's ``SyncFIFO``; a :class:`SkidFIFO` from
    :data:`SKID_FIFO_MIN_LATENCY` on or for tokens of :data:`SKID_FIFO_MIN_WIDTH` bits). Several outputs leave
    together (one firing writes all of them), as :class:`._common.Fire` pushes them.

    ``go``: the op could fire; ``push``: the firing writes its outputs (None: always); ``fire``: a signal
    to drive (else one is made). Call :meth:`connect` with the last stage's payloads."""

    def __init__(self, m, outs, latency, go, push=None, fire=None, fire_from=None):
        if latency < 2:
            raise HardwareError("output pipeline", f"latency {latency} needs no pipeline")
        self.m, self.outs, self.latency = m, list(outs), latency
        self.fire = Signal(name="fire") if fire is None else fire
        self.valid = [Signal(name=f"stage{i}_valid") for i in range(latency)]
        self.inflight = Signal(range(latency + 1))     # fired, not yet transferred (= stage valids + skid level)
        room = self.inflight != latency
        # fire_from (optional): room -> an expression equal to the rule's firing, go & (~push | room), in every
        # reachable state but shallower (level_scan: its first array's flag enters last)
        rule = go & room if push is None else go & (~push | room)
        m.d.comb += self.fire.eq(rule if fire_from is None else fire_from(room))
        m.d.comb += self.valid[0].eq(self.fire if push is None else self.fire & push)
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
        deep = self.latency >= SKID_FIFO_MIN_LATENCY or len(last) >= SKID_FIFO_MIN_WIDTH
        if deep:
            fifo = m.submodules.skid = SkidFIFO(len(last), self.latency)
        else:
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
        keep = self.valid[-1] & (fifo.r_rdy | ~all_ready)
        m.d.comb += [fifo.r_en.eq(all_ready), fifo.w_data.eq(last)]
        if deep:
            m.d.comb += [fifo.w_en.eq(self.valid[-1]), fifo.w_keep.eq(keep)]
        else:
            m.d.comb += fifo.w_en.eq(keep)
