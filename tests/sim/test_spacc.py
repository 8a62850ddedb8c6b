"""spacc in the reference simulator: orders 1-3 and ``group`` reduced levels against a plain-Python merge
model (unsorted, repeated coordinates; sum and max), the transpose use, and parameter validation."""

import pytest
from hypothesis import given, settings, strategies as st

from fuseflow.errors import GraphError, StreamError
from fuseflow.hw.testing import spacc_streams, st_spacc_tree, tree_map
from fuseflow.samml.registry import SPACC_EMIT_DELAY
from fuseflow.sim import run_op

SETTINGS = settings(max_examples=150, deadline=None)


def _entries(fib, order, prefix=()):
    """(coordinates, value) of every entry of a sub-tree fibre, in stream order."""
    for c, sub in fib:
        if len(prefix) == order - 1:
            yield prefix + (c,), sub
        else:
            yield from _entries(sub, order, prefix + (c,))


def _groups(node, depth):
    """The sub-tree fibres of a group node (a nested list of ``depth`` reduced levels)."""
    if depth == 0:
        yield node
    else:
        for child in node:
            yield from _groups(child, depth - 1)


def _nest(merged, order):
    """Sorted sub-tree fibre of {(a, b, j): value}."""
    if order == 1:
        return sorted((k[0], v) for k, v in merged.items())
    heads = sorted({k[0] for k in merged})
    return [(a, _nest({k[1:]: v for k, v in merged.items() if k[0] == a}, order - 1)) for a in heads]


def model(tree, kept, group, order, op):
    """The expected output streams: every group merged (first value as is, N = 0) and sorted."""
    def merge(node):
        acc = {}
        for fib in _groups(node, group):
            for key, v in _entries(fib, order):
                v = 0.0 if v == "N" else v
                acc[key] = v if key not in acc else (acc[key] + v if op == "sum" else max(acc[key], v))
        return _nest(acc, order)
    return spacc_streams(tree_map(tree, kept, merge), kept, order)


VALUES = st.one_of(st.integers(-9, 9).map(float), st.just("N"))
DIMS = {1: [6], 2: [4, 5], 3: [3, 3, 4]}


@pytest.mark.parametrize("order,group,max_len", [(1, (1, 3), 3), (2, (1, 3), 3), (3, (1, 1), 3), (3, (2, 3), 2)])
def test_merge_model(order, group, max_len):
    @SETTINGS
    @given(st_spacc_tree(order, DIMS[order], VALUES, group=group, max_len=max_len), st.sampled_from(["sum", "max"]))
    def check(case, op):
        tree, kept, g = case
        inputs = spacc_streams(tree, kept + g, order)
        out = run_op("spacc", {"order": order, "group": g, "op": op}, inputs)
        assert out == model(tree, kept, g, order, op)
    check()


def test_transpose_by_group_2():
    # a 2x3 matrix {(0,1): 1, (0,2): 2, (1,0): 3}, every entry a one-coordinate fibre, read as (col, row)
    inputs = {"crd_outer0": [1, "S0", 2, "S1", 0, "S2", "D"], "crd_inner": [0, "S1", 0, "S2", 1, "S3", "D"],
              "val": [1.0, "S1", 2.0, "S2", 3.0, "S3", "D"]}
    out, info = run_op("spacc", {"order": 2, "group": 2}, inputs, stats=True)
    assert out == {"crd_outer0": [0, 1, 2, "S0", "D"], "crd_inner": [1, "S0", 0, "S0", 0, "S1", "D"],
                   "val": [3.0, "S0", 1.0, "S0", 2.0, "S1", "D"]}
    # 12 input steps (the last, cycle 11, takes the closing S2), the emit start delay E (from cycle 12 + E),
    # 3 entries, 3 fibre ends, D
    assert info["cycles"] == 12 + SPACC_EMIT_DELAY[2] + 3 + 3 + 1


