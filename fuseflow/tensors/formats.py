"""Level formats: how a tensor's dimensions are stored, one level per dimension.

A :class:`TensorFormat` is a tuple of per-level formats (``"dense"`` or ``"compressed"``) plus a
*mode order*: ``mode_order[k]`` is the tensor dimension stored at level ``k`` (a permutation).
CSR is ``dense, compressed`` with mode order ``(0, 1)``; CSC is the same levels with ``(1, 0)``.

Spellings accepted by :meth:`TensorFormat.parse` (see ``docs/tensors.md``):

- named formats: ``dense``, ``sparse``, ``csr``, ``csc``, ``dcsr``, ``dcsc``, ``csf``, ``dv``, ``sv``,
  ``scalar``;
- per-level letters ``d`` (dense) and ``c`` (compressed; ``s`` is accepted as a SAM-style alias),
  optionally followed by a mode order: ``dc``, ``cd``, ``ccc``, ``dc:1,0``, or SAM-style digits ``ds10``;
- blocked formats: ``b`` + a named format + ``:B`` (``bcsr:4``, ``bdcsr:8``, ``bdv:4``): the levels are over
  block coordinates and every value is a dense B x B block (a B-vector for order 1): ``fmt.block``.
"""

from __future__ import annotations

import dataclasses
import re

from ..errors import TensorError

DENSE = "dense"
COMPRESSED = "compressed"
LEVEL_FORMATS = (DENSE, COMPRESSED)

#: What each level format can do (TACO's level capabilities, Chou et al.): every level can be *iterated*
#: (scanned in order); a dense level can also *locate* (turn a coordinate into a position, ``r*d + c``,
#: without scanning), a compressed level cannot. Code generation asks these, never the format's name.
LEVEL_CAPABILITIES = {
    DENSE: frozenset({"iterate", "locate"}),
    COMPRESSED: frozenset({"iterate"}),
}


def can_locate(level_format: str) -> bool:
    """Whether a level of format ``level_format`` gives random access (``r*d + c``) to its positions."""
    try:
        return "locate" in LEVEL_CAPABILITIES[level_format]
    except KeyError:
        raise TensorError("format", f"unknown level format {level_format!r} "
                                    f"(expected one of {', '.join(LEVEL_FORMATS)})") from None


def written_level_format(every_coordinate: bool) -> str:
    """The format the compiler gives a level of an intermediate it writes (a tensor no user sees): a level that
    holds every coordinate of its dimension in every fibre is stored the way that can locate (dense: nothing
    to store, and a reader finds a coordinate without scanning), any other the way that stores only its
    coordinates (compressed). See ``docs/compiler.md``, "Formats of intermediates"."""
    return next(f for f in LEVEL_FORMATS if ("locate" in LEVEL_CAPABILITIES[f]) == bool(every_coordinate))


_LETTER = {"d": DENSE, "c": COMPRESSED, "s": COMPRESSED}
_LETTER_OF = {DENSE: "d", COMPRESSED: "c"}

# matrix formats: name -> (levels, mode order)
_NAMED_2D = {
    "csr": ((DENSE, COMPRESSED), (0, 1)),
    "csc": ((DENSE, COMPRESSED), (1, 0)),
    "dcsr": ((COMPRESSED, COMPRESSED), (0, 1)),
    "dcsc": ((COMPRESSED, COMPRESSED), (1, 0)),
}
NAMED_FORMATS = ("dense", "sparse", "csr", "csc", "dcsr", "dcsc", "csf", "dv", "sv", "scalar")


