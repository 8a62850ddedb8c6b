"""crd_drop: drops outer coordinates whose inner fibre is empty, and those empty fibres.

fuseflow/sim/ops/crd_drop.py. State: ``in_fibre`` (copying a kept inner fibre), ``pending`` (a kept
fibre's closing S0 is held back), ``closed`` (the inner stream already closed the current outer fibre).

- in a fibre (inspects inner): data/N -> emitted on inner, popped; ``S0`` -> popped, held (pending), no
  output; ``S_n`` (n >= 1) -> emitted, popped, closed.
- outside (inspects outer; and inner unless the outer head is a stop after ``closed``):
  outer coordinate + inner data -> emits the coordinate on outer and, on inner, the held ``S0`` (inner
  not popped) or the inner token (popped); enters the fibre.
  outer coordinate + inner ``S0`` -> the empty fibre is dropped: pops both, no output.
  outer coordinate + inner ``S_n`` (n >= 1) -> emits ``S_n`` on inner (absorbing a held S0), pops both,
  closed.
  outer stop after ``closed`` -> emits it on outer, pops outer.
  outer stop otherwise (inner ``S_(m+1)``) -> emits both, pops both. D + D -> D on both.
- the ``arity`` aligned references: every step that reads inner needs their heads too (``inner_valid``);
  each is popped and pushed exactly when inner is, carrying its own head or the held ``S0``.
"""

from amaranth.hdl import Module, Signal

from ..token import is_data_or_empty, is_done, is_stop, stop_level
from ._common import OpComponent, copy_tok, set_stop


class CrdDrop(OpComponent):
    op_name = "crd_drop"

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        c, cv = self.i_outer.payload, self.i_outer.valid
        x = self.i_inner.payload
        oo, oi = self.o_outer, self.o_inner
        arity = int(self.params.get("arity") or 0)
        refs = [getattr(self, f"i_ref{i}") for i in range(arity)]
        orefs = [getattr(self, f"o_ref{i}") for i in range(arity)]
        xv = self.i_inner.valid                 # inner and every aligned reference have a head
        for r in refs:
            xv = xv & r.valid
        pending = Signal()
        closed = Signal()
        in_fibre = Signal()
        x_s0 = is_stop(x) & (stop_level(x) == 0)

        with m.If(in_fibre):
            m.d.comb += f.go.eq(xv)
            with m.If(is_data_or_empty(x)):
                m.d.comb += [f.push["inner"].eq(1), f.pop["inner"].eq(1)]
                copy_tok(m, oi, x)
            with m.Elif(x_s0):
                m.d.comb += f.pop["inner"].eq(1)
                with m.If(f.fire):
                    m.d.sync += [pending.eq(1), in_fibre.eq(0)]
            with m.Else():
                m.d.comb += [f.push["inner"].eq(1), f.pop["inner"].eq(1)]
                copy_tok(m, oi, x)
                with m.If(f.fire):
                    m.d.sync += [closed.eq(1), in_fibre.eq(0)]
        with m.Elif(~c.ctrl):
            m.d.comb += f.go.eq(cv & xv)
            with m.If(is_data_or_empty(x)):
                m.d.comb += [f.push["outer"].eq(1), f.push["inner"].eq(1), f.pop["outer"].eq(1),
                             f.pop["inner"].eq(~pending)]
                copy_tok(m, oo, c)
                with m.If(pending):
                    set_stop(m, oi, 0)
                with m.Else():
                    copy_tok(m, oi, x)
                with m.If(f.fire):
                    m.d.sync += [pending.eq(0), in_fibre.eq(1)]
            with m.Elif(x_s0):
                m.d.comb += [f.pop["outer"].eq(1), f.pop["inner"].eq(1)]
            with m.Else():
                m.d.comb += [f.push["inner"].eq(1), f.pop["outer"].eq(1), f.pop["inner"].eq(1)]
                copy_tok(m, oi, x)
                with m.If(f.fire):
                    m.d.sync += [pending.eq(0), closed.eq(1)]
        with m.Elif(is_stop(c) & closed):
            m.d.comb += [f.go.eq(cv), f.push["outer"].eq(1), f.pop["outer"].eq(1)]
            copy_tok(m, oo, c)
            with m.If(f.fire):
                m.d.sync += closed.eq(0)
        with m.Else():
            # an outer stop meeting its inner partner S_(m+1), or D meeting D
            m.d.comb += [f.go.eq(cv & xv), f.push["outer"].eq(1), f.push["inner"].eq(1),
                         f.pop["outer"].eq(1), f.pop["inner"].eq(1)]
            copy_tok(m, oo, c)
            copy_tok(m, oi, x)
        for i, (r, o) in enumerate(zip(refs, orefs)):
            # the references follow inner: same pops and pushes, their own head or the held S0
            m.d.comb += [f.pop[f"ref{i}"].eq(f.pop["inner"]), f.push[f"ref{i}"].eq(f.push["inner"])]
            with m.If(~in_fibre & ~c.ctrl & is_data_or_empty(x) & pending):
                set_stop(m, o, 0)
            with m.Else():
                copy_tok(m, o, r.payload)
        f.build(m)
        return m
