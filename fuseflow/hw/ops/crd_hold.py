"""crd_hold: repeats each outer coordinate once per coordinate of its inner fibre (the outer stream at the
inner stream's structure), fuseflow/sim/ops/crd_hold.py.

Inspects outer; and inner unless the outer head is a stop after ``closed``:
outer coordinate + inner data/N -> emits the coordinate, pops inner only;
outer coordinate + inner stop -> emits the stop, pops both; ``closed`` if the stop is S_n, n >= 1;
outer stop after ``closed`` -> pops outer, no output (its inner partner was already emitted);
outer stop + inner ``S_(m+1)`` -> emits the inner stop, pops both; D + D -> D.
"""

from amaranth.hdl import Module, Signal

from ..token import is_data_or_empty, is_stop, stop_level
from ._common import OpComponent, copy_tok


class CrdHold(OpComponent):
    op_name = "crd_hold"

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        c, cv = self.i_outer.payload, self.i_outer.valid
        x, xv = self.i_inner.payload, self.i_inner.valid
        out = self.o_outer
        closed = Signal()
        with m.If(closed & is_stop(c)):
            m.d.comb += [f.go.eq(cv), f.pop["outer"].eq(1)]
            with m.If(f.fire):
                m.d.sync += closed.eq(0)
        with m.Else():
            m.d.comb += [f.go.eq(cv & xv), f.push["outer"].eq(1), f.pop["inner"].eq(1)]
            with m.If(~c.ctrl & is_data_or_empty(x)):
                copy_tok(m, out, c)
            with m.Else():
                m.d.comb += f.pop["outer"].eq(1)
                copy_tok(m, out, x)
                with m.If(f.fire & ~c.ctrl):
                    m.d.sync += closed.eq(is_stop(x) & (stop_level(x) != 0))
        f.build(m)
        return m
