"""The design-space experiments: each mirrors a figure of the FuseFlow paper (Section 8) at a size that runs here.

An :class:`Experiment` lists its design points as sweep tasks (:func:`fuseflow.dse.points.run_point`),
summarises the results into JSON, and draws one PNG. The paper's claim it is set against is part of the
experiment, so the report page renders both.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Callable

from ..reports.sweep import Task
from .points import run_model_point, run_point

HERE = os.path.dirname(os.path.abspath(__file__))
FUSES = ("none", "regions", "full")


def example_path(name: str) -> str:
    """The file of an example ``.ff`` program (shipped in :mod:`fuseflow.programs`)."""
    from .. import programs
    return programs.path(name)


def example_names() -> list:
    """Names of the example programs."""
    from .. import programs
    return programs.names()


def _example(name: str) -> str:
    with open(example_path(name)) as f:
        return f.read()


def gcn_text(n: int, feats: int = 16, hidden: int = 8, out: int = 4, layers: int = 2) -> str:
    """A GCN of ``layers`` layers on ``n`` nodes (one fuse region per layer, as fuseflow/programs/gcn2.ff)."""
    dims = [feats] + [hidden] * (layers - 1) + [out]
    lines = ["program gcn", f"tensor A({n}, {n}) : csr", f"tensor X({n}, {feats}) : dense"]
    lines += [f"tensor W{l + 1}({dims[l]}, {dims[l + 1]}) : dense" for l in range(layers)]
    src = "X"
    for l in range(layers):
        act = "relu(" if l < layers - 1 else "("
        lines += ["fuse {", f"  T{l + 1}(i,j) = A(i,k) * {src}(k,j)",
                  f"  H{l + 1}(i,h) = {act}T{l + 1}(i,j) * W{l + 1}(j,h))", "}"]
        src = f"H{l + 1}"
    return "\n".join(lines) + "\n"


def decoder_text(seq: int = 8, dim: int = 4, heads: int = 2, mlp: int | None = None) -> str:
    """The BigBird decoder block of fuseflow/programs/decoder.ff at another size: sequence ``seq`` (a multiple
    of the mask's block of 4), model dimension ``dim``, ``heads`` heads of ``dim // heads``, MLP ``2 * dim``."""
    import math
    import re
    head, mlp = dim // heads, mlp or 2 * dim
    shapes = {"X": (seq, dim), "G1": (dim,), "B1": (dim,), "WQ": (heads, dim, head), "WK": (heads, dim, head),
              "WV": (heads, dim, head), "WO": (heads, head, dim), "G2": (dim,), "B2": (dim,), "W1": (dim, mlp),
              "c1": (mlp,), "W2": (mlp, dim), "c2": (dim,)}
    text = _example("decoder")
    for name, shape in shapes.items():
        text = re.sub(rf"^tensor {name}\([^)]*\)", f"tensor {name}({', '.join(map(str, shape))})", text,
                      flags=re.M)
    return text.replace("0.3535533905932738", repr(1 / math.sqrt(head)))


def nested_configs(n: int = 34) -> list:
    """Every (operand layouts, dataflow order) of the nested product T = A X W (A n x n sparse, X n x 8,
    W 8 x 4 dense): each layout choice admits some orders; together they cover the orders of Fig. 18."""
    from ..compiler import compile_program
    from ..compiler.frontend import EinsumProgram
    out = []
    for fa, fx, fw in itertools.product(("csr", "csc"), ("dd", "dd:1,0"), ("dd", "dd:1,0")):
        text = (f"program nested\ntensor A({n}, {n}) : {fa}\ntensor X({n}, 8) : {fx}\ntensor W(8, 4) : {fw}\n"
                "T(i,j) = A(i,l) * X(l,m) * W(m,j)\n")
        plan = compile_program(EinsumProgram.parse(text), fuse="full").plans[-1]
        orders, _ = plan.orders(100)
        for o in orders:
            out.append({"key": f"A={fa},X={fx},W={fw},order={''.join(o)}", "text": text, "order": ",".join(o),
                        "layout": f"A {fa}, X {fx}, W {fw}"})
    return out


@dataclass
class Experiment:
    name: str
    figure: str
    title: str
    claim: str                                   # the paper's result, as the paper states it
    tasks: Callable[..., list]                  # keyword arguments: the ``options`` given on the command line
    summarize: Callable[[dict], dict]
    plot: Callable[[dict, object], None]
    options: tuple = ()                          # command-line options the experiment takes (--dataset, --size)
    in_all: bool = True                          # part of ``run all`` (False: its own target, ``make paper``)


# --- Fig. 12: fusion granularity per model -------------------------------------------------------------

def _models():
    return {"GCN (2 layers, 64 nodes)": (gcn_text(64), {"graph": {"family": "uniform", "n": 64, "density": 0.1}}),
            "GraphSAGE (2 layers, 16 nodes)": (_example("graphsage2"), {"density": 0.3}),
            "SAE (3 layers, 50 % pruned)": (_example("autoencoder"), {"density": 0.5}),
            # fuseflow/programs/decoder.ff at sequence 8, model dimension 4; its barriers (the paper's reshapes)
            # make full fusion the paper's: for one decoder block the same kernels as partial
            "GPT-3 BigBird decoder (seq 8, dim 4)": (decoder_text(8, 4), {"density": 1.0})}


def _fusion_tasks():
    tasks = []
    for model, (text, data) in _models().items():
        for fuse in FUSES:
            tasks.append(Task(f"{model}|{fuse}", run_point, (text, fuse), {"data": {**data, "seed": 3}}))
    return tasks


def _by_model(results):
    rows = {}
    for key, r in results.items():
        model, fuse = key.split("|")
        rows.setdefault(model, {})[fuse] = r
    return rows


def _best_hbm2(rows) -> dict:
    """{model: the fuse of its row with the fewest HBM2 cycles} (the first such row on a tie)."""
    best = {}
    for row in rows:
        b = best.get(row["model"])
        if b is None or row["cycles_hbm2"] < b["cycles_hbm2"]:
            best[row["model"]] = row
    return {m: b["fuse"] for m, b in best.items()}


def _fusion_summary(results):
    rows = []
    for model, by in _by_model(results).items():
        base = by["none"]
        for fuse in FUSES:
            r = by[fuse]
            rows.append({"model": model, "fuse": fuse, "kernels": r["kernels"],
                         "cycles_onchip": r["cycles"]["onchip"], "cycles_hbm2": r["cycles"]["hbm2"],
                         "speedup_onchip": base["cycles"]["onchip"] / r["cycles"]["onchip"],
                         "speedup_hbm2": base["cycles"]["hbm2"] / r["cycles"]["hbm2"]})
    return {"rows": rows, "best_hbm2": _best_hbm2(rows)}


def _bars(ax, rows, group, series, value, ylabel):
    groups = list(dict.fromkeys(r[group] for r in rows))
    width = 0.8 / len(series)
    for s_i, s in enumerate(series):
        ys = [next((r[value] for r in rows if r[group] == g and r["fuse"] == s), 0) for g in groups]
        ax.bar([g_i + s_i * width for g_i in range(len(groups))], ys, width, label=s)
    ax.set_xticks([g_i + width * (len(series) - 1) / 2 for g_i in range(len(groups))])
    ax.set_xticklabels([g.split(" (")[0] for g in groups])
    ax.set_ylabel(ylabel)
    ax.legend(title="fusion")


def _fusion_plot(summary, ax):
    _bars(ax, summary["rows"], "model", FUSES, "speedup_hbm2", "speedup over unfused (HBM2)")
    ax.axhline(1.0, color="grey", lw=0.8)


# --- Fig. 14: FLOPs and bytes normalised to unfused, operational intensity --------------------------------

def _flops_summary(results):
    rows = []
    for model, by in _by_model(results).items():
        base = by["none"]
        for fuse in FUSES:
            r = by[fuse]
            rows.append({"model": model, "fuse": fuse, "flops": r["alu_ops"], "bytes": r["bytes"],
                         "flops_norm": r["alu_ops"] / max(1, base["alu_ops"]),
                         "bytes_norm": r["bytes"] / max(1, base["bytes"]),
                         "intensity": r["alu_ops"] / max(1, r["bytes"])})
    return {"rows": rows}


def _flops_plot(summary, ax):
    _bars(ax, summary["rows"], "model", FUSES, "bytes_norm", "bytes moved / unfused")
    ax2 = ax.twinx()
    groups = list(dict.fromkeys(r["model"] for r in summary["rows"]))
    for s_i, s in enumerate(FUSES):
        ys = [next(r["flops_norm"] for r in summary["rows"] if r["model"] == g and r["fuse"] == s) for g in groups]
        ax2.plot([g_i + s_i * 0.8 / 3 for g_i in range(len(groups))], ys, "kD", ms=5)
    ax2.set_ylabel("FLOPs / unfused (diamonds)")


# --- Fig. 15: speedup vs adjacency sparsity on three graph families --------------------------------------

SPARSITY_N = 48
SPARSITY_DENSITIES = (0.05, 0.1, 0.2, 0.35, 0.5)
FAMILIES = ("uniform", "powerlaw", "sbm")


def _sparsity_tasks():
    text = gcn_text(SPARSITY_N, layers=2)
    tasks = []
    for fam, d, fuse in itertools.product(FAMILIES, SPARSITY_DENSITIES, ("none", "regions")):
        data = {"graph": {"family": fam, "n": SPARSITY_N, "density": d, "seed": 1}, "seed": 1}
        tasks.append(Task(f"{fam}|{d}|{fuse}", run_point, (text, fuse), {"data": data}))
    return tasks


def _sparsity_summary(results):
    rows = []
    for fam, d in itertools.product(FAMILIES, SPARSITY_DENSITIES):
        u, f = results[f"{fam}|{d}|none"], results[f"{fam}|{d}|regions"]
        rows.append({"family": fam, "density": d, "sparsity": 1 - d,
                     "speedup_onchip": u["cycles"]["onchip"] / f["cycles"]["onchip"],
                     "speedup_hbm2": u["cycles"]["hbm2"] / f["cycles"]["hbm2"],
                     "cycles_unfused_hbm2": u["cycles"]["hbm2"], "cycles_fused_hbm2": f["cycles"]["hbm2"]})
    return {"rows": rows, "nodes": SPARSITY_N}


def _sparsity_plot(summary, ax):
    for fam in FAMILIES:
        rs = [r for r in summary["rows"] if r["family"] == fam]
        ax.plot([r["sparsity"] for r in rs], [r["speedup_hbm2"] for r in rs], "o-", label=fam)
    ax.set_xlabel("adjacency sparsity")
    ax.set_ylabel("partial fusion speedup over unfused (HBM2)")
    ax.legend(title="graph")


# --- Fig. 16: parallel factor and nested factors (BigBird attention scores) -------------------------------

PARALLEL_N, PARALLEL_D = 64, 8
PARALLEL_FACTORS = (1, 2, 4, 8, 16, 32, 64)
NESTED_FACTORS = (1, 2, 4)


def bigbird_text(n: int = PARALLEL_N, d: int = PARALLEL_D) -> str:
    """BigBird attention scores ``S = mask[bigbird] * Q K^T`` (dense Q, K; the mask generates the kept entries)."""
    return (f"tensor Q({n}, {d}) : dense\ntensor K({n}, {d}) : dense\n"
            f"S(i,j) = mask[bigbird:block=4,window=3,global=1,random=1,seed=0](i,j) * sum[d](Q(i,d) * K(j,d))\n")


def _parallel_tasks():
    text = bigbird_text()
    data = {"seed": 1}
    tasks = [Task(f"i={n}", run_point, (text, "regions"), {"data": data, "parallel": {"i": n}})
             for n in PARALLEL_FACTORS]
    tasks += [Task(f"i={a},j={b}", run_point, (text, "regions"), {"data": data, "parallel": {"i": a, "j": b}})
              for a, b in itertools.product(NESTED_FACTORS, NESTED_FACTORS) if a > 1 and b > 1]
    return tasks


def _parallel_summary(results):
    base = results["i=1"]["cycles"]["onchip"]
    rows = []
    for key, r in results.items():
        lanes = 1
        for part in key.split(","):
            lanes *= int(part.split("=")[1])
        rows.append({"schedule": key, "lanes": lanes, "nested": "," in key, "cycles_onchip": r["cycles"]["onchip"],
                     "speedup": base / r["cycles"]["onchip"]})
    rows.sort(key=lambda r: (r["nested"], r["lanes"], r["schedule"]))
    return {"rows": rows, "n": PARALLEL_N, "d": PARALLEL_D, "cycles_1": base,
            "best_single": max((r for r in rows if not r["nested"]), key=lambda r: r["speedup"])["schedule"],
            "nested_4x4": next((r["speedup"] for r in rows if r["schedule"] == "i=4,j=4"), None)}


def _parallel_plot(summary, ax):
    single = [r for r in summary["rows"] if not r["nested"]]
    nested = [r for r in summary["rows"] if r["nested"]]
    ax.plot([r["lanes"] for r in single], [r["speedup"] for r in single], "o-", label="i only")
    ax.plot([r["lanes"] for r in nested], [r["speedup"] for r in nested], "s", label="i x j nested")
    for r in nested:
        ax.annotate(r["schedule"], (r["lanes"], r["speedup"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
    top = max(r["lanes"] for r in summary["rows"])
    ax.plot([1, top], [1, top], ":", color="grey", label="linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("lanes (product of the factors)")
    ax.set_ylabel("speedup over one lane (simulated cycles)")
    ax.legend()


# --- Fig. 17: block-sparse BigBird attention, blocked vs unstructured per block size ----------------------

BLOCKS_N, BLOCKS_D = 64, 16
BLOCK_SIZES = (1, 4, 8, 16)                       # 1: the unstructured (unblocked) program
#: the mask's block granularity is the largest B, so every B sees the same kept entries
BLOCKS_MASK = f"bigbird:block={max(BLOCK_SIZES)},window=3,global=1,random=1,seed=0"


def blocked_attention_text(b: int, n: int = BLOCKS_N, d: int = BLOCKS_D) -> str:
    """BigBird attention ``O = softmax[j](M * Q KT) V`` over a mask tensor M: unstructured (``b`` = 1: M ``csr``,
    Q, KT, V dense) or blocked (every tensor ``bcsr:b``; softmax across the blocks of a row)."""
    fm, fd = ("csr", "dense") if b == 1 else (f"bcsr:{b}", f"bcsr:{b}")
    return (f"tensor M({n}, {n}) : {fm}\ntensor Q({n}, {d}) : {fd}\ntensor KT({d}, {n}) : {fd}\n"
            f"tensor V({n}, {d}) : {fd}\nS(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\n"
            f"P(i,j) = softmax[j](S(i,j))\nO(i,e) = sum[j](P(i,j) * V(j,e))\n")


def _blocks_tasks():
    data = {"density": 1.0, "seed": 1, "mask": {"tensor": "M", "spec": BLOCKS_MASK}}
    return [Task(f"B={b}", run_point, (blocked_attention_text(b), "regions"), {"data": data})
            for b in BLOCK_SIZES]


def _blocks_summary(results):
    base = results["B=1"]["cycles"]
    rows = []
    for b in BLOCK_SIZES:
        r = results[f"B={b}"]["cycles"]
        rows.append({"B": b, "program": "unstructured" if b == 1 else "blocked", "cycles_onchip": r["onchip"],
                     "cycles_hbm2": r["hbm2"], "speedup_onchip": base["onchip"] / r["onchip"],
                     "speedup_hbm2": base["hbm2"] / r["hbm2"],
                     "speedup_onchip_per_b2": base["onchip"] / r["onchip"] / b ** 2})
    return {"rows": rows, "n": BLOCKS_N, "d": BLOCKS_D, "mask": BLOCKS_MASK}


def _blocks_plot(summary, ax):
    rows = summary["rows"]
    bs = [r["B"] for r in rows]
    ax.plot(bs, [r["speedup_onchip"] for r in rows], "o-", label="on chip")
    ax.plot(bs, [r["speedup_hbm2"] for r in rows], "s-", label="HBM2")
    ax.plot(bs, bs, ":", color="grey", label="proportional to B")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(bs)
    ax.set_xticklabels([str(b) for b in bs])
    ax.set_xlabel("block size B (1 = unstructured)")
    ax.set_ylabel("speedup over unstructured (simulated cycles)")
    ax.legend()


# --- Fig. 18: dataflow orders of the nested matrix product on karate club ---------------------------------

def _orders_tasks():
    return [Task(c["key"], run_point, (c["text"], "full", c["order"]),
                 {"data": {"graph": {"family": "karate"}, "seed": 2}}) for c in nested_configs(34)]


def _orders_summary(results):
    rows = [{"config": k, "layout": k.rsplit(",order=", 1)[0], "order": k.rsplit("order=", 1)[1],
             "cycles_onchip": r["cycles"]["onchip"], "cycles_hbm2": r["cycles"]["hbm2"],
             "flops": r["alu_ops"], "bytes": r["bytes"]} for k, r in results.items()]
    rows.sort(key=lambda r: r["cycles_hbm2"])
    lo, hi = rows[0]["cycles_hbm2"], rows[-1]["cycles_hbm2"]
    return {"rows": rows, "configs": len(rows), "best": rows[0]["config"], "worst": rows[-1]["config"],
            "max_over_min_hbm2": hi / lo,
            "max_over_min_onchip": max(r["cycles_onchip"] for r in rows) / min(r["cycles_onchip"] for r in rows)}


def _orders_plot(summary, ax):
    rows = summary["rows"]
    ax.bar(range(len(rows)), [r["cycles_hbm2"] for r in rows])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([r["order"] for r in rows], rotation=90, fontsize=7)
    ax.set_ylabel("cycles (HBM2)")
    ax.set_xlabel("dataflow order (operand layouts in the JSON)")


# --- Fig. 12 at the paper's sizes: the PyTorch models on a real graph --------------------------------------

#: GCN on Cora in the paper's artifact (Figure 12): cycles per fusion granularity
PAPER_GCN_CORA_CYCLES = {"none": 48_998_261, "regions": 29_997_611, "full": 166_361_105}
#: the paper's Figure 12 speedups over unfused (cycles unfused / cycles), where the paper states them: GCN on
#: Cora from the artifact's cycles; the autoencoder and GPT-3 from Section 8's text (GraphSAGE on Cora: only
#: "partial is best, full degrades")
PAPER_FIG12_SPEEDUP = {
    "gcn": {f: PAPER_GCN_CORA_CYCLES["none"] / c for f, c in PAPER_GCN_CORA_CYCLES.items()},
    "autoencoder": {"none": 1.0, "regions": 1.01, "full": 1.94},
    "attention": {"none": 1.0, "full": 2.7}}
#: the fusion granularities each model has (attention: no partial grouping inside one attention module)
FIG12_FUSES = {"gcn": FUSES, "graphsage": FUSES, "autoencoder": FUSES, "attention": ("none", "full")}


def _fig12_tasks(dataset: str = "cora", size: str = "paper", models: str | None = None):
    from .. import datasets
    from ..errors import FuseFlowError
    chosen = list(FIG12_FUSES) if not models else [m.strip() for m in models.split(",") if m.strip()]
    for m in chosen:
        if m not in FIG12_FUSES:
            raise FuseFlowError("--models", f"unknown model {m!r} (known: {', '.join(FIG12_FUSES)})")
    datasets.load(dataset)                       # a missing or malformed dataset fails before any work
    return [Task(f"{model}|{fuse}", run_model_point, (model, fuse), {"dataset": dataset, "size": size})
            for model in chosen for fuse in FIG12_FUSES[model]]


def _fig12_summary(results):
    rows = []
    for model, by in _by_model(results).items():
        base = by["none"]
        for fuse, r in by.items():
            paper = PAPER_FIG12_SPEEDUP.get(model, {}).get(fuse)
            rows.append({"model": model, "fuse": fuse, "size": r["size"], "dataset": r["dataset"] or "",
                         "kernels": r["kernels"], "check_ok": r["check_ok"],
                         "cycles_onchip": r["cycles"]["onchip"], "cycles_hbm2": r["cycles"]["hbm2"],
                         "alu_ops": r["alu_ops"], "bytes": r["bytes"],
                         "speedup_onchip": base["cycles"]["onchip"] / r["cycles"]["onchip"],
                         "speedup_hbm2": base["cycles"]["hbm2"] / r["cycles"]["hbm2"],
                         "paper_speedup": paper if paper is not None else "",
                         "sim_s": r["sim_s"]})
    paper_best = {m: max(sp, key=sp.get) for m, sp in PAPER_FIG12_SPEEDUP.items()}
    paper_best["graphsage"] = "regions"
    return {"rows": rows, "best_hbm2": _best_hbm2(rows), "paper_best": paper_best}


def _fig12_plot(summary, ax):
    rows = summary["rows"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    width = 0.8 / len(FUSES)
    for k, fuse in enumerate(FUSES):
        xs = [i + (k - 1) * width for i, m in enumerate(models)]
        ys = [next((r["speedup_hbm2"] for r in rows if r["model"] == m and r["fuse"] == fuse), 0.0) for m in models]
        ax.bar(xs, ys, width, label=f"ours, {fuse}")
        paper = [PAPER_FIG12_SPEEDUP.get(m, {}).get(fuse) for m in models]
        px = [x for x, p in zip(xs, paper) if p is not None]
        ax.scatter(px, [p for p in paper if p is not None], marker="_", s=300, color="black", zorder=3)
    ax.scatter([], [], marker="_", s=300, color="black", label="paper")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xticks(range(len(models)))
    ax.set_xticklabels(models)
    ax.set_ylabel("speedup over unfused (HBM2)")
    ax.legend(fontsize=7)


EXPERIMENTS = {e.name: e for e in (
    Experiment("fusion", "Fig. 12", "Fusion granularity per model",
               "GCN and GraphSAGE are fastest with partial fusion and slower with full fusion; the sparse "
               "autoencoder gains ~1.94x with full fusion and ~1.01x with partial; GPT-3 with BigBird gains "
               "~2.7x with full fusion.", _fusion_tasks, _fusion_summary, _fusion_plot),
    Experiment("flops", "Fig. 14", "FLOPs and bytes normalised to unfused, operational intensity",
               "GCN: partially fusing the first layer significantly reduces bytes transferred compared to "
               "unfused, improving operational intensity; full fusion has higher operational intensity but its "
               "recomputation increases both FLOPs and memory.",
               _fusion_tasks, _flops_summary, _flops_plot),
    Experiment("sparsity", "Fig. 15", "Speedup vs adjacency sparsity on three graph families",
               "2-layer GCN (500 nodes, 128 features), adjacency sparsity 50-95 %: partial fusion's speedup over "
               "unfused grows with sparsity; structured patterns (power-law, block diagonal) outperform uniform "
               "random; full fusion incurs slowdowns.",
               _sparsity_tasks, _sparsity_summary, _sparsity_plot),
    Experiment("parallel", "Fig. 16", "Parallel factor and nested factors (BigBird attention scores)",
               "Near-linear scaling from factor 1 to 64 on BigBird attention; ~15.9x for factor 4 on two nested "
               "indices.", _parallel_tasks, _parallel_summary, _parallel_plot),
    Experiment("blocks", "Fig. 17", "Block-sparse BigBird attention: blocked vs unstructured per block size",
               "Sparsity blocking on the BigBird attention module: the speedup over unstructured sparse execution "
               "is proportional to the block size.", _blocks_tasks, _blocks_summary, _blocks_plot),
    Experiment("fig12", "Fig. 12", "Fusion granularity at the paper's sizes (Cora, 224 x 224, sequence 1024)",
               "GCN on Cora: partial 1.63x, full 0.29x of unfused (the artifact's 48,998,261 / 29,997,611 / "
               "166,361,105 cycles); GraphSAGE: partial best, full degrades; the sparse autoencoder (224 x 224) "
               "1.94x with full fusion and 1.01x with partial; GPT-3 with BigBird (sequence 1024) ~2.7x with "
               "full fusion.", _fig12_tasks, _fig12_summary, _fig12_plot,
               options=("dataset", "size", "models"), in_all=False),
    Experiment("orders", "Fig. 18", "All valid dataflow orders of the nested matrix product (karate club)",
               "Dataflow order changes run time by up to ~29x.", _orders_tasks, _orders_summary, _orders_plot),
)}

#: figures of Section 8 that wait for other issues
PENDING = {}
