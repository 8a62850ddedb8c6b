"""How good the autoscheduler's picks are (fuseflow.compiler.autoschedule) against exhaustive simulation.

For each example program and input density: every candidate schedule (per-region fusion choice, or everything
fused, x dataflow orders) is simulated with the HBM2-like memory; the autoscheduler ranks the same candidates with the cost heuristic and
simulates its top 3. Reports whether it picked the exhaustive best, its regret in cycles (picked - best) and
as a fraction of the best, and how many simulations it saved. Parallel factors: for the programs of
``LANE_PROGRAMS`` every schedule is also simulated at every factor (2, 4, 8) of every index and every pair of
indices within 8 lanes per kernel, and the autoscheduler chooses with ``max_lanes=8``, alone and with a node
budget (twice the nodes of the best unlaned schedule, so that not every laned schedule fits).
Writes benchmarks/results/autoschedule.json.
"""

import argparse
import json
import os
import platform
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from fuseflow.reports.sweep import Task, run_sweep  # noqa: E402

#: graphsage2 is left out: some of its 26+ order combinations simulate for minutes each, too long to simulate
#: exhaustively here
PROGRAMS = ("gcn", "gcn2", "graphsage", "autoencoder", "chain3", "chain4", "spmm", "sddmm", "elementwise",
            "reductions", "multiuse", "permute3")
DENSITIES = (0.05, 0.2, 0.5)
#: programs whose schedules are also searched over parallel factors (exhaustively simulated at every factor
#: and pair of factors: the larger programs take minutes per case)
LANE_PROGRAMS = ("spmv", "spmm", "sddmm", "gcn", "graphsage", "elementwise", "reductions", "masked_attention",
                 "chain3")
MAX_LANES = 8


def one(name, density, top=3, text=None):
    from fuseflow.compiler import EinsumProgram, compile_program, parse_file
    from fuseflow.compiler.autoschedule import autoschedule, exhaustive
    from fuseflow.samml.kernels import random_inputs
    from fuseflow.dse.experiments import example_path
    src = EinsumProgram.parse(text) if text else parse_file(example_path(name))
    inputs = random_inputs(compile_program(src).program, density=density, seed=11)
    every = exhaustive(src, inputs)
    auto = autoschedule(src, inputs=inputs, top=top)
    # the heuristic alone (top 1: its first choice, simulated only to measure it)
    first = min(every, key=lambda c: c[0].estimated_cycles)[0]
    best = every[0][0]
    return {"program": name, "density": density, "candidates": len(every), "simulated_by_auto": min(top, len(every)),
            "heuristic_first": first.key(), "heuristic_first_cycles": first.simulated_cycles,
            "heuristic_first_hit": first.simulated_cycles == best.simulated_cycles,
            "best": best.key(), "best_cycles": best.simulated_cycles, "picked": auto.chosen.key(),
            "picked_cycles": auto.chosen.simulated_cycles, "hit": auto.chosen.simulated_cycles == best.simulated_cycles,
            "regret_cycles": auto.chosen.simulated_cycles - best.simulated_cycles,
            "regret": auto.chosen.simulated_cycles / best.simulated_cycles - 1,
            "worst_cycles": every[-1][0].simulated_cycles, "best_fuse": best.fuse, "picked_fuse": auto.chosen.fuse,
            "per_region_candidates": sum(c[0].fuse == "per-region" for c in every),
            "auto_rank_ms_per_kernel": 1e3 * auto.rank_seconds / len(src.to_ir().stmts)}


