"""Choosing the simulator engine: auto, compiled, python; the fallback line; progress and Ctrl-C."""

import numpy as np
import pytest

from fuseflow.errors import FuseFlowError
from fuseflow.samml import kernels
from fuseflow.sim import compiled, run
from fuseflow.sim import progress as sim_progress
from fuseflow.sim.__main__ import main as sim_main

ENGINES = ["python"] + (["compiled"] if compiled.available() else [])


def _spmv(n=40, density=0.3):
    p = kernels.build("spmv_csr", n)
    return p, kernels.random_inputs(p, density=density, seed=3)


def test_unknown_engine_is_a_clear_error():
    p, ins = _spmv()
    with pytest.raises(FuseFlowError, match="unknown engine 'fast'"):
        run(p, ins, engine="fast")


def test_auto_falls_back_with_one_line_once(monkeypatch, capsys):
    """Without the compiled engine, auto says so once (one line on stderr) and runs the Python engine."""
    monkeypatch.setattr(compiled, "_engine", None)
    monkeypatch.setattr(compiled, "_told", set())
    monkeypatch.setattr(compiled, "_interactive", lambda: True)
    p, ins = _spmv()
    a = run(p, ins)
    b = run(p, ins)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not built" in err[0] and "Python engine" in err[0]
    assert a.stats["engine"] == b.stats["engine"] == "python"
    with pytest.raises(FuseFlowError, match="not built"):
        run(p, ins, engine="compiled")


def test_no_note_off_a_terminal(monkeypatch, capsys):
    """Off a terminal (scripts, CI logs, a CLI's one-line errors) the fallback is silent; stats name the engine."""
    monkeypatch.setattr(compiled, "_engine", None)
    monkeypatch.setattr(compiled, "_told", set())
    monkeypatch.setattr(compiled, "_interactive", lambda: False)
    p, ins = _spmv()
    assert run(p, ins).stats["engine"] == "python"
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")
def test_auto_takes_the_compiled_engine_and_agrees():
    p, ins = _spmv()
    a, b = run(p, ins), run(p, ins, engine="python")
    assert a.stats["engine"] == "compiled" and b.stats["engine"] == "python"
    assert a.cycles == b.cycles and a.stats["tokens"] == b.stats["tokens"]
    np.testing.assert_array_equal(a.outputs["x"], b.outputs["x"])


@pytest.mark.parametrize("eng", ENGINES)
def test_progress_reports_and_interrupt_keeps_counters(eng, monkeypatch):
    """A progress callback sees growing token and cycle counts; a KeyboardInterrupt raised from it (what
    Ctrl-C does) leaves the run with the counters so far."""
    monkeypatch.setattr(sim_progress, "PROGRESS_SECONDS", 0.0)
    p, ins = _spmv(300, 0.3)
    full = run(p, ins, engine="python")
    seen = []

    def report(tokens, cycles):
        seen.append((tokens, cycles))
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt) as info:
        run(p, ins, engine=eng, progress=report)
    assert len(seen) == 3 and seen[0][0] <= seen[1][0] <= seen[2][0] and seen[2][0] > 0
    stats = info.value.stats
    assert stats["kernels"][-1]["interrupted"]
    assert 0 < stats["tokens"] < full.stats["tokens"] and 0 < stats["cycles"] < full.cycles


@pytest.mark.parametrize("eng", ENGINES)
def test_cli_names_the_engine(eng, tmp_path, capsys):
    from fuseflow.samml import io as samml_io
    from fuseflow.tensors.io import save_npz
    p, ins = _spmv()
    graph = tmp_path / "g.json"
    graph.write_text(samml_io.dumps(p))
    save_npz(tmp_path / "d.npz", ins)
    assert sim_main(["run", str(graph), "--inputs", str(tmp_path / "d.npz"), "--engine", eng, "--check"]) == 0
    assert f"{eng} engine" in capsys.readouterr().out


def test_results_print_short():
    """repr of a simulation result is one short line, not every tensor and counter."""
    p, ins = _spmv()
    res = run(p, ins)
    text = repr(res)
    assert text.startswith("<SimResult: ") and "cycles" in text and "\n" not in text and len(text) < 300
