"""Every graph the project ships (examples/kernels/*/graph.json) or writes (the compiler on fuseflow/programs)
elaborates to Verilog with no data: capacities and widths are declared in the graph (issue 9).

Elaboration only, no synthesis. A representative subset by default; all of them under ``-m slow``."""

import glob
import json
import os
import subprocess
import sys

import pytest

from fuseflow.compiler import compile_program, parse_file
from fuseflow.hw.elaborate import build
from fuseflow.samml import io as samml_io

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SHIPPED = sorted(glob.glob(os.path.join(ROOT, "examples", "kernels", "*", "graph.json")))
PROGRAMS = sorted(glob.glob(os.path.join(ROOT, "fuseflow", "programs", "*.ff")))
FAST = {"spmv_csr", "spmspm_outer", "gcn"}


def _name(path):
    return os.path.basename(os.path.dirname(path)) if path.endswith("graph.json") else \
        os.path.splitext(os.path.basename(path))[0]


def _params(paths):
    return [pytest.param(p, id=_name(p), marks=() if _name(p) in FAST else pytest.mark.slow) for p in paths]


def _check_verilog(b, program):
    text = b.verilog()
    assert f"module {b.name}" in text
    man = b.manifest()
    # one FIFO per stream consumer, at the depth the graph states
    want = sorted((k.name, s.id, d.node + "." + d.port, s.depth or program.config["fifo_depth"])
                  for k in program.kernels for s in k.streams.values() for d in s.dsts)
    got = sorted((c["kernel"], c["stream"], c["dst"], c["depth"]) for c in man["channels"])
    assert got == want
    caps = {t["name"]: t["capacity"] for t in man["tensors"]}
    assert caps == {t.name: list(t.capacity) for t in program.tensors.values()}


@pytest.mark.parametrize("path", _params(SHIPPED))
def test_shipped_graph_builds_without_inputs(path):
    program = samml_io.load(path)
    assert all(t.capacity is not None for t in program.tensors.values())
    _check_verilog(build(program), program)


@pytest.mark.parametrize("path", _params(PROGRAMS))
def test_compiled_program_builds_without_inputs(path):
    program = compile_program(parse_file(path), passes={"profile": False}).program
    _check_verilog(build(program), program)


def test_hw_build_cli_needs_no_inputs(tmp_path):
    path = os.path.join(ROOT, "examples", "kernels", "spmv_csr", "graph.json")
    p = subprocess.run([sys.executable, "-m", "fuseflow.hw", "build", path, "-o", str(tmp_path)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    man = json.loads((tmp_path / "spmv_csr.json").read_text())
    assert {t["name"] for t in man["tensors"]} == {"B", "c", "x"}
    assert (tmp_path / "spmv_csr.v").read_text().count("module ") >= 1
