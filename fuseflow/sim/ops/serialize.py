"""serialize: merges lanes back into one stream in the original order, by the lanes' outermost coordinates.

Each lane's key stream is one fibre of ascending outermost coordinates (``c.., S0, D``); the payload of a lane
holds one unit per key coordinate: one token at depth 0, at depth d >= 1 the fibre below the key, closed by a
stop of level >= d-1 (S_(d-1) inside the lane, S_d after its last unit). The op takes the lane with the smallest
head coordinate, copies its unit and renumbers the closing stop (S_d only for the last unit of all lanes).
"""

from ._common import LEVEL, STOPS, bad, wait_heads


def _data(tok):
    return tok.__class__ is not str


def run(st, ins, outs):
    n, depth = st.params["lanes"], st.params["depth"]
    keys = [ins[f"key{i}"] for i in range(n)]
    pays = [ins[f"in{i}"] for i in range(n)]
    out = outs["out"]
    clock = -1
    copied = False                         # a unit of depth >= 1 was copied (then the end emits no stop)

    def fire(tin):
        # generator: the cycle of a firing that writes out, no earlier than tin
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = tin if tin >= r else r
        st.blocked += t - tin
        return t

    while True:
        tin = yield from wait_heads(keys, clock)
        heads = [k.toks[0] for k in keys]
        live = [i for i, h in enumerate(heads) if _data(h)]
        if live:
            lane = min(live, key=lambda i: heads[i])
            if depth == 0:
                t2 = yield from wait_heads([pays[lane]], clock)
                tin = max(tin, t2)
                tok = pays[lane].toks[0]
                if tok.__class__ is str and tok != "N":
                    raise bad(st, f"lane {lane} has key {heads[lane]} but payload {tok!r}")
                t = yield from fire(tin)
                keys[lane].pop(t)
                pays[lane].pop(t)
                out.push(tok, t)
                clock = st.clock = t
                st.busy += 1
                continue
            # depth >= 1: select the lane (no output), then copy its unit
            keys[lane].pop(tin)
            clock = st.clock = tin
            st.busy += 1
            copied = True
            pay = pays[lane]
            while True:
                tin = yield from wait_heads([pay], clock)
                tok = pay.toks[0]
                if tok.__class__ is str and tok in LEVEL and LEVEL[tok] >= depth - 1:
                    if LEVEL[tok] > depth:
                        raise bad(st, f"lane {lane} closes a unit with {tok} at depth {depth}")
                    t2 = yield from wait_heads(keys, clock)
                    tin = max(tin, t2)
                    last = not any(_data(k.toks[0]) for k in keys)
                    tok = STOPS[depth if last else depth - 1]
                    t = yield from fire(tin)
                    pay.pop(t)
                    out.push(tok, t)
                    clock = st.clock = t
                    st.busy += 1
                    break
                if tok == "D":
                    raise bad(st, f"lane {lane}'s payload ends inside a unit")
                t = yield from fire(tin)
                pay.pop(t)
                out.push(tok, t)
                clock = st.clock = t
                st.busy += 1
            continue
        # every key is at its closing S0 (or D: a malformed key)
        if any(h != "S0" for h in heads):
            raise bad(st, f"key heads {heads}: expected a closing S0 on every lane")
        t2 = yield from wait_heads(pays, clock)
        tin = max(tin, t2)
        ptoks = [p.toks[0] for p in pays]
        emit = depth == 0 or not copied
        for i, tok in enumerate(ptoks):
            if tok == "D" and (depth == 0 or not copied):
                raise bad(st, f"lane {i}'s payload ends before its key")
            if tok != "D" and tok != STOPS[depth]:
                raise bad(st, f"lane {i}'s payload has {tok!r} where its key ends (expected {STOPS[depth]})")
        if emit:
            t = yield from fire(tin)
        else:
            t = tin
        for k in keys:
            k.pop(t)
        for p, tok in zip(pays, ptoks):
            if tok != "D":
                p.pop(t)
        if emit:
            out.push(STOPS[depth], t)
        clock = st.clock = t
        st.busy += 1
        # D on every key and payload
        tin = yield from wait_heads(keys + pays, clock)
        for i, ch in enumerate(keys + pays):
            if ch.toks[0] != "D":
                raise bad(st, f"expected D on every input, got {ch.toks[0]!r} on {ch.name}")
        t = yield from fire(tin)
        for ch in keys + pays:
            ch.pop(t)
        out.push("D", t)
        clock = st.clock = t
        st.busy += 1
        return
