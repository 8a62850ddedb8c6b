"""crd_mask: filters the coordinates (and aligned references) of each fibre by a coordinate mask on (row, c).

The row of each inner fibre is the outer stream's token (the references of the mask's dense row level, i.e.
the row coordinates). Structure and timing as crd_hold: one firing per inner token (kept or dropped), plus one
for an outer stop whose inner partner (S_n, n >= 1) already closed the fibre. Kept columns come from
:func:`fuseflow.samml.masks.mask_predicate` (the pattern's one definition)."""

from ...samml.masks import dense_mask, parse_mask
from ...samml.registry import check_mask_scan
from ._common import LEVEL, STOPS, bad, fire_at


def run(st, ins, outs):
    p = st.params
    check_mask_scan(p, f"node {st.id}")
    rows, dim = p["rows"], p["dim"]
    keep = dense_mask(parse_mask(p["mask"]), rows, dim)
    n = p["arity"]
    io, ic = ins["outer"], ins["crd"]
    irefs = [ins[f"ref{i}"] for i in range(n)]
    oc = outs["crd"]
    orefs = [outs[f"ref{i}"] for i in range(n)]
    every = [oc] + orefs
    inner = [ic] + irefs
    closed = False
    clock = -1
    while True:
        while not io.toks:
            yield io
        r = io.toks[0]
        t = max(clock + 1, io.times[0] + 1)
        if closed and r.__class__ is str and r in LEVEL:
            io.pop(t)                    # the partner of an inner stop that closed this row's fibre
            closed = False
            clock = st.clock = t
            st.busy += 1
            continue
        for ch in inner:
            while not ch.toks:
                yield ch
            t = max(t, ch.times[0] + 1)
        x = ic.toks[0]
        heads = [ch.toks[0] for ch in irefs]
        pop_outer, push = True, True
        if r.__class__ is not str or r == "N":
            if x.__class__ is not str:
                if r == "N" or not 0 <= r < rows:
                    raise bad(st, f"row {r!r} outside the mask's {rows} rows")
                if not 0 <= x < dim:
                    raise bad(st, f"coordinate {x} outside the mask's {dim} columns")
                push, pop_outer = bool(keep[r, x]), False
            elif x in LEVEL:
                closed = x != "S0"
            else:
                raise bad(st, f"row {r} meets inner {x!r}")
        elif r in LEVEL:
            want = STOPS[LEVEL[r] + 1]
            if x != want:
                raise bad(st, f"outer {r} meets inner {x!r} (expected {want})")
        elif r == "D":
            if x != "D":
                raise bad(st, f"outer is done but inner has {x!r}")
        else:
            raise bad(st, f"unexpected outer token {r!r}")
        if x.__class__ is str:
            for h in heads:
                if h != x:
                    raise bad(st, f"references {h!r} not aligned with coordinate token {x!r}")
        if push:
            t = yield from fire_at(st, every, t)
        for ch in inner:
            ch.pop(t)
        if pop_outer:
            io.pop(t)
        if push:
            oc.push(x, t)
            for o, h in zip(orefs, heads):
                o.push(h, t)
        clock = st.clock = t
        st.busy += 1
        if x == "D":
            return
