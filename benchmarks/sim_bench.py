"""Simulator throughput, both engines side by side: tokens/s, simulated cycles/s, their ratio and peak memory.

Cases (:data:`CASES`): SpMV (CSR), Gustavson SpMSpM, a fused GCN layer (``fuseflow/programs/gcn.ff`` at
``--fuse full``), the decoder block (``fuseflow/programs/decoder.ff`` at its ``fuse`` regions, growing sequence),
a blocked graph (block-sparse SpMV, ``bcsr:4``) and a laned graph (``spmv.ff`` compiled with ``parallel i 4``).
Each case's size is calibrated so a row moves about 1e5, 1e6 and 1e7 tokens (a power law fitted to two small
runs; the simulator's own count is recorded), plus 1e8 tokens for SpMV on the compiled engine alone.

Every (case, size, engine) runs in its own child process (this script with ``--worker``), which builds the
program and packs its inputs once (``packed_input_mb``, ``pack_seconds``), warms up on a tiny instance, then
simulates on request; the parent alternates the engines' repetitions (python, compiled, python, compiled, ...)
so that drift of the shared machine hits both. The time of a repetition is ``res.stats["wall_seconds"]``, the
simulation proper (after input packing); the whole ``run()`` call and its CPU time are recorded too (on a
loaded machine ``cpu_tokens_per_s`` and ``ratio.cpu_median``, from the call's CPU time, are the steadier
figures). Peak memory (``peak_rss_mb``) is each child's high-water mark (VmHWM) during its runs: reset after
packing (``peak_reset``), so it is the interpreter, the packed inputs (``rss_ready_mb``: the resident size before
the first run) and the simulation; ``peak_rss_setup_mb`` is the peak of generating and packing the inputs. Both
engines must agree on cycles and tokens (and on the outputs): a row where they do not is recorded and
makes the script exit 1. A case the compiled engine cannot run yet has ``"compiled": null`` and the reason
(``fuseflow.sim.compiled.unsupported``).

``--cases A,B --merge`` reruns only those cases and replaces their rows in the existing file (the other rows,
and the file's own commit and load, are kept; each rerun row carries its ``commit``, and ``merged`` lists the
reruns).

Targets (reported, not asserted): compiled >= 30x the Python engine's tokens/s on rows of >= 1e6 tokens, and
>= 30 M tokens/s on SpMV. Writes JSON (default benchmarks/results/sim.json); ``--markdown`` prints its table.
"""

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import commit, machine  # noqa: E402

#: density of the random sparse matrices (SpMV, SpMSpM, laned SpMV) and of the stored blocks (blocked SpMV)
DENSITY = 0.1
BLOCK = 4                   # block size of the blocked case
BLOCK_DENSITY = 0.5         # fraction of stored blocks (as fuseflow.reports.suites.blocked)
GCN_FEATURES, GCN_HIDDEN, GCN_DEGREE = 16, 8, 8
LANES = 4
TARGETS = (100_000, 1_000_000, 10_000_000)
#: token counts measured on the compiled engine alone
COMPILED_ONLY = {"spmv_csr": (100_000_000,)}
#: repetitions (python, compiled) by target token count; --quick uses QUICK_REPEATS
REPEATS = {100_000: (5, 7), 1_000_000: (3, 5), 10_000_000: (1, 3), 100_000_000: (0, 2)}
QUICK_REPEATS = {100_000: (2, 3), 1_000_000: (2, 3)}
TARGET_RATIO = 30.0
#: the children's limit of dense entries per tensor (fuseflow.limits.DENSE_ENTRIES, 2**27 by default): the
#: 1e8-token SpMV declares a 17,000 x 17,000 CSR matrix, whose dense size the limit counts (its storage is nnz)
DENSE_LIMIT = ("FUSEFLOW_MAX_DENSE_ENTRIES", "4000000000")
TARGET_SPMV_TOKENS_PER_S = 30e6