def test_order3_permutes_a_tensor():
    # a 2x2x2 tensor (i, j, k) read in its storage order, every entry its own one-coordinate fibres carrying
    # the target coordinates (k, i, j); group 3 (i, j, k all reduced) makes one group of the whole tensor
    ents = {(0, 0, 1): 1.0, (0, 1, 0): 2.0, (1, 0, 1): 3.0, (1, 1, 1): 4.0}

    def unit(i, j, k):
        return [(k, [(i, [(j, ents[i, j, k])])])]
    tree = [[[unit(0, 0, 1)], [unit(0, 1, 0)]], [[unit(1, 0, 1)], [unit(1, 1, 1)]]]
    inputs = spacc_streams(tree, 3, 3)
    assert inputs["crd_outer1"] == [1, "S1", 0, "S2", 1, "S1", 1, "S3", "D"]
    out = run_op("spacc", {"order": 3, "group": 3}, inputs)
    # target entries (k, i, j): (0,0,1)=2, (1,0,0)=1, (1,1,0)=3, (1,1,1)=4
    assert out == {"crd_outer1": [0, 1, "S0", "D"], "crd_outer0": [0, "S0", 0, 1, "S1", "D"],
                   "crd_inner": [1, "S1", 0, "S0", 0, 1, "S2", "D"], "val": [2.0, "S1", 1.0, "S0", 3.0, 4.0, "S2", "D"]}


def test_bad_params_are_one_line_errors():
    with pytest.raises(GraphError, match="group must be an integer >= 1"):
        run_op("spacc", {"order": 1, "group": 0}, {"crd_inner": ["S1", "D"], "val": ["S1", "D"]})
    with pytest.raises(GraphError, match="must be one of 1, 2, 3"):
        run_op("spacc", {"order": 4}, {})


def test_stream_ending_inside_a_group():
    with pytest.raises(StreamError, match="ends inside a group"):
        run_op("spacc", {"order": 2, "group": 2}, {"crd_outer0": [1, "S1", "D"], "crd_inner": [0, "S2", "D"],
                                                   "val": [1.0, "S2", "D"]})


def _double_buffered_cycles(groups):
    """Cycles of an order-1 spacc (run_op: inputs visible from cycle 0, outputs never full) from the timing rule
    of docs/samml.md: ``groups`` = [(input steps, entries)] per group."""
    t = -1                   # the accumulate side's last firing
    free = [0, 0]            # the cycle from which each bank is free
    last_emit = -1
    for g, (steps, entries) in enumerate(groups):
        start = max(t + 1, free[g % 2])
        close = start + steps - 1
        t = close
        first = max(close, last_emit) + 1
        last_emit = first + entries          # entries, then the closing stops
        free[g % 2] = last_emit + 1
    t_done = t + 1
    return max(t_done, last_emit) + 1 + 1


@SETTINGS
@given(st.lists(st.lists(st.lists(st.integers(0, 7), max_size=5), max_size=3), max_size=5))
def test_order1_timing_follows_the_double_buffer_rule(groups):
    # groups of k fibres (one kept level above k): every group's last k fibre (or a bare stop) closes it
    crd = []
    shape = []
    for g, ks in enumerate(groups):
        last = g == len(groups) - 1
        steps = 0
        for n, fibre in enumerate(ks):
            crd += fibre + ([("S2" if last else "S1")] if n == len(ks) - 1 else ["S0"])
            steps += len(fibre) + 1
        if not ks:
            crd.append("S2" if last else "S1")
            steps = 1
        shape.append((steps, len({j for f in ks for j in f})))
    if not groups:
        crd = ["S1"]                         # one empty group: the bare stop of the kept level
        shape = [(1, 0)]
    val = [float(x) if not isinstance(x, str) else x for x in crd]
    out, info = run_op("spacc", {"order": 1}, {"crd_inner": crd + ["D"], "val": val + ["D"]}, stats=True)
    assert info["cycles"] == _double_buffered_cycles(shape)
    assert info["busy"] <= info["cycles"]


def test_busy_counts_cycles_in_which_either_side_fired():
    # docs example: the accumulate side fires in cycles 0-4 and 6-8, the emit side in 3-7 and 8-10
    out, info = run_op("spacc", {"order": 1}, {"crd_inner": [2, 0, "S1", 1, "S1", 3, "S2", "D"],
                                               "val": [1.0, 2.0, "S1", 3.0, "S1", 4.0, "S2", "D"]}, stats=True)
    assert info == {"cycles": 11, "busy": 11}
    out, info = run_op("spacc", {"order": 1}, {"crd_inner": [0, 1, 2, 3, "S1", "S1", "D"],
                                               "val": [1.0, 1.0, 1.0, 1.0, "S1", "S1", "D"]}, stats=True)
    # accumulate 0-5 (D in 6), emit 5-9 (entries 5-8, S0 9) and the empty group's S0 in 10, D in 11
    assert out["crd_inner"] == [0, 1, 2, 3, "S0", "S0", "D"]
    assert info == {"cycles": 12, "busy": 12}
