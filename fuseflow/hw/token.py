"""The hardware token: ``data`` (W bits) + ``ctrl`` (1 bit), Onyx-compatible (DESIGN.md section 7).

Data tokens have ``ctrl = 0`` and carry the value in ``data``: coordinates and references unsigned
(W = crd_width, default 16), values signed two's complement raw fixed point (W = the value width,
default 32). Control tokens have ``ctrl = 1``; their kind sits in ``data[9:8]`` and a stop's level in
``data[7:0]``:

=========  ====  =======================  =============================
token      ctrl  data[9:8] (kind)         data[7:0]
=========  ====  =======================  =============================
``S<n>``   1     0 (stop)                 n (0..255)
``D``      1     1 (done)                 0
``N``      1     2 (empty)                0
=========  ====  =======================  =============================

Repeat-signal streams use the same layout: ``R`` is a data token with data 0, ``S`` is the stop of
level 0 and ``D`` is done.

The data field is ``max(W, 10)`` bits wide (the control kind needs 10 bits); values narrower than
10 bits are held sign-extended in it. As a flat bit vector (``Value.cast(payload)``) a token is
``data | ctrl << field_width``; with W = 16 that is the Onyx 17-bit stream word.

Python side: :func:`encode` / :func:`decode` convert between SAM-style tokens (``3``, ``'S0'``,
``'N'``, ``'D'``, ``'R'``, ``'S'``) and ``(data, ctrl)`` integers or flat raw words.
Block values (a val stream of block shape S, docs/samml.md "Blocks") are one token on a prod(S)*W-bit bus:
:func:`encode_value` / :func:`decode_value`, :func:`pack_block` / :func:`unpack_block`.
RTL side: :func:`token_layout`, :func:`token_signature` and the predicates :func:`is_stop`,
:func:`is_done`, ... that take a token view.
"""

import numpy as np
from amaranth.hdl import Cat, Const, Value, unsigned
from amaranth.lib import data, stream

from ..errors import StreamError

KIND_STOP = 0
KIND_DONE = 1
KIND_EMPTY = 2
MIN_FIELD_WIDTH = 10
MAX_STOP_LEVEL = 255

__all__ = [
    "KIND_STOP", "KIND_DONE", "KIND_EMPTY", "MIN_FIELD_WIDTH", "field_width", "token_layout",
    "token_signature", "encode", "encode_fields", "decode", "decode_fields", "encode_stream",
    "decode_stream", "is_ctrl", "is_data", "is_stop", "is_done", "is_empty", "stop_level",
    "ctrl_kind", "STOP", "DONE", "EMPTY", "const_stop", "pack_block", "unpack_block", "encode_value",
    "decode_value",
]


def field_width(width):
    """Width of the ``data`` field for a W-bit stream: ``max(W, 10)``."""
    width = int(width)
    if width < 1:
        raise ValueError(f"token width must be >= 1, got {width}")
    return max(width, MIN_FIELD_WIDTH)


_layouts = {}


def token_layout(width):
    """``StructLayout({"data": unsigned(max(W, 10)), "ctrl": 1})`` (data in the low bits)."""
    fw = field_width(width)
    lay = _layouts.get(fw)
    if lay is None:
        lay = _layouts[fw] = data.StructLayout({"data": unsigned(fw), "ctrl": unsigned(1)})
    return lay


def token_signature(width):
    """``stream.Signature(token_layout(W))``: the signature of every SAMML stream port."""
    return stream.Signature(token_layout(width))


# ---- Python encode / decode ------------------------------------------------------------------

def encode_fields(tok, width, signed=False):
    """SAM token -> ``(data, ctrl)`` integers for a W-bit stream.

    ``signed``: data tokens are two's complement values (fixed-point raw ints) of ``width`` bits;
    otherwise they must be unsigned and fit ``width`` bits. ``'R'`` encodes as data 0, ``'S'`` as S0.
    """
    fw = field_width(width)
    if isinstance(tok, str):
        if tok == "D":
            return KIND_DONE << 8, 1
        if tok == "N":
            return KIND_EMPTY << 8, 1
        if tok == "R":
            return 0, 0
        if tok == "S":
            return 0, 1
        if tok[:1] == "S" and tok[1:].isdigit():
            n = int(tok[1:])
            if n > MAX_STOP_LEVEL:
                raise StreamError("token", f"stop level {n} exceeds {MAX_STOP_LEVEL}")
            return (KIND_STOP << 8) | n, 1
        raise StreamError("token", f"unknown control token {tok!r}")
    if isinstance(tok, bool) or not isinstance(tok, int):
        if hasattr(tok, "item"):
            tok = tok.item()
        if isinstance(tok, float) and tok.is_integer():
            tok = int(tok)
        if not isinstance(tok, int) or isinstance(tok, bool):
            raise StreamError("token", f"not an integer token: {tok!r}")
    if signed:
        if not -(1 << (width - 1)) <= tok < (1 << (width - 1)):
            raise StreamError("token", f"value {tok} does not fit {width} signed bits")
        return tok & ((1 << fw) - 1), 0
    if not 0 <= tok < (1 << width):
        raise StreamError("token", f"{tok} does not fit {width} unsigned bits")
    return tok, 0


