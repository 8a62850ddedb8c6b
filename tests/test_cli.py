"""Command lines: results, --check, and one-line errors with exit status 2 and no partial output files."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fuseflow.samml import kernels, save
from fuseflow.tensors.io import save_npz

sys.path.insert(0, os.path.dirname(__file__))
from sim.test_engine import reconvergent  # noqa: E402
from fuseflow.samml.registry import MEMORY_READ_LATENCY, op_latency

#: the DESIGN.md SpMV: 19 cycles with a one-cycle multiply, plus the pipelined multiply's extra stages and
#: the registered reads of the three memory readers in a chain (B's two levels, then B's values)
SPMV_CYCLES = 18 + op_latency("alu", {"op": "mul"}) + 3 * (MEMORY_READ_LATENCY - 1)


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def spmv(tmp_path):
    prog, inputs = kernels.dcsr_example()
    save(prog, tmp_path / "graph.json")
    save_npz(tmp_path / "data.npz", inputs)
    return tmp_path


def one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0]


def test_sim_run_check_and_report(spmv):
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"), "--check",
            "--mode", "fixed", "--json", str(spmv / "r.json"), "--outputs", str(spmv / "out.npz"))
    assert p.returncode == 0, p.stderr
    assert "check: outputs match NumPy" in p.stdout
    report = json.loads((spmv / "r.json").read_text())
    assert report["cycles"] == SPMV_CYCLES and report["check"]["ok"]
    np.testing.assert_array_equal(np.load(spmv / "out.npz")["x"], [10.0, 0.0, 60.0])


def test_check_mismatch_exits_1_and_says_where(spmv):
    doc = json.loads((spmv / "graph.json").read_text())
    doc["expr"] = "x(i) = B(i,j) * c(j) * 2"
    (spmv / "graph.json").write_text(json.dumps(doc))
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"), "--check")
    assert p.returncode == 1
    assert "MISMATCH x: 2 of 3 entries differ: x(0,): sim 10 vs numpy 20" in p.stdout


@pytest.mark.parametrize("edit, fragments", [
    (lambda d: "{ not json", ["not valid JSON"]),
    (lambda d: d.update(samml=7) or d, ["$.samml"]),
    (lambda d: d["kernels"][0]["nodes"][0].update(op="warp") or d, ["unknown op 'warp'"]),
    (lambda d: d["kernels"][0]["streams"][0].update(to=[]) or d, ["dangling"]),
    (lambda d: d["kernels"][0]["streams"][1]["to"].append(d["kernels"][0]["streams"][0]["to"][0]) or d,
     ["driven twice"]),
])
def test_bad_graphs(spmv, edit, fragments):
    doc = json.loads((spmv / "graph.json").read_text())
    doc = edit(doc)
    (spmv / "graph.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"),
            "--json", str(spmv / "r.json"))
    one_line_error(p, *fragments)
    assert not (spmv / "r.json").exists()


def test_inputs_that_do_not_match(spmv):
    save_npz(spmv / "bad.npz", {"B": np.ones((4, 4)), "c": np.ones(4)})
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "bad.npz"),
            "--json", str(spmv / "r.json"))
    one_line_error(p, "tensor B", "shape (4, 4) but the program declares (3, 4)")
    assert not (spmv / "r.json").exists()


def test_deadlocked_graph(tmp_path):
    save(reconvergent(2), tmp_path / "graph.json")
    save_npz(tmp_path / "data.npz", {"v": np.ones(8)})
    p = cli("fuseflow.sim", "run", str(tmp_path / "graph.json"), "--inputs", str(tmp_path / "data.npz"),
            "--json", str(tmp_path / "r.json"))
    one_line_error(p, "deadlock", "scan.ref")
    assert not (tmp_path / "r.json").exists()


def test_missing_file(spmv):
    p = cli("fuseflow.sim", "run", str(spmv / "nope.json"), "--inputs", str(spmv / "data.npz"))
    one_line_error(p, "nope.json")


def test_samml_dot_and_validate(spmv):
    p = cli("fuseflow.samml", "dot", str(spmv / "graph.json"), "-o", str(spmv / "g.svg"))
    assert p.returncode == 0, p.stderr
    assert (spmv / "g.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    p = cli("fuseflow.samml", "validate", str(spmv / "graph.json"))
    assert p.returncode == 0 and "valid SAMML program 'spmv_dcsr'" in p.stdout


def test_fuseflow_entry_point(spmv):
    p = cli("fuseflow", "sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"))
    assert p.returncode == 0 and f"{SPMV_CYCLES} cycles" in p.stdout
    p = cli("fuseflow", "nonsense")
    one_line_error(p, "unknown task or part")


def test_tasks_are_their_parts_commands(spmv, tmp_path):
    """``fuseflow simulate`` is ``fuseflow sim run``; ``fuseflow build -o/--output`` is ``fuseflow hw build``."""
    a = cli("fuseflow", "simulate", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"))
    b = cli("fuseflow", "sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "data.npz"))
    def without_wall_time(text):           # the line of wall and CPU seconds differs from run to run
        return [line for line in text.splitlines() if "wall time" not in line]
    assert a.returncode == 0 and f"{SPMV_CYCLES} cycles" in a.stdout
    assert without_wall_time(a.stdout) == without_wall_time(b.stdout)
    for flag, name in (("--output", "long"), ("--out", "old"), ("-o", "short")):
        p = cli("fuseflow", "build", str(spmv / "graph.json"), flag, str(tmp_path / name), "--no-probes")
        assert p.returncode == 0, p.stderr
        assert any(f.suffix == ".v" for f in (tmp_path / name).iterdir())


def test_hw_correlate_is_the_correlation_report(tmp_path):
    p = cli("fuseflow.hw", "correlate", "--suite", "nope", "-o", str(tmp_path / "r"))
    one_line_error(p, "--suite", "unknown suite 'nope'")
    assert not (tmp_path / "r").exists()


def test_inputs_from_mtx_and_npy_files(spmv):
    import scipy.io
    import scipy.sparse as sp
    prog, inputs = kernels.dcsr_example()
    scipy.io.mmwrite(str(spmv / "B.mtx"), sp.coo_matrix(inputs["B"]))
    np.save(spmv / "c.npy", inputs["c"])
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "B.mtx"), str(spmv / "c.npy"),
            "--check")
    assert p.returncode == 0, p.stderr
    assert "check: outputs match NumPy" in p.stdout
    p = cli("fuseflow.sim", "run", str(spmv / "graph.json"), "--inputs", str(spmv / "c.npy"), str(spmv / "c.npy"))
    one_line_error(p, "tensor c is given twice")


def test_sim_size_fifos_writes_a_sized_graph(tmp_path):
    from fuseflow.samml import load
    prog = kernels.build("spmspm_gustavson", 10)
    save(prog, tmp_path / "graph.json")
    save_npz(tmp_path / "data.npz", kernels.random_inputs(prog, density=0.4, seed=1))
    out = tmp_path / "sized.json"
    p = cli("fuseflow.sim", "size-fifos", str(tmp_path / "graph.json"), "--inputs", str(tmp_path / "data.npz"),
            "-o", str(out))
    assert p.returncode == 0, p.stderr
    assert "cycles with" in p.stdout and out.exists()
    sized = load(out)
    assert [k.name for k in sized.kernels] == [k.name for k in prog.kernels]
    bad = cli("fuseflow.sim", "size-fifos", str(tmp_path / "graph.json"), "--inputs", str(tmp_path / "data.npz"),
              "-o", str(tmp_path / "x.json"), "--max-depth", "0")
    one_line_error(bad, "--max-depth")
    assert not (tmp_path / "x.json").exists()
