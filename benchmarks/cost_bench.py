"""Error of the cost heuristic (fuseflow.compiler.cost) against the simulator's counters.

Over the example programs (fuseflow/programs/*.ff, except the decoder, which takes minutes per point) at every
fusion granularity and densities 0.1, 0.3 and 0.5 of the sparse inputs: the relative error of estimated ALU
ops (FLOPs) and bytes moved, per point and averaged (goal: <= 5 %; FuseFlow reports 1.8-11.5 %), the time an
estimate takes, and the Spearman rank correlation of estimated vs simulated cycles across the schedules of
each program and density (fusion granularities; the nested matrix product of Fig. 18 adds its dataflow
orders), on-chip and with the HBM2-like memory. Parallel lanes: every example program (the same ones) at every
index that the lanes pass can split, at 1, 2 and 4 lanes and the same densities: the error of the estimated
cycles on chip and the Spearman correlation of estimated vs simulated cycles across the lane schedules (index
and factor) of each program and density. Every point is one sweep task (fuseflow.reports.sweep).
Writes benchmarks/results/cost.json.
"""

import argparse
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from fuseflow.dse.experiments import example_names, example_path, nested_configs  # noqa: E402
from fuseflow.compiler.cost import LANE_OVERLAP  # noqa: E402
from fuseflow.dse.points import run_point  # noqa: E402
from fuseflow.reports.sweep import Task, run_sweep  # noqa: E402

DENSITIES = (0.1, 0.3, 0.5)
FUSES = ("none", "regions", "full")
SKIP = {"decoder"}
LANES = (1, 2, 4)


def lane_indices(text):
    """The indices of a program (regions fused) whose lanes the pass builds (a serializer appears at 2 lanes)."""
    from fuseflow.compiler import compile_text
    from fuseflow.errors import FuseFlowError
    base = compile_text(text)
    out = []
    for i in sorted({i for p in base.plans if hasattr(p, "order") for i in p.order}):
        try:
            r = compile_text(text, parallel={i: 2})
        except FuseFlowError:
            continue
        if any(n.op == "serialize" for k in r.program.kernels for n in k.nodes.values()):
            out.append(i)
    return out


