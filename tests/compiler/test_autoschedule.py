"""The autoscheduler: picks within budget, confirms in the simulator, and refuses an impossible budget."""

import os
import subprocess
import sys

import pytest

from fuseflow.compiler import compile_program, parse_file
from fuseflow.compiler.autoschedule import autoschedule, candidate_schedules, exhaustive
from fuseflow.errors import ProgramError
from fuseflow.samml.kernels import random_inputs
from fuseflow.sim import engine
from fuseflow.dse.experiments import example_path


@pytest.fixture(scope="module")
def gcn2():
    src = parse_file(example_path("gcn2"))
    return src, random_inputs(compile_program(src).program, density=0.2, seed=3)


def test_candidates_cover_every_granularity(gcn2):
    src, _ = gcn2
    assert {fuse for fuse, _, _, _ in candidate_schedules(src)} == {"none", "regions", "full", "per-region"}


def test_pick_is_the_fastest_it_simulated_and_no_better_than_exhaustive(gcn2):
    src, inputs = gcn2
    auto = autoschedule(src, inputs=inputs, top=3)
    simulated = [c.simulated_cycles for c in auto.candidates if c.simulated_cycles is not None]
    assert auto.chosen.simulated_cycles == min(simulated)
    # the chosen program really runs in the cycles reported
    assert engine.run(auto.result.program, inputs, memory="hbm2").cycles == auto.chosen.simulated_cycles
    best = exhaustive(src, inputs)[0][0]
    assert best.simulated_cycles <= auto.chosen.simulated_cycles


def test_budget_limits_the_choice(gcn2):
    src, inputs = gcn2
    auto = autoschedule(src, inputs=inputs, max_kernels=1)
    assert auto.chosen.kernels == 1 and len(auto.result.program.kernels) == 1
    with pytest.raises(ProgramError, match="impossible"):
        autoschedule(src, inputs=inputs, max_nodes=3)


