"""value_write RTL vs run_op: values read back from the written memory."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream


def test_example(stalls):
    got, _, _ = check_op("value_write", {}, {"val": [5, -2, "S0", "N", 7, "S1", "D"]}, stalls=stalls, seed=3)
    assert got == {"vals": [5, -2, 0, 7]}


@hw_settings(20)
@given(st.integers(0, 2).flatmap(lambda d: st.tuples(st.just(d), st_tree(d, st.one_of(st_value(), st.just("N"))))),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(dt, stalls, seed):
    depth, tree = dt
    check_op("value_write", {}, {"val": stream(tree, depth)}, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(300)
@given(st.integers(0, 3).flatmap(lambda d: st.tuples(st.just(d), st_tree(d, st.one_of(st_value(), st.just("N"))))),
       st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep(dt, stalls, seed):
    depth, tree = dt
    check_op("value_write", {}, {"val": stream(tree, depth)}, stalls=stalls, seed=seed)
