"""Stream plumbing: the channel FIFO and fan-out, with the simulator's timing (DESIGN.md section 5).

:class:`StreamFIFO` is the channel: storage with asynchronous (combinational) reads, the logic of
:class:`amaranth.lib.fifo.SyncFIFO`, so a token written in cycle t is readable in cycle t+1 and a slot freed
by a read in cycle t is writable in cycle t+1 (``w.ready = level != depth`` does not look at the read side).
That is exactly the reference simulator's channel (``fuseflow/sim/channel.py``). The head is also kept in a
register (loaded with ``r_after`` every cycle, so it holds what the storage's head entry holds, with the same
timing), and so is the entry behind it (``r_next``): the consumer's logic then starts at flip-flops, not at
LUT-RAM reads of the storage (which is read only at the third entry, to refill them, at a registered pointer;
the refills choose by registered flags of the level, ``level < 1``, ``< 2``, ``< 3``, not by compares after
the level register). It also shows its second
entry (``r_next``, valid when ``level >= 2``: the simulator's ``ch.toks[1]``, visible from its push cycle
+ 1), which SyncFIFO does not expose; a look-ahead consumer (intersect) reads it. (``SyncFIFOBuffered``
has one more cycle of latency, so it would not match the simulator.) ``r_after`` is the head of the next
cycle, decided by this cycle's read and write: an op with a synchronous memory read port addresses it from
``r_after`` so that the data of its head is there in the cycle the head is (``docs/hardware.md``).

:class:`FanOut` copies one stream to n consumers: a token leaves when every consumer takes it in the
same cycle (the simulator's fan-out: the producer pushes to all channels at once and needs room in
all). Put a :class:`StreamFIFO` behind every fan-out output.
"""

from amaranth.hdl import Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .token import token_layout, token_signature

__all__ = ["StreamFIFO", "PeekFIFO", "FanOut", "all_of"]


def all_of(values):
    """AND of an iterable of 1-bit values (1 when empty)."""
    r = None
    for v in values:
        r = v if r is None else (r & v)
    return 1 if r is None else r


