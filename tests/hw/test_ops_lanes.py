"""parallelize and serialize RTL vs run_op, under random valid/ready stalls."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings


@pytest.mark.parametrize("lanes, toks, kind", [
    (2, [0, 2, 3, 5, 7, "S0", "D"], "crd"),
    (3, [4, "N", 6, "S0", 1, "S1", "D"], "ref"),
    (4, ["S0", "D"], "crd"),
])
def test_parallelize_examples(lanes, toks, kind, stalls):
    got, _, _ = check_op("parallelize", {"lanes": lanes}, {"in": toks}, any_kind=kind, stalls=stalls, seed=3)
    assert sorted(x for v in got.values() for x in v if not isinstance(x, str)) == \
        sorted(x for x in toks if not isinstance(x, str))


def stream_of(fibres, depth):
    """One stream: key fibres (lists of (coordinate, unit)) closed by S0 (the last by S_top) with every
    coordinate replaced by its unit (depth 0: a token; depth d >= 1: a fibre closed by S_(d-1), the last one of a
    key fibre by S_(d+m), an empty key fibre by the bare S_(d+m))."""
    toks = []
    top = 1 if len(fibres) > 1 else 0
    for f, rows in enumerate(fibres):
        m = top if f == len(fibres) - 1 else 0
        if depth == 0:
            toks += [u for _, u in rows] + [f"S{m}"]
            continue
        for j, (_, unit) in enumerate(rows):
            toks += list(unit) + [f"S{depth + m if j == len(rows) - 1 else depth - 1}"]
        if not rows:
            toks.append(f"S{depth + m}")
    return toks + ["D"]


def split_units(fibres, lanes, depth):
    """Key and payload streams of ``lanes`` lanes for key fibres [[(coordinate, unit tokens)]] dealt round-robin
    (restarting in every fibre, like parallelize); a unit at depth >= 1 is one fibre of coordinates."""
    shares = [[[r for k, r in enumerate(rows) if k % lanes == lane] for rows in fibres] for lane in range(lanes)]
    keys = [stream_of([[(c, c) for c, _ in rows] for rows in share], 0) for share in shares]
    return keys, [stream_of(share, depth) for share in shares]


def merged(fibres, depth):
    return stream_of(fibres, depth)


@st.composite
def serialize_case(draw):
    lanes = draw(st.integers(2, 4))
    depth = draw(st.integers(0, 2))
    fibres = []
    for _ in range(draw(st.integers(1, 3))):            # several key fibres: a serializer below an outer index
        crds = sorted(draw(st.sets(st.integers(0, 60), max_size=7)))
        if depth == 0:
            fibres.append([(c, draw(st.integers(0, 999))) for c in crds])
        else:
            fibres.append([(c, sorted(draw(st.sets(st.integers(0, 30), min_size=depth - 1, max_size=3))))
                           for c in crds])
    return lanes, depth, fibres


@hw_settings(25)
@given(serialize_case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_serialize_random(case, stalls, seed):
    lanes, depth, fibres = case
    # the lanes drop some rows (a unit may be missing in any lane): keep a random-looking subset
    kept = [[r for k, r in enumerate(rows) if (k * 7 + seed) % 5] for rows in fibres]
    keys, pays = split_units(kept, lanes, depth)
    inputs = {**{f"key{i}": keys[i] for i in range(lanes)}, **{f"in{i}": pays[i] for i in range(lanes)}}
    got, _, _ = check_op("serialize", {"lanes": lanes, "depth": depth}, inputs, any_kind="crd", stalls=stalls,
                         seed=seed)
    assert got == {"out": merged(kept, depth)}


def test_serialize_key_fibres():
    """Keys in two fibres (a serializer under an outer index), depth 1: the second lane has nothing in the
    first fibre (its bare S1) and the first lane nothing in the second (its bare S2)."""
    inputs = {"key0": [0, 4, "S0", "S1", "D"], "key1": ["S0", 3, "S1", "D"],
              "in0": [7, "S0", 8, "S1", "S2", "D"], "in1": ["S1", 5, 6, "S2", "D"]}
    got, _, _ = check_op("serialize", {"lanes": 2, "depth": 1}, inputs, any_kind="crd", stalls=0.0, seed=1)
    assert got == {"out": [7, "S0", 8, "S1", 5, 6, "S2", "D"]}


@hw_settings(25)
@given(st.integers(2, 5), st.lists(st.one_of(st.integers(0, 99), st.just("N")), max_size=12),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_parallelize_random(lanes, data, stalls, seed):
    toks = data + ["S0", "D"]
    got, _, _ = check_op("parallelize", {"lanes": lanes}, {"in": toks}, any_kind="ref", stalls=stalls, seed=seed)
    assert got == {f"out{i}": data[i::lanes] + ["S0", "D"] for i in range(lanes)}


@pytest.mark.parametrize("lanes", [2, 3, 4, 5, 8])
def test_serialize_smallest_is_numpy_argmin(lanes):
    """The serializer's lane choice (all-pairs comparisons): the minimum and the first lane holding it (NumPy's
    argmin), ties included (values drawn from a few so equal heads are common)."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from fuseflow.hw.ops.serialize import smallest

    rng = np.random.default_rng(lanes)
    cases = rng.integers(0, 6, (60, lanes))
    heads = [Signal(3, name=f"head{i}") for i in range(lanes)]
    m = Module()
    low, lane = Signal(3), Signal(range(lanes))
    value, index = smallest(heads)
    m.d.comb += [low.eq(value), lane.eq(index)]
    got = []

    async def tb(ctx):
        for row in cases:
            for h, v in zip(heads, row):
                ctx.set(h, int(v))
            got.append((ctx.get(low), ctx.get(lane)))

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert got == [(int(row.min()), int(np.argmin(row))) for row in cases]
