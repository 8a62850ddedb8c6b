"""``fuseflow compile`` for PyTorch models: the CLI is a thin wrapper over fuseflow.compile."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODEL_FILE = textwrap.dedent('''
    import torch, torch.nn as nn
    class Good(nn.Module):
        def __init__(self, hidden=3):
            super().__init__(); self.lin = nn.Linear(4, hidden)
        def forward(self, x):
            return torch.relu(self.lin(x))
    def example_inputs():
        return (torch.randn(5, 4),)
    class Sort(nn.Module):
        def forward(self, x):
            return torch.sort(x, dim=1).values
    class Conv(nn.Module):
        def __init__(self):
            super().__init__(); self.body = nn.Sequential(nn.Conv2d(1, 1, 3))
        def forward(self, x):
            return self.body(x)
    class Branch(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x
''')


def run(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "fuseflow", "compile", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("m") / "model.py"
    p.write_text(MODEL_FILE)
    return str(p)


def test_compile_check_report_save(model_file, tmp_path):
    r = run(f"{model_file}:Good", "--args", '{"hidden": 2}', "--check", "--report", "--ff", "-o", str(tmp_path / "out"))
    assert r.returncode == 0, r.stderr
    assert "matches PyTorch" in r.stdout and "FIFO slots" in r.stdout and "tensor lin_weight(4, 2)" in r.stdout
    assert os.path.exists(tmp_path / "out" / "graph.json") and os.path.exists(tmp_path / "out" / "model.json")


@pytest.mark.parametrize("cls, words", [("Sort", "torch.sort at"), ("Conv", "nn.Conv2d at body.0"),
                                        ("Branch", "data-dependent control flow")])
def test_unsupported_is_one_line_exit_2(model_file, cls, words, tmp_path):
    import numpy as np
    np.savez(tmp_path / "x.npz", x=np.ones((1, 1, 5, 5)))
    r = run(f"{model_file}:{cls}", "--inputs", str(tmp_path / "x.npz"), "-o", str(tmp_path / "o"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], r.stderr
    assert not os.path.exists(tmp_path / "o")


def test_bundled_model_and_help():
    r = run("autoencoder", "--fuse", "full", "--check")
    assert r.returncode == 0 and "matches PyTorch" in r.stdout, r.stderr
    h = run("--help")
    assert h.returncode == 0 and "FILE.py:CLASS" in h.stdout and ".ff" in h.stdout


def test_fuse_auto_and_an_impossible_budget(tmp_path):
    r = run("gcn", "--fuse", "auto", "--check", "-o", str(tmp_path / "ok"))
    assert r.returncode == 0 and "auto: " in r.stdout and "matches PyTorch" in r.stdout, r.stderr
    bad = run("gcn", "--fuse", "auto", "--max-nodes", "5", "-o", str(tmp_path / "bad"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: budget: impossible"), bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not os.path.exists(tmp_path / "bad")


def test_check_and_simulation_print_short():
    """print(m.check()) shows the verdict and cycles in one line (it used to print every tensor)."""
    import torch
    import fuseflow
    lin = torch.nn.Linear(4, 3)
    m = fuseflow.compile(lin, (torch.randn(5, 4),), mode="float")
    c = m.check()
    assert repr(c).startswith("<Check ok=True: matches PyTorch") and "cycles" in repr(c) and "\n" not in repr(c)
    assert len(repr(c)) < 300 and len(repr(c.simulation)) < 300
    assert "<table>" in c._repr_html_()
