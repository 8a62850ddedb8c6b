"""union: co-iterates n fibres and emits every coordinate present in any; absent sides get reference N.

Every firing inspects all 2n input heads and writes every output (fuseflow/sim/ops/union.py): with some
data heads, emits the smallest coordinate; each input holding it emits its reference and pops (crd and
ref), the others emit N; with only control heads (equal stops, or D) emits it everywhere and pops all.

Which inputs hold the smallest coordinate is decided a cycle ahead: the pairwise comparisons of the crd heads
(``key_i <= key_j``, control heads sorting after every coordinate) are computed on the next cycle's heads and
registered (:meth:`OpComponent.compare_heads_ahead`, shared with serialize). Each crd input has a next-head view
(``i_crd<i>_behind``, ``i_crd<i>_stay``: the channel's ``r_behind``/``r_stay``, :meth:`OpComponent.after`); every
pair of candidates is compared (the candidates do not depend on this cycle's firing) and registered, and so are
this cycle's pops, which choose among the registered comparisons in the next cycle (the next head is the one
behind when the head was read, else the one that stayed; a channel's head register loads ``r_after`` every cycle
in the same way). The firing decision and the reference outputs thus start at flip-flops and one multiplexer: no
comparator lies between the crd heads and the ref outputs, which address the next op's memory reads (a
level_scan's seg read, an array's vals read) through its channel's next-head view.
"""

from amaranth.hdl import Cat, Module, Mux, Signal

from ..stream import all_of
from ._common import OpComponent, copy_ctrl, copy_tok, set_data, set_empty


class Union(OpComponent):
    op_name = "union"

    def _add_members(self, members):
        for i in range(self.params["arity"]):
            self._add_after(members, f"crd{i}")

    def after_ports(self):
        return [f"crd{i}" for i in range(self.params["arity"])]

    def elaborate(self, platform):
        m = Module()
        n = self.params["arity"]
        w = self.crd_width
        f = self.fire_logic()
        crds = [getattr(self, f"i_crd{i}") for i in range(n)]
        refs = [getattr(self, f"i_ref{i}") for i in range(n)]
        m.d.comb += f.go.eq(all_of(s.valid for s in crds + refs))

        def key(tok):
            # control heads sort after every coordinate
            return Cat(tok.data[:w], tok.ctrl)

        keys = [key(c.payload) for c in crds]
        # le[i, j] (i < j): key_i <= key_j, and lt[i, j]: key_i < key_j (so key_j <= key_i is ~lt[i, j]), of this
        # cycle's heads, compared a cycle ahead
        rel = self.compare_heads_ahead(m, [f"crd{i}" for i in range(n)], key,
                                       {"le": lambda a, b: a <= b, "lt": lambda a, b: a < b})
        le, lt = rel["le"], rel["lt"]
        # input i holds the smallest key (a coordinate whenever some head is one)
        hits = []
        for i in range(n):
            hit = Signal(name=f"hit{i}")
            m.d.comb += hit.eq(all_of([~lt[j, i] for j in range(i)] + [le[i, j] for j in range(i + 1, n)]))
            hits.append(hit)
        # the smallest coordinate: the key of the first input holding it
        low = keys[n - 1][:w]
        for i in reversed(range(n - 1)):
            low = Mux(hits[i], keys[i][:w], low)
        any_data = ~all_of(c.payload.ctrl for c in crds)
        m.d.comb += f.push["crd"].eq(1)
        for i in range(n):
            m.d.comb += f.push[f"ref{i}"].eq(1)
        with m.If(any_data):
            set_data(m, self.o_crd, low)
            for i in range(n):
                o = getattr(self, f"o_ref{i}")
                m.d.comb += [f.pop[f"crd{i}"].eq(hits[i]), f.pop[f"ref{i}"].eq(hits[i])]
                with m.If(hits[i]):
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
