"""The resource check before place and route (synthetic Yosys statistics) and the ECP5 PLL dividers."""

import itertools

import pytest

from fuseflow.boards import pll, synth
from fuseflow.boards.platforms import BOARDS, BoardTop
from fuseflow.errors import HardwareError

ICE40_FITS = {"SB_LUT4": 4000, "SB_CARRY": 900, "SB_DFFE": 2000, "SB_DFFSR": 400, "SB_RAM40_4K": 2, "SB_MAC16": 4}


def test_estimate_counts_every_resource():
    assert synth.estimate_resources(ICE40_FITS, "ice40-up5k") == {"luts": 4000, "ffs": 2400, "brams": 2, "dsps": 4}
    ecp5 = {"LUT4": 1000, "CCU2C": 50, "TRELLIS_DPR16X4": 10, "TRELLIS_FF": 700, "DP16KD": 3, "MULT18X18D": 4,
            "PFUMX": 99}
    assert synth.estimate_resources(ecp5, "ecp5-85f") == {"luts": 1000 + 100 + 20, "ffs": 700, "brams": 3, "dsps": 4}


def test_a_design_that_fits_passes():
    assert synth.check_fits(ICE40_FITS, "ice40-up5k", "board icebreaker")["luts"] == 4000


# the spmv_dcsr board top with random inputs at density 0.5 (Yosys' stat of the build that nextpnr failed on)
SPMV_RANDOM = {"SB_CARRY": 1310, "SB_DFF": 2, "SB_DFFE": 2181, "SB_DFFESR": 1308, "SB_DFFSR": 448, "SB_GB_IO": 1,
               "SB_IO": 4, "SB_LUT4": 5810, "SB_MAC16": 6}


@pytest.mark.parametrize("target, cells, needle", [
    ("ice40-up5k", SPMV_RANDOM, "it needs 5810 logic cells (SB_LUT4, + SB_DFF* not packed with their LUT), "
                                "the device has 5280"),
    ("ice40-up5k", {**ICE40_FITS, "SB_DFFE": 5000}, "it needs 5400 logic cells' flip-flops (SB_DFF*), the device has 5280"),
    ("ice40-up5k", {**ICE40_FITS, "SB_RAM40_4K": 31}, "it needs 31 block RAMs (SB_RAM40_4K), the device has 30"),
    ("ice40-up5k", {**ICE40_FITS, "SB_MAC16": 9}, "it needs 9 DSPs (SB_MAC16), the device has 8"),
    ("ice40-up5k", {**ICE40_FITS, "SB_LUT4": 10, "SB_CARRY": 6000}, "it needs 6000 logic cells"),
    ("ecp5-85f", {"LUT4": 80000, "CCU2C": 2000}, "it needs 84000 LUT4s"),
    ("ecp5-85f", {"TRELLIS_FF": 90000}, "it needs 90000 flip-flops (TRELLIS_FF), the device has 83640"),
    ("ecp5-85f", {"DP16KD": 209}, "it needs 209 block RAMs (DP16KD), the device has 208"),
    ("ecp5-85f", {"MULT18X18D": 157}, "it needs 157 DSP multipliers (MULT18X18D), the device has 156"),
])
def test_overflow_names_the_resource_and_both_numbers(target, cells, needle):
    with pytest.raises(HardwareError) as e:
        synth.check_fits(cells, target, "board x")
    assert e.value.what == "board x"
    assert e.value.why.startswith(f"the design does not fit the {synth.TARGETS[target]['device']}: ")
    assert needle in e.value.why and "\n" not in e.value.why


def test_worst_overflow_is_named():
    cells = {**ICE40_FITS, "SB_LUT4": 5300, "SB_MAC16": 16}      # 1.004x LUTs, 2x DSPs
    with pytest.raises(HardwareError, match="16 DSPs"):
        synth.check_fits(cells, "ice40-up5k", "board x")


def _cell(kind, **conns):
    dirs = {p: ("output" if p in ("O", "Q") else "input") for p in conns}
    return {"type": kind, "port_directions": dirs, "connections": {p: [b] for p, b in conns.items()}}


def test_ice40_logic_cells_counts_packing():
    """Only a flip-flop that is the single load of a LUT shares its logic cell (as nextpnr packs them)."""
    netlist = {"modules": {"top": {"attributes": {"top": "00000000000000000000000000000001"},
        "ports": {"out": {"direction": "output", "bits": [12]}},
        "cells": {
            "a": _cell("SB_LUT4", I0=2, O=10), "fa": _cell("SB_DFFE", D=10, Q=11),          # packed pair
            "b": _cell("SB_LUT4", I0=11, O=12), "fb": _cell("SB_DFF", D=12, Q=13),          # LUT also drives a port
            "c": _cell("SB_LUT4", I0=13, O=14), "fc": _cell("SB_DFFSR", D=14, Q=15),        # LUT drives two loads
            "d": _cell("SB_LUT4", I0=14, O=16),
            "fd": _cell("SB_DFFESR", D=3, Q=17),                                          # FF alone
            "k": _cell("SB_CARRY", I0=2, I1=3, CI=4),
        }}}}
    # 4 LUTs + 4 FFs - 1 pair
    assert synth.ice40_logic_cells(netlist) == 7
    cells = {"SB_LUT4": 4, "SB_DFF": 4}
    assert synth.check_fits(cells, "ice40-up5k", "x", netlist)["luts"] == 7
    big = {"modules": {"top": {"cells": {f"f{i}": _cell("SB_DFF", D=2, Q=100 + i) for i in range(2700)}
                                         | {f"l{i}": _cell("SB_LUT4", I0=2, O=5000 + i) for i in range(2700)}}}}
    # 2700 LUTs and 2700 FFs each fit, but unpaired they need 5400 cells
    with pytest.raises(HardwareError, match="it needs 5400 logic cells .* the device has 5280"):
        synth.check_fits({"SB_LUT4": 2700, "SB_DFF": 2700}, "ice40-up5k", "x", big)


