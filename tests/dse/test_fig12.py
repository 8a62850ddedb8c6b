"""Figure 12 at the paper's sizes (``python -m fuseflow.dse run fig12``): the PyTorch models on a real graph,
each fusion granularity checked against PyTorch, beside the paper's speedups. The default run checks one
small point and the summary/page on it; the whole experiment at its small size is in ``make slow``."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

from fuseflow.dse.experiments import EXPERIMENTS, FIG12_FUSES, PAPER_FIG12_SPEEDUP, PAPER_GCN_CORA_CYCLES  # noqa: E402
from fuseflow.dse.points import run_model_point  # noqa: E402
from fuseflow.dse.report import write_page, write_plot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dse(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "fuseflow.dse", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def test_paper_speedups_come_from_the_artifact_cycles():
    gcn = PAPER_FIG12_SPEEDUP["gcn"]
    assert gcn["regions"] == pytest.approx(48_998_261 / 29_997_611)
    assert gcn["full"] == pytest.approx(0.2945, abs=1e-4)
    assert PAPER_GCN_CORA_CYCLES["none"] == 48_998_261


def test_a_small_gcn_point_is_checked_and_charged_for_memory():
    r = run_model_point("gcn", "regions", dataset="cora", size="small")
    assert r["check_ok"] and r["max_rel_error"] < 1e-9
    assert r["cycles"]["hbm2"] >= r["cycles"]["onchip"] > 0
    assert r["kernels"] >= 2 and r["bytes"] > 0


def test_summary_and_page_put_ours_beside_the_paper(tmp_path):
    exp = EXPERIMENTS["fig12"]
    # counters as run_model_point returns them: gcn 2x faster partially fused, 4x slower fully fused
    fake = {}
    for model, fuses in FIG12_FUSES.items():
        for fuse, scale in zip(fuses, (1.0, 0.5, 4.0)):
            fake[f"{model}|{fuse}"] = {"size": "small", "dataset": "cora" if model == "gcn" else None, "kernels": 2,
                                       "check_ok": True, "alu_ops": 10, "bytes": 100, "sim_s": 0.1,
                                       "cycles": {"onchip": int(1000 * scale), "hbm2": int(2000 * scale)}}
    summary = exp.summarize(fake)
    row = next(r for r in summary["rows"] if r["model"] == "gcn" and r["fuse"] == "regions")
    assert row["speedup_hbm2"] == pytest.approx(2.0)
    assert row["paper_speedup"] == pytest.approx(PAPER_FIG12_SPEEDUP["gcn"]["regions"])
    assert summary["best_hbm2"]["gcn"] == "regions" == summary["paper_best"]["gcn"]
    assert summary["best_hbm2"]["attention"] == "full"             # (none, full) scaled (1, 0.5): full wins
    data = {"experiment": "fig12", "figure": exp.figure, "title": exp.title, "paper": exp.claim,
            "scheduler": "serial", "points": len(fake), "wall_s": 1.0, "summary": summary, "results": fake}
    (tmp_path / "fig12.json").write_text(json.dumps(data))
    write_plot(exp, summary, str(tmp_path / "fig12.png"))
    page = open(write_page(str(tmp_path))).read()
    assert "gcn (cora): best regions (as the paper); regions 2.00x (paper 1.63x)" in page
    assert (tmp_path / "fig12.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fig12_is_listed_but_not_in_all_and_a_bad_dataset_is_one_line(tmp_path):
    p = dse("list")
    assert p.returncode == 0 and "fig12" in p.stdout and "make paper" in p.stdout
    out = tmp_path / "rep"
    p = dse("run", "fig12", "--dataset", str(tmp_path / "nothing_here"), "-o", str(out), "--quiet")
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "nothing_here" in lines[0]
    assert not out.exists()
    p = dse("run", "fig12", "--models", "gcn,bert", "-o", str(out), "--quiet")
    assert p.returncode == 2 and p.stderr.strip() == "error: --models: unknown model 'bert' (known: gcn, graphsage, " \
        "autoencoder, attention)"
    assert not out.exists()


def test_fig12_models_option_selects_the_tasks():
    tasks = EXPERIMENTS["fig12"].tasks(dataset="cora", size="small", models="gcn,attention")
    assert [t.key for t in tasks] == ["gcn|none", "gcn|regions", "gcn|full", "attention|none", "attention|full"]


@pytest.mark.slow
def test_fig12_small_run_writes_every_model_checked(tmp_path):
    out = tmp_path / "rep"
    p = dse("run", "fig12", "--size", "small", "-o", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "fig12.json").read_text())
    rows = data["summary"]["rows"]
    assert len(rows) == sum(len(f) for f in FIG12_FUSES.values())
    assert all(r["check_ok"] for r in rows)
    assert "Every run checked against PyTorch: all agree" in (out / "index.html").read_text()


def test_merge_keeps_the_points_this_run_does_not_redo(tmp_path):
    from fuseflow.dse.__main__ import merged_results
    from fuseflow.errors import FuseFlowError
    path = tmp_path / "fig12.json"
    assert merged_results(str(path), "fig12", {"a|none": 1}, 2.0) == ({"a|none": 1}, 2.0)   # no earlier file
    path.write_text(json.dumps({"experiment": "fig12", "wall_s": 5.0,
                                "results": {"gcn|none": {"c": 1}, "attention|full": {"c": 2}}}))
    merged, wall = merged_results(str(path), "fig12", {"attention|full": {"c": 3}, "attention|none": {"c": 4}}, 2.0)
    assert merged == {"gcn|none": {"c": 1}, "attention|full": {"c": 3}, "attention|none": {"c": 4}} and wall == 7.0
    with pytest.raises(FuseFlowError, match="not the JSON of experiment orders"):
        merged_results(str(path), "orders", {}, 0.0)
    path.write_text("{")
    with pytest.raises(FuseFlowError, match="cannot read it"):
        merged_results(str(path), "fig12", {}, 0.0)
