"""``fuseflow sim run graph.json --inputs data.npz``: simulate a SAMML program (``--random-inputs DENSITY`` instead
of a data file: random tensors of the declared shapes; ``fuseflow samml info graph.json`` lists the tensors)."""

import argparse
import json
import sys

from ..cli import atomic_write, check_separate_outputs, describe, main_guard, output_file, positive_int
from ..errors import FuseFlowError
from ..samml.sample import add_data_arguments, load_data, load_files


def parser():
    ap = argparse.ArgumentParser(prog="fuseflow sim", description=describe(__doc__))
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="simulate a program on input tensors")
    r.add_argument("graph", help="graph.json")
    add_data_arguments(r, True, ".npz with one array (dense or SciPy sparse) per input tensor, or .mtx/.npy files "
                                "named after their tensors (B.mtx, c.npy); several files are merged", nargs="+")
    r.add_argument("--mode", choices=("float", "fixed"), default="float",
                   help="number mode: float (default) or fixed (the hardware's fixed point, docs/numbers.md)")
    r.add_argument("--check", action="store_true", help="compare outputs with NumPy; exit 1 on mismatch")
    r.add_argument("--json", metavar="REPORT", type=output_file, help="write cycles and counters as JSON")
    r.add_argument("--outputs", metavar="NPZ", type=output_file, help="write the output tensors (dense) to an .npz file")
    r.add_argument("--fifo-depth", type=positive_int, help="override the FIFO depth of every stream")
    r.add_argument("--nodes", action="store_true", help="print per-node busy/blocked/idle cycles")
    r.add_argument("--engine", choices=("auto", "compiled", "python"), default="auto",
                   help="auto (default): the compiled engine when it is built and runs the graph, else the Python "
                        "engine (one line says why); compiled; python (the reference). Results are identical")
    r.add_argument("--progress", action="store_true",
                   help="show tokens and simulated cycles per second while it runs (default: on a terminal)")
    r.add_argument("--memory", default="onchip", metavar="MEM",
                   help="where tensors live: onchip (default, the RTL's contract), hbm2, ddr4, or "
                        "bw=BYTES_PER_CYCLE,latency=CYCLES (docs/evaluation.md)")
    z = sub.add_parser("size-fifos", help="deepen the channels whose producers stall, where that shortens the run "
                                          "on sample inputs (profile-guided; writes a sized graph.json)")
    z.add_argument("graph", help="graph.json")
    add_data_arguments(z, True, "sample inputs (as for run)", nargs="+")
    z.add_argument("-o", "--output", required=True, type=output_file, metavar="GRAPH", help="where to write the sized graph.json")
    z.add_argument("--mode", choices=("float", "fixed"), default="fixed",
                   help="number mode of the sizing runs: fixed (default) or float")
    z.add_argument("--max-depth", type=positive_int, default=64, help="deepest channel allowed (default 64)")
    z.add_argument("--min-gain", type=float, default=0.002,
                   help="keep a change only if it saves this fraction of the cycles (default 0.002)")
    return ap


def _load_inputs(paths):
    return load_files(paths)


def size_main(args):
    from ..samml import io as samml_io
    from . import engine
    from .fifo_sizing import size_fifos
    if args.max_depth < 1:
        raise FuseFlowError("--max-depth", "must be at least 1")
    if not 0 <= args.min_gain < 1:
        raise FuseFlowError("--min-gain", "must be in [0, 1)")
    prog = engine.load_program(args.graph)
    inputs = load_data(args, prog)
    sized, rep = size_fifos(prog, inputs, mode=args.mode, max_depth=args.max_depth, min_gain=args.min_gain,
                            progress=lambda line: print(f"  {line}", flush=True))
    with atomic_write(args.output) as f:
        f.write(samml_io.dumps(sized))
    print(f"{prog.name}: {rep['cycles_before']} -> {rep['cycles_after']} cycles with {rep['extra_slots']} more "
          f"token slots ({rep['runs']} simulations); wrote {args.output}")
    return 0


