"""Accuracy of the fixed-point element-wise functions against float64 (docs/numbers.md's table).

    python benchmarks/function_accuracy.py [-o benchmarks/results/functions.json] [--docs docs/numbers.md]

For each function of ``fuseflow/tensors/fixedfn.py`` and each format (the default fixed32.16 and the
16-bit fixed16.8), over the function's documented input range (``fixedfn.input_range``): every input for
16-bit formats, 200 000 sampled inputs for 32-bit ones (``fixedfn.accuracy_inputs``), the maximum and mean
absolute error of the fixed result against float64 of the exact input. Writes JSON and, with ``--docs``,
rewrites the table between the ``functions-accuracy`` markers of that page (tests check the two agree).
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))

FORMATS = ((32, 16), (16, 8))
BEGIN = "<!-- functions-accuracy:begin (benchmarks/function_accuracy.py writes this table) -->"
END = "<!-- functions-accuracy:end -->"


def measure(samples=200_000):
    from fuseflow.tensors.fixed import FixedFormat
    from fuseflow.tensors.fixedfn import FUNCTIONS, accuracy, accuracy_inputs, input_range
    rows = []
    for width, frac in FORMATS:
        fmt = FixedFormat(width, frac)
        for name in FUNCTIONS:
            raws = accuracy_inputs(name, fmt, samples)
            mx, mean = accuracy(name, fmt, raws)
            lo, hi = input_range(name, fmt)
            rows.append({"function": name, "format": fmt.name, "lo": fmt.decode(lo), "hi": fmt.decode(hi),
                         "inputs": int(len(raws)), "exhaustive": bool(len(raws) == hi - lo + 1),
                         "max_abs": mx, "mean_abs": mean, "max_lsb": mx / fmt.lsb, "mean_lsb": mean / fmt.lsb})
    return rows


def markdown(rows):
    lines = ["| function | format | input range | inputs | max abs error | mean abs error | max (LSB) | mean (LSB) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rng = f"[{r['lo']:.8g}, {r['hi']:.8g}]"
        n = f"all {r['inputs']}" if r["exhaustive"] else f"{r['inputs']} sampled"
        lines.append(f"| `{r['function']}` | {r['format']} | {rng} | {n} | {r['max_abs']:.3g} | {r['mean_abs']:.3g} "
                     f"| {r['max_lsb']:.2f} | {r['mean_lsb']:.2f} |")
    return "\n".join(lines) + "\n"


def replace_block(text, table):
    """``text`` with the lines between the markers replaced by ``table``."""
    if BEGIN not in text or END not in text:
        raise ValueError("the page has no functions-accuracy markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}{END}{tail}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default="benchmarks/results/functions.json")
    ap.add_argument("--docs", default=None, help="page whose functions-accuracy table to rewrite")
    ap.add_argument("--samples", type=int, default=200_000)
    args = ap.parse_args(argv)
    from fuseflow.cli import atomic_write
    t0 = time.monotonic()
    rows = measure(args.samples)
    doc = {"formats": [f"fixed{w}.{f}" for w, f in FORMATS], "samples": args.samples, "results": rows,
           "seconds": round(time.monotonic() - t0, 1)}
    with atomic_write(args.out) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    if args.docs:
        with open(args.docs) as f:
            text = f.read()
        with atomic_write(args.docs) as f:
            f.write(replace_block(text, markdown(rows)))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
