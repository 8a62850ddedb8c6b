"""locate in the simulator: references computed from the random fibres directly, the equivalence with a dense
level_scan merged by an intersect, timing, and malformed streams."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.errors import StreamError
from fuseflow.hw.testing import st_sorted_crds, st_tree, stream, tree_map
from fuseflow.sim import run_op

SETTINGS = settings(max_examples=80, deadline=None)


@st.composite
def case(draw, allow_n=True):
    dim = draw(st.integers(1, 7))
    depth = draw(st.integers(0, 2))
    parent = st.one_of(st.integers(0, 30), st.just("N")) if allow_n else st.integers(0, 30)
    tree = draw(st_tree(depth, st.tuples(parent, st_sorted_crds(dim))))
    ref = stream(tree_map(tree, depth, lambda rc: rc[0]), depth)
    crd = stream(tree_map(tree, depth, lambda rc: rc[1]), depth + 1)
    want = stream(tree_map(tree, depth, lambda rc: ["N" if rc[0] == "N" else rc[0] * dim + c for c in rc[1]]),
                  depth + 1)
    empties = sum(1 for x in tree_map_flat(tree, depth) if not x[1])
    return dim, ref, crd, want, empties


def tree_map_flat(tree, depth):
    if depth == 0:
        return [tree]
    return [x for c in tree for x in tree_map_flat(c, depth - 1)]


@SETTINGS
@given(case())
def test_references_and_timing(c):
    dim, ref, crd, want, empties = c
    out, info = run_op("locate", {"dim": dim}, {"ref": ref, "crd": crd}, stats=True)
    assert out["ref"] == want
    # one cycle per coordinate-stream token, one more per parent reference whose fibre is empty
    assert info["cycles"] == len(crd) + empties


@SETTINGS
@given(case(allow_n=False))
def test_same_as_dense_scan_intersected(c):
    """locate(ref, crd) gives the dense side's references of intersect(crd, scan_dense(ref))."""
    dim, ref, crd, _, _ = c
    scan = run_op("level_scan", {"format": "dense", "dim": dim}, {"ref": ref})
    fake_refs = [t if isinstance(t, str) else 0 for t in crd]
    joined = run_op("intersect", {}, {"crd0": crd, "ref0": fake_refs, "crd1": scan["crd"], "ref1": scan["ref"]})
    assert joined["crd"] == crd
    assert run_op("locate", {"dim": dim}, {"ref": ref, "crd": crd})["ref"] == joined["ref1"]


@pytest.mark.parametrize("ref, crd", [
    ([0, "D"], [1, "D"]),                  # coordinates end without closing the fibre
    ([0, "S0", "D"], [1, "S0", "D"]),      # S0 closes the fibre but the parent's next is a stop
    (["S0", "D"], ["S0", "D"]),            # a bare parent stop needs S1
    ([0, "D"], ["N", "S0", "D"]),          # N is no coordinate
])
def test_malformed(ref, crd):
    with pytest.raises(StreamError):
        run_op("locate", {"dim": 4}, {"ref": ref, "crd": crd})
