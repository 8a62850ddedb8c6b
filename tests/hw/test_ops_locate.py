"""locate RTL vs run_op: the docs examples, then random parent references and coordinate fibres."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_sorted_crds, st_tree, stream, tree_map


@pytest.mark.parametrize("dim, ref, crd, out", [
    (5, [0, "D"], [1, 3, "S0", "D"], [1, 3, "S0", "D"]),
    (5, [0, 1, "S0", "D"], [1, 3, "S0", 0, 4, "S1", "D"], [1, 3, "S0", 5, 9, "S1", "D"]),
    (5, [0, 1, "S0", "D"], ["S0", 2, "S1", "D"], ["S0", 7, "S1", "D"]),
    (4, [2, "N", "S0", "S0", "D"], [3, "S0", 1, "S1", "S1", "D"], [11, "S0", "N", "S1", "S1", "D"]),
    (4, [2, "S0", 3, "S1", "D"], ["S1", 0, "S2", "D"], ["S1", 12, "S2", "D"]),
    (3, ["D"], ["D"], ["D"]),
])
def test_examples(dim, ref, crd, out, stalls):
    got, _, _ = check_op("locate", {"dim": dim}, {"ref": ref, "crd": crd}, stalls=stalls, seed=5)
    assert got == {"ref": out}


@st.composite
def case(draw):
    dim = draw(st.integers(1, 7))
    depth = draw(st.integers(0, 2))
    leaf = st.tuples(st.one_of(st.integers(0, 40), st.just("N")), st_sorted_crds(dim))
    tree = draw(st_tree(depth, leaf))
    ref = stream(tree_map(tree, depth, lambda rc: rc[0]), depth)
    crd = stream(tree_map(tree, depth, lambda rc: rc[1]), depth + 1)
    want = stream(tree_map(tree, depth, lambda rc: ["N" if rc[0] == "N" else rc[0] * dim + c for c in rc[1]]),
                  depth + 1)
    return {"dim": dim}, {"ref": ref, "crd": crd}, want


@hw_settings(25)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    params, inputs, want = c
    got, _, _ = check_op("locate", params, inputs, stalls=stalls, seed=seed)
    assert got == {"ref": want}


@hw_settings(10)
@given(case(), st.integers(0, 1 << 16))
def test_random_fifos(c, seed):
    params, inputs, want = c
    got, _, _ = check_op("locate", params, inputs, stalls=0.3, seed=seed, fifo_depth=2)
    assert got == {"ref": want}


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep(c, stalls, seed):
    params, inputs, want = c
    got, _, _ = check_op("locate", params, inputs, stalls=stalls, seed=seed)
    assert got == {"ref": want}
