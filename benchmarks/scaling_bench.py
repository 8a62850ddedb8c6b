"""Cycles against nonzeros: SpMV and a GCN layer compiled by the compiler, simulated (float mode).

Two sweeps per kernel (DESIGN.md section 10, issue 9):

- **fixed nonzeros, n grows 10x**: the dense dimensions grow, the work should not. Target: cycles flat within
  20% (``flat``: max/min cycles <= 1.2).
- **fixed n, density grows**: cycles should follow the nonzeros.

Kernels (the compiler's default fusion and order; the locate pass on):

- SpMV ``x(i) = B(i,j) * c(j)``: B CSR (random, uniform), c dense. Cycles are about nnz + rows (CSR's row
  level is dense: every row is visited once, so ``n`` enters through the rows, which is why the fixed-nnz
  sweep keeps nnz well above n).
- GCN layer ``T(i,j) = A(i,k) * X(k,j); H(i,h) = relu(T(i,j) * W(j,h))`` (fuseflow/programs/gcn.ff, fused):
  A CSR, X (n x F) and W (F x F) dense. Its output has F entries per non-empty row of A, each costing F
  multiplies with W, so a random A at a fixed nonzero count does *more* work as n grows (more rows become
  non-empty). The fixed-nnz sweep therefore uses a mini-batch: ``batch`` target rows, each with ``deg``
  neighbours drawn from all n nodes (GraphSAGE-style sampling), so the work is fixed while the graph and
  the feature matrix grow 10x. CSR still visits all n rows of A: its scanners take about 2 cycles per empty
  row, and before the drop_empty pass every empty row also ran through the rest of the graph (about 7 cycles
  each: ``cycles_without_drop_empty``); the pass stops them right after the scanners, in parallel with the
  work. The same sweep is also run with A in DCSR (only non-empty rows stored), where n enters nowhere but
  the located X. The random variant is reported too (``gcn_random_fixed_nnz``),
  with the work it implies (``work``: nnz * F + non-empty rows * F * F multiplies).

``realistic``: SpMV, SpMM, the GCN layer and GraphSAGE's aggregation (the example programs' statements) at
n = 1000, A CSR at density 0.005 (about 5 neighbours per node), 16 features: cycles now, without the
drop_empty pass, and before issue 9 (no locate, depth 2), with the FIFO bits of the default depths.

Each point: n, nnz, non-empty rows, cycles, tokens, the busiest stream (id and tokens) and cycles / busiest
stream, the FIFO bits of the compiler's depths, the number of row drops (``row_drops``), at the channel depths the compiler gives; fixed-nnz points also ``cycles_deep_fifos`` (every channel
without a stated depth at depth 16), because at the default depth 2 a GCN row pays a pipeline latency of
about 20 cycles even when it is empty (issue 9 item 2, compile-time channel depths, removes that). For the smallest point of each fixed-nnz sweep the same program without the locate pass
(``--no-locate``) is simulated too (``cycles_without_locate``), to show what locate removes.

``two_layer`` (issue 45): the two-layer GCN and GraphSAGE of :mod:`fuseflow.models` (PyTorch, traced) with 8
input, hidden and output features on random graphs with 5 nonzeros in every row of the adjacency each model reads
(GraphSAGE: 5 random neighbours; GCN: 4 and the self loop of its normalised adjacency) while n grows 10x (500 to
5,000), at fuse none, regions and full: tokens and cycles per node (compiled engine, float mode, checked against
PyTorch). Target: tokens per node at the largest n within 1.2x of the smallest (``flat_tokens_per_node``).

Writes JSON (default benchmarks/results/scaling.json). Runtime: about ten minutes.
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

from fuseflow.compiler import compile_text  # noqa: E402
from fuseflow.compiler.passes.depths import fifo_bits  # noqa: E402
from fuseflow.sim import run  # noqa: E402

FLAT = 1.2
#: channel depth of the ``cycles_deep_fifos`` column: what compile-time channel depths should approach
DEEP = 16


def spmv_src(n):
    return f"tensor B({n},{n}) : csr\ntensor c({n}) : dense\nx(i) = B(i,j) * c(j)\n"


def gcn_src(n, f, a_format="csr"):
    return (f"tensor A({n},{n}) : {a_format}\ntensor X({n},{f}) : dense\ntensor W({f},{f}) : dense\n"
            f"fuse {{\n  T(i,j) = A(i,k) * X(k,j)\n  H(i,h) = relu(T(i,j) * W(j,h))\n}}\n")


def random_csr(n, nnz, seed):
    """An n x n matrix with exactly ``nnz`` distinct uniformly placed nonzeros (values in [0.5, 1.5))."""
    rng = np.random.default_rng(seed)
    flat = rng.choice(n * n, size=nnz, replace=False)
    vals = rng.uniform(0.5, 1.5, nnz)
    return sp.csr_array((vals, (flat // n, flat % n)), shape=(n, n))


def batch_csr(n, batch, deg, seed):
    """``batch`` random target rows of an n-node graph, each with ``deg`` distinct random neighbours."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(n, size=batch, replace=False)
    r = np.repeat(rows, deg)
    c = np.concatenate([rng.choice(n, size=deg, replace=False) for _ in range(batch)])
    return sp.csr_array((rng.uniform(0.5, 1.5, batch * deg), (r, c)), shape=(n, n))


