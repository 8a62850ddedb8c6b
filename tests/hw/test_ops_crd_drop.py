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


@pytest.mark.parametrize("outer, inner, ref, out_outer, out_inner, out_ref", [
    # the references follow inner: the dropped fibre's S0 goes with it, the held S0 comes back on both
    ([0, 1, 2, "S0", "D"], [5, "S0", "S0", 6, 7, "S1", "D"], [10, "S0", "S0", 11, "N", "S1", "D"],
     [0, 2, "S0", "D"], [5, "S0", 6, 7, "S1", "D"], [10, "S0", 11, "N", "S1", "D"]),
    ([0, 1, "S0", "D"], [5, "S0", "S1", "D"], [3, "S0", "S1", "D"], [0, "S0", "D"], [5, "S1", "D"], [3, "S1", "D"]),
])
def test_examples_with_references(outer, inner, ref, out_outer, out_inner, out_ref, stalls):
    got, _, _ = check_op("crd_drop", {"arity": 2}, {"outer": outer, "inner": inner, "ref0": ref, "ref1": inner},
                         stalls=stalls, seed=7)
    assert got == {"outer": out_outer, "inner": out_inner, "ref0": out_ref, "ref1": out_inner}


@st.composite
def case(draw):
    depth = draw(st.integers(1, 2))
    leaf = st.tuples(st.integers(0, 40), st.lists(st.one_of(st.integers(0, 40), st.just("N")), max_size=3))
    tree = draw(st_tree(depth, leaf))
    ins = {"outer": stream(tree_map(tree, depth, lambda t: t[0]), depth),
           "inner": stream(tree_map(tree, depth, lambda t: t[1]), depth + 1)}
    if draw(st.booleans()):                  # one aligned reference stream: the inner coordinates + 100
        ins["ref0"] = [x + 100 if isinstance(x, int) else x for x in ins["inner"]]
        return {"arity": 1}, ins
    return {}, ins


@hw_settings(25)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("crd_drop", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("crd_drop", *c, stalls=stalls, seed=seed)
