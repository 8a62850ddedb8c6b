"""Helpers shared by the op models."""

from ...errors import StreamError
from ..channel import Channel, Out
from ..tokens import LEVEL, STOPS


def wait_room(outs):
    """Generator: wait until every output in ``outs`` has a known free slot; returns the cycle it is free from.

    Yields the first output still lacking a slot, so deadlock reports name the right stream."""
    while True:
        m = 0
        for o in outs:
            r = o.room()
            if r is None:
                yield o
                break
            if r > m:
                m = r
        else:
            return m


def fire_at(st, outs, tin):
    """Generator: the cycle (>= ``tin``) at which a firing that writes ``outs`` can happen; counts the cycles it
    waits for room as blocked. The hottest ops (array, alu, level_scan, repeat, repeat_sig, two-input intersect)
    write this out inline to save a generator per token."""
    r = yield from wait_room(outs)
    t = tin if tin >= r else r
    st.blocked += t - tin
    return t


def wait_heads(chans, clock):
    """Generator: wait until every channel has a head; returns the first cycle (> clock) all are visible."""
    tin = clock + 1
    for ch in chans:
        while not ch.toks:
            yield ch
        v = ch.times[0] + 1
        if v > tin:
            tin = v
    return tin


def joiner_ports(st, ins, outs):
    """The ports of an n-ary joiner: (n, crd inputs, ref inputs, output crd, output refs, every output)."""
    n = st.params["arity"]
    crds = [ins[f"crd{i}"] for i in range(n)]
    refs = [ins[f"ref{i}"] for i in range(n)]
    orefs = [outs[f"ref{i}"] for i in range(n)]
    return n, crds, refs, outs["crd"], orefs, [outs["crd"]] + orefs


def sink(st, inp, take):
    """Generator for ops without outputs: pop one token per cycle, hand it to ``take``; stop after D."""
    itoks, itimes = inp.toks, inp.times
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
        take(tok)
        if tok == "D":
            return


def pipeline(st, out, latency):
    """An op's output pipeline of ``latency`` >= 2 cycles: returns ``(stage_in, drain)``.

    The op's firing side writes ``stage_in`` (an :class:`~fuseflow.sim.channel.Out`) as if it were ``out``:
    ``stage_in.room()`` is the cycle from which the pipeline has room and ``stage_in.push(tok, t)`` is a
    firing at cycle ``t``. ``drain`` is a generator (a process of the op) that moves every token to ``out``.
    The RTL's rule (docs/hardware.md): the stages never stall; a token fired at ``f`` reaches the last stage at
    ``f + latency - 1`` and leaves at ``p_k = max(f + latency - 1, p_(k-1) + 1, out's room)`` (a skid FIFO
    holds it until then); the op fires only while fewer than ``latency`` tokens are in flight, i.e. token ``k``
    fires no earlier than ``p_(k - latency) + 1``: an internal channel of depth ``latency`` whose tokens become
    visible ``latency - 1`` cycles after their push.

    ``out`` may be a tuple of outputs that every firing writes together (level_scan's crd and ref): then
    ``stage_in`` is a tuple too, one per output, and a firing's tokens leave together, when every output has
    room."""
    if out.__class__ is tuple:
        return _pipeline_group(st, out, latency)
    ch = Channel(f"{st.id} pipeline", latency, f"{st.id} pipeline")
    stage_in = _Delayed(f"{st.id} pipeline", [ch], latency - 2)

    def drain():
        toks, times = ch.toks, ch.times
        last = -1
        while True:
            while not toks:
                yield ch
            r = out.room()
            while r is None:
                yield out
                r = out.room()
            t = times[0] + 1
            if t <= last:
                t = last + 1
            if t < r:
                t = r
            tok = ch.pop(t)
            out.push(tok, t)
            last = t
            if t > st.clock:
                st.clock = t
            st.moved += 1
            if tok == "D":
                return

    return stage_in, drain()


def _pipeline_group(st, outs, latency):
    """:func:`pipeline` for outputs written together: one internal channel per output, in lockstep (the
    firing side pushes all of them in the same cycle)."""
    chans = [Channel(f"{st.id} pipeline {i}", latency, f"{st.id} pipeline") for i in range(len(outs))]
    stage_ins = tuple(_Delayed(f"{st.id} pipeline {i}", [ch], latency - 2) for i, ch in enumerate(chans))
    first = chans[0]

    def drain():
        last = -1
        while True:
            for ch in chans:
                while not ch.toks:
                    yield ch
            t = first.times[0] + 1
            if t <= last:
                t = last + 1
            for o in outs:
                r = o.room()
                while r is None:
                    yield o
                    r = o.room()
                if t < r:
                    t = r
            done = False
            for ch, o in zip(chans, outs):
                tok = ch.pop(t)
                o.push(tok, t)
                done = tok == "D"
            last = t
            if t > st.clock:
                st.clock = t
            st.moved += 1
            if done:
                return

    return stage_ins, drain()


class _Delayed(Out):
    """An Out whose pushes become visible ``delay`` cycles later than a plain push (the pipeline stages)."""
    __slots__ = ("delay",)

    def __init__(self, name, chans, delay):
        super().__init__(name, chans)
        self.delay = delay

    def push(self, tok, t):
        Out.push(self, tok, t + self.delay)


def bad(st, why):
    return StreamError(f"node {st.id} ({st.op})", why)


__all__ = ["pipeline", "fire_at", "wait_room", "wait_heads", "joiner_ports", "sink", "bad", "LEVEL", "STOPS"]
