"""GPT-3 Small multi-head attention with BigBird (fuseflow.models.multihead_attention) up a sequence ladder,
unfused and fully fused, on the compiled simulator engine (issues 39 and 40: sequence 1024, block 64).

Each row: 12 heads of 64 (``--heads``, ``--head-dim``), BigBird block 64 (window 3, 1 global, 3 random
blocks), Q/K/V as inputs; compiled from PyTorch (``fuseflow.compile``, float mode), simulated once by
``CompiledModel.check`` on the compiled engine and compared with a float64 PyTorch run. Recorded: mask
sparsity, compile seconds, simulation seconds (the engine's ``wall_seconds``), cycles, tokens, ALU ops,
bytes, the useful multiply-adds (kept scores x head_dim x 2 for Q K^T and P V), the check's max relative
error and the process's peak RSS so far. Rows run smallest first, in this process, and the JSON is rewritten
after every row, so an interrupted run keeps what finished; ``--append`` adds rows to the file's (one run per
configuration set). ``--smoke``: sequence 64, 2 heads of 8, block 8 (seconds).

Writes JSON (default benchmarks/results/attention.json).
"""

import argparse
import json
import os
import platform
import resource
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import commit  # noqa: E402

SEQS = (128, 256, 512, 1024)
FUSES = ("none", "full")
SMOKE = dict(seqs=(64,), heads=2, head_dim=8, block=8)


def measure(seq, heads, head_dim, block, fuse, engine="compiled"):
    """One row: compile, simulate and check (float mode), and the counters."""
    import fuseflow
    from fuseflow.models import multihead_attention
    model, inputs = multihead_attention(seq=seq, heads=heads, head_dim=head_dim, block=block)
    t0 = time.perf_counter()
    m = fuseflow.compile(model, inputs, fuse=fuse, mode="float")
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    check = m.check(mode="float", engine=engine)
    check_s = time.perf_counter() - t0
    s = check.simulation.stats
    kept = int(model.keep.sum())
    return {"seq": seq, "heads": heads, "head_dim": head_dim, "block": block, "mask": model.spec,
            "sparsity": round(model.sparsity, 4), "fuse": fuse, "kernels": len(m.program.kernels),
            "compile_seconds": round(compile_s, 3), "sim_seconds": round(s["wall_seconds"], 3),
            "check_seconds": round(check_s, 3), "engine": s.get("engine", engine), "cycles": int(s["cycles"]),
            "tokens": int(s["tokens"]), "alu_ops": int(s["alu_ops"]),
            "useful_flops": 2 * 2 * heads * kept * head_dim,
            "mem_read_bytes": int(s["mem_read_bytes"]), "mem_write_bytes": int(s["mem_write_bytes"]),
            "tokens_per_second": round(s["tokens"] / s["wall_seconds"]) if s["wall_seconds"] else None,
            "ok": bool(check.ok), "max_rel_error": float(check.max_rel_error),
            # this process's peak so far (the rows run smallest first, so it is the largest row's own peak)
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def _key(r):
    return r["seq"], r["heads"], r["head_dim"], r["block"], r["fuse"]


def write(path, rows, args):
    from fuseflow.cli import atomic_write
    doc = {"benchmark": "attention_bench", "commit": commit(), "machine": platform.machine(),
           "cpus": os.cpu_count(), "loadavg": os.getloadavg()[0],
           "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
           "args": {"seqs": list(args.seqs), "heads": args.heads, "head_dim": args.head_dim, "block": args.block,
                    "fuse": list(args.fuse)},
           "rows": rows}
    with atomic_write(path) as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def table(rows) -> str:
    lines = ["| seq | heads x dim | block | fuse | sparsity | compile s | sim s | cycles | tokens | ALU ops | check |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        check = f"ok, {r['max_rel_error']:.1e}" if r["ok"] else f"FAIL {r['max_rel_error']:.1e}"
        lines.append(f"| {r['seq']} | {r['heads']} x {r['head_dim']} | {r['block']} | {r['fuse']} | "
                     f"{100 * r['sparsity']:.1f} % | {r['compile_seconds']:.2f} | {r['sim_seconds']:.1f} | "
                     f"{r['cycles']:,} | {r['tokens']:,} | {r['alu_ops']:,} | {check} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results", "attention.json"))
    ap.add_argument("--max-seq", type=int, default=max(SEQS), help="largest sequence length of the ladder")
    ap.add_argument("--seqs", type=int, nargs="+", default=list(SEQS), help="the ladder (default %(default)s)")
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--fuse", nargs="+", default=list(FUSES), choices=FUSES)
    ap.add_argument("--engine", default="compiled", choices=("compiled", "auto", "python"))
    ap.add_argument("--smoke", action="store_true", help="sequence 64, 2 heads of 8, block 8 (seconds)")
    ap.add_argument("--append", action="store_true",
                    help="keep the rows already in --out (a row measured again replaces its old one)")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    if args.smoke:
        args.seqs, args.heads, args.head_dim, args.block = (SMOKE["seqs"], SMOKE["heads"], SMOKE["head_dim"],
                                                            SMOKE["block"])
    args.seqs = [s for s in args.seqs if s <= args.max_seq]
    rows = []
    if args.append and os.path.exists(args.out):
        with open(args.out) as f:
            rows = json.load(f)["rows"]
    for seq in args.seqs:
        for fuse in args.fuse:
            print(f"seq {seq} heads {args.heads}x{args.head_dim} block {args.block} fuse {fuse} ...", flush=True)
            row = measure(seq, args.heads, args.head_dim, args.block, fuse, args.engine)
            rows = [r for r in rows if _key(r) != _key(row)] + [row]
            rows.sort(key=lambda r: (r["heads"], r["head_dim"], r["block"], r["seq"], FUSES.index(r["fuse"])))
            print(f"  compile {row['compile_seconds']:.2f} s, simulate {row['sim_seconds']:.1f} s, "
                  f"{row['cycles']:,} cycles, {row['tokens']:,} tokens, ok={row['ok']} "
                  f"(max rel {row['max_rel_error']:.1e})", flush=True)
            write(args.out, rows, args)
    print(table(rows))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
