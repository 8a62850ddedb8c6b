"""reduce: one value per non-empty innermost fibre (sum or max); S_n (n >= 1) becomes S_(n-1).

With ``rows`` (blocks) every B x B block is first reduced to the B-vector of its rows (``Env.row_reduce``:
``FixedFormat.row_reduce_array`` in fixed mode), then merged as a value; N is the node's zero (a B-vector)."""

from ...samml.registry import REDUCE_MERGE
from ._common import LEVEL, STOPS, bad, fire_at


def run(st, ins, outs):
    if ins.get("crd") is not None:
        return _with_crd(st, ins, outs)
    return _plain(st, ins, outs)


def _with_crd(st, ins, outs):
    """One value per coordinate of ``crd`` (0 for an empty fibre); the output has crd's structure."""
    iv, ic, out = ins["val"], ins["crd"], outs["val"]
    env = st.env
    f = env.binary[REDUCE_MERGE[st.params["op"]]]
    rows = env.row_reduce[st.params["op"]] if st.params.get("rows") else None
    zero = env.zero
    acc = None
    closed = False           # the last fibre's stop also closed the outer fibre (its partner is next in crd)
    clock = -1
    ops = 0
    while True:
        while not ic.toks:
            yield ic
        c = ic.toks[0]
        t = max(clock + 1, ic.times[0] + 1)
        if closed and c.__class__ is str and c in LEVEL:
            push, pop_c, pop_v = c, True, False
            closed = False
        else:
            while not iv.toks:
                yield iv
            v = iv.toks[0]
            t = max(t, iv.times[0] + 1)
            if c.__class__ is not str:
                if v.__class__ is not str or v == "N":
                    v = zero if v == "N" else (rows(v) if rows else v)
                    if acc is None:
                        acc = v
                    else:
                        acc = f(acc, v)
                        ops += 1
                    iv.pop(t)
                    clock = st.clock = t
                    st.busy += 1
                    continue
                if v not in LEVEL:
                    raise bad(st, f"coordinate {c} meets value token {v!r}")
                push, pop_c, pop_v = (zero if acc is None else acc), True, True
                acc = None
                closed = v != "S0"
            elif c in LEVEL:
                if v != STOPS[LEVEL[c] + 1]:
                    raise bad(st, f"outer {c} meets value {v!r} (expected {STOPS[LEVEL[c] + 1]})")
                push, pop_c, pop_v = c, True, True
            elif c == "D":
                if v != "D":
                    raise bad(st, f"crd is done but val has {v!r}")
                push, pop_c, pop_v = "D", True, True
            else:
                raise bad(st, f"unexpected token {c!r} on crd")
        t = yield from fire_at(st, [out], t)
        if pop_c:
            ic.pop(t)
        if pop_v:
            iv.pop(t)
        out.push(push, t)
        clock = st.clock = t
        st.busy += 1
        if push == "D":
            st.alu_ops += ops
            return


def _plain(st, ins, outs):
    inp, out = ins["val"], outs["val"]
    itoks, itimes = inp.toks, inp.times
    env = st.env
    f = env.binary[REDUCE_MERGE[st.params["op"]]]
    rows = env.row_reduce[st.params["op"]] if st.params.get("rows") else None
    zero = env.zero
    acc = None
    clock = -1
    ops = 0
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        tin = itimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        if tok.__class__ is not str or tok == "N":
            v = zero if tok == "N" else (rows(tok) if rows else tok)
            if acc is None:
                acc = v
            else:
                acc = f(acc, v)
                ops += 1
            inp.pop(tin)
            clock = st.clock = tin
            st.busy += 1
            continue
        if tok == "D":
            if acc is not None:
                raise bad(st, "stream ends without closing its last fibre")
            push, pop = "D", True
        elif tok in LEVEL:
            n = LEVEL[tok]
            if acc is not None:
                push, pop = acc, n == 0        # S_n (n >= 1) is handled again as a bare stop
                acc = None
            elif n > 0:
                push, pop = STOPS[n - 1], True
            else:
                push, pop = None, True         # an empty fibre gives no value
        else:
            raise bad(st, f"unexpected token {tok!r}")
        if push is None:
            t = tin
        else:
            t = yield from fire_at(st, [out], tin)
            out.push(push, t)
        if pop:
            inp.pop(t)
        clock = st.clock = t
        st.busy += 1
        if push == "D":
            st.alu_ops += ops
            return
