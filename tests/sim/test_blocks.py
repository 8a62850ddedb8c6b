"""Block tokens through the value ops (docs/samml.md, "Blocks"): element-wise on blocks, timing unchanged."""

import numpy as np
import pytest

from fuseflow.sim import run_op
from fuseflow.tensors import FixedFormat

FX = FixedFormat(32, 16)


def blocks(seed, n, shape=(2, 2)):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-2, 2, shape) for _ in range(n)]


def plain(tokens):
    return [t.tolist() if hasattr(t, "tolist") else t for t in tokens]


@pytest.mark.parametrize("op", ["add", "sub", "mul", "max", "min"])
def test_binary_alu_on_blocks_is_element_wise(op):
    x, y = blocks(1, 2), blocks(2, 2)
    out, info = run_op("alu", {"op": op}, {"a": [x[0], "S0", x[1], "S1", "D"], "b": [y[0], "S0", y[1], "S1", "D"]},
                       stats=True)
    f = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum}[op]
    assert plain(out["out"]) == [f(x[0], y[0]).tolist(), "S0", f(x[1], y[1]).tolist(), "S1", "D"]
    _, scalar = run_op("alu", {"op": op}, {"a": [1.0, "S0", 2.0, "S1", "D"], "b": [1.0, "S0", 1.0, "S1", "D"]},
                       stats=True)
    assert info["cycles"] == scalar["cycles"]                     # the scalar op's timing


def test_block_and_scalar_broadcast():
    x = blocks(3, 1)[0]
    out = run_op("alu", {"op": "mul", "const": 0.5}, {"a": [x, "S0", "D"]})
    assert np.array_equal(out["out"][0], x * 0.5)
    out = run_op("alu", {"op": "add"}, {"a": [x, "N", "S0", "D"], "b": [3.0, x, "S0", "D"]})
    assert np.array_equal(out["out"][0], x + 3.0) and np.array_equal(out["out"][1], x)


def test_fixed_point_blocks_follow_the_scalar_rule_per_element():
    x, y = (np.array([[FX.encode(v) for v in row] for row in m]) for m in blocks(4, 2))
    out = run_op("alu", {"op": "mul"}, {"a": [x, "S0", "D"], "b": [y, "S0", "D"]}, mode="fixed")
    want = [[FX.mul(int(a), int(b)) for a, b in zip(ra, rb)] for ra, rb in zip(x, y)]
    assert out["out"][0].tolist() == want
    out = run_op("alu", {"op": "exp"}, {"a": [x, "S0", "D"]}, mode="fixed")
    assert out["out"][0].tolist() == [[FX.exp(int(a)) for a in row] for row in x]


@pytest.mark.parametrize("op, f", [("sum", np.add), ("max", np.maximum)])
def test_reduce_merges_blocks(op, f):
    x = blocks(5, 3)
    out = run_op("reduce", {"op": op}, {"val": [x[0], x[1], "S0", x[2], "S1", "D"]})
    assert plain(out["val"]) == [f(x[0], x[1]).tolist(), x[2].tolist(), "S0", "D"]


def test_spacc_sums_blocks_by_coordinate():
    x = blocks(6, 3, (3,))
    out = run_op("spacc", {"order": 1}, {"crd_inner": [2, 0, "S0", 2, "S1", "D"],
                                         "val": [x[0], x[1], "S0", x[2], "S1", "D"]})
    assert out["crd_inner"] == [0, 2, "S0", "D"]
    assert plain(out["val"]) == [x[1].tolist(), (x[0] + x[2]).tolist(), "S0", "D"]


def test_repeat_and_value_write_pass_blocks():
    x = blocks(7, 2)
    out = run_op("repeat", {}, {"in": [x[0], x[1], "S0", "D"], "repsig": ["R", "R", "S", "R", "S", "D"]})
    assert plain(out["out"]) == [x[0].tolist(), x[0].tolist(), "S0", x[1].tolist(), "S1", "D"]
    written = run_op("value_write", {}, {"val": [x[0], "S0", x[1], "S1", "D"]})
    assert [v.tolist() for v in written["vals"]] == [x[0].tolist(), x[1].tolist()]
