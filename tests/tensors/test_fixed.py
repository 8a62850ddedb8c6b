import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.errors import TensorError
from fuseflow.tensors import fixed
from fuseflow.tensors.fixed import (
    BINARY_ARRAY_OPS,
    BINARY_OPS,
    DEFAULT_FORMAT,
    FLOAT_BINARY_ARRAY_OPS,
    FLOAT_BINARY_OPS,
    FLOAT_UNARY_ARRAY_OPS,
    FLOAT_UNARY_OPS,
    UNARY_ARRAY_OPS,
    UNARY_OPS,
    FixedFormat,
    exp2_table,
)

FORMATS = [FixedFormat(), FixedFormat(16, 8), FixedFormat(8, 4), FixedFormat(32, 30), FixedFormat(12, 0),
           FixedFormat(24, 12)]


def clamp(fmt, v):
    return max(fmt.min_raw, min(fmt.max_raw, v))


# ---- exact references (rational arithmetic, then the documented rounding) --------------------
def ref_encode(fmt, x):
    return clamp(fmt, round(Fraction(x) * fmt.one))  # round(Fraction) is ties-to-even


def ref_mul(fmt, a, b):
    q = Fraction(a * b, fmt.one)
    return clamp(fmt, math.floor(q + Fraction(1, 2)))  # round half up


def ref_div(fmt, a, b):
    if b == 0:
        return fmt.max_raw if a >= 0 else fmt.min_raw
    return clamp(fmt, int(Fraction(a * fmt.one, b)))  # int() truncates toward zero


@st.composite
def fmt_and_raws(draw, n=2):
    fmt = draw(st.sampled_from(FORMATS))
    raw = st.integers(fmt.min_raw, fmt.max_raw)
    edge = st.sampled_from([fmt.min_raw, fmt.min_raw + 1, -1, 0, 1, fmt.one, -fmt.one, fmt.max_raw])
    return (fmt,) + tuple(draw(st.one_of(raw, edge)) for _ in range(n))


def test_constants():
    f = FixedFormat()
    assert (f.width, f.frac) == (32, 16)
    assert f.min_raw == -2 ** 31 and f.max_raw == 2 ** 31 - 1 and f.one == 65536
    assert f.lsb == 2.0 ** -16
    assert f.max_value == (2 ** 31 - 1) / 65536
    assert DEFAULT_FORMAT == f
    assert FixedFormat.from_json(f.to_json()) == f
    assert str(FixedFormat(16, 8)) == "fixed16.8"


@pytest.mark.parametrize("width, frac", [(1, 0), (33, 16), (16, 15), (16, -1), (16.0, 8), (True, 0)])
def test_bad_formats(width, frac):
    with pytest.raises(TensorError):
        FixedFormat(width, frac)


def test_bad_json():
    with pytest.raises(TensorError):
        FixedFormat.from_json({"width": 16, "bits": 3})


# ---- encode / decode -------------------------------------------------------------------------
def test_encode_examples():
    f = FixedFormat(16, 8)
    assert f.encode(1.0) == 256
    assert f.encode(-1.5) == -384
    assert f.encode(0.5 / 256) == 0           # tie -> even (0)
    assert f.encode(1.5 / 256) == 2           # tie -> even (2)
    assert f.encode(-1.5 / 256) == -2
    assert f.encode(1e9) == f.max_raw and f.encode(-1e9) == f.min_raw
    assert f.encode(math.inf) == f.max_raw and f.encode(-math.inf) == f.min_raw
    assert isinstance(f.encode(1.0), int)
    arr = f.encode(np.array([1.0, 1e9, -1e9, 0.5 / 256]))
    assert arr.dtype == np.int64 and arr.tolist() == [256, f.max_raw, f.min_raw, 0]
    assert f.encode([[1.0]]).shape == (1, 1)
    with pytest.raises(TensorError):
        f.encode(math.nan)
    with pytest.raises(TensorError):
        f.encode(np.array([1.0, np.nan]))


