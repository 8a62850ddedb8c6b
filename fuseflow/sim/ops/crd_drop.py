"""crd_drop: drops outer coordinates whose inner fibre is empty, and those empty fibres.

A kept fibre's closing S0 is held back until the next fibre of the same parent turns out non-empty (then it is
emitted, costing one cycle) or a higher stop absorbs it. The ``arity`` reference streams aligned with inner
move with it: popped when inner is popped, pushed (their own head, or the held S0) when inner is pushed.
"""

from ._common import LEVEL, STOPS, bad, fire_at


def run(st, ins, outs):
    n = st.params.get("arity") or 0
    io, ii = ins["outer"], ins["inner"]
    oo, oi = outs["outer"], outs["inner"]
    irefs = [ins[f"ref{i}"] for i in range(n)]
    orefs = [outs[f"ref{i}"] for i in range(n)]
    inner = [ii] + irefs
    inner_out = [oi] + orefs
    both = [oo] + inner_out
    pending = False      # a held S0 on the inner output
    closed = False       # the inner stream already closed the current outer fibre
    in_fibre = False
    clock = -1

    def wait_inner(t):
        """Generator: wait for the heads of inner and its references; the cycle they are all visible."""
        for ch in inner:
            while not ch.toks:
                yield ch
            t = max(t, ch.times[0] + 1)
        x = ii.toks[0]
        if x.__class__ is str:
            for ch in irefs:
                if ch.toks[0] != x:
                    raise bad(st, f"reference {ch.toks[0]!r} not aligned with inner token {x!r}")
        return t

    def pop_inner(t):
        for ch in inner:
            ch.pop(t)

    def push_inner(t):
        """Push the inner heads (not popped) on the inner outputs."""
        for o, ch in zip(inner_out, inner):
            o.push(ch.toks[0], t)

    while True:
        if in_fibre:
            t = yield from wait_inner(max(clock + 1, 0))
            x = ii.toks[0]
            if x.__class__ is not str or x == "N":
                t = yield from fire_at(st, inner_out, t)
                push_inner(t)
                pop_inner(t)
            elif x == "S0":
                pop_inner(t)
                pending = True
                in_fibre = False
            elif x in LEVEL:
                t = yield from fire_at(st, inner_out, t)
                push_inner(t)
                pop_inner(t)
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
                t = yield from wait_inner(t)
                x = ii.toks[0]
                if x.__class__ is not str or x == "N":
                    t = yield from fire_at(st, both, t)
                    io.pop(t)
                    oo.push(c, t)
                    if pending:
                        for o in inner_out:
                            o.push("S0", t)
                        pending = False
                    else:
                        push_inner(t)
                        pop_inner(t)
                    in_fibre = True
                elif x == "S0":
                    io.pop(t)
                    pop_inner(t)
                elif x in LEVEL:
                    t = yield from fire_at(st, inner_out, t)
                    io.pop(t)
                    push_inner(t)
                    pop_inner(t)
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
                    t = yield from wait_inner(t)
                    x = ii.toks[0]
                    want = STOPS[LEVEL[c] + 1]
                    if x != want or pending:
                        raise bad(st, f"outer {c} meets inner {x!r} (expected {want})")
                    t = yield from fire_at(st, both, t)
                    io.pop(t)
                    oo.push(c, t)
                    push_inner(t)
                    pop_inner(t)
            elif c == "D":
                t = yield from wait_inner(t)
                if ii.toks[0] != "D" or pending:
                    raise bad(st, f"outer is done but inner has {ii.toks[0]!r}")
                t = yield from fire_at(st, both, t)
                io.pop(t)
                oo.push("D", t)
                push_inner(t)
                pop_inner(t)
                st.clock = t
                st.busy += 1
                return
            else:
                raise bad(st, f"unexpected outer token {c!r}")
        clock = st.clock = t
        st.busy += 1