def test_build_script_split_keeps_the_environment():
    script = ('#!/bin/sh\nset -e\n: ${YOSYS:=yosys}\n: ${NEXTPNR_ICE40:=nextpnr-ice40}\n'
              '"$YOSYS" -q -l top.rpt top.ys\n"$NEXTPNR_ICE40" --json top.json\n"$ICEPACK" top.asc top.bin\n')
    a, b = synth.split_build_script(script)
    assert a.splitlines()[-1] == '"$YOSYS" -q -l top.rpt top.ys' and "NEXTPNR_ICE40\" --json" not in a
    assert b.startswith("#!/bin/sh\nset -e\n: ${YOSYS:=yosys}\n") and '"$YOSYS"' not in b
    assert b.splitlines()[-2:] == ['"$NEXTPNR_ICE40" --json top.json', '"$ICEPACK" top.asc top.bin']


# --- the PLL --------------------------------------------------------------------------------------------

def _reachable(fin):
    """Every CLKOP frequency an EHXPLLL makes from ``fin`` (brute force over the data-sheet limits)."""
    out = set()
    for i, fb, op in itertools.product(range(1, 129), range(1, 81), range(1, 129)):
        pfd = fin / i
        f = pfd * fb
        if 3.125 <= pfd <= 400 and 10 <= f <= 400 and 400 <= f * op <= 800:
            out.add(f)
    return sorted(out)


@pytest.mark.parametrize("fin", [25.0, 12.0])
def test_pll_dividers_within_limits_and_closest(fin):
    reachable = _reachable(fin)
    for req in [10, 12.5, 20, 31.4, 33.3, 40, 47, 48, 50, 60, 62.5, 75, 83.3, 100, 133, 150, 200, 333, 400]:
        p = pll.ecp5_pll_params(fin, req)
        pfd = fin / p.clki_div
        out = pfd * p.clkfb_div
        vco = out * p.clkop_div
        assert 3.125 <= pfd <= 400 and 400 <= vco <= 800 and 10 <= out <= 400
        assert p.clki_div in range(1, 129) and p.clkfb_div in range(1, 81) and p.clkop_div in range(1, 129)
        assert out == pytest.approx(p.output_mhz) and vco == pytest.approx(p.vco_mhz)
        assert p.clkop_cphase == (p.clkop_div - 1) // 2
        best = min(abs(f - req) for f in reachable)
        assert abs(p.output_mhz - req) == pytest.approx(best)
        if best <= 0.01 * req:
            assert abs(p.output_mhz - req) <= 0.01 * req


def test_pll_matches_ecppll_dividers():
    # ecppll -i 12 -o 16 (olofk/serv servant/ecp5_evn_pll.v): CLKI_DIV 3, CLKFB_DIV 4
    p = pll.ecp5_pll_params(12, 16)
    assert (p.clki_div, p.clkfb_div, p.output_mhz) == (3, 4, 16)
    p = pll.ecp5_pll_params(25, 40)
    assert p.output_mhz == 40 and 25 / p.clki_div * p.clkfb_div == 40


@pytest.mark.parametrize("fin, fout, msg", [(25, 401, "10-400 MHz"), (25, 5, "10-400 MHz"), (4, 40, "input")])
def test_pll_out_of_range(fin, fout, msg):
    with pytest.raises(HardwareError, match=msg):
        pll.ecp5_pll_params(fin, fout)


def test_ulx3s_top_runs_the_kernel_and_uart_from_the_pll():
    from fuseflow.boards.synth import build_overrides
    from fuseflow.hw.elaborate import build
    from fuseflow.samml import kernels
    program, inputs = kernels.dcsr_example()
    board = BOARDS["ulx3s-85f"]
    top = BoardTop(build(program, inputs), board, 115200, clock_mhz=50)
    assert top.clock_hz == 50e6 and top.divisor == round(50e6 / 115200)
    plan = board.platform().build(top, name="top", do_build=False, **build_overrides("top", "ecp5"))
    il = plan.files["top.il"]
    il = il if isinstance(il, str) else il.decode()
    assert "EHXPLLL" in il
    for param, value in (("CLKI_DIV", 1), ("CLKFB_DIV", 2), ("CLKOP_DIV", 8), ("CLKOP_CPHASE", 3)):
        assert f"parameter \\{param} {value}" in il
    assert "50000000.0 HZ" in plan.files["top.lpf"]          # nextpnr times the kernel domain at the PLL clock
    ice = BoardTop(build(program, inputs), BOARDS["icebreaker"])
    assert ice.clock_hz == 12e6 and ice.pll is None and ice.divisor == 104
