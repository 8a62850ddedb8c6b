"""Coordinate masks: patterns that keep or drop (row, column) coordinates, defined once.

A coordinate mask is a predicate on the coordinates of an order-2 iteration space ``(i, j)`` with no
tensor in memory. The language writes it as a factor (``mask[causal](i,j) * A(i,j)``); the NumPy
evaluator builds :func:`dense_mask`, the simulator's and the hardware's ``mask_scan`` op enumerate
:func:`kept_columns` (the hardware from :func:`row_runs` and :func:`bigbird_blocks`), so all three agree by
construction.

Patterns (``i`` is the row, ``j`` the column; ``rows x cols`` the iteration space)

``causal``
    keep ``j <= i``.
``band:w=W``
    keep ``|i - j| <= W``.
``bigbird:block=B,window=W,global=G,random=R,seed=S``
    the BigBird block pattern (Zaheer et al. 2020, ITC form): rows and columns fall into blocks of ``B``
    (``B`` divides both sizes); query block ``bi`` keeps the column blocks ``bj`` with
    ``|bi - bj| <= (W - 1) / 2`` (a centred sliding window of ``W`` blocks, ``W`` odd, or 0 for none), the
    first ``G`` column blocks (global columns: every row attends to them), every column block if
    ``bi < G`` (global rows attend to all), and ``R`` random column blocks drawn without replacement from
    the blocks not kept otherwise, by ``numpy.random.default_rng(S)``, query block by query block in
    ascending order. Defaults: ``window=3, global=1, random=1, seed=0``; ``block`` is required.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

from ..errors import ProgramError

#: every pattern with its keys (in canonical order) and their defaults (None = required)
PATTERNS = {
    "causal": {},
    "band": {"w": None},
    "bigbird": {"block": None, "window": 3, "global": 1, "random": 1, "seed": 0},
}


@dataclass(frozen=True)
class MaskSpec:
    """A parsed mask pattern: its name and its integer parameters (every key, defaults filled in)."""
    pattern: str
    params: tuple                       # ((key, value), ...) in the pattern's canonical key order

    def __getitem__(self, key: str) -> int:
        return dict(self.params)[key]

    @property
    def text(self) -> str:
        """Canonical text (``parse_mask(spec.text) == spec``)."""
        if not self.params:
            return self.pattern
        return self.pattern + ":" + ",".join(f"{k}={v}" for k, v in self.params)

    def __str__(self):
        return self.text


def parse_mask(text: str, where: str = "mask") -> MaskSpec:
    """Parse ``causal``, ``band:w=2``, ``bigbird:block=4,window=3,global=1,random=1,seed=0``.

    Raises :class:`~fuseflow.errors.ProgramError` (``where``: ``why``) for an unknown pattern, an unknown or
    repeated key, a missing required key, or a value that is not an integer in range."""
    if isinstance(text, MaskSpec):
        return text
    text = str(text).strip()
    name, _, rest = text.partition(":")
    name = name.strip()
    if name not in PATTERNS:
        raise ProgramError(where, f"unknown mask pattern {name!r} (known: {', '.join(PATTERNS)})")
    keys = PATTERNS[name]
    given = {}
    if rest.strip():
        for part in rest.split(","):
            m = re.fullmatch(r"\s*([A-Za-z_]\w*)\s*=\s*([-+]?\w+)\s*", part)
            if not m:
                raise ProgramError(where, f"mask {name}: expected key=value, got {part.strip()!r}")
            key, value = m.group(1), m.group(2)
            if key not in keys:
                known = ", ".join(keys) if keys else "none"
                raise ProgramError(where, f"mask {name} has no parameter {key!r} (known: {known})")
            if key in given:
                raise ProgramError(where, f"mask {name}: parameter {key!r} given twice")
            try:
                v = int(value)
            except ValueError:
                raise ProgramError(where, f"mask {name}: {key} must be an integer, got {value!r}") from None
            given[key] = v
    elif rest != "" or text.endswith(":"):
        raise ProgramError(where, f"mask {name}: expected key=value after ':'")
    params = []
    for key, default in keys.items():
        if key not in given and default is None:
            raise ProgramError(where, f"mask {name} needs parameter {key!r}")
        params.append((key, given.get(key, default)))
    spec = MaskSpec(name, tuple(params))
    _check_values(spec, where)
    return spec


def _check_values(spec, where):
    p = dict(spec.params)
    for key, v in p.items():
        if v < 0:
            raise ProgramError(where, f"mask {spec.pattern}: {key} must be >= 0, got {v}")
    if spec.pattern == "bigbird":
        if p["block"] < 1:
            raise ProgramError(where, f"mask bigbird: block must be >= 1, got {p['block']}")
        if p["window"] % 2 == 0 and p["window"] != 0:
            raise ProgramError(where, f"mask bigbird: window must be odd (the query block and (window-1)/2 "
                                      f"blocks on each side) or 0, got {p['window']}")


def check_shape(spec: MaskSpec, rows: int, cols: int, where: str = "mask") -> None:
    """Raise ProgramError when the pattern does not fit a ``rows x cols`` space (BigBird blocks)."""
    if spec.pattern == "bigbird":
        b = spec["block"]
        for what, n in (("rows", rows), ("columns", cols)):
            if n % b:
                raise ProgramError(where, f"mask {spec.text}: block {b} does not divide the {n} {what}")


@functools.lru_cache(maxsize=64)
def bigbird_blocks(spec: MaskSpec, rows: int, cols: int) -> tuple:
    """The kept column blocks of every query (row) block, ascending: the BigBird pattern's one definition
    (the hardware's block table is this tuple)."""
    check_shape(spec, rows, cols)
    b = spec["block"]
    nbr, nbc = rows // b, cols // b
    half, glob, rnd = spec["window"] // 2, spec["global"], spec["random"]
    rng = np.random.default_rng(spec["seed"])
    out = []
    for bi in range(nbr):
        if bi < glob:
            kept = set(range(nbc))
        else:
            kept = set(range(min(glob, nbc)))
            if spec["window"]:
                kept |= {c for c in range(bi - half, bi + half + 1) if 0 <= c < nbc}
            cand = [c for c in range(nbc) if c not in kept]
            k = min(rnd, len(cand))
            if k:
                kept |= {int(c) for c in rng.choice(cand, size=k, replace=False)}
        out.append(tuple(sorted(kept)))
    return tuple(out)


def mask_predicate(spec: MaskSpec, i, j, rows: int, cols: int):
    """True where the pattern keeps coordinate ``(i, j)``; ``i`` and ``j`` may be NumPy arrays."""
    spec = parse_mask(spec)
    i, j = np.asarray(i), np.asarray(j)
    if spec.pattern == "causal":
        return j <= i
    if spec.pattern == "band":
        return np.abs(i - j) <= spec["w"]
    b = spec["block"]
    table = np.zeros((rows // b, cols // b), dtype=bool)
    for bi, kept in enumerate(bigbird_blocks(spec, rows, cols)):
        table[bi, list(kept)] = True
    return table[i // b, j // b]


def dense_mask(spec: MaskSpec, rows: int, cols: int) -> np.ndarray:
    """The pattern as a dense boolean ``rows x cols`` array (the NumPy evaluator's mask)."""
    spec = parse_mask(spec)
    check_shape(spec, rows, cols)
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return np.asarray(mask_predicate(spec, i, j, rows, cols), dtype=bool).reshape(rows, cols)


def row_runs(spec: MaskSpec, i: int, rows: int, cols: int) -> list:
    """The kept columns of row ``i`` as ascending half-open runs ``[(lo, hi), ...]`` (what the hardware
    walks: one run for causal and band, one run per kept block for BigBird); empty runs are left out."""
    spec = parse_mask(spec)
    if spec.pattern == "causal":
        runs = [(0, min(i + 1, cols))]
    elif spec.pattern == "band":
        w = spec["w"]
        runs = [(max(0, i - w), min(cols, i + w + 1))]
    else:
        b = spec["block"]
        runs = [(c * b, c * b + b) for c in bigbird_blocks(spec, rows, cols)[i // b]]
    return [(lo, hi) for lo, hi in runs if lo < hi]


def kept_columns(spec: MaskSpec, i: int, rows: int, cols: int) -> list:
    """The kept columns of row ``i``, ascending (what ``mask_scan`` emits for row ``i``)."""
    return [c for lo, hi in row_runs(spec, i, rows, cols) for c in range(lo, hi)]


def kept_count(spec: MaskSpec, rows: int, cols: int) -> int:
    """Number of kept coordinates (the work a generated mask scan does)."""
    return int(dense_mask(spec, rows, cols).sum())
