"""How close can a merging intersect come to the stream bound? A behavioural model, not the simulator.

Two random sorted fibres of length L (same density) are intersected by a merge that pops at most one token per
input per cycle. A step pops the lower head when it is below the other head, and also pops the other head when
the lower input's visible window (its next ``window - 1`` coordinates) shows that it skips it. ``window = 1`` is
the intersect without look-ahead, ``window = 2`` the look-ahead of ``fuseflow/sim/ops/intersect.py``. The ratio
reported is steps / max(L_a, L_b) (+1 for the closing stop on both), the quantity the RTL benchmark's
"RTL / stream bound" measures for intersect-bound kernels. Writes benchmarks/results/intersect_model.json.
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fuseflow.cli import atomic_write  # noqa: E402

INF = float("inf")


def steps(a, b, window):
    """Firings of the windowed merge intersect on sorted coordinate lists ``a`` and ``b`` (+1: the stop)."""
    a = list(a) + [INF] * window
    b = list(b) + [INF] * window
    la, lb = len(a) - window, len(b) - window
    i = j = n = 0

    def skips(x, w):
        # x is unmatched if the other input's visible coordinates jump over it
        return x < w[0] or any(w[k] < x < w[k + 1] for k in range(len(w) - 1))

    while i < la or j < lb:
        n += 1
        x, y = a[i], b[j]
        if x == y:
            i, j = i + 1, j + 1
            continue
        pa, pb = skips(x, b[j:j + window]), skips(y, a[i:i + window])
        i, j = i + pa, j + pb
    return n + 1


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                        "intersect_model.json"))
    ap.add_argument("--trials", type=int, default=300)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    rows = []
    for n, density in ((32, 0.3), (1000, 0.05), (1000, 0.3)):
        for window in (1, 2, 3, 4, 8):
            total = bound = 0
            for _ in range(args.trials):
                k = int(n * density)
                a, b = sorted(rng.sample(range(n), k)), sorted(rng.sample(range(n), k))
                total += steps(a, b, window)
                bound += max(len(a), len(b)) + 1
            rows.append({"n": n, "density": density, "window": window, "steps_over_stream_bound":
                         round(total / bound, 4)})
            print(f"n={n} density={density} window={window}: {total / bound:.3f}", file=sys.stderr)
    with atomic_write(args.out) as f:
        f.write(json.dumps({"model": "windowed merge intersect, one pop per input per cycle",
                            "trials": args.trials, "results": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
