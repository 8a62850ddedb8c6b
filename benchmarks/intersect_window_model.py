"""How close can a merging intersect come to the stream bound? A behavioural model, not the simulator.

Two random sorted fibres of length L (same density) are intersected by a merge that pops at most one token per
input per cycle. A step pops the lower head when it is below the other head, and also pops the other head when
the lower input's visible window (its next ``window - 1`` coordinates) shows that it skips it. ``window = 1`` is
the intersect without look-ahead, ``window = 2`` the look-ahead of ``fuseflow/sim/ops/intersect.py``. The ratio
reported is steps / max(L_a, L_b) (+1 for the closing stop on both), the quantity the RTL benchmark's
"RTL / stream bound" measures for intersect-bound kernels. Beside it, per row: the matched-pair floor
(``fuseflow.sim.bounds``: no intersect that pops a match's tokens together does better, whatever its window) and
:func:`buffered_steps`, a decoupled intersect that keeps ``window`` popped tokens per input and is not bound by
that floor. Writes benchmarks/results/intersect_model.json.
"""

import argparse
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from fuseflow.cli import atomic_write  # noqa: E402
from fuseflow.sim.bounds import matched_pair_floor  # noqa: E402

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


def _prefix(window):
    """The coordinates at the front of a window up to its first stop, and whether a stop follows them."""
    out = []
    for x in window:
        if isinstance(x, str):
            return out, True
        out.append(x)
    return out, False


def buffered_steps(a, b, window):
    """Cycles of :func:`buffered_run`."""
    return buffered_run(a, b, window)[0]


def buffered_run(a, b, window):
    """(cycles, emitted tokens) of a *buffered* (decoupled) intersect on two whole coordinate streams (stops as strings,
    ending with ``"D"``), inputs always ready. Each input moves one token per cycle from its channel into a window
    of ``window`` tokens (usable from the next cycle), whatever the other does. Per cycle, from the windows: both
    start with a stop: emit it (D ends); else emit the lowest coordinate present in both windows' current fibres
    (dropping every token up to it on both sides), or, with none, drop each side's coordinates below the other
    side's last visible coordinate of the fibre (all of them once the other's fibre has ended). At most one output
    per cycle; any number of drops (a window x window comparison in hardware). Matched tokens need not leave their
    channels together, so this intersect is not bound by :func:`fuseflow.sim.bounds.matched_pair_floor`.
    """
    src, pos, win, pend = (list(a), list(b)), [0, 0], ([], []), [None, None]
    t, out = 0, []
    while True:
        t += 1
        wa, wb = win
        if wa and wb:
            if isinstance(wa[0], str) and isinstance(wb[0], str):
                if wa[0] != wb[0]:
                    raise ValueError(f"the inputs end a fibre differently: {wa[0]} and {wb[0]}")
                out.append(wa[0])
                if wa[0] == "D":
                    return t, out
                del wa[0], wb[0]
            else:
                (pa, ea), (pb, eb) = _prefix(wa), _prefix(wb)
                common = set(pa).intersection(pb)
                if common:
                    m = min(common)
                    out.append(m)
                    del wa[:pa.index(m) + 1], wb[:pb.index(m) + 1]
                else:
                    # what the other side shows: everything below its last visible coordinate cannot match
                    seen_b = INF if eb else (pb[-1] if pb else None)
                    seen_a = INF if ea else (pa[-1] if pa else None)
                    if seen_b is not None:
                        del wa[:sum(1 for x in pa if x < seen_b)]
                    if seen_a is not None:
                        del wb[:sum(1 for x in pb if x < seen_a)]
        for i in (0, 1):
            if pend[i] is not None:
                win[i].append(pend[i])
                pend[i] = None
            if pos[i] < len(src[i]) and len(win[i]) < window:
                pend[i] = src[i][pos[i]]
                pos[i] += 1


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
            total = bound = floor = buffered = 0
            for _ in range(args.trials):
                k = int(n * density)
                a, b = sorted(rng.sample(range(n), k)), sorted(rng.sample(range(n), k))
                total += steps(a, b, window)
                bound += max(len(a), len(b)) + 1
                floor += matched_pair_floor([a + ["D"], b + ["D"]])
                if window > 1:
                    buffered += buffered_steps(a + ["D"], b + ["D"], window)
            rows.append({"n": n, "density": density, "window": window, "steps_over_stream_bound":
                         round(total / bound, 4), "matched_pair_floor_over_stream_bound": round(floor / bound, 4),
                         "buffered_over_stream_bound": round(buffered / bound, 4) if window > 1 else None})
            print(f"n={n} density={density} window={window}: {total / bound:.3f} (floor {floor / bound:.3f}, "
                  f"buffered {buffered / bound:.3f})", file=sys.stderr)
    with atomic_write(args.out) as f:
        f.write(json.dumps({"model": "windowed merge intersect, one pop per input per cycle; the matched-pair "
                                     "floor of any such intersect; a buffered intersect with a window per input",
                            "trials": args.trials, "results": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
