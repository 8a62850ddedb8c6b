"""repeat: re-emits the held input token once per R; S closes its fibre with stop promotion."""

from ._common import LEVEL, STOPS, bad


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
    inp, rs, out = ins["in"], ins["repsig"], outs["out"]
    itoks, itimes, rtoks, rtimes = inp.toks, inp.times, rs.toks, rs.times
    clock = -1
    held = None          # the token being repeated, once taken from the input
    while True:
        if held is None:
            while not itoks:
                yield inp
            while not rtoks:
                yield rs
            x, s = itoks[0], rtoks[0]
            tin = max(clock + 1, itimes[0] + 1, rtimes[0] + 1)
            if x.__class__ is str and x != "N":
                if x == "D":
                    if s != "D":
                        raise bad(st, f"input done but repeat signal is {s!r}")
                    t = yield from _emit(out, "D", tin, st)
                    inp.pop(t)
                    rs.pop(t)
                    st.clock = t
                    st.busy += 1
                    return
                if x not in LEVEL or s != "S":
                    raise bad(st, f"input stop {x!r} meets repeat signal {s!r}")
                t = yield from _emit(out, STOPS[LEVEL[x] + 1], tin, st)
                inp.pop(t)
                rs.pop(t)
            elif s == "R":
                t = yield from _emit(out, x, tin, st)
                inp.pop(t)
                rs.pop(t)
                held = x
            elif s == "S":
                # empty fibre for x: take both now, close the fibre once the next input is visible
                t = tin
                inp.pop(t)
                rs.pop(t)
                clock = st.clock = t
                st.busy += 1
                t = yield from _close(st, inp, rs, out, clock, pop_sig=False)
            else:
                raise bad(st, f"repeat signal {s!r} while the input holds {x!r}")
        else:
            while not rtoks:
                yield rs
            s = rtoks[0]
            tin = max(clock + 1, rtimes[0] + 1)
            if s == "R":
                t = yield from _emit(out, held, tin, st)
                rs.pop(t)
            elif s == "S":
                t = yield from _close(st, inp, rs, out, clock, pop_sig=True)
                held = None
            else:
                raise bad(st, f"repeat signal {s!r} while repeating {held!r}")
        clock = st.clock = t
        st.busy += 1


def _close(st, inp, rs, out, clock, pop_sig):
    """End the held token's fibre: S_(m+1) if the next input is S_m (popped), else S0."""
    while not inp.toks:
        yield inp
    nxt = inp.toks[0]
    tin = max(clock + 1, inp.times[0] + 1)
    if pop_sig:
        tin = max(tin, rs.times[0] + 1)
    promote = nxt.__class__ is str and nxt in LEVEL
    t = yield from _emit(out, STOPS[LEVEL[nxt] + 1] if promote else "S0", tin, st)
    if promote:
        inp.pop(t)
    if pop_sig:
        rs.pop(t)
    return t
