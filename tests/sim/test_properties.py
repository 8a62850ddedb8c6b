"""Property tests: random fibres through the joiners, repeat, reduce, crd_drop, spacc and the writers.

Expected results are computed directly from the random fibres (Python sets, sums, dicts), never by the ops."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.sim import run_op

SETTINGS = settings(max_examples=60, deadline=None)

coords = st.lists(st.integers(0, 15), max_size=8, unique=True).map(sorted)
rows = st.lists(coords, min_size=1, max_size=5)


def csr_level(fibres):
    seg, crd = [0], []
    for f in fibres:
        crd += f
        seg.append(len(crd))
    return seg, crd


def scan_rows(fibres):
    """Coordinate and reference streams of a CSR matrix's column level (dense rows)."""
    seg, crd = csr_level(fibres)
    rows_out = run_op("level_scan", {"format": "dense", "dim": len(fibres)}, {"ref": [0, "D"]})
    out = run_op("level_scan", {"format": "compressed", "seg": seg, "crd": crd}, {"ref": rows_out["ref"]})
    return out["crd"], out["ref"], crd


def split(stream):
    """Rows of a two-level stream whose top fibre is the only one (each stop ends one row)."""
    out, cur = [], []
    for tok in stream[:-1]:
        if isinstance(tok, str):
            out.append(cur)
            cur = []
        else:
            cur.append(tok)
    assert stream[-1] == "D"
    return out


@SETTINGS
@given(st.data())
def test_intersect_and_union_are_set_operations(data):
    a = data.draw(rows)
    b = data.draw(st.lists(coords, min_size=len(a), max_size=len(a)))
    ca, ra, crd_a = scan_rows(a)
    cb, rb, crd_b = scan_rows(b)
    ins = {"crd0": ca, "ref0": ra, "crd1": cb, "ref1": rb}
    out = run_op("intersect", {}, ins)
    assert split(out["crd"]) == [sorted(set(x) & set(y)) for x, y in zip(a, b)]
    for c, r0, r1 in zip(out["crd"], out["ref0"], out["ref1"]):
        if not isinstance(c, str):
            assert crd_a[r0] == c and crd_b[r1] == c
    out = run_op("union", {}, ins)
    assert split(out["crd"]) == [sorted(set(x) | set(y)) for x, y in zip(a, b)]
    row = 0
    for c, r0, r1 in zip(out["crd"], out["ref0"], out["ref1"]):
        if isinstance(c, str):
            row += 1
            continue
        assert (r0 == "N") == (c not in a[row]) and (r0 == "N" or crd_a[r0] == c)
        assert (r1 == "N") == (c not in b[row]) and (r1 == "N" or crd_b[r1] == c)


@SETTINGS
@given(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 4)), max_size=6))
def test_repeat_emits_each_item_count_times(items):
    ins = [x for x, _ in items] + ["S0", "D"]
    sig = []
    for _, c in items:
        sig += ["R"] * c + ["S"]
    if not items:
        sig = ["S"]
    sig.append("D")
    want = []
    for k, (x, c) in enumerate(items):
        want += [x] * c + ["S1" if k == len(items) - 1 else "S0"]
    if not items:
        want = ["S1"]
    want.append("D")
    assert run_op("repeat", {}, {"in": ins, "repsig": sig})["out"] == want


values = st.lists(st.lists(st.integers(-50, 50).map(float), max_size=5), min_size=1, max_size=6)


def value_stream(fibres):
    out = []
    for k, f in enumerate(fibres):
        out += f + ["S1" if k == len(fibres) - 1 else "S0"]
    return out + ["D"]


@SETTINGS
@given(values)
def test_reduce_sums_non_empty_fibres(fibres):
    out = run_op("reduce", {}, {"val": value_stream(fibres)})["val"]
    assert out == [sum(f) for f in fibres if f] + ["S0", "D"]
    out = run_op("reduce", {"op": "max"}, {"val": value_stream(fibres)})["val"]
    assert out == [max(f) for f in fibres if f] + ["S0", "D"]


@SETTINGS
@given(values)
def test_reduce_with_crd_gives_a_value_per_coordinate(fibres):
    crd = list(range(len(fibres))) + ["S0", "D"]
    out = run_op("reduce", {}, {"val": value_stream(fibres), "crd": crd})["val"]
    assert out == [float(sum(f)) for f in fibres] + ["S0", "D"]


