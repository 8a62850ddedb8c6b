"""The paper's models (fuseflow.models) at each size of their ladder and each fusion configuration: kernels,
nodes, simulated cycles (on chip and HBM2), ALU ops, bytes, tokens, compile and simulation seconds, checked
against PyTorch (issues 11 and 40).

Models: GCN and GraphSAGE (two layers, hidden 16) on Cora (``small`` / ``medium``: a breadth-first sample of
200 / 1,000 nodes; ``paper``: the whole graph), the sparse autoencoder, GPT-3 Small BigBird multi-head attention
and the decoder block at their size ladders (``fuseflow.models.example(name, size=...)``); each case is one
call of :func:`fuseflow.dse.points.run_model_point` (the same function as ``python -m fuseflow.dse run fig12``)
with the configurations of the model's own ``FUSION`` (unfused / partial / full; attention has no partial).
Float mode (``--mode fixed`` for the hardware's number format) on the compiled engine when it is built.

Every case runs in a child process under a wall-time limit (``--timeout``, ``--paper-timeout`` for the paper
size); a case over the limit is written as skipped with that reason, never dropped. Cases not run now keep
their row from the existing output file (``--fresh`` drops them; ``--merge`` adds another file's rows); a case
with no row is written as skipped ("not run"), and ``--mark REASON`` writes the selected cases as skipped with
that reason without running them. Writes JSON (default benchmarks/results/models.json); ``--markdown`` prints
docs/pytorch.md's table from it.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
from _common import commit, machine  # noqa: E402

MODELS = ("gcn", "graphsage", "autoencoder", "attention", "decoder")
SIZES = ("small", "medium", "paper")
DATASET = "cora"


def configs(model):
    """The fusion configurations of ``model`` (its ``FUSION``'s names; the same at every size of the ladder)."""
    from fuseflow.dse.points import paper_model
    return tuple(paper_model(model, DATASET, "small")[0].FUSION)


def measure(model, size, config, mode, engine):
    """One case in this process: :func:`run_model_point` after a warm-up trace (the first trace in a process
    pays torch.fx's start-up, which is not the model's compile time)."""
    warnings.filterwarnings("ignore")
    import fuseflow
    from fuseflow.dse.points import run_model_point
    from fuseflow.models import example
    warm, warm_inputs = example("gcn")
    fuseflow.compile(warm, warm_inputs, fuse="none")
    r = run_model_point(model, dataset=DATASET, size=size, config=config, mode=mode, engine=engine)
    return {"model": model, "size": size, "config": config, "fuse": r["fuse"],
            "dataset": r["dataset"], "mode": r["mode"], "engine": r["engine"], "kernels": r["kernels"],
            "nodes": r["nodes"], "cycles": r["cycles"]["onchip"], "cycles_hbm2": r["cycles"]["hbm2"],
            "alu_ops": r["alu_ops"], "bytes": r["bytes"], "read_bytes": r["read_bytes"],
            "write_bytes": r["write_bytes"], "tokens": r["tokens"], "compile_seconds": round(r["compile_s"], 3),
            "simulate_seconds": round(r["sim_s"], 2), "check_ok": r["check_ok"],
            "max_rel_error": r["max_rel_error"]}


def run_case(model, size, config, mode, engine, timeout, nice=0):
    """One case in a child process under ``timeout`` seconds; a row (skipped or error rows carry the reason)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--one", model, size, config, "--mode", mode,
           "--engine", engine]
    if nice:
        cmd = ["nice", "-n", str(nice)] + cmd
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    head = {"model": model, "size": size, "config": config, "mode": mode, "commit": commit()}
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {**head, "skipped": f"compile + {mode}-mode simulation + check took longer than {timeout:g} s"}
    if r.returncode:
        return {**head, "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    return {**head, **rec, "wall_seconds": round(time.perf_counter() - t0, 1)}


def label(model, size):
    """How docs/pytorch.md's table names ``model`` at ``size`` (from the model's own size ladder)."""
    from fuseflow.models import attention, autoencoder, decoder
    if model in ("gcn", "graphsage"):
        name = {"gcn": "GCN", "graphsage": "GraphSAGE"}[model]
        return f"{name} (Cora, {'all 2,708' if size == 'paper' else {'small': '200', 'medium': '1,000'}[size]} nodes)"
    if model == "autoencoder":
        side = int(round(autoencoder.SIZES[size]["features"] ** 0.5))
        return f"autoencoder ({side} x {side})"
    if model == "attention":
        s = attention.SIZES[size]
        return f"attention (seq {s['seq']}, {s['heads']} x {s['head_dim']}, block {s['block']})"
    s = decoder.SIZES[size]
    return f"decoder (seq {s['seq']}, width {s['dim']})"


def markdown(doc) -> str:
    """docs/pytorch.md's table of measured models, rendered from models.json (never retyped)."""
    lines = ["| model | size | config | kernels | cycles (on chip) | cycles (HBM2) | ALU ops | bytes | compile | "
             "simulate | check |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    last = None
    for r in doc["results"]:
        key = (r["model"], r["size"])
        name = label(*key) if key != last else ""
        size = r["size"] if key != last else ""
        last = key
        if "cycles" not in r:
            why = r.get("skipped") or r.get("error") or "not measured"
            lines.append(f"| {name} | {size} | {r['config']} | | | | | | | | {why} |")
            continue
        check = f"{'ok' if r['check_ok'] else 'MISMATCH'} ({r['max_rel_error']:.0e})"
        lines.append(f"| {name} | {size} | {r['config']} | {r['kernels']} | {r['cycles']:,} | {r['cycles_hbm2']:,} | "
                     f"{r['alu_ops']:,} | {r['bytes']:,} | {r['compile_seconds']:.2f} s | "
                     f"{r['simulate_seconds']:.1f} s | {check} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "models.json"), help="JSON file to write")
    ap.add_argument("--sizes", nargs="+", choices=SIZES, default=["small", "medium"],
                    help="sizes to run (default: small medium; make paper runs paper)")
    ap.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS),
                    help="the models to run (default: all)")
    ap.add_argument("--only", help="run only the cases whose 'model/size/config' contains this text")
    ap.add_argument("--timeout", type=float, default=600.0,
                    help="wall-time limit per case at sizes small and medium, seconds (default 600)")
    ap.add_argument("--paper-timeout", type=float, default=2400.0,
                    help="wall-time limit per case at the paper size, seconds (default 2400)")
    ap.add_argument("--mode", choices=("float", "fixed"), default="float", help="number format (default float)")
    ap.add_argument("--engine", default="auto", choices=("auto", "compiled", "python"),
                    help="simulator engine (default auto: the compiled one when built)")
    ap.add_argument("--nice", type=int, default=0, help="run the cases under nice -n N")
    ap.add_argument("--fresh", action="store_true", help="drop the existing file's rows of the cases not run now")
    ap.add_argument("--mark", metavar="REASON",
                    help="write the selected cases (--sizes, --only) as skipped with REASON instead of running them")
    ap.add_argument("--merge", metavar="FILE", nargs="+", default=[],
                    help="take the rows of these results files (same mode; for example a run of other cases "
                         "beside this one) before running")
    ap.add_argument("--one", nargs=3, metavar=("MODEL", "SIZE", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--markdown", action="store_true",
                    help="print docs/pytorch.md's table from the output file instead of running")
    args = ap.parse_args(argv)
    if args.markdown:
        with open(args.output) as f:
            print(markdown(json.load(f)), end="")
        return 0
    if args.one:
        print(json.dumps(measure(*args.one, args.mode, args.engine)))
        return 0
    cases = [(m, s, c) for m in MODELS for s in SIZES for c in configs(m)]
    old = {}
    if not args.fresh and os.path.exists(args.output):
        with open(args.output) as f:
            prev = json.load(f)
        if prev.get("mode") == args.mode:
            old = {(r["model"], r.get("size"), r["config"]): r for r in prev["results"]}
    for path in args.merge:
        with open(path) as f:
            other = json.load(f)
        if other.get("mode") != args.mode:
            print(f"error: {path}: {other.get('mode')} mode, not {args.mode}", file=sys.stderr)
            return 2
        old.update({(r["model"], r["size"], r["config"]): r for r in other["results"]
                    if r.get("skipped") != "not run"})
    todo = [c for c in cases
            if c[0] in args.models and c[1] in args.sizes and (not args.only or args.only in "/".join(c))]
    rows = dict(old)

    def table():
        return [rows.get(c) or {"model": c[0], "size": c[1], "config": c[2], "skipped": "not run"} for c in cases]

    if args.mark:
        for model, size, config in todo:
            rows[(model, size, config)] = {"model": model, "size": size, "config": config, "mode": args.mode,
                                           "skipped": args.mark}
        todo = []
    for i, (model, size, config) in enumerate(todo, 1):
        timeout = args.paper_timeout if size == "paper" else args.timeout
        print(f"[{i}/{len(todo)}] {model} {size} {config} (limit {timeout:g} s) ...", flush=True)
        rec = run_case(model, size, config, args.mode, args.engine, timeout, args.nice)
        rows[(model, size, config)] = rec
        what = rec.get("skipped") or rec.get("error") or (
            f"{rec['kernels']} kernels, {rec['cycles']:,} cycles ({rec['cycles_hbm2']:,} HBM2), compile "
            f"{rec['compile_seconds']:.2f} s, simulate {rec['simulate_seconds']:.1f} s, "
            f"{'ok' if rec['check_ok'] else 'MISMATCH'} ({rec['max_rel_error']:.1e})")
        print(f"[{i}/{len(todo)}] {model} {size} {config}: {what}", flush=True)
        write(args, table())
    write(args, table())
    print(f"{args.output}: {len(cases)} cases, {len(todo)} run now")
    return 0


def write(args, results):
    """The results file, rewritten after every case (an interrupted run keeps what it measured)."""
    from fuseflow.cli import atomic_write
    out = {"benchmark": "models", "mode": args.mode, "engine": "compiled when built (each row says which)",
           "dataset": DATASET, "timeout_seconds": args.timeout, "paper_timeout_seconds": args.paper_timeout,
           "simulate_seconds": "the check: simulation plus PyTorch's float64 reference (the reference is a "
                               "small part)",
           "commit": commit(), "machine": machine(), "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with atomic_write(args.output) as f:
        f.write(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
