"""intersect: co-iterates n fibres and emits the coordinates present in all of them.

Look-ahead (docs/samml.md, intersect): when the heads are coordinates that differ, M is the largest and LOW the
inputs below it, the op also waits for the second coordinate of every LOW input and pops LOW. A LOW input whose
second coordinate is below M too pops that second token as well (crd and ref, when the second reference is
visible: two pops from one channel in one firing), and the token behind it (its third, once visible) is what
tells whether it skips M. When some LOW input skips M (the token behind what it pops is > M or a stop) the inputs
at M pop too. While some input is at a stop, the others pop their second coordinate with the head when it is
visible. Two random fibres of length L (density 0.3) then take about 1.0 L cycles instead of 1.7 L: a lower side
catches up two tokens per cycle after a match.

It applies at arity 2 (the registry's ``input_depth_for``) when every input channel (crd and ref) holds at least
``LOOKAHEAD_DEPTH`` = 3 tokens (or is one of run_op's unbounded sources, depth 0); otherwise the op needs only its heads, as before. Three, not two: a slot
freed in cycle t is refilled at t+1 and visible at t+2, so a depth-2 channel shows two tokens only every other
cycle after a pop, and waiting for the second one would halve the rate of runs of pops from one side. The RTL
decides the same from the depths of the FIFOs the kernel top gives the ports (``fuseflow/hw/top.py``), which are
then :class:`~fuseflow.hw.stream.PeekFIFO` s (three entries visible, two reads per cycle).

Why waiting cannot deadlock where the op without look-ahead would not: without it, the op pops LOW and then cannot
fire again (no pop, no output) before those same second tokens are heads, and it pops the inputs at M before any
output as well; so the only difference the rest of the graph sees is that LOW's slots are freed later. A LOW
producer never needs those slots to push the awaited token: the crd channel holds only its head and has room, and
the ref channel, which never runs ahead of its crd channel (compiled graphs push a crd and its ref in the same
firing, or derive the ref from it downstream), holds at most its head and has room too. (A depth-1 ref channel
would not: its producer could not push the second (crd, ref) pair. Hence the depth rule covers the ref channels.)
The same holds for the third token, awaited only after two pops of tokens below M, which the op without look-ahead
pops before any output too (and then needs the third as a head); the channel then has room, as the two pops free
two slots. The tokens are unchanged: the op pops the same tokens before each output, only in fewer cycles.
"""

from ...samml.registry import get_op
from ._common import LEVEL, bad, joiner_ports, wait_heads, wait_room

#: every input channel must hold this many tokens for the look-ahead (the registry's input_depth, at arity 2)
LOOKAHEAD_DEPTH = get_op("intersect").input_depth_for({"arity": 2})


def lookahead(chans):
    """Whether the two-input op looks ahead on these input channels (depth 0: run_op's unbounded sources)."""
    return all(ch.depth == 0 or ch.depth >= LOOKAHEAD_DEPTH for ch in chans)


def run(st, ins, outs):
    if st.params["arity"] == 2:
        return _run2(st, ins, outs)
    return _run_n(st, ins, outs)


def _second_visible(crd, ref, t):
    """Generator: whether the second coordinate of ``crd`` and the second reference of ``ref`` are both visible
    at cycle ``t`` (waits until both exist)."""
    while len(crd.toks) < 2:
        yield crd
    if crd.times[1] + 1 > t:
        return False
    while len(ref.toks) < 2:
        yield ref
    return ref.times[1] + 1 <= t