def encode(tok, width, signed=False):
    """SAM token -> flat raw word ``data | ctrl << field_width(W)``."""
    d, c = encode_fields(tok, width, signed)
    return d | (c << field_width(width))


def decode_fields(data_, ctrl, width, signed=False, repsig=False):
    """``(data, ctrl)`` -> SAM token. ``repsig``: decode as a repeat signal (``R``/``S``/``D``)."""
    fw = field_width(width)
    data_ = int(data_) & ((1 << fw) - 1)
    if ctrl:
        kind = (data_ >> 8) & 3
        if kind == KIND_STOP:
            n = data_ & 0xFF
            if repsig:
                return "S" if n == 0 else f"S{n}"
            return f"S{n}"
        if kind == KIND_DONE:
            return "D"
        if kind == KIND_EMPTY:
            return "N"
        raise StreamError("token", f"control token with unknown kind 3 (data {data_:#x})")
    if repsig:
        return "R"
    if signed:
        # values live in the low `width` bits, sign-extended over the field
        v = data_ & ((1 << width) - 1)
        return v - (1 << width) if v >> (width - 1) else v
    return data_


def decode(raw, width, signed=False, repsig=False):
    """Flat raw word -> SAM token."""
    fw = field_width(width)
    raw = int(raw)
    return decode_fields(raw & ((1 << fw) - 1), (raw >> fw) & 1, width, signed, repsig)


def pack_block(values, width):
    """A block's raw values (any shape, row-major) -> one word: element i at bits ``[i*W +: W]`` (two's
    complement; docs/samml.md, "Blocks")."""
    word = 0
    mask = (1 << width) - 1
    for i, v in enumerate(np.ravel(np.asarray(values, dtype=object))):
        v = int(v)
        if not -(1 << (width - 1)) <= v < (1 << (width - 1)):
            raise StreamError("token", f"block value {v} does not fit {width} signed bits")
        word |= (v & mask) << (i * width)
    return word


def unpack_block(word, shape, width):
    """The inverse of :func:`pack_block`: an int64 array of ``shape``."""
    n = int(np.prod(shape))
    vals = [(int(word) >> (i * width)) & ((1 << width) - 1) for i in range(n)]
    vals = [v - (1 << width) if v >> (width - 1) else v for v in vals]
    return np.asarray(vals, dtype=np.int64).reshape(shape)


def encode_value(tok, width, block=()):
    """A val stream's token -> flat raw word: a scalar as :func:`encode` (signed, W bits); with ``block`` a
    block token packed by :func:`pack_block` on the prod(block)*W-bit bus (control tokens as for scalars)."""
    if not block:
        return encode(tok, width, signed=True)
    bus = width * int(np.prod(block))
    if isinstance(tok, str):
        return encode(tok, bus)
    if np.shape(tok) != tuple(block):
        raise StreamError("token", f"block token of shape {list(np.shape(tok))} on a stream of block {list(block)}")
    return pack_block(tok, width)                   # ctrl = 0


def decode_value(raw, width, block=()):
    """The inverse of :func:`encode_value`."""
    if not block:
        return decode(raw, width, signed=True)
    bus = width * int(np.prod(block))
    tok = decode(raw, bus)
    return tok if isinstance(tok, str) else unpack_block(tok, block, width)


def encode_stream(tokens, width, signed=False):
    return [encode(t, width, signed) for t in tokens]


def decode_stream(raws, width, signed=False, repsig=False):
    return [decode(r, width, signed, repsig) for r in raws]


# ---- RTL predicates and constructors (take a token view with .data / .ctrl) ---------------------

def ctrl_kind(tok):
    return tok.data[8:10]


def is_ctrl(tok):
    return tok.ctrl


def is_data(tok):
    """A data token (coordinate, reference, value, or repeat signal R)."""
    return ~tok.ctrl


def is_stop(tok):
    return tok.ctrl & (tok.data[8:10] == KIND_STOP)


def is_done(tok):
    return tok.ctrl & (tok.data[8:10] == KIND_DONE)


def is_empty(tok):
    """The empty token N."""
    return tok.ctrl & (tok.data[8:10] == KIND_EMPTY)


def is_data_or_empty(tok):
    """A data token or N (what most ops treat as 'an element')."""
    return ~tok.ctrl | (tok.data[8:10] == KIND_EMPTY)


def stop_level(tok):
    return tok.data[0:8]


def STOP(level):
    """``data`` field (10 bits, as a Value) of stop S_level; ``level`` may be a Value."""
    return Cat(Value.cast(level)[0:8] if isinstance(level, Value) else Const(level, 8), Const(KIND_STOP, 2))


DONE = Const(KIND_DONE << 8, 10)
EMPTY = Const(KIND_EMPTY << 8, 10)


def const_stop(level):
    return Const((KIND_STOP << 8) | level, 10)
