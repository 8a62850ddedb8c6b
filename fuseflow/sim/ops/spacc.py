"""spacc: sparse accumulator. Merges the values of every fibre of a reduced index into a sorted sub-tree.

Order 1: inputs crd_inner (levels ..., k, j) and val; a group is every k fibre between stops of level >= 1.
Order 2: adds crd_outer0 (levels ..., k, i); the accumulated sub-tree is (i, j).
A group ends with the firing that takes its closing stop (no output); the entries then leave one per cycle
in sorted order, followed by the closing stop(s).
"""

from ._common import LEVEL, STOPS, bad, wait_room


def run(st, ins, outs):
    if st.params["order"] == 1:
        return _order1(st, ins, outs)
    return _order2(st, ins, outs)


def _order1(st, ins, outs):
    ic, iv = ins["crd_inner"], ins["val"]
    oc, ov = outs["crd_inner"], outs["val"]
    both = [oc, ov]
    f = st.env.binary["add" if st.params["op"] == "sum" else "max"]
    zero = st.env.zero
    acc = {}
    clock = -1
    while True:
        while not ic.toks:
            yield ic
        while not iv.toks:
            yield iv
        c, v = ic.toks[0], iv.toks[0]
        t = max(clock + 1, ic.times[0] + 1, iv.times[0] + 1)
        if c.__class__ is not str:
            if v == "N":
                v = zero
            elif v.__class__ is str:
                raise bad(st, f"coordinate {c} meets value token {v!r}")
            acc[c] = f(acc[c], v) if c in acc else v
            st.alu_ops += 1
            ic.pop(t)
            iv.pop(t)
        elif c != v:
            raise bad(st, f"crd_inner has {c!r} but val has {v!r}")
        elif c == "D":
            if acc:
                raise bad(st, "stream ends inside a group (no stop of level >= 1 closed it)")
            r = yield from wait_room(both)
            t = max(t, r)
            ic.pop(t)
            iv.pop(t)
            oc.push("D", t)
            ov.push("D", t)
            st.clock = t
            st.busy += 1
            return
        elif c == "S0":
            ic.pop(t)
            iv.pop(t)
        elif c in LEVEL:
            ic.pop(t)
            iv.pop(t)
            clock = st.clock = t
            st.busy += 1
            for j in sorted(acc):
                r = yield from wait_room(both)
                t = max(clock + 1, r)
                oc.push(j, t)
                ov.push(acc[j], t)
                clock = st.clock = t
                st.busy += 1
            acc = {}
            r = yield from wait_room(both)
            t = max(clock + 1, r)
            s = STOPS[LEVEL[c] - 1]
            oc.push(s, t)
            ov.push(s, t)
        else:
            raise bad(st, f"unexpected token {c!r}")
        clock = st.clock = t
        st.busy += 1


def _order2(st, ins, outs):
    ij, ii, iv = ins["crd_inner"], ins["crd_outer0"], ins["val"]
    oj, oi, ov = outs["crd_inner"], outs["crd_outer0"], outs["val"]
    allouts = [oj, oi, ov]
    f = st.env.binary["add" if st.params["op"] == "sum" else "max"]
    zero = st.env.zero
    acc = {}                 # i -> {j: value}
    cur = None               # the outer coordinate whose inner fibre is being read
    closed = False           # the last inner stop also closed the outer fibre
    clock = -1
    while True:
        if cur is None:
            while not ii.toks:
                yield ii
            x = ii.toks[0]
            t = max(clock + 1, ii.times[0] + 1)
            if x.__class__ is not str:
                ii.pop(t)
                cur = x
                acc.setdefault(x, {})
            elif x == "D":
                if any(acc.values()):
                    raise bad(st, "stream ends inside a group (no stop of level >= 1 closed it)")
                while not ij.toks:
                    yield ij
                while not iv.toks:
                    yield iv
                if ij.toks[0] != "D" or iv.toks[0] != "D":
                    raise bad(st, "crd_outer0 is done but crd_inner/val are not")
                t = max(t, ij.times[0] + 1, iv.times[0] + 1)
                r = yield from wait_room(allouts)
                t = max(t, r)
                for ch in (ii, ij, iv):
                    ch.pop(t)
                for o in allouts:
                    o.push("D", t)
                st.clock = t
                st.busy += 1
                return
            elif x in LEVEL:
                m = LEVEL[x]
                if closed:
                    ii.pop(t)
                    closed = False
                else:
                    # an empty outer fibre: the inner streams hold its bare stop S_(m+1)
                    while not ij.toks:
                        yield ij
                    while not iv.toks:
                        yield iv
                    want = STOPS[m + 1]
                    if ij.toks[0] != want or iv.toks[0] != want:
                        raise bad(st, f"outer {x} needs inner {want}, got {ij.toks[0]!r}/{iv.toks[0]!r}")
                    t = max(t, ij.times[0] + 1, iv.times[0] + 1)
                    for ch in (ii, ij, iv):
                        ch.pop(t)
                if m >= 1:
                    clock = st.clock = t
                    st.busy += 1
                    t = yield from _emit2(st, acc, m, oj, oi, ov, allouts, clock)
                    acc = {}
            else:
                raise bad(st, f"unexpected token {x!r} on crd_outer0")
        else:
            while not ij.toks:
                yield ij
            while not iv.toks:
                yield iv
            c, v = ij.toks[0], iv.toks[0]
            t = max(clock + 1, ij.times[0] + 1, iv.times[0] + 1)
            if c.__class__ is not str:
                if v == "N":
                    v = zero
                elif v.__class__ is str:
                    raise bad(st, f"coordinate {c} meets value token {v!r}")
                row = acc[cur]
                row[c] = f(row[c], v) if c in row else v
                st.alu_ops += 1
            elif c != v or c not in LEVEL:
                raise bad(st, f"crd_inner has {c!r} but val has {v!r}")
            else:
                closed = c != "S0"
                cur = None
            ij.pop(t)
            iv.pop(t)
        clock = st.clock = t
        st.busy += 1


def _emit2(st, acc, m, oj, oi, ov, allouts, clock):
    """Emit the accumulated (i, j) sub-tree; returns the cycle of the last firing."""
    rows = [(i, acc[i]) for i in sorted(acc) if acc[i]]
    t = clock
    if not rows:
        r = yield from wait_room(allouts)
        t = max(clock + 1, r)
        oi.push(STOPS[m - 1], t)
        oj.push(STOPS[m], t)
        ov.push(STOPS[m], t)
        return t
    for k, (i, row) in enumerate(rows):
        for n, j in enumerate(sorted(row)):
            outs = allouts if n == 0 else [oj, ov]
            r = yield from wait_room(outs)
            t = max(t + 1, r)
            if n == 0:
                oi.push(i, t)
            oj.push(j, t)
            ov.push(row[j], t)
            st.clock = t
            st.busy += 1
        last = k == len(rows) - 1
        outs = allouts if last else [oj, ov]
        r = yield from wait_room(outs)
        t = max(t + 1, r)
        s = STOPS[m] if last else "S0"
        oj.push(s, t)
        ov.push(s, t)
        if last:
            oi.push(STOPS[m - 1], t)
        if not last:
            st.clock = t
            st.busy += 1
    return t