@SETTINGS
@given(rows)
def test_crd_drop_removes_empty_fibres(fibres):
    inner = []
    for k, f in enumerate(fibres):
        inner += f + ["S1" if k == len(fibres) - 1 else "S0"]
    inner.append("D")
    outer = list(range(len(fibres))) + ["S0", "D"]
    out = run_op("crd_drop", {}, {"outer": outer, "inner": inner})
    kept = [k for k, f in enumerate(fibres) if f]
    assert out["outer"] == kept + ["S0", "D"]
    want = []
    for n, k in enumerate(kept):
        want += fibres[k] + ["S1" if n == len(kept) - 1 else "S0"]
    assert out["inner"] == (want if kept else ["S1"]) + ["D"]
    # an aligned reference stream (the coordinates + 100) is filtered exactly as inner
    ref = [x + 100 if isinstance(x, int) else x for x in inner]
    out = run_op("crd_drop", {"arity": 1}, {"outer": outer, "inner": inner, "ref0": ref})
    assert out["ref0"] == [x + 100 if isinstance(x, int) else x for x in out["inner"]]
    assert out["outer"] == kept + ["S0", "D"]


@SETTINGS
@given(st.lists(st.lists(st.dictionaries(st.integers(0, 9), st.integers(-9, 9).map(float), max_size=4),
                         max_size=4), min_size=1, max_size=3))
def test_spacc_merges_every_k_fibre_of_a_group(groups):
    crd, val = [], []
    for g, ks in enumerate(groups):
        for n, fibre in enumerate(ks):
            items = sorted(fibre.items())
            crd += [j for j, _ in items]
            val += [v for _, v in items]
            last_k = n == len(ks) - 1
            stop = ("S2" if g == len(groups) - 1 else "S1") if last_k else "S0"
            crd.append(stop)
            val.append(stop)
        if not ks:   # a group with no k fibre is a bare stop one level up
            stop = "S2" if g == len(groups) - 1 else "S1"
            crd.append(stop)
            val.append(stop)
    out = run_op("spacc", {"order": 1}, {"crd_inner": crd + ["D"], "val": val + ["D"]})
    want_c, want_v = [], []
    for g, ks in enumerate(groups):
        merged = {}
        for fibre in ks:
            for j, v in fibre.items():
                merged[j] = merged.get(j, 0.0) + v
        want_c += sorted(merged) + ["S1" if g == len(groups) - 1 else "S0"]
        want_v += [merged[j] for j in sorted(merged)] + ["S1" if g == len(groups) - 1 else "S0"]
    assert out["crd_inner"] == want_c + ["D"]
    assert out["val"] == want_v + ["D"]


@SETTINGS
@given(rows, st.integers(0, 5))
def test_level_write_rebuilds_a_canonical_level(fibres, pad):
    fibres = [f for f in fibres if f]            # canonical: no empty fibre below the top level
    seg, crd = csr_level(fibres)
    top = {"format": "compressed", "seg": [0, len(fibres)], "crd": list(range(len(fibres)))}
    rows_out = run_op("level_scan", top, {"ref": [0, "D"]})
    cols = run_op("level_scan", {"format": "compressed", "seg": seg, "crd": crd}, {"ref": rows_out["ref"]})
    assert run_op("level_write", {"level": 1}, {"crd": cols["crd"]}) == {"seg": seg, "crd": crd}
    assert run_op("level_write", {"level": 0}, {"crd": rows_out["crd"]}) == top_level(len(fibres))
    vals = [float(v) for v in range(len(crd))]
    loaded = run_op("array", {"vals": vals}, {"ref": cols["ref"]})["val"]
    assert run_op("value_write", {}, {"val": loaded}) == {"vals": vals}


def top_level(n):
    return {"seg": [0, n], "crd": list(range(n))}


def test_spacc_rejects_a_stream_that_ends_inside_a_group():
    import pytest
    from fuseflow.errors import StreamError
    with pytest.raises(StreamError, match="ends inside a group"):
        run_op("spacc", {"order": 1}, {"crd_inner": [1, 2, "S0", "D"], "val": [1.0, 2.0, "S0", "D"]})