def simulate(src, inputs, want, locate=True, deep=False, passes=None):
    """Compile and simulate; with ``deep`` also at channel depth DEEP (streams the graph gives no depth)."""
    prog = compile_text(src, locate=locate, passes=passes).program
    res = run(prog, inputs)
    for name, w in want.items():
        np.testing.assert_allclose(res.outputs[name], w, rtol=1e-9, atol=1e-9)
    kernels = res.stats["kernels"]
    busiest = max(((k["name"], sid, t) for k in kernels for sid, t in k["streams"].items()), key=lambda x: x[2])
    out = {
        "cycles": res.cycles, "tokens": res.stats["tokens"],
        "busiest_stream": f"{busiest[0]}:{busiest[1]}", "busiest_stream_tokens": busiest[2],
        "cycles_per_busiest_stream": round(res.cycles / busiest[2], 3),
        "locate_nodes": sum(1 for k in prog.kernels for nd in k.nodes.values() if nd.op == "locate"),
        "row_drops": sum(1 for k in prog.kernels for nd in k.nodes.values()
                         if nd.op == "crd_drop" and nd.params.get("arity")),
        "fifo_bits": fifo_bits(prog),
    }
    if deep:
        out["cycles_deep_fifos"] = run(prog, inputs, fifo_depth=DEEP).cycles
    return out


def spmv_point(n, B, rng, with_baseline=False, deep=False):
    c = rng.uniform(-1, 1, n)
    want = {"x": B @ c}
    out = {"n": n, "nnz": int(B.nnz), "density": round(B.nnz / n / n, 6),
           "nonempty_rows": int((np.diff(B.indptr) > 0).sum())}
    out.update(simulate(spmv_src(n), {"B": B, "c": c}, want, deep=deep))
    out["cycles_per_nnz_plus_rows"] = round(out["cycles"] / (B.nnz + n), 3)
    if with_baseline:
        out["cycles_without_locate"] = simulate(spmv_src(n), {"B": B, "c": c}, want, locate=False)["cycles"]
    return out


