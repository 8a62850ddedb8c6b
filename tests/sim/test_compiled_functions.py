"""The compiled engine's unary alu functions against the Python engine's, bit for bit.

Fixed mode: every function is native in C++ (csrc/functions.cpp, the tables bound by compiled.fixed_tables);
float mode: sqrt, rsqrt, abs and square are native, and exp, sigmoid, tanh, log and gelu too when
compiled.float_loops bound NumPy's/SciPy's own float64 loops (functions.cpp says why; otherwise they call back
into Python). benchmarks/float_loops_check.py runs the float comparison on 10 million values per function. ``_engine.unary`` applies the compiled Env's op (bound by compiled.bind_env, as run_kernel binds it) to a
whole array; the reference is the Python engine's Env.unary, one value at a time.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fuseflow.errors import GraphError
from fuseflow.samml.registry import UNARY_ALU_OPS
from fuseflow.sim import compiled
from fuseflow.sim.engine import Env, run_op
from fuseflow.tensors.fixed import FLOAT_UNARY_ARRAY_OPS, FixedFormat
from fuseflow.tensors.fixedfn import FN_RANGE_LOG2

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")

FUNCTIONS = tuple(n for n in UNARY_ALU_OPS if n not in ("neg", "relu"))
FORMATS = [FixedFormat(32, 16), FixedFormat(16, 8), FixedFormat(24, 12)]
NATIVE_FLOAT = {"neg", "relu", "sqrt", "rsqrt", "abs", "square"}
LOOPS = {"exp", "log", "tanh", "erf"}


def _engine():
    return compiled._engine


def fixed_inputs(fmt, n=200_000, seed=0):
    """Every raw value when the format has at most ``n``; otherwise about ``n`` of them: every value of a window
    around 0 (all the table segments near 0, exhaustively), values evenly spread over the whole format, random
    values with |x| < 2**(FN_RANGE_LOG2 + 2) (the tables' range and beyond), the ends and the table bounds."""
    lo, hi = fmt.min_raw, fmt.max_raw
    if hi - lo + 1 <= n:
        return np.arange(lo, hi + 1, dtype=np.int64)
    rng = np.random.default_rng(seed)
    q = n // 4
    bound = 1 << (fmt.frac + FN_RANGE_LOG2)
    edges = [lo, lo + 1, lo + 2, -2, -1, 0, 1, 2, hi - 2, hi - 1, hi]
    for b in (bound, 2 * bound, fmt.one, 1 << (fmt.width - 2)):
        edges += [b - 1, b, b + 1, -b - 1, -b, -b + 1]
    xs = np.concatenate([np.arange(-q // 2, q // 2), np.linspace(lo, hi, q).astype(np.int64),
                         rng.integers(lo, hi, q, endpoint=True),
                         rng.integers(-4 * bound, 4 * bound, q, endpoint=True), edges])
    return np.clip(xs, lo, hi).astype(np.int64)


def float_inputs(n, seed=0):
    """Random bit patterns (every exponent, subnormals, NaNs with payloads), values over wide and narrow ranges,
    and the edges: +-0, +-inf, NaN, the extremes, exp's overflow and underflow, tanh's saturation."""
    rng = np.random.default_rng(seed)
    k = n // 8
    sub = rng.integers(1, 1 << 52, k // 2, dtype=np.uint64).view(np.float64)
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 2.2250738585072014e-308,
                      1.7976931348623157e308, -1.7976931348623157e308, 709.782712893384, 709.7827128933841,
                      -745.1332191019412, -708.3964185322641, 19.06154746539849, -19.06154746539849, 1e-8, 1.0])
    with np.errstate(all="ignore"):
        edges = np.concatenate([edges, np.nextafter(edges, np.inf), np.nextafter(edges, -np.inf)])
    return np.concatenate([
        rng.integers(0, 1 << 64, 2 * k, dtype=np.uint64).view(np.float64),
        rng.uniform(-1, 1, k), rng.uniform(-40, 40, k), rng.uniform(-750, 750, k), rng.normal(0, 1e150, k),
        sub, -sub, rng.uniform(0, 1e-300, k // 2), edges, np.arange(-800, 800, 0.25)])


def _bits(a):
    return np.asarray(a, dtype=np.float64).view(np.int64)


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_fixed_functions_bit_identical(fmt):
    env = Env("fixed", fmt)
    cenv = compiled.bind_env(env)
    xs = fixed_inputs(fmt, 200_000 if fmt == FixedFormat() else 80_000)
    for name in FUNCTIONS:
        got = _engine().unary(name, cenv, xs)
        ref = env.unary[name]
        want = np.fromiter((ref(int(v)) for v in xs), dtype=np.int64, count=xs.size)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"{fmt} {name}: {bad.size} of {xs.size} differ, e.g. x={xs[bad[0]]}: "
                               f"compiled {got[bad[0]]}, python {want[bad[0]]}")


def test_fixed_functions_every_format():
    """A few hundred values in every format (widths 2..32, every frac): the tables of every shape."""
    rng = np.random.default_rng(1)
    for w in range(2, 33):
        for f in range(0, w - 1):
            fmt = FixedFormat(w, f)
            env = Env("fixed", fmt)
            cenv = compiled.bind_env(env)
            lo, hi = fmt.min_raw, fmt.max_raw
            xs = np.unique(np.clip(np.concatenate([rng.integers(lo, hi, 40, endpoint=True), np.arange(-6, 7),
                                                   [lo, lo + 1, hi - 1, hi]]), lo, hi)).astype(np.int64)
            for name in FUNCTIONS:
                got = _engine().unary(name, cenv, xs).tolist()
                want = [env.unary[name](int(v)) for v in xs]
                assert got == want, f"{fmt} {name}"


def test_float_functions_bit_identical():
    env = Env("float")
    cenv = compiled.bind_env(env)
    big = float_inputs(800_000)
    for name in FUNCTIONS:
        native = name in compiled.native_unary("float")
        xs = big if native else big[::40]                  # callbacks: the Python function itself, fewer values
        got = _engine().unary(name, cenv, xs)
        ref = env.unary[name]                              # the Python engine's: NumPy's routine on one value
        few = xs[:: max(1, xs.size // 20_000)]
        want = np.array([ref(float(v)) for v in few])
        assert np.array_equal(_bits(got[:: max(1, xs.size // 20_000)]), _bits(want)), name
        if native:                                         # all of them: the vectorised routine (= the scalar one,
            with np.errstate(all="ignore"):                # but for NaN payloads through gelu: rechecked on ref)
                want_all = FLOAT_UNARY_ARRAY_OPS[name](xs)
            bad = np.flatnonzero(_bits(got) != _bits(want_all))
            assert np.isnan(xs[bad]).all(), f"{name}: {bad.size} differ, e.g. x={xs[bad[0]]!r}"
            bad = bad[_bits(got[bad]) != _bits(np.array([ref(float(v)) for v in xs[bad]]))]
            assert bad.size == 0, f"{name}: {bad.size} differ, e.g. x={xs[bad[0]]!r}"


def test_float_loops_bound():
    """On CPython every loop is read from its ufunc and passes the probe check (the functions are native)."""
    if os.environ.get("FUSEFLOW_NO_NATIVE_FLOAT"):
        assert compiled.float_loops() == {}
        return
    assert set(compiled.float_loops()) == LOOPS
    assert compiled.native_unary("float") == NATIVE_FLOAT | set(compiled.LOOP_FUNCTIONS)
    assert set(compiled.bind_env(Env("float"))["loops"]) == LOOPS


def test_float_loop_check_rejects_a_wrong_loop():
    """The probe check (compiled.loop_passes) turns down a loop that is not the reference's: exp's loop as log,
    float32 exp as float64 exp."""
    loops = compiled.float_loops()
    if "exp" not in loops:
        pytest.skip("no float loops bound")
    assert compiled.loop_passes("exp", loops["exp"])
    assert not compiled.loop_passes("log", loops["exp"])
    assert not compiled.loop_passes("tanh", loops["exp"])
    ufunc_f = compiled._ufunc_loop(np.exp)
    assert ufunc_f == loops["exp"]
    assert compiled._ufunc_loop(np.add) is None            # two inputs: not a d->d loop
    assert compiled._ufunc_loop(len) is None


@pytest.mark.parametrize("mode", ["fixed", "float"])
def test_alu_functions_on_both_engines(mode):
    """Through the alu of run_op (run_kernel's binding) on both engines, with stops and N in the stream."""
    rng = np.random.default_rng(2)
    if mode == "fixed":
        fmt = FixedFormat()
        vals = [int(v) for v in rng.integers(fmt.min_raw, fmt.max_raw, 1500, endpoint=True)]
        vals += [int(v) for v in rng.integers(-20 * fmt.one, 20 * fmt.one, 1500)] + [0, 1, -1, fmt.max_raw, fmt.min_raw]
    else:
        vals = [float(v) for v in float_inputs(3000, seed=3)[::3]] + [3, -7, 0]      # ints too: converted
    toks = vals[:100] + ["N", "S0"] + vals[100:] + ["S1", "D"]
    for name in FUNCTIONS:
        a = run_op("alu", {"op": name}, {"a": toks}, mode=mode, engine="compiled")["out"]
        b = run_op("alu", {"op": name}, {"a": toks}, mode=mode, engine="python")["out"]
        assert [type(t) for t in a] == [type(t) for t in b], name
        if mode == "fixed":
            assert a == b, name
        else:
            assert [t if isinstance(t, str) else int(_bits(t)) for t in a] == \
                   [t if isinstance(t, str) else int(_bits(t)) for t in b], name


def test_native_functions_do_not_call_python():
    assert compiled.native_unary("fixed") == set(UNARY_ALU_OPS)
    assert compiled.native_unary("float") == NATIVE_FLOAT | {
        n for n, loop in compiled.LOOP_FUNCTIONS.items() if loop in compiled.float_loops()}
    for mode in ("fixed", "float"):
        cenv = compiled.bind_env(Env(mode))
        assert set(cenv["unary"]) == set(UNARY_ALU_OPS) - compiled.native_unary(mode), mode

    def boom(name):
        def f(x):
            raise RuntimeError(f"python called for {name}")
        return f

    xs = {"fixed": np.array([-70000, -1, 0, 1, 65536, 300000], dtype=np.int64),
          "float": np.array([-2.0, -0.0, 0.0, 0.5, 3.0, np.inf])}
    for mode in ("fixed", "float"):
        cenv = compiled.bind_env(Env(mode))
        cenv["unary"] = {n: boom(n) for n in UNARY_ALU_OPS}       # every Python function would raise
        for name in UNARY_ALU_OPS:
            if name in compiled.native_unary(mode):
                _engine().unary(name, cenv, xs[mode])
            else:
                with pytest.raises(RuntimeError, match=f"python called for {name}"):
                    _engine().unary(name, cenv, xs[mode])
    # float mode without the loops: exp, sigmoid, tanh, log and gelu fall back to the callbacks
    cenv = compiled.bind_env(Env("float"))
    cenv["loops"] = {}
    cenv["unary"] = {n: boom(n) for n in compiled.LOOP_FUNCTIONS}
    for name in compiled.LOOP_FUNCTIONS:
        with pytest.raises(RuntimeError, match=f"python called for {name}"):
            _engine().unary(name, cenv, xs["float"])
    # fixed mode without its tables: the functions fall back to the callbacks
    cenv = compiled.bind_env(Env("fixed"))
    del cenv["tables"]
    cenv["unary"] = {"tanh": boom("tanh")}
    with pytest.raises(RuntimeError, match="python called for tanh"):
        _engine().unary("tanh", cenv, xs["fixed"])


def test_fixed_tables_are_checked():
    cenv = compiled.bind_env(Env("fixed"))
    tables = dict(cenv["tables"])
    k, t = tables["tanh"]
    tables["tanh"] = (k, t[:-1])
    cenv["tables"] = tables
    with pytest.raises(GraphError, match="tanh"):
        _engine().unary("tanh", cenv, np.array([1], dtype=np.int64))
