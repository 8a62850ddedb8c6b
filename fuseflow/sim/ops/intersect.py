"""intersect: co-iterates n fibres and emits the coordinates present in all of them."""

from ._common import LEVEL, bad, joiner_ports, wait_heads, wait_room


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
                for i in range(n):
                    if heads[i] < m:
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
