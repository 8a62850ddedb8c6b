"""Signals and all-or-nothing outputs, on real processes.

SIGINT / SIGTERM end a command with one line ``error: interrupted: ...`` and exit 130 / 143 whether they arrive
while the command's modules import or after it has staged its first output file; nothing is left behind.
Two runs writing the same outputs end with one run's complete set. ``FUSEFLOW_HOLD_OUTPUTS`` (a testing aid of
``fuseflow.cli``) pauses a command after each staged file so that the signal or the second run lands there.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from harness import run_process  # noqa: E402

STATUS = {signal.SIGINT: 130, signal.SIGTERM: 143}


@pytest.fixture
def work(tmp_path):
    from fuseflow.samml import kernels, save
    from fuseflow.tensors.io import save_npz
    prog, inputs = kernels.dcsr_example()
    save(prog, tmp_path / "g.json")
    save_npz(tmp_path / "d.npz", inputs)
    for t in prog.tensors.values():
        t.capacity = t.worst_case_capacity()
    save(prog, tmp_path / "hw.json")
    vec = kernels.build("vector_add")
    save(vec, tmp_path / "v.json")
    save_npz(tmp_path / "v.npz", kernels.random_inputs(vec, density=0.5, seed=3))
    (tmp_path / "p.ff").write_text("program spmv\ntensor B(3, 4) : csr\ntensor c(4) : dense\nx(i) = B(i,j) * c(j)\n")
    return tmp_path


def wait_for(pred, proc, timeout=240):
    t0 = time.monotonic()
    while not pred():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the command ended ({proc.returncode}) before the signal:\n{out}\n{err}")
        if time.monotonic() - t0 > timeout:
            proc.kill()
            pytest.fail("timed out waiting for the command")
        time.sleep(0.02)


def has_loaded(proc, lib):
    try:
        with open(f"/proc/{proc.pid}/maps") as f:
            return lib in f.read()
    except OSError:
        return False


def staged(root):
    """Temporary output files or staging directories below ``root``."""
    found = []
    for d, dirs, files in os.walk(root):
        found += [n for n in dirs + files if n.startswith((".tmp-", ".fuseflow-stage-"))]
    return found


def files_below(root):
    return sorted(os.path.relpath(os.path.join(d, n), root) for d, _, fs in os.walk(root) for n in fs)


def assert_interrupted(proc, sig):
    out, err = proc.communicate(timeout=120)
    lines = err.strip().splitlines()
    assert proc.returncode == STATUS[sig], (proc.returncode, err)
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: interrupted: "), err
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_while_importing(work, sig):
    """The handlers are in place before the heavy imports (numpy, amaranth) run."""
    before = files_below(work)
    proc = run_process(["fuseflow.hw", "build", "hw.json", "-o", "out"], cwd=work)
    wait_for(lambda: has_loaded(proc, "numpy"), proc)
    proc.send_signal(sig)
    assert_interrupted(proc, sig)
    assert files_below(work) == before and not (work / "out").exists()


@pytest.mark.parametrize("argv, target, sig", [
    (["fuseflow.hw", "build", "hw.json", "-o", "out"], "out", signal.SIGINT),
    (["fuseflow.sim", "run", "g.json", "--inputs", "d.npz", "--json", "out/r.json", "--outputs", "out/o.npz"],
     "out", signal.SIGTERM),
    (["fuseflow", "compile", "p.ff", "-o", "out"], "out", signal.SIGINT),
    (["fuseflow.samml", "kernels", "-o", "out"], "out", signal.SIGTERM),
], ids=["hw-build-SIGINT", "sim-run-SIGTERM", "compile-SIGINT", "kernels-SIGTERM"])
def test_signal_after_the_first_file(work, argv, target, sig):
    """A signal after the first output is staged: the command stops, and no file (staged or final) remains."""
    before = files_below(work)
    proc = run_process(argv, cwd=work, env={"FUSEFLOW_HOLD_OUTPUTS": "60"})
    wait_for(lambda: staged(work), proc)
    proc.send_signal(sig)
    assert_interrupted(proc, sig)
    assert files_below(work) == before, "the interrupted command left files behind"
    assert not (work / target).exists()


def test_sim_run_leaves_no_report_when_outputs_fail(work):
    """--outputs cannot be written (a directory): the report of --json is not written either."""
    (work / "o.npz").mkdir()
    proc = run_process(["fuseflow.sim", "run", "g.json", "--inputs", "d.npz", "--json", "r.json", "--outputs",
                        "o.npz"], cwd=work)
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 2 and err.startswith("error: --outputs: ") and "o.npz" in err, err
    assert not (work / "r.json").exists()


def test_concurrent_runs_end_with_one_complete_set(work):
    """Two programs write the same report and outputs; the result is one run's report with that run's outputs
    (the faster run holds each file 0.1 s, the slower 1.5 s, so their writes interleave)."""
    out = ["--json", "res/r.json", "--outputs", "res/o.npz"]
    a = run_process(["fuseflow.sim", "run", "g.json", "--inputs", "d.npz", *out], cwd=work,
                    env={"FUSEFLOW_HOLD_OUTPUTS": "1.5"})
    b = run_process(["fuseflow.sim", "run", "v.json", "--inputs", "v.npz", *out], cwd=work,
                    env={"FUSEFLOW_HOLD_OUTPUTS": "0.1"})
    for p in (a, b):
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    report = json.loads((work / "res" / "r.json").read_text())
    x = np.load(work / "res" / "o.npz")["x"]
    if report["program"] == "spmv_dcsr":                   # the report and the outputs of the same run
        np.testing.assert_array_equal(x, [10.0, 0.0, 60.0])
    else:
        assert report["program"] == "vector_add" and x.shape == (6,), (report["program"], x)
    assert not staged(work)
