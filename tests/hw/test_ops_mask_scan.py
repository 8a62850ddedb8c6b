"""mask_scan RTL vs run_op: the docs examples, then random patterns, sizes and row streams under stalls."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_tree, stream

BIGBIRD = "bigbird:block=2,window=1,global=1,random=1,seed=0"


@pytest.mark.parametrize("params, ref, crd", [
    ({"mask": "causal", "rows": 3, "dim": 3}, [0, 1, 2, "S0", "D"], [0, "S0", 0, 1, "S0", 0, 1, 2, "S1", "D"]),
    ({"mask": "band:w=1", "rows": 6, "dim": 3}, [0, 4, 5, "S0", "D"], [0, 1, "S0", "S0", "S1", "D"]),
    ({"mask": BIGBIRD, "rows": 8, "dim": 8}, [0, 3, "S0", "D"],
     [0, 1, 2, 3, 4, 5, 6, 7, "S0", 0, 1, 2, 3, 6, 7, "S1", "D"]),
    ({"mask": "causal", "rows": 4, "dim": 4}, [2, "S0", 3, "S1", "D"], [0, 1, 2, "S1", 0, 1, 2, 3, "S2", "D"]),
    ({"mask": "causal", "rows": 4, "dim": 4}, ["N", "S0", "D"], ["S1", "D"]),
    ({"mask": "band:w=0", "rows": 2, "dim": 2}, ["D"], ["D"]),
])
def test_examples(params, ref, crd, stalls):
    out, _, _ = check_op("mask_scan", params, {"ref": ref}, stalls=stalls, seed=7)
    assert out["crd"] == crd


@st.composite
def mask_case(draw):
    kind = draw(st.sampled_from(["causal", "band", "bigbird"]))
    if kind == "bigbird":
        block = draw(st.integers(1, 3))
        rows, cols = block * draw(st.integers(1, 5)), block * draw(st.integers(1, 5))
        window = draw(st.sampled_from([0, 1, 3, 5]))
        text = (f"bigbird:block={block},window={window},global={draw(st.integers(0, 2))},"
                f"random={draw(st.integers(0, 2))},seed={draw(st.integers(0, 99))}")
    else:
        rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 9))
        text = "causal" if kind == "causal" else f"band:w={draw(st.integers(0, 4))}"
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st.integers(0, rows - 1), st.just("N"))
    tree = draw(st_tree(depth, leaf))
    return {"mask": text, "rows": rows, "dim": cols}, {"ref": stream(tree, depth)}


@hw_settings(25)
@given(mask_case())
def test_random_no_stalls(case):
    check_op("mask_scan", *case)


@hw_settings(25)
@given(mask_case(), st.integers(0, 1 << 16))
def test_random_stalls(case, seed):
    check_op("mask_scan", *case, stalls=0.4, seed=seed)


@hw_settings(10)
@given(mask_case(), st.integers(0, 1 << 16))
def test_random_fifos(case, seed):
    check_op("mask_scan", *case, stalls=0.3, seed=seed, fifo_depth=2)


@pytest.mark.slow
@hw_settings(300)
@given(mask_case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep(case, stalls, seed):
    check_op("mask_scan", *case, stalls=stalls, seed=seed)
