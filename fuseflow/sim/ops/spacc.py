"""spacc: sparse accumulator. Merges every entry of a group into one sorted sub-tree (docs/samml.md, spacc).

The sub-tree has ``order`` levels: (j) for order 1, (a, j) for order 2, (a, b, j) for order 3. The streams,
outermost first, are ``crd_outer{order-2}`` ... ``crd_outer0``, ``crd_inner`` (with ``val``); sub-tree depth d
(0 = outermost) is stream d. ``group`` reduced levels sit directly above the sub-tree, so a group (everything
under one prefix of kept levels) ends with a stop S_m, m >= group, on stream 0. Coordinates may come in any
order and repeat; entries with the same (a, b, j) are merged with ``op``.

Double-buffered: two processes (two generators sharing the node) joined by a channel of depth 2 whose slots are
the two banks. The accumulate side fires once per input step (no output); it needs a bank for every firing of
a group (it takes a free slot's credit at the group's first firing) and pushes the bank into the channel with
the group-closing stop in cycle t. The emit side pops it once visible and E cycles later (t + 1 + E on,
E = registry.SPACC_EMIT_DELAY: 0 for order 1, 7 for orders 2 and 3): one firing per entry in sorted
order, one per fibre end, the last one carrying the group's closing stops (S_(m - group + d) on stream d); it
pops the bank in that last firing t', so the accumulate side may refill it from t' + 1. D is taken by the
accumulate side (no bank needed) and sent through the channel outside its credits; the emit side emits D after
the last bank.

Counters: ``busy`` counts the cycles in which either side fired (both sides count their firings as they go, so
the engine sees progress; the emit side subtracts the cycles in which both fired when it finishes). ``blocked``
counts the emit side's cycles waiting for output room (waiting for a free bank is not counted).
"""

from ..channel import Channel, Out
from ...samml.registry import REDUCE_MERGE, check_spacc, spacc_emit_delay
from ._common import LEVEL, STOPS, bad, fire_at


def stream_names(order):
    """Sub-tree streams, outermost first: crd_outer{order-2}, ..., crd_outer0, crd_inner."""
    return [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]


def run(st, ins, outs):
    check_spacc(st.params, f"node {st.id}")
    order = st.params["order"]
    names = stream_names(order)
    ochans = [outs[x] for x in names] + [outs["val"]]
    banks = Channel(f"{st.id}.banks", 2, f"{st.id} (emit side)")
    acc_log = []             # cycles in which the accumulate side fired
    side = _acc1 if order == 1 else _acc_nested
    return side(st, ins, banks, acc_log), _emitter(st, banks, ochans, acc_log)


def _bank(bank_out):
    """Generator: wait until a bank's credit is known; returns the cycle it is free from."""
    while bank_out.room() is None:
        yield bank_out
    return bank_out.room()


def _send_done(banks, t):
    """The accumulate side took D in cycle t: pass it behind the last bank (no bank needed)."""
    banks.toks.append("D")
    banks.times.append(t)


def _acc1(st, ins, banks, log):
    ic, iv = ins["crd_inner"], ins["val"]
    bank_out = Out(banks.name, [banks])
    f = st.env.binary[REDUCE_MERGE[st.params["op"]]]
    zero = st.env.zero
    group = st.params.get("group", 1)
    acc = {}
    have = False             # holds a bank (from the group's first firing to its closing stop)
    clock = -1
    while True:
        while not ic.toks:
            yield ic
        while not iv.toks:
            yield iv
        c, v = ic.toks[0], iv.toks[0]
        t = max(clock + 1, ic.times[0] + 1, iv.times[0] + 1)
        if c == "D":
            if v != "D":
                raise bad(st, f"crd_inner has {c!r} but val has {v!r}")
            if acc:
                raise bad(st, "stream ends inside a group (no stop of level >= group closed it)")
            ic.pop(t)
            iv.pop(t)
            log.append(t)
            st.busy += 1
            _send_done(banks, t)
            return
        if not have:
            r = yield from _bank(bank_out)
            if r > t:
                t = r
            have = True
        if c.__class__ is not str:
            _merge(st, acc, c, v, f, zero)
        elif c != v:
            raise bad(st, f"crd_inner has {c!r} but val has {v!r}")
        elif c in LEVEL:
            m = LEVEL[c]
            if m >= group:
                bank_out.push(({(): acc} if acc else {}, m - group), t)
                acc = {}
                have = False
        else:
            raise bad(st, f"unexpected token {c!r}")
        ic.pop(t)
        iv.pop(t)
        clock = t
        log.append(t)
        st.busy += 1


