"""``fuseflow boards``: FPGA board builds, synthesis reports and the UART host bridge.

    fuseflow boards build graph.json --board ulx3s-85f|icebreaker [-o build/] [--inputs data.npz]
                    [--random-inputs DENSITY] [--bake] [--probes] [--baud 115200] [--clock MHZ]
                    [--keep-work DIR] [--interface host]
    fuseflow boards synth graph.json [--target ecp5-85f|ice40-up5k] [--freq MHz] [--inputs data.npz]
                    [--random-inputs DENSITY] [--json out.json]
    fuseflow boards simulate graph.json --inputs data.npz|--random-inputs DENSITY [--divisor 4]
                    [--simulator amaranth|verilator]
    fuseflow boards run graph.json --inputs data.npz --manifest build/manifest.json --port /dev/ttyUSB0

``build`` elaborates the program's kernel top behind the UART bridge on the board, runs Yosys and nextpnr
(YoWASP) and writes the bitstream, ``manifest.json`` and ``report.json`` (utilisation, Fmax against the board
clock, critical path) into the output directory; nothing is written when it fails. Memories are sized by the
graph's capacities or by ``--inputs`` (baked into the bitstream with ``--bake``) or by random tensors of a given
density (``--random-inputs``, seed ``--data-seed``). Exit status 1 when nextpnr's
Fmax is below the board clock (the files are still written), 2 for bad input or a design that does not fit.

``synth`` synthesises the kernel top alone (registered I/O, no board) and prints utilisation and Fmax.
``simulate`` runs the board top in Amaranth's simulator with a bit-level UART on the host side and the host
client (``--simulator verilator``: its Verilog on Verilator, cocotbext-uart on the host side), and compares the
results and cycle counts with the reference simulator. ``run`` does the same with a
real board on a serial port (needs pyserial).
"""

import argparse
import json
import os
import sys

from ..cli import (atomic_write, describe, main_guard, nonnegative_int, output_dir, output_file, positive_float,
                   positive_int)
from ..errors import HardwareError
from ..hw.build import INTERFACES


def _parser():
    ap = argparse.ArgumentParser(prog="fuseflow boards", description=describe(__doc__.split("\n\n")[0]))
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="bitstream + report.json for a board")
    b.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    b.add_argument("--board", required=True, help="ulx3s-85f or icebreaker")
    b.add_argument("-o", "--output", "--out", dest="out", metavar="DIR",
                   default="build", type=output_dir, help="output directory (default: build)")
    b.add_argument("--inputs", help="tensor file (.npz/.mtx/.npy): sizes the memories")
    b.add_argument("--random-inputs", type=float, metavar="DENSITY",
                   help="instead of --inputs: random tensors of this density (seed --data-seed) size the memories")
    b.add_argument("--data-seed", type=nonnegative_int, default=1,
                   help="seed of --random-inputs (default 1)")
    b.add_argument("--bake", action="store_true", help="also bake --inputs into the memories' initial contents")
    b.add_argument("--probes", action="store_true", help="keep the per-channel probe registers (more area)")
    b.add_argument("--baud", type=positive_int, default=115200, help="UART baud rate (default 115200)")
    b.add_argument("--clock", type=positive_float, metavar="MHZ",
                   help="kernel clock from the FPGA's PLL (ulx3s-85f; default 40 MHz, the nearest frequency the "
                        "PLL makes is used)")
    b.add_argument("--seed", type=nonnegative_int, default=1, help="nextpnr placement seed")
    b.add_argument("--keep-work", type=output_dir, help="copy the tool work directory here")
    b.add_argument("--interface", choices=INTERFACES, default="host",
                   help="the kernel top's interface: host (the only one a board build takes: the UART bridge "
                        "drives the host port; 'fuseflow hw build --interface axi' makes the AXI IP)")
    s = sub.add_parser("synth", help="synthesise the kernel top alone and print utilisation and Fmax")
    s.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    s.add_argument("--target", default="ecp5-85f", help="ecp5-85f (default) or ice40-up5k")
    s.add_argument("--freq", type=positive_float, default=100.0, help="target frequency for nextpnr in MHz (default 100)")
    s.add_argument("--inputs", help="tensor file: sizes the memories")
    s.add_argument("--random-inputs", type=float, metavar="DENSITY", help="random tensors of this density instead")
    s.add_argument("--data-seed", type=nonnegative_int, default=1,
                   help="seed of --random-inputs (default 1)")
    s.add_argument("--json", type=output_file, help="write the result here")
    m = sub.add_parser("simulate", help="round trip through the simulated UART bridge and client")
    m.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    m.add_argument("--inputs", help="tensor file with every input tensor")
    m.add_argument("--random-inputs", type=float, metavar="DENSITY", help="random tensors of this density instead")
    m.add_argument("--data-seed", type=nonnegative_int, default=1,
                   help="seed of --random-inputs (default 1)")
    m.add_argument("--divisor", type=positive_int, default=4, help="clocks per UART bit in simulation (default 4)")
    m.add_argument("--simulator", choices=("amaranth", "verilator"), default="amaranth",
                   help="amaranth (the Amaranth design, a bit-level host UART; default) or verilator (the board "
                        "top's Verilog under cocotb, cocotbext-uart as the host's UART)")
    r = sub.add_parser("run", help="run on a board over its serial port (needs pyserial)")
    r.add_argument("graph", help="the program's graph.json (written by the compiler or fuseflow samml kernels)")
    r.add_argument("--inputs", required=True, help="tensor file (.npz/.mtx/.npy) with every input tensor")
    r.add_argument("--manifest", required=True, help="manifest.json written by 'build'")
    r.add_argument("--port", required=True, help="serial port, e.g. /dev/ttyUSB0")
    r.add_argument("--max-cycles", type=positive_int, default=10_000_000,
                   help="watchdog: give up after this many cycles (default 10000000)")
    return ap


