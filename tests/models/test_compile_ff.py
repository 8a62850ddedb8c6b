"""``fuseflow.compile`` on ``.ff`` programs: a path, source text or a parsed program gives the same model object as
a PyTorch model (simulate / check / reference / build / rtl_sim / report / save), without example inputs (issue 38,
item 3: one road to hardware)."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import fuseflow
from fuseflow import programs
from fuseflow.compiler import parse_file
from fuseflow.errors import FuseFlowError, ProgramError, TensorError
from fuseflow.model import CompiledModel

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

GCN2 = programs.path("gcn2")
ROOT = Path(programs.directory()).parent.parent


@pytest.fixture(scope="module")
def gcn2():
    return fuseflow.compile(GCN2)


def test_a_path_gives_the_model_object(gcn2, monkeypatch):
    monkeypatch.chdir(ROOT)
    m = fuseflow.compile("fuseflow/programs/gcn2.ff")
    assert isinstance(m, CompiledModel) and m.source == "ff" and m.name == "gcn2"
    assert [t.name for t in m.inputs] == ["A", "X", "W1", "W2"] and [t.name for t in m.outputs] == ["H2"]
    assert [k.name for k in m.program.kernels] == [k.name for k in gcn2.program.kernels]
    assert fuseflow.compile(Path(GCN2)).simulate().cycles == gcn2.simulate().cycles


def test_text_and_parsed_program_compile_the_same(gcn2):
    want = gcn2.simulate()
    for src in (Path(GCN2).read_text(), parse_file(GCN2)):
        m = fuseflow.compile(src)
        got = m.simulate()
        assert got.cycles == want.cycles
        np.testing.assert_array_equal(got.outputs["H2"], want.outputs["H2"])
    # a program built in Python is written back as .ff text that parses to the same graph
    m = fuseflow.compile(parse_file(GCN2))
    again = fuseflow.compile(m.ff_text)
    assert again.simulate().cycles == want.cycles


def test_simulate_default_and_given_inputs(gcn2):
    sim = gcn2.simulate()
    assert set(sim.outputs) == {"H2"} and sim.outputs["H2"].shape == (10, 3) and sim.cycles > 0
    assert sim.arrays[0] is sim.outputs["H2"] or np.array_equal(sim.arrays[0], sim.outputs["H2"])
    rng = np.random.default_rng(3)
    inputs = {"A": sp.random(10, 10, density=0.3, random_state=4, format="csr"), "X": rng.normal(size=(10, 6)),
              "W1": rng.normal(size=(6, 5)), "W2": rng.normal(size=(5, 3))}
    other = gcn2.simulate(inputs, mode="float")
    ref = gcn2.reference(inputs)["H2"]
    dense_a = inputs["A"].toarray()
    h1 = np.maximum(dense_a @ inputs["X"] @ inputs["W1"], 0)
    np.testing.assert_allclose(ref, np.maximum(dense_a @ h1 @ inputs["W2"], 0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(other.outputs["H2"], ref, rtol=1e-6, atol=1e-9)
    assert gcn2.check(inputs, mode="float").ok


@pytest.mark.parametrize("mode", ["float", "fixed"])
def test_check_against_numpy(gcn2, mode):
    c = gcn2.check(mode=mode)
    assert c.ok and c.mode == mode and c.against == "NumPy", c.problems
    assert "matches NumPy" in repr(c)


def test_report_has_cycles(gcn2):
    sim = gcn2.simulate()
    table = gcn2.report()
    assert isinstance(table, str) and "cycles" in table and "FIFO slots" in table
    assert table.splitlines()[-1].split()[:2] == ["total", str(sim.cycles)]
    assert all(k.name in table for k in gcn2.program.kernels)


def test_build_writes_verilog_and_manifest(gcn2, tmp_path):
    paths = gcn2.build(tmp_path / "build")
    for key in ("verilog", "manifest", "graph", "ff"):
        assert os.path.getsize(paths[key]) > 0, key
    man = json.loads(Path(paths["manifest"]).read_text())
    assert f"module {man['module']}" in Path(paths["verilog"]).read_text()
    assert [k["name"] for k in man["kernels"]] == [k.name for k in gcn2.program.kernels]
    assert Path(paths["ff"]).read_text() == Path(GCN2).read_text()


def test_build_is_the_cli_writer(tmp_path, capsys):
    """The model object and ``python -m fuseflow.hw build`` write the same files through one writer."""
    from fuseflow.hw.__main__ import main as hw_main
    m = fuseflow.compile(programs.path("spmv"))
    paths = m.build(tmp_path / "model")
    assert hw_main(["build", paths["graph"], "-o", str(tmp_path / "cli")]) == 0
    for key in ("verilog", "manifest"):
        cli = tmp_path / "cli" / os.path.basename(paths[key])
        assert cli.read_text() == Path(paths[key]).read_text(), key


def test_save_and_load(gcn2, tmp_path):
    gcn2.save(tmp_path / "m")
    back = fuseflow.load(tmp_path / "m")
    assert back.source == "ff" and back.check().ok
    assert back.simulate().cycles == gcn2.simulate().cycles


@requires_verilator
def test_spmv_on_verilator(tmp_path):
    """One small program on the RTL: bit- and cycle-identical to the fixed-mode simulator; the files written are
    the design that ran."""
    m = fuseflow.compile(programs.path("spmv"))
    r = m.rtl_sim(out_dir=tmp_path / "build")
    assert r["done"] and r["ok"], r["mismatches"] or r["stuck"]
    assert r["cycles_equal"], (r["rtl_kernel_cycles"], r["sim_kernel_cycles"])
    assert r["sim_cycles"] == m.simulate(mode="fixed").cycles
    assert os.path.getsize(r["paths"]["verilog"]) > 0 and os.path.getsize(r["paths"]["manifest"]) > 0


def _one_line(exc):
    text = str(exc.value)
    assert "\n" not in text and text
    return text


def test_missing_file_is_one_line(tmp_path):
    with pytest.raises(FuseFlowError) as exc:
        fuseflow.compile(str(tmp_path / "nothing.ff"))
    assert "nothing.ff" in _one_line(exc) and "no such" in str(exc.value)


def test_syntax_error_is_one_line(tmp_path):
    bad = tmp_path / "bad.ff"
    bad.write_text("program bad\ntensor A(4, 4) : csr\nx(i) = A(i,j) *\n")
    with pytest.raises(ProgramError) as exc:
        fuseflow.compile(str(bad))
    assert "bad.ff, line 3" in _one_line(exc)
    with pytest.raises(ProgramError) as exc:
        fuseflow.compile("program bad\ntensor A(4 4) : csr\nx(i) = A(i,j)\n")
    assert "line 2" in _one_line(exc)


def test_wrong_inputs_are_refused(gcn2):
    inputs = dict(gcn2.example_inputs)
    with pytest.raises(TensorError):
        gcn2.simulate({k: v for k, v in inputs.items() if k != "X"})
    with pytest.raises(TensorError):
        gcn2.simulate({**inputs, "X": np.zeros((10, 5))})
    with pytest.raises(TensorError):
        gcn2.simulate({**inputs, "Y": np.zeros(3)})
    with pytest.raises(FuseFlowError):
        fuseflow.compile(GCN2, formats={"A": "dcsr"})
