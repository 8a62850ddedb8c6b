"""level_write: builds one level (seg, crd) of an output tensor from a canonical coordinate stream.

A fibre ends at a stop that follows a coordinate, or a bare stop that follows S0 (an empty fibre). At the top
level (level 0) a bare stop at the start is the single empty fibre; below it a bare stop after a stop of level
>= 1 means the parent has no fibres (canonical streams have no empty fibres there; see the empty-fibre rule).
"""

from ._common import LEVEL, bad


def run(st, ins, outs):
    inp = ins["crd"]
    itoks, itimes = inp.toks, inp.times
    top = st.params.get("level", 0) == 0
    crd, seg = [], [0]
    last = "start"
    clock = -1
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        t = itimes[0] + 1
        if t <= clock:
            t = clock + 1
        inp.pop(t)
        clock = st.clock = t
        st.busy += 1
        if tok.__class__ is not str:
            crd.append(tok)
            last = "data"
        elif tok in LEVEL:
            if last == "data" or last == "S0" or (top and last == "start"):
                seg.append(len(crd))
            last = "S0" if tok == "S0" else "S"
        elif tok == "D":
            if top and len(seg) == 1:
                seg.append(len(crd))
            st.result = {"seg": seg, "crd": crd}
            st.mem_writes += len(crd) + len(seg)
            return
        else:
            raise bad(st, f"unexpected token {tok!r}")