def gcn_point(n, f, A, rng, with_baseline=False, deep=False, a_format="csr"):
    X = rng.uniform(-1, 1, (n, f))
    W = rng.uniform(-1, 1, (f, f))
    want = {"H": np.maximum(A @ X @ W, 0)}
    rows = int((np.diff(A.indptr) > 0).sum())
    out = {"n": n, "features": f, "nnz": int(A.nnz), "density": round(A.nnz / n / n, 6), "nonempty_rows": rows,
           # multiplies the layer needs: A X (nnz * F) and (A X) W (non-empty rows * F * F)
           "work": int(A.nnz * f + rows * f * f)}
    out["format"] = a_format
    out.update(simulate(gcn_src(n, f, a_format), {"A": A, "X": X, "W": W}, want, deep=deep))
    out["cycles_per_work"] = round(out["cycles"] / out["work"], 3)
    if out["row_drops"]:
        out["cycles_without_drop_empty"] = simulate(gcn_src(n, f, a_format), {"A": A, "X": X, "W": W}, want,
                                                    passes={"drop_empty": False})["cycles"]
    if with_baseline:
        out["cycles_without_locate"] = simulate(gcn_src(n, f), {"A": A, "X": X, "W": W}, want, locate=False)["cycles"]
    return out


def realistic(n=1000, density=0.005, f=16, seed=3):
    """SpMV, SpMM, GCN and GraphSAGE (the example programs' statements) at n nodes, A CSR at a graph-like
    density (about 5 neighbours per node), F features: cycles now, without the drop_empty pass, and in the
    configuration before issue 9 (no locate, every channel at depth 2, no drop_empty); FIFO bits of the
    default depths."""
    rng = np.random.default_rng(seed)
    A = random_csr(n, int(density * n * n), seed=seed)
    c, X = rng.uniform(-1, 1, n), rng.uniform(-1, 1, (n, f))
    W = rng.uniform(-1, 1, (f, f))
    head = f"tensor A({n},{n}) : csr\ntensor X({n},{f}) : dense\ntensor W({f},{f}) : dense\n"
    cases = [
        ("spmv", f"tensor A({n},{n}) : csr\ntensor c({n}) : dense\nx(i) = A(i,j) * c(j)\n", {"A": A, "c": c},
         {"x": A @ c}),
        ("spmm", head + "T(i,j) = A(i,k) * X(k,j)\norder i,k,j\n", {"A": A, "X": X}, {"T": A @ X}),
        ("gcn", gcn_src(n, f), {"A": A, "X": X, "W": W}, {"H": np.maximum(A @ X @ W, 0)}),
        ("graphsage", head + "T(i,j) = A(i,l) * X(l,m) * W(m,j)\norder i,l,m,j\n", {"A": A, "X": X, "W": W},
         {"T": A @ X @ W}),
    ]
    rows = []
    for name, src, ins, want in cases:
        row = {"kernel": name, "n": n, "features": f, "nnz": int(A.nnz),
               "nonempty_rows": int((np.diff(A.indptr) > 0).sum())}
        now = simulate(src, ins, want)
        row.update({k: now[k] for k in ("cycles", "busiest_stream_tokens", "cycles_per_busiest_stream",
                                        "fifo_bits", "row_drops", "locate_nodes")})
        row["cycles_without_drop_empty"] = (simulate(src, ins, want, passes={"drop_empty": False})["cycles"]
                                            if now["row_drops"] else now["cycles"])
        before = simulate(src, ins, want, locate=False, passes={"drop_empty": False, "fifo_depth": 2})
        row["before_issue9"] = {"cycles": before["cycles"], "fifo_bits": before["fifo_bits"],
                                "config": "no locate, every channel at depth 2 (deadlock floors kept), no drop_empty"}
        row["speedup_over_before_issue9"] = round(before["cycles"] / now["cycles"], 2)
        rows.append(row)
        print(f"realistic {name}: {row['cycles']} cycles (without drop_empty {row['cycles_without_drop_empty']}, "
              f"before issue 9 {before['cycles']}), fifo bits {row['fifo_bits']}", file=sys.stderr)
    return rows


TWO_LAYER_NODES = (500, 1000, 2000, 5000)
TWO_LAYER_NNZ_ROW = 5
TWO_LAYER_FEATURES = 8


