"""The matched-pair floor of an intersect (fuseflow/sim/bounds.py) against a search over every legal schedule,
and against the intersect's firings in whole kernels."""

import random
from collections import deque

import numpy as np
import pytest

from fuseflow.samml import kernels
from fuseflow.sim import run
from fuseflow.sim.bounds import intersect_floors, matched_pair_floor


def streams_of(fibre_lists):
    """Coordinate streams from per-input fibre lists: each fibre closed by S0, the stream by D."""
    return [[c for f in fibres for c in list(f) + ["S0"]] + ["D"] for fibres in fibre_lists]


def search_floor(streams):
    """Breadth-first search over schedules: a firing pops any nonempty set of coordinate heads not present in
    every input's current fibre, or every head when all heads are one matched coordinate, or every head when all
    are the same stop."""
    n = len(streams)

    def fibre_of(s, p):
        lo = p
        while lo > 0 and not isinstance(s[lo - 1], str):
            lo -= 1
        hi = p
        while not isinstance(s[hi], str):
            hi += 1
        return set(s[lo:hi])

    start, end = (0,) * n, tuple(len(s) for s in streams)
    dist = {start: 0}
    todo = deque([start])
    while todo:
        st = todo.popleft()
        if st == end:
            return dist[st]
        heads = [s[p] for s, p in zip(streams, st)]
        moves = []
        if all(isinstance(h, str) for h in heads):
            assert len(set(heads)) == 1
            moves.append((1,) * n)
        else:
            fibres = [fibre_of(s, p) for s, p in zip(streams, st)]
            common = set.intersection(*fibres)
            free = [i for i, h in enumerate(heads) if not isinstance(h, str) and h not in common]
            if len(set(heads)) == 1 and heads[0] in common:
                moves.append((1,) * n)
            for mask in range(1, 1 << len(free)):
                step = [0] * n
                for b, i in enumerate(free):
                    if mask >> b & 1:
                        step[i] = 1
                moves.append(tuple(step))
        for step in moves:
            nxt = tuple(p + d for p, d in zip(st, step))
            if nxt not in dist:
                dist[nxt] = dist[st] + 1
                todo.append(nxt)
    raise AssertionError("no schedule reaches the end")


@pytest.mark.parametrize("seed", range(40))
def test_floor_equals_search(seed):
    rng = random.Random(seed)
    arity = 2 if seed % 3 else 3
    nfib = rng.randint(1, 3)
    lists = [[sorted(rng.sample(range(10), rng.randint(0, 5))) for _ in range(nfib)] for _ in range(arity)]
    streams = streams_of(lists)
    assert matched_pair_floor(streams) == search_floor(streams)


def test_floor_hand_cases():
    # identical fibres: every token is a match, one firing each, plus S0 and D
    assert matched_pair_floor(streams_of([[[1, 2, 3]], [[1, 2, 3]]])) == 5
    # no common coordinate: the longer side, one token per firing, then S0 and D
    assert matched_pair_floor(streams_of([[[1, 3, 5, 7]], [[2]]])) == 6
    # 4 below the match on one side, 1 on the other: max(5, 2) for the match, then the tails max(0, 3)
    assert matched_pair_floor(streams_of([[[0, 1, 2, 3, 9]], [[5, 9, 10, 11, 12]]])) == 5 + 3 + 2
    with pytest.raises(ValueError):
        matched_pair_floor([[1, "S0", "D"], [1, "D"]])


@pytest.mark.parametrize("name", ["spmv_csr", "elementwise_mul", "ttv"])
def test_intersect_fires_at_least_its_floor(name, monkeypatch):
    """The floor binds an intersect that pops one token per input per firing (look-ahead off); the look-ahead's
    second pops take the intersect below it."""
    import fuseflow.sim.ops.intersect as intersect
    p = kernels.build(name, 16)
    inputs = kernels.random_inputs(p, density=0.3, seed=3)
    res = run(p, inputs, mode="fixed", trace=True)
    (floors,) = intersect_floors(p, res)
    assert floors
    assert all(busy <= floor for floor, busy in floors.values())
    assert any(busy < floor for floor, busy in floors.values())
    with pytest.raises(ValueError):
        intersect_floors(p, run(p, inputs, mode="fixed"))
    monkeypatch.setattr(intersect, "lookahead", lambda chans: False)
    res = run(p, inputs, mode="fixed", trace=True, engine="python")     # the patched model is the Python engine's
    (floors,) = intersect_floors(p, res)
    for node, (floor, busy) in floors.items():
        # the op is one of the intersects the floor covers; its input streams carry the tokens counted
        assert busy >= floor > 0


def test_floor_counts_the_recorded_streams():
    # spmv: the intersect's inputs are B's column coordinates row by row and c's coordinates once per row
    p = kernels.build("spmv_csr", 8)
    inputs = kernels.random_inputs(p, density=0.4, seed=1)
    res = run(p, inputs, mode="fixed", trace=True)
    (floors,) = intersect_floors(p, res)
    (node,) = floors
    mat, vec = np.asarray(inputs["B"]), np.asarray(inputs["c"])
    rows = [list(np.flatnonzero(r)) for r in mat]          # B's rows are dense: an empty row is an empty fibre
    crd = [list(np.flatnonzero(vec))] * len(rows)
    golden = matched_pair_floor(streams_of([rows, crd]))
    assert floors[node][0] == golden
