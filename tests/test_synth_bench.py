"""benchmarks/synth_bench.py's table header names the nextpnr seed(s) its rows were placed with."""

import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "benchmarks"))

import synth_bench  # noqa: E402


def _doc(seeds):
    with open(os.path.join(HERE, "..", "benchmarks", "results", "synth.json")) as f:
        doc = json.load(f)
    rows = [dict(r) for r in doc["results"][:len(seeds)]]
    for r, s in zip(rows, seeds):
        if s is None:
            r.pop("seed", None)
        else:
            r["seed"] = s
    doc["results"] = rows
    return doc


@pytest.mark.parametrize("seeds, says", [((None, None), "nextpnr seed 1,"), ((2, 2), "nextpnr seed 2,"),
                                         ((1, 3), "nextpnr seeds 1, 3 (per row in the JSON),")])
def test_header_names_the_seeds(seeds, says):
    assert says in synth_bench.markdown(_doc(seeds))



def _kernel_rows():
    with open(os.path.join(HERE, "..", "benchmarks", "results", "synth.json")) as f:
        doc = json.load(f)
    ks = [dict(r) for r in doc["results"] if r["kind"] == "kernel"][:2]
    for r in ks:
        r.pop("fmax_by_seed", None)         # the committed table's own seeds
    return doc, ks


def test_kernel_seeds_fold_into_the_row_and_the_median_judges():
    doc, (a, b) = _kernel_rows()
    a.update(fmax_mhz=99.1, seed=1, meets_target=False)
    b.update(fmax_mhz=120.0, seed=1, meets_target=True)
    extra = [dict(a, fmax_mhz=104.2, seed=2), dict(a, fmax_mhz=112.7, seed=3),
             dict(b, fmax_mhz=90.0, seed=2), dict(b, fmax_mhz=95.0, seed=3)]
    rows = synth_bench.fold_seeds([a, b], extra)
    assert rows[0]["fmax_by_seed"] == {"1": 99.1, "2": 104.2, "3": 112.7}
    assert rows[0]["fmax_mhz"] == 99.1                      # the row's own seed stays the table's value
    assert synth_bench.median_fmax(rows[0]) == 104.2
    assert synth_bench.median_fmax(rows[1]) == 95.0
    doc["results"] = rows
    text = synth_bench.markdown(doc)
    assert f"| {a['name']} | seed 1: 99.1, seed 2: 104.2, seed 3: 112.7 | 104.2 |" in text
    assert f"by the median 1 of 2 meet 100 MHz; below: {b['name']} (95)" in text


def test_median_of_an_even_count_and_without_seeds():
    _, (a, _) = _kernel_rows()
    assert synth_bench.median_fmax(dict(a, fmax_by_seed={"1": 90.0, "2": 100.0})) == 95.0
    assert synth_bench.median_fmax(dict(a, fmax_mhz=88.0, fmax_by_seed=None)) == 88.0
    # a failed run at another seed is left out of the fold
    rows = synth_bench.fold_seeds([dict(a)], [dict(a, error="nextpnr: x", seed=2)])
    assert "fmax_by_seed" not in rows[0]


def _names(doc, kind):
    return [r["name"] for r in doc["results"] if r["kind"] == kind]


def test_a_merge_that_replaces_every_row_takes_the_new_runs_time(tmp_path):
    with open(os.path.join(HERE, "..", "benchmarks", "results", "synth.json")) as f:
        doc = json.load(f)
    doc.pop("runs", None)                               # a file from before runs were kept: one run of all rows
    doc["seconds"] = 80000.0
    out = tmp_path / "synth.json"
    out.write_text(json.dumps(doc))
    ops = dict(doc, seconds=4485.0, results=[r for r in doc["results"] if r["kind"] == "op"])
    ops.pop("runs", None)
    ks = dict(ops, seconds=5053.0, results=[r for r in doc["results"] if r["kind"] == "kernel"])
    (tmp_path / "ops.json").write_text(json.dumps(ops))
    (tmp_path / "ks.json").write_text(json.dumps(ks))
    order = [r["name"] for r in doc["results"]]
    assert synth_bench.merge_files(str(out), None, [str(tmp_path / "ops.json")], order) == 0
    merged = json.loads(out.read_text())
    assert merged["seconds"] == 80000.0 + 4485.0        # the old run still made the kernel rows
    assert synth_bench.merge_files(str(out), None, [str(tmp_path / "ks.json")], order) == 0
    merged = json.loads(out.read_text())
    assert merged["seconds"] == 4485.0 + 5053.0         # nothing of the 80,000 s run is left in the table
    assert [run["rows"] for run in merged["runs"]] == [_names(doc, "op"), _names(doc, "kernel")]
    assert "in 9538 s on" in (tmp_path / "synth.md").read_text()


def test_a_partial_run_adds_its_time_and_a_run_without_rows_drops_out():
    runs = [{"seconds": 100.0, "rows": ["a", "b"]}, {"seconds": 10.0, "rows": ["c"]}]
    after, seconds = synth_bench.merge_runs(runs, [{"seconds": 7.0, "rows": ["b"]}], {"a", "b", "c"})
    assert seconds == 117.0 and after[0]["rows"] == ["a"] and runs[0]["rows"] == ["a", "b"]
    after, seconds = synth_bench.merge_runs(after, [{"seconds": 3.0, "rows": ["c"]}], {"a", "b", "c"})
    assert seconds == 110.0 and [run["seconds"] for run in after] == [100.0, 7.0, 3.0]
    after, seconds = synth_bench.merge_runs(after, [], {"b", "c"})          # "a" is no longer a case
    assert seconds == 10.0