def two_layer_graph(model, n, seed):
    """A graph whose adjacency as ``model`` reads it has TWO_LAYER_NNZ_ROW nonzeros per row (random distinct
    neighbours, no self loops in the plain adjacency; the GCN's normalised one adds the self loop)."""
    from fuseflow.models import data
    deg = TWO_LAYER_NNZ_ROW - (1 if model == "gcn" else 0)
    rng = np.random.default_rng(seed)
    cols = np.concatenate([(i + 1 + rng.choice(n - 1, deg, replace=False)) % n for i in range(n)])
    a = sp.csr_matrix((np.ones(n * deg), (np.repeat(np.arange(n), deg), cols)), shape=(n, n))
    return data.graph_from_arrays(a, data.random_features(n, TWO_LAYER_FEATURES, seed))


def two_layer_point(model, fuse, n, seed=0):
    import warnings

    import fuseflow
    from fuseflow.models import example
    warnings.filterwarnings("ignore")
    g = two_layer_graph(model, n, seed)
    net, inputs = example(model, graph=g, hidden=TWO_LAYER_FEATURES, classes=TWO_LAYER_FEATURES)
    m = fuseflow.compile(net, inputs, fuse=fuse, mode="float")
    chk = m.check(engine="auto")
    if not chk.ok:
        raise AssertionError(f"{model} {fuse} n={n}: {chk}")
    sim = chk.simulation
    s = sim.stats
    return {"n": n, "nnz_per_row": TWO_LAYER_NNZ_ROW, "features": TWO_LAYER_FEATURES,
            "kernels": len(m.program.kernels), "cycles": sim.cycles, "tokens": s["tokens"],
            "cycles_per_node": round(sim.cycles / n, 2), "tokens_per_node": round(s["tokens"] / n, 2),
            "intermediate_formats": {t.name: list(t.levels) for t in m.program.tensors.values()
                                     if t.role == "intermediate"}}


def two_layer():
    """Two-layer GCN and GraphSAGE at a fixed number of nonzeros per row while n grows 10x (none, regions,
    full): tokens and cycles per node."""
    out = []
    for model in ("gcn", "graphsage"):
        for fuse in ("none", "regions", "full"):
            pts = [two_layer_point(model, fuse, n) for n in TWO_LAYER_NODES]
            per = [p["tokens_per_node"] for p in pts]
            cyc = [p["cycles_per_node"] for p in pts]
            row = {"model": model, "fuse": fuse, "points": pts,
                   "tokens_per_node_last_over_first": round(per[-1] / per[0], 3),
                   "cycles_per_node_last_over_first": round(cyc[-1] / cyc[0], 3),
                   "flat_tokens_per_node": per[-1] / per[0] <= FLAT}
            out.append(row)
            print(f"two-layer {model} {fuse}: tokens/node {per}, cycles/node {cyc}", file=sys.stderr)
    return out


