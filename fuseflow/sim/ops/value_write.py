"""value_write: collects the values of an output tensor; stops are dropped, N is written as 0."""

from ._common import LEVEL, bad


def run(st, ins, outs):
    inp = ins["val"]
    itoks, itimes = inp.toks, inp.times
    zero = st.env.zero
    vals = []
    clock = -1
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        t = itimes[0] + 1
        if t <= clock:
            t = clock + 1
        inp.pop(t)
        clock = st.clock = t
        st.busy += 1
        if tok.__class__ is not str:
            vals.append(tok)
        elif tok == "N":
            vals.append(zero)
        elif tok == "D":
            st.result = {"vals": vals}
            st.mem_writes += len(vals)
            return
        elif tok not in LEVEL:
            raise bad(st, f"unexpected token {tok!r}")