def _merge(st, row, c, v, f, zero):
    """Merge value ``v`` into ``row[c]`` with the reduction ``f`` (the first value is kept as is; N is 0)."""
    if v == "N":
        v = zero
    elif v.__class__ is str:
        raise bad(st, f"coordinate {c} meets value token {v!r}")
    row[c] = f(row[c], v) if c in row else v
    st.alu_ops += 1


def _acc_nested(st, ins, banks, log):
    """Orders 2 and 3: a walk over the nested input streams (depth d reads stream d)."""
    n = st.params["order"]
    group = st.params.get("group", 1)
    names = stream_names(n)
    chans = [ins[x] for x in names]
    iv = ins["val"]
    ic = chans[-1]
    bank_out = Out(banks.name, [banks])
    f = st.env.binary[REDUCE_MERGE[st.params["op"]]]
    zero = st.env.zero
    acc = {}                 # (a,) or (a, b) -> {j: value}
    have = False             # holds a bank (from the group's first firing to its closing stop)
    prefix = [None] * (n - 1)
    row = None               # acc row of the current prefix (while reading crd_inner)
    d = 0                    # the stream being read
    closed = False           # stream d's next token is a stop whose fibre end a deeper stream already signalled
    want = 0                 # ... and its level
    clock = -1
    while True:
        if d == n - 1:
            # crd_inner and val: data accumulate into the current row; a stop ends the row
            while not ic.toks:
                yield ic
            while not iv.toks:
                yield iv
            c, v = ic.toks[0], iv.toks[0]
            t = max(clock + 1, ic.times[0] + 1, iv.times[0] + 1)
            # (a bank is held: this fibre follows a coordinate of the group)
            ic.pop(t)
            iv.pop(t)
            clock = t
            log.append(t)
            st.busy += 1
            if c.__class__ is not str:
                _merge(st, row, c, v, f, zero)
                continue
            if c != v or c not in LEVEL:
                raise bad(st, f"crd_inner has {c!r} but val has {v!r}")
            j = LEVEL[c]
        else:
            ch = chans[d]
            while not ch.toks:
                yield ch
            x = ch.toks[0]
            t = max(clock + 1, ch.times[0] + 1)
            if x == "D" and not closed:
                if d != 0:
                    raise bad(st, f"{names[d]} ends inside a fibre of {names[d - 1]}")
                if any(acc.values()):
                    raise bad(st, "stream ends inside a group (no stop of level >= group closed it)")
                for dch in chans[1:] + [iv]:
                    while not dch.toks:
                        yield dch
                    if dch.toks[0] != "D":
                        raise bad(st, f"{names[0]} is done but another input has {dch.toks[0]!r}")
                    if dch.times[0] + 1 > t:
                        t = dch.times[0] + 1
                for dch in chans + [iv]:
                    dch.pop(t)
                log.append(t)
                st.busy += 1
                _send_done(banks, t)
                return
            if not have:
                r = yield from _bank(bank_out)
                if r > t:
                    t = r
                have = True
            if closed:
                if x != STOPS[want]:
                    raise bad(st, f"{names[d]} has {x!r} where the fibre end needs {STOPS[want]}")
                ch.pop(t)
                j = want
                closed = False
            elif x.__class__ is not str:
                ch.pop(t)
                clock = t
                log.append(t)
                st.busy += 1
                prefix[d] = x
                d += 1
                if d == n - 1:
                    row = acc.setdefault(tuple(prefix), {})
                continue
            elif x in LEVEL:
                # an empty fibre on stream d: every deeper stream holds its bare stop, one level up per depth
                j = LEVEL[x]
                deeper = chans[d + 1:] + [iv]
                for e, dch in enumerate(deeper):
                    while not dch.toks:
                        yield dch
                    need = STOPS[j + min(e + 1, n - 1 - d)]
                    if dch.toks[0] != need:
                        raise bad(st, f"{names[d]} has the bare stop {x}, so {dch.consumer or 'a deeper input'} "
                                      f"needs {need}, got {dch.toks[0]!r}")
                    if dch.times[0] + 1 > t:
                        t = dch.times[0] + 1
                ch.pop(t)
                for dch in deeper:
                    dch.pop(t)
            else:
                raise bad(st, f"unexpected token {x!r} on {names[d]}")
            clock = t
            log.append(t)
            st.busy += 1
        # the fibre of stream d ended with a stop of level j (taken in cycle clock)
        if d:
            d -= 1
            if j:
                closed, want = True, j - 1
        elif j >= group:
            bank_out.push((acc, j - group), clock)
            acc = {}
            have = False


