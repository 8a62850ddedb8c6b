"""intersect: co-iterates n fibres and emits the coordinates present in all of them.

Every firing inspects all 2n input heads (fuseflow/sim/ops/intersect.py):
all coordinates equal -> emits the coordinate and every input's reference, pops all;
all data but not equal -> pops (crd and ref of) every input whose coordinate is below a ring neighbour's
(inputs i - 1 and i + 1 mod n; at arities 2 and 3, below the largest) (LOW), no output; with look-ahead it needs
the second coordinate (``i_crd<i>_next``, valid) of the LOW input as well, and also pops the input at the largest when the LOW input's second coordinate is above it or a stop;
all control (equal stops, or D) -> emits it on every output, pops all;
some at a stop, others at data -> pops the data ones, no output.

Look-ahead (``lookahead=True``) is for arity 2 (the registry's ``input_depth_for``) with channels of depth >= its
``input_depth`` (3) on every input; the simulator decides it from the same depths. Its readies are choices, by the
comparisons, among outcomes decided from the flip-flops alone (``Intersect._lookahead_pair``). Wider intersects
pop on their heads alone (docs/hardware.md, "intersect look-ahead": there it cost more clock than it saved cycles).
"""

from functools import reduce

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib.wiring import In, Out

from ...samml.registry import get_op
from ..stream import all_of
from ..token import token_layout
from ._common import OpComponent, copy_ctrl, copy_tok, kept, set_data


def less(x, y):
    """``x < y`` (unsigned) as the borrow of ``x - y`` one bit wider: a carry chain of its own for each
    comparison. Written as ``<``, Yosys (alumacc) makes one subtraction serve ``x < y`` and ``y < x`` (or
    ``x > y``) and derives the second from an equality tree beside it, several LUT levels deeper."""
    wd = max(len(x), len(y)) + 1
    return (Cat(x, Const(0, wd - len(x))) - Cat(y, Const(0, wd - len(y))))[wd - 1]


