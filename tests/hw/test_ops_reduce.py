"""reduce RTL vs run_op (fixed mode), with and without crd."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream, tree_map
from fuseflow.samml.registry import REDUCE_OPS


@pytest.mark.parametrize("val, out", [
    ([1, 2, "S0", 3, "S1", "D"], [3, 3, "S0", "D"]),
    (["S0", 5, "S1", "D"], [5, "S0", "D"]),
    ([1, "N", "S0", "S0", 4, "S2", "D"], [1, 4, "S1", "D"]),
    (["S1", "D"], ["S0", "D"]),
])
def test_examples_sum(val, out, stalls):
    got, _, _ = check_op("reduce", {"op": "sum"}, {"val": val}, stalls=stalls, seed=1)
    assert got == {"val": out}


@pytest.mark.parametrize("op, out", [("min", [-2, -7, "S0", "D"]), ("max", [3, 5, "S0", "D"])])
def test_examples_min_max(op, out, stalls):
    val = [3, -2, "S0", 5, -7, "S1", "D"]
    got, _, _ = check_op("reduce", {"op": op}, {"val": val}, stalls=stalls, seed=4)
    assert got == {"val": out}


def test_example_min_with_crd(stalls):
    # crd rows 0, 2, 3 with fibres [4, -1], [] (empty -> 0) and [6]
    got, _, _ = check_op("reduce", {"op": "min"}, {"crd": [0, 2, 3, "S0", "D"],
                                                   "val": [4, -1, "S0", "S0", 6, "S1", "D"]}, stalls=stalls, seed=3)
    assert got == {"val": [-1, 0, 6, "S0", "D"]}


def test_example_with_crd(stalls):
    # crd rows 0, 2 with fibres [1, 2] and [] (empty -> 0)
    got, _, _ = check_op("reduce", {}, {"crd": [0, 2, "S0", "D"], "val": [1, 2, "S0", "S1", "D"]},
                         stalls=stalls, seed=2)
    assert got == {"val": [3, 0, "S0", "D"]}


@st.composite
def plain(draw):
    depth = draw(st.integers(1, 3))
    tree = draw(st_tree(depth, st.one_of(st_value(), st.just("N"))))
    return {"op": draw(st.sampled_from(REDUCE_OPS))}, {"val": stream(tree, depth)}


@st.composite
def with_crd(draw):
    depth = draw(st.integers(1, 2))
    leaf = st.tuples(st.integers(0, 50), st.lists(st.one_of(st_value(), st.just("N")), max_size=3))
    tree = draw(st_tree(depth, leaf))
    crd = stream(tree_map(tree, depth, lambda cv: cv[0]), depth)
    val = stream(tree_map(tree, depth, lambda cv: cv[1]), depth + 1)
    return {"op": draw(st.sampled_from(REDUCE_OPS))}, {"crd": crd, "val": val}


@hw_settings(20)
@given(plain(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_plain(c, stalls, seed):
    check_op("reduce", *c, stalls=stalls, seed=seed)


@hw_settings(20)
@given(with_crd(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_with_crd(c, stalls, seed):
    check_op("reduce", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(plain(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("reduce", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(with_crd(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("reduce", *c, stalls=stalls, seed=seed)