def one_lanes(name, density, top=3):
    """One program and density searched over fusion, orders and parallel factors: exhaustive simulation once,
    the autoscheduler under the lane budget alone and with a node budget."""
    from fuseflow.compiler import compile_program, parse_file
    from fuseflow.compiler.autoschedule import autoschedule, exhaustive
    from fuseflow.samml.kernels import random_inputs
    from fuseflow.dse.experiments import example_path
    src = parse_file(example_path(name))
    inputs = random_inputs(compile_program(src).program, density=density, seed=11)
    every = exhaustive(src, inputs, max_lanes=MAX_LANES)
    unlaned = min((c[0] for c in every if not c[0].parallel), key=lambda s: s.simulated_cycles)
    out = []
    for budget, max_nodes in (("lanes", None), ("lanes+nodes", 2 * unlaned.nodes)):
        fits = [c[0] for c in every if max_nodes is None or c[0].nodes <= max_nodes]
        best = fits[0]
        auto = autoschedule(src, inputs=inputs, top=top, max_lanes=MAX_LANES, max_nodes=max_nodes)
        first = min(fits, key=lambda s: s.estimated_cycles)
        out.append({"program": name, "density": density, "budget": budget, "max_nodes": max_nodes,
                    "max_lanes": MAX_LANES, "candidates": len(fits), "ranked_by_auto": len(auto.candidates),
                    "simulated_by_auto": min(top, len(auto.candidates)),
                    "heuristic_first": first.key(), "heuristic_first_cycles": first.simulated_cycles,
                    "heuristic_first_hit": first.simulated_cycles == best.simulated_cycles,
                    "best": best.key(), "best_cycles": best.simulated_cycles, "best_parallel": best.parallel,
                    "picked": auto.chosen.key(), "picked_cycles": auto.chosen.simulated_cycles,
                    "picked_parallel": auto.chosen.parallel,
                    "hit": auto.chosen.simulated_cycles == best.simulated_cycles,
                    "regret_cycles": auto.chosen.simulated_cycles - best.simulated_cycles,
                    "regret": auto.chosen.simulated_cycles / best.simulated_cycles - 1,
                    "unlaned_best_cycles": unlaned.simulated_cycles,
                    "speedup_over_unlaned": unlaned.simulated_cycles / auto.chosen.simulated_cycles})
    return out


#: PyG-style GNNs (issue 43): (model, nodes); features 32, hidden 16, classes 4, about 4 neighbours per node
#: (Cora's average degree; 2,708 is Cora's size)
GNN_MODELS = ("gcn-transform-first", "gcn-aggregate-first", "sage-transform-first", "sage-aggregate-first")
GNN_NODES = (200, 2708)
#: exhaustive simulation of the GNN cases skips schedules estimated at more than this times the best estimate
GNN_PRUNE = 3.0


