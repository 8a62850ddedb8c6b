"""Compiled programs carry capacities (worst case, or from a declared density for large tensors), so
`python -m fuseflow.hw build` needs no data; the coordinate width follows the shapes and capacities."""

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


def test_large_shapes_get_a_wider_coordinate_width(tmp_path):
    # 300 x 300: positions up to 90000 need 24 bits; the graph says so and builds without data
    prog = _compile(SPMV.replace("B(8, 10)", "B(300, 300)").replace("c(10)", "c(300)"), tmp_path)
    doc = json.loads((tmp_path / "graph.json").read_text())
    caps = {t["name"]: t.get("capacity") for t in doc["tensors"]}
    assert caps["B"] == [300, 90000, 90000] and caps["c"] == [300, 300]
    assert doc["config"]["crd_width"] == 24 == prog.config["crd_width"]


def test_declared_density_bounds_large_capacities(tmp_path):
    # 70,000 rows: the worst case (4.9e9 positions) does not fit 32 bits; the declared density bounds it
    text = SPMV.replace("B(8, 10) : dcsr", "B(70000, 70000) : dcsr density 0.00001") \
               .replace("c(10) : sv", "c(70000) : sv density 0.01")
    prog = compile_program(EinsumProgram.parse(text), fuse="full", passes={"profile": False}).program
    nnz = 0.00001 * 70000 * 70000
    cap_b = prog.tensors["B"].capacity
    assert nnz < cap_b[1] < nnz + 4 * nnz ** 0.5 + 17 and cap_b[0] == cap_b[1] == cap_b[2]
    assert prog.tensors["B"].density == 0.00001
    assert prog.config["crd_width"] == 24         # coordinates up to 69999, positions up to ~49,000
