"""Board tops and board builds: a kernel top behind the UART bridge on the board's USB serial port and clock.

=============  ===========================  ======  =================  ==============================
board          FPGA                         clock   UART               amaranth-boards platform
=============  ===========================  ======  =================  ==============================
``ulx3s-85f``  ECP5 LFE5U-85F-6BG381C       25 MHz  FTDI (rx M1/tx L4)  ``ULX3S_85F_Platform``
``icebreaker`` iCE40UP5K-SG48               12 MHz  FTDI (rx 6/tx 9)    ``ICEBreakerPlatform``
=============  ===========================  ======  =================  ==============================

On the ULX3S the kernel, bridge and UART run from the ECP5 PLL (:mod:`fuseflow.boards.pll`) at ``--clock``
(default :data:`DEFAULT_ULX3S_MHZ`); the iCEBreaker runs them on its 12 MHz oscillator. LED 0 shows ``busy``,
LED 1 ``done``.
:func:`build_board` elaborates a program (:func:`fuseflow.hw.elaborate.build`), wraps it in a
:class:`BoardTop`, runs Yosys and nextpnr (YoWASP, :func:`fuseflow.boards.synth.run_build_plan`) in a temporary
directory and only then writes the bitstream, ``manifest.json`` (the host map the client needs, plus board,
clock, baud rate and build id) and ``report.json`` (utilisation, Fmax against the board clock, critical path).
"""

import json
import os
import shutil
import tempfile
import time

from amaranth.hdl import Elaboratable, Module
from amaranth.lib import io

from ..cli import atomic_write
from ..errors import HardwareError
from . import protocol as P
from .bridge import BridgedTop
from .catalog import BOARDS, DEFAULT_ULX3S_MHZ, Board, get_board  # noqa: F401 (the boards, named here too)


DEFAULT_BAUD = 115200


def uart_divisor(clock_hz, baud):
    """Clocks per UART bit; HardwareError when the rate error exceeds 2 % or the divisor is below 4."""
    if baud <= 0:
        raise HardwareError("--baud", f"must be positive, got {baud}")
    div = round(clock_hz / baud)
    if div < 4:
        raise HardwareError("--baud", f"{baud} baud is too fast for a {clock_hz / 1e6:g} MHz clock "
                                      f"(at least 4 clocks per bit)")
    err = abs(clock_hz / div - baud) / baud
    if err > 0.02:
        raise HardwareError("--baud", f"{baud} baud is {err:.1%} off with a {clock_hz / 1e6:g} MHz clock "
                                      f"(divisor {div})")
    return div


