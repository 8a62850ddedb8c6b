"""union: co-iterates n fibres and emits every coordinate present in any; absent sides get reference N.

Every firing inspects all 2n input heads and writes every output (fuseflow/sim/ops/union.py): with some
data heads, emits the smallest coordinate; each input holding it emits its reference and pops (crd and
ref), the others emit N; with only control heads (equal stops, or D) emits it everywhere and pops all.
"""

from functools import reduce

from amaranth.hdl import Cat, Module, Mux, Signal

from ..stream import all_of
from ._common import OpComponent, copy_ctrl, copy_tok, set_data, set_empty


class Union(OpComponent):
    op_name = "union"

    def elaborate(self, platform):
        m = Module()
        n = self.params["arity"]
        w = self.crd_width
        f = self.fire_logic()
        crds = [getattr(self, f"i_crd{i}") for i in range(n)]
        refs = [getattr(self, f"i_ref{i}") for i in range(n)]
        m.d.comb += f.go.eq(all_of(s.valid for s in crds + refs))
        # key: control heads sort after every coordinate
        keys = [Cat(c.payload.data[:w], c.payload.ctrl) for c in crds]
        low = Signal(w + 1)
        m.d.comb += low.eq(reduce(lambda a, b: Mux(a <= b, a, b), keys))
        any_data = ~low[w]
        m.d.comb += f.push["crd"].eq(1)
        for i in range(n):
            m.d.comb += f.push[f"ref{i}"].eq(1)
        with m.If(any_data):
            set_data(m, self.o_crd, low[:w])
            for i in range(n):
                hit = keys[i] == low
                o = getattr(self, f"o_ref{i}")
                m.d.comb += [f.pop[f"crd{i}"].eq(hit), f.pop[f"ref{i}"].eq(hit)]
                with m.If(hit):
                    copy_tok(m, o, refs[i].payload)
                with m.Else():
                    set_empty(m, o)
        with m.Else():
            copy_ctrl(m, self.o_crd, crds[0].payload)
            for i in range(n):
                m.d.comb += [f.pop[f"crd{i}"].eq(1), f.pop[f"ref{i}"].eq(1)]
                copy_ctrl(m, getattr(self, f"o_ref{i}"), crds[0].payload)
        f.build(m)
        return m
