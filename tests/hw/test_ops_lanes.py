"""parallelize and serialize RTL vs run_op, under random valid/ready stalls."""

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


def split_units(rows, lanes, depth):
    """Key and payload streams of ``lanes`` lanes for ``rows``: [(coordinate, unit tokens)] in order, dealt
    round-robin; a unit at depth >= 1 is a list of fibres (depth 1: one fibre of coordinates)."""
    keys = [[] for _ in range(lanes)]
    pays = [[] for _ in range(lanes)]
    for k, (c, unit) in enumerate(rows):
        keys[k % lanes].append(c)
        pays[k % lanes].append(unit)
    kstreams = [ks + ["S0", "D"] for ks in keys]
    pstreams = []
    for units in pays:
        if depth == 0:
            pstreams.append(list(units) + ["S0", "D"])
            continue
        toks = []
        for j, unit in enumerate(units):
            toks += list(unit) + [f"S{depth if j == len(units) - 1 else depth - 1}"]
        pstreams.append((toks or [f"S{depth}"]) + ["D"])
    return kstreams, pstreams


def merged(rows, depth):
    if depth == 0:
        return [u for _, u in rows] + ["S0", "D"]
    toks = []
    for j, (_, unit) in enumerate(rows):
        toks += list(unit) + [f"S{depth if j == len(rows) - 1 else depth - 1}"]
    return (toks or [f"S{depth}"]) + ["D"]


@st.composite
def serialize_case(draw):
    lanes = draw(st.integers(2, 4))
    depth = draw(st.integers(0, 1))
    crds = sorted(draw(st.sets(st.integers(0, 60), max_size=9)))
    if depth == 0:
        rows = [(c, draw(st.integers(0, 999))) for c in crds]
    else:
        rows = [(c, sorted(draw(st.sets(st.integers(0, 30), max_size=3)))) for c in crds]
    return lanes, depth, rows


@hw_settings(25)
@given(serialize_case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_serialize_random(case, stalls, seed):
    lanes, depth, rows = case
    # the lanes drop some rows (a unit may be missing in any lane): keep a random-looking subset
    kept = [r for k, r in enumerate(rows) if (k * 7 + seed) % 5]
    keys, pays = split_units(kept, lanes, depth)
    inputs = {**{f"key{i}": keys[i] for i in range(lanes)}, **{f"in{i}": pays[i] for i in range(lanes)}}
    got, _, _ = check_op("serialize", {"lanes": lanes, "depth": depth}, inputs, any_kind="crd", stalls=stalls,
                         seed=seed)
    assert got == {"out": merged(kept, depth)}


@hw_settings(25)
@given(st.integers(2, 5), st.lists(st.one_of(st.integers(0, 99), st.just("N")), max_size=12),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_parallelize_random(lanes, data, stalls, seed):
    toks = data + ["S0", "D"]
    got, _, _ = check_op("parallelize", {"lanes": lanes}, {"in": toks}, any_kind="ref", stalls=stalls, seed=seed)
    assert got == {f"out{i}": data[i::lanes] + ["S0", "D"] for i in range(lanes)}
