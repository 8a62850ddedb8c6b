"""serialize: merges lanes back into one stream in the original order, by the lanes' key coordinates.

Each lane's key stream holds the coordinates of the parallelized level, in fibres (``c.., S0, .., D``; every
lane has the same stops: the parallelizer sends every stop to every lane). The payload of a lane holds one unit
per key coordinate: one token at depth 0, at depth d >= 1 the fibre below the key, closed by a stop of level
>= d-1 (S_(d-1) inside the lane's key fibre, S_(d+m) after its last unit of a key fibre closed by S_m; a lane
without coordinates in a key fibre has the bare stop S_(d+m) there). Within each key fibre the op takes the lane
with the smallest head coordinate, copies its unit and renumbers the closing stop (S_(d+m) only for the fibre's
last unit of all lanes).
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
    copied = False                         # a unit of depth >= 1 was copied in this key fibre
    had = [False] * n                      # lane i's unit(s) in this key fibre (its closing stop is popped)

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
            copied = had[lane] = True
            pay = pays[lane]
            while True:
                tin = yield from wait_heads([pay], clock)
                tok = pay.toks[0]
                if tok.__class__ is str and tok in LEVEL and LEVEL[tok] >= depth - 1:
                    t2 = yield from wait_heads(keys, clock)
                    tin = max(tin, t2)
                    khead, own = keys[0].toks[0], keys[lane].toks[0]
                    last = not any(_data(k.toks[0]) for k in keys)
                    if last and khead not in LEVEL:
                        raise bad(st, f"lane {lane}'s unit ends where the keys hold {khead!r}")
                    if LEVEL[tok] > (depth + LEVEL[own] if own in LEVEL else depth - 1):
                        raise bad(st, f"lane {lane} closes a unit with {tok} at depth {depth}")
                    tok = STOPS[depth + LEVEL[khead]] if last else STOPS[depth - 1]
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
        if all(h == "D" for h in heads):
            break
        # every key is at the stop closing its fibre
        if any(h != heads[0] or h not in LEVEL for h in heads):
            raise bad(st, f"key heads {heads}: expected the same stop on every lane")
        stop = STOPS[depth + LEVEL[heads[0]]]
        t2 = yield from wait_heads(pays, clock)
        tin = max(tin, t2)
        ptoks = [p.toks[0] for p in pays]
        emit = depth == 0 or not copied
        for i, tok in enumerate(ptoks):
            if not had[i] and tok != stop:
                raise bad(st, f"lane {i}'s payload has {tok!r} where its key fibre ends (expected {stop})")
        t = (yield from fire(tin)) if emit else tin
        for k in keys:
            k.pop(t)
        for p, h in zip(pays, had):
            if not h:
                p.pop(t)
        if emit:
            out.push(stop, t)
        clock = st.clock = t
        st.busy += 1
        copied, had = False, [False] * n
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
