"""Building and running a SAMML program as hardware: the library behind ``python -m fuseflow.hw`` and the model
object (:meth:`fuseflow.model.CompiledModel.build` / ``.rtl_sim``). The command line only parses options and
prints; the files are written here, by :func:`write_build`, for both.

    from fuseflow.hw.build import build_design, run_sim
    files = build_design("graph.json", "build/", inputs=data)          # Verilog + manifest
    summary = run_sim("graph.json", data)                               # Verilator vs the reference simulator
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..cli import atomic_write
from ..errors import HardwareError

if TYPE_CHECKING:
    from ..samml.graph import Program
    from ..samml.offchip import OffchipContract
    from .elaborate import Build

#: top-level interfaces of ``build --interface``
INTERFACES = ("host", "axi", "axis", "axi-master")
#: an example of the off-chip memory parameters an ``axi-master`` build needs (``--offchip``)
OFFCHIP_EXAMPLE = "word_bytes=4,latency=20,burst=64,outstanding=4"


def offchip_contract(program: Program, text: str | None = None) -> OffchipContract:
    """The off-chip contract of an ``axi-master`` build: a tiled graph's plan (its ``tiling`` section's contract;
    ``text`` must then agree: :func:`fuseflow.hw.tiled.plan_contract`), else ``text`` (``--offchip``, ``key=value``
    pairs of :class:`fuseflow.samml.offchip.OffchipContract`), else the graph's ``config["offchip"]``; none is an
    error (the port's burst length, outstanding bursts and data width are built into the Verilog)."""
    from ..samml.offchip import OffchipContract, parse_contract
    tiling = getattr(program, "tiling", None)
    if tiling is not None:
        from ..samml.tileplan import contract_of
        from .tiled import plan_contract
        plan = contract_of(tiling).to_json()     # --offchip's keys are compared with the plan's
        return plan_contract(program, parse_contract(text, "--offchip", plan) if text is not None else None)
    given = parse_contract(text, "--offchip") if text is not None else None
    if given is not None:
        return given
    spec = (getattr(program, "config", None) or {}).get("offchip")
    if spec:
        return OffchipContract(**{k: int(v) for k, v in spec.items() if k in OffchipContract.__dataclass_fields__})
    raise HardwareError("--interface axi-master", f"needs the off-chip memory parameters: --offchip "
                                                  f"{OFFCHIP_EXAMPLE} (or an 'offchip' entry in the graph's config)")


@dataclass
class BuildFiles:
    """What :func:`write_build` wrote: ``paths`` (``verilog``, ``manifest``, and when asked ``graph``, ``ff`` and
    ``testbench``: the run script), the ``manifest`` as written, the :class:`~fuseflow.hw.elaborate.Build`, and the
    testbench's file names."""
    paths: dict
    manifest: dict
    build: Build
    interface: str = "host"
    testbench: list = field(default_factory=list)


def write_build(b: Build, out_dir: str, *, interface: str = "host", testbench: bool = False,
                graph: Program | None = None, ff_text: str | None = None, offchip: str | None = None) -> BuildFiles:
    """Write build ``b`` (:func:`fuseflow.hw.elaborate.build`) into ``out_dir``: ``<module>.v`` and ``<module>.json``
    (the manifest; with ``interface`` ``axi``/``axis`` the AXI4-Lite wrapper's), with ``testbench`` the standalone
    cocotb testbench (:mod:`fuseflow.hw.testbench`), with ``graph`` (a Program) ``graph.json``, with ``ff_text``
    ``model.ff``; ``interface`` ``axi-master`` (:mod:`fuseflow.hw.axi_master`) takes the off-chip parameters
    ``offchip`` (:func:`offchip_contract`). The testbench is made before anything is written, so a refusal leaves
    nothing behind."""
    if interface not in INTERFACES:
        raise HardwareError("--interface", f"unknown interface {interface!r} ({', '.join(INTERFACES)})")
    if interface == "axi-master":
        if testbench:
            raise HardwareError("--testbench", "not available for --interface axi-master (tests/hw/test_axi_master.py "
                                               "shows how to run one)")
        from .axi_master import axim_build
        text, man = axim_build(b, offchip_contract(b.program, offchip))
    elif interface in ("axi", "axis"):
        from .axi import axi_build
        text, man = axi_build(b, streams=interface == "axis")
    else:
        text, man = b.verilog(), b.manifest()
    bench = {}
    if testbench:
        from .testbench import testbench_files
        bench = testbench_files(b, man if interface != "host" else None)
    paths = {"verilog": os.path.join(out_dir, f"{man['module']}.v"),
             "manifest": os.path.join(out_dir, f"{man['module']}.json")}
    with atomic_write(paths["verilog"]) as f:
        f.write(text)
    with atomic_write(paths["manifest"]) as f:
        f.write(json.dumps(man, indent=1) + "\n")
    if graph is not None:
        from ..samml import io as samml_io
        paths["graph"] = os.path.join(out_dir, "graph.json")
        samml_io.save(graph, paths["graph"])
    if ff_text is not None:
        paths["ff"] = os.path.join(out_dir, "model.ff")
        with atomic_write(paths["ff"]) as f:
            f.write(ff_text)
    for fname, body in bench.items():
        with atomic_write(os.path.join(out_dir, fname), perms=0o755 if fname.endswith(".py") else None) as f:
            f.write(body)
    if bench:
        paths["testbench"] = os.path.join(out_dir, "run_tb.py")
    return BuildFiles(paths, man, b, interface, list(bench))


def build_design(graph: Program | str, out_dir: str, inputs: dict | None = None, *, bake: bool = False,
                 probes: bool = True, interface: str | None = None, testbench: bool = False, write_graph: bool = False,
                 ff_text: str | None = None, offchip: str | None = None) -> BuildFiles:
    """Elaborate ``graph`` (a Program or a graph.json path) and write it with :func:`write_build`.

    ``inputs``: {name: array | scipy matrix} size the memories (and with ``bake`` are their initial contents);
    without them the memories take the capacities the graph declares. ``testbench`` without ``inputs``: random data
    for a graph that declares its capacities (:func:`fuseflow.hw.testbench.testbench_inputs`). ``write_graph``:
    also ``graph.json``. ``offchip``: see :func:`write_build`. ``interface`` None: ``axi-master`` for a tiled graph
    (its tiles run from off-chip memory: :mod:`fuseflow.hw.tiled`), else ``host``."""
    from .elaborate import build, load_program
    program = load_program(graph)
    if getattr(program, "tiling", None) is not None:
        if interface not in (None, "axi-master"):
            raise HardwareError("--interface", f"a tiled graph runs its tiles from off-chip memory: --interface "
                                               f"axi-master (the default for it), not {interface}")
        if inputs is not None:
            raise HardwareError("--inputs", "a tiled graph's build takes its capacities from the graph; its data "
                                            "goes to off-chip memory at run time (fuseflow.hw.tiled.tiled_image)")
        interface = "axi-master"
    interface = interface or "host"
    if offchip is not None and interface != "axi-master":
        raise HardwareError("--offchip", "only with --interface axi-master")
    if interface == "axi-master":
        if bake:
            raise HardwareError("--interface axi-master", "the tensor data comes from off-chip memory at run time: "
                                                          "build without baked inputs (--no-bake)")
        offchip_contract(program, offchip)            # refuse before elaborating
    if testbench:
        from .testbench import testbench_inputs
        inputs = testbench_inputs(program, inputs)
    b = build(program, inputs, bake=bake, probes=probes)
    return write_build(b, out_dir, interface=interface, testbench=testbench,
                       graph=program if write_graph else None, ff_text=ff_text, offchip=offchip)


def run_sim(graph: Program | str, inputs: dict, simulator: str = "verilator", vcd: str | None = None,
            max_cycles: int | None = None, bake: bool = False, cache: str | None = None,
            compile_fast: bool | None = None, prebuilt: Build | None = None, progress: bool | None = None) -> dict:
    """Elaborate, run and compare; returns a summary dict (also used by tests and benchmarks).

    ``prebuilt``: a :class:`~fuseflow.hw.elaborate.Build` of ``graph`` made with ``inputs`` (its reference run
    is the golden one), so a caller that also writes the Verilog elaborates once. ``compile_fast``: see
    :func:`fuseflow.hw.verilator.build_verilator`. ``progress``: say what is being elaborated and built, and how
    far the Verilator build is, on stderr. With Verilator the summary has ``build`` (``cached``: the build was
    reused; ``seconds``; ``dir``): the build depends on the graph and its capacities, not on the data (unless
    ``bake``)."""
    from .elaborate import build, check_outputs_fit, load_program, reference_run
    from .top import compare_tensors, stuck_report
    if max_cycles is not None and (not isinstance(max_cycles, int) or max_cycles < 1):
        raise HardwareError("--max-cycles", f"must be at least 1, got {max_cycles!r}")
    if prebuilt is not None and prebuilt.reference is not None:
        program, ref, b = prebuilt.program, prebuilt.reference, prebuilt
    else:
        program = load_program(graph)
        ref = reference_run(program, inputs)
        b = build(program, inputs, bake=bake, reference=ref)
    check_outputs_fit(b.plan, ref)
    if max_cycles is None:
        max_cycles = 4 * ref.cycles + 10_000
    if simulator == "amaranth":
        from .elaborate import run_amaranth
        res = run_amaranth(b, max_cycles=max_cycles, vcd=vcd)
    elif simulator == "verilator":
        from .verilator import run_build
        res = run_build(b, max_cycles=max_cycles, vcd=vcd, root=cache, compile_fast=compile_fast, progress=progress)
    else:
        raise HardwareError("--simulator", f"unknown simulator {simulator!r} (verilator or amaranth)")
    man = b.manifest()
    summary = {
        "name": program.name, "simulator": simulator, "done": res["done"],
        "rtl_cycles": res["cycles"], "sim_cycles": ref.cycles,
        "rtl_kernel_cycles": [res["kernel_cycles"][k.name] for k in program.kernels],
        "sim_kernel_cycles": list(ref.kernel_cycles),
        "wall_cycles": res["wall_cycles"], "overflow": res["overflow"], "op_overflow": res.get("op_overflow", 0),
        "sim_cycles_per_second": res.get("sim_cycles_per_second"),
        "run_seconds": res.get("run_seconds"),
        "mismatches": [], "stuck": None, "tensors": sorted(ref.tensors),
    }
    if "build" in res:
        summary["build"] = res["build"]
    if not res["done"]:
        summary["stuck"] = stuck_report(man, res, max_cycles)
    else:
        summary["mismatches"] = compare_tensors(ref.tensors, res["tensors"])
        if res["overflow"]:
            mems = [mm["name"] for mm in man["host"]["memories"] if res["overflow"] >> mm["sel"] & 1]
            summary["mismatches"].append(f"writes past the capacity of {', '.join(mems)}")
        if res.get("op_overflow"):
            ops = [o for i, o in enumerate(man["overflow_ops"]) if res["op_overflow"] >> i & 1]
            summary["mismatches"].append(f"{', '.join(ops)} exceeded its capacity (dim)")
    summary["ok"] = bool(res["done"] and not summary["mismatches"])
    summary["cycles_equal"] = summary["rtl_kernel_cycles"] == summary["sim_kernel_cycles"]
    return summary


__all__ = ["INTERFACES", "offchip_contract", "BuildFiles", "write_build", "build_design", "run_sim"]
