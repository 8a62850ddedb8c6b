"""Fixed-point element-wise functions: the one integer definition shared by the simulator and the RTL.

Re-exported by :mod:`fuseflow.tensors.fixed` (as :class:`~fuseflow.tensors.fixed.FixedFormat` methods
and in its op tables). Each function takes a raw value ``x`` of format ``fmt`` (``fmt.width`` bits,
``fmt.frac`` fractional) and returns a raw value of the same format. The RTL generator
(``fuseflow/hw/ops/alu.py``) builds the same integer algorithm from the same tables (which it gets by
calling the ``*_table`` functions below), so the two agree bit for bit; ``docs/numbers.md`` has the rules
and the accuracy table.

Building blocks:

- *table + linear interpolation* (:func:`interp`): ``T[i] + (((T[i+1] - T[i]) * t + 2**(r-1)) >> r)``
  where ``i`` is the top ``k`` bits of an unsigned index and ``t`` its low ``r`` bits (``>>`` is the
  arithmetic, flooring shift). Table entries carry ``p = frac + FN_GUARD_BITS`` fractional bits; the
  result is rounded half up to ``frac`` bits at the end.
- *digit recurrence square root* (:func:`isqrt_round`): ``floor(sqrt(n))``, plus one when the remainder
  ``n - r*r`` exceeds ``r`` (round to nearest).

Domain rules (saturation, written once here): ``sqrt(x <= 0) = 0``; ``rsqrt(x <= 0) = max_raw``;
``log(x <= 0) = min_raw``; every result is clamped to ``[min_raw, max_raw]``; ``abs(min_raw) = max_raw``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

#: extra fractional bits kept in the function tables and dropped by the final rounding shift
FN_GUARD_BITS = 8
#: upper bound of the table index bits (1025-entry tables at most)
FN_TABLE_MAX_BITS = 10
#: the tanh/gelu tables cover |x| in [0, 2**FN_RANGE_LOG2); beyond it tanh is +-1 and gelu(x) = relu(x)
FN_RANGE_LOG2 = 3
#: fractional bits of the ln(2) constant used by log
LN2_BITS = 30
LN2_Q = round(math.log(2.0) * (1 << LN2_BITS))

#: element-wise functions defined here (besides neg/relu/exp in fixed.py)
FUNCTIONS = ("sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square")


def table_bits(fmt, index_bits: int) -> int:
    """Table index bits for ``fmt``: ``ceil(frac/2) + 2`` (linear interpolation error ~ h**2, so half the
    fraction bits plus margin), at most :data:`FN_TABLE_MAX_BITS` and at most ``index_bits`` (the bits of
    the value that indexes the table)."""
    return max(0, min((fmt.frac + 1) // 2 + 2, FN_TABLE_MAX_BITS, index_bits))


def _phi_tail(u):
    """``-u * (1 - Phi(u))``: gelu(u) - u for u >= 0 (erf form)."""
    return -u * 0.5 * math.erfc(u / math.sqrt(2.0))


@functools.lru_cache(maxsize=64)
def _table(kind, width, frac):
    p = frac + FN_GUARD_BITS
    if kind == "log2":
        k = table_bits(_Fmt(width, frac), width - 2)
        n = 1 << k
        vals = [math.log2(1.0 + i / n) for i in range(n + 1)]
    else:
        k = table_bits(_Fmt(width, frac), frac + FN_RANGE_LOG2)
        n = 1 << k
        step = float(1 << FN_RANGE_LOG2) / n
        fn = math.tanh if kind == "tanh" else _phi_tail
        vals = [fn(i * step) for i in range(n + 1)]
    return k, tuple(int(round(math.ldexp(v, p))) for v in vals)


class _Fmt:
    def __init__(self, width, frac):
        self.width, self.frac = width, frac


def tanh_table(fmt):
    """``(k, T)``: ``T[i] = round(tanh(i * 8 / 2**k) * 2**p)``, ``i = 0..2**k``, ``p = frac + FN_GUARD_BITS``
    (also used by sigmoid: ``sigmoid(x) = (1 + tanh(x/2)) / 2``)."""
    return _table("tanh", fmt.width, fmt.frac)


def gelu_table(fmt):
    """``(k, T)``: ``T[i] = round(h(i * 8 / 2**k) * 2**p)`` with ``h(u) = gelu(u) - u = -u * (1 - Phi(u))``."""
    return _table("gelu", fmt.width, fmt.frac)


def log2_table(fmt):
    """``(k, T)``: ``T[i] = round(log2(1 + i / 2**k) * 2**p)``, ``i = 0..2**k`` (the mantissa's log2)."""
    return _table("log2", fmt.width, fmt.frac)


def interp(table, u: int, r: int) -> int:
    """Linear interpolation in ``table`` at the unsigned index ``u`` with ``r`` fraction bits:
    ``T[i] + ((D[i] * t + 2**(r-1)) >> r)`` with ``(T[i], D[i])`` = :func:`interp_rows` ``(table)[i]``."""
    i = u >> r
    t0, d = interp_row(table, i)
    if not r:
        return t0
    return t0 + ((d * (u & ((1 << r) - 1)) + (1 << (r - 1))) >> r)


def interp_row(table, i: int) -> tuple[int, int]:
    """``(T[i], T[i+1] - T[i])`` (difference 0 at the last entry, which is never interpolated from)."""
    return table[i], (table[i + 1] - table[i]) if i + 1 < len(table) else 0


def interp_rows(table) -> list[tuple[int, int]]:
    """Every :func:`interp_row` of ``table``: the words of the RTL's interpolation ROM (one read gives the
    value and the slope, so no subtraction follows the block RAM)."""
    return [interp_row(table, i) for i in range(len(table))]


def _round_guard(v, shift):
    """``(v + 2**(shift-1)) >> shift`` (round half up; ``v`` unchanged when ``shift == 0``)."""
    return (v + (1 << (shift - 1))) >> shift if shift else v


def _clamp(fmt, x):
    lo, hi = fmt.min_raw, fmt.max_raw
    return lo if x < lo else hi if x > hi else x


def isqrt_round(n: int) -> int:
    """``sqrt(n)`` rounded to nearest for ``n >= 0``: ``r = isqrt(n)``, plus one if ``n - r*r > r``.

    The RTL computes ``isqrt`` by the restoring digit recurrence (two bits per step), which yields the
    same ``r`` and remainder."""
    r = math.isqrt(n)
    return r + 1 if n - r * r > r else r


def fx_abs(fmt, x: int) -> int:
    """``|x|``, saturating (``abs(min_raw) == max_raw``)."""
    return _clamp(fmt, -x if x < 0 else x)


def fx_square(fmt, x: int) -> int:
    """``x * x`` with the multiplier's rounding (``mul(x, x)``)."""
    return fmt.mul(x, x)


def fx_sqrt(fmt, x: int) -> int:
    """``sqrt(x)``: ``isqrt_round(x << frac)``; ``x <= 0`` gives 0."""
    if x <= 0:
        return 0
    return _clamp(fmt, isqrt_round(x << fmt.frac))


def fx_rsqrt(fmt, x: int) -> int:
    """``1 / sqrt(x)``: ``isqrt_round((2**(3*frac)) // x)``, saturated; ``x <= 0`` gives ``max_raw``."""
    if x <= 0:
        return fmt.max_raw
    return _clamp(fmt, isqrt_round((1 << (3 * fmt.frac)) // x))


def fx_tanh(fmt, x: int) -> int:
    """``tanh(x)``: ``u = |x|``; ``v = interp(T, u, r)`` (``r = frac + 3 - k``) for ``u < 8``, else
    ``2**p``; ``y = (v + 2**(G-1)) >> G``; the sign of ``x`` applied."""
    k, table = tanh_table(fmt)
    p = fmt.frac + FN_GUARD_BITS
    r = fmt.frac + FN_RANGE_LOG2 - k
    u = -x if x < 0 else x
    v = interp(table, u, r) if u < (1 << (fmt.frac + FN_RANGE_LOG2)) else 1 << p
    y = _clamp(fmt, _round_guard(v, FN_GUARD_BITS))
    return -y if x < 0 else y


def fx_sigmoid(fmt, x: int) -> int:
    """``sigmoid(x) = (1 + tanh(x/2)) / 2`` from the tanh table: ``u = |x|``; ``v = interp(T, u, r + 1)``
    for ``u < 16``, else ``2**p``; ``s = 2**p + v`` (``x >= 0``) or ``2**p - v`` (``x < 0``);
    result ``(s + 2**G) >> (G + 1)``."""
    k, table = tanh_table(fmt)
    p = fmt.frac + FN_GUARD_BITS
    r = fmt.frac + FN_RANGE_LOG2 - k + 1
    u = -x if x < 0 else x
    v = interp(table, u, r) if u < (1 << (fmt.frac + FN_RANGE_LOG2 + 1)) else 1 << p
    s = (1 << p) - v if x < 0 else (1 << p) + v
    return _clamp(fmt, _round_guard(s, FN_GUARD_BITS + 1))


def fx_gelu(fmt, x: int) -> int:
    """``gelu(x) = x * Phi(x)`` (erf form) as ``relu(x) + h(|x|)``, ``h`` from the gelu table
    (``h(u) = 0`` for ``u >= 8``): ``relu(x) + ((interp(H, |x|, r) + 2**(G-1)) >> G)``, saturated."""
    k, table = gelu_table(fmt)
    r = fmt.frac + FN_RANGE_LOG2 - k
    u = -x if x < 0 else x
    h = _round_guard(interp(table, u, r), FN_GUARD_BITS) if u < (1 << (fmt.frac + FN_RANGE_LOG2)) else 0
    return _clamp(fmt, (x if x > 0 else 0) + h)


def fx_log(fmt, x: int) -> int:
    """``ln(x)``; ``x <= 0`` gives ``min_raw``. With ``e = bit_length(x) - 1`` and ``M = width - 2``:
    ``f = (x << (M - e)) - 2**M`` (the mantissa's fraction, ``M`` bits), ``v = interp(L, f, M - k)``,
    ``y = ((e - frac) << p) + v`` (log2 x, ``p`` fraction bits), result
    ``(y * LN2_Q + 2**(LN2_BITS + G - 1)) >> (LN2_BITS + G)``, saturated."""
    if x <= 0:
        return fmt.min_raw
    k, table = log2_table(fmt)
    p = fmt.frac + FN_GUARD_BITS
    m = fmt.width - 2
    e = x.bit_length() - 1
    f = (x << (m - e)) - (1 << m)
    v = interp(table, f, m - k)
    y = ((e - fmt.frac) << p) + v
    return _clamp(fmt, (y * LN2_Q + (1 << (LN2_BITS + FN_GUARD_BITS - 1))) >> (LN2_BITS + FN_GUARD_BITS))


#: the fixed-point functions by name: ``FIXED_FUNCTIONS[name](fmt, x)``
FIXED_FUNCTIONS = {"sigmoid": fx_sigmoid, "tanh": fx_tanh, "gelu": fx_gelu, "sqrt": fx_sqrt,
                   "rsqrt": fx_rsqrt, "log": fx_log, "abs": fx_abs, "square": fx_square}


# ---- float64 semantics -------------------------------------------------------------------------

def _gelu_array(x):
    from scipy.special import erf          # imported on first use: keeps `import fuseflow` light
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


#: float64 semantics (NumPy's, warnings ignored by the caller): gelu is the erf form x * Phi(x);
#: sqrt/log of a negative number is NaN, log(0) = -inf, rsqrt(0) = inf
FLOAT_FUNCTION_ARRAYS = {
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "tanh": np.tanh,
    "gelu": _gelu_array,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "log": np.log,
    "abs": np.abs,
    "square": lambda x: x * x,
}

#: the functions with f(0) == 0 (iterating only stored entries is exact)
ZERO_PRESERVING_FUNCTIONS = ("tanh", "gelu", "sqrt", "abs", "square")


def input_range(name: str, fmt) -> tuple[int, int]:
    """The documented input range ``(lo, hi)`` (raw, inclusive) of function ``name`` over which the
    accuracy table (docs/numbers.md) holds: the whole format, except ``sqrt``/``rsqrt``/``log`` (the
    positive values) and ``square`` (``|x| <= sqrt(max_value)``, where the result does not saturate)."""
    if name in ("sqrt", "rsqrt", "log"):
        return 1, fmt.max_raw
    if name == "square":
        lim = math.isqrt(fmt.max_raw << fmt.frac)
        return -lim, lim
    return fmt.min_raw, fmt.max_raw


def accuracy(name: str, fmt, raws) -> tuple[float, float]:
    """``(max, mean)`` absolute error of fixed-point ``name`` against float64 over the raw inputs ``raws``
    (each input taken exactly, ``decode(raw)``)."""
    xs = np.asarray(raws, dtype=np.int64)
    got = np.array([FIXED_FUNCTIONS[name](fmt, int(r)) for r in xs], dtype=np.float64) / fmt.one
    with np.errstate(all="ignore"):
        want = FLOAT_FUNCTION_ARRAYS[name](xs.astype(np.float64) / fmt.one)
    err = np.abs(got - want)
    return float(err.max()), float(err.mean())


def accuracy_inputs(name: str, fmt, samples: int = 200_000, seed: int = 0) -> np.ndarray:
    """Every input of the documented range when it has at most ``samples`` values (16-bit formats:
    exhaustive); otherwise ``samples`` of them: half uniform over the range, half uniform over
    ``[-16, 16]`` (clipped to the range), plus both ends."""
    lo, hi = input_range(name, fmt)
    if hi - lo + 1 <= samples:
        return np.arange(lo, hi + 1, dtype=np.int64)
    rng = np.random.default_rng(seed)
    wide = rng.integers(lo, hi, size=samples // 2, endpoint=True)
    near = rng.integers(max(lo, -16 * fmt.one), min(hi, 16 * fmt.one), size=samples - samples // 2, endpoint=True)
    return np.concatenate([wide, near, [lo, hi]]).astype(np.int64)
