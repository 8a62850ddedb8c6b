"""crd_drop: drops outer coordinates whose inner fibre is empty, and those empty fibres.

A kept fibre's closing S0 is held back until the next fibre of the same parent turns out non-empty (then it is
emitted, costing one cycle) or a higher stop absorbs it.
"""

from ._common import LEVEL, STOPS, bad, fire_at


def run(st, ins, outs):
    io, ii = ins["outer"], ins["inner"]
    oo, oi = outs["outer"], outs["inner"]
    both = [oo, oi]
    pending = False      # a held S0 on the inner output
    closed = False       # the inner stream already closed the current outer fibre
    in_fibre = False
    clock = -1
    while True:
        if in_fibre:
            while not ii.toks:
                yield ii
            x = ii.toks[0]
            t = max(clock + 1, ii.times[0] + 1)
            if x.__class__ is not str or x == "N":
                t = yield from fire_at(st, [oi], t)
                ii.pop(t)
                oi.push(x, t)
            elif x == "S0":
                ii.pop(t)
                pending = True
                in_fibre = False
            elif x in LEVEL:
                t = yield from fire_at(st, [oi], t)
                ii.pop(t)
                oi.push(x, t)
                closed = True
                in_fibre = False
            else:
                raise bad(st, f"unexpected inner token {x!r}")
        else:
            while not io.toks:
                yield io
            c = io.toks[0]
            t = max(clock + 1, io.times[0] + 1)
            if c.__class__ is not str:
                while not ii.toks:
                    yield ii
                x = ii.toks[0]
                t = max(t, ii.times[0] + 1)
                if x.__class__ is not str or x == "N":
                    t = yield from fire_at(st, both, t)
                    io.pop(t)
                    oo.push(c, t)
                    if pending:
                        oi.push("S0", t)
                        pending = False
                    else:
                        ii.pop(t)
                        oi.push(x, t)
                    in_fibre = True
                elif x == "S0":
                    io.pop(t)
                    ii.pop(t)
                elif x in LEVEL:
                    t = yield from fire_at(st, [oi], t)
                    io.pop(t)
                    ii.pop(t)
                    oi.push(x, t)
                    pending = False
                    closed = True
                else:
                    raise bad(st, f"outer coordinate {c} meets inner {x!r}")
            elif c in LEVEL:
                if closed:
                    t = yield from fire_at(st, [oo], t)
                    io.pop(t)
                    oo.push(c, t)
                    closed = False
                else:
                    while not ii.toks:
                        yield ii
                    x = ii.toks[0]
                    want = STOPS[LEVEL[c] + 1]
                    if x != want or pending:
                        raise bad(st, f"outer {c} meets inner {x!r} (expected {want})")
                    t = max(t, ii.times[0] + 1)
                    t = yield from fire_at(st, both, t)
                    io.pop(t)
                    ii.pop(t)
                    oo.push(c, t)
                    oi.push(x, t)
            elif c == "D":
                while not ii.toks:
                    yield ii
                if ii.toks[0] != "D" or pending:
                    raise bad(st, f"outer is done but inner has {ii.toks[0]!r}")
                t = max(t, ii.times[0] + 1)
                t = yield from fire_at(st, both, t)
                io.pop(t)
                ii.pop(t)
                oo.push("D", t)
                oi.push("D", t)
                st.clock = t
                st.busy += 1
                return
            else:
                raise bad(st, f"unexpected outer token {c!r}")
        clock = st.clock = t
        st.busy += 1

