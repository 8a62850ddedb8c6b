"""Compiled programs carry worst-case capacities, so `python -m fuseflow.hw build` needs no data; shapes whose
positions exceed the coordinate width get none (and the build asks for --inputs)."""

import json
import subprocess
import sys

import numpy as np

from fuseflow.compiler import EinsumProgram, compile_program
from fuseflow.samml import save

SPMV = """program spmv
tensor B(8, 10) : dcsr
tensor c(10) : sv
x(i) = B(i,j) * c(j)
"""


def _compile(text, tmp_path):
    prog = compile_program(EinsumProgram.parse(text), fuse="full").program
    save(prog, tmp_path / "graph.json")
    return prog


def test_compiled_graph_builds_without_data(tmp_path):
    prog = _compile(SPMV, tmp_path)
    want = {"B": [8, 80, 80], "c": [10, 10], "x": [8, 8]}
    for name, cap in want.items():
        t = prog.tensors[name]
        dims = [t.shape[m] for m in t.mode_order]
        assert cap == [int(np.prod(dims[:k + 1])) for k in range(len(dims))] + [int(np.prod(dims))]
        assert t.capacity == cap
    p = subprocess.run([sys.executable, "-m", "fuseflow.hw", "build", str(tmp_path / "graph.json"), "-o",
                        str(tmp_path / "build")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    manifest = json.loads((tmp_path / "build" / "spmv.json").read_text())
    caps = {t["name"]: t["capacity"] for t in manifest["tensors"]}
    assert caps == want


def test_too_large_for_the_coordinate_width_has_no_capacity(tmp_path):
    _compile(SPMV.replace("B(8, 10)", "B(300, 300)").replace("c(10)", "c(300)"), tmp_path)
    doc = json.loads((tmp_path / "graph.json").read_text())
    caps = {t["name"]: t.get("capacity") for t in doc["tensors"]}
    assert caps["B"] is None and caps["c"] == [300, 300]
    p = subprocess.run([sys.executable, "-m", "fuseflow.hw", "build", str(tmp_path / "graph.json"), "-o",
                        str(tmp_path / "build")], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("error: tensor B: no capacity")
    assert not (tmp_path / "build" / "spmv.v").exists()
