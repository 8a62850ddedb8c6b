"""level_write RTL vs run_op: seg/crd arrays (and the first array level_scan reads) read back from the written
memories."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_sorted_crds, st_tree, stream


# first: per fibre, its first coordinate << 2 | 2 if it is the only one, or 1 when the fibre is empty (written for
# level_scan, by hand here)
@pytest.mark.parametrize("level, crd, seg, crds, first", [
    (0, [0, 2, "S0", "D"], [0, 2], [0, 2], [0]),
    (1, [0, 2, "S0", 1, 3, "S1", "D"], [0, 2, 4], [0, 2, 1, 3], [0, 4]),
    (1, [5, "S0", 1, 3, 4, "S0", 6, "S1", "D"], [0, 1, 4, 5], [5, 1, 3, 4, 6], [22, 4, 26]),
    (0, ["D"], [0, 0], [], [1]),
    (0, ["S0", "D"], [0, 0], [], [1]),
    (1, ["S1", "D"], [0], [], []),
    (1, [1, "S0", "S0", 2, "S1", "D"], [0, 1, 1, 2], [1, 2], [6, 1, 10]),
])
def test_examples(level, crd, seg, crds, first, stalls):
    got, _, _ = check_op("level_write", {"level": level}, {"crd": crd}, stalls=stalls, seed=3)
    assert got == {"seg": seg, "crd": crds, "first": first}


# dense_above (the levels above dense, as an intermediate's with every coordinate written): every stop ends a
# fibre, so leading empty fibres and empty fibres after a stop of level >= 1 are kept
@pytest.mark.parametrize("level, crd, seg, crds, first", [
    (1, ["S0", 2, "S1", "D"], [0, 0, 1], [2], [1, 10]),
    (1, ["S0", "S1", "D"], [0, 0, 0], [], [1, 1]),
    (2, ["S0", 4, "S1", "S0", "S2", "D"], [0, 0, 1, 1, 1], [4], [1, 18, 1, 1]),
    (2, [3, 5, "S1", 1, "S0", "S2", "D"], [0, 2, 3, 3], [3, 5, 1], [12, 6, 1]),
])
def test_dense_above_examples(level, crd, seg, crds, first, stalls):
    got, _, _ = check_op("level_write", {"level": level, "dense_above": True}, {"crd": crd}, stalls=stalls, seed=3)
    assert got == {"seg": seg, "crd": crds, "first": first}


@st.composite
def case(draw):
    level = draw(st.integers(0, 2))
    canonical = draw(st.booleans())
    tree = draw(st_tree(level, st_sorted_crds(20), min_len=1 if canonical else 0))
    if level == 0:
        tree = draw(st_sorted_crds(20))
    return {"level": level}, {"crd": stream(tree, level + 1)}


@hw_settings(25)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("level_write", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("level_write", *c, stalls=stalls, seed=seed)
