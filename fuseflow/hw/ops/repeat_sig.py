"""repeat_sig: coordinates to repeat signals: R per coordinate or N, S per stop, D; one firing per token."""

from amaranth.hdl import Module

from ..token import is_done, is_stop
from ._common import OpComponent, set_data, set_done, set_stop


class RepeatSig(OpComponent):
    op_name = "repeat_sig"

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        inp = self.i_in.payload
        out = self.o_repsig
        m.d.comb += [f.go.eq(self.i_in.valid), f.push["repsig"].eq(1), f.pop["in"].eq(1)]
        with m.If(is_stop(inp)):
            set_stop(m, out, 0)
        with m.Elif(is_done(inp)):
            set_done(m, out)
        with m.Else():
            set_data(m, out, 0)
        f.build(m)
        return m
