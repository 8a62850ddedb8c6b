"""How far the intersect-bound kernels of the RTL benchmark are from what any matched-pair intersect can do.

For every suite kernel with an intersect, the same run as ``benchmarks/rtl_bench.py`` (n = 32, vectors
n = 1024, density 0.3, inputs of seed 0, channel depths sized on seed 1), in the reference simulator with
``trace=True`` (its cycles equal the RTL's: rtl.json's ``rtl_cycles``, checked here when the file has the
kernel). Per kernel: the stream bound, the **matched-pair floor** of each intersect
(:func:`fuseflow.sim.bounds.matched_pair_floor`: the fewest firings of any intersect that pops at most one
token per input per firing and a match's tokens together, on the streams this run fed it), the intersect's
firings, and the cycles of a buffered (decoupled) intersect with a window of W tokens per input on the same
streams (``benchmarks/intersect_window_model.py``, inputs always ready: the op alone). Writes
benchmarks/results/intersect_floor.json.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from intersect_window_model import buffered_steps  # noqa: E402
from rtl_bench import DEFAULT_SCALE, DENSITY, TARGET_RATIO, kernel_scale  # noqa: E402

from fuseflow.cli import atomic_write  # noqa: E402
from fuseflow.samml import kernels  # noqa: E402
from fuseflow.sim import run  # noqa: E402
from fuseflow.sim.bounds import intersect_floors  # noqa: E402
from fuseflow.sim.fifo_sizing import size_fifos  # noqa: E402

WINDOWS = (2, 4, 8)
HERE = os.path.dirname(os.path.abspath(__file__))


def measure(name, scale, seed=0):
    base = kernels.build(name, scale)
    p, _ = size_fifos(base, kernels.random_inputs(base, density=DENSITY, seed=seed + 1))
    res = run(p, kernels.random_inputs(p, density=DENSITY, seed=seed), mode="fixed", trace=True)
    per_kernel = intersect_floors(p, res)
    if not any(per_kernel):
        return None
    nodes, bound = [], 0
    for k, floors, stats, sent in zip(p.kernels, per_kernel, res.stats["kernels"], res.trace_tokens):
        feeds = {(d.node, d.port): s.id for s in k.streams.values() for d in s.dsts}
        # a kernel takes at least its busiest stream's tokens and its slowest intersect's floor
        bound += max([stats["stream_bound"]] + [f for f, _ in floors.values()])
        for nid, (floor, busy) in floors.items():
            ins = [sent[feeds[(nid, f"crd{i}")]] for i in range(k.nodes[nid].params.get("arity", 2))]
            row = {"kernel": k.name, "node": nid, "input_tokens": [len(s) for s in ins], "floor": floor,
                   "firings": busy, "firings_over_floor": round(busy / floor, 4)}
            if len(ins) == 2:
                row["buffered_cycles"] = {str(w): buffered_steps(ins[0], ins[1], w) for w in WINDOWS}
                row["buffered_over_input_tokens"] = {w: round(c / max(row["input_tokens"]), 4)
                                                     for w, c in row["buffered_cycles"].items()}
            nodes.append(row)
    sb = sum(k["stream_bound"] for k in res.stats["kernels"])
    return {"kernel": name, "scale": scale, "cycles": res.cycles, "stream_bound": sb,
            "cycles_over_stream_bound": round(res.cycles / sb, 4), "floor_bound": bound,
            "floor_over_stream_bound": round(bound / sb, 4), "cycles_over_floor_bound": round(res.cycles / bound, 4),
            "intersects": nodes}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results", "intersect_floor.json"))
    ap.add_argument("--rtl", default=os.path.join(HERE, "results", "rtl.json"),
                    help="rtl_bench results whose RTL cycles the simulator's must equal")
    ap.add_argument("--kernels", nargs="*", default=list(kernels.SUITE))
    args = ap.parse_args(argv)
    rtl = {}
    if os.path.exists(args.rtl):
        with open(args.rtl) as f:
            rtl = {r["kernel"]: r for r in json.load(f)["results"] if "rtl_cycles" in r}
    rows = []
    for name in args.kernels:
        r = measure(name, kernel_scale(name, DEFAULT_SCALE))
        if r is None:
            continue
        if name in rtl:
            r["rtl_cycles"] = rtl[name]["rtl_cycles"]
            r["rtl_cycles_equal"] = rtl[name]["rtl_cycles"] == r["cycles"]
        rows.append(r)
        print(f"{name}: {r['cycles']} cycles, stream bound {r['stream_bound']}, floor bound {r['floor_bound']} "
              f"({r['cycles_over_stream_bound']} / {r['cycles_over_floor_bound']})", file=sys.stderr)
    doc = {"benchmark": "intersect-bound kernels against the matched-pair floor", "scale": DEFAULT_SCALE,
           "density": DENSITY, "target_over_stream_bound": TARGET_RATIO, "windows": list(WINDOWS),
           "summary": {"kernels": len(rows),
                       "max_cycles_over_floor_bound": max(r["cycles_over_floor_bound"] for r in rows),
                       "min_floor_over_stream_bound": min(r["floor_over_stream_bound"] for r in rows),
                       "all_rtl_cycles_equal": all(r.get("rtl_cycles_equal", False) for r in rows)},
           "results": rows}
    with atomic_write(args.out) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