@dataclasses.dataclass(frozen=True)
class TensorFormat:
    """Per-level formats and the mode order of a tensor of order ``len(levels)``."""

    levels: tuple
    mode_order: tuple = None
    #: block size per tensor dimension (``()``: unblocked). A blocked format's block is a value type, not a
    #: level: its levels iterate block coordinates (:meth:`level_dims`) and ``vals`` holds one block each.
    block: tuple = ()

    def __post_init__(self):
        levels = self.levels
        if isinstance(levels, str) or not isinstance(levels, (tuple, list)):
            raise TensorError("format", f"levels must be a sequence of level formats, got {levels!r}")
        levels = tuple(levels)
        for lv in levels:
            if lv not in LEVEL_FORMATS:
                raise TensorError("format", f"unknown level format {lv!r} (expected 'dense' or 'compressed')")
        mode_order = self.mode_order
        if mode_order is None:
            mode_order = tuple(range(len(levels)))
        if isinstance(mode_order, str) or not isinstance(mode_order, (tuple, list)):
            raise TensorError("format", f"mode_order must be a sequence of ints, got {mode_order!r}")
        try:
            mode_order = tuple(_as_int(m) for m in mode_order)
        except (TypeError, ValueError):
            raise TensorError("format", f"mode_order must hold ints, got {self.mode_order!r}") from None
        if len(mode_order) != len(levels):
            raise TensorError("format", f"mode_order {list(mode_order)} has {len(mode_order)} entries "
                                        f"but there are {len(levels)} levels")
        if sorted(mode_order) != list(range(len(levels))):
            raise TensorError("format", f"mode_order {list(mode_order)} is not a permutation of "
                                        f"0..{len(levels) - 1}")
        block = tuple(self.block or ())
        if block:
            if len(block) != len(levels) or any(isinstance(b, bool) or not isinstance(b, int) or b < 1
                                                for b in block):
                raise TensorError("format", f"block {list(block)} must give one size >= 1 per dimension "
                                            f"({len(levels)})")
            if len(set(block)) != 1:
                raise TensorError("format", f"block {list(block)} is not square (blocks are B x B)")
        object.__setattr__(self, "levels", levels)
        object.__setattr__(self, "mode_order", mode_order)
        object.__setattr__(self, "block", block)

    # ---- basic properties -------------------------------------------------------------------
    @property
    def order(self):
        """Number of tensor dimensions (= number of levels)."""
        return len(self.levels)

    @property
    def is_dense(self):
        """True when every level is dense (including order 0)."""
        return all(lv == DENSE for lv in self.levels)

    @property
    def is_identity_order(self):
        return self.mode_order == tuple(range(self.order))

    @property
    def level_of_mode(self):
        """Inverse permutation: ``level_of_mode[d]`` is the level that stores dimension ``d``."""
        inv = [0] * self.order
        for k, d in enumerate(self.mode_order):
            inv[d] = k
        return tuple(inv)

    def level_dims(self, shape):
        """Sizes of the levels (tensor ``shape`` permuted into level order; in blocks when blocked)."""
        shape = tuple(shape)
        if len(shape) != self.order:
            raise TensorError("shape", f"shape {list(shape)} has {len(shape)} dimensions but format "
                                       f"{self} has order {self.order}")
        if self.block:
            for d, (n, b) in enumerate(zip(shape, self.block)):
                if n % b:
                    raise TensorError("shape", f"dimension {d} of size {n} is not divisible by the block size "
                                               f"{b} of format {self}")
            return tuple(shape[d] // self.block[d] for d in self.mode_order)
        return tuple(shape[d] for d in self.mode_order)

    @property
    def value_shape(self) -> tuple:
        """The shape of one value: ``()`` for scalars, the block (``(B, B)`` or ``(B,)``) when blocked."""
        return self.block

    def unblocked(self) -> "TensorFormat":
        """The same levels and mode order without the block (the format of the block-coordinate pattern)."""
        return TensorFormat(self.levels, self.mode_order)

    def can_locate(self, level: int) -> bool:
        """Whether storage level ``level`` can locate (see :data:`LEVEL_CAPABILITIES`)."""
        return can_locate(self.levels[level])

    @property
    def letters(self):
        """Per-level letters, e.g. ``"dc"`` for CSR and CSC."""
        return "".join(_LETTER_OF[lv] for lv in self.levels)

    # ---- constructors -----------------------------------------------------------------------
    @classmethod
    def named(cls, name, order=None, mode_order=None):
        """Build a format from a name (``csr``, ``dense``, ``dc``...) and, where needed, an order."""
        if isinstance(name, TensorFormat):
            fmt = name
            if order is not None and fmt.order != order:
                raise TensorError("format", f"format {fmt} has order {fmt.order}, expected {order}")
            return fmt
        if not isinstance(name, str):
            raise TensorError("format", f"format name must be a string, got {name!r}")
        key = name.strip().lower()
        if order is not None:
            try:
                order = _as_int(order)
            except (TypeError, ValueError):
                raise TensorError("format", f"order must be an int, got {order!r}") from None
            if order < 0:
                raise TensorError("format", f"order must be >= 0, got {order}")
        if key in _NAMED_2D:
            if order not in (None, 2):
                raise TensorError("format", f"{key} is a matrix format (order 2), not order {order}")
            levels, mo = _NAMED_2D[key]
            if mode_order is not None and tuple(mode_order) != mo:
                raise TensorError("format", f"{key} has mode order {list(mo)}; give letters for others")
            return cls(levels, mo)
        if key in ("dv", "sv"):
            if order not in (None, 1):
                raise TensorError("format", f"{key} is a vector format (order 1), not order {order}")
            return cls((DENSE if key == "dv" else COMPRESSED,), mode_order)
        if key == "scalar":
            if order not in (None, 0):
                raise TensorError("format", f"scalar has order 0, not {order}")
            return cls((), ())
        if key in ("dense", "sparse", "csf"):
            if order is None:
                order = 3 if key == "csf" else (len(mode_order) if mode_order is not None else 2)
            if key == "csf" and order == 0:
                raise TensorError("format", "csf needs order >= 1")
            lv = DENSE if key == "dense" else COMPRESSED
            return cls((lv,) * order, mode_order)
        m = re.fullmatch(r"([dcs]*)", key)
        if m is not None:
            levels = tuple(_LETTER[ch] for ch in key)
            if order is not None and order != len(levels):
                raise TensorError("format", f"{name!r} has {len(levels)} levels but order {order} was asked")
            return cls(levels, mode_order)
        raise TensorError("format", f"unknown format name {name!r} (expected one of "
                                    f"{', '.join(NAMED_FORMATS)}, or level letters like 'dc' / 'dc:1,0')")

    @classmethod
    def parse(cls, spec, order=None):
        """Parse a format spec: a name (``csr``), letters (``dc``), letters with a mode order (``dc:1,0``)
        or SAM-style letters and digits (``ds10``). ``order``, when given, must match."""
        if isinstance(spec, TensorFormat):
            return cls.named(spec, order)
        if isinstance(spec, dict):
            fmt = cls.from_json(spec)
            if order is not None and fmt.order != order:
                raise TensorError("format", f"format {fmt} has order {fmt.order}, expected {order}")
            return fmt
        if not isinstance(spec, str):
            raise TensorError("format", f"format spec must be a string, got {spec!r}")
        text = spec.strip().lower()
        m = re.fullmatch(r"b([a-z]+)\s*:\s*(\d+)", text)
        if m is not None and m.group(1) != "" and not re.fullmatch(r"[dcs]+", "b" + m.group(1)):
            base = cls.named(m.group(1), order)
            b = int(m.group(2))
            if b < 1:
                raise TensorError("format", f"block size must be >= 1 in {spec!r}")
            return cls(base.levels, base.mode_order, (b,) * base.order)
        if ":" in text:
            head, _, tail = text.partition(":")
            head = head.strip()
            tail = tail.strip()
            try:
                mo = tuple(int(t) for t in tail.split(",")) if tail else ()
            except ValueError:
                raise TensorError("format", f"bad mode order {tail!r} in format spec {spec!r}") from None
            return cls.named(head, order, mode_order=mo)
        m = re.fullmatch(r"([dcs]+)(\d+)", text)
        if m is not None and len(m.group(2)) == len(m.group(1)):
            return cls.named(m.group(1), order, mode_order=tuple(int(ch) for ch in m.group(2)))
        return cls.named(text, order)

    # ---- JSON -------------------------------------------------------------------------------
    def to_json(self):
        d = {"levels": list(self.levels), "mode_order": list(self.mode_order)}
        if self.block:
            d["block"] = list(self.block)
        return d

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict):
            raise TensorError("format", f"expected an object with 'levels' and 'mode_order', got {d!r}")
        if "levels" not in d:
            raise TensorError("format", "missing 'levels'")
        extra = set(d) - {"levels", "mode_order", "block"}
        if extra:
            raise TensorError("format", f"unexpected keys {sorted(extra)}")
        levels = d["levels"]
        if not isinstance(levels, list):
            raise TensorError("format", f"'levels' must be a list, got {levels!r}")
        mo = d.get("mode_order")
        if mo is not None:
            if not isinstance(mo, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in mo):
                raise TensorError("format", f"'mode_order' must be a list of ints, got {mo!r}")
        block = d.get("block") or ()
        if not isinstance(block, (list, tuple)):
            raise TensorError("format", f"'block' must be a list of ints, got {block!r}")
        return cls(tuple(levels), None if mo is None else tuple(mo), tuple(block))

    # ---- naming -----------------------------------------------------------------------------
    @property
    def name(self):
        """Short readable name; ``TensorFormat.parse(fmt.name, fmt.order) == fmt``."""
        if self.block:
            base = self.unblocked().name
            if ":" in base or self.order == 0:
                raise TensorError("format", f"blocked format {base} has no spelling (blocks need a named format "
                                            f"without a mode order)")
            return f"b{base}:{self.block[0]}"
        order = self.order
        if order == 0:
            return "scalar"
        for key, (levels, mo) in _NAMED_2D.items():
            if self.levels == levels and self.mode_order == mo:
                return key
        if order == 1:
            return "dv" if self.levels == (DENSE,) else "sv"
        if self.is_identity_order:
            if self.is_dense:
                return "dense"
            if order == 3 and all(lv == COMPRESSED for lv in self.levels):
                return "csf"
            return self.letters
        return self.letters + ":" + ",".join(str(m) for m in self.mode_order)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"TensorFormat({self.name!r})"


def _as_int(x):
    if isinstance(x, bool):
        raise TypeError("bool is not an int here")
    if hasattr(x, "__index__"):
        return x.__index__()
    raise TypeError(f"not an int: {x!r}")


def as_format(spec, order=None):
    """Accept a :class:`TensorFormat`, a spec string or a JSON dict; check ``order`` when given."""
    return TensorFormat.parse(spec, order)
