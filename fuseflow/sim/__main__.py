"""``python -m fuseflow.sim run graph.json --inputs data.npz``: simulate a SAMML program."""

import argparse
import json
import sys

from ..cli import atomic_write, main_guard
from ..errors import FuseFlowError
from . import engine
from .check import compare, golden, tolerance


def parser():
    ap = argparse.ArgumentParser(prog="python -m fuseflow.sim", description="Reference simulator for SAMML programs.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="simulate a program on input tensors")
    r.add_argument("graph", help="graph.json")
    r.add_argument("--inputs", required=True, nargs="+", metavar="FILE",
                   help=".npz with one array (dense or SciPy sparse) per input tensor, or .mtx/.npy files named "
                        "after their tensors (B.mtx, c.npy); several files are merged")
    r.add_argument("--mode", choices=("float", "fixed"), default="float")
    r.add_argument("--check", action="store_true", help="compare outputs with NumPy; exit 1 on mismatch")
    r.add_argument("--json", metavar="REPORT", help="write cycles and counters as JSON")
    r.add_argument("--outputs", metavar="NPZ", help="write the output tensors (dense) to an .npz file")
    r.add_argument("--fifo-depth", type=int, help="override the FIFO depth of every stream")
    r.add_argument("--nodes", action="store_true", help="print per-node busy/blocked/idle cycles")
    return ap


def main(argv=None):
    args = parser().parse_args(argv)
    from ..tensors.io import load_tensor_file
    prog = engine.load_program(args.graph)
    inputs = {}
    for path in args.inputs:
        for name, value in load_tensor_file(path).items():
            if name in inputs:
                raise FuseFlowError(path, f"tensor {name} is given twice")
            inputs[name] = value
    if args.fifo_depth is not None and args.fifo_depth < 1:
        raise FuseFlowError("--fifo-depth", "must be at least 1")
    res = engine.run(prog, inputs, mode=args.mode, fifo_depth=args.fifo_depth)
    s = res.stats
    print(f"{prog.name}: {res.cycles} cycles in {len(prog.kernels)} kernel(s) ({args.mode} mode)")
    for ks in s["kernels"]:
        print(f"  kernel {ks['name']}: {ks['cycles']} cycles, {ks['tokens']} tokens")
        if args.nodes:
            for nid, ns in ks["nodes"].items():
                print(f"    {nid:24s} {ns['op']:12s} busy {ns['busy']:8d} blocked {ns['blocked']:8d} "
                      f"idle {ns['idle']:8d}")
    print(f"  tokens {s['tokens']}, ALU ops {s['alu_ops']}, memory read {s['mem_read_bytes']} B, "
          f"written {s['mem_write_bytes']} B; simulated in {s['wall_seconds']:.3f} s "
          f"({s['tokens'] / max(s['wall_seconds'], 1e-9) / 1e6:.2f} M tokens/s)")
    for name, packed in res.tensors.items():
        if name in res.outputs:
            print(f"  output {name}: shape {tuple(packed.shape)}, {packed.nnz} stored entries")
    status = 0
    report = {"program": prog.name, "mode": args.mode, "cycles": res.cycles, "kernel_cycles": res.kernel_cycles,
              **{k: v for k, v in s.items() if k != "kernels"}, "kernels": s["kernels"]}
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