def test_cli_auto_and_impossible_budget(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile",
                                     example_path("gcn"), *a], capture_output=True, text=True)
    ok = run("--fuse", "auto", "-o", str(tmp_path / "ok"))
    assert ok.returncode == 0 and (tmp_path / "ok" / "graph.json").exists() and "auto: fuse=" in ok.stderr
    bad = run("--fuse", "auto", "--max-nodes", "4", "-o", str(tmp_path / "bad"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: budget: impossible")
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()


def test_cli_progress_when_asked_and_the_budget_reported(tmp_path, monkeypatch, capsys):
    """--progress prints the autoscheduler's progress on stderr though it is not a terminal (here a capture); a
    tiny --budget is honoured and the report says what it skipped and why (issue 42, item 6)."""
    from fuseflow.compiler import __main__ as cli
    from fuseflow.compiler import autoschedule as auto_mod
    monkeypatch.setattr(auto_mod, "PROGRESS_DELAY", 0.0)      # the first lines come at once (else after 1 s)
    monkeypatch.setattr(auto_mod, "PROGRESS_SECONDS", 0.0)
    assert cli.main(["compile", example_path("gcn2"), "--fuse", "auto", "--progress", "--budget", "60",
                     "-o", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "auto: ranked fusion choice 1/5" in err and "auto: simulated 1/" in err, err
    assert cli.main(["compile", example_path("gcn2"), "--fuse", "auto", "--budget", "0.001", "-o",
                     str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "auto: ranked fusion choice" not in err              # not asked, not a terminal: no progress
    skipped = [line for line in err.splitlines() if line.startswith("auto: skipped")]
    assert skipped and all("budget" in line for line in skipped), err
    assert (tmp_path / "b" / "graph.json").exists()          # the budget is spent: the best so far is kept


def test_per_region_choices_mix_fused_and_split_regions(gcn2):
    from fuseflow.compiler.autoschedule import fusion_choices
    from fuseflow.compiler.lower_sugar import lower_sugar
    src, inputs = gcn2
    ir = lower_sugar(src.to_ir())
    choices = {label: [] for label in ("none", "regions", "per-region", "full")}
    for label, regions in fusion_choices(ir):
        choices[label].append(regions)
    # two layers, each a region of two statements: each fused or split, plus everything fused
    assert sorted(map(str, choices["per-region"])) == ["[[0, 1]]", "[[2, 3]]"]
    assert choices["none"] == [[]] and choices["full"] == [None]


def test_every_per_region_schedule_computes_gcn2(gcn2):
    import numpy as np
    src, inputs = gcn2
    relu = lambda x: np.maximum(x, 0.0)  # noqa: E731
    h1 = relu(inputs["A"] @ inputs["X"] @ inputs["W1"])
    golden = relu(inputs["A"] @ h1 @ inputs["W2"])
    mixed = [(groups, res) for fuse, _, res, groups in candidate_schedules(src) if fuse == "per-region"]
    assert {len(res.program.kernels) for _, res in mixed} == {3}      # one layer fused, the other split
    for groups, res in mixed:
        out = engine.run(res.program, inputs).outputs["H2"]
        np.testing.assert_allclose(out, golden, rtol=1e-9, atol=1e-9, err_msg=str(groups))


@pytest.fixture(scope="module")
def spmm():
    src = parse_file(example_path("spmm"))
    return src, random_inputs(compile_program(src).program, density=0.3, seed=5)


def _lanes_of(program):
    return [n.params["lanes"] for k in program.kernels for n in k.nodes.values() if n.op == "serialize"]


def test_lane_budget_chooses_parallel_factors(spmm):
    import numpy as np
    src, inputs = spmm
    auto = autoschedule(src, inputs=inputs, max_lanes=8)
    par = auto.chosen.parallel
    assert par and all(f in (2, 4, 8) for f in par.values()) and np.prod(list(par.values())) <= 8
    assert _lanes_of(auto.result.program)                    # the compiled program has the lanes
    # laned candidates were ranked alongside the unlaned ones, and the pick beats the best unlaned schedule
    unlaned = autoschedule(src, inputs=inputs)
    assert any(c.parallel is None for c in auto.candidates)
    assert auto.chosen.simulated_cycles < unlaned.chosen.simulated_cycles
    run = engine.run(auto.result.program, inputs, memory="hbm2")
    assert run.cycles == auto.chosen.simulated_cycles
    np.testing.assert_allclose(run.outputs["T"], inputs["A"] @ inputs["X"], rtol=1e-9, atol=1e-9)
    # exhaustive simulation over the same factors finds nothing better than what it could have picked
    every = exhaustive(src, inputs, max_lanes=8)
    assert every[0][0].simulated_cycles <= auto.chosen.simulated_cycles
    assert any(len(s.parallel or {}) == 2 for s, _ in every)          # nested pairs are in the space


def test_node_budget_bounds_the_lanes(spmm):
    src, inputs = spmm
    small = autoschedule(src, inputs=inputs, max_lanes=8, simulate=False)
    unlaned = min(c.nodes for c in small.candidates if c.parallel is None)
    tight = autoschedule(src, inputs=inputs, max_lanes=8, max_nodes=unlaned + 1)
    assert tight.chosen.parallel is None and not _lanes_of(tight.result.program)
    assert all(c.nodes <= unlaned + 1 for c in tight.candidates)
    one = autoschedule(src, inputs=inputs, max_lanes=1, simulate=False)
    assert all(c.parallel is None for c in one.candidates)
    with pytest.raises(ProgramError, match="lane"):
        autoschedule(src, inputs=inputs, max_lanes=0)
    with pytest.raises(ProgramError, match="not both"):
        autoschedule(src, inputs=inputs, max_lanes=4, parallel={"i": 2})


def test_fixed_lanes_go_to_every_candidate(spmm):
    src, inputs = spmm
    auto = autoschedule(src, inputs=inputs, parallel={"i": 2}, simulate=False)
    assert auto.candidates and all(c.parallel == {"i": 2} for c in auto.candidates)
    assert _lanes_of(auto.result.program) and set(_lanes_of(auto.result.program)) == {2}


def test_cli_max_lanes(tmp_path):
    from fuseflow.samml import io as samml_io
    run = lambda *a: subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile",
                                     example_path("spmm"), *a], capture_output=True, text=True)
    ok = run("--fuse", "auto", "--max-lanes", "4", "-o", str(tmp_path / "ok"))
    assert ok.returncode == 0, ok.stderr
    assert "parallel i=" in ok.stderr or "parallel k=" in ok.stderr or "parallel j=" in ok.stderr
    assert _lanes_of(samml_io.load(str(tmp_path / "ok" / "graph.json")))
    for args, frag in ((["--fuse", "auto", "--max-lanes", "0"], "lane"),
                       (["--fuse", "regions", "--max-lanes", "4"], "--max-lanes"),
                       (["--fuse", "auto", "--max-lanes", "4", "--parallel", "i=2"], "not both")):
        bad = run(*args, "-o", str(tmp_path / "bad"))
        assert bad.returncode == 2 and bad.stderr.startswith("error: ") and frag in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "bad").exists()