class Intersect(OpComponent):
    op_name = "intersect"
    lookahead_depth = get_op("intersect").input_depth

    def _add_members(self, members):
        for p in self.peek_ports():
            members[f"i_{p}_next"] = In(token_layout(self.port_info[f"i_{p}"][1]))
            members[f"i_{p}_next_valid"] = In(1)
        for p in self.third_ports():
            members[f"i_{p}_third"] = In(token_layout(self.crd_width))
            members[f"i_{p}_third_valid"] = In(1)
        for p in self.pop2_ports():
            members[f"pop2_{p}"] = Out(1)

    def peek_ports(self):
        """Every input port when look-ahead is on (of the ``ref<i>`` ports only the valid bit is used)."""
        n = self.params["arity"]
        return [f"crd{i}" for i in range(n)] + [f"ref{i}" for i in range(n)] if self.lookahead else []

    def third_ports(self):
        """The coordinate ports ``crd<i>`` when look-ahead is on."""
        return [f"crd{i}" for i in range(self.params["arity"])] if self.lookahead else []

    def pop2_ports(self):
        """Every input port when look-ahead is on: a firing may pop a lower input's second token too."""
        return self.peek_ports()

    def passed_ports(self):
        """The reference ports ``ref<i>`` when look-ahead is on: their payloads only go to ``o_ref<i>``."""
        return [f"ref{i}" for i in range(self.params["arity"])] if self.lookahead else []

    def _behind_views(self, n):
        """Per input: the look-ahead's views behind the head, ``(second crd, its valid, the second ref's valid,
        third crd, its valid)``, each a list over the ``n`` inputs."""
        return ([getattr(self, f"i_crd{i}_next") for i in range(n)],
                [getattr(self, f"i_crd{i}_next_valid") for i in range(n)],
                [getattr(self, f"i_ref{i}_next_valid") for i in range(n)],
                [getattr(self, f"i_crd{i}_third") for i in range(n)],
                [getattr(self, f"i_crd{i}_third_valid") for i in range(n)])

    def _lookahead_pair(self, m, crds, refs, heads_valid, all_data, all_ctrl, ready_all):
        """Arity 2 with look-ahead: each ready as a choice by the comparisons among values decided without them.

        With all data, input i (the other is j) pops: when LOW (``L_ij = crd<i> < crd<j>``), if its second is
        visible; when j is LOW (``L_ji``), if j's second is visible and j skips (its second a stop or above crd<i>:
        ``P_ji``, or ``y_j``: its second data below crd<i>, visible with its reference, and its third visible and a
        stop or above crd<i>); when equal, with R. Not all data, the ready does not depend on a comparison. So
        ``ready<i> = L_ij ? a : (y_j ? t : u)`` with ``u = L_ji ? (P_ji ? t : s) : b`` and ``a``, ``b``, ``s``, ``t``
        the four outcomes from flip-flops (each also the not-all-data ready): two LUT levels after the comparators.
        ``y_j`` implies ``L_ji`` (a fibre ascends: crd<j> < next<j> < crd<i>), so it needs no ``L_ji`` beside it.
        The outcomes (and whether j's second and third are visible) are on kept wires, so that the mapper does not
        fold them into the logic after the comparators; ``y_j`` and ``u`` are not (kept, they cut the mapper's view
        of the comparators' delay from the logic behind the ready: fused_chain3 91.6 / 92.4 at seeds 1 / 2, without
        92.4 / 93.0)."""
        w = self.crd_width
        cv = [c.payload.data[:w] for c in crds]
        nxt, nv, rnv, third, tv = self._behind_views(2)
        # second data and visible with its reference (then behind a data head it is above that head)
        data2 = [nv[i] & ~nxt[i].ctrl & rnv[i] for i in range(2)]
        for i in range(2):
            j = 1 - i
            early = heads_valid & Mux(all_ctrl, ready_all, ~crds[i].payload.ctrl)

            def outcome(value, name):
                return kept(m, Mux(all_data, heads_valid & value, early), f"{name}{i}")

            a = outcome(nv[i], "rdy_low")                       # i LOW: its second visible
            b = outcome(ready_all, "rdy_eq")                    # equal: R
            s = outcome(nv[j] & nxt[j].ctrl, "rdy_stop")        # j LOW, its second a stop
            t = outcome(nv[j], "rdy_skip")                      # j LOW and skips
            y = (kept(m, data2[j] & tv[j], f"two_visible{j}") & less(nxt[j].data[:w], cv[i])
                 & (third[j].ctrl | less(cv[i], third[j].data[:w])))
            u = Mux(less(cv[j], cv[i]), Mux(less(cv[i], nxt[j].data[:w]), t, s), b)
            ready = Mux(less(cv[i], cv[j]), a, Mux(y, t, u))
            m.d.comb += [crds[i].ready.eq(ready), refs[i].ready.eq(ready)]
            # the second token too (the channel reads it only with ready): with all data when below the other head
            # (then LOW), else while the other is at a stop and this one is data
            pop2 = data2[i] & Mux(all_data, less(nxt[i].data[:w], cv[j]), ~all_ctrl & ~crds[i].payload.ctrl)
            m.d.comb += [getattr(self, f"pop2_crd{i}").eq(pop2), getattr(self, f"pop2_ref{i}").eq(pop2)]

    def _readies_wide(self, m, crds, refs, outs, heads_valid, all_data, all_ctrl, ready_all):
        """Arity >= 4 without look-ahead: input k is LOW when below a ring neighbour (``crd<k> < crd<k-1>`` or
        ``crd<k> < crd<k+1>``, indices mod n; the simulator's rule), so 2n comparators, each coordinate into four.
        Each ready and output valid is an OR/AND of terms kept in flip-flop-free LUTs (``kept``) so that the
        comparisons enter only at the last LUT levels::

            ready<k> = lowterm<k> | eqterm<k> & ~OR(succ<j> for the others beyond the first three)
            lowterm<k> = (~all_data & X<k>) | (all_data & H) & (lt<k,k-1> | succ<k>)
            eqterm<k> = (all_data & H & R) & ~OR(succ<j> for the first three others)
            o<p>.valid = (none_below & ~succ<n-1>) ? D<p> : C<p>

        ``succ<k>`` is ``crd<k> < crd<k+1>``; no input below its successor around the ring forces all equal
        (meaningful with all data only: the comparisons ignore control bits). With k not LOW its own ``succ<k>``
        is false, so "all equal" in ``eqterm`` needs the others' only. ``X<k>`` is the not-all-data ready (a data
        input pops, a control one waits, all control push and pop all), ``H`` every head valid, ``R`` every
        output ready, ``D<p>``/``C<p>`` every head valid and every other output ready with all data or all
        control / with all control."""
        n = self.params["arity"]
        w = self.crd_width
        cv = [c.payload.data[:w] for c in crds]
        lt = {}
        for k in range(n):
            for j in ((k - 1) % n, (k + 1) % n):
                lt[k, j] = less(cv[k], cv[j])
        succ = [lt[k, (k + 1) % n] for k in range(n)]        # all equal <=> none below its successor
        any_of = lambda terms: reduce(lambda a, b: a | b, terms)
        for k in range(n):
            early = heads_valid & Mux(all_ctrl, ready_all, ~crds[k].payload.ctrl)
            x = Mux(all_data, heads_valid, early)
            # ready<k> = (~all data & X) | (all data & H & lo<k>) | (all data & H & R & all_eq); with k not LOW its
            # own successor comparison is false, so all_eq is the others': one LUT level for the first two terms,
            # one for the third with up to three of them, and one LUT joining both and the rest
            low_term = kept(m, kept(m, ~all_data & x, f"rdy_mixed{k}")
                            | kept(m, all_data & heads_valid, f"rdy_low{k}") & (lt[k, (k - 1) % n] | succ[k]),
                            f"rdy_lowterm{k}")
            others = [succ[j] for j in range(n) if j != k]
            eq_term = kept(m, kept(m, all_data & heads_valid & ready_all, f"rdy_eq{k}") & ~any_of(others[:3]),
                           f"rdy_eqterm{k}")
            rest = others[3:]
            ready = low_term | (eq_term & ~any_of(rest) if rest else eq_term)
            m.d.comb += [crds[k].ready.eq(ready), refs[k].ready.eq(ready)]
        # o.valid = all_eq ? D : C, all_eq split so that the last LUT takes one comparison and the others' NOR
        none_below = kept(m, ~any_of(succ[:-1]), "none_below")
        for p, o in enumerate(outs):
            others = heads_valid & all_of(q.ready for j, q in enumerate(outs) if j != p)
            push_d = kept(m, others & (all_data | all_ctrl), f"valid_base{p}")
            push_c = kept(m, others & all_ctrl, f"valid_ctrl{p}")
            m.d.comb += o.valid.eq(Mux(none_below & ~succ[-1], push_d, push_c))

    def _payloads(self, m, crds, refs, all_ctrl):
        """The payloads do not wait for the comparisons (they matter only when pushed): control tokens when every
        head is one, else the coordinate and the references."""
        n = self.params["arity"]
        with m.If(all_ctrl):
            copy_ctrl(m, self.o_crd, crds[0].payload)
            for i in range(n):
                copy_ctrl(m, getattr(self, f"o_ref{i}"), crds[0].payload)
        with m.Else():
            set_data(m, self.o_crd, crds[0].payload.data[:self.crd_width])
            for i in range(n):
                copy_tok(m, getattr(self, f"o_ref{i}"), refs[i].payload)

    def elaborate(self, platform):
        m = Module()
        n = self.params["arity"]
        w = self.crd_width
        crds = [getattr(self, f"i_crd{i}") for i in range(n)]
        refs = [getattr(self, f"i_ref{i}") for i in range(n)]
        heads_valid = all_of(s.valid for s in crds + refs)
        cv = [c.payload.data[:w] for c in crds]
        all_data = all_of(~c.payload.ctrl for c in crds)
        all_ctrl = all_of(c.payload.ctrl for c in crds)
        outs = [self.o_crd] + [getattr(self, f"o_ref{i}") for i in range(n)]
        ready_all = all_of(o.ready for o in outs)
        if n >= 4:                                           # readies and valids written out by _readies_wide
            self._payloads(m, crds, refs, all_ctrl)
            self._readies_wide(m, crds, refs, outs, heads_valid, all_data, all_ctrl, ready_all)
            return m
        go = Signal(name="go")
        # below the largest head <=> below some head: pairwise comparisons side by side, instead of a comparison
        # behind the maximum's own comparator and multiplexer
        low = [Signal(name=f"low{i}") for i in range(n)]
        m.d.comb += [low[i].eq(reduce(lambda a, b: a | b, [less(cv[i], cv[j]) for j in range(n) if j != i]))
                     for i in range(n)]
        # all coordinates equal (used with all data only): none below another, from the same comparators, no
        # equality trees beside them on the coordinates
        all_eq = ~reduce(lambda a, b: a | b, low)
        m.d.comb += go.eq(heads_valid)
        self._payloads(m, crds, refs, all_ctrl)
        # The firing rule of ``_common.Fire`` (fire = go & AND_q(~push_q | ready_q), i.ready = fire & pop,
        # o.valid = go & push & AND_{q != p}(~push_q | ready_q)) written out for intersect, whose outputs are all
        # pushed or none (push = all data & all equal | all control), so that the comparisons enter at the last
        # multiplexers instead of passing through push and fire. Per case, with R = every output ready:
        # all data, all equal: push, pop all (ready = go & R); all data, not equal: pop LOW (with look-ahead, and
        # skip), no push; all control: push, pop all; else pop the data heads, no push.
        if self.lookahead:                                   # arity 2 (the registry's input_depth_for)
            self._lookahead_pair(m, crds, refs, heads_valid, all_data, all_ctrl, ready_all)
        else:
            for k in range(n):
                ready = Mux(all_data, go & Mux(all_eq, ready_all, low[k]),     # all data, not equal: pop LOW
                            go & Mux(all_ctrl, ready_all, ~crds[k].payload.ctrl))
                m.d.comb += [crds[k].ready.eq(ready), refs[k].ready.eq(ready)]
        # go & push: with all data, pushing needs all equal, and then go holds with the heads
        push = Mux(all_data, all_eq, all_ctrl)
        for p, o in enumerate(outs):
            m.d.comb += o.valid.eq(heads_valid & all_of(q.ready for j, q in enumerate(outs) if j != p) & push)
        return m
