"""The one definition of fixed-point arithmetic shared by the simulator and the RTL generator.

Numbers are signed two's complement with ``width`` bits of which ``frac`` are fractional (default
32/16). A *raw* value ``r`` stands for the real number ``r / 2**frac``. The rules (also in
``docs/numbers.md``, which tests keep true):

- ``encode``: multiply by ``2**frac``, round to nearest with ties to even, saturate to
  ``[min_raw, max_raw]``; NaN is an error. ``encode_checked`` raises instead of saturating.
- ``add``/``sub``: exact, then saturate.
- ``mul``: ``(a*b + 2**(frac-1)) >> frac`` (arithmetic shift: round half up), then saturate.
- ``div``: ``(a << frac) / b`` truncated toward zero, then saturate; ``b == 0`` gives ``max_raw``
  if ``a >= 0`` else ``min_raw``.
- ``max``/``min``: exact; ``neg``: saturating (``neg(min_raw) == max_raw``); ``relu``: ``max(a, 0)``.
- row reduction of a block (``row_reduce_array``, ``reduce`` with ``rows``): a row's sum exact, then
  saturated once; max/min exact.
- ``exp``: base-2 decomposition with a 2**k-entry table from :func:`exp2_table` and linear
  interpolation; see :meth:`FixedFormat.exp` for the exact integer algorithm.
- ``sigmoid tanh gelu sqrt rsqrt log abs square``: defined in :mod:`fuseflow.tensors.fixedfn` (tables +
  interpolation, digit-recurrence square root), re-exported here as methods and in the op tables.

Every scalar op takes and returns Python ints; each ``*_array`` op takes and returns ``np.int64``
arrays and is bit-identical to the scalar op. Operands are assumed to be in range (raw values of
the format); results always are.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ..errors import TensorError
from .fixedfn import FIXED_FUNCTIONS, FLOAT_FUNCTION_ARRAYS, FUNCTIONS, interp_row

#: fractional bits of the log2(e) constant used by :meth:`FixedFormat.exp`
LOG2E_BITS = 30
#: round(log2(e) * 2**LOG2E_BITS); fits 31 bits, so ``x * LOG2E_Q`` fits 63 bits for 32-bit ``x``
LOG2E_Q = round(math.log2(math.e) * (1 << LOG2E_BITS))
#: default number of table index bits for exp
EXP_TABLE_BITS = 8
MAX_WIDTH = 32


#: extra fractional bits kept inside exp (in y = x*log2(e) and in the table), dropped by the final shift
EXP_GUARD_BITS = 8


@functools.lru_cache(maxsize=64)
def _exp2_table(width, frac, bits):
    p = frac + EXP_GUARD_BITS
    k = min(bits, p)
    n = 1 << k
    # entry i = round(2**(i/2**k) * 2**p), ties to even; n+1 entries (the last is 2**(p+1)) so that
    # interpolation never wraps around
    return tuple(int(round(math.ldexp(2.0 ** (i / n), p))) for i in range(n + 1))


def exp2_table(fmt=None, bits=EXP_TABLE_BITS):
    """Values of ``2**(i / 2**k)`` for ``i = 0..2**k`` (``k = min(bits, frac + EXP_GUARD_BITS)``), as
    integers with ``frac + EXP_GUARD_BITS`` fractional bits, rounded to nearest (ties to even).

    The one table that both the simulator (:meth:`FixedFormat.exp`) and the RTL use:
    ``2**k + 1`` entries, entry ``i`` in ``[2**p, 2**(p+1)]`` with ``p = frac + EXP_GUARD_BITS``.
    """
    fmt = fmt or DEFAULT_FORMAT
    return list(_exp2_table(fmt.width, fmt.frac, int(bits)))


@dataclasses.dataclass(frozen=True)
class FixedFormat:
    """Signed two's complement fixed point: ``width`` bits, ``frac`` of them fractional."""

    width: int = 32
    frac: int = 16

    def __post_init__(self):
        for name in ("width", "frac"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                raise TensorError("fixed format", f"{name} must be an int, got {v!r}")
            object.__setattr__(self, name, int(v))
        if not 2 <= self.width <= MAX_WIDTH:
            raise TensorError("fixed format", f"width must be 2..{MAX_WIDTH}, got {self.width}")
        if not 0 <= self.frac <= self.width - 2:
            raise TensorError("fixed format", f"frac must be 0..width-2 (so that 1.0 fits), got "
                                              f"{self.frac} for width {self.width}")
        # cached constants for the hot scalar paths (not dataclass fields: eq/hash ignore them)
        object.__setattr__(self, "_lo", -(1 << (self.width - 1)))
        object.__setattr__(self, "_hi", (1 << (self.width - 1)) - 1)
        object.__setattr__(self, "_half", (1 << (self.frac - 1)) if self.frac else 0)

    # ---- constants --------------------------------------------------------------------------
    @property
    def min_raw(self):
        return self._lo

    @property
    def max_raw(self):
        return self._hi

    @property
    def one(self):
        """Raw value of 1.0."""
        return 1 << self.frac

    @property
    def lsb(self):
        """Real value of one raw step, ``2**-frac``."""
        return math.ldexp(1.0, -self.frac)

    @property
    def min_value(self):
        return self.decode(self.min_raw)

    @property
    def max_value(self):
        return self.decode(self.max_raw)

    @property
    def name(self):
        return f"fixed{self.width}.{self.frac}"

    def __str__(self):
        return self.name

    def to_json(self):
        return {"width": self.width, "frac": self.frac}

    @classmethod
    def from_json(cls, d):
        if not isinstance(d, dict) or set(d) - {"width", "frac"}:
            raise TensorError("fixed format", f"expected {{'width': int, 'frac': int}}, got {d!r}")
        return cls(d.get("width", 32), d.get("frac", 16))

    # ---- saturation -------------------------------------------------------------------------
    def saturate(self, x):
        lo = self._lo
        hi = self._hi
        return lo if x < lo else hi if x > hi else int(x)

    def saturate_array(self, x):
        return np.clip(np.asarray(x, dtype=np.int64), self.min_raw, self.max_raw)

    def fits(self, raw):
        """True when every raw value is in ``[min_raw, max_raw]``."""
        arr = np.asarray(raw)
        return bool(np.all((arr >= self.min_raw) & (arr <= self.max_raw)))

    # ---- conversion -------------------------------------------------------------------------
    def encode(self, x):
        """Real value(s) -> raw: round to nearest (ties to even), then saturate. NaN is an error.

        Scalars give a Python int, arrays an ``np.int64`` array of the same shape."""
        if isinstance(x, np.ndarray) or isinstance(x, (list, tuple)):
            arr = np.asarray(x, dtype=np.float64)
            if np.isnan(arr).any():
                raise TensorError("value", f"NaN cannot be encoded as {self.name}")
            with np.errstate(over="ignore", invalid="ignore"):
                scaled = np.rint(arr * float(self.one))
            return np.clip(scaled, self.min_raw, self.max_raw).astype(np.int64)
        x = float(x)
        if x != x:
            raise TensorError("value", f"NaN cannot be encoded as {self.name}")
        scaled = x * self.one
        if scaled >= self.max_raw:
            return self.max_raw
        if scaled <= self.min_raw:
            return self.min_raw
        return round(scaled)

    def encode_checked(self, x):
        """Like :meth:`encode`, but raise :class:`TensorError` when a value does not fit."""
        if isinstance(x, np.ndarray) or isinstance(x, (list, tuple)):
            arr = np.asarray(x, dtype=np.float64)
            with np.errstate(over="ignore", invalid="ignore"):
                scaled = np.rint(arr * float(self.one))
            bad = ~((scaled >= self.min_raw) & (scaled <= self.max_raw))
            if bad.any():
                v = arr[bad].flat[0] if arr.ndim else float(arr)
                raise TensorError("value", f"{v!r} does not fit {self.name} (range {self.min_value!r}.."
                                           f"{self.max_value!r})")
            return scaled.astype(np.int64)
        xf = float(x)
        if xf != xf or math.isinf(xf):
            raise TensorError("value", f"{xf!r} does not fit {self.name}")
        r = round(xf * self.one)
        if not self.min_raw <= r <= self.max_raw:
            raise TensorError("value", f"{x!r} does not fit {self.name} (range {self.min_value!r}.."
                                       f"{self.max_value!r})")
        return r

    def decode(self, raw):
        """Raw value(s) -> float64 (exact)."""
        if isinstance(raw, np.ndarray) or isinstance(raw, (list, tuple)):
            return np.asarray(raw, dtype=np.int64).astype(np.float64) / float(self.one)
        return int(raw) / self.one

    # ---- scalar ops (Python ints) -----------------------------------------------------------
    def add(self, a, b):
        r = a + b
        return self._lo if r < self._lo else self._hi if r > self._hi else int(r)

    def sub(self, a, b):
        r = a - b
        return self._lo if r < self._lo else self._hi if r > self._hi else int(r)

    def mul(self, a, b):
        r = (a * b + self._half) >> self.frac
        return self._lo if r < self._lo else self._hi if r > self._hi else int(r)

    def div(self, a, b):
        if b == 0:
            return self._hi if a >= 0 else self._lo
        n = a << self.frac
        q = abs(n) // abs(b)
        if (n < 0) != (b < 0):
            q = -q
        return self.saturate(q)

    def max(self, a, b):
        return a if a >= b else b

    def min(self, a, b):
        return a if a <= b else b

    def neg(self, a):
        return self.saturate(-a)

    def relu(self, a):
        return a if a > 0 else 0

    def exp(self, x):
        """Fixed-point ``e**x``. The integer algorithm (which the RTL copies), with
        ``G = EXP_GUARD_BITS``, ``p = frac + G`` and ``T = exp2_table(fmt, bits)``:

        1. ``y = (x * LOG2E_Q + 2**(LOG2E_BITS-G-1)) >> (LOG2E_BITS-G)``: ``x*log2(e)`` with ``p``
           fractional bits, rounded half up
        2. ``n = y >> p`` (floor: integer part), ``f = y & (2**p - 1)`` (fraction)
        3. ``k = min(bits, p)``, ``r = p - k``; ``i = f >> r``, ``t = f & (2**r - 1)``
        4. ``v = T[i] + (((T[i+1] - T[i]) * t + 2**(r-1)) >> r)`` (just ``T[i]`` if ``r == 0``):
           ``2**(f / 2**p)`` with ``p`` fractional bits
        5. ``s = n - G``; ``s >= 0``: ``v << s``, saturated to ``max_raw``; ``s < 0``:
           ``(v + 2**(-s-1)) >> -s`` (round half up; 0 once ``-s >= 62``), saturated to ``max_raw``.
        """
        return self._exp(x, EXP_TABLE_BITS)

    def _exp(self, x, bits):
        g = EXP_GUARD_BITS
        p = self.frac + g
        table = _exp2_table(self.width, self.frac, bits)
        y = (x * LOG2E_Q + (1 << (LOG2E_BITS - g - 1))) >> (LOG2E_BITS - g)
        n = y >> p
        f = y & ((1 << p) - 1)
        k = min(bits, p)
        r = p - k
        i = f >> r
        t0, d = interp_row(table, i)
        if r:
            t = f & ((1 << r) - 1)
            v = t0 + ((d * t + (1 << (r - 1))) >> r)
        else:
            v = t0
        s = n - g
        if s >= 0:
            if s >= self.width or v > (self.max_raw >> s):
                return self.max_raw
            return v << s
        s = -s
        if s >= 62:
            return 0
        return min((v + (1 << (s - 1))) >> s, self.max_raw)   # narrow formats: v itself may not fit

    # ---- element-wise functions (fuseflow/tensors/fixedfn.py) ----------------------------------
    def sigmoid(self, x):
        return FIXED_FUNCTIONS["sigmoid"](self, x)

    def tanh(self, x):
        return FIXED_FUNCTIONS["tanh"](self, x)

    def gelu(self, x):
        return FIXED_FUNCTIONS["gelu"](self, x)

    def sqrt(self, x):
        return FIXED_FUNCTIONS["sqrt"](self, x)

    def rsqrt(self, x):
        return FIXED_FUNCTIONS["rsqrt"](self, x)

    def log(self, x):
        return FIXED_FUNCTIONS["log"](self, x)

    def abs(self, x):
        return FIXED_FUNCTIONS["abs"](self, x)

    def square(self, x):
        return FIXED_FUNCTIONS["square"](self, x)

    def _function_array(self, name, x):
        f = FIXED_FUNCTIONS[name]
        x = _i64(x)
        return np.fromiter((f(self, int(v)) for v in x.ravel()), dtype=np.int64, count=x.size).reshape(x.shape)

    # ---- array ops (np.int64, bit-identical to the scalar ops) ------------------------------
    def add_array(self, a, b):
        return self.saturate_array(np.add(_i64(a), _i64(b)))

    def sub_array(self, a, b):
        return self.saturate_array(np.subtract(_i64(a), _i64(b)))

    def mul_array(self, a, b):
        f = self.frac
        p = np.multiply(_i64(a), _i64(b))
        if f:
            p = np.right_shift(p + (1 << (f - 1)), f)
        return self.saturate_array(p)

    def matmul_array(self, a, b):
        """Block product ``a @ b`` of raw values (a B x B block times a B x B block or a B-vector): every
        product ``a[i,k] * b[k,j]`` exact, summed exactly (wide: Python integers), then rounded ONCE as ``mul``
        rounds (``(s + 2**(frac-1)) >> frac``, round half up) and saturated. The golden model of the RTL's
        block multiplier."""
        s = np.asarray(_i64(a), dtype=object) @ np.asarray(_i64(b), dtype=object)
        half = self._half
        f = self.frac
        lo, hi = self._lo, self._hi
        flat = [min(max((int(v) + half) >> f, lo), hi) for v in np.ravel(s)]
        return np.asarray(flat, dtype=np.int64).reshape(np.shape(s))

    def row_reduce_array(self, op, block):
        """Each row of a B x B block of raw values reduced to one value (``reduce`` with ``rows``): ``op``
        ``sum`` adds the B elements exactly (wide) and saturates ONCE; ``max``/``min`` are exact. Returns the
        B-vector (np.int64). The golden model of the RTL's row reducer (any adder order gives the same)."""
        b = _i64(block)
        if op == "sum":
            return self.saturate_array(np.sum(b, axis=-1, dtype=np.int64))   # B*2**W fits int64 for B < 2**31
        if op == "max":
            return np.max(b, axis=-1)
        if op == "min":
            return np.min(b, axis=-1)
        raise TensorError("op", f"unknown row reduction {op!r} (known: sum, max, min)")

    def div_array(self, a, b):
        a = _i64(a)
        b = _i64(b)
        a, b = np.broadcast_arrays(a, b)
        zero = b == 0
        n = np.left_shift(a, self.frac)
        safe_b = np.where(zero, 1, b)
        q = np.abs(n) // np.abs(safe_b)
        q = np.where((n < 0) != (safe_b < 0), -q, q)
        q = self.saturate_array(q)
        return np.where(zero, np.where(a >= 0, self.max_raw, self.min_raw), q).astype(np.int64)

    def max_array(self, a, b):
        return np.maximum(_i64(a), _i64(b))

    def min_array(self, a, b):
        return np.minimum(_i64(a), _i64(b))

    def neg_array(self, a):
        return self.saturate_array(np.negative(_i64(a)))

    def relu_array(self, a):
        return np.maximum(_i64(a), 0)

    def exp_array(self, x):
        return self._exp_array(x, EXP_TABLE_BITS)

    def _exp_array(self, x, bits):
        g = EXP_GUARD_BITS
        p = self.frac + g
        table = np.asarray(_exp2_table(self.width, self.frac, bits), dtype=np.int64)
        x = _i64(x)
        y = np.right_shift(x * LOG2E_Q + (1 << (LOG2E_BITS - g - 1)), LOG2E_BITS - g)
        n = np.right_shift(y, p)
        f = np.bitwise_and(y, (1 << p) - 1)
        k = min(bits, p)
        r = p - k
        i = np.right_shift(f, r)
        t0 = table[i]
        if r:
            t = np.bitwise_and(f, (1 << r) - 1)
            v = t0 + np.right_shift((table[i + 1] - t0) * t + (1 << (r - 1)), r)
        else:
            v = t0
        s = n - g
        up_s = np.clip(s, 0, self.width)
        over = (s >= self.width) | (v > np.right_shift(self.max_raw, up_s))
        up = np.where(over, self.max_raw, np.left_shift(v, np.where(over, 0, up_s)))
        down_s = np.clip(-s, 1, 61)
        down = np.right_shift(v + np.left_shift(np.int64(1), down_s - 1), down_s)
        down = np.where(-s >= 62, 0, np.minimum(down, self.max_raw))
        out = np.where(s >= 0, up, down)
        return out.astype(np.int64).reshape(np.shape(x))

    def sigmoid_array(self, x):
        return self._function_array("sigmoid", x)

    def tanh_array(self, x):
        return self._function_array("tanh", x)

    def gelu_array(self, x):
        return self._function_array("gelu", x)

    def sqrt_array(self, x):
        return self._function_array("sqrt", x)

    def rsqrt_array(self, x):
        return self._function_array("rsqrt", x)

    def log_array(self, x):
        return self._function_array("log", x)

    def abs_array(self, x):
        return self._function_array("abs", x)

    def square_array(self, x):
        return self.mul_array(x, x)

    # ---- lookup by name ---------------------------------------------------------------------
    def binary(self, name):
        """Bound scalar op by name (``add``, ``sub``, ``mul``, ``div``, ``max``, ``min``)."""
        if name not in BINARY_OPS:
            raise TensorError("op", f"unknown binary op {name!r} (known: {', '.join(BINARY_OPS)})")
        return getattr(self, name)

    def unary(self, name):
        """Bound scalar op by name (``neg``, ``relu``, ``exp`` and the functions of :mod:`.fixedfn`)."""
        if name not in UNARY_OPS:
            raise TensorError("op", f"unknown unary op {name!r} (known: {', '.join(UNARY_OPS)})")
        return getattr(self, name)

    def binary_array(self, name):
        if name not in BINARY_OPS:
            raise TensorError("op", f"unknown binary op {name!r} (known: {', '.join(BINARY_OPS)})")
        return getattr(self, name + "_array")

    def unary_array(self, name):
        if name not in UNARY_OPS:
            raise TensorError("op", f"unknown unary op {name!r} (known: {', '.join(UNARY_OPS)})")
        return getattr(self, name + "_array")


def _i64(x):
    return np.asarray(x, dtype=np.int64)


DEFAULT_FORMAT = FixedFormat(32, 16)


# ---- module-level fixed ops: f(a, b, fmt=DEFAULT_FORMAT) --------------------------------------
def add(a, b, fmt=DEFAULT_FORMAT):
    return fmt.add(a, b)


def sub(a, b, fmt=DEFAULT_FORMAT):
    return fmt.sub(a, b)


def mul(a, b, fmt=DEFAULT_FORMAT):
    return fmt.mul(a, b)


def div(a, b, fmt=DEFAULT_FORMAT):
    return fmt.div(a, b)


def max_(a, b, fmt=DEFAULT_FORMAT):
    return fmt.max(a, b)


def min_(a, b, fmt=DEFAULT_FORMAT):
    return fmt.min(a, b)


def neg(a, fmt=DEFAULT_FORMAT):
    return fmt.neg(a)


def relu(a, fmt=DEFAULT_FORMAT):
    return fmt.relu(a)


def exp(a, fmt=DEFAULT_FORMAT):
    return fmt.exp(a)


def encode(x, fmt=DEFAULT_FORMAT):
    return fmt.encode(x)


def encode_checked(x, fmt=DEFAULT_FORMAT):
    return fmt.encode_checked(x)


def decode(raw, fmt=DEFAULT_FORMAT):
    return fmt.decode(raw)


def _array_op(name):
    def op(*args, fmt=DEFAULT_FORMAT):
        return getattr(fmt, name + "_array")(*args)
    op.__name__ = name + "_array"
    op.__doc__ = f"Vectorised :meth:`FixedFormat.{name}` (bit-identical)."
    return op


add_array = _array_op("add")
sub_array = _array_op("sub")
mul_array = _array_op("mul")
div_array = _array_op("div")
max_array = _array_op("max")
min_array = _array_op("min")
neg_array = _array_op("neg")
relu_array = _array_op("relu")
exp_array = _array_op("exp")


def _function_op(name):
    def op(a, fmt=DEFAULT_FORMAT):
        return FIXED_FUNCTIONS[name](fmt, a)
    op.__name__ = name
    op.__doc__ = f"Fixed-point ``{name}`` (:mod:`fuseflow.tensors.fixedfn`)."
    return op

#: fixed-point scalar ops by name; call as ``BINARY_OPS[name](a, b, fmt)``
BINARY_OPS = {"add": add, "sub": sub, "mul": mul, "div": div, "max": max_, "min": min_}
#: fixed-point scalar ops by name; call as ``UNARY_OPS[name](a, fmt)``
UNARY_OPS = {"neg": neg, "relu": relu, "exp": exp, **{n: _function_op(n) for n in FUNCTIONS}}
#: vectorised fixed-point ops by name; call as ``BINARY_ARRAY_OPS[name](a, b, fmt=fmt)``
BINARY_ARRAY_OPS = {"add": add_array, "sub": sub_array, "mul": mul_array, "div": div_array,
                    "max": max_array, "min": min_array}
UNARY_ARRAY_OPS = {"neg": neg_array, "relu": relu_array, "exp": exp_array,
                   **{n: _array_op(n) for n in FUNCTIONS}}


# ---- float64 reference semantics (NumPy's, with floating-point warnings ignored) --------------
def fadd(a, b):
    return a + b


def fsub(a, b):
    return a - b


def fmul(a, b):
    return a * b


def fdiv(a, b):
    """``a / b`` as NumPy computes it: ``x/0`` is ``±inf`` (sign of x times sign of the zero), ``0/0`` NaN."""
    a = float(a)
    b = float(b)
    if b == 0.0:
        if a == 0.0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def fmax(a, b):
    """``np.maximum``: NaN propagates."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


def fmin(a, b):
    """``np.minimum``: NaN propagates."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


def fneg(a):
    return -a


def frelu(a):
    """``np.maximum(a, 0.0)``."""
    return fmax(a, 0.0)


_EXP_OVERFLOW = 709.782712893384  # ln(max float64): above it np.exp overflows to inf


def fexp(a):
    """``np.exp`` (the same routine, so bit-identical to the vectorised op): overflow gives ``inf``."""
    if a > _EXP_OVERFLOW:
        return math.inf
    return float(np.exp(a))


FLOAT_BINARY_OPS = {"add": fadd, "sub": fsub, "mul": fmul, "div": fdiv, "max": fmax, "min": fmin}
def _float_function(name):
    arr = FLOAT_FUNCTION_ARRAYS[name]

    def op(a):
        with np.errstate(all="ignore"):
            return float(arr(np.float64(a)))
    op.__name__ = "f" + name
    op.__doc__ = f"float64 ``{name}``: the vectorised NumPy routine on one value (bit-identical to it)."
    return op


FLOAT_UNARY_OPS = {"neg": fneg, "relu": frelu, "exp": fexp, **{n: _float_function(n) for n in FUNCTIONS}}


def _ignore(fn):
    @functools.wraps(fn)
    def op(*args):
        with np.errstate(all="ignore"):
            return fn(*(np.asarray(a, dtype=np.float64) for a in args))
    return op


FLOAT_BINARY_ARRAY_OPS = {
    "add": _ignore(np.add), "sub": _ignore(np.subtract), "mul": _ignore(np.multiply),
    "div": _ignore(np.divide), "max": _ignore(np.maximum), "min": _ignore(np.minimum),
}
FLOAT_UNARY_ARRAY_OPS = {
    "neg": _ignore(np.negative), "relu": _ignore(lambda a: np.maximum(a, 0.0)), "exp": _ignore(np.exp),
    **{n: _ignore(FLOAT_FUNCTION_ARRAYS[n]) for n in FUNCTIONS},
}


def binary_op(name, mode="float", fmt=None, vectorised=False):
    """A two-argument callable for op ``name`` in ``mode`` ``"float"`` or ``"fixed"``."""
    table = FLOAT_BINARY_ARRAY_OPS if vectorised else FLOAT_BINARY_OPS
    if name not in table:
        raise TensorError("op", f"unknown binary op {name!r} (known: {', '.join(table)})")
    if mode == "float":
        return table[name]
    if mode == "fixed":
        fmt = fmt or DEFAULT_FORMAT
        return fmt.binary_array(name) if vectorised else fmt.binary(name)
    raise TensorError("mode", f"unknown number mode {mode!r} (expected 'float' or 'fixed')")


def unary_op(name, mode="float", fmt=None, vectorised=False):
    """A one-argument callable for op ``name`` in ``mode`` ``"float"`` or ``"fixed"``."""
    table = FLOAT_UNARY_ARRAY_OPS if vectorised else FLOAT_UNARY_OPS
    if name not in table:
        raise TensorError("op", f"unknown unary op {name!r} (known: {', '.join(table)})")
    if mode == "float":
        return table[name]
    if mode == "fixed":
        fmt = fmt or DEFAULT_FORMAT
        return fmt.unary_array(name) if vectorised else fmt.unary(name)
    raise TensorError("mode", f"unknown number mode {mode!r} (expected 'float' or 'fixed')")


_ROW_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def float_row_reduce(op, block):
    """Float mode's row reduction of a block (``reduce`` with ``rows``): each row reduced LEFT TO RIGHT,
    ``acc = row[0]; acc = op(acc, row[c])`` for c = 1 .. B-1 (``np.<ufunc>.accumulate``, whose order is
    defined), so the result does not depend on NumPy's summation strategy and C++ computes the same bits
    (``Env::row_reduce``). ``max``/``min`` are ``np.maximum``/``np.minimum`` (NaN propagates). A NaN result is
    :data:`numpy.nan` (see :func:`canonical_nan`)."""
    with np.errstate(all="ignore"):
        return canonical_nan(_ROW_UFUNCS[op].accumulate(np.asarray(block, dtype=np.float64), axis=-1)[..., -1])


def canonical_nan(x):
    """``x`` (a float64 array, changed in place) with every NaN replaced by :data:`numpy.nan` (the positive quiet
    NaN). Which NaN an add or multiply of two NaNs keeps (sign, payload) depends on the operand order the
    compiled loop happens to use; block products and row reductions promise the value, not that NaN's bits."""
    nan = x != x
    if nan.any():
        x[nan] = np.nan
    return x


def float_matmul(a, b):
    """Float mode's block product ``a @ b`` (``block_matmul``; ``a`` B x B, ``b`` B x B or a B-vector) with a
    DEFINED summation order: element (i, j) is ``a[i,0]*b[0,j] + a[i,1]*b[1,j] + ...`` added left to right,
    every product and every sum rounded on its own (no fused multiply-add). NumPy's ``@`` goes through BLAS,
    whose order (blocking, FMA) is not defined; this order is, so the compiled engine computes the same bits
    natively (``Env::matmul``, built with ``-ffp-contract=off``). A NaN result is :data:`numpy.nan`
    (:func:`canonical_nan`)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(all="ignore"):
        if b.ndim == 1:                                   # products (i, k), summed along k
            return canonical_nan(np.add.accumulate(a * b, axis=-1)[:, -1])
        n = a.shape[1]
        if n <= 16:                                       # products (i, k, j), summed along k: few NumPy calls
            return canonical_nan(np.add.accumulate(a[:, :, None] * b[None, :, :], axis=1)[:, -1, :])
        acc = a[:, 0:1] * b[0:1, :]                       # large blocks: one k at a time, vectorised over (i, j)
        prod = np.empty_like(acc)
        for k in range(1, n):
            np.multiply(a[:, k:k + 1], b[k:k + 1, :], out=prod)
            np.add(acc, prod, out=acc)
        return canonical_nan(acc)


def row_reduce_op(op, mode="float", fmt=None):
    """A block's rows reduced to a B-vector (``reduce`` with ``rows``; ``op`` sum, max or min):
    :func:`float_row_reduce` (left to right) in float mode, :meth:`FixedFormat.row_reduce_array` in fixed mode."""
    if op not in ("sum", "max", "min"):
        raise TensorError("op", f"unknown row reduction {op!r} (known: sum, max, min)")
    if mode == "float":
        return lambda b: float_row_reduce(op, b)
    if mode == "fixed":
        f = fmt or DEFAULT_FORMAT
        return lambda b: f.row_reduce_array(op, b)
    raise TensorError("mode", f"unknown number mode {mode!r} (expected 'float' or 'fixed')")


def matmul_op(mode="float", fmt=None):
    """The block product ``a @ b`` (``block_matmul``): :func:`float_matmul` (summed in k order) in float mode,
    :meth:`FixedFormat.matmul_array` in fixed mode."""
    if mode == "float":
        return float_matmul
    if mode == "fixed":
        return (fmt or DEFAULT_FORMAT).matmul_array
    raise TensorError("mode", f"unknown number mode {mode!r} (expected 'float' or 'fixed')")
