"""Per-stream widths (fuseflow.samml.widths.stream_tops / assign_stream_widths): each crd, ref and repsig stream
is as wide as what it can carry, written in graph.json, validated, and checked token by token by the simulator."""

import json
import subprocess
import sys

import numpy as np
import pytest

from fuseflow.errors import GraphError, TensorError
from fuseflow.samml import kernels, load, save
from fuseflow.samml.widths import assign_stream_widths, stream_tops, stream_width
from fuseflow.sim import run


@pytest.fixture(scope="module")
def spmv_2500():
    return kernels.spmv(2500, 2500, "csr", density=0.05)


def widths_of(program):
    return {s.id: stream_width(program, s) for k in program.kernels for s in k.streams.values()}


def test_spmv_2500_streams_are_as_wide_as_their_data(spmv_2500):
    p = spmv_2500
    assert p.config["crd_width"] == 24 and p.tensors["B"].capacity[1] > 65535
    w = widths_of(p)
    # B's level-1 positions (up to its capacity) need 24 bits, and the intersect passes them on
    assert w["scan_B1.ref"] == w["intersect_j.ref0"] == 24
    # coordinates below 2500, c's positions, the root's 0, the repeat signals: 16 bits
    for sid in ("root_B.ref", "scan_B0.ref", "scan_B0.crd", "scan_B1.crd", "root_c.ref", "repsig_c_i.repsig",
                "repeat_c_i.out", "scan_c0.crd", "scan_c0.ref", "intersect_j.ref1", "intersect_j.crd",
                "drop_i.outer"):
        assert w[sid] == 16, sid
    # values keep the value width
    assert w["vals_B.val"] == w["mul.out"] == 32


def test_tops_name_what_the_stream_carries(spmv_2500):
    tops = stream_tops(spmv_2500, spmv_2500.kernels[0])
    assert tops["scan_B1.ref"] == (spmv_2500.tensors["B"].capacity[1] - 1, "tensor B level 1 positions")
    assert tops["intersect_j.crd"][0] == 2499 and tops["root_B.ref"][0] == 0
    assert "vals_B.val" not in tops


def test_a_16_bit_program_is_unchanged():
    p = kernels.spmv(8, 10, fmt="csr")
    doc = p.to_json()
    assert p.config["crd_width"] == 16
    assert all("width" not in s for k in doc["kernels"] for s in k["streams"])


def test_widths_round_trip_through_graph_json(spmv_2500, tmp_path):
    save(spmv_2500, tmp_path / "g.json")
    doc = json.loads((tmp_path / "g.json").read_text())
    streams = {s["id"]: s for s in doc["kernels"][0]["streams"]}
    assert streams["scan_B1.crd"]["width"] == 16 and "width" not in streams["scan_B1.ref"]
    assert widths_of(load(tmp_path / "g.json")) == widths_of(spmv_2500)


def test_locate_references_take_the_located_levels_positions():
    """A compiled SpMV with a dense c: c is located, its references are below 2500 (16 bits) while B's reach
    its capacity (24 bits)."""
    from fuseflow.compiler import compile_text
    src = "tensor B(2500, 2500) : csr density 0.05\ntensor c(2500) : dense\nx(i) = B(i,j) * c(j)\n"
    p = compile_text(src).program
    k = p.kernels[0]
    loc = [n for n in k.nodes.values() if n.op == "locate"]
    assert [(n.params["tensor"], n.params["level"]) for n in loc] == [("c", 0)]
    assert p.config["crd_width"] == 24
    assert stream_width(p, k.output_stream(loc[0].id, "ref")) == 16
    wide = {s.id for s in k.streams.values() if s.kind != "val" and stream_width(p, s) == 24}
    assert wide and all(stream_tops(p, k)[sid][1] == "tensor B level 1 positions" for sid in wide)

def _doc(program):
    return json.loads(json.dumps(program.to_json()))


def _stream(doc, sid):
    return next(s for s in doc["kernels"][0]["streams"] if s["id"] == sid)


@pytest.mark.parametrize("sid, width, match", [
    ("mul.out", 16, r"streams\[\d+\]\.width: stream 'mul.out' is val: only crd, ref, repsig streams take a width"),
    ("scan_B1.crd", 32, r"must be an integer in 10..24 \(config.crd_width\), got 32"),
    ("scan_B1.ref", 16, r"^tensor B: level 1 positions up to 314695 need 24 bits, stream scan_B1.ref "
                        r"declares width 16"),
])
def test_validation_refuses_bad_widths(spmv_2500, sid, width, match):
    from fuseflow.samml.graph import Program
    doc = _doc(spmv_2500)
    _stream(doc, sid)["width"] = width
    with pytest.raises(GraphError, match=match):
        Program.from_json(doc).validate()


def test_cli_refuses_a_stream_too_narrow_for_its_tensor_in_one_line(spmv_2500, tmp_path):
    doc = _doc(spmv_2500)
    _stream(doc, "intersect_j.ref0")["width"] = 16
    (tmp_path / "g.json").write_text(json.dumps(doc))
    out = subprocess.run([sys.executable, "-m", "fuseflow.samml", "validate", str(tmp_path / "g.json")],
                         capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip() == (f"error: {tmp_path / 'g.json'}: tensor B: level 1 positions up to 314695 need 24 "
                                  f"bits, stream intersect_j.ref0 declares width 16 (recompile, or widen the stream)")


def test_simulator_checks_every_token_against_its_streams_width(monkeypatch):
    """Were a width rule wrong, the simulator would say so: here scan_B1.crd is made 10 bits behind the
    validation's back, and a coordinate of 1024 or more stops the run with one line naming the stream."""
    import fuseflow.sim.engine as engine
    p = kernels.spmv(4, 2000, "csr")
    B = np.zeros((4, 2000))
    B[1, 1500] = 1.0
    c = np.zeros(2000)
    c[1500] = 2.0
    assert run(p, {"B": B, "c": c}).outputs["x"][1] == 2.0
    real = engine.stream_width
    monkeypatch.setattr(engine, "stream_width", lambda prog, s: 10 if s.id == "scan_B1.crd" else real(prog, s))
    with pytest.raises(TensorError, match=r"^stream scan_B1.crd: token 1500 needs 11 bits, the stream is 10 bits "
                                          r"wide"):
        run(p, {"B": B, "c": c})


def test_assign_stream_widths_under_a_forced_program_width():
    """A program forced to 24-bit coordinates (its data small) gets 16-bit streams everywhere."""
    p = kernels.build("spmspm_gustavson")
    p.config["crd_width"] = 24
    counts = assign_stream_widths(p)
    assert counts == {"16": sum(1 for k in p.kernels for s in k.streams.values() if s.kind != "val")}
    p.validate()


def test_every_index_output_of_the_registry_says_what_it_carries():
    """An output that may carry coordinates or references declares a bound or the inputs it passes on (else its
    streams would silently stay crd_width), and the inputs it names exist."""
    from fuseflow.samml.registry import OPS
    for op in OPS.values():
        inputs = {p.name for p in op.inputs}
        for port in op.outputs:
            if port.kind == "val":
                assert not port.bound and not port.carries, (op.name, port.name)
                continue
            assert bool(port.bound) != bool(port.carries), (op.name, port.name)
            assert port.bound in (None, "zero", "dim", "positions"), (op.name, port.name)
            assert set(port.carries) <= inputs, (op.name, port.name)
