"""level_write: builds one level (seg, crd) of an output tensor from a canonical coordinate stream.

A fibre ends at a stop that follows a coordinate, or a bare stop that follows S0 (an empty fibre). At the top
level (level 0) a bare stop at the start is the single empty fibre; below it a bare stop after a stop of level
>= 1 means the parent has no fibres (canonical streams have no empty fibres there; see the empty-fibre rule).
With ``dense_above`` (the levels above are dense: one fibre per coordinate of theirs) every stop ends a fibre,
as at the top level.
"""

from ._common import LEVEL, bad, sink


def run(st, ins, outs):
    top = st.params.get("level", 0) == 0
    every = bool(st.params.get("dense_above"))        # every stop ends a fibre
    crd, seg = [], [0]
    last = ["start"]

    def take(tok):
        if tok.__class__ is not str:
            crd.append(tok)
            last[0] = "data"
        elif tok in LEVEL:
            if every or last[0] in ("data", "S0") or (top and last[0] == "start"):
                seg.append(len(crd))
            last[0] = "S0" if tok == "S0" else "S"
        elif tok == "D":
            if top and len(seg) == 1:
                seg.append(len(crd))
            st.result = {"seg": seg, "crd": crd}
            st.mem_writes += len(crd) + len(seg)
        else:
            raise bad(st, f"unexpected token {tok!r}")

    yield from sink(st, ins["crd"], take)
