"""The paper's four models (fuseflow.models) at each fusion configuration: simulated cycles, ALU ops, bytes
moved, and compile time (issue 11's closing note).

Each (model, configuration, scale) is compiled from PyTorch (``fuseflow.compile``: trace + lowering + fusion +
code generation) and simulated once in fixed mode (the hardware's numbers) on the model's offline example data.
Scales: ``toy`` (the models' defaults: GCN/GraphSAGE on Zachary's karate club with 16 features, the
autoencoder on 5 8x8 images, one decoder block at sequence 32 / dim 16), ``small`` (the decoder at sequence 16 /
dim 8, where its fused configurations simulate in minutes) and, for GCN and GraphSAGE, ``paper``
(a uniform random graph of 500 nodes, 128 features, 95 % sparse adjacency: the paper's ablation size).

Every case runs in a child process under a wall-time limit (``--timeout``); a case over the limit is written
as skipped with that reason, not dropped. Writes JSON (default benchmarks/results/models.json).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, ROOT)

CONFIGS = ("unfused", "partial", "full")
#: (model, scale) pairs measured; paper-scale only for the graph models (the ablation of the paper)
CASES = ([(m, "toy") for m in ("gcn", "graphsage", "autoencoder", "decoder")] + [("decoder", "small")]
         + [(m, "paper") for m in ("gcn", "graphsage")])
#: the decoder at sequence 16 / dim 8: its fused configurations recompute heavily (docs/pytorch.md) and take
#: minutes to simulate at the toy size, so all three are also measured here
DECODER_SMALL = dict(seq=16, dim=8)
PAPER_GRAPH = dict(kind="uniform", nodes=500, features=128, sparsity=0.95, seed=1)


def example(name, scale):
    from fuseflow.models import data, example as model_example
    if scale == "toy":
        return model_example(name)
    if scale == "small":
        return model_example(name, **DECODER_SMALL)
    g = data.synthetic_graph(**PAPER_GRAPH)
    return model_example(name, graph=g)


def measure(name, config, scale):
    """One case in this process: compile, simulate (fixed), and the counters."""
    warnings.filterwarnings("ignore")
    import fuseflow
    warm, warm_inputs = example("gcn", "toy")          # the first trace in a process pays torch.fx's warm-up
    fuseflow.compile(warm, warm_inputs, fuse="none")
    model, inputs = example(name, scale)
    m = fuseflow.compile(model, inputs, fuse=model.FUSION[config], mode="fixed")
    t0 = time.perf_counter()
    sim = m.simulate()
    sim_s = time.perf_counter() - t0
    s = sim.stats
    return {"model": name, "config": config, "scale": scale, "fuse": m.fuse if isinstance(m.fuse, str) else "module list",
            "kernels": len(m.program.kernels), "nodes": sum(len(k.nodes) for k in m.program.kernels),
            "cycles": sim.cycles, "alu_ops": s["alu_ops"], "mem_read_bytes": s["mem_read_bytes"],
            "mem_write_bytes": s["mem_write_bytes"], "bytes": s["mem_read_bytes"] + s["mem_write_bytes"],
            "tokens": s["tokens"], "compile_seconds": round(m.compile_seconds, 4),
            "simulate_seconds": round(sim_s, 3)}


def run_case(name, config, scale, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, config, scale]
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"model": name, "config": config, "scale": scale,
                "skipped": f"compile + fixed-mode simulation took longer than {timeout:g} s (Python reference "
                           f"simulator)"}
    if r.returncode:
        return {"model": name, "config": config, "scale": scale, "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    rec["wall_seconds"] = round(time.perf_counter() - t0, 2)
    return rec


#: how docs/pytorch.md names each (model, scale)
LABELS = {("gcn", "toy"): "GCN (karate, 16 features)", ("graphsage", "toy"): "GraphSAGE (karate)",
          ("autoencoder", "toy"): "autoencoder (5 8x8 images)", ("decoder", "toy"): "decoder (32 x 16)",
          ("decoder", "small"): "decoder (16 x 8)", ("gcn", "paper"): "GCN (500 nodes, 128 features)",
          ("graphsage", "paper"): "GraphSAGE (500 nodes, 128 features)"}


def markdown(doc) -> str:
    """docs/pytorch.md's table of measured models, rendered from models.json (never retyped)."""
    lines = ["| model | config | kernels | cycles | ALU ops | bytes | compile | simulate |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    last = None
    for r in doc["results"]:
        key = (r["model"], r["scale"])
        label = LABELS.get(key, f"{r['model']} ({r['scale']})") if key != last else ""
        last = key
        if "cycles" not in r:
            why = r.get("skipped") or r.get("error") or "not measured"
            lines.append(f"| {label} | {r['config']} | | | | | | {why} |")
            continue
        lines.append(f"| {label} | {r['config']} | {r['kernels']} | {r['cycles']:,} | {r['alu_ops']:,} | "
                     f"{r['bytes']:,} | {r['compile_seconds']:.2f} s | {r['simulate_seconds']:.1f} s |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "models.json"), help="JSON file to write")
    ap.add_argument("--timeout", type=float, default=600.0, help="wall-time limit per case in seconds (default 600)")
    ap.add_argument("--only", help="run only the cases whose 'model/config/scale' contains this text")
    ap.add_argument("--update", action="store_true",
                    help="keep the other cases of an existing output file (replace only the cases run now)")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "CONFIG", "SCALE"), help=argparse.SUPPRESS)
    ap.add_argument("--markdown", action="store_true",
                    help="print docs/pytorch.md's table from the output file instead of running")
    args = ap.parse_args(argv)
    if args.markdown:
        with open(args.output) as f:
            print(markdown(json.load(f)), end="")
        return 0
    if args.one:
        print(json.dumps(measure(*args.one)))
        return 0
    results = []
    for name, scale in CASES:
        for config in CONFIGS:
            if args.only and args.only not in f"{name}/{config}/{scale}":
                continue
            rec = run_case(name, config, scale, args.timeout)
            results.append(rec)
            what = rec.get("skipped") or rec.get("error") or (
                f"{rec['cycles']} cycles, {rec['alu_ops']} ALU ops, {rec['bytes']} B, compile "
                f"{rec['compile_seconds'] * 1e3:.0f} ms, simulate {rec['simulate_seconds']:.1f} s")
            print(f"{name:12s} {config:8s} {scale:6s} {what}", flush=True)
    if args.update and os.path.exists(args.output):
        with open(args.output) as f:
            old = json.load(f)["results"]
        ran = {(r["model"], r["config"], r["scale"]) for r in results}
        keep = [r for r in old if (r["model"], r["config"], r["scale"]) not in ran]
        order = {(m, s): i for i, (m, s) in enumerate(CASES)}
        results = sorted(keep + results, key=lambda r: (order.get((r["model"], r["scale"]), len(order)),
                                                        CONFIGS.index(r["config"])))
    out = {"benchmark": "models", "mode": "fixed", "timeout_seconds": args.timeout, "paper_graph": PAPER_GRAPH,
           "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
           "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    tmp = args.output + ".tmp"
    with open(tmp, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(tmp, args.output)
    print(f"{args.output}: {len(results)} cases")
    return 0


if __name__ == "__main__":
    sys.exit(main())
