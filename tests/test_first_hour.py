"""Issue 44, the first hour of a new user: sample inputs and what a graph wants (``samml info``, ``samml random``,
``--random-inputs``), ``compile PROGRAM.ff --check/--report/--build``, ``--version``, help text without reST or
``python -m``, model files that import their siblings, errors that name the tensor, output paths probed before
work, and simulation rates by wall and CPU time. (The bad-input cases are in tests/badinput/test_corpus.py.)"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import fuseflow
from fuseflow.samml import kernels, load, save
from fuseflow.tensors.io import load_npz, save_npz

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ff(*args, cwd=None, env=None):
    e = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-m", "fuseflow", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=e, timeout=600)


def one_line_error(proc, *fragments):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for f in fragments:
        assert f in lines[0], (f, lines[0])


@pytest.fixture
def spmv(tmp_path):
    prog = kernels.build("spmv_csr")
    save(prog, tmp_path / "graph.json")
    return tmp_path, prog


def test_samml_info_lists_every_tensor_with_shape_and_format(spmv):
    d, prog = spmv
    p = ff("samml", "info", d / "graph.json")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for t in prog.tensors.values():
        row = next(line for line in lines if line.split()[:1] == [t.name])
        assert f"shape ({', '.join(map(str, t.shape))})" in row
    inputs_at = next(i for i, line in enumerate(lines) if line.startswith("inputs"))
    outputs_at = next(i for i, line in enumerate(lines) if line.startswith("outputs"))
    assert {line.split()[0] for line in lines[inputs_at + 1:outputs_at]} == {t.name for t in prog.inputs}
    b = next(line for line in lines if line.split()[:1] == ["B"])
    assert "format csr" in b                       # spmv_csr's matrix


def test_samml_random_writes_what_random_inputs_simulates(spmv):
    """The file of samml random and --random-inputs with the same density and seed are the same data."""
    d, prog = spmv
    p = ff("samml", "random", d / "graph.json", "-o", d / "data.npz", "--density", "0.3", "--seed", "4")
    assert p.returncode == 0, p.stderr
    data = load_npz(d / "data.npz")
    assert sorted(data) == sorted(t.name for t in prog.inputs)
    for t in prog.inputs:
        assert tuple(data[t.name].shape) == tuple(t.shape)
    runs = []
    for how in (["--inputs", d / "data.npz"], ["--random-inputs", "0.3", "--data-seed", "4"]):
        out = d / f"out{len(runs)}.npz"
        p = ff("sim", "run", d / "graph.json", *how, "--check", "--outputs", out, "--json", d / f"r{len(runs)}.json")
        assert p.returncode == 0, p.stderr
        runs.append((json.loads((d / f"r{len(runs)}.json").read_text())["cycles"], np.load(out)["x"]))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_array_equal(runs[0][1], runs[1][1])
    dense = ff("samml", "random", d / "graph.json", "-o", d / "full.npz", "--density", "1", "--seed", "4")
    assert dense.returncode == 0
    assert load_npz(d / "full.npz")["B"].nnz > data["B"].nnz


def test_version():
    p = ff("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"fuseflow {fuseflow.__version__}"


@pytest.mark.parametrize("args", [["--help"], ["samml", "--help"], ["sim", "--help"], ["sim", "run", "--help"],
                                  ["compile", "x.ff", "--help"], ["hw", "--help"], ["hw", "build", "--help"],
                                  ["boards", "--help"], ["datasets", "--help"], ["hw", "correlate", "--help"]])
def test_help_is_plain_text(args, capsys):
    from fuseflow.__main__ import main
    try:
        code = main(args)
    except SystemExit as exc:                # argparse's --help
        code = exc.code
    out = capsys.readouterr().out
    assert code == 0 and "usage: fuseflow" in out, out
    for markup in ("``", ":func:", ":mod:", ":class:", "python -m"):
        assert markup not in out, (markup, out)


def test_compile_ff_checks_reports_and_builds(tmp_path):
    src = tmp_path / "spmv.ff"
    src.write_text("program spmv\ntensor B(6, 5) : csr\ntensor c(5) : dense\nx(i) = B(i,j) * c(j)\n")
    p = ff("compile", src, "--check", "--report", "--mode", "float", "--build", tmp_path / "hw", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "check: matches NumPy (float mode)" in p.stdout
    assert "total" in p.stdout and "cycles" in p.stdout           # the per-kernel table
    assert (tmp_path / "hw" / "spmv.v").exists() and (tmp_path / "hw" / "graph.json").exists()
    assert not (tmp_path / "out").exists()


def test_compile_ff_check_uses_the_given_inputs(tmp_path):
    """--inputs feeds --check: an input with a NaN is refused, naming the tensor."""
    src = tmp_path / "spmv.ff"
    src.write_text("program spmv\ntensor B(3, 4) : csr\ntensor c(4) : dense\nx(i) = B(i,j) * c(j)\n")
    c = np.ones(4)
    c[2] = np.nan
    save_npz(tmp_path / "d.npz", {"B": np.eye(3, 4), "c": c})
    one_line_error(ff("compile", src, "--check", "--inputs", tmp_path / "d.npz"), "tensor c", "NaN", "(2,)")


def test_sim_run_prints_wall_and_cpu_rates(spmv):
    d, _ = spmv
    p = ff("sim", "run", d / "graph.json", "--random-inputs", "0.5", "--json", d / "r.json")
    assert p.returncode == 0, p.stderr
    assert "M tokens/s by wall time" in p.stdout and "M tokens/s by CPU time" in p.stdout
    rep = json.loads((d / "r.json").read_text())
    assert rep["cpu_seconds"] > 0 and rep["wall_seconds"] > 0


def test_output_probe_leaves_the_directory_as_it_was(tmp_path):
    from fuseflow.cli import check_output_dir, check_output_path
    (tmp_path / "sub").mkdir()
    before = os.stat(tmp_path / "sub").st_mtime_ns, sorted(os.listdir(tmp_path / "sub"))
    check_output_dir(str(tmp_path / "sub" / "new" / "deeper"))
    check_output_path(str(tmp_path / "sub" / "f.json"))
    assert (os.stat(tmp_path / "sub").st_mtime_ns, sorted(os.listdir(tmp_path / "sub"))) == before


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_output_probe_refuses_a_pseudo_file_system():
    from fuseflow.cli import check_output_dir
    from fuseflow.errors import FuseFlowError
    with pytest.raises(FuseFlowError, match="nothing can be created in /proc"):
        check_output_dir("/proc/fuseflow-out")


MODEL = """import torch
from helper import double          # a sibling module
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
    def forward(self, x):
        return double(self.lin(x))
