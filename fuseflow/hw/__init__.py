"""Amaranth hardware for SAMML graphs: token layout, stream plumbing, one module per op.

See docs/hardware.md for the conventions (token encoding, firing rule, port and memory interfaces).
"""

from .stream import FanOut, StreamFIFO
from .token import decode, encode, token_layout, token_signature

__all__ = ["token_layout", "token_signature", "encode", "decode", "StreamFIFO", "FanOut"]
