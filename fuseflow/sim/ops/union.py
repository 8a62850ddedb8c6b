"""union: co-iterates n fibres and emits every coordinate present in any; absent sides get reference N."""

from ._common import LEVEL, bad, joiner_ports, wait_heads, wait_room


def run(st, ins, outs):
    n, crds, refs, ocrd, orefs, allouts = joiner_ports(st, ins, outs)
    chans = crds + refs
    clock = -1
    while True:
        tin = yield from wait_heads(chans, clock)
        heads = [ch.toks[0] for ch in crds]
        data = [h for h in heads if h.__class__ is not str]
        r = yield from wait_room(allouts)
        t = max(tin, r)
        st.blocked += t - tin
        if data:
            m = min(data)
            ocrd.push(m, t)
            for i in range(n):
                if heads[i] == m and heads[i].__class__ is not str:
                    crds[i].pop(t)
                    orefs[i].push(refs[i].pop(t), t)
                else:
                    orefs[i].push("N", t)
        else:
            h0 = heads[0]
            if any(h != h0 for h in heads) or (h0 != "D" and h0 not in LEVEL):
                raise bad(st, f"inputs end their fibres differently: {heads}")
            ocrd.push(h0, t)
            for i in range(n):
                crds[i].pop(t)
                refs[i].pop(t)
                orefs[i].push(h0, t)
        clock = st.clock = t
        st.busy += 1
        if not data and heads[0] == "D":
            return
