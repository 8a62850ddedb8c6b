"""crd_drop RTL vs run_op: dropped empty fibres, the held S0, higher stops absorbing it."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, stream, tree_map


@pytest.mark.parametrize("outer, inner, out_outer, out_inner", [
    ([0, 1, 2, "S0", "D"], [5, "S0", "S0", 6, 7, "S1", "D"], [0, 2, "S0", "D"], [5, "S0", 6, 7, "S1", "D"]),
    ([0, 1, "S0", "D"], [5, "S0", "S1", "D"], [0, "S0", "D"], [5, "S1", "D"]),
    ([0, "S0", 1, "S1", "D"], ["S1", 3, "S2", "D"], ["S0", 1, "S1", "D"], ["S1", 3, "S2", "D"]),
    (["S0", "D"], ["S1", "D"], ["S0", "D"], ["S1", "D"]),
])
def test_examples(outer, inner, out_outer, out_inner, stalls):
    got, _, _ = check_op("crd_drop", {}, {"outer": outer, "inner": inner}, stalls=stalls, seed=6)
    assert got == {"outer": out_outer, "inner": out_inner}


@st.composite
def case(draw):
    depth = draw(st.integers(1, 2))
    leaf = st.tuples(st.integers(0, 40), st.lists(st.one_of(st.integers(0, 40), st.just("N")), max_size=3))
    tree = draw(st_tree(depth, leaf))
    return {}, {"outer": stream(tree_map(tree, depth, lambda t: t[0]), depth),
                "inner": stream(tree_map(tree, depth, lambda t: t[1]), depth + 1)}


@hw_settings(25)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("crd_drop", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("crd_drop", *c, stalls=stalls, seed=seed)
