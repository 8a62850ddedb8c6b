"""``fuseflow hw``: build a graph.json into Verilog, or run it as RTL against the reference simulator.

    fuseflow hw build graph.json -o build/ [--inputs data.npz | --random-inputs DENSITY] [--no-probes] [--no-bake]
                      [--interface host|axi|axis|axi-master] [--offchip word_bytes=4,latency=20,...] [--testbench]
    fuseflow hw sim graph.json --inputs data.npz | --random-inputs DENSITY [--simulator verilator|amaranth]
                    [--vcd out.vcd] [--max-cycles N] [--bake] [--json out.json]

``build`` writes ``<out>/<name>.v`` and ``<out>/<name>.json`` (the manifest: ports, memories, capacities, widths,
host address map, channels). Memories are sized from the graph's declared capacities, else from ``--inputs``
(whose data is then also baked into the memories' initial contents, unless ``--no-bake``). ``--testbench`` also
writes a standalone cocotb testbench beside them (``vectors.json``, ``test_<name>.py``, ``run_tb.py``: see
:mod:`fuseflow.hw.testbench`); ``python run_tb.py [--sim verilator|icarus] [--waves]`` there runs it.
``--interface axi-master`` builds the kernel top with an AXI4 master port to off-chip memory, a DMA and a tile
sequencer (no data in the Verilog; ``--offchip`` gives the port's parameters: docs/hardware.md).

``sim`` runs the fixed-mode reference simulator, elaborates the program (capacities from the graph or the data),
loads the inputs through the host port (or bakes them with ``--bake``), pulses start, waits for done (a watchdog
ends a stuck run and says where it stopped), reads every written tensor back through the host port and compares
it bit for bit with the reference, then prints RTL cycles beside the simulator's. Exit status: 0 when every
written tensor is bit-identical, 1 when not (or the run never finished), 2 for bad input.
"""

import argparse
import json
import sys

from ..cli import atomic_write, check_separate_outputs, describe, main_guard, output_dir, output_file, positive_int
from ..samml.sample import add_data_arguments, load_data
from ..errors import HardwareError
from .build import INTERFACES, run_sim  # noqa: F401  (the library: fuseflow.hw.build; re-exported for old imports)


