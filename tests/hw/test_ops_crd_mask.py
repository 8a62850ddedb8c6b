"""crd_mask RTL vs run_op: the docs examples, then random patterns, fibres and rows under stalls."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_sorted_crds, st_tree, stream, tree_map


@pytest.mark.parametrize("params, inputs, crd", [
    ({"mask": "causal", "rows": 4, "dim": 6, "arity": 1},
     {"outer": [0, 2, "S0", 3, "S1", "D"], "crd": [1, 2, "S0", 0, 2, 3, "S1", 3, "S2", "D"],
      "ref0": [10, 11, "S0", 12, 13, 14, "S1", 15, "S2", "D"]}, ["S0", 0, 2, "S1", 3, "S2", "D"]),
    ({"mask": "band:w=1", "rows": 4, "dim": 6, "arity": 2},
     {"outer": [0, 3, "S0", "D"], "crd": [0, 2, 5, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
      "ref1": [20, 21, 22, "S0", 23, "S1", "D"]}, [0, "S0", "S1", "D"]),
    ({"mask": "bigbird:block=2,window=1,global=1,random=1,seed=0", "rows": 8, "dim": 8, "arity": 0},
     {"outer": [3, "S0", "D"], "crd": [1, 4, 6, "S1", "D"]}, [1, 6, "S1", "D"]),
    ({"mask": "causal", "rows": 2, "dim": 2, "arity": 1},
     {"outer": ["S0", "D"], "crd": ["S1", "D"], "ref0": ["S1", "D"]}, ["S1", "D"]),
])
def test_examples(params, inputs, crd, stalls):
    out, _, _ = check_op("crd_mask", params, inputs, stalls=stalls, seed=5)
    assert out["crd"] == crd


@st.composite
def filter_case(draw):
    kind = draw(st.sampled_from(["causal", "band", "bigbird"]))
    if kind == "bigbird":
        block = draw(st.integers(1, 3))
        rows, cols = block * draw(st.integers(1, 4)), block * draw(st.integers(1, 4))
        text = (f"bigbird:block={block},window={draw(st.sampled_from([0, 1, 3]))},global={draw(st.integers(0, 2))},"
                f"random={draw(st.integers(0, 2))},seed={draw(st.integers(0, 99))}")
    else:
        rows, cols = draw(st.integers(1, 8)), draw(st.integers(1, 8))
        text = "causal" if kind == "causal" else f"band:w={draw(st.integers(0, 3))}"
    depth = draw(st.integers(0, 2))
    # a tree of rows, each row with a fibre of sorted columns
    tree = draw(st_tree(depth, st.tuples(st.integers(0, rows - 1), st_sorted_crds(cols))))
    outer = stream(tree_map(tree, depth, lambda leaf: leaf[0]), depth)
    inner = stream(tree_map(tree, depth, lambda leaf: leaf[1]), depth + 1)
    arity = draw(st.integers(0, 2))
    inputs = {"outer": outer, "crd": inner}
    for n in range(arity):
        inputs[f"ref{n}"] = [t + 100 * (n + 1) if isinstance(t, int) else t for t in inner]
    return {"mask": text, "rows": rows, "dim": cols, "arity": arity}, inputs


@hw_settings(25)
@given(filter_case())
def test_random_no_stalls(case):
    check_op("crd_mask", *case)


@hw_settings(25)
@given(filter_case(), st.integers(0, 1 << 16))
def test_random_stalls(case, seed):
    check_op("crd_mask", *case, stalls=0.4, seed=seed)


@hw_settings(10)
@given(filter_case(), st.integers(0, 1 << 16))
def test_random_fifos(case, seed):
    check_op("crd_mask", *case, stalls=0.3, seed=seed, fifo_depth=2)


@pytest.mark.slow
@hw_settings(300)
@given(filter_case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep(case, stalls, seed):
    check_op("crd_mask", *case, stalls=stalls, seed=seed)
