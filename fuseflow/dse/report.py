"""Render experiment results: one PNG per experiment and one static HTML page beside the paper's claims.

Reports only render: the numbers come from the experiments' JSON files in the report directory. Every image
on the page marks itself when it has loaded with a non-zero natural size (``data-loaded="yes"``), so a
headless browser can check that every figure rendered (tests/dse/test_report_browser.py).
"""

from __future__ import annotations

import html
import io
import json
import os

from ..cli import atomic_write
from .experiments import EXPERIMENTS, PENDING


def write_plot(exp, summary: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    exp.plot(summary, ax)
    ax.set_title(f"{exp.figure} (ours): {exp.title}", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    with atomic_write(path, "wb") as f:
        f.write(buf.getvalue())


def _table(rows: list, limit: int = 40) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    fmt = lambda v: f"{v:.3g}" if isinstance(v, float) else html.escape(str(v))  # noqa: E731
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{fmt(r.get(c, ''))}</td>" for c in cols) + "</tr>" for r in rows[:limit])
    more = f"<p>{len(rows) - limit} more rows in the JSON.</p>" if len(rows) > limit else ""
    return f"<table><tr>{head}</tr>{body}</table>{more}"


def _ours(name: str, summary: dict) -> str:
    """One sentence of what our run shows, from the summary (no retyped numbers)."""
    rows = summary.get("rows", [])
    if name == "fusion":
        parts = []
        for model, best in summary["best_hbm2"].items():
            full = next(r for r in rows if r["model"] == model and r["fuse"] == "full")
            part = next(r for r in rows if r["model"] == model and r["fuse"] == "regions")
            parts.append(f"{model}: best {best}; regions {part['speedup_hbm2']:.2f}x, full "
                         f"{full['speedup_hbm2']:.2f}x over unfused")
        return "; ".join(parts) + "."
    if name == "fig12":
        parts = []
        for model, best in summary["best_hbm2"].items():
            rs = [r for r in rows if r["model"] == model]
            where = rs[0]["dataset"] or rs[0]["size"]
            ratios = ", ".join(f"{r['fuse']} {r['speedup_hbm2']:.2f}x" +
                               (f" (paper {r['paper_speedup']:.2f}x)" if r["paper_speedup"] != "" else "")
                               for r in rs if r["fuse"] != "none")
            agree = "as the paper" if summary["paper_best"].get(model) == best else \
                f"the paper: {summary['paper_best'].get(model)}"
            parts.append(f"{model} ({where}): best {best} ({agree}); {ratios}")
        return "; ".join(parts) + ". Every run checked against PyTorch: " + \
            ("all agree" if all(r["check_ok"] for r in rows) else "SOME DIFFER, see the JSON") + "."
    if name == "flops":
        return "; ".join(f"{r['model'].split(' (')[0]} {r['fuse']}: FLOPs x{r['flops_norm']:.2f}, bytes "
                         f"x{r['bytes_norm']:.2f}, intensity {r['intensity']:.3f} FLOP/B"
                         for r in rows if r["fuse"] != "none") + "."
    if name == "sparsity":
        out = []
        for fam in dict.fromkeys(r["family"] for r in rows):
            rs = sorted((r for r in rows if r["family"] == fam), key=lambda r: r["sparsity"])
            out.append(f"{fam}: {rs[0]['speedup_hbm2']:.2f}x at sparsity {rs[0]['sparsity']:.2f} to "
                       f"{rs[-1]['speedup_hbm2']:.2f}x at {rs[-1]['sparsity']:.2f}")
        return "; ".join(out) + "."
    if name == "blocks":
        base = rows[0]
        return (f"BigBird attention {summary['n']} x {summary['n']}, d = {summary['d']}: unstructured "
                f"{base['cycles_onchip']} cycles on chip; blocked " +
                ", ".join(f"B = {r['B']} {r['speedup_onchip']:.1f}x on chip ({r['speedup_onchip'] / r['B']:.1f} B), "
                          f"{r['speedup_hbm2']:.1f}x with HBM2 ({r['speedup_hbm2'] / r['B']:.2f} B)" for r in rows[1:])
                + " faster than unstructured.")
    if name == "orders":
        return (f"{summary['configs']} (layout, order) configurations; slowest / fastest = "
                f"{summary['max_over_min_hbm2']:.1f}x with HBM2 ({summary['max_over_min_onchip']:.1f}x on chip); "
                f"best {summary['best']}, worst {summary['worst']}.")
    if name == "parallel":
        single = ", ".join(f"{r['speedup']:.2f}x at {r['lanes']}" for r in rows if not r["nested"])
        nested = ", ".join(f"{r['schedule']} {r['speedup']:.2f}x" for r in rows if r["nested"])
        return (f"BigBird scores {summary['n']} x {summary['n']}, d = {summary['d']}, {summary['cycles_1']} cycles "
                f"on one lane; i only: {single} lanes; nested: {nested}.")
    return ""


def write_page(outdir: str) -> str:
    """(Re)write ``outdir/index.html`` from every experiment JSON present; return its path."""
    sections = []
    for name, exp in EXPERIMENTS.items():
        path = os.path.join(outdir, f"{name}.json")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            data = json.load(f)
        summary = data["summary"]
        sections.append(
            f'<section id="{name}"><h2>{html.escape(exp.figure)}: {html.escape(exp.title)}</h2>'
            f'<p><b>Paper:</b> {html.escape(exp.claim)}</p>'
            f'<p><b>Ours</b> ({data["points"]} design points, {data["wall_s"]:.0f} s on scheduler '
            f'{html.escape(data["scheduler"])}): {html.escape(_ours(name, summary))}</p>'
            f'<figure><img src="{name}.png" alt="{html.escape(exp.figure)} (ours)" '
            f'onload="this.dataset.loaded = this.naturalWidth > 0 ? \'yes\' : \'no\'" '
            f'onerror="this.dataset.loaded = \'no\'"></figure>'
            f'<details><summary>numbers</summary>{_table(summary.get("rows", []))}</details></section>')
    pending = "".join(f"<li>{html.escape(fig)}: {html.escape(why)}</li>" for fig, why in PENDING.items())
    pending = f"<h2>Not yet reproduced</h2><ul>{pending}</ul>" if pending else ""
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>FuseFlow-HW design-space exploration</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}} img{{max-width:100%}}
table{{border-collapse:collapse;font-size:80%}} td,th{{border:1px solid #ccc;padding:2px 5px}}</style></head>
<body><h1>Design-space exploration beside the FuseFlow paper (Section 8)</h1>
<p>Generated by <code>python -m fuseflow.dse run</code>; numbers from the JSON files next to this page. Cycles
are the reference simulator's; "HBM2" charges each kernel's memory traffic with the hbm2 preset
(docs/evaluation.md). Sizes are scaled down to run in minutes on two cores.</p>
{''.join(sections) or '<p>No experiment has been run into this directory yet.</p>'}
{pending}
<script>
// every figure reports whether it rendered; document.body.dataset.figures counts the loaded ones
window.addEventListener('load', function () {{
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) {{
    if (imgs[i].complete && imgs[i].naturalWidth > 0) {{ imgs[i].dataset.loaded = 'yes'; ok++; }}
    else {{ imgs[i].dataset.loaded = 'no'; }}
  }}
  document.body.dataset.figures = ok + '/' + imgs.length;
}});
</script>
</body></html>
"""
    out = os.path.join(outdir, "index.html")
    with atomic_write(out) as f:
        f.write(page)
    return out


BEGIN, END = "<!-- results:begin (python -m fuseflow.dse evaluation) -->", "<!-- results:end -->"


def _lane_share(cost: dict, key: str) -> str:
    """Mean |error| of ``key`` over the single-lane points of the lane sweep, each weighted by its program's
    laned points (so it compares with the laned mean)."""
    pts = cost.get("lanes_points", [])
    one = {(p["program"], p["density"]): abs(p[key]) for p in pts if p["lanes"] == 1}
    laned = [one[(p["program"], p["density"])] for p in pts if p["lanes"] > 1 and (p["program"], p["density"]) in one]
    return f"{100 * sum(laned) / len(laned):.1f} %" if laned else "n/a"


def _gnn_lines(g, rows) -> list:
    """The PyG-style GNN cases of autoschedule.json (issue 43): a sentence and a table."""
    out = [f"PyG-style GNNs (`gnn_cases`: two layers, 32 -> 16 -> 4 features, about 4 neighbours per node, "
           f"fuse=\"auto\" with its default 60 s budget against every schedule it could rank simulated, pruned at "
           f"{g['prune']:g}x the best estimate): within 5 % of the best in {g['within_5_percent']} of {g['cases']} "
           f"cases, worst regret {100 * (g['max_regret'] or 0):.1f} %; the autoscheduler's own time at most "
           f"{g['max_auto_seconds']:.0f} s (median ranking {g['median_rank_ms_per_kernel']:.0f} ms per unfused "
           f"kernel on this loaded machine).", "",
           "| model | nodes | none | regions | regions, rewritten | auto's pick | auto cycles | best | auto s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        picked = r["picked"].split("|")[0].split("{")[0]
        out.append(f"| {r['model']} | {r['nodes']:,} | {r['none_cycles']:,} | {r['regions_cycles']:,} | "
                   f"{r['regions_rewrite_cycles']:,} | {picked} | {r['picked_cycles']:,} | {r['best_cycles']:,} | "
                   f"{r['auto_seconds']:.1f} |")
    return out + [""]


def evaluation_markdown(dse_dir: str, cost_json: str | None = None, auto_json: str | None = None) -> str:
    """The results block of docs/evaluation.md, rendered from committed JSON (never retyped)."""
    def load(path):
        if path and os.path.exists(path):
            with open(path) as f:
                return json.load(f)
        return None
    lines = [BEGIN, ""]
    for name, exp in EXPERIMENTS.items():
        data = load(os.path.join(dse_dir, f"{name}.json"))
        if data is None:
            continue
        lines += [f"**{exp.figure}, {exp.title}** (`{name}`, {data['points']} points). Paper: {exp.claim}",
                  f"Ours: {_ours(name, data['summary'])}", ""]
    fusion = load(os.path.join(dse_dir, "fusion.json"))
    if fusion:
        lines += ["| model | fusion | kernels | cycles on chip | cycles HBM2 | speedup HBM2 |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['model']} | {r['fuse']} | {r['kernels']} | {r['cycles_onchip']} | {r['cycles_hbm2']} | "
                  f"{r['speedup_hbm2']:.2f} |" for r in fusion["summary"]["rows"]]
        lines.append("")
    cost = load(cost_json)
    if cost:
        s = cost["summary"]
        lines += [f"**Cost heuristic** (`benchmarks/results/cost.json`, {s['points']} points): mean |error| "
                  f"{100 * s['mean_abs_flops_err']:.1f} % on FLOPs and {100 * s['mean_abs_bytes_err']:.1f} % on bytes "
                  f"(goal {100 * s['goal_flops_bytes']:.0f} %; max {100 * s['max_abs_flops_err']:.0f} % and "
                  f"{100 * s['max_abs_bytes_err']:.0f} %); mean Spearman of estimated vs simulated cycles across "
                  f"schedules {s['mean_spearman_onchip']:.2f} on chip and {s['mean_spearman_hbm2']:.2f} with HBM2 "
                  f"({s['spearman_groups']} program/density groups); median estimate {s['median_estimate_ms']:.1f} ms "
                  f"vs median simulation {1e3 * s['median_sim_s']:.0f} ms.", ""]
        big = [p for p in cost["points"] if p["flops"] >= 100]
        toy = [p for p in cost["points"] if p["flops"] < 100]
        if big and toy:
            mean = lambda xs: 100 * sum(xs) / len(xs)  # noqa: E731
            lines += [f"Points with at least 100 FLOPs ({len(big)}): {mean([abs(p['flops_err']) for p in big]):.1f} % "
                      f"on FLOPs, {mean([abs(p['bytes_err']) for p in big]):.1f} % on bytes; the toy points under 100 "
                      f"FLOPs ({len(toy)}, a handful of nonzeros per operand, where one sample is far from its "
                      f"expectation): {mean([abs(p['flops_err']) for p in toy if p['flops'] > 0]):.1f} % and "
                      f"{mean([abs(p['bytes_err']) for p in toy]):.1f} %.", ""]
        per = {}
        for p in cost["points"]:
            per.setdefault(p["key"].split("/")[0], []).append(p)
        lines += ["| program | points | mean FLOPs error | mean bytes error |", "|---|---|---|---|"]
        for prog, pts in per.items():
            fl = [abs(p["flops_err"]) for p in pts if p["flops"] > 0]
            lines.append(f"| {prog} | {len(pts)} | {100 * sum(fl) / max(1, len(fl)):.1f} % | "
                         f"{100 * sum(abs(p['bytes_err']) for p in pts) / len(pts):.1f} % |")
        lines.append("")
        ln = s.get("lanes")
        if ln:
            lines += [f"Parallel lanes ({ln['points']} points: {ln['programs']} programs, every index the lanes pass "
                      f"splits at 1, 2 and 4 lanes): mean |error| of the estimated cycles on chip "
                      f"{100 * ln['mean_abs_cycles_err_1']:.0f} % at 1 lane, {100 * ln['mean_abs_cycles_err_2']:.0f} % "
                      f"at 2 and {100 * ln['mean_abs_cycles_err_4']:.0f} % at 4 (mean signed "
                      f"{100 * ln['mean_cycles_err_laned']:+.0f} % with lanes; overlap constant {ln['overlap']}); "
                      f"FLOPs {100 * ln['mean_abs_flops_err_laned']:.1f} % and bytes "
                      f"{100 * ln['mean_abs_bytes_err_laned']:.1f} % with lanes, "
                      f"{_lane_share(cost, 'flops_err')} and {_lane_share(cost, 'bytes_err')} on the same programs "
                      f"and indices at 1 lane (lanes split the work, the toy programs' sampling noise stays); "
                      f"mean Spearman of estimated vs "
                      f"simulated cycles across the lane schedules of a program and density "
                      f"{ln['mean_spearman']:.2f} ({ln['spearman_groups']} groups); the estimate's fastest lane "
                      f"schedule is the simulated fastest in {ln['estimate_picks_best']} of {ln['groups']} groups "
                      f"(mean regret {100 * ln['mean_regret_of_estimate_pick']:.1f} %).", ""]
    auto = load(auto_json)
    if auto:
        s = auto["summary"]
        lines += [f"**Autoscheduler** (`benchmarks/results/autoschedule.json`): picked the exhaustive best in "
                  f"{s['hits']} of {s['cases']} cases ({100 * s['hit_rate']:.0f} %); mean regret "
                  f"{100 * s['mean_regret']:.1f} %, worst {100 * s['max_regret']:.1f} % ({s['max_regret_cycles']} cycles); "
                  f"{s['simulations_auto']} simulations instead of {s['simulations_exhaustive']} (memory "
                  f"{s['memory']}, top {s['top']} confirmed; {s['cases_with_more_candidates_than_top']} cases had more "
                  f"candidates than it simulates). The heuristic's first choice alone (no confirming simulation) is "
                  f"the best in {100 * s['heuristic_first_hit_rate']:.0f} % of the cases, mean regret "
                  f"{100 * s['heuristic_first_mean_regret']:.1f} %, worst {100 * s['heuristic_first_max_regret']:.1f} %."
                  + (f" Ranking with the cost model took {s['median_rank_ms_per_kernel']:.0f} ms per unfused kernel at "
                     f"the median." if "median_rank_ms_per_kernel" in s else "")
                  + (f" Fusion is chosen per region: {s['cases_with_per_region_candidates']} cases had per-region "
                     f"candidates (one region fused, another split; up to {s['max_candidates']} candidates per case); "
                     f"the exhaustive best was a per-region mix in {s['cases_best_per_region']} of them and the "
                     f"autoscheduler picked one in {s['cases_picked_per_region']}."
                     if "cases_with_per_region_candidates" in s else ""),
                  ""]
        if s.get("gnn"):
            lines += _gnn_lines(s["gnn"], auto.get("gnn_cases", []))
        for budget, ln in (s.get("lanes") or {}).items():
            what = f"{ln['max_lanes']} lanes per kernel" + ("" if budget == "lanes" else
                                                            " and twice the nodes of the best unlaned schedule")
            lines += [f"With parallel factors (budget: {what}; {ln['programs']} programs x 3 densities): picked the "
                      f"exhaustive best in {ln['hits']} of {ln['cases']} cases ({100 * ln['hit_rate']:.0f} %); mean "
                      f"regret {100 * ln['mean_regret']:.1f} %, worst {100 * ln['max_regret']:.1f} % "
                      f"({ln['max_regret_cycles']} cycles); it ranked {ln['mean_ranked_by_auto']:.0f} schedules per "
                      f"case on average and simulated {ln['simulations_auto']} in all, exhaustive simulation "
                      f"{ln['simulations_exhaustive']}; the best schedule was laned in {ln['cases_best_laned']} cases "
                      f"(nested in {ln['cases_best_nested']}), the pick in {ln['cases_picked_laned']} (nested in "
                      f"{ln['cases_picked_nested']}); mean speedup of the pick over the best unlaned schedule "
                      f"{ln['mean_speedup_over_unlaned']:.2f}x (HBM2).", ""]
    lines.append(END)
    return "\n".join(lines)
