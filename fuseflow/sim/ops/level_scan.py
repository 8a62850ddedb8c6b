"""level_scan: one reference in, that fibre's coordinates and child references out, with stop promotion.

A compressed level reads its coordinates from memory: its tokens leave ``registry.op_latency`` (2) cycles
after their firing, through the output pipeline of :func:`._common.pipeline` (which delivers them as the output
has room). With ``bounds_latency`` 2 (its seg and first arrays in block RAM: :mod:`fuseflow.samml.storage`) the
entries of a reference's fibre are read two cycles after it reaches the input's head, so the firing that takes a
reference comes no earlier than two cycles after its push and two cycles after the previous pop of the input."""

from ...samml.registry import op_latency
from ._common import LEVEL, STOPS, bad, pipeline, together


def run(st, ins, outs):
    latency = op_latency("level_scan", st.params)
    pair = (outs["crd"], outs["ref"])
    if latency == 1:
        return scan(st, ins, together(st, pair))
    stage, drain = pipeline(st, pair, latency)
    return scan(st, ins, stage), drain


def scan(st, ins, out):
    """The firing side: each firing writes a (crd, ref) pair to ``out`` (:func:`._common.together` of the
    outputs, or the pipeline's stage input)."""
    p = st.params
    inp = ins["ref"]
    itoks, itimes = inp.toks, inp.times
    dense = p["format"] == "dense"
    # cycles from a reference reaching the head to the firing that may take it (1: the next cycle)
    bounds = 1 if dense else int(p.get("bounds_latency") or 1)
    last_pop = -bounds                      # the cycle of the input's previous pop
    if dense:
        dim = p["dim"]
    else:
        seg, crd = p["seg"], p["crd"]
        nseg = len(seg) - 1
    clock = -1
    reads = 0
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        tin = itimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        if tok.__class__ is str:
            if tok == "D" or tok in LEVEL:
                out_tok = "D" if tok == "D" else STOPS[LEVEL[tok] + 1]
                r = out.room()
                while r is None:
                    yield out
                    r = out.room()
                t = tin if tin >= r else r
                st.blocked += t - tin
                inp.pop(t)
                last_pop = t
                out.push((out_tok, out_tok), t)
                clock = st.clock = t
                st.busy += 1
                if tok == "D":
                    st.mem_reads += reads
                    return
                continue
            if tok != "N":
                raise bad(st, f"unexpected token {tok!r} on input ref")
            lo = hi = 0
        elif dense:
            lo = tok * dim
            hi = lo + dim
        else:
            if not 0 <= tok < nseg:
                raise bad(st, f"reference {tok} outside the level's {nseg} fibres")
            lo, hi = seg[tok], seg[tok + 1]
            reads += 2 + hi - lo
            if bounds > 1:                  # the fibre's entries are read once it has been the head for a while
                tin = max(tin, itimes[0] + bounds, last_pop + bounds)
        # the firing that takes the reference emits the first coordinate
        if lo < hi:
            for q in range(lo, hi):
                r = out.room()
                while r is None:
                    yield out
                    r = out.room()
                t = tin if tin >= r else r
                st.blocked += t - tin
                if q == lo:
                    inp.pop(t)
                    last_pop = t
                out.push((q - lo if dense else crd[q], q), t)
                st.busy += 1
                tin = t + 1
            clock = st.clock = t
        else:
            inp.pop(tin)
            last_pop = tin
            clock = st.clock = tin
            st.busy += 1
        # fibre end: look at the next input for stop promotion
        while not itoks:
            yield inp
        nxt = itoks[0]
        tin = itimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        promote = nxt.__class__ is str and nxt in LEVEL
        out_tok = STOPS[LEVEL[nxt] + 1] if promote else "S0"
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = tin if tin >= r else r
        st.blocked += t - tin
        if promote:
            inp.pop(t)
            last_pop = t
        out.push((out_tok, out_tok), t)
        clock = st.clock = t
        st.busy += 1
