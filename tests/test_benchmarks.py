"""The benchmark scripts stay runnable: ``make bench`` (benchmarks/run_all.py) names only scripts that exist,
and every script imports against the current package (a renamed or removed function fails here, not an hour
into a benchmark run). What the benchmarks measure is checked by their own targets, not here."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
SCRIPTS = sorted(f[:-3] for f in os.listdir(BENCH) if f.endswith(".py") and not f.startswith("_"))


def load(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_benchmark_imports(name):
    module = load(name)
    assert callable(getattr(module, "main", None)), f"benchmarks/{name}.py has no main()"


def test_make_bench_runs_every_results_benchmark():
    run_all = load("run_all")
    names = [b[0] for b in run_all.BENCHMARKS]
    assert len(set(names)) == len(names)
    assert set(names) <= set(SCRIPTS)
    # the scripts left out of make bench are the ones with their own targets or a before/after protocol, and
    # float_loops_check (a pass/fail check of the compiled float functions on 10 million values, no results)
    assert set(SCRIPTS) - set(names) - {"run_all"} == {"synth_bench", "widths_bench", "float_loops_check"}


def test_run_all_rejects_an_unknown_benchmark(capsys):
    assert load("run_all").main(["--only", "no_such_bench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: benchmark no_such_bench: not one of ") and "\n" not in err


def test_run_all_fails_a_benchmark_that_writes_nothing(tmp_path, monkeypatch, capsys):
    """A script that exits 0 without writing its results file is reported as failed (a benchmark once did)."""
    run_all = load("run_all")
    (tmp_path / "quiet.py").write_text("pass\n")
    (tmp_path / "loud.py").write_text("import sys\nopen(sys.argv[1], 'w').write('{}')\n")
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(run_all, "HERE", str(tmp_path))
    monkeypatch.setattr(run_all, "RESULTS", str(results))
    monkeypatch.setattr(run_all, "BENCHMARKS", [("loud", [str(results / "loud.json")], ["loud.json"]),
                                               ("quiet", [], ["quiet.json"])])
    assert run_all.main([]) == 1
    assert "error: quiet: exited 0 but did not write quiet.json" in capsys.readouterr().err
    assert run_all.main(["--only", "loud"]) == 0


def test_pytorch_doc_quotes_models_json():
    """docs/pytorch.md's measured-models table is models_bench's rendering of the committed models.json."""
    import json
    bench = load("models_bench")
    with open(os.path.join(BENCH, "results", "models.json")) as f:
        table = bench.markdown(json.load(f))
    with open(os.path.join(ROOT, "docs", "pytorch.md")) as f:
        doc = f.read()
    assert table in doc, "regenerate it: python benchmarks/models_bench.py --markdown"


def test_attention_bench_smoke(tmp_path):
    """attention_bench --smoke (sequence 64, 2 heads of 8, block 8; seconds) writes its rows, each checked
    against PyTorch, unfused and fully fused."""
    import json
    pytest.importorskip("torch")
    out = tmp_path / "attention.json"
    assert load("attention_bench").main(["--smoke", "-o", str(out), "--engine", "auto"]) == 0   # compiled if built
    rows = json.loads(out.read_text())["rows"]
    assert [(r["seq"], r["fuse"]) for r in rows] == [(64, "none"), (64, "full")]
    assert all(r["ok"] and r["max_rel_error"] <= 1e-9 and r["tokens"] > 0 and r["cycles"] > 0 for r in rows)
    assert rows[1]["kernels"] == 1 and rows[0]["kernels"] > 1


def test_buffered_intersect_model_intersects():
    """The buffered intersect of intersect_window_model emits each fibre's common coordinates and stops (the
    golden from NumPy), and takes no fewer cycles than its longer input has tokens."""
    import random

    import numpy as np
    model = load("intersect_window_model")
    rng = random.Random(5)
    for trial in range(60):
        fibres = [[sorted(rng.sample(range(40), rng.randint(0, 12))) for _ in range(2)]
                  for _ in range(rng.randint(1, 4))]
        a = [c for f in fibres for c in f[0] + ["S0"]] + ["D"]
        b = [c for f in fibres for c in f[1] + ["S0"]] + ["D"]
        golden = [c for f in fibres for c in list(np.intersect1d(f[0], f[1])) + ["S0"]] + ["D"]
        for window in (2, 4, 8):
            cycles, out = model.buffered_run(a, b, window)
            assert out == golden, (trial, window)
            assert cycles >= max(len(a), len(b))


def test_hardware_doc_quotes_intersect_floor_json():
    """docs/hardware.md's matched-pair floor table is benchmarks/results/intersect_floor.json."""
    import json
    with open(os.path.join(BENCH, "results", "intersect_floor.json")) as f:
        doc = json.load(f)
    with open(os.path.join(ROOT, "docs", "hardware.md")) as f:
        text = f.read()
    table = text[text.index("| kernel | RTL cycles | stream bound | matched-pair floor |"):].split("\n\n")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines()[2:]}
    quoted = 0
    for r in doc["results"]:
        if r["cycles_over_floor_bound"] == r["cycles_over_stream_bound"]:
            continue                                  # not intersect-bound (outer product): not in the table
        cells = rows[r["kernel"]]
        assert cells[0].replace(",", "") == str(r["rtl_cycles"]) and r["rtl_cycles_equal"]
        assert cells[1].replace(",", "") == str(r["stream_bound"])
        assert cells[2].replace(",", "") == str(r["floor_bound"])
        assert cells[3] == f"{r['floor_over_stream_bound']:.2f}"
        assert cells[4].strip("*") == f"{r['cycles_over_floor_bound']:.2f}"
        assert cells[5] == f"{r['cycles_over_stream_bound']:.2f}"
        quoted += 1
    assert quoted == 6