class StreamFIFO(wiring.Component):
    """A stream-typed channel FIFO of ``depth`` tokens of a W-bit stream, with a look-ahead view.

    Ports: ``w`` (In, the producer side), ``r`` (Out, the consumer side: the head), ``level`` (Out,
    tokens held), ``r_next`` (Out, the payload of the entry behind the head) and ``r_next_valid`` (Out,
    ``level >= 2``; always 0 at depth 1). ``r_next`` becomes the head in the cycle after the head is read.
    ``r_after`` (Out): the payload of the next cycle's head (the entry behind the head or the token being
    written when the head is read, else the head or the token being written into an empty FIFO); junk when
    the next cycle has no head. ``r_behind`` and ``r_stay`` (Out) are its two candidates, which do not depend on
    the read: ``r_after = r_behind if the head is read else r_stay``. A consumer that addresses a memory from
    the next head can read at both and choose after the read (its own firing) is decided. With no head both
    are the token being written: ``r_behind`` is the next head whenever the head is read or absent (a
    compressed level_scan reads only there, into registers that hold while the head stays).
    """

    def __init__(self, width, depth=2):
        if depth < 1:
            raise ValueError(f"FIFO depth must be >= 1, got {depth}")
        self.width = width
        self.depth = depth
        super().__init__({
            "w": In(token_signature(width)),
            "r": Out(token_signature(width)),
            "level": Out(range(depth + 1)),
            "r_next": Out(token_layout(width)),
            "r_next_valid": Out(1),
            "r_after": Out(token_layout(width)),
            "r_behind": Out(token_layout(width)),
            "r_stay": Out(token_layout(width)),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        m.submodules.storage = mem = Memory(shape=unsigned(token_layout(self.width).size), depth=depth, init=[])
        wp = mem.write_port()
        # the head, registered: the next cycle's head is r_after, so the register always equals the storage's
        # head entry when the FIFO holds one (a token written in cycle t is the head in t + 1, as before)
        head = Signal(token_layout(self.width).size)
        produce = Signal(range(depth))
        do_write = self.w.valid & self.w.ready
        do_read = self.r.valid & self.r.ready
        m.d.comb += [
            wp.addr.eq(produce),
            wp.data.eq(Value.cast(self.w.payload)),
            wp.en.eq(do_write),
            self.r.payload.eq(head),
        ]
        with m.If(do_write):
            m.d.sync += produce.eq(_incr(produce, depth))
        # the next level from candidates of the register chosen by the write, then the consumer's (late) read
        level_w = Mux(do_write, self.level + 1, self.level)
        level_wr = Mux(do_write, self.level, self.level - 1)
        m.d.sync += self.level.eq(Mux(do_read, level_wr, level_w))
        # flags of the level, registered (chosen by this cycle's write and read among compares of the
        # registered level), so that the refill multiplexers of head and second start at flip-flops
        inc, dec = do_write & ~do_read, do_read & ~do_write
        level = self.level

        def flag(name, below):
            # level < below, registered
            f = Signal(name=name, init=1)
            m.d.sync += f.eq(Mux(inc, level < below - 1, Mux(dec, level < below + 1, level < below)))
            return f

        lt1, lt2, lt3 = flag("lt1", 1), flag("lt2", 2), flag("lt3", 3)
        # the handshake flags from flip-flops too: the producer's and the consumer's firing (then this FIFO's
        # refill multiplexers) start at them, not at a compare of the level
        not_full = flag("not_full", depth)
        m.d.comb += [self.w.ready.eq(not_full), self.r.valid.eq(~lt1)]
        w_data = Value.cast(self.w.payload)
        behind = w_data                     # what follows the head when the FIFO holds at most one token
        second = head                       # (depth 1: none)
        if depth >= 2:
            # the entry behind the head, registered like the head (r_next of the next cycle: the third entry or
            # the token being written when the head is read, else the second or the token being written)
            second = Signal(token_layout(self.width).size)
            if depth >= 3:
                # the third entry's address, a register advanced by each read (the head's entry + 2: no
                # increments between the pointer and the read)
                third_ptr = Signal(range(depth), init=2)
                with m.If(do_read):
                    m.d.sync += third_ptr.eq(_incr(third_ptr, depth))
                third = mem.read_port(domain="comb")
                m.d.comb += third.addr.eq(third_ptr)
                from_storage = third.data
            else:
                from_storage = w_data       # never chosen: a FIFO of depth 2 holds no third entry
            take_w2 = Mux(do_read, lt3, lt2)
            m.d.sync += second.eq(Mux(take_w2, w_data, Mux(do_read, from_storage, second)))
            m.d.comb += [self.r_next.eq(second), self.r_next_valid.eq(~lt2)]
            behind = Mux(lt2, w_data, second)
        stay = Mux(lt1, w_data, head)
        # r_after = do_read ? behind : stay, written so that the token being written (late: the producer's
        # logic) passes one multiplexer: it is the next head when the FIFO holds none after this cycle's read
        take_w = Mux(do_read, lt2, lt1)
        kept = Mux(do_read, second, head)
        m.d.comb += [self.r_after.eq(Mux(take_w, w_data, kept)), self.r_behind.eq(behind),
                     self.r_stay.eq(stay)]
        m.d.sync += head.eq(self.r_after)
        return m


class PeekFIFO(wiring.Component):
    """A channel FIFO that shows its first three entries and can pop two in one cycle: the channels into an
    intersect with look-ahead (docs/samml.md, intersect: a firing may pop a lower input's second token too).

    Ports as :class:`StreamFIFO`'s ``w``, ``r``, ``level``, ``r_next`` and ``r_next_valid``, plus ``r_third`` and
    ``r_third_valid`` (the third entry, ``level >= 3``) and ``r_pop2`` (In): with ``r.ready``, the entry behind
    the head is read too (the consumer asserts it only when ``r_next_valid``). Timing is the simulator's
    channel's: a token written in cycle t is readable in t + 1; slots freed by reads in t are writable in t + 1
    (``w.ready = level != depth``). The three entries are registers (the consumer's comparisons start at
    flip-flops); entries further back are read from the storage at registered pointers, to refill them.

    ``held=False``: for a consumer that only passes the payload on (intersect's references): the payloads are
    not held in registers but read from the storage (LUT RAM, asynchronous reads) at three pointer registers,
    each advanced by the reads, so that the consumer's pops (late: its firing) drive a few pointer bits, not
    every payload bit of three entries. Same ports, same values whenever they are valid, same cycles.
    """

    def __init__(self, width, depth=3, held=True):
        if depth < 1:
            raise ValueError(f"FIFO depth must be >= 1, got {depth}")
        self.width = width
        self.depth = depth
        self.held = held
        super().__init__({
            "w": In(token_signature(width)),
            "r": Out(token_signature(width)),
            "level": Out(range(depth + 1)),
            "r_next": Out(token_layout(width)),
            "r_next_valid": Out(1),
            "r_third": Out(token_layout(width)),
            "r_third_valid": Out(1),
            "r_pop2": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        size = token_layout(self.width).size
        w_data = Value.cast(self.w.payload)
        # ge[j]: level >= j, registered (ge[0] is always 1)
        ge = [Signal(name=f"ge{j}") for j in range(6)]
        ge[0] = 1
        entries = [Signal(size, name=f"entry{i}") for i in range(3)]
        do_write = self.w.valid & self.w.ready
        pop1 = self.r.valid & self.r.ready
        second = self.r_pop2 & ge[2]            # with pop1: the entry behind the head is read too
        pop2 = pop1 & second
        content = list(entries)
        if not self.held:
            mem = _ring_memory(m, size, depth, w_data, do_write)
            for i in range(3):
                # entry i's address, a register advanced by each read (no increments before the read)
                ptr = Signal(range(depth), init=i % depth, name=f"ptr{i}")
                one, two = _incr(ptr, depth), _incr(_incr(ptr, depth), depth)
                m.d.sync += ptr.eq(Mux(pop2, two, Mux(pop1, one, ptr)))
                rd = mem.read_port(domain="comb")
                m.d.comb += [rd.addr.eq(ptr), entries[i].eq(rd.data)]
        elif depth > 3:
            mem = _ring_memory(m, size, depth, w_data, do_write)
            for j in range(3, min(depth, 5)):
                # the entry j places behind the head, at a pointer advanced by each read
                ptr = Signal(range(depth), init=j % depth, name=f"ptr{j}")
                one, two = _incr(ptr, depth), _incr(_incr(ptr, depth), depth)
                m.d.sync += ptr.eq(Mux(pop2, two, Mux(pop1, one, ptr)))
                rd = mem.read_port(domain="comb")
                m.d.comb += rd.addr.eq(ptr)
                content.append(rd.data)
        while len(content) < 5:
            content.append(w_data)          # never holds a token: the FIFO is not that deep
        for i in range(3 if self.held else 0):
            # entry i of the next cycle: entry k + i of this one after k reads, or the token being written
            stay = Mux(ge[i + 1], content[i], w_data)
            one = Mux(ge[i + 2], content[i + 1], w_data)
            two = Mux(ge[i + 3], content[i + 2], w_data)
            m.d.sync += entries[i].eq(Mux(pop1, Mux(second, two, one), stay))
        level = self.level
        # the next level from candidates of the register chosen by the write, then the consumer's (late) reads
        # (an adder after the pops ended the consumer's firing path)
        reads = [Mux(do_write, level + 1 - k, level - k) for k in range(3)]
        m.d.sync += level.eq(Mux(pop1, Mux(second, reads[2], reads[1]), reads[0]))

        def at_least(j):
            # level >= j in this cycle: a flag, or a compare of the level register (early: no read in it)
            return 1 if j <= 0 else 0 if j > depth else ge[j] if j <= 5 else level >= j

        for j in range(1, 6):
            # level >= j after this cycle's write and reads: this cycle's flags, chosen by the reads last
            # (no adder and compare after the consumer's late pops)
            def after(k):
                return Mux(do_write, at_least(j + k - 1), at_least(j + k))
            m.d.sync += ge[j].eq(Mux(pop1, Mux(second, after(2), after(1)), after(0)))
        m.d.comb += [
            self.w.ready.eq(~at_least(depth)),          # a flag (depth <= 5), not a compare of the level
            self.r.valid.eq(ge[1]),
            self.r.payload.eq(entries[0]),
            self.r_next.eq(entries[1]),
            self.r_next_valid.eq(ge[2]),
            self.r_third.eq(entries[2]),
            self.r_third_valid.eq(ge[3]),
        ]
        return m


def _ring_memory(m, size, depth, w_data, do_write):
    """A memory of ``depth`` entries written in turn (``w_data`` when ``do_write``, at a pointer advanced by each
    write); the caller reads it at pointers of its own."""
    m.submodules.storage = mem = Memory(shape=unsigned(size), depth=depth, init=[])
    wp = mem.write_port()
    produce = Signal(range(depth))
    with m.If(do_write):
        m.d.sync += produce.eq(_incr(produce, depth))
    m.d.comb += [wp.addr.eq(produce), wp.data.eq(w_data), wp.en.eq(do_write)]
    return mem


def _incr(ptr, depth):
    """``ptr + 1`` modulo ``depth`` (any depth, not only powers of two)."""
    if depth == 1:
        return ptr
    return Mux(ptr == depth - 1, 0, ptr + 1)


class FanOut(wiring.Component):
    """One W-bit stream to ``n`` consumers; a transfer happens on all outputs at once.

    ``o[k].valid = i.valid & (every other o[j].ready)``, ``i.ready = every o[j].ready``. An output's
    valid never depends on its own ready; each output must feed a FIFO write side (whose ready does not
    depend on valid), as in a kernel top.
    """

    def __init__(self, width, n):
        if n < 1:
            raise ValueError(f"fan-out needs n >= 1, got {n}")
        self.width = width
        self.n = n
        super().__init__({
            "i": In(token_signature(width)),
            "o": Out(token_signature(width)).array(n),
        })

    def elaborate(self, platform):
        m = Module()
        for k in range(self.n):
            others = all_of(self.o[j].ready for j in range(self.n) if j != k)
            m.d.comb += [
                self.o[k].payload.eq(self.i.payload),
                self.o[k].valid.eq(self.i.valid & others),
            ]
        m.d.comb += self.i.ready.eq(all_of(o.ready for o in self.o))
        return m
