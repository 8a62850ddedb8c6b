"""What the intersect's look-ahead at arity >= 3 saved before it was dropped (docs/hardware.md, "intersect
look-ahead"): the simulator's cycles of every suite entry with an intersect of arity >= 3, at a base revision
(``--base``, default 5436664, the last with the look-ahead at every arity) and at ``--head`` (default d2f0d2c,
the last before the ring-neighbour pop rule changed the wide intersect's cycles again; ``--head .`` is this tree).

Each side runs in its own Python process on its own source tree (the base one unpacked by ``git archive`` into a
temporary folder), compiles the suites with its own compiler (so channel depths are each revision's own) and
simulates in fixed-point mode. Writes benchmarks/results/wide_lookahead.json.

The same comparison for another change of the wide intersect's timing: ``--base REV --head . --min-arity 4 -o
FILE`` (the ring-neighbour pop rule of arity >= 4: ``intersect_ring_cost.py``).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if "--worker" not in sys.argv:
    sys.path.insert(0, ROOT)             # a worker imports the tree its PYTHONPATH names

SUITES = ("default", "parallel")


def worker(min_arity, suites):
    """In the child: {suite/entry: cycles} of the entries with an intersect of arity >= ``min_arity``."""
    from fuseflow.reports.suites import get_suite
    from fuseflow.sim.engine import run
    out = {}
    for name in suites:
        for e in get_suite(name).entries:
            arities = [int(n.params.get("arity", 2)) for k in e.program.kernels for n in k.nodes.values()
                       if n.op == "intersect"]
            if not any(a >= min_arity for a in arities):
                continue
            key = f"{name}/{e.name}"
            out[key] = {"cycles": run(e.program, e.inputs, mode="fixed").cycles, "widest": max(arities)}
            print(f"  {key}: {out[key]['cycles']}", file=sys.stderr, flush=True)
    json.dump(out, sys.stdout)


def measure(tree, min_arity, suites):
    env = dict(os.environ, PYTHONPATH=tree)
    res = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", str(min_arity), *suites], cwd=tree, env=env,
                         stdout=subprocess.PIPE, check=True, text=True)
    return json.loads(res.stdout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="5436664", help="revision with the look-ahead at every arity")
    ap.add_argument("--head", default="d2f0d2c", help="revision to compare with the base ('.': this tree)")
    ap.add_argument("--min-arity", type=int, default=3, help="entries with an intersect at least this wide")
    ap.add_argument("--suites", nargs="+", default=list(SUITES))
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results", "wide_lookahead.json"))
    ap.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(int(args.worker[0]), args.worker[1:])
    from fuseflow.cli import atomic_write
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, stdout=subprocess.PIPE, text=True).stdout.strip()
    rev = lambda r: subprocess.run(["git", "rev-parse", r], cwd=ROOT, stdout=subprocess.PIPE, check=True,
                                   text=True).stdout.strip()
    base = rev(args.base)
    head = commit if args.head == "." else rev(args.head)

    def at(revision, label):
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "archive", revision], cwd=ROOT, stdout=subprocess.PIPE, check=True).stdout
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            print(f"{label} {revision[:10]}:", file=sys.stderr)
            return measure(tmp, args.min_arity, args.suites)

    before = at(base, "base")
    if args.head == ".":
        print("this tree:", file=sys.stderr)
        now = measure(ROOT, args.min_arity, args.suites)
    else:
        now = at(head, "head")
    rows = [{"entry": k, "widest_intersect": before[k]["widest"], "cycles_base": before[k]["cycles"],
             "cycles_now": now[k]["cycles"], "ratio": round(now[k]["cycles"] / before[k]["cycles"], 4)}
            for k in before if k in now]
    doc = {"benchmark": "wide_lookahead_cost", "base": base, "head": head, "commit": commit, "suites": args.suites,
           "min_arity": args.min_arity,
           "rows": rows, "max_ratio": max(r["ratio"] for r in rows), "min_ratio": min(r["ratio"] for r in rows)}
    with atomic_write(args.out) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        print(f"{r['entry']:62s} {r['cycles_base']:9d} {r['cycles_now']:9d} {r['ratio']:7.4f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
