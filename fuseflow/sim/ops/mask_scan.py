"""mask_scan: a row coordinate in, the columns its coordinate mask keeps out (refs ``r*dim + c``), with stop
promotion; the timing of a dense level_scan whose fibre holds only the kept columns.

The kept columns come from :func:`fuseflow.samml.masks.row_runs` (the hardware walks the same runs)."""

from ...samml.masks import parse_mask, row_runs
from ...samml.registry import check_mask_scan
from ._common import LEVEL, STOPS, bad


def run(st, ins, outs):
    p = st.params
    check_mask_scan(p, f"node {st.id}")
    spec, rows, dim = parse_mask(p["mask"]), p["rows"], p["dim"]
    inp = ins["ref"]
    ocrd, oref = outs["crd"], outs["ref"]
    itoks, itimes = inp.toks, inp.times
    clock = -1

    def fire(tin):
        # generator: the cycle (>= tin) at which both outputs have room
        r1, r2 = ocrd.room(), oref.room()
        while r1 is None or r2 is None:
            yield ocrd if r1 is None else oref
            r1, r2 = ocrd.room(), oref.room()
        t = max(tin, r1, r2)
        st.blocked += t - tin
        return t

    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        tin = max(itimes[0] + 1, clock + 1)
        if tok.__class__ is str:
            if tok == "D" or tok in LEVEL:
                out_tok = "D" if tok == "D" else STOPS[LEVEL[tok] + 1]
                t = yield from fire(tin)
                inp.pop(t)
                ocrd.push(out_tok, t)
                oref.push(out_tok, t)
                clock = st.clock = t
                st.busy += 1
                if tok == "D":
                    return
                continue
            if tok != "N":
                raise bad(st, f"unexpected token {tok!r} on input ref")
            cols = []
        else:
            if not 0 <= tok < rows:
                raise bad(st, f"row {tok} outside the mask's {rows} rows")
            cols = [c for lo, hi in row_runs(spec, tok, rows, dim) for c in range(lo, hi)]
        # the firing that takes the row emits its first kept column
        if cols:
            for n, c in enumerate(cols):
                t = yield from fire(tin)
                if n == 0:
                    inp.pop(t)
                ocrd.push(c, t)
                oref.push(tok * dim + c, t)
                st.busy += 1
                tin = t + 1
            clock = st.clock = t
        else:
            inp.pop(tin)
            clock = st.clock = tin
            st.busy += 1
        # fibre end: stop promotion from the next input
        while not itoks:
            yield inp
        nxt = itoks[0]
        tin = max(itimes[0] + 1, clock + 1)
        promote = nxt.__class__ is str and nxt in LEVEL
        out_tok = STOPS[LEVEL[nxt] + 1] if promote else "S0"
        t = yield from fire(tin)
        if promote:
            inp.pop(t)
        ocrd.push(out_tok, t)
        oref.push(out_tok, t)
        clock = st.clock = t
        st.busy += 1
