"""Run every benchmark once, in order, and record the run (``make bench``).

Each benchmark is its own process writing its own file in ``benchmarks/results/``. This runner writes
``benchmarks/results/bench_run.json``: per benchmark its command, the commit measured, wall seconds, exit
status and the machine's load average before and after (the machine is shared; cycles and ratios do not
depend on load, wall-clock rates do). It stops at the first failure, leaving the files written so far.

The synthesis table (``make synth-report``, hours) and the Verilator lane runs of ``parallel_bench --section
rtl`` are separate targets and not part of this run.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import commit  # noqa: E402

from fuseflow.cli import atomic_write  # noqa: E402

#: name, arguments, the results files it writes (relative to benchmarks/results)
BENCHMARKS = [
    ("sim_bench", ["-o", os.path.join(RESULTS, "sim.json")], ["sim.json"]),
    ("compile_bench", [], ["compile.json"]),
    ("intersect_window_model", [], ["intersect_model.json"]),
    ("rtl_bench", [], ["rtl.json"]),
    ("intersect_floor", [], ["intersect_floor.json"]),
    ("wide_lookahead_cost", [], ["wide_lookahead.json"]),
    ("intersect_ring_cost", [], ["intersect_ring.json"]),
    ("depth_bench", [], ["depths.json"]),
    ("fifo_budget_bench", [], ["fifo_budget.json"]),
    ("scaling_bench", [], ["scaling.json"]),
    ("cost_bench", [], ["cost.json"]),
    ("function_accuracy", ["-o", os.path.join(RESULTS, "functions.json")], ["functions.json"]),
    ("models_bench", ["--sizes", "small", "medium"], ["models.json"]),   # paper: make paper
    ("parallel_bench", [], ["parallel.json"]),
    ("blocks_bench", [], ["blocks.json"]),
    ("autoschedule_bench", [], ["autoschedule.json"]),
    ("cora_bench", [], ["cora.json"]),
    ("attention_bench", [], ["attention.json"]),
    ("ogb_scale_bench", [], ["ogb_scale.json"]),
    ("startup_bench", [], ["startup.json"]),
    ("tiling_bench", [], ["tiling.json"]),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (default: all)")
    ap.add_argument("--from", dest="start", metavar="NAME", help="start at this benchmark (resume a run)")
    args = ap.parse_args(argv)
    names = [b[0] for b in BENCHMARKS]
    for n in (args.only or []) + ([args.start] if args.start else []):
        if n not in names:
            print(f"error: benchmark {n}: not one of {', '.join(names)}", file=sys.stderr)
            return 2
    # --from resumes at a benchmark (with --only too), --only picks among those
    todo = [b for b in BENCHMARKS[names.index(args.start) if args.start else 0:] if not args.only or b[0] in args.only]
    path = os.path.join(RESULTS, "bench_run.json")
    runs = {}
    if os.path.exists(path):       # a partial run (--only, --from) keeps the other benchmarks' records
        with open(path) as f:
            runs = {r["name"]: r for r in json.load(f).get("runs", [])}
    status = 0
    for i, (name, extra, files) in enumerate(todo, 1):
        cmd = [sys.executable, os.path.join(HERE, f"{name}.py"), *extra]
        print(f"[{i}/{len(todo)}] {name} ...", flush=True)
        load0, t0, started = os.getloadavg()[0], time.perf_counter(), time.time()
        rc = subprocess.call(cmd, cwd=ROOT)
        written = [os.path.join(RESULTS, f) for f in files]
        stale = [f for f, w in zip(files, written) if not os.path.exists(w) or os.path.getmtime(w) < started]
        if rc == 0 and stale:
            # a benchmark that exits 0 without writing its results is a failure, not a record
            print(f"error: {name}: exited 0 but did not write {', '.join(stale)}", file=sys.stderr)
            rc = 1
        row = {"name": name, "command": " ".join(["python", f"benchmarks/{name}.py", *[
            os.path.relpath(a, ROOT) if os.path.isabs(a) else a for a in extra]]),
            "files": files, "commit": commit(), "exit_status": rc, "wall_seconds": round(time.perf_counter() - t0, 1),
            "load_before": round(load0, 2), "load_after": round(os.getloadavg()[0], 2),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        runs[name] = row
        print(f"[{i}/{len(todo)}] {name}: exit {rc}, {row['wall_seconds']} s", flush=True)
        if rc != 0:
            status = 1
            break
    doc = {"benchmark": "make bench", "commit": commit(), "machine": platform.platform(),
           "cpus": os.cpu_count(), "python": platform.python_version(),
           "runs": [runs[n] for n in names if n in runs]}
    with atomic_write(path) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {os.path.relpath(path, ROOT)}")
    return status


if __name__ == "__main__":
    sys.exit(main())