class BoardTop(Elaboratable):
    """``build`` (:class:`fuseflow.hw.elaborate.Build`) behind a :class:`~fuseflow.boards.bridge.BridgedTop` on
    the board's UART and LEDs."""

    def __init__(self, build, board, baud=DEFAULT_BAUD, clock_mhz=None):
        self.board = board
        self.baud = baud
        self.pll = board.pll_params(clock_mhz)
        self.clock_hz = board.kernel_clock_hz(clock_mhz)
        self.divisor = uart_divisor(self.clock_hz, baud)     # the UART runs on the kernel clock
        self.bridged = BridgedTop(build, self.divisor)

    def elaborate(self, platform):
        m = Module()
        if self.pll is not None:
            from .pll import ECP5PLLDomain
            osc = platform.request(platform.default_clk, dir="-")
            m.submodules.osc = osc_buf = io.Buffer("i", osc)
            ECP5PLLDomain(self.pll).add_to(m, osc_buf.i, platform)
        m.submodules.bridged = b = self.bridged
        uart = platform.request("uart", 0, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [b.rx.eq(rx.i), tx.o.eq(b.tx)]
        for i, sig in enumerate((b.busy, b.done)[:self.board.leds]):
            m.submodules[f"led{i}"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(sig)
        return m


def board_manifest(build, board, baud, divisor, bid, clock_hz=None):
    man = build.manifest()
    man["board"] = {"name": board.name, "description": board.description, "clock_hz": clock_hz or board.clock_hz,
                    "baud": baud, "divisor": divisor, "build_id": f"{bid:#010x}",
                    "protocol_version": P.VERSION}
    return man


def build_board(graph, board, out_dir, inputs=None, bake=False, probes=False, baud=DEFAULT_BAUD, seed=1,
                keep_work=None, progress=None, clock_mhz=None):
    """Build ``graph`` (Program or graph.json path) for ``board`` (name or :class:`Board`) into ``out_dir``.

    Returns the report dict (also written to ``out_dir/report.json``). Raises HardwareError (nothing written)
    when the program or the data does not fit, or a tool fails (a design too large for the device names the
    resource)."""
    from ..hw.elaborate import build as hw_build
    from .capacity import largest_spmv_overall, memory_map, op_read_ports
    from ..hw.elaborate import load_program
    from .synth import build_overrides, run_build_plan
    board = get_board(board) if isinstance(board, str) else board
    uart_divisor(board.kernel_clock_hz(clock_mhz), baud)   # bad clocks and baud rates fail before elaboration
    say = progress or (lambda msg: None)
    t0 = time.monotonic()
    program = load_program(graph)
    b = hw_build(program, inputs, bake=bake and inputs is not None, probes=probes)
    top = BoardTop(b, board, baud, clock_mhz)
    bid = top.bridged.build_id
    name = "top"
    say(f"elaborating {program.name} for {board.description}")
    plan = board.platform().build(top, name=name, do_build=False, **build_overrides(name, board.family, seed))
    with tempfile.TemporaryDirectory(prefix="fuseflow-board-") as work:
        say("synthesis and place-and-route (Yosys, nextpnr)")
        res = run_build_plan(plan, name, board.target, work, f"board {board.name}")
        if keep_work:
            shutil.copytree(work, keep_work, dirs_exist_ok=True)
        bit_src = os.path.join(work, f"{name}.{board.bitstream}")
        if not os.path.exists(bit_src):
            raise HardwareError(f"board {board.name}", f"no bitstream {name}.{board.bitstream} "
                                                                        f"was produced")
        with open(bit_src, "rb") as f:
            bitstream = f.read()
        logs = {}
        for src, dst in ((f"{name}.rpt", "yosys.log"), (f"{name}.tim", "nextpnr.log")):
            try:
                with open(os.path.join(work, src)) as f:
                    logs[dst] = f.read()
            except OSError:
                pass
    man = board_manifest(b, board, baud, top.divisor, bid, top.clock_hz)
    clock_mhz = top.clock_hz / 1e6
    clock = {"source": "pll" if top.pll else "oscillator", "oscillator_mhz": board.clock_hz / 1e6,
             "kernel_mhz": clock_mhz}
    if top.pll:
        clock["pll"] = top.pll.to_json()
    run = None
    if inputs is not None:
        from ..hw.elaborate import reference_run
        cycles = reference_run(program, inputs).cycles
        run = {"cycles": cycles, "seconds": cycles / top.clock_hz,
               "source": "reference simulator cycles of the build's inputs / kernel clock"}
    bit_name = f"{b.name}.{board.bitstream}"
    report = {
        "board": board.name, "description": board.description, "device": _device(board),
        "program": program.name, "module": b.name, "kernels": [k.name for k in program.kernels],
        "clock_mhz": _round(clock_mhz, 6), "clock": clock, "expected_run": run, "fmax_mhz": _round(res.fmax_mhz),
        "timing_met": res.fmax_mhz is not None and res.fmax_mhz >= clock_mhz,
        "margin": _round(res.fmax_mhz / clock_mhz) if res.fmax_mhz else None,
        "utilisation": {"luts": res.luts, "ffs": res.ffs, "brams": res.brams, "dsps": res.dsps,
                        "lutram_luts": res.lutram_luts, "logic_cells": res.logic_cells,
                        "device": res.utilisation},
        "critical_path": res.critical_path,
        "uart": {"baud": baud, "divisor": top.divisor, "build_id": f"{bid:#010x}"},
        "memories": [{"name": m["name"], "depth": m["depth"], "width": m["width"]} for m in man["host"]["memories"]],
        # host memory map with storage and block RAMs, and what the board's block RAM holds (boards/capacity.py)
        "memory_map": memory_map(b.plan, board.target, op_read_ports(b.top)),
        "largest_spmv": largest_spmv_overall(board.target),
        "baked": b.baked, "probes": probes,
        "files": {"bitstream": bit_name, "manifest": "manifest.json", "logs": sorted(logs)},
        "seconds": round(time.monotonic() - t0, 1),
    }
    _write(os.path.join(out_dir, bit_name), bitstream, "wb")
    for dst, text in logs.items():
        _write(os.path.join(out_dir, dst), text)
    _write(os.path.join(out_dir, "manifest.json"), json.dumps(man, indent=1) + "\n")
    _write(os.path.join(out_dir, "report.json"), json.dumps(report, indent=1) + "\n")
    return report


def _write(path, data, mode="w"):
    with atomic_write(path, mode, perms=0o644) as f:
        f.write(data)


def _device(board):
    from .synth import TARGETS
    return TARGETS[board.target]["device"]


def _round(x, n=2):
    return None if x is None else round(float(x), n)
