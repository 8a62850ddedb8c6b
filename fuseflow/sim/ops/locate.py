"""locate: coordinates of a fibre -> references ``r*dim + c`` of a dense level (r: the fibre's parent reference).

States: FRESH (nothing held) inspects both heads; HELD (a parent reference held) inspects the coordinate head,
and the parent head too when that is a stop of level >= 1 (the parent's stop it closes). See docs/samml.md.
"""

from ._common import LEVEL, bad


def _emit(out, tok, tin, st):
    """Generator helper: push ``tok`` no earlier than ``tin``; returns the firing cycle."""
    r = out.room()
    while r is None:
        yield out
        r = out.room()
    t = tin if tin >= r else r
    st.blocked += t - tin
    out.push(tok, t)
    return t


def run(st, ins, outs):
    dim = st.params["dim"]
    par, crd, out = ins["ref"], ins["crd"], outs["ref"]
    ptoks, ptimes, ctoks, ctimes = par.toks, par.times, crd.toks, crd.times
    clock = -1
    held = None          # the parent reference of the current fibre (an int or "N"), once taken
    while True:
        while not ctoks:
            yield crd
        c = ctoks[0]
        tin = ctimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        c_stop = c.__class__ is str
        if c == "N":
            raise bad(st, "N on the coordinate input")
        if held is None:
            while not ptoks:
                yield par
            p = ptoks[0]
            if ptimes[0] + 1 > tin:
                tin = ptimes[0] + 1
            if p.__class__ is str and p != "N":
                if p == "D":
                    if c != "D":
                        raise bad(st, f"parent done but coordinate {c!r}")
                elif p not in LEVEL or c not in LEVEL or LEVEL[c] != LEVEL[p] + 1:
                    raise bad(st, f"parent stop {p!r} meets coordinate token {c!r} (expected S{LEVEL.get(p, 0) + 1})")
                t = yield from _emit(out, c, tin, st)
                par.pop(t)
                crd.pop(t)
                clock = st.clock = t
                st.busy += 1
                if c == "D":
                    return
                continue
            if c == "D":
                raise bad(st, f"coordinates done while the parent holds {p!r}")
            held = p
            if c_stop:
                # an empty fibre: take the parent reference alone; the stop is handled as HELD next cycle
                par.pop(tin)
                clock = st.clock = tin
                st.busy += 1
                continue
            t = yield from _emit(out, "N" if p == "N" else p * dim + c, tin, st)
            par.pop(t)
            crd.pop(t)
        elif not c_stop:
            t = yield from _emit(out, "N" if held == "N" else held * dim + c, tin, st)
            crd.pop(t)
        else:
            if c == "D" or c not in LEVEL:
                raise bad(st, f"coordinate token {c!r} inside the fibre of parent {held!r}")
            n = LEVEL[c]
            if n >= 1:
                while not ptoks:
                    yield par
                p = ptoks[0]
                if ptimes[0] + 1 > tin:
                    tin = ptimes[0] + 1
                if p.__class__ is not str or LEVEL.get(p) != n - 1:
                    raise bad(st, f"coordinate stop {c} closes a fibre but the parent's next token is {p!r}")
            t = yield from _emit(out, c, tin, st)
            crd.pop(t)
            if n >= 1:
                par.pop(t)
            held = None
        clock = st.clock = t
        st.busy += 1