def _emitter(st, banks, ochans, acc_log):
    """The emit side: drains the banks in order, then emits D."""
    log = []
    clock = -1
    delay = spacc_emit_delay(st.params["order"])
    while True:
        while not banks.toks:
            yield banks
        item = banks.toks[0]
        handed = banks.times[0]
        # a bank's first firing waits E cycles more (orders 2, 3: the RTL's row walker and memory read); D not
        start = handed if item == "D" else handed + delay
        if clock < start:
            clock = start
        if item == "D":
            t = yield from fire_at(st, ochans, clock + 1)
            banks.pop(t)
            for o in ochans:
                o.push("D", t)
            log.append(t)
            st.busy += 1 - len(set(acc_log).intersection(log))
            st.clock = t
            return
        acc, base = item
        clock = yield from _emit(st, acc, base, ochans, clock, log)
        banks.pop(clock)


def _emit(st, acc, base, ochans, clock, log):
    """Emit the accumulated sub-tree ({prefix tuple: {j: value}}), the first firing after cycle ``clock``;
    ``base`` = m - group; ``log`` gets the cycle of every firing. ``ochans``: the output streams outermost
    first, val last. Returns the cycle of the last firing (the closing stops: S_(base + d) on stream d)."""
    n = len(ochans) - 1
    inner = ochans[n - 1:]                     # crd_inner, val
    keys = sorted(p for p, r in acc.items() if r)
    t = clock
    q = 0                                      # the outermost stream that starts a new fibre
    for k, p in enumerate(keys):
        row = acc[p]
        first = ochans[q:]
        for idx, j in enumerate(sorted(row)):
            t = yield from fire_at(st, first if idx == 0 else inner, t + 1)
            if idx == 0:
                for e in range(q, n - 1):
                    ochans[e].push(p[e], t)
            ochans[n - 1].push(j, t)
            ochans[n].push(row[j], t)
            log.append(t)
            st.busy += 1
        if k + 1 < len(keys):
            nxt = keys[k + 1]
            q = 0
            while p[q] == nxt[q]:
                q += 1
            # streams q+1 .. n-1 close a fibre: stream q+1 with S0, each deeper one a level higher
            t = yield from fire_at(st, ochans[q + 1:], t + 1)
            for e in range(q + 1, n + 1):
                s = STOPS[min(e, n - 1) - q - 1]
                ochans[e].push(s, t)
            log.append(t)
            st.busy += 1
    t = yield from fire_at(st, ochans, t + 1)
    for e in range(n + 1):
        s = STOPS[base + min(e, n - 1)]
        ochans[e].push(s, t)
    log.append(t)
    st.busy += 1
    return t
