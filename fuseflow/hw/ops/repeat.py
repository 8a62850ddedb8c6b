"""repeat: re-emits the held input token once per R; S closes its fibre with stop promotion.

States (fuseflow/sim/ops/repeat.py):

- FRESH (nothing held; inspects the heads of ``in`` and ``repsig``):
  ``in`` = D (repsig D) -> emits D, pops both; ``in`` = S_m (repsig S) -> emits S_(m+1), pops both;
  ``in`` = x (data or N) with R -> emits x, pops both, holds x (HELD);
  with S -> pops both without output (x's fibre is empty), CLOSE.
- HELD (inspects ``repsig``): R -> emits x, pops repsig. S -> also inspects ``in`` (the next token):
  S_m -> emits S_(m+1) and pops it; else emits S0; pops repsig; FRESH.
- CLOSE (inspects ``in``): S_m -> emits S_(m+1), pops it; else emits S0. FRESH.
"""

from amaranth.hdl import Module, Signal

from ..token import is_done, is_stop, stop_level, token_layout
from ._common import OpComponent, copy_tok, set_done, set_stop, set_tok

FRESH, HELD, CLOSE = 0, 1, 2


class Repeat(OpComponent):
    op_name = "repeat"

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        x, xv = self.i_in.payload, self.i_in.valid
        s, sv = self.i_repsig.payload, self.i_repsig.valid
        out = self.o_out
        width = self.port_info["i_in"][1]
        held = Signal(token_layout(width))
        state = Signal(range(3))
        s_is_r = ~s.ctrl
        s_is_s = is_stop(s)

        def close():
            m.d.comb += f.push["out"].eq(1)
            with m.If(is_stop(x)):
                m.d.comb += f.pop["in"].eq(1)
                set_stop(m, out, stop_level(x) + 1)
            with m.Else():
                set_stop(m, out, 0)

        with m.Switch(state):
            with m.Case(FRESH):
                m.d.comb += f.go.eq(xv & sv)
                with m.If(is_done(x)):
                    m.d.comb += [f.push["out"].eq(1), f.pop["in"].eq(1), f.pop["repsig"].eq(1)]
                    set_done(m, out)
                with m.Elif(is_stop(x)):
                    m.d.comb += [f.push["out"].eq(1), f.pop["in"].eq(1), f.pop["repsig"].eq(1)]
                    set_stop(m, out, stop_level(x) + 1)
                with m.Elif(s_is_r):
                    m.d.comb += [f.push["out"].eq(1), f.pop["in"].eq(1), f.pop["repsig"].eq(1)]
                    copy_tok(m, out, x)
                    with m.If(f.fire):
                        m.d.sync += [held.eq(x), state.eq(HELD)]
                with m.Elif(s_is_s):
                    m.d.comb += [f.pop["in"].eq(1), f.pop["repsig"].eq(1)]
                    with m.If(f.fire):
                        m.d.sync += state.eq(CLOSE)
            with m.Case(HELD):
                with m.If(s_is_r):
                    m.d.comb += [f.go.eq(sv), f.push["out"].eq(1), f.pop["repsig"].eq(1)]
                    set_tok(m, out, held.data, held.ctrl)
                with m.Else():
                    m.d.comb += [f.go.eq(sv & xv), f.pop["repsig"].eq(1)]
                    close()
                    with m.If(f.fire):
                        m.d.sync += state.eq(FRESH)
            with m.Case(CLOSE):
                m.d.comb += f.go.eq(xv)
                close()
                with m.If(f.fire):
                    m.d.sync += state.eq(FRESH)
        f.build(m)
        return m
