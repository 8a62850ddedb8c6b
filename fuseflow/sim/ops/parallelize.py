"""parallelize: splits a stream across lanes, round-robin by fibre; stops and D go to every lane."""

from ._common import LEVEL, bad


def run(st, ins, outs):
    inp = ins["in"]
    n = st.params["lanes"]
    lanes = [outs[f"out{i}"] for i in range(n)]
    itoks, itimes = inp.toks, inp.times
    clock = -1
    k = 0                                  # position of the next data token in its fibre
    while True:
        while not itoks:
            yield inp
        tok = itoks[0]
        tin = itimes[0] + 1
        if tin <= clock:
            tin = clock + 1
        ctrl = tok.__class__ is str and tok != "N"
        if ctrl:
            if tok != "D" and tok not in LEVEL:
                raise bad(st, f"unexpected token {tok!r}")
            targets = lanes                # a stop or D: every lane
        else:
            targets = (lanes[k % n],)
        r = tin
        for o in targets:
            room = o.room()
            while room is None:
                yield o
                room = o.room()
            if room > r:
                r = room
        st.blocked += r - tin
        inp.pop(r)
        for o in targets:
            o.push(tok, r)
        clock = st.clock = r
        st.busy += 1
        k = 0 if ctrl else k + 1
        if tok == "D":
            return
