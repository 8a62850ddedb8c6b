"""GCN on Cora at the paper's configuration: unfused, partial and full fusion, simulated and checked.

The FuseFlow paper's Figure 12 evaluates a two-layer GCN (hidden 16) on Cora (2,708 nodes, 10,556 adjacency
entries, 1,433 sparse features). This runs the same model from the bundled dataset (``fuseflow.datasets``),
compiles it at each fusion granularity, simulates it (float mode, on-chip memory; the compiled engine unless
``--engine python``), checks the outputs against PyTorch in float64, and records cycles, tokens, ALU ops,
bytes, compile and simulation seconds beside the cycles of the paper's artifact. Then it trains the same GCN
in PyTorch on Cora's split (Kipf and Welling's recipe, a few CPU seconds) and scores the test nodes with
PyTorch's float32 outputs and with the simulator's fixed-point outputs at each fusion granularity (the cost of
32/16 fixed point on a real task). Writes JSON (default benchmarks/results/cora.json).
"""

import argparse
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import commit  # noqa: E402

CONFIGS = {"unfused": "none", "partial": "regions", "full": "full"}


def measure(config, engine, hidden=16, nodes=None):
    import fuseflow
    from fuseflow import datasets
    from fuseflow.models import gcn_for
    graph = datasets.load("cora")
    if nodes:
        graph = graph.subgraph(graph.bfs(nodes))
    model, inputs = gcn_for(graph, hidden=hidden)
    t0 = time.perf_counter()
    m = fuseflow.compile(model, inputs, fuse=CONFIGS[config], mode="float")
    compile_s = time.perf_counter() - t0
    check = m.check(engine=engine)
    s = check.simulation.stats
    return {"config": config, "fuse": CONFIGS[config], "engine": s["engine"], "nodes": graph.nodes,
            "kernels": len(m.program.kernels), "cycles": check.simulation.cycles, "tokens": s["tokens"],
            "alu_ops": s["alu_ops"], "mem_read_bytes": s["mem_read_bytes"], "mem_write_bytes": s["mem_write_bytes"],
            "compile_seconds": round(compile_s, 2), "simulate_seconds": round(s["wall_seconds"], 2),
            "tokens_per_second": round(s["tokens"] / max(s["wall_seconds"], 1e-9)),
            "check_ok": bool(check.ok), "max_rel_error": check.max_rel_error}


def accuracy_rows(engine, nodes=None):
    """Train the GCN, then its test accuracy in PyTorch (float32) and simulated in fixed point per config."""
    import torch
    import fuseflow
    from fuseflow import datasets
    from fuseflow.models import gcn_for
    from fuseflow.models.training import accuracy, train
    graph = datasets.load("cora")
    if nodes:
        graph = graph.subgraph(graph.bfs(nodes))
    model, inputs = gcn_for(graph)
    t0 = time.process_time()
    trained = train(model, graph, inputs)
    train_s = time.process_time() - t0
    with torch.no_grad():
        torch_acc = accuracy(model(*inputs), graph)
    rows = []
    for config, fuse in CONFIGS.items():
        m = fuseflow.compile(model, inputs, fuse=fuse, mode="fixed")
        sim = m.simulate(engine=engine)
        rows.append({"config": config, "mode": "fixed", "test_accuracy": accuracy(sim.outputs, graph),
                     "cycles": sim.cycles})
        print(f"{config:8s} fixed point: test accuracy {rows[-1]['test_accuracy']:.3f} (PyTorch {torch_acc:.3f})",
              flush=True)
    return {"trained": {"epochs": trained["epochs"], "cpu_seconds": round(train_s, 1),
                        "test_nodes": int(len(graph.split["test"]))},
            "pytorch_float32_test_accuracy": torch_acc, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "cora.json"))
    ap.add_argument("--engine", default="compiled", choices=("compiled", "python", "auto"))
    ap.add_argument("--nodes", type=int, help="a breadth-first sample of this many nodes instead of all of Cora")
    ap.add_argument("--no-accuracy", action="store_true", help="skip training and the fixed-point accuracy rows")
    args = ap.parse_args(argv)
    from fuseflow.cli import atomic_write
    rows = []
    for config in CONFIGS:
        row = measure(config, args.engine, nodes=args.nodes)
        print(f"{config:8s} {row['cycles']:>12,} cycles {row['tokens']:>12,} tokens "
              f"simulated in {row['simulate_seconds']:.1f} s ({row['engine']}), check {'ok' if row['check_ok'] else 'FAILED'}",
              flush=True)
        rows.append(row)
    from fuseflow.dse.experiments import PAPER_GCN_CORA_CYCLES
    paper_cycles = {config: PAPER_GCN_CORA_CYCLES[fuse] for config, fuse in CONFIGS.items()}
    base = rows[0]["cycles"]
    for row in rows:
        row["vs_unfused"] = round(row["cycles"] / base, 3)
        if not args.nodes:
            row["paper_cycles"] = paper_cycles[row["config"]]
            row["paper_vs_unfused"] = round(paper_cycles[row["config"]] / paper_cycles["unfused"], 3)
    out = {"benchmark": "cora_bench", "model": "GCN, 2 layers, hidden 16, float", "dataset": "cora",
           "commit": commit(), "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
           "rows": rows}
    if not args.no_accuracy:
        out["accuracy"] = accuracy_rows(args.engine, nodes=args.nodes)
    with atomic_write(args.output) as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.output}")
    return 0 if all(r["check_ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
