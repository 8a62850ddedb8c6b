"""intersect: co-iterates n fibres and emits the coordinates present in all of them.

Every firing inspects all 2n input heads (fuseflow/sim/ops/intersect.py):
all coordinates equal -> emits the coordinate and every input's reference, pops all;
all data but not equal -> pops (crd and ref of) every input whose coordinate is below the largest, no output;
all control (equal stops, or D) -> emits it on every output, pops all;
some at a stop, others at data -> pops the data ones, no output.
"""

from functools import reduce

from amaranth.hdl import Module, Mux, Signal

from ..stream import all_of
from ._common import OpComponent, copy_ctrl, copy_tok, set_data


class Intersect(OpComponent):
    op_name = "intersect"

    def elaborate(self, platform):
        m = Module()
        n = self.params["arity"]
        w = self.crd_width
        f = self.fire_logic()
        crds = [getattr(self, f"i_crd{i}") for i in range(n)]
        refs = [getattr(self, f"i_ref{i}") for i in range(n)]
        m.d.comb += f.go.eq(all_of(s.valid for s in crds + refs))
        cv = [c.payload.data[:w] for c in crds]
        top = Signal(w)
        m.d.comb += top.eq(reduce(lambda a, b: Mux(a >= b, a, b), cv))
        all_data = all_of(~c.payload.ctrl for c in crds)
        all_ctrl = all_of(c.payload.ctrl for c in crds)
        all_eq = all_of(c == cv[0] for c in cv[1:])
        with m.If(all_data):
            with m.If(all_eq):
                m.d.comb += f.push["crd"].eq(1)
                set_data(m, self.o_crd, cv[0])
                for i in range(n):
                    m.d.comb += [f.push[f"ref{i}"].eq(1), f.pop[f"crd{i}"].eq(1), f.pop[f"ref{i}"].eq(1)]
                    copy_tok(m, getattr(self, f"o_ref{i}"), refs[i].payload)
            with m.Else():
                for i in range(n):
                    m.d.comb += [f.pop[f"crd{i}"].eq(cv[i] < top), f.pop[f"ref{i}"].eq(cv[i] < top)]
        with m.Elif(all_ctrl):
            m.d.comb += f.push["crd"].eq(1)
            copy_ctrl(m, self.o_crd, crds[0].payload)
            for i in range(n):
                m.d.comb += [f.push[f"ref{i}"].eq(1), f.pop[f"crd{i}"].eq(1), f.pop[f"ref{i}"].eq(1)]
                copy_ctrl(m, getattr(self, f"o_ref{i}"), crds[0].payload)
        with m.Else():
            for i in range(n):
                d = ~crds[i].payload.ctrl
                m.d.comb += [f.pop[f"crd{i}"].eq(d), f.pop[f"ref{i}"].eq(d)]
        f.build(m)
        return m