def _inputs(path):
    from ..tensors.io import load_tensor_file
    return load_tensor_file(path)


def _data(args, required=False):
    """The tensors of --inputs or --random-inputs (None when neither is given and they are optional)."""
    if args.inputs and args.random_inputs is not None:
        raise HardwareError("--random-inputs", "give either --inputs or --random-inputs, not both")
    if args.inputs:
        return _inputs(args.inputs)
    if args.random_inputs is not None:
        if not 0 < args.random_inputs <= 1:
            raise HardwareError("--random-inputs", f"density must be in (0, 1], got {args.random_inputs}")
        from ..hw.elaborate import load_program
        from ..samml.kernels import random_inputs
        return random_inputs(load_program(args.graph), density=args.random_inputs, seed=args.data_seed)
    if required:
        raise HardwareError("--inputs", "give the tensors with --inputs FILE or --random-inputs DENSITY")
    return None


def _fmt_util(u):
    return (f"{u['luts']} LUTs, {u['ffs']} FFs, {u['brams']} BRAM, {u['dsps']} DSP"
            + (f", {u['logic_cells']} logic cells" if u.get("logic_cells") else ""))


def cmd_build(args):
    from .platforms import build_board, get_board
    if args.interface != "host":
        raise HardwareError(f"--interface {args.interface}", "a board build keeps the host port: its UART bridge "
                                                             "is the host that drives it; for an AXI4-Lite IP block "
                                                             "use 'fuseflow hw build --interface axi'")
    board = get_board(args.board)
    inputs = _data(args)
    rep = build_board(args.graph, board, args.out, inputs=inputs, bake=args.bake, probes=args.probes,
                      baud=args.baud, seed=args.seed, keep_work=args.keep_work, clock_mhz=args.clock,
                      progress=lambda msg: print(f"  {msg}", flush=True))
    out = args.out
    print(f"{os.path.join(out, rep['files']['bitstream'])}: {rep['description']}, {rep['program']} "
          f"({len(rep['kernels'])} kernel(s)), UART {rep['uart']['baud']} baud")
    print(f"  {_fmt_util(rep['utilisation'])}")
    fm = rep["fmax_mhz"]
    src = "PLL" if rep["clock"]["source"] == "pll" else "board"
    print(f"  Fmax {fm} MHz against the {rep['clock_mhz']:g} MHz {src} clock"
          + (f" (x{rep['margin']})" if rep["margin"] else ""))
    if rep["expected_run"]:
        r = rep["expected_run"]
        print(f"  expected run: {r['cycles']} cycles = {r['seconds'] * 1e6:.3f} us at {rep['clock_mhz']:g} MHz")
    if rep["critical_path"]:
        print(f"  critical path: {rep['critical_path']['summary']}")
    blocks = [e for e in rep["memory_map"] if e["storage"] == "block"]
    print(f"  memories: {len(rep['memory_map'])} ({len(blocks)} in block RAM, "
          f"{sum(e['blocks'] for e in blocks)} blocks); memory map in report.json")
    big = rep["largest_spmv"]
    print("  largest SpMV the block RAM holds: " + (f"{big['rows']} x {big['cols']}, {big['nonzeros']} nonzeros "
                                                     f"({big['brams']} blocks)" if big else "none (the SpMV logic "
                                                                                           "does not fit)"))
    print(f"{os.path.join(out, 'report.json')}: report; {os.path.join(out, 'manifest.json')}: host map")
    if not rep["timing_met"]:
        print(f"error: timing: Fmax {fm} MHz is below the {rep['clock_mhz']:g} MHz {src} clock", file=sys.stderr)
        return 1
    return 0


