"""repeat RTL vs run_op: references and values, empty fibres, stop promotion."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream, tree_map


def repsig_of(crd_tokens):
    return ["S" if isinstance(t, str) and t[0] == "S" else "D" if t == "D" else "R" for t in crd_tokens]


@pytest.mark.parametrize("inp, sig, out", [
    ([0, "D"], ["R", "R", "S", "D"], [0, 0, "S0", "D"]),
    ([4, 5, "S0", "D"], ["R", "R", "S", "S", "D"], [4, 4, "S0", "S1", "D"]),
    ([4, 5, "S0", "D"], ["S", "R", "S", "D"], ["S0", 5, "S1", "D"]),
    (["S0", "D"], ["S", "D"], ["S1", "D"]),
    ([7, "S0", 8, "S1", "D"], ["R", "S", "R", "R", "S", "D"], [7, "S1", 8, 8, "S2", "D"]),
])
def test_examples(inp, sig, out, stalls):
    got, _, _ = check_op("repeat", {}, {"in": inp, "repsig": sig}, stalls=stalls, seed=11)
    assert got == {"out": out}


@st.composite
def case(draw, values=False):
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st_value() if values else st.integers(0, 999), st.just("N"))
    tree = draw(st_tree(depth, st.tuples(leaf, st.integers(0, 3))))
    inp = stream(tree_map(tree, depth, lambda lk: lk[0]), depth)
    crd = stream(tree_map(tree, depth, lambda lk: list(range(lk[1]))), depth + 1)
    return {"in": inp, "repsig": repsig_of(crd)}


@hw_settings(20)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_refs(inputs, stalls, seed):
    check_op("repeat", {}, inputs, stalls=stalls, seed=seed)


@hw_settings(15)
@given(case(values=True), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_values(inputs, stalls, seed):
    check_op("repeat", {}, inputs, any_kind="val", stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("repeat", {}, c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(values=True), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("repeat", {}, c, any_kind="val", stalls=stalls, seed=seed)