def _parser():
    ap = argparse.ArgumentParser(prog="fuseflow hw", description=describe(__doc__.split("\n\n")[0]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="elaborate graph.json into Verilog and a manifest")
    b.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    b.add_argument("-o", "--output", "--out", dest="out", metavar="DIR",
                   default="build", type=output_dir, help="output directory (default: build)")
    add_data_arguments(b, False, "tensor file (.npz/.mtx/.npy): sizes memories and bakes the data in")
    b.add_argument("--no-probes", action="store_true", help="leave out the per-channel probe registers")
    b.add_argument("--no-bake", action="store_true", help="size memories from --inputs but leave them empty "
                                                          "(the host port loads data at run time)")
    b.add_argument("--interface", choices=INTERFACES, default=None,
                   help="top-level interface: host (the kernel top's host port, default), axi (an AXI4-Lite "
                        "slave for control, status and data) or axis (axi plus AXI4-Stream ports for memory images "
                        "in and out) or axi-master (an AXI4 master port to off-chip memory with a DMA and a tile "
                        "sequencer, AXI4-Lite control; needs --offchip; the default for a tiled graph, whose "
                        "contract it takes): docs/hardware.md")
    b.add_argument("--offchip", metavar="KEY=N,...",
                   help="off-chip memory parameters of --interface axi-master: word_bytes, latency, burst, "
                        "outstanding, buffers (e.g. word_bytes=4,latency=20,burst=64,outstanding=4)")
    b.add_argument("--testbench", action="store_true",
                   help="also write a standalone cocotb testbench (run_tb.py, test vectors from the reference "
                        "simulator on --inputs, or on random data when the graph declares its capacities)")
    s = sub.add_parser("sim", help="run the RTL and compare with the fixed-mode reference simulator")
    s.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    add_data_arguments(s, True, "tensor file (.npz/.mtx/.npy) with every input tensor")
    s.add_argument("--simulator", choices=("verilator", "amaranth"), default="verilator",
                   help="RTL simulator: verilator (default) or amaranth (Amaranth's Python simulator, slow)")
    s.add_argument("--vcd", type=output_file, help="write a waveform of the run here")
    s.add_argument("--max-cycles", type=positive_int, help="watchdog (default: 4 x the reference cycles + 10000)")
    s.add_argument("--bake", action="store_true", help="bake the inputs into memory init instead of loading "
                                                        "them through the host port")
    s.add_argument("--json", type=output_file, help="write the run's results (cycles, comparison) here as JSON")
    s.add_argument("--progress", action="store_true", help="show the elaboration's and the Verilator build's "
                                                           "progress on stderr even when it is not a terminal")
    sub.add_parser("correlate", add_help=False,
                   help="RTL-vs-simulator correlation report over a kernel suite (fuseflow hw correlate -h)")
    return ap


def _data(args):
    """--inputs or --random-inputs (the graph is loaded, and so validated, first)."""
    from ..samml import io as samml_io
    return load_data(args, samml_io.load(args.graph) if args.random_inputs is not None else None)


def cmd_build(args):
    from .build import build_design
    inputs = _data(args)
    bake = inputs is not None and not args.no_bake and args.interface != "axi-master"
    if args.offchip is not None and args.interface not in ("axi-master", None):
        raise HardwareError("--offchip", "only with --interface axi-master")
    files = build_design(args.graph, args.out, inputs, bake=bake, probes=not args.no_probes,
                         interface=args.interface, testbench=args.testbench, offchip=args.offchip)
    man, vpath, jpath = files.manifest, files.paths["verilog"], files.paths["manifest"]
    mems = man["host"]["memories"]
    kind = {"axi": " (AXI4-Lite slave s_axil_)", "axis": " (AXI4-Lite slave s_axil_, AXI4-Stream s_axis_ in, "
                                                        "m_axis_ out)",
            "axi-master": " (AXI4 master m_axi_ to off-chip memory, AXI4-Lite control s_axil_)"}.get(files.interface,
                                                                                                   "")
    print(f"{vpath}: module {man['module']}{kind}, "
          f"{len(man['kernels'])} kernel(s), {len(man['channels'])} channels, "
          f"{len(mems)} memories ({sum(m['depth'] * m['width'] for m in mems)} bits)"
          + (", inputs baked in" if files.build.baked else ""))
    print(f"{jpath}: manifest")
    if files.testbench:
        print(f"{files.paths['testbench']}: cocotb testbench ({', '.join(files.testbench)}); "
              f"run: cd {args.out} && python run_tb.py [--sim verilator|icarus] [--waves]")
    return 0


def cmd_sim(args):
    check_separate_outputs({"--vcd": args.vcd, "--json": args.json})
    inputs = _data(args)
    s = run_sim(args.graph, inputs, args.simulator, args.vcd, args.max_cycles, args.bake,
                progress=args.progress or sys.stderr.isatty())
    built = s.get("build")
    how = ("" if not built else "; Verilator build reused from the cache" if built["cached"] else
           f"; Verilator build {built['seconds']:.0f} s (cached for later runs)")
    print(f"{s['name']}: RTL ({s['simulator']}) against the reference simulator (fixed mode){how}")
    for i, (r, c) in enumerate(zip(s["rtl_kernel_cycles"], s["sim_kernel_cycles"])):
        rel = "equal" if r == c else f"{r - c:+d}, x{r / c:.3f}" if c else f"{r - c:+d}"
        print(f"  kernel {i}: RTL {r} cycles, simulator {c} cycles ({rel})")
    if len(s["rtl_kernel_cycles"]) > 1:
        print(f"  total: RTL {s['rtl_cycles']} cycles, simulator {s['sim_cycles']} cycles")
    if s["sim_cycles_per_second"]:
        print(f"  {s['simulator']}: {s['wall_cycles']} cycles in {s['run_seconds']:.3f} s "
              f"({s['sim_cycles_per_second']:.0f} cycles/s)")
    if args.vcd:
        print(f"  waveform: {args.vcd}")
    if args.json:
        with atomic_write(args.json) as f:
            f.write(json.dumps(s, indent=1) + "\n")
    if s["stuck"]:
        print(f"error: rtl: {s['stuck']}", file=sys.stderr)
        return 1
    if s["mismatches"]:
        for mm in s["mismatches"]:
            print(f"  MISMATCH {mm}")
        print(f"error: rtl: {len(s['mismatches'])} mismatch(es) with the reference simulator", file=sys.stderr)
        return 1
    print(f"  outputs bit-identical to the reference simulator: {', '.join(s['tensors'])}")
    return 0


def _main(argv):
    args = _parser().parse_args(argv)
    return {"build": cmd_build, "sim": cmd_sim}[args.cmd](args)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["correlate"]:
        from ..reports.correlation import main as correlate
        return correlate(argv[1:], prog="fuseflow hw correlate")
    return main_guard(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