def test_sim_bench_smoke(tmp_path):
    """sim_bench runs both engines in its children and writes rows of the documented shape: a case the compiled
    engine runs has both engines' timings, equal cycles and tokens and a ratio; a case it cannot run yet has
    ``"compiled": null`` and the reason."""
    import json
    import subprocess
    import sys

    from fuseflow.sim import compiled
    out = tmp_path / "sim.json"
    r = subprocess.run([sys.executable, os.path.join(BENCH, "sim_bench.py"), "--smoke", "--cases",
                        "spmv_csr,spmv_laned", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["mode"] == "smoke" and doc["all_exact"] and doc["machine"]["cpus"]
    assert [row["case"] for row in doc["results"]] == ["spmv_csr", "spmv_laned"]
    for row in doc["results"]:
        assert row["tokens"] > 0 and row["cycles"] > 0 and row["nodes"] > 0
        py = row["python"]
        assert len(py["runs"]) == 1 and py["median"] > 0 and py["peak_rss_mb"] > 0
        assert py["tokens_per_s"] == pytest.approx(row["tokens"] / py["median"], rel=0.01)
        if row["compiled"] is None:
            assert row["reasons"]["compiled"] and row["ratio"] is None
            assert row["reasons"]["compiled"] == compiled.unsupported(
                load("sim_bench").CASES[row["case"]].build(row["size"])[0])
            continue
        c = row["compiled"]
        assert c["median"] > 0 and c["peak_rss_mb"] > 0 and row["ratio"]["median"] > 0
        assert row["exact"] == {"tokens_equal": True, "cycles_equal": True, "outputs_equal": True,
                                "engines_compared": True}
    if compiled.available():
        assert doc["results"][0]["compiled"] is not None          # SpMV runs on the compiled engine
    assert "| spmv_csr |" in load("sim_bench").markdown(doc)
    # --merge: rerun one case, keep the other's row and the file's own run facts
    r = subprocess.run([sys.executable, os.path.join(BENCH, "sim_bench.py"), "--smoke", "--cases", "spmv_laned",
                        "--merge", "-o", str(out)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    merged = json.loads(out.read_text())
    assert [row["case"] for row in merged["results"]] == ["spmv_csr", "spmv_laned"]
    assert merged["results"][0] == doc["results"][0] and merged["seconds"] == doc["seconds"]
    assert merged["results"][1]["commit"] and [m["cases"] for m in merged["merged"]] == [["spmv_laned"]]


def test_sim_json_rows_agree():
    """The committed sim.json: wherever both engines ran, they agreed on cycles, tokens and outputs."""
    import json
    with open(os.path.join(BENCH, "results", "sim.json")) as f:
        doc = json.load(f)
    assert doc["all_exact"]
    for row in doc["results"]:
        if row.get("python") and row.get("compiled"):
            assert all(row["exact"].values()), row["case"]


def test_evaluation_doc_quotes_the_ogb_scale_results():
    """docs/evaluation.md's OGB-scale paragraph is printed from the committed results file."""
    import json
    bench = load("ogb_scale_bench")
    with open(os.path.join(BENCH, "results", "ogb_scale.json"), encoding="utf-8") as f:
        data = json.load(f)
    with open(os.path.join(ROOT, "docs", "evaluation.md"), encoding="utf-8") as f:
        doc = f.read()
    def words(text):                       # the paragraph as wrapped in the page (lines of at most 120 characters)
        return " ".join(text.split())
    assert words(bench.docs_paragraph(data)) in words(doc), "regenerate: python benchmarks/ogb_scale_bench.py --docs"
    sim = [r for r in data["rows"] if "cycles" in r]
    assert sim and all(r["cycles"] > 0 for r in sim)


def test_tiling_results_tile_fusion_section():
    """benchmarks/results/tiling.json's ``tile_fusion`` runs: every output checked, the ratios the cycles' own,
    tile fusion beating unfused tiling on Cora (issue 41) and docs/tiling.md's tile-fusion tables printed from the
    file."""
    import json
    bench = load("tiling_bench")
    with open(os.path.join(BENCH, "results", "tiling.json")) as f:
        doc = json.load(f)
    if "tile_fusion" not in doc:
        pytest.skip("no tile_fusion section")
    with open(os.path.join(ROOT, "docs", "tiling.md")) as f:
        docs = f.read()
    keys = ("unfused", "wavefront", "wavefront_one_at_a_time", "unfused_same_tiles")
    for r in doc["tile_fusion"]["runs"]:
        for key in keys:
            assert r[key]["ok"], (r["graph"], r["ordering"], key)
        un, wf, one, same = (r[k]["cycles_hbm2"] for k in keys)
        assert r["ratio_wavefront_vs_unfused"] == round(un / wf, 4)
        assert r["ratio_wavefront_vs_one_at_a_time"] == round(one / wf, 4)
        assert r["ratio_wavefront_vs_unfused_same_tiles"] == round(same / wf, 4)
    assert max(r["ratio_wavefront_vs_unfused"] for r in doc["tile_fusion"]["runs"] if r["graph"] == "cora") > 1.1
    for graph in {r["graph"] for r in doc["tile_fusion"]["runs"]}:
        assert bench.fusion_table(doc, graph) in docs, graph


def test_tiling_doc_quotes_the_tiling_results():
    """docs/tiling.md's SpMV table is printed from the committed results file, and the file's HBM-class rows
    meet issue 41's target (>= 0.8 nonzeros per cycle under the HBM2 contract from 10^5 to 10^7 nonzeros)."""
    import json
    bench = load("tiling_bench")
    with open(os.path.join(BENCH, "results", "tiling.json"), encoding="utf-8") as f:
        data = json.load(f)
    with open(os.path.join(ROOT, "docs", "tiling.md"), encoding="utf-8") as f:
        doc = f.read()
    assert bench.docs_table(data) in doc, "regenerate: python benchmarks/tiling_bench.py --docs"
    hbm = [r for r in data["rows"] if r["kernel"] == "spmv" and r["budget_bits"] == data["hbm_budget_bits"]
           and r["nnz"] >= 1e5]
    assert {round(r["nnz"], -5) for r in hbm} >= {100000, 1000000, 10000000} and all(r["ok"] for r in hbm)
    assert data["target_met"] == all(r["nnz_per_cycle_hbm2"] >= 0.8 for r in hbm)