def spearman(xs, ys):
    from scipy.stats import spearmanr
    if len(xs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return float(spearmanr(xs, ys).statistic)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "cost.json"))
    ap.add_argument("--scheduler", default="serial")
    args = ap.parse_args(argv)
    tasks = []
    for name in example_names():
        if name in SKIP:
            continue
        text = open(example_path(name)).read()
        for d in DENSITIES:
            for fuse in FUSES:
                tasks.append(Task(f"{name}/{fuse}/d{d}", run_point, (text, fuse),
                                  {"data": {"density": d, "seed": 7}}))
    for d in DENSITIES:
        for cfg in nested_configs(n=34):
            tasks.append(Task(f"nested/{cfg['key']}/d{d}", run_point, (cfg["text"], "full", cfg["order"]),
                              {"data": {"density": d, "seed": 7}}))
    for name in example_names():
        if name in SKIP:
            continue
        text = open(example_path(name)).read()
        scheds = [("-", 1)] + [(i, f) for i in lane_indices(text) for f in LANES if f > 1]
        for d in DENSITIES:
            for i, f in scheds:
                tasks.append(Task(f"lanes:{name}/{i}={f}/d{d}", run_point, (text, "regions"),
                                  {"data": {"density": d, "seed": 7}, "parallel": {i: f} if f > 1 else None}))
    res = run_sweep(tasks, args.scheduler, label="cost")
    lanes = {k: res.pop(k) for k in [k for k in res if k.startswith("lanes:")]}
    points, groups = [], {}
    for key, r in res.items():
        prog, sched, dens = key.split("/")
        err_f = (r["estimate"]["alu_ops"] - r["alu_ops"]) / max(1, r["alu_ops"])
        err_b = (r["estimate"]["bytes"] - r["bytes"]) / max(1, r["bytes"])
        points.append({"key": key, "flops": r["alu_ops"], "flops_est": r["estimate"]["alu_ops"],
                       "flops_err": err_f, "bytes": r["bytes"], "bytes_est": r["estimate"]["bytes"],
                       "bytes_err": err_b, "cycles": r["cycles"]["onchip"], "cycles_est": r["estimate"]["cycles"],
                       "cycles_hbm2": r["cycles"]["hbm2"], "cycles_hbm2_est": r["estimate"]["cycles_hbm2"],
                       "estimate_ms": 1e3 * r["estimate_s"] / 2, "sim_s": r["sim_s"]})
        groups.setdefault(f"{prog}/{dens}", []).append(points[-1])
    ranks = {}
    for g, pts in groups.items():
        rho = spearman([p["cycles_est"] for p in pts], [p["cycles"] for p in pts])
        rho_h = spearman([p["cycles_hbm2_est"] for p in pts], [p["cycles_hbm2"] for p in pts])
        ranks[g] = {"schedules": len(pts), "spearman_onchip": rho, "spearman_hbm2": rho_h}
    nonzero = [p for p in points if p["flops"] > 0]
    mean = lambda xs: statistics.fmean(xs) if xs else None  # noqa: E731
    summary = {
        "points": len(points),
        "mean_abs_flops_err": mean([abs(p["flops_err"]) for p in nonzero]),
        "mean_abs_bytes_err": mean([abs(p["bytes_err"]) for p in points]),
        "max_abs_flops_err": max(abs(p["flops_err"]) for p in nonzero),
        "max_abs_bytes_err": max(abs(p["bytes_err"]) for p in points),
        "mean_abs_cycles_err_onchip": mean([abs(p["cycles_est"] / p["cycles"] - 1) for p in points]),
        "mean_spearman_onchip": mean([r["spearman_onchip"] for r in ranks.values() if r["spearman_onchip"] is not None]),
        "mean_spearman_hbm2": mean([r["spearman_hbm2"] for r in ranks.values() if r["spearman_hbm2"] is not None]),
        "spearman_groups": sum(1 for r in ranks.values() if r["spearman_onchip"] is not None),
        "median_estimate_ms": statistics.median(p["estimate_ms"] for p in points),
        "median_sim_s": statistics.median(p["sim_s"] for p in points),
        "goal_flops_bytes": 0.05,
    }
    lane_points, lane_groups = [], {}
    for key, r in lanes.items():
        prog, sched, dens = key[len("lanes:"):].split("/")
        index, factor = sched.split("=")
        lane_points.append({"key": key, "program": prog, "index": index, "lanes": int(factor), "density": dens,
                            "cycles": r["cycles"]["onchip"], "cycles_est": r["estimate"]["cycles"],
                            "cycles_err": r["estimate"]["cycles"] / r["cycles"]["onchip"] - 1,
                            "flops_err": (r["estimate"]["alu_ops"] - r["alu_ops"]) / max(1, r["alu_ops"]),
                            "bytes_err": (r["estimate"]["bytes"] - r["bytes"]) / max(1, r["bytes"])})
        lane_groups.setdefault(f"{prog}/{dens}", []).append(lane_points[-1])
    lane_ranks = {}
    for g, pts in lane_groups.items():
        # the lane schedules of one program and density: one lane, and each index at 2 and 4 lanes
        best_sim = min(p["cycles"] for p in pts)
        pick = min(pts, key=lambda p: p["cycles_est"])
        lane_ranks[g] = {"schedules": len(pts),
                         "spearman": spearman([p["cycles_est"] for p in pts], [p["cycles"] for p in pts]),
                         "estimate_picks_best": pick["cycles"] == best_sim,
                         "regret": pick["cycles"] / best_sim - 1}
    laned = [p for p in lane_points if p["lanes"] > 1]
    single = [p for p in lane_points if p["lanes"] == 1]
    summary["lanes"] = {
        "points": len(lane_points), "programs": len({p["program"] for p in lane_points}),
        "overlap": LANE_OVERLAP,
        "mean_abs_cycles_err_1": mean([abs(p["cycles_err"]) for p in single]),
        "mean_abs_cycles_err_2": mean([abs(p["cycles_err"]) for p in laned if p["lanes"] == 2]),
        "mean_abs_cycles_err_4": mean([abs(p["cycles_err"]) for p in laned if p["lanes"] == 4]),
        "mean_cycles_err_laned": mean([p["cycles_err"] for p in laned]),
        "mean_abs_flops_err_laned": mean([abs(p["flops_err"]) for p in laned]),
        "mean_abs_bytes_err_laned": mean([abs(p["bytes_err"]) for p in laned]),
        "mean_spearman": mean([r["spearman"] for r in lane_ranks.values() if r["spearman"] is not None]),
        "spearman_groups": sum(1 for r in lane_ranks.values() if r["spearman"] is not None),
        "estimate_picks_best": sum(r["estimate_picks_best"] for r in lane_ranks.values()),
        "groups": len(lane_ranks),
        "mean_regret_of_estimate_pick": mean([r["regret"] for r in lane_ranks.values()]),
    }
    out = {"benchmark": "cost", "machine": platform.machine(), "python": platform.python_version(),
           "densities": DENSITIES, "summary": summary, "rank_correlation": ranks, "points": points,
           "lanes_rank_correlation": lane_ranks, "lanes_points": lane_points}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(args.output + ".tmp", args.output)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