def _run2(st, ins, outs):
    """The two-input case, written out: the simulator's hottest op."""
    c0, c1, r0, r1 = ins["crd0"], ins["crd1"], ins["ref0"], ins["ref1"]
    ocrd, or0, or1 = outs["crd"], outs["ref0"], outs["ref1"]
    allouts = [ocrd, or0, or1]
    c0t, c1t, r0t, r1t = c0.toks, c1.toks, r0.toks, r1.toks
    c0m, c1m, r0m, r1m = c0.times, c1.times, r0.times, r1.times
    look = lookahead((c0, c1, r0, r1))
    clock = -1
    while True:
        while not c0t:
            yield c0
        while not r0t:
            yield r0
        while not c1t:
            yield c1
        while not r1t:
            yield r1
        tin = clock + 1
        v = c0m[0] + 1
        if v > tin:
            tin = v
        v = c1m[0] + 1
        if v > tin:
            tin = v
        v = r0m[0] + 1
        if v > tin:
            tin = v
        v = r1m[0] + 1
        if v > tin:
            tin = v
        a, b = c0t[0], c1t[0]
        sa, sb = a.__class__ is str, b.__class__ is str
        if not sa and not sb:
            if a == b:
                r = yield from wait_room(allouts)
                t = tin if tin >= r else r
                st.blocked += t - tin
                ocrd.push(a, t)
                c0.pop(t)
                c1.pop(t)
                or0.push(r0.pop(t), t)
                or1.push(r1.pop(t), t)
            elif look:
                # the lower input's next coordinate decides whether the other one's head can match
                if a < b:
                    lo, lor, hi, hir, top = c0, r0, c1, r1, b
                else:
                    lo, lor, hi, hir, top = c1, r1, c0, r0, a
                lt = lo.toks
                while len(lt) < 2:
                    yield lo
                t = lo.times[1] + 1
                if t < tin:
                    t = tin
                n = lt[1]
                if n.__class__ is not str and n < top:
                    # the second is below the largest head too: pop it as well when its reference is there
                    # (a second pop), and let the third decide
                    two = yield from _second_visible(lo, lor, t)
                    lo.pop(t)
                    lor.pop(t)
                    if two:
                        lo.pop(t)
                        lor.pop(t)
                        while not lt:
                            yield lo
                        n = lt[0] if lo.times[0] < t else None
                else:
                    lo.pop(t)
                    lor.pop(t)
                if n is not None and (n.__class__ is str or n > top):
                    hi.pop(t)
                    hir.pop(t)
            else:
                t = tin
                if a < b:
                    c0.pop(t)
                    r0.pop(t)
                else:
                    c1.pop(t)
                    r1.pop(t)
        elif sa and sb:
            if a != b or (a != "D" and a not in LEVEL):
                raise bad(st, f"inputs end their fibres differently: {[a, b]}")
            r = yield from wait_room(allouts)
            t = tin if tin >= r else r
            st.blocked += t - tin
            ocrd.push(a, t)
            c0.pop(t)
            c1.pop(t)
            r0.pop(t)
            r1.pop(t)
            or0.push(a, t)
            or1.push(a, t)
            if a == "D":
                st.clock = t
                st.busy += 1
                return
        else:
            if a == "D" or b == "D":
                raise bad(st, f"one input is done while another is not: {[a, b]}")
            t = tin
            lo, lor = (c1, r1) if sa else (c0, r0)
            two = False
            if look:
                # the other input has ended its fibre: its next coordinate goes too when it is there
                two = yield from _second_visible(lo, lor, t)
                two = two and lo.toks[1].__class__ is not str
            lo.pop(t)
            lor.pop(t)
            if two:
                lo.pop(t)
                lor.pop(t)
        clock = st.clock = t
        st.busy += 1


def _run_n(st, ins, outs):
    """Arity 3 and more: no look-ahead (the registry's ``input_depth_for``), a firing needs only the heads. With
    all data and not all equal, input i pops when its head is below one of its ring neighbours' (inputs i - 1 and
    i + 1 mod n; below the largest at arity 3): some input always is, unless all are equal, and the RTL compares
    2n pairs instead of n(n - 1) (docs/samml.md, intersect)."""
    n, crds, refs, ocrd, orefs, allouts = joiner_ports(st, ins, outs)
    chans = crds + refs
    clock = -1
    while True:
        tin = yield from wait_heads(chans, clock)
        heads = [ch.toks[0] for ch in crds]
        kinds = [h.__class__ is str for h in heads]
        if not any(kinds):
            m = max(heads)
            if min(heads) == m:
                r = yield from wait_room(allouts)
                t = max(tin, r)
                st.blocked += t - tin
                ocrd.push(m, t)
                for i in range(n):
                    crds[i].pop(t)
                    orefs[i].push(refs[i].pop(t), t)
            else:
                # an input pops when below a ring neighbour (at arity 3 every other input is one)
                t = tin
                low = [heads[i] < heads[i - 1] or heads[i] < heads[i + 1 - n] for i in range(n)]
                for i in range(n):
                    if low[i]:
                        crds[i].pop(t)
                        refs[i].pop(t)
        elif all(kinds):
            h0 = heads[0]
            if any(h != h0 for h in heads) or (h0 != "D" and h0 not in LEVEL):
                raise bad(st, f"inputs end their fibres differently: {heads}")
            r = yield from wait_room(allouts)
            t = max(tin, r)
            st.blocked += t - tin
            ocrd.push(h0, t)
            for i in range(n):
                crds[i].pop(t)
                refs[i].pop(t)
                orefs[i].push(h0, t)
            if h0 == "D":
                st.clock = t
                st.busy += 1
                return
        else:
            if any(h == "D" for h in heads):
                raise bad(st, f"one input is done while another is not: {heads}")
            t = tin
            for i in range(n):
                if not kinds[i]:
                    crds[i].pop(t)
                    refs[i].pop(t)
        clock = st.clock = t
        st.busy += 1