def gnn_model(name, nodes):
    """(model, example inputs) of a PyG-style two-layer GNN on a random graph (fuseflow.models.data)."""
    import torch
    import torch.nn as nn
    from fuseflow.models import GCN, GraphSAGE
    from fuseflow.models.data import synthetic_graph
    g = synthetic_graph("uniform", nodes=nodes, features=32, sparsity=1 - 4.0 / nodes, seed=0)

    class GCNConv(nn.Module):                   # PyG's GCNConv order: transform, aggregate, then the bias
        def __init__(self, i, o):
            super().__init__()
            self.lin = nn.Linear(i, o, bias=False)
            self.bias = nn.Parameter(torch.zeros(o).uniform_(-0.1, 0.1))

        def forward(self, a, x):
            return torch.sparse.mm(a, self.lin(x)) + self.bias

    class SAGEConv(nn.Module):                  # mean of the transformed neighbours plus the transformed self
        def __init__(self, i, o):
            super().__init__()
            self.lin_l = nn.Linear(i, o, bias=False)
            self.lin_r = nn.Linear(i, o)

        def forward(self, a, deg, x):
            return torch.sparse.mm(a, self.lin_l(x)).to_dense() / deg + self.lin_r(x)

    class GCN2(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv1, self.conv2 = GCNConv(32, 16), GCNConv(16, 4)

        def forward(self, a, x):
            return self.conv2(a, torch.relu(self.conv1(a, x)))

    class SAGE2(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv1, self.conv2 = SAGEConv(32, 16), SAGEConv(16, 4)

        def forward(self, a, deg, x):
            return self.conv2(a, deg, torch.relu(self.conv1(a, deg, x)))

    if name == "gcn-transform-first":
        return GCN2(), (g.adjacency, g.features)
    if name == "gcn-aggregate-first":
        return GCN(in_features=32, hidden=16, classes=4), (g.adjacency, g.features)
    if name == "sage-transform-first":
        return SAGE2(), (g.neighbours, g.degree, g.features)
    return GraphSAGE(in_features=32, hidden=16, classes=4), (g.neighbours, g.degree, g.features)


def one_gnn(name, nodes, budget=60.0):
    """A PyG-style GNN: fuse="auto" (its choice, cycles and own time) against every schedule it could rank,
    simulated (fusion choices of the program and of its reassociated forms, at default orders, within
    :data:`GNN_PRUNE` of the best estimate), and against none / regions / regions rewritten."""
    import time
    import warnings
    import fuseflow
    from fuseflow.compiler.autoschedule import compile_choice, fusion_choices
    from fuseflow.compiler.cost import estimate
    from fuseflow.compiler.lower_sugar import lower_sugar
    from fuseflow.compiler.redundancy import FusionRedundancyWarning, reassociations
    from fuseflow.sim import run
    warnings.simplefilter("ignore", FusionRedundancyWarning)
    model, inputs = gnn_model(name, nodes)
    model.eval()
    t = time.perf_counter()
    m = fuseflow.compile(model, inputs, fuse="auto", mode="float", budget=budget)
    auto_seconds = time.perf_counter() - t
    data = m._inputs(None)
    rep = m.schedule_report
    fixed = {}
    for fuse, red in (("none", "warn"), ("regions", "warn"), ("regions", "rewrite")):
        c = fuseflow.compile(model, inputs, fuse=fuse, mode="float", redundancy=red)
        fixed[fuse if red == "warn" else "regions+rewrite"] = run(c.program, data, memory="hbm2").cycles
    cands, t = [], time.perf_counter()
    for label, form in [("", m.einsum)] + reassociations(m.einsum):
        ir = lower_sugar(form.to_ir() if hasattr(form, "to_ir") else form)
        for fuse, regions in fusion_choices(ir):
            try:
                res = compile_choice(ir, regions)
            except Exception:          # noqa: BLE001 - a choice that does not compile is no candidate
                continue
            est = estimate(res.program, inputs=data, memory="hbm2").cycles
            cands.append((est, f"{fuse}{'+' + label if label else ''}", regions, res))
    best_est = min(c[0] for c in cands)
    simulated = []
    for est, label, regions, res in cands:
        if est > GNN_PRUNE * best_est:
            continue
        simulated.append((run(res.program, data, memory="hbm2").cycles, label, regions))
    exhaustive_seconds = time.perf_counter() - t
    best = min(simulated, key=lambda c: c[0])
    picked = m.schedule.simulated_cycles
    return {"model": name, "nodes": nodes, "kernels_unfused": len(m.einsum.to_ir().stmts),
            "picked": m.schedule.key(), "picked_cycles": picked, "picked_estimated": m.schedule.estimated_cycles,
            "best": best[1], "best_cycles": best[0], "regret": picked / best[0] - 1 if picked else None,
            "within_5_percent": bool(picked is not None and picked <= 1.05 * best[0]),
            "none_cycles": fixed["none"], "regions_cycles": fixed["regions"],
            "regions_rewrite_cycles": fixed["regions+rewrite"],
            "auto_seconds": auto_seconds, "auto_rank_seconds": rep.rank_seconds, "auto_ranked": len(m.candidates),
            "auto_compiles": rep.compiles, "auto_simulations": rep.simulations,
            "auto_rank_ms_per_kernel": 1e3 * rep.rank_seconds / len(m.einsum.to_ir().stmts),
            "auto_skipped": [str(s) for s in rep.skipped],
            "exhaustive_candidates": len(cands), "exhaustive_simulated": len(simulated),
            "exhaustive_seconds": exhaustive_seconds}


def _summary(rows, top=3):
    return {"cases": len(rows), "hits": sum(r["hit"] for r in rows),
            "hit_rate": sum(r["hit"] for r in rows) / len(rows),
            "mean_regret": statistics.fmean(r["regret"] for r in rows),
            "max_regret": max(r["regret"] for r in rows),
            "max_regret_cycles": max(r["regret_cycles"] for r in rows),
            "simulations_auto": sum(r["simulated_by_auto"] for r in rows),
            "simulations_exhaustive": sum(r["candidates"] for r in rows), "memory": "hbm2", "top": top,
            "cases_with_more_candidates_than_top": sum(r["candidates"] > r["simulated_by_auto"] for r in rows),
            "heuristic_first_hit_rate": sum(r["heuristic_first_hit"] for r in rows) / len(rows),
            "heuristic_first_mean_regret": statistics.fmean(
                r["heuristic_first_cycles"] / r["best_cycles"] - 1 for r in rows),
            "heuristic_first_max_regret": max(r["heuristic_first_cycles"] / r["best_cycles"] - 1 for r in rows),
            "max_candidates": max(r["candidates"] for r in rows)}


def _gnn_summary(rows):
    ok = [r for r in rows if r["picked_cycles"] is not None]
    return {"cases": len(rows), "within_5_percent": sum(r["within_5_percent"] for r in rows),
            "mean_regret": statistics.fmean(r["regret"] for r in ok) if ok else None,
            "max_regret": max(r["regret"] for r in ok) if ok else None,
            "max_auto_seconds": max(r["auto_seconds"] for r in rows),
            "median_rank_ms_per_kernel": statistics.median(r["auto_rank_ms_per_kernel"] for r in rows),
            "prune": GNN_PRUNE, "memory": "hbm2"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "autoschedule.json"))
    ap.add_argument("--scheduler", default="serial")
    ap.add_argument("--gnn-only", action="store_true",
                    help="only the PyG-style GNN cases (issue 43), merged into the existing results file")
    args = ap.parse_args(argv)
    gnn_tasks = [Task(f"gnn:{g}/{n}", one_gnn, (g, n)) for n in GNN_NODES for g in GNN_MODELS]
    if args.gnn_only:
        res = run_sweep(gnn_tasks, args.scheduler, label="autoschedule-gnn")
        with open(args.output) as f:
            out = json.load(f)
        out["gnn_cases"] = list(res.values())
        out["summary"]["gnn"] = _gnn_summary(out["gnn_cases"])
        with open(args.output + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(args.output + ".tmp", args.output)
        print(json.dumps(out["summary"]["gnn"], indent=1))
        return 0
    tasks = [Task(f"{p}/d{d}", one, (p, d)) for p in PROGRAMS for d in DENSITIES]
    # a 3-layer GCN: three regions, so 2^3 per-region choices and full fusion (more candidates than the top 3)
    from fuseflow.dse.experiments import gcn_text
    gcn3 = gcn_text(24, feats=8, hidden=8, out=4, layers=3)
    for d in DENSITIES:
        tasks.append(Task(f"gcn3[24 nodes]/d{d}", one, ("gcn3[24 nodes]", d), {"text": gcn3}))
    # the nested product of Fig. 18 in each operand layout: several valid orders per layout
    from fuseflow.dse.experiments import nested_configs
    layouts = {c["layout"]: c["text"] for c in nested_configs(34)}
    for layout, text in layouts.items():
        for d in DENSITIES:
            tasks.append(Task(f"nested[{layout}]/d{d}", one, (f"nested[{layout}]", d), {"text": text}))
    for p in LANE_PROGRAMS:
        for d in DENSITIES:
            tasks.append(Task(f"lanes:{p}/d{d}", one_lanes, (p, d)))
    res = run_sweep(tasks, args.scheduler, label="autoschedule")
    rows = [r for k, r in res.items() if not k.startswith("lanes:")]
    lane_rows = [row for k, r in res.items() if k.startswith("lanes:") for row in r]
    summary = _summary(rows)
    summary["median_rank_ms_per_kernel"] = statistics.median(r["auto_rank_ms_per_kernel"] for r in rows)
    summary.update({"cases_with_per_region_candidates": sum(r["per_region_candidates"] > 0 for r in rows),
                    "cases_best_per_region": sum(r["best_fuse"] == "per-region" for r in rows),
                    "cases_picked_per_region": sum(r["picked_fuse"] == "per-region" for r in rows)})
    lanes = {}
    for budget in ("lanes", "lanes+nodes"):
        sel = [r for r in lane_rows if r["budget"] == budget]
        lanes[budget] = _summary(sel)
        lanes[budget].update({
            "programs": len({r["program"] for r in sel}), "max_lanes": MAX_LANES,
            "cases_best_laned": sum(bool(r["best_parallel"]) for r in sel),
            "cases_picked_laned": sum(bool(r["picked_parallel"]) for r in sel),
            "cases_best_nested": sum(len(r["best_parallel"] or {}) > 1 for r in sel),
            "cases_picked_nested": sum(len(r["picked_parallel"] or {}) > 1 for r in sel),
            "mean_speedup_over_unlaned": statistics.fmean(r["speedup_over_unlaned"] for r in sel),
            "mean_ranked_by_auto": statistics.fmean(r["ranked_by_auto"] for r in sel)})
    summary["lanes"] = lanes
    gnn = list(run_sweep(gnn_tasks, args.scheduler, label="autoschedule-gnn").values())
    summary["gnn"] = _gnn_summary(gnn)
    out = {"benchmark": "autoschedule", "machine": platform.machine(), "python": platform.python_version(),
           "summary": summary, "cases": rows, "lane_cases": lane_rows, "gnn_cases": gnn}
    with open(args.output + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(args.output + ".tmp", args.output)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
