"""Block sparsity (issue #15): simulated cycles of block-sparse kernels blocked at B = 1 (unblocked), 2, 4, 8, 16.

1. SpMM ``T = A X`` (Gustavson order i,k,j): A is block-sparse with a random pattern of 16 x 16 blocks, X dense;
   the same matrices are compiled unblocked (``csr`` / ``dense``) and blocked (``bcsr:B``) for B = 2, 4, 8, 16,
   so every run holds the same nonzeros.
2. BigBird-style attention scores ``S(i,j) = M(i,j) * sum[d](Q(i,d) KT(d,j))``: M is a BigBird mask at 16 x 16
   block granularity (a window of 3 blocks, 1 global block row and column, 1 random block per row), given as a
   tensor (``csr`` unblocked, ``bcsr:B`` blocked; Q and KT dense, ``bcsr:B`` blocked), at B = 4, 8, 16, and
   unblocked; also the unblocked program with a coordinate mask (``mask[bigbird:...]``, no mask tensor).
   The paper's Figure 17: blocked attention's speedup over unstructured sparse execution grows with B.
3. BigBird attention end to end ``O = softmax[j](M * Q KT) V`` (the scores of 2, the softmax across the blocks of
   a row: ``reduce`` with ``rows`` and the alu's row broadcast, then block products with V) at B = 4, 8, 16
   against the unblocked program (B = 1: ``csr`` mask, dense Q, KT, V): Figure 17's comparison.

Every run is checked against NumPy (dense products of the same data) and simulated in fixed mode (the RTL's
arithmetic; cycles do not depend on the number mode). Writes JSON (default benchmarks/results/blocks.json).
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from fuseflow.cli import atomic_write  # noqa: E402
from fuseflow.compiler import compile_text  # noqa: E402
from fuseflow.samml.masks import dense_mask, parse_mask  # noqa: E402
from fuseflow.sim import run  # noqa: E402
from fuseflow.tensors import FixedFormat  # noqa: E402

PATTERN_BLOCK = 16               # the nonzero pattern's granularity: every B <= 16 dividing it sees the same nonzeros
SPMM = {"n": 64, "k": 64, "m": 32, "density": 0.4}
ATTENTION = {"n": 128, "d": 16, "window": 3, "global": 1, "random": 1}
SEED = 2026
FX = FixedFormat(32, 16)


def _q(x):
    return FX.decode(FX.encode(np.asarray(x, dtype=np.float64)))


def _run(text, inputs, want, name, keep=None):
    t0 = time.perf_counter()
    prog = compile_text(text).program
    res = run(prog, inputs, mode="fixed")
    got = res.outputs[name]
    err = float(np.max(np.abs(got - want)))
    if err > 1e-2:
        raise AssertionError(f"{name}: simulated output differs from NumPy by {err}")
    if keep is not None:
        keep.append(got)
    k = res.stats["kernels"][0]
    ops = [n.op for kk in prog.kernels for n in kk.nodes.values()]
    return {"cycles": res.cycles, "tokens": res.stats["tokens"], "alu_ops": res.stats["alu_ops"],
            "nodes": len(ops), "kernels": len(prog.kernels), "kernel_cycles": list(res.kernel_cycles),
            "block_matmul": ops.count("block_matmul"), "max_abs_error": err,
            "op_bound": k["op_bound"], "wall_seconds": round(time.perf_counter() - t0, 2)}


def spmm_rows(rng):
    n, kk, m = SPMM["n"], SPMM["k"], SPMM["m"]
    pb = PATTERN_BLOCK
    pattern = rng.random((n // pb, kk // pb)) < SPMM["density"]
    a = np.kron(pattern, np.ones((pb, pb))) * rng.uniform(-1, 1, (n, kk))
    x = rng.uniform(-1, 1, (kk, m))
    want = _q(a) @ _q(x)
    rows = []
    for b in (1, 2, 4, 8, 16):
        fa, fx = ("csr", "dense") if b == 1 else (f"bcsr:{b}", f"bcsr:{b}")
        text = f"tensor A({n}, {kk}) : {fa}\ntensor X({kk}, {m}) : {fx}\nT(i,j) = A(i,k) * X(k,j)\norder i,k,j\n"
        row = {"B": b, "program": "unblocked" if b == 1 else "blocked", **_run(text, {"A": a, "X": x}, want, "T")}
        row["nonzero_blocks"] = int(np.count_nonzero(np.abs(a).reshape(n // b, b, kk // b, b).sum(axis=(1, 3))))
        rows.append(row)
        print(f"spmm B={b}: {row['cycles']} cycles", flush=True)
    _speedups(rows, rows[0]["cycles"])
    return rows


def _speedups(rows, base):
    """Speedup over the unblocked run, and cycles x the multipliers the block unit uses (B*B for a block
    product: the work per multiplier, which blocking keeps while it stays near the unblocked run's)."""
    for r in rows:
        r["speedup_vs_unblocked"] = round(base / r["cycles"], 2)
        r["cycles_x_multipliers"] = r["cycles"] * r["B"] ** 2


def bigbird_mask(n):
    spec = (f"bigbird:block={PATTERN_BLOCK},window={ATTENTION['window']},global={ATTENTION['global']},"
            f"random={ATTENTION['random']},seed=0")
    return spec, dense_mask(parse_mask(spec, "bench"), n, n).astype(np.float64)


def attention_rows(rng):
    n, d = ATTENTION["n"], ATTENTION["d"]
    spec, mask = bigbird_mask(n)
    q, k = rng.uniform(-1, 1, (n, d)), rng.uniform(-1, 1, (n, d))
    want = mask * (_q(q) @ _q(k).T)
    rows = []
    text = (f"tensor Q({n}, {d}) : dense\ntensor K({n}, {d}) : dense\n"
            f"S(i,j) = mask[{spec}](i,j) * sum[d](Q(i,d) * K(j,d))\n")
    rows.append({"B": 1, "program": "unblocked, coordinate mask", **_run(text, {"Q": q, "K": k}, want, "S")})
    print(f"attention coordinate mask: {rows[-1]['cycles']} cycles", flush=True)
    for b in (1, 4, 8, 16):
        fm, fq = ("csr", "dense") if b == 1 else (f"bcsr:{b}", f"bcsr:{b}")
        text = (f"tensor M({n}, {n}) : {fm}\ntensor Q({n}, {d}) : {fq}\ntensor KT({d}, {n}) : {fq}\n"
                f"S(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\n")
        row = {"B": b, "program": "unblocked, mask tensor" if b == 1 else "blocked",
               **_run(text, {"M": mask, "Q": q, "KT": np.ascontiguousarray(k.T)}, want, "S")}
        rows.append(row)
        print(f"attention B={b}: {row['cycles']} cycles", flush=True)
    _speedups(rows, rows[1]["cycles"])
    return rows, float(mask.mean())


def full_attention_rows(rng):
    """BigBird attention end to end, blocked at B = 4, 8, 16 and unblocked (B = 1), the same data: cycles, and
    the blocked outputs' largest difference from the unblocked program's (fixed mode: the block products round
    once per block, the unblocked program once per product)."""
    n, d = ATTENTION["n"], ATTENTION["d"]
    _, mask = bigbird_mask(n)
    q, k, v = (rng.uniform(-1, 1, (n, d)) for _ in range(3))
    keep = mask > 0
    s = np.where(keep, _q(q) @ _q(k).T, -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)) @ _q(v)
    inputs = {"M": mask, "Q": q, "KT": np.ascontiguousarray(k.T), "V": v}
    rows, outs = [], []
    for b in (1, 4, 8, 16):
        fm, fd = ("csr", "dense") if b == 1 else (f"bcsr:{b}", f"bcsr:{b}")
        text = (f"tensor M({n}, {n}) : {fm}\ntensor Q({n}, {d}) : {fd}\ntensor KT({d}, {n}) : {fd}\n"
                f"tensor V({n}, {d}) : {fd}\nS(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\n"
                f"P(i,j) = softmax[j](S(i,j))\nO(i,e) = sum[j](P(i,j) * V(j,e))\n")
        row = {"B": b, "program": "unblocked, mask tensor" if b == 1 else "blocked",
               **_run(text, inputs, want, "O", keep=outs)}
        row["max_abs_diff_vs_unblocked"] = float(np.max(np.abs(outs[-1] - outs[0])))
        rows.append(row)
        print(f"full attention B={b}: {row['cycles']} cycles", flush=True)
    _speedups(rows, rows[0]["cycles"])
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "blocks.json"))
    ap.add_argument("--skip-attention", action="store_true")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(SEED)
    doc = {"benchmark": "blocks", "issue": 15, "python": platform.python_version(), "mode": "fixed",
           "pattern_block": PATTERN_BLOCK, "spmm_config": SPMM, "spmm": spmm_rows(rng)}
    if not args.skip_attention:
        doc["attention_config"] = ATTENTION
        doc["attention"], doc["attention_config"]["mask_density"] = attention_rows(rng)
        doc["full_attention"] = full_attention_rows(rng)
    with atomic_write(args.output) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
