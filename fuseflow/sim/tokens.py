"""Tokens as the simulator holds them (the SAM convention, so no conversion is needed at the edges).

data   an int (coordinate, reference) or a number (value: float, or raw fixed-point int)
'S<n>' a stop of level n: ends the current fibre and n enclosing ones
'N'    empty (an absent operand; loading it gives 0)
'D'    done: exactly one, always last
'R'    repeat (only in repeat-signal streams; 'S' is the repeat-signal stop)
"""

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
        if isinstance(tok, bool) or not isinstance(tok, (int, float)) and not hasattr(tok, "dtype"):
            raise StreamError(f"token {k}", f"not a token: {tok!r}")
        out.append(tok.item() if hasattr(tok, "item") else tok)
    if not out or out[-1] != "D" or out.count("D") != 1:
        raise StreamError("stream", "a stream must end with exactly one 'D'")
    return out