def sweep(name, points, fixed):
    cyc = [p["cycles"] for p in points]
    s = {"name": name, "points": points}
    if fixed:
        s["cycles_max_over_min"] = round(max(cyc) / min(cyc), 3)
        s["flat"] = max(cyc) / min(cyc) <= FLAT
        if all("cycles_deep_fifos" in p for p in points):
            deep = [p["cycles_deep_fifos"] for p in points]
            s["deep_fifos_max_over_min"] = round(max(deep) / min(deep), 3)
            s["flat_deep_fifos"] = max(deep) / min(deep) <= FLAT
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "scaling.json"))
    ap.add_argument("--only", choices=("sweeps", "realistic", "two_layer"),
                    help="run one part (the others are left out; two_layer keeps the other parts of an existing "
                         "output file)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    sweeps = []
    if args.only == "two_layer":
        old = {}
        if os.path.exists(args.output):
            with open(args.output) as fh:
                old = json.load(fh)
        layers = two_layer()
        return _write(args.output, t0, old.get("sweeps", []), old.get("realistic"), layers,
                      wall=old.get("wall_seconds"))
    real = realistic() if args.only != "sweeps" else None
    if args.only == "realistic":
        return _write(args.output, t0, sweeps, real)

    # 100,000 nonzeros: 10 per row at the largest n (CSR visits every row: cycles ~ nnz + 2 rows)
    nnz = 100_000
    pts = [spmv_point(n, random_csr(n, nnz, seed=n), rng, with_baseline=(n == 1000), deep=True)
           for n in (1000, 2000, 5000, 10_000)]
    sweeps.append(sweep("spmv_fixed_nnz", pts, True))
    print(f"spmv fixed nnz: {[p['cycles'] for p in pts]}", file=sys.stderr)

    n = 2000
    pts = [spmv_point(n, random_csr(n, int(d * n * n), seed=7), rng) for d in (0.0025, 0.005, 0.01, 0.02)]
    sweeps.append(sweep("spmv_fixed_n", pts, False))
    print(f"spmv fixed n: {[p['cycles'] for p in pts]}", file=sys.stderr)

    f, batch, deg = 16, 128, 16
    pts = [gcn_point(n, f, batch_csr(n, batch, deg, seed=n), rng, with_baseline=(n == 500), deep=True)
           for n in (500, 1000, 2000, 5000)]
    sweeps.append(sweep("gcn_batch_fixed_nnz", pts, True))
    print(f"gcn batch fixed nnz: {[p['cycles'] for p in pts]}", file=sys.stderr)
    # the same with A in DCSR: only the non-empty rows are stored, so nothing visits the n rows
    pts = [gcn_point(n, f, batch_csr(n, batch, deg, seed=n), rng, deep=True, a_format="dcsr")
           for n in (500, 1000, 2000, 5000)]
    sweeps.append(sweep("gcn_batch_dcsr_fixed_nnz", pts, True))
    print(f"gcn batch (DCSR) fixed nnz: {[p['cycles'] for p in pts]}", file=sys.stderr)

    f = 8
    pts = [gcn_point(n, f, random_csr(n, 2048, seed=n), rng, deep=True) for n in (500, 1000, 2000, 5000)]
    sweeps.append(sweep("gcn_random_fixed_nnz", pts, True))
    print(f"gcn random fixed nnz: {[p['cycles'] for p in pts]}", file=sys.stderr)

    n, f = 1000, 8
    pts = [gcn_point(n, f, random_csr(n, int(d * n * n), seed=11), rng) for d in (0.005, 0.01, 0.02)]
    sweeps.append(sweep("gcn_fixed_n", pts, False))
    print(f"gcn fixed n: {[p['cycles'] for p in pts]}", file=sys.stderr)

    return _write(args.output, t0, sweeps, real, two_layer())


def _write(output, t0, sweeps, real, layers=None, wall=None):
    """``wall``: the other parts' wall seconds, kept from an earlier run (``--only two_layer``)."""
    took = round(time.perf_counter() - t0, 1)
    doc = {
        "benchmark": "scaling", "python": platform.python_version(), "machine": platform.machine(),
        "flat_if_max_over_min_at_most": FLAT, "mode": "float",
        "wall_seconds": took if wall is None else wall,
        **({"two_layer_wall_seconds": took} if wall is not None else {}),
        "sweeps": sweeps,
        "realistic": real,
        "two_layer": layers,
    }
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    tmp = output + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    os.replace(tmp, output)
    for s in sweeps:
        flat = ""
        if "flat" in s:
            flat = f"  max/min {s['cycles_max_over_min']} ({'flat' if s['flat'] else 'NOT flat'})"
            if "flat_deep_fifos" in s:
                flat += (f"; depth {DEEP}: {[p['cycles_deep_fifos'] for p in s['points']]} max/min "
                         f"{s['deep_fifos_max_over_min']} ({'flat' if s['flat_deep_fifos'] else 'NOT flat'})")
        print(f"{s['name']}: cycles {[p['cycles'] for p in s['points']]}{flat}")
    for r in layers or []:
        print(f"two-layer {r['model']} {r['fuse']}: tokens/node {[p['tokens_per_node'] for p in r['points']]} "
              f"(last/first {r['tokens_per_node_last_over_first']}, "
              f"{'flat' if r['flat_tokens_per_node'] else 'NOT flat'})")
    print(f"wrote {output} ({doc['wall_seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
