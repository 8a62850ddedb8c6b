"""intersect: co-iterates n fibres and emits the coordinates present in all of them.

Every firing inspects all 2n input heads (fuseflow/sim/ops/intersect.py):
all coordinates equal -> emits the coordinate and every input's reference, pops all;
all data but not equal -> pops (crd and ref of) every input whose coordinate is below the largest (LOW), no
output; with look-ahead it needs the second coordinate (``i_crd<i>_next``, valid) of every LOW input as well,
and also pops the inputs at the largest when some LOW input's second coordinate is above it or a stop;
all control (equal stops, or D) -> emits it on every output, pops all;
some at a stop, others at data -> pops the data ones, no output.

Look-ahead (``lookahead=True``) is for channels of depth >= the registry's ``input_depth`` (3) on every input; the
simulator decides it from the same depths. At arity 2 its readies are choices, by the comparisons, among outcomes
decided from the flip-flops alone (``Intersect._lookahead_pair``); at arity 3 a ready decides a skip from the
comparisons against its own head only (``_lookahead_triple``); others combine them into ``low``, ``two``, ``skip``.
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

    def _heads_below(self, crds):
        """``{(x, y): crd<x> < crd<y>}`` for arity 3 with look-ahead, forced true while any head is a control token
        (then every ready is decided from the flip-flops): the three control bits above the coordinates."""
        w = self.crd_width
        ctrl = Cat(*[c.payload.ctrl for c in crds])
        return {(x, y): less(Cat(crds[x].payload.data[:w], Const(0, 3)), Cat(crds[y].payload.data[:w], ctrl))
                for x in range(3) for y in range(3) if x != y}

    def _lookahead_triple(self, m, crds, refs, heads_valid, all_data, all_ctrl, ready_all, lt, low):
        """Arity 3 with look-ahead: each ready from the 24 comparators (as the general form's) by a few terms of at
        most seven inputs each, only the comparisons against crd<k> deciding whether an input skips for ready<k>.

        With all data and not all equal, input k (the others j and l) pops when every LOW input's second is visible
        (``nv``) and, if k's head is the largest (M), some LOW input skips M. k is LOW when below j or l
        (``L_kj | L_kl``); then j is LOW exactly when below l (the largest is j's or l's head) and l when below j.
        Otherwise (k at M) j is LOW when below k; it skips M (``s_j``) when its second is a stop or above M, or
        below M and popped with its reference, and its third visible and a stop or above M. So::

            ready<k> = A | B & (L_jk & s_j | L_lk & s_l | ~L_jk & ~L_lk & R)
            A = (L_kj | L_kl) & (L_jl ? O_kj : (L_lj ? O_kl : O_k))
            B = ~L_kj & ~L_kl & (~L_jk | nv<j>) & (~L_lk | nv<l>) & H

        with ``O_S`` (kept wires) every head and the seconds of S visible, or the ready when not all data (every
        comparison of the heads is then forced true, so A chooses an O and B is 0), ``H`` every head and R every
        output ready. Flip-flop conditions enter the comparators as bits above the coordinates (ahead of the
        carry, which reaches them last), not as LUT inputs after them: a head that is a control token forces
        the heads' comparisons; a second or third that is a stop compares as ``{1, data}``, above every head; the
        third's comparison is forced false unless the second's reference (``rnv``) and the third are visible
        (``{1, 1, 0, crd<k>} < {rnv, tv, ctrl, third}``; a second not visible or a stop decides without it).
        Keeping A, B and the skip terms on wires as well, or writing the ref port's ready apart so that the
        mapper does not derive one capture from the other, measured slower (130.0 to 138.3 MHz against 140.4 on
        ECP5-85F, seed 1)."""
        w = self.crd_width
        cv = [c.payload.data[:w] for c in crds]
        nxt, nv, rnv, third, tv = self._behind_views(3)
        nt = [Cat(nxt[i].data[:w], nxt[i].ctrl) for i in range(3)]          # a stop above every coordinate
        tt = [Cat(third[i].data[:w], third[i].ctrl) for i in range(3)]
        data2 = [nv[i] & ~nxt[i].ctrl & rnv[i] for i in range(3)]          # second data, with its reference
        below = {(x, k): less(nt[x], cv[k]) for x in range(3) for k in range(3) if x != k}
        for k in range(3):
            j, l = [x for x in range(3) if x != k]
            early = heads_valid & Mux(all_ctrl, ready_all, ~crds[k].payload.ctrl)

            def outcome(value, name):
                return kept(m, Mux(all_data, heads_valid & value, early), f"rdy{k}_{name}")

            o_k, o_kj, o_kl = (outcome(nv[k], "low"), outcome(nv[k] & nv[j], f"low{j}"),
                               outcome(nv[k] & nv[l], f"low{l}"))

            def skips(x):
                """Input x (LOW) skips crd<k>'s head (the largest)."""
                third_above = less(Cat(cv[k], Const(0, 1), Const(0b11, 2)), Cat(tt[x], tv[x], rnv[x]))
                return less(cv[k], nt[x]) | (below[x, k] & third_above)

            a = (lt[k, j] | lt[k, l]) & Mux(lt[j, l], o_kj, Mux(lt[l, j], o_kl, o_k))
            b = ~lt[k, j] & ~lt[k, l] & (~lt[j, k] | nv[j]) & (~lt[l, k] | nv[l]) & heads_valid
            s_j = lt[j, k] & skips(j) | ~lt[j, k] & ~lt[l, k] & ready_all
            s_l = lt[l, k] & skips(l) | ~lt[j, k] & ~lt[l, k] & ready_all
            ready = a | b & (s_j | s_l)
            m.d.comb += [crds[k].ready.eq(ready), refs[k].ready.eq(ready)]
        for i in range(3):
            # the second token too (the channel reads it only with ready): with all data when LOW and below the
            # largest head (below some head), else while another input is at a stop and this one is data
            j, l = [x for x in range(3) if x != i]
            pop2 = data2[i] & Mux(all_data, low[i] & (below[i, j] | below[i, l]), ~all_ctrl & ~crds[i].payload.ctrl)
            m.d.comb += [getattr(self, f"pop2_crd{i}").eq(pop2), getattr(self, f"pop2_ref{i}").eq(pop2)]

    def _readies_wide(self, m, crds, refs, outs, heads_valid, all_data, all_ctrl, ready_all):
        """Arity >= 4 without look-ahead: every ready and output valid a choice among outcomes from flip-flops, the
        comparisons entering at the last LUTs.

        ``lt[x, y]`` is ``crd<x> < crd<y>`` with control bits above the coordinates (y's, and from arity 5 x's too),
        so forced true while a head is a control token. Input k is LOW when below some head (``lo<k>``); else its
        head is the largest, and with all data k pops only when all are equal and every output is ready::

            ready<k> = lo<k> ? X<k> : (H & R & all_eq)        o<p>.valid = all_eq ? O<p> : O<p> & all_ctrl

        ``X<k>`` (kept) is every head valid when all data, else the not-all-data ready (a control head forces every
        ``lo``: a data input k pops, a control one waits, or all control push and pop all); ``all_eq`` is no
        neighbour below another (``lt[i, i+1] | lt[i+1, i]``, false while any head is a control token: y's bit
        forces one of the two); ``O<p>`` (kept) every head valid and every other output ready."""
        n = self.params["arity"]
        w = self.crd_width

        def top(x):
            # (arity 4: y's control bit only, 147.1 / 152.4 / 150.9 MHz at seeds 1 / 2 / 3 against 148.1 / 145.3 /
            # 144.8 with both; arity 5 with both, 147.2 / 139.7 / 140.8 against 133.2 / 130.2 / 135.5 with y's only)
            return [crds[x].payload.ctrl] if n >= 5 else []

        lt = {(x, y): less(Cat(crds[x].payload.data[:w], Const(0, len(top(x)) + 1)),
                           Cat(crds[y].payload.data[:w], *top(x), crds[y].payload.ctrl))
              for x in range(n) for y in range(n) if x != y}
        any_of = lambda terms: reduce(lambda a, b: a | b, terms)
        all_eq = ~any_of([lt[i, i + 1] | lt[i + 1, i] for i in range(n - 1)])
        heads_ready = kept(m, heads_valid & ready_all, "heads_ready")
        for k in range(n):
            early = heads_valid & Mux(all_ctrl, ready_all, ~crds[k].payload.ctrl)
            x = kept(m, Mux(all_data, heads_valid, early), f"rdy_low{k}")
            ready = Mux(any_of([lt[k, j] for j in range(n) if j != k]), x, heads_ready & all_eq)
            m.d.comb += [crds[k].ready.eq(ready), refs[k].ready.eq(ready)]
        for p, o in enumerate(outs):
            others = kept(m, heads_valid & all_of(q.ready for j, q in enumerate(outs) if j != p), f"valid_base{p}")
            ctrl_push = kept(m, others & all_ctrl, f"valid_ctrl{p}")
            m.d.comb += o.valid.eq(Mux(all_eq, others, ctrl_push))

    def elaborate(self, platform):
        m = Module()
        n = self.params["arity"]
        w = self.crd_width
        go = Signal(name="go")
        crds = [getattr(self, f"i_crd{i}") for i in range(n)]
        refs = [getattr(self, f"i_ref{i}") for i in range(n)]
        heads_valid = all_of(s.valid for s in crds + refs)
        cv = [c.payload.data[:w] for c in crds]
        all_data = all_of(~c.payload.ctrl for c in crds)
        all_ctrl = all_of(c.payload.ctrl for c in crds)
        # below the largest head <=> below some head; above the largest <=> above every head: pairwise
        # comparisons side by side, instead of a comparison behind the maximum's own comparator and multiplexer
        pair = self.lookahead and n == 2                       # readies written out by _lookahead_pair
        triple = self.lookahead and n == 3                     # readies written out by _lookahead_triple
        wide = n >= 4 and not self.lookahead                   # readies and valids written out by _readies_wide
        low = [Signal(name=f"low{i}") for i in range(n)]
        if triple:
            lt = self._heads_below(crds)
            m.d.comb += [low[i].eq(reduce(lambda a, b: a | b, [lt[i, j] for j in range(n) if j != i]))
                         for i in range(n)]
        else:
            m.d.comb += [low[i].eq(reduce(lambda a, b: a | b, [less(cv[i], cv[j]) for j in range(n) if j != i]))
                         for i in range(n)]
        # all coordinates equal (used with all data only)
        if n >= 5 and not self.lookahead:
            # (from arity 5 the OR over n(n - 1) comparators is deeper than n - 1 equality trees beside them:
            # arity 5 121.4 / 122.5 / 124.0 -> 142.7 / 139.8 / 136.8 MHz at seeds 1 / 2 / 3; arity 4 no better)
            all_eq = all_of(cv[0] == cv[j] for j in range(1, n))
        else:
            # none below another: from the same comparators, no equality trees beside them on the coordinates
            all_eq = ~reduce(lambda a, b: a | b, low)
        skip = Signal()                  # some LOW input passes the largest head after its pops
        two = [Signal(name=f"two{i}") for i in range(n)]      # input i may pop its second token too
        if self.lookahead and not pair and not triple:
            nxt, nxt_valid, ref_nxt_valid, third, third_valid = self._behind_views(n)
            seconds = all_of(~low[i] | nxt_valid[i] for i in range(n))
            # below the largest head <=> below some head; above it <=> above every head (pairwise, as low). A
            # fibre's coordinates ascend, so a coordinate behind input i's head is above that head: only the other
            # heads are compared
            below = [reduce(lambda a, b: a | b, [less(nxt[i].data[:w], cv[j]) for j in range(n) if j != i])
                     for i in range(n)]
            passes = [all_of(less(cv[j], nxt[i].data[:w]) for j in range(n) if j != i) for i in range(n)]
            passes3 = [all_of(less(cv[j], third[i].data[:w]) for j in range(n) if j != i) for i in range(n)]
            # a second coordinate goes with the head when it is visible with its reference and, while every head
            # is data, below the largest head (else some input is at a stop, and every coordinate goes)
            m.d.comb += [two[i].eq(nxt_valid[i] & ~nxt[i].ctrl & ref_nxt_valid[i] & (~all_data | below[i]))
                         for i in range(n)]
            # what decides whether input i skips the largest head: the token behind the ones it pops
            # (with two, the second is data below the largest head, so the first term is 0; without, the second is)
            ahead = [nxt[i].ctrl | passes[i] | (two[i] & third_valid[i] & (third[i].ctrl | passes3[i]))
                     for i in range(n)]
            m.d.comb += skip.eq(reduce(lambda a, b: a | b, [low[i] & ahead[i] for i in range(n)]))
            m.d.comb += go.eq(heads_valid & (~all_data | all_eq | seconds))
        else:
            m.d.comb += go.eq(heads_valid)
        # the payloads do not wait for the comparisons (they matter only when pushed): control tokens when every
        # head is one, else the coordinate and the references
        with m.If(all_ctrl):
            copy_ctrl(m, self.o_crd, crds[0].payload)
            for i in range(n):
                copy_ctrl(m, getattr(self, f"o_ref{i}"), crds[0].payload)
        with m.Else():
            set_data(m, self.o_crd, cv[0])
            for i in range(n):
                copy_tok(m, getattr(self, f"o_ref{i}"), refs[i].payload)
        # The firing rule of ``_common.Fire`` (fire = go & AND_q(~push_q | ready_q), i.ready = fire & pop,
        # o.valid = go & push & AND_{q != p}(~push_q | ready_q)) written out for intersect, whose outputs are all
        # pushed or none (push = all data & all equal | all control), so that the comparisons enter at the last
        # multiplexers instead of passing through push and fire. Per case, with R = every output ready:
        # all data, all equal: push, pop all (ready = go & R); all data, not equal: pop LOW (and skip), no push;
        # all control: push, pop all; else pop the data heads, no push.
        outs = [self.o_crd] + [getattr(self, f"o_ref{i}") for i in range(n)]
        ready_all = all_of(o.ready for o in outs)
        if pair:
            self._lookahead_pair(m, crds, refs, heads_valid, all_data, all_ctrl, ready_all)
        elif triple:
            self._lookahead_triple(m, crds, refs, heads_valid, all_data, all_ctrl, ready_all, lt, low)
        elif wide:
            self._readies_wide(m, crds, refs, outs, heads_valid, all_data, all_ctrl, ready_all)
            return m
        else:
            for k in range(n):
                pop_uneq = low[k] | skip                     # all data, not equal
                ready = Mux(all_data, go & Mux(all_eq, ready_all, pop_uneq),
                            go & Mux(all_ctrl, ready_all, ~crds[k].payload.ctrl))
                m.d.comb += [crds[k].ready.eq(ready), refs[k].ready.eq(ready)]
                if self.lookahead:
                    # the second token too (the channel reads it only with ready): a LOW input, or a data input
                    # while another is at a stop
                    pop2 = two[k] & Mux(all_data, low[k], ~all_ctrl & ~crds[k].payload.ctrl)
                    m.d.comb += [getattr(self, f"pop2_crd{k}").eq(pop2), getattr(self, f"pop2_ref{k}").eq(pop2)]
        # go & push: with all data, pushing needs all equal, and then go holds with the heads
        push = Mux(all_data, all_eq, all_ctrl)
        for p, o in enumerate(outs):
            m.d.comb += o.valid.eq(heads_valid & all_of(q.ready for j, q in enumerate(outs) if j != p) & push)
        return m
