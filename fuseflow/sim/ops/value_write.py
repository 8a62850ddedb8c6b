"""value_write: collects the values of an output tensor; stops are dropped, N is written as 0."""

from ._common import LEVEL, bad, sink


def run(st, ins, outs):
    zero = st.env.zero
    vals = []

    def take(tok):
        if tok.__class__ is not str:
            vals.append(tok)
        elif tok == "N":
            vals.append(zero)
        elif tok == "D":
            st.result = {"vals": vals}
            st.mem_writes += len(vals)
        elif tok not in LEVEL:
            raise bad(st, f"unexpected token {tok!r}")

    yield from sink(st, ins["val"], take)
