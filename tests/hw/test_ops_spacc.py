"""spacc RTL vs run_op (fixed mode): orders 1 and 2, sum and max, with stalls."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import (check_op, hw_settings, run_hw_op, st_sorted_crds, st_tree, st_value, stream,
                                 tree_map)


def test_order1_example(stalls):
    got, _, _ = check_op("spacc", {"dim": 8}, {"crd_inner": [3, 1, "S0", 1, 5, "S1", "D"],
                                               "val": [10, 20, "S0", 30, 40, "S1", "D"]}, stalls=stalls, seed=1)
    assert got == {"crd_inner": [1, 3, 5, "S0", "D"], "val": [50, 10, 40, "S0", "D"]}


def test_order2_example(stalls):
    # k fibres: {2: [3, 1], 0: [5]} and {0: [], 1: [1]} -> rows 0: [5], 1: [1], 2: [1, 3]
    inputs = {"crd_outer0": [2, 0, "S0", 0, 1, "S1", "D"],
              "crd_inner": [3, 1, "S0", 5, "S1", "S0", 1, "S2", "D"],
              "val": [10, 20, "S0", 30, "S1", "S0", 7, "S2", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "dim": 8, "dim_outer": 4}, inputs, stalls=stalls, seed=2)
    assert got == {"crd_outer0": [0, 1, 2, "S0", "D"], "crd_inner": [5, "S0", 1, "S0", 1, 3, "S1", "D"],
                   "val": [30, "S0", 7, "S0", 20, 10, "S1", "D"]}


def test_overflow_flag():
    # coordinates beyond dim are not accumulated and raise the sticky overflow flag
    out, _ = run_hw_op("spacc", {"dim": 4}, {"crd_inner": [1, 6, "S1", "D"], "val": [1, 2, "S1", "D"]})
    assert out == {"crd_inner": [1, "S0", "D"], "val": [1, "S0", "D"]}


def _crds(dim, sorted_):
    if sorted_:
        return st_sorted_crds(dim)
    return st.lists(st.integers(0, dim - 1), max_size=4)


@st.composite
def order1(draw):
    dim = draw(st.integers(1, 10))
    e = draw(st.integers(0, 1))
    srt = draw(st.booleans())
    val = st.one_of(st_value(), st.just("N"))
    jfib = _crds(dim, srt).flatmap(lambda js: st.lists(val, min_size=len(js), max_size=len(js)).map(
        lambda vs: list(zip(js, vs))))
    tree = draw(st_tree(e + 1, jfib))             # depth e+1 of j-fibres -> crd depth e+2
    d = e + 2
    crd = stream(tree_map(tree, e + 1, lambda f: [j for j, _ in f]), d)
    vals = stream(tree_map(tree, e + 1, lambda f: [v for _, v in f]), d)
    return {"dim": dim, "op": draw(st.sampled_from(["sum", "max"]))}, {"crd_inner": crd, "val": vals}


@st.composite
def order2(draw):
    dim = draw(st.integers(1, 6))
    dout = draw(st.integers(1, 4))
    e = draw(st.integers(0, 1))
    srt = draw(st.booleans())
    val = st.one_of(st_value(), st.just("N"))
    jfib = _crds(dim, srt).flatmap(lambda js: st.lists(val, min_size=len(js), max_size=len(js)).map(
        lambda vs: list(zip(js, vs))))
    ifib = _crds(dout, True).flatmap(lambda is_: st.lists(jfib, min_size=len(is_), max_size=len(is_)).map(
        lambda fs: list(zip(is_, fs))))
    tree = draw(st_tree(e + 1, ifib))             # depth e+1 of i-fibres -> outer depth e+2
    d = e + 2
    outer = stream(tree_map(tree, e + 1, lambda f: [i for i, _ in f]), d)
    inner = stream(tree_map(tree, e + 1, lambda f: [[j for j, _ in jf] for _, jf in f]), d + 1)
    vals = stream(tree_map(tree, e + 1, lambda f: [[v for _, v in jf] for _, jf in f]), d + 1)
    return ({"order": 2, "dim": dim, "dim_outer": dout, "op": draw(st.sampled_from(["sum", "max"]))},
            {"crd_outer0": outer, "crd_inner": inner, "val": vals})


@hw_settings(20)
@given(order1(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order1_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@hw_settings(20)
@given(order2(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order2_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(order1(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(order2(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)
