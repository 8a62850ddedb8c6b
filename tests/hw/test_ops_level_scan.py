"""level_scan RTL vs run_op: the DESIGN examples, then random levels and reference streams."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_sorted_crds, st_tree, stream

# DCSR B 3x4 rows {0: [0, 2], 2: [1, 3]}
B_ROW = {"seg": [0, 2], "crd": [0, 2]}
B_COL = {"seg": [0, 2, 4], "crd": [0, 2, 1, 3]}
B_COL_CSR = {"seg": [0, 2, 2, 4], "crd": [0, 2, 1, 3]}


@pytest.mark.parametrize("params, ref, crd", [
    (B_ROW, [0, "D"], [0, 2, "S0", "D"]),
    (B_COL, [0, 1, "S0", "D"], [0, 2, "S0", 1, 3, "S1", "D"]),
    (B_COL_CSR, [0, 1, 2, "S0", "D"], [0, 2, "S0", "S0", 1, 3, "S1", "D"]),
    ({"format": "dense", "dim": 3}, [0, "D"], [0, 1, 2, "S0", "D"]),
    ({"format": "dense", "dim": 2}, [0, "N", 1, "S0", "S1", "D"], [0, 1, "S0", "S0", 0, 1, "S1", "S2", "D"]),
    (B_COL, ["S0", "D"], ["S1", "D"]),
    (B_COL, ["D"], ["D"]),
    (B_COL, ["N", "S0", "D"], ["S1", "D"]),
])
def test_examples(params, ref, crd, stalls):
    out, _, _ = check_op("level_scan", params, {"ref": ref}, stalls=stalls, seed=7)
    assert out["crd"] == crd


@st.composite
def compressed_case(draw):
    dim = draw(st.integers(0, 6))
    fibres = draw(st.lists(st_sorted_crds(dim), min_size=1, max_size=4))
    seg = [0]
    for f in fibres:
        seg.append(seg[-1] + len(f))
    crd = [c for f in fibres for c in f]
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st.integers(0, len(fibres) - 1), st.just("N"))
    tree = draw(st_tree(depth, leaf))
    return {"seg": seg, "crd": crd}, {"ref": stream(tree, depth)}


@st.composite
def dense_case(draw):
    dim = draw(st.integers(0, 4))
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st.integers(0, 5), st.just("N"))
    tree = draw(st_tree(depth, leaf))
    return {"format": "dense", "dim": dim}, {"ref": stream(tree, depth)}


@hw_settings(20)
@given(st.one_of(compressed_case(), dense_case()), st.integers(0, 1 << 16))
def test_random_no_stalls(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs)


@hw_settings(20)
@given(st.one_of(compressed_case(), dense_case()), st.integers(0, 1 << 16))
def test_random_stalls(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs, stalls=0.4, seed=seed)


@hw_settings(10)
@given(compressed_case(), st.integers(0, 1 << 16))
def test_random_fifos(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs, stalls=0.3, seed=seed, fifo_depth=2)


@pytest.mark.slow
@hw_settings(400)
@given(st.one_of(compressed_case(), dense_case()), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("level_scan", *c, stalls=stalls, seed=seed)
