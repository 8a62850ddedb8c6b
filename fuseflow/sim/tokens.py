"""Tokens as the simulator holds them (the SAM convention, so no conversion is needed at the edges).

data   an int (coordinate, reference) or a number (value: float, or raw fixed-point int)
'S<n>' a stop of level n: ends the current fibre and n enclosing ones
'N'    empty (an absent operand; loading it gives 0)
'D'    done: exactly one, always last
'R'    repeat (only in repeat-signal streams; 'S' is the repeat-signal stop)
"""

import numpy as np

from ..errors import StreamError

MAX_STOP = 64
STOPS = tuple(f"S{i}" for i in range(MAX_STOP))
LEVEL = {s: i for i, s in enumerate(STOPS)}


def normalize(tokens, kind=None):
    """Check a SAM-style token list (``[0, 2, 'S0', 'D']``) and return it as a list.

    Accepts ints, floats, 'S<n>', 'N', 'D' (and 'R', 'S' for repeat signals)."""
    out = []
    for k, tok in enumerate(tokens):
        if isinstance(tok, str):
            if tok in LEVEL or tok in ("N", "D") or (kind == "repsig" and tok in ("R", "S")):
                out.append(tok)
                continue
            raise StreamError(f"token {k}", f"unknown control token {tok!r}")
        if isinstance(tok, (list, tuple)) or getattr(tok, "ndim", 0) >= 1:
            out.append(_block(tok, k))                   # a block value (docs/samml.md, "Blocks")
            continue
        if isinstance(tok, bool) or not isinstance(tok, (int, float)) and not hasattr(tok, "dtype"):
            raise StreamError(f"token {k}", f"not a token: {tok!r}")
        out.append(tok.item() if hasattr(tok, "item") else tok)
    if not out or not _is(out[-1], "D") or sum(_is(t, "D") for t in out) != 1:
        raise StreamError("stream", "a stream must end with exactly one 'D'")
    return out


class Block(np.ndarray):
    """A block value token: a NumPy array (float64, or int64 raw fixed point) of shape (B,) or (B, B).

    It compares unequal to every control token and is hashable by identity, so the op models' scalar tests
    (``tok == "D"``, ``tok in LEVEL``) hold for blocks unchanged; arithmetic on it is NumPy's, element-wise."""

    def __eq__(self, other):
        if other.__class__ is str:
            return False
        return np.ndarray.__eq__(self, other)

    def __ne__(self, other):
        if other.__class__ is str:
            return True
        return np.ndarray.__ne__(self, other)

    __hash__ = object.__hash__


def as_block(x) -> Block:
    """``x`` (an array or nested lists) as a :class:`Block` token."""
    return np.asarray(x).view(Block)


def _block(tok, k):
    """A block token (int64 when every entry is an integer: raw fixed point)."""
    arr = np.asarray(tok)
    if arr.ndim not in (1, 2) or arr.size == 0 or arr.dtype.kind not in "iuf" \
            or (arr.ndim == 2 and arr.shape[0] != arr.shape[1]):
        raise StreamError(f"token {k}", f"not a block token: {tok!r} (a B-vector or a B x B block of numbers)")
    return as_block(arr.astype(np.int64 if arr.dtype.kind in "iu" else np.float64))


def _is(tok, control):
    """``tok == control`` for any token (a block's == would compare element-wise)."""
    return tok.__class__ is str and tok == control
