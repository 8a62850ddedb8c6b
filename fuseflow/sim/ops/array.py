"""array: loads values; reference r gives vals[r], N gives 0; stops and D pass through.

A value leaves ``registry.op_latency`` (2) cycles after its firing (the memory read is registered), through
the output pipeline of :func:`._common.pipeline`."""

from ...samml.registry import op_latency
from ._common import LEVEL, bad, pipeline


def run(st, ins, outs):
    stage_in, drain = pipeline(st, outs["val"], op_latency("array", st.params))
    return load(st, ins["ref"], stage_in), drain


def load(st, inp, out):
    """The firing side: one value per reference into ``out`` (the pipeline's stage input)."""
    itoks, itimes = inp.toks, inp.times
    vals = st.params["vals"]
    nvals = len(vals)
    zero = st.env.zero
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
            if tok == "N":
                v = zero
            elif tok == "D" or tok in LEVEL:
                v = tok
            else:
                raise bad(st, f"unexpected token {tok!r}")
        else:
            if not 0 <= tok < nvals:
                raise bad(st, f"reference {tok} outside the {nvals} values")
            v = vals[tok]
            reads += 1
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = tin if tin >= r else r
        st.blocked += t - tin
        inp.pop(t)
        out.push(v, t)
        clock = st.clock = t
        st.busy += 1
        if v == "D":
            st.mem_reads += reads
            return
