"""array RTL vs run_op (fixed mode)."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream


def test_example(stalls):
    out, _, _ = check_op("array", {"vals": [5, -7, 9]}, {"ref": [0, "N", 2, "S0", 1, "S1", "D"]},
                         stalls=stalls, seed=2)
    assert out == {"val": [5, 0, 9, "S0", -7, "S1", "D"]}


@st.composite
def case(draw):
    vals = draw(st.lists(st_value(), min_size=1, max_size=6))
    depth = draw(st.integers(0, 3))
    tree = draw(st_tree(depth, st.one_of(st.integers(0, len(vals) - 1), st.just("N"))))
    return {"vals": vals}, {"ref": stream(tree, depth)}


@hw_settings(20)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("array", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("array", *c, stalls=stalls, seed=seed)


@hw_settings(15)
@given(case(), st.integers(0, 1 << 16))
def test_random_fifos(c, seed):
    """Behind FIFOs the synchronous vals read is addressed from the FIFO's next head (r_after)."""
    check_op("array", *c, stalls=0.3, seed=seed, fifo_depth=2)
