"""Parallel lanes: simulated speedup of SpMV 1024 x 1024 at 1% at factors 1, 2, 4, 8, 16 (``parallel i N``).

The program is ``x(i) = B(i,j) * c(j)`` with B in CSR and c dense (located, so the work scales with B's
nonzeros). Two matrices with the same number of nonzeros (1% of 1024 x 1024): **uniform** (every entry kept
with probability 0.01: rows of about 10 nonzeros) and **power-law** (row lengths following Zipf's law, the
longest rows a few hundred, rows shuffled so that long rows land in random lanes). For each factor the
reference simulator (cycle-exact with the RTL) runs the compiled graph; outputs must equal factor 1's exactly.

Reported per factor: cycles, speedup (cycles at 1 / cycles at n), efficiency (speedup / n), and the lanes'
load balance: the nonzeros of the busiest lane over the mean (round-robin deals rows l, l+n, ... to lane l).
Target (issue 14): speedup >= 0.8 n for n <= 8 on the uniform matrix.

Further sections (``"kernels"`` in the JSON): Gustavson SpMSpM ``C(i,j) = A(i,k) B(k,j)`` (order i,k,j, both
CSR, 256 x 256 at 2%) at i-factors 1..16, k on lanes (the spacc over k gets the lanes' terms in order) and i x k
nested 4 x 4; BigBird attention scores (``S(i,j) = mask[bigbird](i,j) * sum[d] Q(i,d) K(j,d)``, 128 x 128, d 16:
dense Q and K, the mask generates the kept coordinates) at i-factors 1..16 and i x j nested 4 x 4; SpMV 4 x 4
(j has no work below it: the inner schedule leaves the kernel as at i = 4). Every run's outputs must equal factor
1's exactly. Writes JSON (default benchmarks/results/parallel.json).

``--section rtl``: SpMV 64 x 64 at 10% and Gustavson SpMSpM 24 x 24 at 15% at factors 1, 2, 4 on Verilator
(fixed point): outputs bit-identical to the reference simulator's and cycles equal (else the run fails), cycles
and the speedup over factor 1 (``"rtl_results"`` in benchmarks/results/parallel.json; the simulator section keeps
them when it rewrites the file).
``--section synth``: SpMV 16 x 16 CSR at factors 1, 2, 4 on ECP5-85F (Yosys + nextpnr via
``fuseflow.boards.synth``, the kernel top in the registered-I/O wrapper, one synthesis at a time): LUTs, FFs,
block RAMs, DSPs, Fmax and nextpnr's critical path (default output benchmarks/results/parallel_synth.json).
``--factors 4`` synthesises only those factors and replaces their rows in the output, keeping the others.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from fuseflow.cli import atomic_write  # noqa: E402
from fuseflow.compiler import compile_text  # noqa: E402
from fuseflow.sim import run  # noqa: E402

N = 1024
DENSITY = 0.01
FACTORS = (1, 2, 4, 8, 16)
TARGET = 0.8
PROGRAM = f"""program spmv
tensor B({N}, {N}) : csr
tensor c({N}) : dense
x(i) = B(i,j) * c(j)
"""


def uniform(rng):
    return sp.random(N, N, density=DENSITY, format="csr", random_state=rng, data_rvs=lambda k: rng.integers(1, 64, k) / 8)


def power_law(rng, alpha=1.0):
    """Zipf row lengths (rank r gets ~ 1/r^alpha of the nonzeros), scaled to 1% in total, rows shuffled."""
    total = int(round(N * N * DENSITY))
    weights = 1.0 / np.arange(1, N + 1) ** alpha
    lengths = np.minimum(N, np.floor(weights / weights.sum() * total)).astype(int)
    short = np.flatnonzero(lengths < N)
    lengths[short[: total - lengths.sum()]] += 1               # the remainder to the longest rows not full
    rng.shuffle(lengths)
    rows, cols = [], []
    for r, n in enumerate(lengths):
        rows += [r] * n
        cols += sorted(rng.choice(N, size=n, replace=False).tolist())
    vals = rng.integers(1, 64, len(rows)) / 8
    return sp.csr_matrix((vals, (rows, cols)), shape=(N, N))


def lane_balance(B, n):
    """Nonzeros of the busiest lane over the mean, rows dealt round-robin (row r to lane r mod n)."""
    per_row = np.diff(B.indptr)
    lanes = [per_row[l::n].sum() for l in range(n)]
    return float(max(lanes) / (sum(lanes) / n))


def measure(name, B, c):
    rows, base = [], None
    for n in FACTORS:
        prog = compile_text(PROGRAM, name="spmv", parallel={"i": n}).program
        t0 = time.perf_counter()
        r = run(prog, {"B": B, "c": c})
        wall = time.perf_counter() - t0
        if base is None:
            base = r
            np.testing.assert_allclose(r.outputs["x"], B @ c, rtol=1e-12)
        elif not np.array_equal(r.outputs["x"], base.outputs["x"]):
            raise AssertionError(f"{name}: factor {n} changed the output")
        speedup = base.cycles / r.cycles
        rows.append({"matrix": name, "factor": n, "cycles": r.cycles, "speedup": round(speedup, 3),
                     "efficiency": round(speedup / n, 3), "lane_balance": round(lane_balance(B, n), 3),
                     "nodes": sum(len(k.nodes) for k in prog.kernels), "sim_seconds": round(wall, 2)})
        print(f"{name:9} x{n:<2} {r.cycles:7d} cycles  speedup {speedup:5.2f}  efficiency {speedup / n:4.2f}  "
              f"balance {rows[-1]['lane_balance']:.2f}", flush=True)
    return rows


GUSTAVSON_N, GUSTAVSON_DENSITY = 256, 0.02
GUSTAVSON = f"""program spmspm
tensor A({GUSTAVSON_N}, {GUSTAVSON_N}) : csr
tensor B({GUSTAVSON_N}, {GUSTAVSON_N}) : csr
C(i,j) = A(i,k) * B(k,j)
order i,k,j
"""
BIGBIRD_N, BIGBIRD_D = 128, 16
BIGBIRD = f"""program bigbird
tensor Q({BIGBIRD_N}, {BIGBIRD_D}) : dense
tensor K({BIGBIRD_N}, {BIGBIRD_D}) : dense
S(i,j) = mask[bigbird:block=8,window=3,global=1,random=1,seed=0](i,j) * sum[d](Q(i,d) * K(j,d))
"""
#: (kernel, schedule) pairs of the further sections; {} is factor 1
SCHEDULES = ([("spmspm", {"i": n}) for n in FACTORS] + [("spmspm", {"k": 4}), ("spmspm", {"i": 4, "k": 4})]
             + [("bigbird", {"i": n}) for n in FACTORS] + [("bigbird", {"i": 4, "j": 4})]
             + [("spmv", {"i": 4, "j": 4})])


def kernel_rows(rng, spmv_inputs):
    """The further sections: cycles and speedup over factor 1 per (kernel, schedule); outputs checked."""
    texts = {"spmspm": GUSTAVSON, "bigbird": BIGBIRD, "spmv": PROGRAM}
    m = GUSTAVSON_N
    inputs = {"spmspm": {"A": sp.random(m, m, density=GUSTAVSON_DENSITY, format="csr", random_state=rng,
                                        data_rvs=lambda k: rng.integers(1, 64, k) / 8),
                         "B": sp.random(m, m, density=GUSTAVSON_DENSITY, format="csr", random_state=rng,
                                        data_rvs=lambda k: rng.integers(1, 64, k) / 8)},
              "bigbird": {"Q": rng.integers(-64, 64, (BIGBIRD_N, BIGBIRD_D)) / 64,
                          "K": rng.integers(-64, 64, (BIGBIRD_N, BIGBIRD_D)) / 64},
              "spmv": spmv_inputs}
    base, rows = {}, []
    for name, schedule in [(k, {"i": 1}) for k in ("spmspm", "bigbird", "spmv")] + SCHEDULES:
        if schedule == {"i": 1} and name in base:
            continue
        prog = compile_text(texts[name], name=name, parallel=schedule).program
        t0 = time.perf_counter()
        r = run(prog, inputs[name])
        wall = time.perf_counter() - t0
        if name not in base:
            base[name] = r
        else:
            ref = base[name]
            for t in ref.tensors:
                if not np.array_equal(ref.tensors[t].vals, r.tensors[t].vals):
                    raise AssertionError(f"{name} {schedule}: the output changed")
        lanes = int(np.prod(list(schedule.values())))
        speedup = base[name].cycles / r.cycles
        rows.append({"kernel": name, "schedule": ",".join(f"{i}={n}" for i, n in schedule.items()),
                     "lanes": lanes, "cycles": r.cycles, "speedup": round(speedup, 3),
                     "efficiency": round(speedup / lanes, 3), "nodes": sum(len(k.nodes) for k in prog.kernels),
                     "sim_seconds": round(wall, 2)})
        print(f"{name:8} {rows[-1]['schedule']:9} {r.cycles:8d} cycles  speedup {speedup:5.2f}", flush=True)
    return rows


RTL_CASES = (("spmv", 64, 0.1), ("spmspm", 24, 0.15))
SYNTH_N = 16


def small_program(name, n):
    if name == "spmv":
        return f"program spmv\ntensor B({n}, {n}) : csr\ntensor c({n}) : dense\nx(i) = B(i,j) * c(j)\n"
    return (f"program spmspm\ntensor A({n}, {n}) : csr\ntensor B({n}, {n}) : csr\nC(i,j) = A(i,k) * B(k,j)\n"
            f"order i,k,j\n")


def rtl_rows():
    """Factors 1, 2, 4 on Verilator: bit-identical to the fixed-mode simulator, cycles equal."""
    from fuseflow.hw import verilator
    from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run
    from fuseflow.hw.top import compare_tensors
    from fuseflow.samml import kernels
    rows = []
    for name, n, density in RTL_CASES:
        base = None
        for factor in (1, 2, 4):
            prog = compile_text(small_program(name, n), name=name, parallel={"i": factor}).program
            inputs = kernels.random_inputs(prog, density=density, seed=1)
            t0 = time.perf_counter()
            b = build(prog)
            bdir = verilator.build_verilator(b.verilog(), b.name)
            ref = reference_run(prog, inputs)
            res = verilator.run_verilator(bdir, b.name, b.manifest(), check_inputs_fit(b, inputs),
                                          20 * ref.cycles + 1000)
            if not res["done"] or compare_tensors(ref.tensors, res["tensors"]) != []:
                raise AssertionError(f"{name} x{factor}: the RTL disagrees with the simulator")
            cycles = [res["kernel_cycles"][k.name] for k in prog.kernels]
            if cycles != list(ref.kernel_cycles):
                raise AssertionError(f"{name} x{factor}: cycles {cycles} != simulator {ref.kernel_cycles}")
            base = base or sum(cycles)
            rows.append({"kernel": name, "n": n, "density": density, "factor": factor, "cycles": sum(cycles),
                         "speedup": round(base / sum(cycles), 3), "bit_identical": True, "cycles_equal": True,
                         "nodes": sum(len(k.nodes) for k in prog.kernels),
                         "seconds": round(time.perf_counter() - t0, 1)})
            print(f"rtl {name} x{factor}: {sum(cycles)} cycles (= simulator), speedup {rows[-1]['speedup']}",
                  flush=True)
    return rows


def synth_rows(factors=(1, 2, 4)):
    """SpMV at ``factors`` on ECP5-85F, one synthesis at a time."""
    from fuseflow.boards.synth import synth_component
    from fuseflow.errors import FuseFlowError
    from fuseflow.hw.elaborate import build
    from fuseflow.samml import kernels
    rows = []
    for factor in factors:
        prog = compile_text(small_program("spmv", SYNTH_N), name="spmv", parallel={"i": factor}).program
        inputs = kernels.random_inputs(prog, density=0.3, seed=1)
        t0 = time.perf_counter()
        row = {"kernel": "spmv", "n": SYNTH_N, "factor": factor, "nodes": sum(len(k.nodes) for k in prog.kernels)}
        try:
            b = build(prog, inputs, probes=False)
            row["memory_bits"] = sum(m.depth * m.width for m in b.plan.memories)
            d = synth_component(b.top, f"spmv_x{factor}", "ecp5-85f", 100.0, timeout=3000).to_json()
            row.update({k: d[k] for k in ("luts", "ffs", "brams", "dsps", "lutram_luts", "fmax_mhz")})
            cp = d["critical_path"]
            row["critical_path"] = {k: cp.get(k) for k in ("summary", "delay_ns", "logic_levels", "modules",
                                                          "sources")}
        except FuseFlowError as exc:
            row["error"] = f"{exc.what}: {exc.why}"
        row["seconds"] = round(time.perf_counter() - t0, 1)
        rows.append(row)
        print(f"synth spmv x{factor}: {row}", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=None, help="JSON output (default: benchmarks/results/parallel.json; "
                                                          "--section synth: parallel_synth.json)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--section", choices=("sim", "rtl", "synth"), default="sim")
    ap.add_argument("--factors", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4],
                    help="--section synth: the factors to synthesise, e.g. 4 or 1,2 (default 1,2,4); rows of "
                         "other factors already in the output are kept")
    args = ap.parse_args(argv)
    if args.section == "rtl":
        # the Verilator rows join the simulator's in parallel.json ("rtl_results"), the rest of it kept
        out = args.output or os.path.join(HERE, "results", "parallel.json")
        rows = rtl_rows()
        doc = {}
        if os.path.exists(out):
            with open(out) as f:
                doc = json.load(f)
        doc["rtl_results"] = rows
        doc["rtl_machine"] = platform.platform()
        with atomic_write(out) as f:
            f.write(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out} (rtl_results)")
        return 0
    if args.section == "synth":
        rows = synth_rows(args.factors)
        out = args.output or os.path.join(HERE, "results", "parallel_synth.json")
        if os.path.exists(out):                   # the factors not synthesised now keep their rows
            with open(out) as f:
                kept = [r for r in json.load(f).get("results", []) if r.get("factor") not in args.factors]
            rows = sorted(kept + rows, key=lambda r: r["factor"])
        doc = {"benchmark": "parallel lanes: synth", "machine": platform.platform(),
               "python": platform.python_version(), "results": rows}
        with atomic_write(out) as f:
            f.write(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")
        return 0
    args.output = args.output or os.path.join(HERE, "results", "parallel.json")
    rng = np.random.default_rng(args.seed)
    c = rng.integers(1, 64, N) / 8
    results = []
    matrices = {"uniform": uniform(rng), "power-law": power_law(rng)}
    for name, B in matrices.items():
        results += measure(name, B, c)
    more = kernel_rows(rng, {"B": matrices["uniform"], "c": c})
    uni = [r for r in results if r["matrix"] == "uniform" and r["factor"] <= 8]
    keep = {}
    if os.path.exists(args.output):               # the Verilator rows (--section rtl) stay
        with open(args.output) as f:
            keep = {k: v for k, v in json.load(f).items() if k.startswith("rtl_")}
    doc = {"benchmark": "parallel lanes: simulated SpMV speedup", "n": N, "density": DENSITY,
           "nnz": {k: int(B.nnz) for k, B in matrices.items()},
           "max_row": {k: int(np.diff(B.indptr).max()) for k, B in matrices.items()},
           "target": f"speedup >= {TARGET} n for n <= 8 on the uniform matrix",
           "target_met": all(r["speedup"] >= TARGET * r["factor"] for r in uni),
           "machine": platform.platform(), "python": platform.python_version(), "results": results,
           "kernels": {"spmspm": {"n": GUSTAVSON_N, "density": GUSTAVSON_DENSITY},
                       "bigbird": {"n": BIGBIRD_N, "d": BIGBIRD_D}},
           "kernel_results": more, **keep}
    with atomic_write(args.output) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output} (target met: {doc['target_met']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
