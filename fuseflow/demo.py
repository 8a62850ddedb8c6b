"""``make demo``: build SpMV and Gustavson SpMSpM graphs, simulate them, check against NumPy, draw them."""

import argparse
import os
import sys

import numpy as np
import scipy.sparse as sp

from .cli import atomic_write, main_guard
from .samml import io as samml_io
from .samml import kernels
from .samml.dot import has_graphviz, to_svg
from .sim import run
from .sim.check import compare, golden, tolerance
from .tensors.fixed import FixedFormat


def _matrix(rng, m, n, density):
    return sp.random(m, n, density=density, random_state=rng, format="csr",
                     data_rvs=lambda k: np.round(rng.uniform(-2, 2, k), 2))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fuseflow.demo", description=__doc__)
    ap.add_argument("-o", "--output", default="out/demo", help="where graphs, pictures and reports go")
    ap.add_argument("--size", type=int, default=64, help="matrix size n (n x n)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(7)
    n = args.size
    A = _matrix(rng, n, n, 0.08)
    B = _matrix(rng, n, n, 0.08)
    c = sp.random(1, n, density=0.3, random_state=rng).toarray()[0]
    cases = [
        ("design example: SpMV, 3x4 DCSR", *kernels.dcsr_example()),
        (f"SpMV, {n}x{n} CSR at 8%", kernels.spmv(n, n, "csr"), {"B": A, "c": c}),
        (f"Gustavson SpMSpM, {n}x{n} at 8%", kernels.spmspm_gustavson(n, n, n), {"A": A, "B": B}),
    ]
    print(f"FuseFlow-HW demo: reference simulator on {len(cases)} kernels (float and fixed point)\n")
    failures = 0
    for title, prog, inputs in cases:
        gold = golden(prog, inputs)
        folder = os.path.join(args.output, prog.name)
        samml_io.save(prog, os.path.join(folder, "graph.json"))
        with atomic_write(os.path.join(folder, "graph.svg")) as f:
            f.write(to_svg(prog))
        print(f"{title}: {prog.expr}")
        for mode in ("float", "fixed"):
            res = run(prog, inputs, mode=mode)
            problems = compare(res.outputs, gold, *tolerance(mode))
            failures += bool(problems)
            s = res.stats
            busiest = max(s["kernels"][0]["streams"].values())
            print(f"  {mode:5s}: {res.cycles:7d} cycles  {s['tokens']:8d} tokens  busiest stream {busiest:6d}  "
                  f"{s['alu_ops']:6d} ALU ops  {s['mem_read_bytes']:7d} B read  "
                  f"{'matches NumPy' if not problems else 'MISMATCH: ' + problems[0]}")
        out = next(iter(res.outputs))
        print(f"  output {out}: {res.tensors[out].nnz} stored entries; graph and picture in {folder}/\n")
        if prog.name == "spmv_dcsr":
            x = res.tensors["x"].decode_fixed(FixedFormat()) if res.mode == "fixed" else res.tensors["x"]
            nz = {int(i): float(v) for i, v in zip(x.levels[0].crd, x.vals)}
            print(f"  x = {nz} (DESIGN.md expects {{0: 10.0, 2: 60.0}})\n")
    if not has_graphviz():
        print("note: graphviz is not installed, so the SVGs were drawn with matplotlib")
    print("demo " + ("FAILED" if failures else "passed: every result matches NumPy"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
