"""root: emits reference 0 at its first firing, then D."""


def run(st, ins, outs):
    out = outs["ref"]
    clock = -1
    for tok in (0, "D"):
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = max(clock + 1, r)
        out.push(tok, t)
        clock = st.clock = t
        st.busy += 1
