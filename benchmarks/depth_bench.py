"""Channel depths: simulated cycles / busiest-stream tokens at the compiler's and builders' default depths.

For every kernel of the classic suite (``fuseflow.samml.kernels``) and every example program
(``fuseflow/programs/*.ff``, its dimensions scaled up so that the busiest stream carries thousands of tokens):
the reference simulator's cycles (exact with the RTL), the stream lower bound (tokens on the busiest stream of
each kernel, summed over kernels: kernels run one after another), their ratio, and the FIFO bits the graph's
channel depths cost (every consumer's channel, ``depth x (data width + 1)`` bits). The inputs measured are
random data of another seed than the synthetic inputs the depth pass sizes on. ``at_depth_2``: the same graph
and data with every channel at depth 2 (deadlock floors kept: ``--fifo-depth 2``), the depths before issue 9.

Target (issue 9): ratio <= 1.3 for every kernel whose bound is not structural. Structural bounds: the outer
product's single accumulator group (``spmspm_outer``: the order-2 sparse accumulator holds the whole output
until its one group ends), and generally any program whose busiest op must fire more often than its busiest
stream carries tokens (``op_bound`` > ``stream_bound``: an intersection or union stepping over both operands'
tokens, a sparse accumulator merging and then emitting a group, e.g. the general permute kernel's single
group); for those the row also gives cycles / op bound, which deeper channels cannot lower below 1.

The decoder (``SLOW_PROGRAMS``) is left out unless named with ``--only``: at 6x its simulation did not finish
in 17 minutes (on a loaded 2-core machine). Writes JSON (default benchmarks/results/depths.json).
"""

import argparse
import copy
import glob
import json
import os
import platform
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from fuseflow.cli import atomic_write  # noqa: E402
from fuseflow.compiler.passes.depths import assign_depths  # noqa: E402
from fuseflow.samml import kernels  # noqa: E402
from fuseflow.sim import engine  # noqa: E402

TARGET_RATIO = 1.3
DENSITY = 0.3
SUITE_SCALE = 64
#: vector kernels at n = SUITE_SCALE**2 so that their busiest stream carries over a thousand tokens
VECTOR_KERNELS = ("vector_add", "vector_mul")
#: the example programs' dimensions are multiplied by this
PROGRAM_SCALE = 6
#: example programs left out unless named with --only (too slow to simulate at 6x)
SLOW_PROGRAMS = ("decoder",)
EXEMPT = {"spmspm_outer": "structural: one accumulator group holds the whole output until the last k"}


def stream_bound(res):
    return sum(max(k["streams"].values(), default=0) for k in res.stats["kernels"])


def fifo_bits(program):
    from fuseflow.compiler.passes.depths import fifo_bits as bits
    return bits(program)


def scale_program_text(text, factor):
    """``.ff`` text with every declared dimension multiplied by ``factor``."""
    def dims(m):
        sizes = ", ".join(str(int(d) * factor) for d in m.group(2).split(","))
        return f"{m.group(1)}({sizes})"
    return re.sub(r"^(\s*tensor\s+\w+)\(([\d,\s]+)\)", dims, text, flags=re.M)


def measure(name, program, seed=0):
    inputs = kernels.random_inputs(program, density=DENSITY, seed=seed)
    t0 = time.perf_counter()
    res = engine.run(program, inputs, mode="fixed")
    wall = time.perf_counter() - t0
    bound = stream_bound(res)
    ops = op_bound(res)
    row = {"kernel": name, "cycles": res.cycles, "stream_bound": bound,
           "ratio": round(res.cycles / max(1, bound), 3), "op_bound": ops,
           "ratio_to_op_bound": round(res.cycles / max(1, ops), 3), "fifo_bits": fifo_bits(program),
           "crd_width": int(program.config.get("crd_width", 16)),
           "kernels": len(program.kernels), "sim_seconds": round(wall, 2)}
    # per kernel: its cycles, its busiest stream and its busiest op (the op bound names the op that sets it)
    row["per_kernel"] = []
    for k in res.stats["kernels"]:
        sid, toks = max(k["streams"].items(), key=lambda x: x[1], default=("", 0))
        nid, node = max(k["nodes"].items(), key=lambda x: x[1]["busy"], default=("", {"busy": 0}))
        row["per_kernel"].append({"kernel": k["name"], "cycles": k["cycles"], "busiest_stream": sid,
                                  "stream_bound": toks, "busiest_op": nid, "op_bound": node["busy"]})
    # the starting point, measured on the same graph and data: every channel at depth 2 (deadlock
    # floors kept), i.e. the depths pass's --fifo-depth 2
    shallow = copy.deepcopy(program)
    assign_depths(shallow, {"fifo_depth": 2})
    res2 = engine.run(shallow, inputs, mode="fixed")
    row["at_depth_2"] = {"cycles": res2.cycles, "ratio": round(res2.cycles / max(1, stream_bound(res2)), 3),
                         "fifo_bits": fifo_bits(shallow)}
    if name in EXEMPT:
        row["exempt"] = EXEMPT[name]
    elif row["ratio"] > TARGET_RATIO and ops > bound:
        row["exempt"] = "structural: op-bound (the busiest op fires more often than the busiest stream carries)"
    return row


