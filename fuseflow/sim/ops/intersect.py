"""intersect: co-iterates n fibres and emits the coordinates present in all of them."""

from ._common import LEVEL, bad, room


def run(st, ins, outs):
    n = st.params["arity"]
    crds = [ins[f"crd{i}"] for i in range(n)]
    refs = [ins[f"ref{i}"] for i in range(n)]
    chans = crds + refs
    ocrd = outs["crd"]
    orefs = [outs[f"ref{i}"] for i in range(n)]
    allouts = [ocrd] + orefs
    clock = -1
    while True:
        tin = clock + 1
        for ch in chans:
            while not ch.toks:
                yield ch
            v = ch.times[0] + 1
            if v > tin:
                tin = v
        heads = [ch.toks[0] for ch in crds]
        kinds = [h.__class__ is str for h in heads]
        if not any(kinds):
            m = max(heads)
            if min(heads) == m:
                r = room(allouts)
                while r is None:
                    yield ocrd
                    r = room(allouts)
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
            r = room(allouts)
            while r is None:
                yield ocrd
                r = room(allouts)
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
