"""``python -m fuseflow.dse list`` / ``run EXPERIMENT|all -o report/ [--scheduler S] [--budget N]``.

Each experiment's design points run through the sweep runner (``--scheduler serial | local[:N] |
tcp://HOST:PORT``); the experiment writes ``report/<name>.json`` and ``report/<name>.png`` and the page
``report/index.html`` is rewritten from every JSON in the directory. ``--budget N`` caps the number of
simulations: an experiment that needs more is refused before anything runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..cli import atomic_write, commit_outputs, main_guard, output_dir
from ..errors import FuseFlowError
from ..reports.sweep import parse_scheduler, run_sweep
from .experiments import EXPERIMENTS, PENDING


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="fuseflow dse",
                                 description="Design-space experiments mirroring the FuseFlow paper's figures.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the experiments")
    r = sub.add_parser("run", help="run experiments into a report directory")
    r.add_argument("experiments", nargs="+", metavar="EXPERIMENT", help="experiment names, or 'all'")
    r.add_argument("-o", "--output", required=True, metavar="DIR", type=output_dir, help="report directory")
    r.add_argument("--scheduler", default="serial",
                   help="serial (default), local[:N] (a local Dask cluster) or tcp://HOST:PORT")
    r.add_argument("--budget", type=int, default=None, metavar="N",
                   help="most simulations an experiment may run (refused before running when it needs more)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--dataset", default="cora",
                   help="graph of the fig12 experiment's GNNs (fuseflow.datasets.load: a name or a path; default cora)")
    r.add_argument("--size", default="paper", choices=("small", "medium", "paper"),
                   help="model sizes of the fig12 experiment (default: the paper's)")
    r.add_argument("--merge", action="store_true",
                   help="keep the points of an experiment's existing JSON in the report directory that this run does "
                        "not redo (e.g. fig12 --models attention into a report with the other models)")
    r.add_argument("--models", metavar="M,M", help="the fig12 experiment's models, comma separated (default: gcn, "
                                                   "graphsage, autoencoder, attention)")
    e = sub.add_parser("evaluation", help="print docs/evaluation.md's results block from committed JSON")
    e.add_argument("dir", nargs="?", default="benchmarks/results/dse", help="experiment JSON directory")
    e.add_argument("--cost", default="benchmarks/results/cost.json",
                   help="cost-model bench results (default: benchmarks/results/cost.json)")
    e.add_argument("--autoschedule", default="benchmarks/results/autoschedule.json",
                   help="autoscheduler bench results (default: benchmarks/results/autoschedule.json)")
    return ap


def merged_results(path: str, name: str, results: dict, wall: float) -> tuple:
    """``results`` over the points of the experiment's earlier JSON at ``path`` (kept where this run did not redo
    them), and the two runs' wall seconds together; ``results`` alone when there is no earlier file."""
    if not os.path.exists(path):
        return results, wall
    try:
        with open(path) as f:
            old = json.load(f)
    except (OSError, ValueError) as exc:
        raise FuseFlowError(f"--merge {path}", f"cannot read it: {exc}") from None
    if not isinstance(old, dict) or old.get("experiment") != name or not isinstance(old.get("results"), dict):
        raise FuseFlowError(f"--merge {path}", f"not the JSON of experiment {name}")
    return {**old["results"], **results}, old.get("wall_s", 0.0) + wall


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "list":
        for name, exp in EXPERIMENTS.items():
            print(f"{name:10s} {exp.figure:8s} {exp.title}" + ("" if exp.in_all else " (not in 'all': make paper)"))
        for fig, why in PENDING.items():
            print(f"{'-':10s} {fig:8s} {why}")
        return 0
    if args.cmd == "evaluation":
        from .report import evaluation_markdown
        print(evaluation_markdown(args.dir, args.cost, args.autoschedule))
        return 0
    names = [n for n, e in EXPERIMENTS.items() if e.in_all] if args.experiments == ["all"] else args.experiments
    for n in names:
        if n not in EXPERIMENTS:
            raise FuseFlowError(f"experiment {n!r}", f"unknown (known: {', '.join(EXPERIMENTS)}, all)")
    kind, address = parse_scheduler(args.scheduler)
    if kind == "address":
        from ..reports.sweep import _check_reachable
        _check_reachable(address)                  # before any work: a dead address fails in seconds
    if args.budget is not None and args.budget < 1:
        raise FuseFlowError("--budget", f"must be at least 1 simulation, got {args.budget}")
    plans = {n: EXPERIMENTS[n].tasks(**{o: getattr(args, o) for o in EXPERIMENTS[n].options}) for n in names}
    if args.budget is not None:
        for n, tasks in plans.items():
            if len(tasks) > args.budget:
                raise FuseFlowError("--budget", f"impossible: experiment {n} needs {len(tasks)} simulations, "
                                                f"the budget allows {args.budget}")
    os.makedirs(args.output, exist_ok=True)
    from .report import write_page, write_plot
    for n in names:
        exp = EXPERIMENTS[n]
        t0 = time.perf_counter()
        results = run_sweep(plans[n], args.scheduler, progress=not args.quiet, label=n)
        wall = time.perf_counter() - t0
        if args.merge:
            results, wall = merged_results(os.path.join(args.output, f"{n}.json"), n, results, wall)
        summary = exp.summarize(results)
        data = {"experiment": n, "figure": exp.figure, "title": exp.title, "paper": exp.claim,
                "scheduler": args.scheduler, "points": len(results), "wall_s": wall,
                "summary": summary, "results": results}
        write_plot(exp, summary, os.path.join(args.output, f"{n}.png"))
        with atomic_write(os.path.join(args.output, f"{n}.json")) as f:
            json.dump(data, f, indent=1)
        print(f"{n}: {len(results)} points in {data['wall_s']:.1f} s -> {args.output}/{n}.json, {n}.png")
    # the page is rendered from the experiments' JSON on disk: put this run's files in place first (each
    # experiment's JSON and PNG are a complete set)
    commit_outputs()
    page = write_page(args.output)
    print(f"page: {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main_guard(main))