# ---------------------------------------------------------------------------------------------------------------
# cases: build(size) -> (program, inputs, params); sizes are one integer per case


def _rng(seed):
    import numpy as np
    return np.random.default_rng(seed)


def random_csr(rng, rows, cols, density, values=True):
    """A rows x cols CSR matrix, each entry stored with probability ``density`` (values in [-1, 1]); built a
    band of rows at a time, so 1e8-token sizes need no dense matrix."""
    import numpy as np
    import scipy.sparse as sp
    indptr, indices = [np.zeros(1, np.int64)], []
    band = max(1, 4_000_000 // max(cols, 1))
    for r0 in range(0, rows, band):
        mask = rng.random((min(band, rows - r0), cols)) < density
        indptr.append(indptr[-1][-1] + np.cumsum(mask.sum(axis=1)))
        indices.append(np.nonzero(mask)[1])
    indptr = np.concatenate(indptr)
    indices = np.concatenate(indices) if indices else np.zeros(0, np.int64)
    data = rng.uniform(-1, 1, len(indices)) if values else np.ones(len(indices))
    data[data == 0] = 0.5
    return sp.csr_matrix((data, indices, indptr), shape=(rows, cols))


def sparse_vector(rng, n, density):
    import numpy as np
    v = rng.uniform(-1, 1, n)
    v[v == 0] = 0.5
    return np.where(rng.random(n) < density, v, 0.0)


def program_text(filename):
    from fuseflow.programs import directory
    with open(os.path.join(directory(), filename)) as f:
        return f.read()


def with_shapes(text, shapes):
    """``.ff`` source with the declared shapes of some tensors replaced: {name: shape}."""
    for name, shape in shapes.items():
        text, k = re.subn(rf"(tensor\s+{name}\s*)\([^)]*\)",
                          lambda m: m.group(1) + "(" + ", ".join(str(s) for s in shape) + ")", text)
        if k != 1:
            raise ValueError(f"tensor {name}: {k} declarations")
    return text


def build_spmv(n):
    from fuseflow.samml import kernels
    rng = _rng(0)
    return (kernels.spmv(n, n, "csr"), {"B": random_csr(rng, n, n, DENSITY), "c": sparse_vector(rng, n, DENSITY)},
            {"n": n, "density": DENSITY})


def build_gustavson(n):
    from fuseflow.samml import kernels
    rng = _rng(0)
    return (kernels.spmspm_gustavson(n, n, n),
            {"A": random_csr(rng, n, n, DENSITY), "B": random_csr(rng, n, n, DENSITY)}, {"n": n, "density": DENSITY})


def build_gcn(n):
    from fuseflow.compiler import compile_text
    text = with_shapes(program_text("gcn.ff"), {"A": (n, n), "X": (n, GCN_FEATURES), "W": (GCN_FEATURES, GCN_HIDDEN)})
    prog = compile_text(text, fuse="full", name="gcn").program
    rng = _rng(0)
    density = min(1.0, GCN_DEGREE / n)
    inputs = {"A": random_csr(rng, n, n, density), "X": rng.normal(size=(n, GCN_FEATURES)),
              "W": rng.normal(size=(GCN_FEATURES, GCN_HIDDEN))}
    return prog, inputs, {"nodes": n, "features": GCN_FEATURES, "hidden": GCN_HIDDEN, "degree": GCN_DEGREE,
                          "fuse": "full"}


def build_decoder(seq):
    from fuseflow.compiler import compile_text
    from fuseflow.models import example_inputs
    text = program_text("decoder.ff")
    dim = int(re.search(r"tensor\s+X\s*\(\s*\d+\s*,\s*(\d+)\s*\)", text).group(1))
    prog = compile_text(with_shapes(text, {"X": (seq, dim)}), fuse="regions", name="decoder").program
    inputs = example_inputs("decoder", {t.name: tuple(t.shape) for t in prog.inputs}, seed=7)
    return prog, inputs, {"seq": seq, "dim": dim, "fuse": "regions"}


def build_blocked(n):
    import scipy.sparse as sp
    from fuseflow.compiler import compile_text
    from fuseflow.reports.suites import BLOCK_PROGRAMS
    prog = compile_text(BLOCK_PROGRAMS["bspmv"].format(n=n, b=BLOCK), name="bspmv").program
    rng = _rng(1)
    grid = n // BLOCK
    pattern = random_csr(rng, grid, grid, BLOCK_DENSITY, values=False)
    blocks = rng.uniform(-1, 1, (pattern.nnz, BLOCK, BLOCK))
    blocks[blocks == 0] = 0.5
    B = sp.bsr_matrix((blocks, pattern.indices, pattern.indptr), shape=(n, n)).tocsr()
    return prog, {"B": B, "c": rng.uniform(-1, 1, n)}, {"n": n, "block": BLOCK, "block_density": BLOCK_DENSITY}


def build_laned(n):
    from fuseflow.compiler import compile_text
    text = with_shapes(program_text("spmv.ff"), {"B": (n, n), "c": (n,)})
    prog = compile_text(text, fuse="regions", name="spmv", parallel={"i": LANES}).program
    rng = _rng(0)
    return (prog, {"B": random_csr(rng, n, n, DENSITY), "c": sparse_vector(rng, n, DENSITY)},
            {"n": n, "density": DENSITY, "parallel": {"i": LANES}})


class Case:
    def __init__(self, what, build, calibration, multiple=1, smoke=None):
        self.what, self.build, self.calibration, self.multiple = what, build, calibration, multiple
        self.smoke = smoke or calibration[0]     # a tiny size for --smoke

    def size(self, s):
        return max(self.multiple, int(round(s / self.multiple)) * self.multiple)


CASES = {
    "spmv_csr": Case("SpMV x = B c, B CSR (kernels.spmv)", build_spmv, (200, 400), smoke=40),
    "spmspm_gustavson": Case("Gustavson SpMSpM X = A B (kernels.spmspm_gustavson)", build_gustavson, (30, 60),
                             smoke=10),
    "gcn_full": Case("GCN layer H = relu(A X W), gcn.ff at fuse full", build_gcn, (50, 100), smoke=16),
    "decoder": Case("decoder block, decoder.ff at fuse regions, sequence length grows", build_decoder, (4, 8),
                    multiple=4, smoke=4),
    "bspmv_blocked": Case(f"block-sparse SpMV, bcsr:{BLOCK} (suites.BLOCK_PROGRAMS['bspmv'])", build_blocked,
                          (256, 512), multiple=BLOCK, smoke=16),
    "spmv_laned": Case(f"spmv.ff (B DCSR, c sparse) with parallel i {LANES}", build_laned, (200, 400),
                       multiple=LANES, smoke=24),
}


# ---------------------------------------------------------------------------------------------------------------
# the child process


def rss_mb(field="VmHWM"):
    """This process's resident set (``VmRSS``) or its high-water mark (``VmHWM``), MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)      # KB on Linux


def reset_peak():
    """Reset this process's VmHWM to its current resident size (Linux: ``5`` to /proc/self/clear_refs), so the
    peak read after the runs is the simulation's, not the input generation's or the packing's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def packed_bytes(store):
    total = 0
    for packed in store.values():
        total += getattr(packed.vals, "nbytes", 0)
        for lv in packed.levels:
            total += sum(getattr(getattr(lv, a, None), "nbytes", 0) for a in ("seg", "crd"))
    return total


def digest(outputs):
    """Outputs' bytes hashed (-0.0 read as 0.0): equal digests, equal results."""
    h = hashlib.sha256()
    for name in sorted(outputs):
        import numpy as np
        h.update(name.encode())
        h.update((np.asarray(outputs[name], dtype=np.float64) + 0.0).tobytes())
    return h.hexdigest()[:16]


def worker(case_name, size, engine):
    """Build one case, report, then simulate once per ``run`` line on stdin (one JSON line out per request)."""
    import warnings
    warnings.filterwarnings("ignore")
    from fuseflow.sim import compiled, run
    from fuseflow.sim.engine import Env, pack_inputs
    out = sys.stdout
    sys.stdout = sys.stderr                      # nothing else may write to the protocol stream

    def send(msg):
        out.write(json.dumps(msg) + "\n")
        out.flush()

    case = CASES[case_name]
    prog, inputs, params = case.build(size)
    why = compiled.unsupported(prog) if engine == "compiled" else None
    if why is not None:
        send({"unsupported": why})
        return 0
    tiny, tiny_inputs, _ = case.build(case.smoke)                    # warm-up: imports, first-call costs
    run(tiny, tiny_inputs, engine=engine)
    del tiny, tiny_inputs
    t0 = time.perf_counter()
    store = pack_inputs(prog, inputs, Env("float"))      # packed once: every run() gets the packed tensors
    pack_s = time.perf_counter() - t0
    del inputs
    setup_peak = rss_mb("VmHWM")
    reset = reset_peak()
    send({"ready": True, "params": params, "kernels": len(prog.kernels),
          "nodes": sum(len(k.nodes) for k in prog.kernels), "packed_input_mb": round(packed_bytes(store) / 2 ** 20, 3),
          "pack_seconds": round(pack_s, 4), "rss_ready_mb": rss_mb("VmRSS"), "peak_rss_setup_mb": setup_peak,
          "peak_reset": reset})
    for line in sys.stdin:
        if line.strip() != "run":
            break
        c0, w0 = time.process_time(), time.perf_counter()
        res = run(prog, store, engine=engine)
        call, cpu = time.perf_counter() - w0, time.process_time() - c0
        if res.stats["engine"] != engine:
            raise RuntimeError(f"asked for the {engine} engine, ran on {res.stats['engine']}")
        send({"seconds": res.stats["wall_seconds"], "call_seconds": call, "cpu_seconds": cpu,
              "tokens": res.stats["tokens"], "cycles": res.cycles, "digest": digest(res.outputs)})
        del res
    send({"peak_rss_mb": rss_mb("VmHWM")})
    return 0


class Child:
    """A ``--worker`` child process: one (case, size, engine)."""

    def __init__(self, case, size, engine):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.setdefault(DENSE_LIMIT[0], DENSE_LIMIT[1])
        self.engine = engine
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", case, str(size), engine],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)

    def recv(self):
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise RuntimeError(f"{self.engine} worker exited with status {self.proc.returncode} (its stderr above)")
        return json.loads(line)

    def once(self):
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self.recv()

    def close(self):
        self.proc.stdin.write("stop\n")
        self.proc.stdin.flush()
        last = self.recv()
        self.proc.stdin.close()
        self.proc.wait()
        return last["peak_rss_mb"]


# ---------------------------------------------------------------------------------------------------------------
# the parent


def calibrate(name):
    """A function target tokens -> size, from two small runs (the growth exponent is fitted, not assumed); and the
    two runs."""
    import math

    from fuseflow.sim import compiled, run
    case = CASES[name]
    points = []
    for s in case.calibration:
        prog, inputs, _ = case.build(s)
        engine = "compiled" if compiled.unsupported(prog) is None else "python"
        points.append((s, run(prog, inputs, engine=engine).stats["tokens"]))
    (s0, t0), (s1, t1) = points
    power = math.log(t1 / t0) / math.log(s1 / s0)
    if engine == "compiled":            # cheap to refine: refit between the second point and ~1e6 tokens
        s2 = case.size(s1 * (1e6 / t1) ** (1.0 / power))
        if s2 > s1:
            prog, inputs, _ = case.build(s2)
            points.append((s2, run(prog, inputs, engine=engine).stats["tokens"]))
            (s0, t0), (s1, t1) = points[-2:]
            power = math.log(t1 / t0) / math.log(s1 / s0)
    return (lambda target: case.size(s1 * (target / t1) ** (1.0 / power))), {
        "points": points, "exponent": round(power, 3), "engine": engine}


def summary(runs, tokens, cycles):
    secs = [r["seconds"] for r in runs]
    med = statistics.median(secs)
    cpu = max(statistics.median(r["cpu_seconds"] for r in runs), 1e-9)
    return {"runs": [round(s, 5) for s in secs], "min": round(min(secs), 5), "median": round(med, 5),
            "tokens_per_s": round(tokens / med), "cycles_per_s": round(cycles / med),
            "best_tokens_per_s": round(tokens / min(secs)),
            "call_seconds_median": round(statistics.median(r["call_seconds"] for r in runs), 5),
            "cpu_seconds_median": round(cpu, 5), "cpu_tokens_per_s": round(tokens / cpu)}


def measure(name, size, reps_py, reps_c, target):
    """One row: both engines' children alive at once, repetitions alternated."""
    load0 = os.getloadavg()
    engines = [e for e, r in (("python", reps_py), ("compiled", reps_c)) if r > 0]
    children = {e: Child(name, size, e) for e in engines}
    ready = {e: c.recv() for e, c in children.items()}
    row = {"case": name, "what": CASES[name].what, "target_tokens": target, "size": size}
    reasons = {"python": "not run: the compiled engine alone at this size"} if "python" not in engines else {}
    for e in list(engines):
        if "unsupported" in ready[e]:
            reasons[e] = ready[e]["unsupported"]
            children.pop(e).proc.wait()
            engines.remove(e)
    if not engines:
        row.update({"python": None, "compiled": None, "reasons": reasons})
        return row
    info = ready[engines[0]]
    row.update({"params": info["params"], "kernels": info["kernels"], "nodes": info["nodes"],
                "packed_input_mb": info["packed_input_mb"], "pack_seconds": info["pack_seconds"]})
    runs = {e: [] for e in engines}
    reps = {"python": reps_py, "compiled": reps_c}
    for i in range(max(reps[e] for e in engines)):
        for e in engines:
            if i < reps[e]:
                runs[e].append(children[e].once())
    peaks = {e: children[e].close() for e in engines}
    first = runs[engines[0]][0]
    tokens, cycles = first["tokens"], first["cycles"]
    row.update({"tokens": tokens, "cycles": cycles})
    every = [r for e in engines for r in runs[e]]
    exact = {"tokens_equal": all(r["tokens"] == tokens for r in every),
             "cycles_equal": all(r["cycles"] == cycles for r in every),
             "outputs_equal": len({r["digest"] for r in every}) == 1, "engines_compared": len(engines) == 2}
    for e in ("python", "compiled"):
        if e in engines:
            row[e] = dict(summary(runs[e], tokens, cycles), peak_rss_mb=peaks[e],
                          **{k: ready[e][k] for k in ("rss_ready_mb", "peak_rss_setup_mb", "peak_reset")})
        else:
            row[e] = None
    if reasons:
        row["reasons"] = reasons
    row["exact"] = exact
    if len(engines) == 2:
        py, c = [r["seconds"] for r in runs["python"]], [r["seconds"] for r in runs["compiled"]]
        row["ratio"] = {"median": round(row["python"]["median"] / row["compiled"]["median"], 2),
                        "pairwise_median": round(statistics.median(a / b for a, b in zip(py, c)), 2),
                        "cpu_median": round(row["python"]["cpu_seconds_median"] / row["compiled"]["cpu_seconds_median"],
                                            2)}
    else:
        row["ratio"] = None
    row["load"] = [round(load0[0], 2), round(os.getloadavg()[0], 2)]
    return row


def fmt_rate(x):
    return "" if x is None else f"{x / 1e6:.2f} M"


def markdown(doc):
    """The rows as a Markdown table."""
    lines = ["| case | size | tokens | cycles | python tokens/s | compiled tokens/s | "
             "ratio (median / pairwise / CPU) | compiled cycles/s | peak RSS py / c (MB) | exact |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in doc["results"]:
        py, c = r.get("python"), r.get("compiled")
        size = ", ".join(f"{k}={v}" for k, v in (r.get("params") or {"size": r["size"]}).items()
                         if not isinstance(v, (dict, str)))
        if py is None and c is None:
            lines.append(f"| {r['case']} | {size} | | | | | | | | {'; '.join(r.get('reasons', {}).values())} |")
            continue
        ratio = (f"{r['ratio']['median']:.1f}x / {r['ratio']['pairwise_median']:.1f}x / "
                 f"{r['ratio']['cpu_median']:.1f}x") if r.get("ratio") else (
            "compiled: " + r["reasons"]["compiled"] if c is None else "")
        ex = r["exact"]
        exact = ("yes" if ex["tokens_equal"] and ex["cycles_equal"] and ex["outputs_equal"] else "**NO**") \
            if ex["engines_compared"] else "-"
        peak = f"{py['peak_rss_mb'] if py else '-'} / {c['peak_rss_mb'] if c else '-'}"
        lines.append(f"| {r['case']} | {size} | {r['tokens']:,} | {r['cycles']:,} | "
                     f"{fmt_rate(py and py['tokens_per_s'])} | {fmt_rate(c and c['tokens_per_s'])} | {ratio} | "
                     f"{fmt_rate(c and c['cycles_per_s'])} | {peak} | {exact} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "sim.json"), help="JSON file to write")
    ap.add_argument("--quick", action="store_true", help="1e5 and 1e6 tokens only, few repetitions")
    ap.add_argument("--smoke", action="store_true",
                    help="each case once per engine at a tiny fixed size (no calibration): checks the script")
    ap.add_argument("--max-tokens", type=float, default=None,
                    help="leave out targets above this many tokens (default 1e8; 1e6 with --quick)")
    ap.add_argument("--cases", help=f"comma-separated subset of {', '.join(CASES)}")
    ap.add_argument("--markdown", action="store_true", help="print the table of the output file instead of running")
    ap.add_argument("--merge", action="store_true",
                    help="replace only the rows of --cases in the existing output file and keep its other rows "
                         "(each rerun row records its own commit; 'merged' lists the reruns)")
    ap.add_argument("--worker", nargs=3, metavar=("CASE", "SIZE", "ENGINE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args.worker[0], int(args.worker[1]), args.worker[2])
    if args.markdown:
        with open(args.output) as f:
            print(markdown(json.load(f)), end="")
        return 0
    names = args.cases.split(",") if args.cases else list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"error: --cases: unknown {', '.join(unknown)} (known: {', '.join(CASES)})", file=sys.stderr)
        return 2
    max_tokens = args.max_tokens or (1e6 if args.quick else 1e8)
    repeats = QUICK_REPEATS if args.quick else REPEATS
    started, load0 = time.perf_counter(), os.getloadavg()
    rows, calibration = [], {}
    for name in names:
        if args.smoke:
            plan = [(CASES[name].smoke, 1, 1, None)]
        else:
            size_for, calibration[name] = calibrate(name)
            plan = [(size_for(t), *repeats[t], t) for t in TARGETS if t <= max_tokens]
            plan += [(size_for(t), 0, repeats.get(t, (0, 2))[1], t) for t in COMPILED_ONLY.get(name, ())
                     if t <= max_tokens]
        for size, reps_py, reps_c, target in plan:
            aim = f"aiming at {target:.0e} tokens" if target else "smoke"
            print(f"{name}: size {size} ({aim}), {reps_py} python / {reps_c} compiled runs ...", file=sys.stderr,
                  flush=True)
            row = measure(name, size, reps_py, reps_c, target)
            rows.append(row)
            py, c = row.get("python"), row.get("compiled")
            if py or c:
                print(f"  {row['tokens']:>11,d} tokens {row['cycles']:>11,d} cycles  python "
                      f"{fmt_rate(py and py['tokens_per_s']) or '-':>8} tokens/s  compiled "
                      f"{fmt_rate(c and c['tokens_per_s']) or '-':>8} tokens/s  ratio "
                      f"{row['ratio']['median'] if row['ratio'] else '-'}  peak RSS "
                      f"{py and py['peak_rss_mb']} / {c and c['peak_rss_mb']} MB", file=sys.stderr, flush=True)
            for e, why in row.get("reasons", {}).items():
                print(f"  {e}: {why}", file=sys.stderr, flush=True)
    previous = None
    if args.merge:
        with open(args.output) as f:
            previous = json.load(f)
        run_commit = commit(("fuseflow", "benchmarks/sim_bench.py"))
        for r in rows:
            r["commit"] = run_commit
        kept = [r for r in previous["results"] if r["case"] not in names]
        order = list(CASES)
        rows = sorted(kept + rows, key=lambda r: order.index(r["case"]))     # stable: sizes stay in order
        calibration = {**previous.get("calibration", {}), **calibration}
    compared = [r for r in rows if r.get("ratio")]
    inexact = [r for r in rows if r.get("exact") and not all(r["exact"][k] for k in
                                                              ("tokens_equal", "cycles_equal", "outputs_equal"))]
    big = [r for r in compared if r["tokens"] >= 1_000_000]
    spmv = [r for r in rows if r["case"] == "spmv_csr" and r.get("compiled")]
    report = {
        "benchmark": "simulator throughput: python and compiled engines",
        "commit": commit(("fuseflow", "benchmarks/sim_bench.py")), "machine": machine(),
        "mode": "smoke" if args.smoke else "quick" if args.quick else "full",
        "load_average": {"before": [round(x, 2) for x in load0], "after": [round(x, 2) for x in os.getloadavg()]},
        "seconds": round(time.perf_counter() - started, 1),
        "timing": "seconds per repetition = res.stats['wall_seconds'] (simulation proper, after input packing); "
                  "tokens/s and cycles/s from the median; ratio = python median / compiled median, and the median "
                  "of the ratios of alternated pairs; peak_rss_mb = the child process's VmHWM",
        "targets": {"ratio_at_1e6_and_above": TARGET_RATIO, "spmv_compiled_tokens_per_s": TARGET_SPMV_TOKENS_PER_S,
                    "ratio_met": {f"{r['case']}@{r['tokens']}": r["ratio"]["median"] >= TARGET_RATIO for r in big},
                    "spmv_tokens_per_s_met": {str(r["tokens"]): r["compiled"]["tokens_per_s"] >=
                                              TARGET_SPMV_TOKENS_PER_S for r in spmv}},
        "calibration": calibration,
        "environment": {DENSE_LIMIT[0]: os.environ.get(DENSE_LIMIT[0], DENSE_LIMIT[1])},
        "cases": {n: CASES[n].what for n in names},
        "all_exact": not inexact,
        "results": rows,
    }
    if previous is not None:
        # the file's run stays the reference for the rows kept; the rerun's facts go to 'merged'
        rerun = {"cases": names, "commit": report["commit"], "mode": report["mode"],
                 "load_average": report["load_average"], "seconds": report["seconds"],
                 "generated": time.strftime("%Y-%m-%d %H:%M:%S")}
        for key in ("commit", "mode", "load_average", "seconds"):
            report[key] = previous[key]
        report["cases"] = {n: CASES[n].what for n in CASES if any(r["case"] == n for r in rows)}
        report["merged"] = previous.get("merged", []) + [rerun]
    from fuseflow.cli import atomic_write
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with atomic_write(args.output) as f:
        json.dump(report, f, indent=1)
    print(markdown(report), file=sys.stderr)
    print(f"wrote {args.output}", file=sys.stderr)
    if inexact:
        print(f"error: the engines disagree on {', '.join(r['case'] + '@' + str(r['size']) for r in inexact)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
