"""intersect: co-iterates n fibres and emits the coordinates present in all of them.

Look-ahead (docs/samml.md, intersect): when the heads are coordinates that differ, M is the largest and LOW the
inputs below it, the op also waits for the second coordinate of every LOW input, pops LOW and, when some LOW input
skips M (its second coordinate is > M or a stop), the inputs at M too. Two random fibres of length L (density 0.3)
then take about 1.3 L cycles instead of 1.7 L.

It applies when every input channel (crd and ref) holds at least ``LOOKAHEAD_DEPTH`` = 3 tokens (or is one of
run_op's unbounded sources, depth 0); otherwise the op needs only its heads, as before. Three, not two: a slot
freed in cycle t is refilled at t+1 and visible at t+2, so a depth-2 channel shows two tokens only every other
cycle after a pop, and waiting for the second one would halve the rate of runs of pops from one side (the suite
kernels at n=32: 23-31 % more cycles with look-ahead at depth 2, 9-24 % fewer at depth 3). The RTL decides the same from the depths of the
FIFOs the kernel top gives the ports (``fuseflow/hw/top.py``).

Why waiting cannot deadlock where the op without look-ahead would not: without it, the op pops LOW and then cannot
fire again (no pop, no output) before those same second tokens are heads, and it pops the inputs at M before any
output as well; so the only difference the rest of the graph sees is that LOW's slots are freed later. A LOW
producer never needs those slots to push the awaited token: the crd channel holds only its head and has room, and
the ref channel, which never runs ahead of its crd channel (compiled graphs push a crd and its ref in the same
firing, or derive the ref from it downstream), holds at most its head and has room too. (A depth-1 ref channel
would not: its producer could not push the second (crd, ref) pair. Hence the depth rule covers the ref channels.)
The tokens are unchanged: the op pops the same tokens before each output, only in fewer cycles.
"""

from ...samml.registry import get_op
from ._common import LEVEL, bad, joiner_ports, wait_heads, wait_room

#: every input channel must hold this many tokens for the look-ahead (the registry's input_depth)
LOOKAHEAD_DEPTH = get_op("intersect").input_depth


def lookahead(chans):
    """Whether the op looks ahead on these input channels (depth 0: run_op's unbounded sources)."""
    return all(ch.depth == 0 or ch.depth >= LOOKAHEAD_DEPTH for ch in chans)


def run(st, ins, outs):
    if st.params["arity"] == 2:
        return _run2(st, ins, outs)
    return _run_n(st, ins, outs)


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
                # the lower input's second coordinate decides whether the other one's head can match
                if a < b:
                    lo, lor, hi, hir, top = c0, r0, c1, r1, b
                else:
                    lo, lor, hi, hir, top = c1, r1, c0, r0, a
                while len(lo.toks) < 2:
                    yield lo
                t = lo.times[1] + 1
                if t < tin:
                    t = tin
                lo.pop(t)
                lor.pop(t)
                n = lo.toks[0]
                if n.__class__ is str or n > top:
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
            if sa:
                c1.pop(t)
                r1.pop(t)
            else:
                c0.pop(t)
                r0.pop(t)
        clock = st.clock = t
        st.busy += 1


def _run_n(st, ins, outs):
    n, crds, refs, ocrd, orefs, allouts = joiner_ports(st, ins, outs)
    chans = crds + refs
    look = lookahead(chans)
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
                t = tin
                low = [i for i in range(n) if heads[i] < m]
                skip = False
                if look:
                    for i in low:
                        ch = crds[i]
                        while len(ch.toks) < 2:
                            yield ch
                        t = max(t, ch.times[1] + 1)
                        nxt = ch.toks[1]
                        skip = skip or nxt.__class__ is str or nxt > m
                for i in range(n):
                    if heads[i] < m or skip:
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