def main(argv=None):
    args = parser().parse_args(argv)
    if args.cmd == "size-fifos":
        return size_main(args)
    check_separate_outputs({"--json": args.json, "--outputs": args.outputs})
    from . import engine, tiled
    from .check import compare, golden, tolerance
    prog = engine.load_program(args.graph)
    inputs = load_data(args, prog)
    if args.fifo_depth is not None and args.fifo_depth < 1:
        raise FuseFlowError("--fifo-depth", "must be at least 1")
    from .memory import memory_system
    memory = memory_system(args.memory)
    progress = args.progress or sys.stderr.isatty()
    try:
        res = tiled.run(prog, inputs, mode=args.mode, fifo_depth=args.fifo_depth, memory=memory,
                        engine=args.engine, progress=progress)
    except KeyboardInterrupt as exc:
        part = getattr(exc, "stats", None)
        if part:
            done = ", ".join(f"{k['name']} {k['cycles']} cycles{' (stopped)' if k.get('interrupted') else ''}"
                             for k in part["kernels"])
            print(f"{prog.name}: stopped after {part['tokens']} tokens and {part['cycles']} simulated cycles "
                  f"in {part['wall_seconds']:.1f} s ({done})", file=sys.stderr)
        raise
    s = res.stats
    print(f"{prog.name}: {res.cycles} cycles in {len(prog.kernels)} kernel(s) ({args.mode} mode, "
          f"memory {memory.name}, {s['engine']} engine)")
    if "tiling" in s:
        print("  " + tiled.describe(s["tiling"]))
    for ks in s["kernels"]:
        m = ks["memory"]
        extra = (f" (compute {m['compute']}, transfer {m['transfer']}, latency {m['latency']})"
                 if memory.name != "onchip" and "tiling" not in s else "")
        if "tiles_run" in ks:
            extra = (f" ({ks['tiles_run']} tiles run, {ks['tiles_skipped']} empty skipped; run {ks['run_cycles']}, "
                     f"load {ks['load_cycles']}, store {ks['store_cycles']} cycles)")
        print(f"  kernel {ks['name']}: {ks['cycles']} cycles, {ks['tokens']} tokens{extra}")
        if args.nodes:
            for nid, ns in ks["nodes"].items():
                print(f"    {nid:24s} {ns['op']:12s} busy {ns['busy']:8d} blocked {ns['blocked']:8d} "
                      f"idle {ns['idle']:8d}")
    print(f"  tokens {s['tokens']}, ALU ops {s['alu_ops']}, memory read {s['mem_read_bytes']} B, "
          f"written {s['mem_write_bytes']} B")
    print(f"  simulated in {s['wall_seconds']:.3f} s wall time, {s['cpu_seconds']:.3f} s CPU time: "
          f"{s['tokens'] / max(s['wall_seconds'], 1e-9) / 1e6:.2f} M tokens/s by wall time, "
          f"{s['tokens'] / max(s['cpu_seconds'], 1e-9) / 1e6:.2f} M tokens/s by CPU time")
    for name, packed in res.tensors.items():
        if name in res.outputs:
            print(f"  output {name}: shape {tuple(packed.shape)}, {packed.nnz} stored entries")
    status = 0
    report = {"program": prog.name, "mode": args.mode, "cycles": res.cycles, "kernel_cycles": res.kernel_cycles,
              **{k: v for k, v in s.items() if k not in ("kernels", "steps")}, "kernels": s["kernels"]}
    if args.check:
        if not prog.expr:
            raise FuseFlowError(args.graph, "--check needs the program's 'expr' and this graph has none")
        rtol, atol = tolerance(args.mode, engine.Env(args.mode).fixed)
        problems = compare(res.outputs, golden(prog, inputs), rtol, atol)
        report["check"] = {"ok": not problems, "rtol": rtol, "atol": atol, "problems": problems}
        if problems:
            for line in problems:
                print(f"MISMATCH {line}")
            status = 1
        else:
            print(f"check: outputs match NumPy (rtol {rtol:g}, atol {atol:g})")
    if args.json:
        with atomic_write(args.json) as f:
            json.dump(report, f, indent=1)
    if args.outputs:
        import numpy as np
        with atomic_write(args.outputs, "wb") as f:
            np.savez(f, **res.outputs)
    return status


if __name__ == "__main__":
    sys.exit(main_guard(main))
