"""Block tokens through the value ops (docs/samml.md, "Blocks"): element-wise on blocks, timing unchanged."""

import numpy as np
import pytest

from fuseflow.errors import GraphError
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


# ---- softmax across the blocks of a row: reduce with rows, alu with a B-vector ----------------------------

@pytest.mark.parametrize("op, f", [("max", np.max), ("sum", np.sum), ("min", np.min)])
@pytest.mark.parametrize("n", [2, 4])
def test_reduce_rows_gives_the_row_reduction_of_a_block_row(op, f, n):
    """A fibre of blocks S(I, J) over J reduces to row I's B-vector: the op over every element of each row."""
    x = blocks(10 + n, 3, (n, n))
    out, info = run_op("reduce", {"op": op, "rows": True}, {"val": [x[0], x[1], "S0", x[2], "S1", "D"]}, stats=True)
    want0 = f(np.concatenate([x[0], x[1]], axis=1), axis=1)
    assert np.allclose(out["val"][0], want0, rtol=1e-12) and np.allclose(out["val"][1], f(x[2], axis=1))
    assert plain(out["val"])[2:] == ["S0", "D"]
    _, scalar = run_op("reduce", {"op": op}, {"val": [1.0, 2.0, "S0", 3.0, "S1", "D"]}, stats=True)
    assert info["cycles"] == scalar["cycles"]


def test_reduce_rows_fixed_point_sums_exactly_then_saturates():
    """Fixed mode: a row's sum is exact and saturated once (max_raw + 1 - 1 is max_raw, where adding left to right
    with saturation would give max_raw - 1); N and an empty fibre with crd are zero vectors."""
    hi = FX.max_raw
    blk = np.array([[hi, 1, -1], [hi, hi, -hi], [-5, 7, 0]], dtype=np.int64)
    out = run_op("reduce", {"op": "sum", "rows": True}, {"val": [blk, "N", "S0", "D"]}, mode="fixed")
    assert plain(out["val"]) == [[hi, hi, 2], "D"]
    out = run_op("reduce", {"op": "sum", "rows": True}, {"crd": [0, 1, "S0", "D"], "val": [blk, "S0", "S1", "D"]},
                 mode="fixed")
    assert plain(out["val"]) == [[hi, hi, 2], [0, 0, 0], "S0", "D"]


@pytest.mark.parametrize("op", ["sub", "div", "mul"])
def test_alu_broadcasts_a_vector_over_each_blocks_rows(op):
    n = 4
    x, v = blocks(20, 2, (n, n)), blocks(21, 2, (n,))
    f = {"sub": np.subtract, "div": np.divide, "mul": np.multiply}[op]
    out = run_op("alu", {"op": op}, {"a": [x[0], x[1], "S0", "D"], "b": [v[0], v[1], "S0", "D"]})
    for k in range(2):
        assert np.allclose(out["out"][k], f(x[k], np.repeat(v[k][:, None], n, axis=1)), rtol=1e-12)
    out = run_op("alu", {"op": op}, {"a": [v[0], "S0", "D"], "b": [x[0], "S0", "D"]})        # vector as a
    assert np.allclose(out["out"][0], f(np.repeat(v[0][:, None], n, axis=1), x[0]), rtol=1e-12)


def test_run_op_loads_a_zero_block_for_n():
    """run_op on blocked streams: N is the node's zero block (reduce rows: a zero B-vector)."""
    x = blocks(30, 1, (2, 2))[0]
    out = run_op("reduce", {"op": "sum"}, {"val": [x, "S0", "N", "S0", "D"]})
    assert plain(out["val"]) == [x.tolist(), [[0.0, 0.0], [0.0, 0.0]], "D"]
    out = run_op("alu", {"op": "exp"}, {"a": ["N", "S0", x, "S0", "D"]})
    assert plain(out["out"])[0] == [[1.0, 1.0], [1.0, 1.0]]
    out = run_op("reduce", {"op": "max", "rows": True}, {"val": [x, "S0", "N", "S0", "D"]})
    assert plain(out["val"]) == [np.max(x, axis=1).tolist(), [0.0, 0.0], "D"]
    out = run_op("array", {"vals": [x]}, {"ref": [0, "N", "S0", "D"]})       # an array's blocks: its values'
    assert plain(out["val"]) == [x.tolist(), [[0.0, 0.0], [0.0, 0.0]], "S0", "D"]
    with pytest.raises(GraphError, match="rows"):
        run_op("reduce", {"op": "max", "rows": True}, {"val": [1.0, "S0", "D"]})
