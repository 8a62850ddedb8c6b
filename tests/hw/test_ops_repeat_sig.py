"""repeat_sig RTL vs run_op."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, stream


def test_example(stalls):
    out, _, _ = check_op("repeat_sig", {}, {"in": [0, "N", 2, "S0", 1, "S1", "D"]}, stalls=stalls, seed=5)
    assert out == {"repsig": ["R", "R", "R", "S", "R", "S", "D"]}


@hw_settings(20)
@given(st.integers(1, 3).flatmap(lambda d: st.tuples(st.just(d), st_tree(d, st.one_of(st.integers(0, 99), st.just("N"))))),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(dt, stalls, seed):
    depth, tree = dt
    check_op("repeat_sig", {}, {"in": stream(tree, depth)}, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(300)
@given(st.integers(1, 4).flatmap(lambda d: st.tuples(st.just(d), st_tree(d, st.one_of(st.integers(0, 99), st.just("N"))))),
       st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep(dt, stalls, seed):
    depth, tree = dt
    check_op("repeat_sig", {}, {"in": stream(tree, depth)}, stalls=stalls, seed=seed)