def example_inputs():
    return (torch.ones(4, 8),)
"""


@pytest.fixture
def model_dir(tmp_path):
    pytest.importorskip("torch")
    d = tmp_path / "models"
    d.mkdir()
    (d / "net.py").write_text(MODEL)
    (d / "helper.py").write_text("def double(t):\n    return t * 2\n")
    return d


def test_model_file_imports_its_sibling(model_dir, tmp_path):
    p = ff("compile", model_dir / "net.py:Net", "--check", cwd=tmp_path)   # not run from the model's directory
    assert p.returncode == 0, p.stderr
    assert "check: matches PyTorch" in p.stdout


def test_dense_limit_names_the_parameter(model_dir, tmp_path):
    """lin.weight (8 x 8, lowered as lin_weight) over a lowered dense-entries limit: the error names it."""
    p = ff("compile", model_dir / "net.py:Net", cwd=tmp_path, env={"FUSEFLOW_MAX_DENSE_ENTRIES": "40"})
    one_line_error(p, "tensor lin_weight", "64 entries", "sparse format", "FUSEFLOW_MAX_DENSE_ENTRIES")


def test_pickled_scipy_npz_points_to_save_npz(model_dir, tmp_path):
    import scipy.sparse as sp
    np.savez(tmp_path / "x.npz", x=sp.csr_matrix(np.ones((4, 8))))
    p = ff("compile", model_dir / "net.py:Net", "--inputs", tmp_path / "x.npz", cwd=tmp_path)
    one_line_error(p, "x.npz:x", "fuseflow.tensors.save_npz")
