"""crd_hold: repeats each outer coordinate once per coordinate of its inner fibre."""

from ._common import LEVEL, STOPS, bad, fire_at


def run(st, ins, outs):
    io, ii, out = ins["outer"], ins["inner"], outs["outer"]
    closed = False
    clock = -1
    while True:
        while not io.toks:
            yield io
        c = io.toks[0]
        t = max(clock + 1, io.times[0] + 1)
        if closed and c.__class__ is str and c in LEVEL:
            io.pop(t)                    # the partner of an inner stop that closed this outer fibre
            closed = False
            clock = st.clock = t
            st.busy += 1
            continue
        while not ii.toks:
            yield ii
        x = ii.toks[0]
        t = max(t, ii.times[0] + 1)
        pop_outer = True
        if c.__class__ is not str:
            if x.__class__ is not str or x == "N":
                push, pop_outer = c, False
            elif x in LEVEL:
                push = x
                closed = x != "S0"
            else:
                raise bad(st, f"outer coordinate {c} meets inner {x!r}")
        elif c in LEVEL:
            want = STOPS[LEVEL[c] + 1]
            if x != want:
                raise bad(st, f"outer {c} meets inner {x!r} (expected {want})")
            push = x
        elif c == "D":
            if x != "D":
                raise bad(st, f"outer is done but inner has {x!r}")
            push = "D"
        else:
            raise bad(st, f"unexpected outer token {c!r}")
        t = yield from fire_at(st, [out], t)
        ii.pop(t)
        if pop_outer:
            io.pop(t)
        out.push(push, t)
        clock = st.clock = t
        st.busy += 1
        if push == "D":
            return