def test_encode_checked():
    f = FixedFormat(16, 8)
    assert f.encode_checked(1.0) == 256
    assert f.encode_checked(np.array([1.0, -2.0])).tolist() == [256, -512]
    assert f.encode_checked(f.max_value) == f.max_raw
    for bad in (200.0, -200.0, math.inf, math.nan):
        with pytest.raises(TensorError):
            f.encode_checked(bad)
        with pytest.raises(TensorError):
            f.encode_checked(np.array([0.0, bad]))
    with pytest.raises(TensorError):
        f.encode_checked(np.float64(128.0))
    assert f.encode_checked(-128.0) == f.min_raw


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FORMATS), st.floats(allow_nan=False, width=64))
def test_encode_matches_exact_rounding(fmt, x):
    if math.isinf(x):
        expected = fmt.max_raw if x > 0 else fmt.min_raw
    else:
        expected = ref_encode(fmt, x)
    assert fmt.encode(x) == expected
    assert fmt.encode(np.array([x])).tolist() == [expected]


@settings(max_examples=200, deadline=None)
@given(fmt_and_raws(1))
def test_decode_is_exact_inverse(case):
    fmt, a = case
    x = fmt.decode(a)
    assert isinstance(x, float)
    assert Fraction(x) == Fraction(a, fmt.one)
    assert fmt.encode(x) == a
    assert fmt.decode(np.array([a])).tolist() == [x]


# ---- scalar ops against exact arithmetic -----------------------------------------------------
@settings(max_examples=400, deadline=None)
@given(fmt_and_raws(2))
def test_binary_ops_exact(case):
    fmt, a, b = case
    assert fmt.add(a, b) == clamp(fmt, a + b)
    assert fmt.sub(a, b) == clamp(fmt, a - b)
    assert fmt.mul(a, b) == ref_mul(fmt, a, b)
    assert fmt.div(a, b) == ref_div(fmt, a, b)
    assert fmt.max(a, b) == max(a, b)
    assert fmt.min(a, b) == min(a, b)


@settings(max_examples=200, deadline=None)
@given(fmt_and_raws(1))
def test_unary_ops_exact(case):
    fmt, a = case
    assert fmt.neg(a) == clamp(fmt, -a)
    assert fmt.relu(a) == max(a, 0)


def test_op_edge_cases():
    f = FixedFormat()
    assert f.neg(f.min_raw) == f.max_raw
    assert f.add(f.max_raw, 1) == f.max_raw and f.sub(f.min_raw, 1) == f.min_raw
    assert f.div(5, 0) == f.max_raw and f.div(0, 0) == f.max_raw and f.div(-5, 0) == f.min_raw
    assert f.div(f.one, 3 * f.one) == 21845               # 1/3 truncated
    assert f.div(-f.one, 3 * f.one) == -21845             # toward zero, not floor
    assert f.mul(f.one, f.one) == f.one
    assert f.mul(1, 1 << 15) == 1                         # 0.5 LSB rounds up
    assert f.mul(-1, 1 << 15) == 0                        # -0.5 LSB rounds up (to 0)
    assert f.mul(f.max_raw, f.max_raw) == f.max_raw
    assert f.mul(f.min_raw, f.max_raw) == f.min_raw
    assert f.relu(-5) == 0 and f.relu(7) == 7


# ---- vectorised == scalar --------------------------------------------------------------------
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(FORMATS), st.data())
def test_array_ops_bit_identical(fmt, data):
    raw = st.one_of(st.integers(fmt.min_raw, fmt.max_raw),
                    st.sampled_from([fmt.min_raw, -1, 0, 1, fmt.max_raw, fmt.one]))
    xs = data.draw(st.lists(raw, min_size=1, max_size=20))
    ys = data.draw(st.lists(raw, min_size=len(xs), max_size=len(xs)))
    a = np.array(xs, dtype=np.int64)
    b = np.array(ys, dtype=np.int64)
    for name in BINARY_OPS:
        got = fmt.binary_array(name)(a, b)
        assert got.dtype == np.int64
        assert got.tolist() == [fmt.binary(name)(x, y) for x, y in zip(xs, ys)], name
        assert BINARY_ARRAY_OPS[name](a, b, fmt=fmt).tolist() == got.tolist()
        assert [BINARY_OPS[name](x, y, fmt) for x, y in zip(xs, ys)] == got.tolist()
    for name in UNARY_OPS:
        got = fmt.unary_array(name)(a)
        assert got.dtype == np.int64
        assert got.tolist() == [fmt.unary(name)(x) for x in xs], name
        assert UNARY_ARRAY_OPS[name](a, fmt=fmt).tolist() == got.tolist()
        assert [UNARY_OPS[name](x, fmt) for x in xs] == got.tolist()


