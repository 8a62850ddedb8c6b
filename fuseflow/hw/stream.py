"""Stream plumbing: the channel FIFO and fan-out, with the simulator's timing (DESIGN.md section 5).

:class:`StreamFIFO` wraps :class:`amaranth.lib.fifo.SyncFIFO` (asynchronous-read storage): a token
written in cycle t is readable in cycle t+1, and a slot freed by a read in cycle t is writable in cycle
t+1 (``w.ready = level != depth`` does not look at the read side). That is exactly the reference
simulator's channel (``fuseflow/sim/channel.py``). (``SyncFIFOBuffered`` has one more cycle of latency,
so it would not match the simulator.)

:class:`FanOut` copies one stream to n consumers: a token leaves when every consumer takes it in the
same cycle (the simulator's fan-out: the producer pushes to all channels at once and needs room in
all). Put a :class:`StreamFIFO` behind every fan-out output.
"""

from amaranth.hdl import Module, Signal, Value
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import In, Out

from .token import token_layout, token_signature

__all__ = ["StreamFIFO", "FanOut", "all_of"]


def all_of(values):
    """AND of an iterable of 1-bit values (1 when empty)."""
    r = None
    for v in values:
        r = v if r is None else (r & v)
    return 1 if r is None else r


class StreamFIFO(wiring.Component):
    """A stream-typed channel FIFO of ``depth`` tokens of a W-bit stream.

    Ports: ``w`` (In, the producer side), ``r`` (Out, the consumer side), ``level`` (Out).
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
        })

    def elaborate(self, platform):
        m = Module()
        nbits = token_layout(self.width).size
        m.submodules.fifo = q = fifo.SyncFIFO(width=nbits, depth=self.depth)
        m.d.comb += [
            q.w_data.eq(Value.cast(self.w.payload)),
            q.w_en.eq(self.w.valid),
            self.w.ready.eq(q.w_rdy),
            self.r.payload.eq(q.r_data),
            self.r.valid.eq(q.r_rdy),
            q.r_en.eq(self.r.ready),
            self.level.eq(q.level),
        ]
        return m


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
