"""Channels: bounded FIFOs that carry (token, push-cycle) and return slot credits to the producer.

Timing contract (DESIGN.md section 5): a token pushed in cycle t may be popped from cycle t+1; a slot freed by
a pop in cycle t may be refilled from cycle t+1. ``credits`` holds, for each slot the producer may use next,
the cycle from which it is free; when it is empty the producer must wait until the consumer has been
simulated further (this is the DAM simulator's synchronisation, and it is exact for this contract).
"""

from __future__ import annotations

from collections import deque
from typing import Protocol


class Credits(Protocol):
    """A channel's slot credits: a deque of cycles, or an always-ready sink's (``fuseflow.sim.engine``)."""

    def __getitem__(self, i: int) -> int: ...

    def popleft(self) -> int: ...

    def append(self, t: int) -> None: ...


class Channel:
    """One FIFO between a producer port and one consumer port."""
    __slots__ = ("name", "toks", "times", "credits", "depth", "consumer")

    def __init__(self, name, depth, consumer=None):
        self.name = name
        self.depth = depth
        self.consumer = consumer
        self.toks = deque()
        self.times = deque()          # push cycle of each queued token (visible one cycle later)
        self.credits: Credits = deque([0] * depth)

    def pop(self, t):
        """Pop the head at cycle ``t`` (the caller has checked it is visible)."""
        self.times.popleft()
        self.credits.append(t + 1)
        return self.toks.popleft()

    def __repr__(self):
        return f"<channel {self.name} {list(self.toks)[:6]}>"


class Out:
    """A producer port: the channels of its stream (several when the stream fans out)."""
    __slots__ = ("name", "chans", "count", "credits", "toks", "times")

    def __init__(self, name, chans):
        self.name = name
        self.chans = chans
        self.count = 0
        # single-consumer fast path: share the channel's deques
        if len(chans) == 1:
            ch = chans[0]
            self.credits, self.toks, self.times = ch.credits, ch.toks, ch.times
        else:
            self.credits = self.toks = self.times = None

    def room(self):
        """Cycle from which a push fits in every channel, or None if not yet known."""
        c = self.credits
        if c is not None:
            return c[0] if c else None
        m = 0
        for ch in self.chans:
            c = ch.credits
            if not c:
                return None
            if c[0] > m:
                m = c[0]
        return m

    def push(self, tok, t):
        self.count += 1
        if self.toks is not None:
            self.credits.popleft()
            self.toks.append(tok)
            self.times.append(t)
            return
        for ch in self.chans:
            ch.credits.popleft()
            ch.toks.append(tok)
            ch.times.append(t)


class TracingOut(Out):
    """An :class:`Out` that also records every push: its cycle (``log``) and its token (``sent``)
    (``run(..., trace=True)``)."""
    __slots__ = ("log", "sent")

    def __init__(self, name, chans):
        super().__init__(name, chans)
        self.log = []
        self.sent = []

    def push(self, tok, t):
        self.log.append(t)
        self.sent.append(tok)
        Out.push(self, tok, t)