def test_array_ops_keep_shape_and_broadcast():
    f = FixedFormat()
    a = np.arange(6, dtype=np.int64).reshape(2, 3) * f.one
    assert f.mul_array(a, f.one).shape == (2, 3)
    assert f.div_array(a, np.array([0, 1, 2]) * f.one).shape == (2, 3)
    assert f.exp_array(a).shape == (2, 3)


# ---- exp -------------------------------------------------------------------------------------
def test_exp2_table_is_the_documented_table():
    for fmt in FORMATS:
        table = exp2_table(fmt)
        p = fmt.frac + fixed.EXP_GUARD_BITS
        k = min(8, p)
        assert len(table) == 2 ** k + 1
        expected = np.rint(np.exp2(np.arange(2 ** k + 1) / 2 ** k) * 2.0 ** p).astype(np.int64)
        assert table == expected.tolist()
        assert table[0] == 2 ** p and table[-1] == 2 ** (p + 1)
    assert exp2_table() == exp2_table(DEFAULT_FORMAT, 8)
    assert len(exp2_table(DEFAULT_FORMAT, 4)) == 17


def test_exp_error_bound_on_minus8_to_8():
    """|exp_fixed(x) - e**x| <= 0.5 LSB + 1.5e-6 * e**x for every raw x in [-8, 8] (default format);
    the measured maximum relative error is documented in docs/numbers.md."""
    f = FixedFormat()
    xs = np.arange(f.encode(-8.0), f.encode(8.0) + 1, dtype=np.int64)
    got = f.decode(f.exp_array(xs))
    exact = np.exp(f.decode(xs))
    err = np.abs(got - exact)
    assert np.all(err <= 0.5 * f.lsb + 1.5e-6 * exact)
    rel = err / exact
    assert rel.max() < 0.025                      # at x = -8 the result is only ~22 LSB
    assert rel[exact >= 1.0].max() < 1e-5
    # spot-check the scalar algorithm on the same grid
    rng = np.random.default_rng(0)
    for x in rng.choice(xs, 3000).tolist() + [int(xs[0]), int(xs[-1]), 0]:
        assert f.decode(f.exp(x)) == got[x - xs[0]]


def test_exp_monotone_and_saturating():
    f = FixedFormat()
    xs = np.arange(f.encode(-12.0), f.encode(11.0), 7, dtype=np.int64)
    ys = f.exp_array(xs)
    assert np.all(np.diff(ys) >= 0)
    assert f.exp(0) == f.one
    assert f.exp(f.max_raw) == f.max_raw
    assert f.exp(f.encode(11.0)) == f.max_raw        # e**11 > 32768
    assert f.exp(f.min_raw) == 0
    assert f.exp(f.encode(-20.0)) == 0


@settings(max_examples=200, deadline=None)
@given(fmt_and_raws(1))
def test_exp_all_formats_close_to_float(case):
    fmt, a = case
    got = fmt.exp(a)
    assert fmt.exp_array(np.array([a])).tolist() == [got]
    x = fmt.decode(a)
    exact = math.exp(x) if x < 700 else math.inf
    if exact >= fmt.max_value:
        assert got == fmt.max_raw or abs(fmt.decode(got) - exact) <= fmt.lsb + 1e-5 * exact
    else:
        # coarse formats lose accuracy in y = x*log2(e) (frac + 8 bits) and the 2**k table
        tol = fmt.lsb + exact * (2.0 ** -(fmt.frac + 6) * max(1.0, abs(x)) + 2e-5)
        assert abs(fmt.decode(got) - exact) <= tol


# ---- documented fixed-vs-float tolerance -----------------------------------------------------
def test_dot_product_tolerance():
    """docs/numbers.md: a sum of n products of operands with |x| <= M stays within
    n * (M + 1) * 2**-frac of the float64 result (when nothing saturates)."""
    rng = np.random.default_rng(1)
    f = FixedFormat()
    for n, m in [(1, 1.0), (16, 4.0), (64, 1.0), (256, 2.0), (1000, 0.5)]:
        for _ in range(20):
            a = rng.uniform(-m, m, n)
            b = rng.uniform(-m, m, n)
            acc = 0
            for p in f.mul_array(f.encode(a), f.encode(b)).tolist():
                acc = f.add(acc, p)
            exact = float(np.dot(a, b))
            assert abs(f.decode(acc) - exact) <= n * (m + 1) * f.lsb


# ---- float ops -------------------------------------------------------------------------------
def _same(x, y):
    x = np.float64(x)
    y = np.float64(y)
    return (np.isnan(x) and np.isnan(y)) or x == y


SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.5, math.inf, -math.inf, math.nan, 1e308, -1e-308, 710.0]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.floats(), st.sampled_from(SPECIAL)), st.one_of(st.floats(), st.sampled_from(SPECIAL)))
def test_float_scalar_ops_follow_numpy(a, b):
    for name, op in FLOAT_BINARY_OPS.items():
        ref = FLOAT_BINARY_ARRAY_OPS[name](np.array([a]), np.array([b]))[0]
        assert _same(op(a, b), ref), (name, a, b, op(a, b), ref)
    for name, op in FLOAT_UNARY_OPS.items():
        ref = FLOAT_UNARY_ARRAY_OPS[name](np.array([a]))[0]
        assert _same(op(a), ref), (name, a, op(a), ref)


def test_float_ops_reference_semantics():
    assert FLOAT_BINARY_OPS["div"](1.0, 0.0) == math.inf
    assert FLOAT_BINARY_OPS["div"](-1.0, 0.0) == -math.inf
    assert FLOAT_BINARY_OPS["div"](1.0, -0.0) == -math.inf
    assert math.isnan(FLOAT_BINARY_OPS["div"](0.0, 0.0))
    assert math.isnan(FLOAT_BINARY_OPS["max"](math.nan, 1.0))
    assert math.isnan(FLOAT_BINARY_OPS["min"](1.0, math.nan))
    assert FLOAT_UNARY_OPS["exp"](1000.0) == math.inf
    assert FLOAT_UNARY_OPS["relu"](-3.0) == 0.0
    with np.errstate(all="raise"):
        FLOAT_BINARY_ARRAY_OPS["div"](np.array([1.0, 0.0]), np.array([0.0, 0.0]))
        FLOAT_UNARY_ARRAY_OPS["exp"](np.array([1000.0]))


def test_op_tables_agree_and_lookup():
    assert set(BINARY_OPS) == set(FLOAT_BINARY_OPS) == set(BINARY_ARRAY_OPS) == set(FLOAT_BINARY_ARRAY_OPS)
    assert set(UNARY_OPS) == set(FLOAT_UNARY_OPS) == set(UNARY_ARRAY_OPS) == set(FLOAT_UNARY_ARRAY_OPS)
    assert {"add", "sub", "mul", "div", "max", "min"} <= set(BINARY_OPS)
    assert {"neg", "relu", "exp"} <= set(UNARY_OPS)
    f = FixedFormat(16, 8)
    assert fixed.binary_op("mul", "fixed", f)(512, 512) == 1024
    assert fixed.binary_op("mul", "float")(2.0, 2.0) == 4.0
    assert fixed.unary_op("exp", "fixed", f, vectorised=True)(np.array([0])).tolist() == [256]
    assert fixed.unary_op("neg", "float", vectorised=True)(np.array([1.0])).tolist() == [-1.0]
    assert fixed.binary_op("add", "fixed")(1, 2) == 3
    for bad in (lambda: fixed.binary_op("pow"), lambda: fixed.unary_op("sin", "fixed"),
                lambda: fixed.binary_op("add", "double"), lambda: f.binary("exp"),
                lambda: f.unary("add"), lambda: f.binary_array("x"), lambda: f.unary_array("y")):
        with pytest.raises(TensorError):
            bad()


def test_module_level_helpers():
    assert fixed.encode(1.0) == 65536 and fixed.decode(65536) == 1.0
    assert fixed.encode_checked(0.5) == 32768
    assert fixed.mul(65536, 65536) == 65536
    assert fixed.div(65536, 2 * 65536) == 32768
    assert fixed.relu(-1) == 0 and fixed.neg(5) == -5 and fixed.exp(0) == 65536
    assert fixed.mul_array(np.array([65536]), np.array([3 * 65536])).tolist() == [3 * 65536]


def test_exp_saturates_in_narrow_formats():
    """e**5 = 148.4 does not fit 16/8 (max 127.996): the result saturates instead of wrapping past max_raw."""
    fmt = FixedFormat(16, 8)
    x = fmt.encode(5.0)
    assert fmt.exp(x) == fmt.max_raw
    assert fmt.exp_array(np.array([x]))[0] == fmt.max_raw
    xs = np.arange(fmt.min_raw, fmt.max_raw + 1, 97, dtype=np.int64)
    out = fmt.exp_array(xs)
    assert out.max() <= fmt.max_raw and out.min() >= 0
