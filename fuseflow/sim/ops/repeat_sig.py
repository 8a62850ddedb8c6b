"""repeat_sig: coordinates to repeat signals: R per coordinate (or N), S per stop, D."""

from ._common import LEVEL, bad


def run(st, ins, outs):
    inp, out = ins["in"], outs["repsig"]
    itoks, itimes = inp.toks, inp.times
    clock = -1
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        tin = itimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        if tok.__class__ is str:
            if tok in LEVEL:
                sig = "S"
            elif tok == "D":
                sig = "D"
            elif tok == "N":
                sig = "R"
            else:
                raise bad(st, f"unexpected token {tok!r}")
        else:
            sig = "R"
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = tin if tin >= r else r
        st.blocked += t - tin
        inp.pop(t)
        out.push(sig, t)
        clock = st.clock = t
        st.busy += 1
        if sig == "D":
            return
