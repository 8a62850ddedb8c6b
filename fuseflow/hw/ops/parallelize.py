"""parallelize: splits a stream across lanes, round-robin by fibre (fuseflow/sim/ops/parallelize.py).

Inspects ``in``: a data token or N writes lane ``k`` (a counter, the token's position in its fibre modulo
``lanes``) and advances ``k``; a stop or D writes every lane and resets ``k``.
"""

from amaranth.hdl import Module, Mux, Signal

from ..token import is_data_or_empty
from ._common import OpComponent, copy_tok


class Parallelize(OpComponent):
    op_name = "parallelize"

    def elaborate(self, platform):
        m = Module()
        n = self.params["lanes"]
        f = self.fire_logic()
        x, xv = self.i_in.payload, self.i_in.valid
        k = Signal(range(n))
        m.d.comb += [f.go.eq(xv), f.pop["in"].eq(1)]
        for i in range(n):
            o = getattr(self, f"o_out{i}")
            copy_tok(m, o, x)
            m.d.comb += f.push[f"out{i}"].eq(~is_data_or_empty(x) | (k == i))
        with m.If(f.fire):
            with m.If(is_data_or_empty(x)):
                m.d.sync += k.eq(Mux(k == n - 1, 0, k + 1))
            with m.Else():
                m.d.sync += k.eq(0)
        f.build(m)
        return m