def cmd_synth(args):
    from ..hw.elaborate import build
    from .synth import synth_component
    inputs = _data(args)
    b = build(args.graph, inputs, probes=False)
    res = synth_component(b.top, b.name, args.target, args.freq)
    print(f"{b.name} on {args.target}: {res.luts} LUTs, {res.ffs} FFs (incl. {sum(res.io_bits.values())} I/O "
          f"wrapper registers), {res.brams} BRAM, {res.dsps} DSP; Fmax {res.fmax_mhz:.1f} MHz "
          f"({'meets' if res.meets else 'misses'} {args.freq:g} MHz)")
    if res.critical_path:
        print(f"  critical path: {res.critical_path['summary']}")
    if args.json:
        with atomic_write(args.json) as f:
            f.write(json.dumps(res.to_json(), indent=1) + "\n")
    return 0


def _report_run(s):
    print(f"{s['name']}: through the UART bridge and host client")
    print(f"  RTL {s['rtl_cycles']} cycles, reference simulator {s['sim_cycles']} cycles"
          + (" (equal)" if s["rtl_cycles"] == s["sim_cycles"] else ""))
    if s.get("bytes_sent") is not None:
        print(f"  UART: {s['bytes_sent']} bytes to the board, {s['bytes_received']} back, "
              f"{s['uart_cycles']} simulated cycles")
    if s["mismatches"]:
        for mm in s["mismatches"]:
            print(f"  MISMATCH {mm}")
        print(f"error: bridge: {len(s['mismatches'])} mismatch(es) with the reference simulator", file=sys.stderr)
        return 1
    print("  outputs bit-identical to the reference simulator")
    return 0


def cmd_simulate(args):
    if args.simulator == "verilator":
        from .verilog_board import simulate_verilog as simulate
    else:
        from .simboard import simulate
    return _report_run(simulate(args.graph, _data(args, required=True), divisor=args.divisor))


def cmd_run(args):
    from ..hw.elaborate import load_program, reference_run
    from ..hw.top import compare_tensors
    from .client import BridgeClient, SerialTransport, images_for
    from ..samml.io import load_json
    man = load_json(args.manifest, HardwareError)
    if not isinstance(man, dict) or not isinstance(man.get("board"), dict):
        raise HardwareError(args.manifest, "not a board manifest (written by 'fuseflow boards build')")
    program = load_program(args.graph)
    inputs = _inputs(args.inputs)
    ref = reference_run(program, inputs)
    images = images_for(program, man, inputs)
    t = SerialTransport(args.port, man["board"]["baud"])
    try:
        client = BridgeClient(t, man, clock_hz=man["board"]["clock_hz"])
        res = client.run(images, max_cycles=args.max_cycles)
    finally:
        t.close()
    mism = compare_tensors(ref.tensors, res["tensors"]) if res["done"] else ["the run never finished"]
    return _report_run({"name": program.name, "rtl_cycles": res["cycles"], "sim_cycles": ref.cycles,
                        "mismatches": mism})


def _main(argv):
    args = _parser().parse_args(argv)
    return {"build": cmd_build, "synth": cmd_synth, "simulate": cmd_simulate, "run": cmd_run}[args.cmd](args)


def main(argv=None):
    return main_guard(_main, argv)


if __name__ == "__main__":
    sys.exit(main())
