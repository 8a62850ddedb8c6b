"""Coordinate masks (fuseflow.samml.masks): every pattern against an independent NumPy construction, the
mask_scan op against the same, the parser and the dense evaluator, and bad patterns."""

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fuseflow.errors import ProgramError
from fuseflow.samml import masks
from fuseflow.samml.expr import evaluate, parse_statements
from fuseflow.sim import run_op

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mask_reference import numpy_mask  # noqa: E402


@st.composite
def pattern(draw):
    kind = draw(st.sampled_from(["causal", "band", "bigbird"]))
    if kind == "bigbird":
        block = draw(st.integers(1, 4))
        rows, cols = block * draw(st.integers(1, 6)), block * draw(st.integers(1, 6))
        text = (f"bigbird:block={block},window={draw(st.sampled_from([0, 1, 3, 5]))},"
                f"global={draw(st.integers(0, 2))},random={draw(st.integers(0, 3))},seed={draw(st.integers(0, 999))}")
        return text, rows, cols
    rows, cols = draw(st.integers(1, 12)), draw(st.integers(1, 12))
    return ("causal" if kind == "causal" else f"band:w={draw(st.integers(0, 6))}"), rows, cols


@settings(max_examples=150, deadline=None)
@given(pattern())
def test_dense_mask_and_rows_match_numpy(case):
    text, rows, cols = case
    want = numpy_mask(text, rows, cols)
    spec = masks.parse_mask(text)
    assert masks.parse_mask(spec.text) == spec
    np.testing.assert_array_equal(masks.dense_mask(spec, rows, cols), want)
    for i in range(rows):
        assert masks.kept_columns(spec, i, rows, cols) == list(np.flatnonzero(want[i]))
        assert all(lo < hi for lo, hi in masks.row_runs(spec, i, rows, cols))


@settings(max_examples=60, deadline=None)
@given(pattern())
def test_mask_scan_emits_exactly_the_kept_coordinates(case):
    text, rows, cols = case
    want = numpy_mask(text, rows, cols)
    out = run_op("mask_scan", {"mask": text, "rows": rows, "dim": cols}, {"ref": list(range(rows)) + ["S0", "D"]})
    crd, ref = out["crd"], out["ref"]
    got = np.zeros((rows, cols), dtype=bool)
    row = 0
    for c, r in zip(crd, ref):
        if isinstance(c, str):
            row += 1
            continue
        assert r == row * cols + c
        got[row, c] = True
    np.testing.assert_array_equal(got, want)
    assert crd[-2:] == ["S1", "D"] or (rows == 1 and crd[-2:] == ["S1", "D"])


def test_bigbird_paper_pattern():
    """block 4 on 32x32: global row block 0 sees everything, every row sees column block 0, each other row
    block sees its neighbours and exactly one random block."""
    m = masks.dense_mask("bigbird:block=4,window=3,global=1,random=1,seed=0", 32, 32)
    blocks = m[::4, ::4]
    assert blocks[0].all() and blocks[:, 0].all()
    for bi in range(1, 8):
        window = {c for c in (bi - 1, bi, bi + 1) if 0 <= c < 8} | {0}
        assert set(np.flatnonzero(blocks[bi])) >= window
        assert len(set(np.flatnonzero(blocks[bi])) - window) == 1
    assert (m == np.kron(blocks, np.ones((4, 4), dtype=bool))).all()


def test_evaluator_multiplies_by_the_mask():
    rng = np.random.default_rng(3)
    A, Q, K = rng.random((8, 8)), rng.random((8, 3)), rng.random((8, 3))
    r = evaluate(parse_statements("S(i,j) = mask[causal](i,j) * A(i,j); "
                                  "T(i,j) = mask[band:w=1](i,j) * sum[d](Q(i,d) * K(j,d))"), {"A": A, "Q": Q, "K": K})
    np.testing.assert_allclose(r["S"], np.tril(A))
    np.testing.assert_allclose(r["T"], np.tril(np.triu(Q @ K.T, -1), 1))


@pytest.mark.parametrize("text, why", [
    ("foo", "unknown mask pattern 'foo'"),
    ("band", "needs parameter 'w'"),
    ("band:w=-1", "w must be >= 0"),
    ("band:x=1", "has no parameter 'x'"),
    ("band:w=1,w=2", "given twice"),
    ("band:w=two", "must be an integer"),
    ("causal:w=1", "has no parameter 'w'"),
    ("bigbird:window=3", "needs parameter 'block'"),
    ("bigbird:block=0", "block must be >= 1"),
    ("bigbird:block=2,window=2", "window must be odd"),
])
def test_bad_patterns(text, why):
    with pytest.raises(ProgramError, match=why):
        masks.parse_mask(text)


def test_block_must_divide():
    with pytest.raises(ProgramError, match="block 3 does not divide the 8 rows"):
        masks.dense_mask("bigbird:block=3", 8, 9)


@pytest.mark.parametrize("text, why", [
    ("S(i,j) = mask[nope](i,j) * A(i,j)", "column 15: unknown mask pattern"),
    ("S(i,j) = mask[causal](i) * A(i,j)", "takes two different indices"),
    ("S(i,j) = mask[causal](i,i) * A(i,j)", "takes two different indices"),
])
def test_parser_errors(text, why):
    with pytest.raises(ProgramError, match=why):
        parse_statements(text)
