"""alu RTL: the fixed-point datapath bit-identical to fuseflow/tensors/fixed.py, and the op vs run_op."""

import random

import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator
from hypothesis import given, strategies as st

from fuseflow.hw.ops.alu import fixed_op
from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream, tree_map
from fuseflow.samml.registry import BINARY_ALU_OPS, UNARY_ALU_OPS
from fuseflow.tensors.fixed import FixedFormat

OPS = BINARY_ALU_OPS + UNARY_ALU_OPS
FORMATS = [FixedFormat(32, 16), FixedFormat(16, 4), FixedFormat(24, 12), FixedFormat(12, 2),
           FixedFormat(32, 0), FixedFormat(16, 8), FixedFormat(32, 30)]


def _operands(fx, n, seed):
    rng = random.Random(seed)
    lo, hi, one = fx.min_raw, fx.max_raw, fx.one
    edge = [max(lo, min(hi, v)) for v in (lo, lo + 1, hi, hi - 1, 0, 1, -1, one, -one, one // 2, 2 * one)]
    vals = edge[:]
    for _ in range(n):
        vals.append(rng.choice([rng.randint(lo, hi), rng.randint(-16 * one, 16 * one),
                                rng.randint(-one, one)]))
        vals[-1] = max(lo, min(hi, vals[-1]))
    pairs = [(a, b) for a in edge for b in edge]
    pairs += [(rng.choice(vals), rng.choice(vals)) for _ in range(n)]
    return pairs


def _run_datapath(fx, ops, pairs):
    m = Module()
    a = Signal(signed(fx.width))
    b = Signal(signed(fx.width))
    res = {}
    for op in ops:
        r = Signal(signed(fx.width), name=f"r_{op}")
        m.d.comb += r.eq(fixed_op(m, op, a, b, fx, prefix=op))
        res[op] = r
    sim = Simulator(m)
    bad = []

    async def tb(ctx):
        for x, y in pairs:
            ctx.set(a, x)
            ctx.set(b, y)
            for op, r in res.items():
                want = fx.binary(op)(x, y) if op in BINARY_ALU_OPS else fx.unary(op)(x)
                got = ctx.get(r)
                if got != want:
                    bad.append((op, x, y, got, want))
    sim.add_testbench(tb)
    sim.run()
    assert not bad, bad[:10]


@pytest.mark.parametrize("fx", FORMATS, ids=str)
def test_datapath_bit_identical(fx):
    ops = list(OPS)
    _run_datapath(fx, ops, _operands(fx, 300, fx.width * 100 + fx.frac))


FUNCTIONS = ("sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square")


@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_wide_sweep_16bit(op):
    """Every 16th input of fixed16.8 (and both ends) bit-identical to the shared Python function."""
    fx = FixedFormat(16, 8)
    xs = list(range(fx.min_raw, fx.max_raw + 1, 16)) + [fx.max_raw, -1, 1, 0]
    _run_datapath(fx, [op], [(x, 0) for x in xs])


@pytest.mark.slow
@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_exhaustive_16bit(op):
    """Every input of fixed16.8 bit-identical to the shared Python function."""
    fx = FixedFormat(16, 8)
    _run_datapath(fx, [op], [(x, 0) for x in range(fx.min_raw, fx.max_raw + 1)])


@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_sampled_32bit(op):
    """fixed32.16: a dense sweep of [-20, 20] plus random inputs over the whole range."""
    fx = FixedFormat(32, 16)
    rng = random.Random(op)
    xs = list(range(-20 * fx.one, 20 * fx.one, 1531)) + [rng.randint(fx.min_raw, fx.max_raw) for _ in range(300)]
    xs += [fx.min_raw, fx.max_raw, 0, 1, -1, fx.one]
    _run_datapath(fx, [op], [(x, 0) for x in xs])


def test_exp_dense_sweep():
    """exp over a dense sweep of the input range that matters (and the saturating ends)."""
    fx = FixedFormat(32, 16)
    xs = list(range(-30 * fx.one, 22 * fx.one, 997)) + [fx.min_raw, fx.max_raw, 0, -1, 1]
    _run_datapath(fx, ["exp"], [(x, 0) for x in xs])


@pytest.mark.slow
@pytest.mark.parametrize("fx", FORMATS, ids=str)
def test_datapath_bit_identical_long(fx):
    ops = list(OPS)
    _run_datapath(fx, ops, _operands(fx, 20000, 7 + fx.width))


@pytest.mark.parametrize("op", OPS)
def test_op_examples(op, stalls):
    one = 1 << 16
    inp = {"a": [one, -3 * one, "N", "S0", 2 ** 31 - 1, 5, "S1", "D"]}
    if op in BINARY_ALU_OPS:
        inp["b"] = [2 * one, 5, 7, "S0", 2 ** 31 - 1, "N", "S1", "D"]
    check_op("alu", {"op": op}, inp, stalls=stalls, seed=3)


@pytest.mark.parametrize("op", BINARY_ALU_OPS)
def test_op_const(op):
    check_op("alu", {"op": op, "const": -1.5}, {"a": [1 << 16, "N", "S0", -7, "S1", "D"]})


@st.composite
def case(draw):
    op = draw(st.sampled_from(OPS))
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st_value(), st.just("N"))
    tree = draw(st_tree(depth, st.tuples(leaf, leaf)))
    inp = {"a": stream(tree_map(tree, depth, lambda p: p[0]), depth)}
    params = {"op": op}
    if op in BINARY_ALU_OPS:
        if draw(st.booleans()):
            inp["b"] = stream(tree_map(tree, depth, lambda p: p[1]), depth)
        else:
            params["const"] = draw(st.floats(-100, 100, allow_nan=False))
    return params, inp


@hw_settings(20)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_op_random(c, stalls, seed):
    check_op("alu", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("alu", *c, stalls=stalls, seed=seed)
