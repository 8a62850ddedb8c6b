"""Start-up cost of the command line: ``--help`` and a small compile against ``python -c pass`` (issue 42).

Runs each command as a fresh interpreter, interleaved (one repetition of every command, then the next round),
``--repeats`` rounds (default 15), and reports per command the median wall time, the median CPU time (user +
system of the child, from ``resource.getrusage(RUSAGE_CHILDREN)`` deltas) and both as ratios to ``python -c
pass`` measured in the same rounds. The machine is shared: the ratios, measured side by side, are the number to
read; the goal is ``fuseflow --help`` and ``python -m fuseflow.compiler --help`` within 3x of ``python -c pass``.
Writes JSON (default benchmarks/results/startup.json).
"""

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)                      # _common, when loaded by file path (tests)

from _common import write_results  # noqa: E402

#: the program of the small compile (bundled with the package)
PROGRAM = os.path.join(ROOT, "fuseflow", "programs", "spmv.ff")
#: the start-up goal of issue 42 for the --help rows
GOAL_RATIO = 3.0


def commands(out_dir):
    py = sys.executable
    return [
        ("python -c pass", [py, "-c", "pass"]),
        ("fuseflow --help", [py, "-m", "fuseflow", "--help"]),
        ("python -m fuseflow.compiler --help", [py, "-m", "fuseflow.compiler", "--help"]),
        ("import fuseflow.compiler", [py, "-c", "import fuseflow.compiler"]),
        ("fuseflow compile --help", [py, "-m", "fuseflow", "compile", "--help"]),
        ("fuseflow sim --help", [py, "-m", "fuseflow", "sim", "--help"]),
        ("fuseflow compile spmv.ff -o OUT", [py, "-m", "fuseflow", "compile", PROGRAM, "-o", out_dir]),
    ]


def run_once(argv, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(argv)}: exit status {proc.returncode}: "
                         f"{proc.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "startup.json"))
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("PYTHONSTARTUP", None)
    with tempfile.TemporaryDirectory(prefix="startup-bench-") as tmp:
        cmds = commands(os.path.join(tmp, "out"))
        walls = {name: [] for name, _ in cmds}
        cpus = {name: [] for name, _ in cmds}
        for name, cmd in cmds:                    # warm-up: file caches, .pyc files
            run_once(cmd, env)
        for _ in range(args.repeats):
            for name, cmd in cmds:
                w, c = run_once(cmd, env)
                walls[name].append(w)
                cpus[name].append(c)
    base = cmds[0][0]
    base_wall, base_cpu = statistics.median(walls[base]), statistics.median(cpus[base])
    rows = []
    for name, cmd in cmds:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        rows.append({"command": name, "argv": [os.path.basename(a) if os.path.isabs(a) else a for a in cmd[1:]],
                     "median_wall_s": round(w, 4), "median_cpu_s": round(c, 4),
                     "wall_ratio": round(w / base_wall, 2), "cpu_ratio": round(c / max(base_cpu, 1e-6), 2)})
        print(f"{name:40s} wall {w * 1000:7.1f} ms ({w / base_wall:5.2f}x)   CPU {c * 1000:7.1f} ms "
              f"({c / max(base_cpu, 1e-6):5.2f}x)")
    doc = {"benchmark": "startup", "repeats": args.repeats, "baseline": base, "goal_ratio": GOAL_RATIO,
           "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
           "load_average": list(os.getloadavg()), "rows": rows}
    write_results(doc, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
