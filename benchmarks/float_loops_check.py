"""The compiled engine's float-mode exp, sigmoid, tanh, log and gelu against the Python engine's, bit for bit,
on many inputs (default 10.5 million per function): random bit patterns over the whole float64 range (NaN
payloads, subnormals, infinities), dense sweeps over each function's interesting ranges and the edges.

The reference is the vectorised routine (fixed.FLOAT_UNARY_ARRAY_OPS: the same NumPy/SciPy loop on an array)
on every input and the Python engine's scalar function (Env.unary: one value at a time) on a sample.

    PYTHONPATH=. python benchmarks/float_loops_check.py [--millions 10] [--scalar 200000]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from fuseflow.sim import compiled
from fuseflow.sim.engine import Env
from fuseflow.tensors.fixed import FLOAT_UNARY_ARRAY_OPS

F64 = np.float64


def logspace(rng, lo, hi, n):
    """n values with log-uniform magnitude in [10**lo, 10**hi]."""
    return 10.0 ** rng.uniform(lo, hi, n)


def edges():
    e = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 5e-324, -5e-324, 1e-323, 2.2250738585072014e-308,
         2.225073858507201e-308, 1.7976931348623157e308, -1.7976931348623157e308, 709.782712893384,
         709.7827128933841, 709.78, 710.0, -745.1332191019412, -745.1332191019411, -708.3964185322641, -746.0,
         -744.44007192138122, 19.06154746539849, -19.06154746539849, 1e-8, 1.0, -1.0, 0.5, 2.0, 1 - 2 ** -53,
         1 + 2 ** -52, 6.0, 5.9, 0.84375, 1.25, 2.857142857142857, 26.5, 27.0, 38.0]
    e = np.array(e, dtype=F64)
    with np.errstate(all="ignore"):
        near = [e]
        for _ in range(4):
            near += [np.nextafter(near[-2 if len(near) > 1 else 0], np.inf)]
        e = np.concatenate([e, np.nextafter(e, np.inf), np.nextafter(e, -np.inf),
                            np.nextafter(np.nextafter(e, np.inf), np.inf), np.nextafter(np.nextafter(e, -np.inf), -np.inf)])
    # NaN payloads, both signs, quiet and signalling
    pay = np.array([0x7FF8000000000001, 0x7FF0000000000001, 0x7FFFFFFFFFFFFFFF, 0x7FF8DEADBEEF0000,
                    0xFFF8000000000001, 0xFFF0000000000001, 0xFFFFFFFFFFFFFFFF, 0xFFF8000000000000], dtype=np.uint64)
    return np.concatenate([e, pay.view(F64)])


def inputs(name, n, seed):
    """About n inputs for function name."""
    rng = np.random.default_rng(seed)
    q = n // 10
    bits = rng.integers(0, 1 << 64, 3 * q, dtype=np.uint64).view(F64)
    sub = rng.integers(1, 1 << 52, q // 2, dtype=np.uint64).view(F64)
    parts = [bits, sub, -sub, edges()]
    if name in ("exp", "sigmoid"):
        parts += [np.linspace(-746, 710, 3 * q), rng.uniform(-750, 750, q),
                  rng.uniform(-745.2, -708.0, q),                       # exp's subnormal results
                  np.linspace(-0.5, 0.5, q // 2), logspace(rng, -320, -1, q // 4), -logspace(rng, -320, -1, q // 4)]
    elif name == "log":
        parts += [np.abs(rng.integers(0, 1 << 64, 2 * q, dtype=np.uint64).view(F64)),
                  1.0 + rng.uniform(-2 ** -6, 2 ** -6, q), 1.0 + np.arange(-q // 2, q // 2) * 2.0 ** -52,
                  logspace(rng, -308, 308, q), np.abs(sub), rng.uniform(0, 4, q // 2)]
    elif name == "tanh":
        parts += [np.linspace(-20, 20, 3 * q), rng.uniform(-25, 25, q), logspace(rng, -320, 0, q // 2),
                  -logspace(rng, -320, 0, q // 2), rng.uniform(-1, 1, q)]
    elif name == "gelu":
        parts += [np.linspace(-10, 10, 3 * q), rng.uniform(-40, 40, q), logspace(rng, -320, 1, q // 2),
                  -logspace(rng, -320, 1, q // 2), rng.uniform(-1, 1, q)]
    return np.concatenate(parts).astype(F64)


def bits(a):
    return np.asarray(a, dtype=F64).view(np.int64)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--millions", type=float, default=10.0, help="inputs per function (millions, before edges)")
    ap.add_argument("--scalar", type=int, default=200_000, help="of them, how many also against Env.unary")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not compiled.available():
        print("the compiled engine is not built", file=sys.stderr)
        return 2
    loops = compiled.float_loops()
    print(f"numpy {np.__version__}; loops bound: {sorted(loops)}; native float: {sorted(compiled.native_unary('float'))}")
    env = Env("float")
    cenv = compiled.bind_env(env)
    bad_total = 0
    for name in ("exp", "sigmoid", "tanh", "log", "gelu"):
        if name not in compiled.native_unary("float"):
            print(f"{name}: not native (its loop is not bound)")
            continue
        xs = inputs(name, int(a.millions * 1e6), a.seed)
        t = time.perf_counter()
        got = compiled._engine.unary(name, cenv, xs)
        tc = time.perf_counter() - t
        with np.errstate(all="ignore"):
            want = FLOAT_UNARY_ARRAY_OPS[name](xs)
        vbad = np.flatnonzero(bits(got) != bits(want))
        # where the vectorised routine differs, the Python engine's scalar function decides (gelu on NaNs with a
        # payload: the array code keeps x's payload, the scalar one gives the default NaN, and so does C++)
        rs = np.array([env.unary[name](float(v)) for v in xs[vbad]], dtype=F64)
        bad = vbad[bits(got[vbad]) != bits(rs)]
        nan_only = bool(np.all(np.isnan(xs[vbad])))
        step = max(1, xs.size // a.scalar)
        few = xs[::step]
        ref = env.unary[name]
        want_s = np.array([ref(float(v)) for v in few], dtype=F64)
        bad_s = np.flatnonzero(bits(got[::step]) != bits(want_s))
        bad_total += bad.size + bad_s.size
        msg = f"{name}: {xs.size:,} inputs, {bad.size} differ from the Python engine (vectorised routine, " \
              f"{vbad.size} of them{' (all NaN inputs)' if vbad.size and nan_only else ''} rechecked on Env.unary); " \
              f"{few.size:,} against Env.unary, {bad_s.size} differ; compiled {tc / xs.size * 1e9:.1f} ns/value"
        if bad.size:
            msg += f"; e.g. x={xs[bad[0]]!r}: {got[bad[0]]!r} vs {want[bad[0]]!r}"
        print(msg, flush=True)
    print("ZERO mismatches" if bad_total == 0 else f"{bad_total} mismatches")
    return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
