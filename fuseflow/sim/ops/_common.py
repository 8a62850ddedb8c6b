"""Helpers shared by the op models."""

from collections import deque

from ...errors import StreamError
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

    The op's firing side writes ``stage_in`` as if it were ``out`` (an :class:`~fuseflow.sim.channel.Out`):
    ``stage_in.room()`` is the cycle from which the pipeline has room and ``stage_in.push(tok, t)`` is a
    firing at cycle ``t``. The RTL's rule (docs/hardware.md): the stages never stall; a token fired at ``f``
    reaches the last stage at ``f + latency - 1`` and leaves at ``p_k = max(f + latency - 1, p_(k-1) + 1,
    out's room)`` (a skid FIFO holds it until then); the op fires only while fewer than ``latency`` tokens are
    in flight, i.e. token ``k`` fires no earlier than ``p_(k - latency) + 1``: an internal channel of depth
    ``latency`` whose tokens become visible ``latency - 1`` cycles after their push.

    ``out`` may be a tuple of outputs that every firing writes together (level_scan's crd and ref): then
    ``stage_in.push(toks, t)`` takes a tuple, one token per output (as :func:`together`'s does), and a firing's
    tokens leave together, when every output has room.

    A token leaves as soon as its output's room is known: the firing side delivers it within its push, or
    within ``stage_in.room()`` while the pipeline is full, so an unblocked pipeline costs no process switch.
    ``drain`` is a generator (a process of the op) that delivers what is still in flight while the firing side
    waits for input, and ends after D has left. ``p_k`` depends only on the output's credits, which are the
    same whichever process reads them, so the timing is the internal channel's exactly."""
    group = out.__class__ is tuple
    pipe = _Pipeline(st, out if group else (out,), latency)
    return _Stage(pipe), pipe.drain()


def _room_of(outs):
    """The cycle from which every output in ``outs`` has room, or None while one's is not known."""
    r = 0
    for o in outs:
        x = o.room()
        if x is None:
            return None
        if x > r:
            r = x
    return r


def together(st, outs):
    """Outputs that every firing writes together, without a pipeline: ``room()`` is when all have room,
    ``push(toks, t)`` writes ``toks[i]`` to ``outs[i]`` (the interface of :func:`pipeline`'s tuple stage)."""
    return _Together(st, outs)


class _Together:
    __slots__ = ("st", "outs")

    def __init__(self, st, outs):
        self.st, self.outs = st, outs

    def room(self):
        return _room_of(self.outs)

    def push(self, toks, t):
        for o, tok in zip(self.outs, toks):
            o.push(tok, t)

    def describe_wait(self):
        return "; ".join(f"{self.st.id} waits to write '{o.name}' (full: "
                         f"{', '.join(ch.name for ch in o.chans if not ch.credits) or '?'})"
                         for o in self.outs if o.room() is None)


class _Pipeline:
    """The state of :func:`pipeline`: ``credits`` are the internal channel's (the cycle from which each free
    slot may be refilled), ``pending`` the fired tokens (a token, or a tuple per firing of several outputs) not
    yet delivered, with their firing cycles in ``fired``; ``last`` the cycle the latest token left."""
    __slots__ = ("st", "outs", "single", "ahead", "credits", "pending", "fired", "last", "done")

    def __init__(self, st, outs, latency):
        self.st, self.outs = st, outs
        self.single = outs[0] if len(outs) == 1 else None
        self.ahead = latency - 1
        self.credits = deque([0] * latency)
        self.pending, self.fired = deque(), deque()
        self.last = -1
        self.done = False

    def out_room(self):
        """The cycle from which the outputs have room, or None while it is not known."""
        one = self.single
        return one.room() if one is not None else _room_of(self.outs)

    def deliver(self, toks, fired, r):
        """The firing of cycle ``fired`` leaves at max(fired + L - 1, the last departure + 1, ``r``, the outputs'
        room), which frees its slot of the internal channel from the cycle after."""
        t = fired + self.ahead
        if t <= self.last:
            t = self.last + 1
        if t < r:
            t = r
        one = self.single
        if one is not None:
            one.push(toks, t)
        else:
            for o, tok in zip(self.outs, toks):
                o.push(tok, t)
            toks = toks[0]
        self.credits.append(t + 1)
        self.last = t
        if toks == "D":
            self.done = True

    def flush(self):
        """Deliver the pending tokens, oldest first, while the outputs' room is known."""
        pending, fired = self.pending, self.fired
        moved = 0
        while pending:
            r = self.out_room()
            if r is None:
                break
            self.deliver(pending.popleft(), fired.popleft(), r)
            moved += 1
        self.st.moved += moved

    def room(self):
        """For the drain's wait: not None once it has something to do (a deliverable token, or D has left)."""
        if self.done:
            return 0
        if not self.pending or self.out_room() is None:
            return None
        return 0

    def drain(self):
        st = self.st
        while not self.done:
            yield self
            self.flush()
        # the firing side set st.clock to D's firing; the op ends when D leaves
        if self.last > st.clock:
            st.clock = self.last

    def describe_wait(self):
        return f"{self.st.id} (output pipeline) waits to deliver to " + \
            ", ".join(f"'{o.name}'" for o in self.outs if o.room() is None)


class _Stage:
    """The firing side's view of a :class:`_Pipeline`, written like an output: ``push(tok, t)`` is one firing
    (a tuple of tokens when the pipeline has several outputs)."""
    __slots__ = ("pipe", "credits", "name")

    def __init__(self, pipe):
        self.pipe = pipe
        self.credits = pipe.credits
        self.name = f"{pipe.st.id} pipeline"

    def room(self):
        c = self.credits
        if c:
            return c[0]
        pipe = self.pipe
        if pipe.out_room() is None:
            return None
        pipe.flush()            # the pipeline is full and its oldest token can leave: that frees a slot
        return c[0]

    def push(self, tok, t):
        pipe = self.pipe
        self.credits.popleft()
        if not pipe.pending:
            # the common case: nothing in flight ahead of it and the outputs' room known, so it leaves at once
            r = pipe.out_room()
            if r is not None:
                pipe.deliver(tok, t, r)
                return
        # behind others in flight, or no room yet: it waits (room() or the drain delivers it)
        pipe.pending.append(tok)
        pipe.fired.append(t)

    def describe_wait(self):
        return f"{self.pipe.st.id} waits to write '{self.name}' (its output pipeline is full)"


def bad(st, why):
    return StreamError(f"node {st.id} ({st.op})", why)


__all__ = ["pipeline", "together", "fire_at", "wait_room", "wait_heads", "joiner_ports", "sink", "bad", "LEVEL",
           "STOPS"]