def op_bound(res):
    """Firings of the busiest op of each kernel, summed over kernels."""
    return sum(max((n["busy"] for n in k["nodes"].values()), default=0) for k in res.stats["kernels"])


def suite_cases(only=None):
    for name in kernels.SUITE:
        if only and name not in only:
            continue
        n = SUITE_SCALE * SUITE_SCALE if name in VECTOR_KERNELS else SUITE_SCALE
        yield f"{name}", lambda name=name, n=n: kernels.build(name, n, density=DENSITY) \
            if "density" in kernels.build.__code__.co_varnames else kernels.build(name, n)


def program_cases(only=None):
    from fuseflow.compiler import EinsumProgram, compile_program
    for path in sorted(glob.glob(os.path.join(HERE, "..", "fuseflow", "programs", "*.ff"))):
        name = os.path.splitext(os.path.basename(path))[0]
        if only and f"ff:{name}" not in only or not only and name in SLOW_PROGRAMS:
            continue
        text = scale_program_text(open(path).read(), PROGRAM_SCALE)
        yield f"ff:{name}", lambda text=text, name=name: compile_program(EinsumProgram.parse(text, name)).program


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "depths.json"))
    ap.add_argument("--only", nargs="*", help="kernel names (suite) or ff:<program>")
    ap.add_argument("--baseline", help="an earlier depths.json (e.g. measured before the depths pass existed): "
                                       "its cycles, ratio and FIFO bits are kept beside each row as 'before' "
                                       "(default: the output file's own 'before' entries, if any)")
    ap.add_argument("--baseline-label", help="what the baseline was (default: its file name)")
    args = ap.parse_args(argv)
    before, label = {}, args.baseline_label or (args.baseline and os.path.basename(args.baseline))
    if args.baseline:
        with open(args.baseline) as f:
            base = json.load(f)
        before = {r["kernel"]: {k: r[k] for k in ("cycles", "ratio", "fifo_bits")} for r in base["results"]}
    elif os.path.exists(args.output):
        # a re-run without --baseline keeps the file's baseline: it records a past state, not this run
        with open(args.output) as f:
            prev = json.load(f)
        before = {r["kernel"]: r["before"] for r in prev.get("results", []) if "before" in r}
        label = prev.get("baseline") if before else None
    rows = []
    for name, make in list(suite_cases(args.only)) + list(program_cases(args.only)):
        t0 = time.perf_counter()
        program = make()
        build_s = time.perf_counter() - t0
        row = measure(name, program)
        row["build_seconds"] = round(build_s, 2)
        if name in before:
            row["before"] = before[name]
        rows.append(row)
        flag = "" if row["ratio"] <= TARGET_RATIO else "  (over target)" if "exempt" not in row else "  (structural)"
        print(f"{name:24s} cycles {row['cycles']:9d}  bound {row['stream_bound']:9d}  ratio {row['ratio']:6.3f}  "
              f"op bound {row['op_bound']:9d} ({row['ratio_to_op_bound']:5.3f})  "
              f"fifo bits {row['fifo_bits']:8d}  at depth 2 {row['at_depth_2']['ratio']:6.3f}  build {build_s:5.2f}s{flag}",
              flush=True)
    over = [r["kernel"] for r in rows if r["ratio"] > TARGET_RATIO and "exempt" not in r]
    doc = {"benchmark": "depth_bench", "target_ratio": TARGET_RATIO, "density": DENSITY,
           "suite_scale": SUITE_SCALE, "program_scale": PROGRAM_SCALE, "over_target": over,
           "baseline": label,
           "machine": platform.platform(), "python": platform.python_version(), "results": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with atomic_write(args.output) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.output}: {len(rows)} kernels, {len(over)} over the target ratio {TARGET_RATIO}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
