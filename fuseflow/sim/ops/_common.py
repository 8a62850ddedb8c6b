"""Helpers shared by the op models."""

from ...errors import StreamError
from ..tokens import LEVEL, STOPS


def room(outs):
    """Cycle from which every output in ``outs`` has a free slot, or None if not yet known."""
    m = 0
    for o in outs:
        r = o.room()
        if r is None:
            return None
        if r > m:
            m = r
    return m


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


def bad(st, why):
    return StreamError(f"node {st.id} ({st.op})", why)


__all__ = ["room", "wait_room", "wait_heads", "bad", "LEVEL", "STOPS"]
