"""The tiling pass (issue 41): the ``tile`` statement, ``--tile``/``--onchip-bits``/``--list-tiles``, the plan in
graph.json, and the command line's simulate path on a tiled program."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import EinsumProgram, compile_program, compile_text
from fuseflow.compiler.tiling import dimensions, parse_tiles, render_tiles
from fuseflow.errors import ProgramError
from fuseflow.samml import io as samml_io

SRC = """program spmv
tensor A(300, 200) : csr density 0.05
tensor x(200) : dense
tile i 64
y(i) = A(i,j) * x(j)
"""


def test_tile_statement_and_plan():
    p = EinsumProgram.parse(SRC)
    assert p.tile_sizes == {"i": 64}
    prog = compile_program(p).program
    t = prog.tiling
    assert t["dims"] == {"i": {"size": 64, "extent": 300, "tiles": 5, "indices": ["i"]}}
    assert prog.tensors["A"].shape == [64, 200] and t["tensors"]["A"]["shape"] == [300, 200]
    k = t["kernels"][0]
    assert k["loads"] == ["A", "x"] and k["resident"] == ["x"] and k["stores"] == ["y"] and k["acc"] == {}
    assert k["skip_empty"] == ["A"]
    again = samml_io.from_dict(json.loads(samml_io.dumps(prog)))     # the schema and the checks take it
    assert again.tiling == t
    assert "i 64 of 300 (5 tiles" in render_tiles(prog)


def test_split_reduction_gets_an_accumulator():
    prog = compile_text(SRC.replace("tile i 64", "tile j 50")).program
    k = prog.tiling["kernels"][0]
    assert k["acc"] == {"y": "y_acc"} and prog.tiling["tensors"]["y_acc"]["acc_of"] == "y"
    assert prog.tensors["y_acc"].role == "input" and prog.tensors["y_acc"].shape == [300]
    assert "y_acc" not in prog.expr                   # the program's meaning stays the untiled statement


def test_dimensions_join_indices_across_statements():
    src = "program g\ntensor A(8,8) : csr\ntensor X(8,4) : dense\nT(i,k) = A(i,l) * X(l,k)\nY(i,k) = A(i,l) * T(l,k)\n"
    dims, by_mode, _ = dimensions(EinsumProgram.parse(src).to_ir())
    assert by_mode[("A", 1)] == by_mode[("X", 0)] == by_mode[("T", 0)] == by_mode[("A", 0)]


@pytest.mark.parametrize("spec, want", [("i=4", {"i": 4}), (["i=4", "j=2"], {"i": 4, "j": 2}),
                                        ({"i": 8}, {"i": 8}), ("i=4,j=3", {"i": 4, "j": 3})])
def test_parse_tiles(spec, want):
    assert parse_tiles(spec) == want


@pytest.mark.parametrize("spec, msg", [("i=0", "at least 1"), ("i=x", "positive integer"), ("i", "INDEX=SIZE"),
                                       ("i=2,i=3", "twice")])
def test_parse_tiles_errors(spec, msg):
    with pytest.raises(ProgramError, match=msg):
        parse_tiles(spec)


def test_cli_list_tiles_and_simulate(tmp_path):
    ff = tmp_path / "s.ff"
    ff.write_text(SRC)
    out = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(ff), "-o", str(tmp_path / "o"),
                          "--list-tiles", "--simulate", "--check"], capture_output=True, text=True, check=True)
    assert "tiles (manual): i 64 of 300" in out.stdout and "matches NumPy" in out.stdout
    run = subprocess.run([sys.executable, "-m", "fuseflow.sim", "run", str(tmp_path / "o" / "graph.json"),
                          "--random-inputs", "0.05", "--memory", "ddr4", "--check"], capture_output=True, text=True,
                         check=True)
    assert "tiles: 5 run" in run.stdout and "DMA 16 B/beat, latency 80" in run.stdout
    assert "outputs match NumPy" in run.stdout
    # a split reduction's accumulator is no input the user gives: samml info/random and sim run take full shapes
    subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(ff), "-o", str(tmp_path / "j"),
                    "--tile", "j=64"], capture_output=True, text=True, check=True)
    g = str(tmp_path / "j" / "graph.json")
    info = subprocess.run([sys.executable, "-m", "fuseflow.samml", "info", g], capture_output=True, text=True,
                          check=True).stdout
    assert "shape (300, 200) tile (64, 64)" in info and "y_acc" not in info
    subprocess.run([sys.executable, "-m", "fuseflow.samml", "random", g, "-o", str(tmp_path / "d.npz")],
                   capture_output=True, text=True, check=True)
    run = subprocess.run([sys.executable, "-m", "fuseflow.sim", "run", g, "--inputs", str(tmp_path / "d.npz"),
                          "--check"], capture_output=True, text=True, check=True)
    assert "tiles: 20 run" in run.stdout and "outputs match NumPy" in run.stdout


def test_api_compile_tiles():
    import fuseflow
    A = sp.random(300, 200, density=0.05, format="csr", random_state=0)
    x = np.ones(200)
    m = fuseflow.compile(SRC.replace("tile i 64\n", ""), {"A": A, "x": x}, tiles={"i": 100}, mode="float")
    assert m.program.tiling["dims"]["i"]["tiles"] == 3
    sim = m.simulate()
    assert sim.stats["tiling"]["tiles_run"] == 3
    np.testing.assert_allclose(sim.outputs["y"], A @ x)


def test_pytorch_model_tiled_matches_pytorch():
    torch = pytest.importorskip("torch")
    import fuseflow

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(12, 4, bias=False)

        def forward(self, a, x):
            return torch.sparse.mm(a, self.lin(x))
    torch.manual_seed(0)
    a = (torch.rand(40, 40) < 0.1).float().to_sparse_csr()
    m = fuseflow.compile(M(), (a, torch.randn(40, 12)), fuse="none", mode="float", tiles={"i": 16})
    assert {v["tiles"] for v in m.program.tiling["dims"].values()} == {3}
    assert m.check().ok


def test_model_api_takes_the_dma_contract():
    """``fuseflow.compile(..., dma=)`` sets the tiled plan's contract (buffers 1: what the RTL runs) and checks it."""
    import os
    import fuseflow
    from fuseflow.errors import FuseFlowError
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ff = os.path.join(root, "examples", "tiled", "spmv_tiled.ff")
    m = fuseflow.compile(ff, fuse="none", dma="buffers=1,latency=12")
    assert m.program.tiling["contract"]["buffers"] == 1 and m.program.tiling["contract"]["latency"] == 12
    assert m.check().ok
    with pytest.raises(FuseFlowError, match="buffers 3 must be 1 or 2"):
        fuseflow.compile(ff, dma="buffers=3")


def test_auto_sizes_say_when_a_sparse_input_has_no_density_and_no_data():
    """Without a declared density or data the sizes come from the default capacity, and the plan says so (a
    2 x 10^6-nonzero SpMV sized that way makes millions of tiles); with either, no such note."""
    src = "program spmv\ntensor A(8000, 8000) : csr{d}\ntensor x(8000) : dense\ny(i) = A(i,j) * x(j)\n"
    note = "no declared density and no data"
    plain = compile_text(src.format(d=""), onchip_bits=1 << 20).program
    assert any(note in n for n in plain.tiling["notes"])
    declared = compile_text(src.format(d=" density 0.002"), onchip_bits=1 << 20).program
    assert not any(note in n for n in declared.tiling["notes"])
    assert declared.tiling["tile_bits"] <= 1 << 20
    a = sp.random(8000, 8000, density=0.002, format="csr", random_state=np.random.default_rng(0))
    data = compile_text(src.format(d=""), onchip_bits=1 << 20, tile_inputs={"A": a}).program
    assert not any(note in n for n in data.tiling["notes"])
    assert (sum(d["tiles"] for d in declared.tiling["dims"].values())
            < sum(d["tiles"] for d in plain.tiling["dims"].values()))
