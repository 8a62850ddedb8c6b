"""Synthesis table: every op alone and every kernel of the quick suite on ECP5-85F (Yosys + nextpnr, YoWASP).

    python benchmarks/synth_bench.py [-o benchmarks/results/synth.json] [--md benchmarks/results/synth.md]
                                     [--target ecp5-85f|ice40-up5k] [--only ops|kernels] [--match TEXT] [-j 2]
                                     [--names "alu sigmoid" "alu tanh" ...] [--merge other.json ...]
                                     [--seed 1] [--kernel-seeds 2 3]

Ops are synthesised alone with representative parameters (every variant that changes the datapath: alu per
operation, level_scan dense/compressed, spacc orders, ...), inside a registered-I/O wrapper
(:func:`fuseflow.boards.synth.RegisteredIO`: every input bit from a shift register, every output bit captured
into one), so every path is register to register; ops with tensor memories are also synthesised with 64-entry
memories on their memory ports ("+mem": the memory read is then part of the path; the compressed level_scan also
with 2048-entry memories, "+mem 2048", whose seg and first arrays are block RAM). Kernels are
whole kernel tops (:func:`fuseflow.hw.elaborate.build`, no probes, memories sized by random data at the given
scale) in the same wrapper. Targets: >= 150 MHz per op alone, >= 100 MHz per kernel.

Writes JSON (default benchmarks/results/synth.json) and a Markdown table (default benchmarks/results/synth.md).
``--names`` synthesises only the named rows and merges them into the existing JSON (rows of the same name are
replaced, new ones added in table order); the Markdown table is rewritten from the merged rows. ``--merge``
synthesises nothing: it folds the rows of other result files (``--names`` runs made in another checkout, with
``-o`` pointing elsewhere) into ``--out`` the same way. The JSON keeps the runs that made its rows (``runs``:
seconds and row names); ``seconds`` is the wall time of the runs whose rows the table still shows, so a merge that
replaces every row takes the new runs' time and a partial one adds its run to those still represented.

A kernel's Fmax moves by 10 MHz and more between placements (routing is most of its paths), so one seed says
little about a kernel near its target. ``--kernel-seeds 2 3`` also places and routes every kernel at those seeds:
its row keeps ``fmax_by_seed`` ({seed: MHz}, the row's own seed included) and the table shows each and the median,
with a second verdict by the median.
"""

import argparse
import concurrent.futures as cf
import json
import os
import platform
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))

OP_TARGET_MHZ = 150.0
KERNEL_TARGET_MHZ = 100.0
MEM_DEPTH = 64
#: the compressed level_scan also with memories of this depth: its seg and first arrays (2048 x 16 and x 18 bits)
#: then pass fuseflow.samml.storage.BOUNDS_BLOCK_MIN_BITS and are block RAM read with the output register (the
#: level_scan's bounds_latency 2, as the kernel top gives it for that storage)
LARGE_MEM_DEPTH = 2048
#: seconds per tool run (rsqrt, some 75 stages of dividers and square roots, is the slow one: 20 minutes of
#: routing on a loaded 2-core machine)
TOOL_TIMEOUT = 3000

#: op -> [(label, params, constructor keywords)]; ops not listed are synthesised with default parameters
VARIANTS = {
    "level_scan": [("compressed", {"tensor": "T", "level": 0, "format": "compressed"}, {}),
                   ("dense", {"tensor": "T", "level": 0, "format": "dense", "dim": 64}, {})],
    "array": [("", {"tensor": "T"}, {})],
    "locate": [("dim 64", {"dim": 64}, {})],
    "repeat": [("ref", {}, {"any_kind": "ref"}), ("val", {}, {"any_kind": "val"})],
    "alu": [(op, {"op": op}, {}) for op in ("add", "sub", "max", "relu", "mul", "div", "exp", "sigmoid", "tanh",
                                            "gelu", "sqrt", "rsqrt", "log", "abs", "square")]
           + [("mul const", {"op": "mul", "const": 0.5}, {})],
    "reduce": [("sum", {"op": "sum"}, {}), ("max", {"op": "max"}, {}), ("min", {"op": "min"}, {}),
               ("sum with crd", {"op": "sum"}, {"connected": {"val", "crd"}})],
    # (arities 4 and 5: compiled programs use them, e.g. decoder, graphsage2 and elementwise; look-ahead is
    # arity 2's alone, the registry's input_depth_for)
    "intersect": [("arity 2", {"arity": 2}, {}), ("arity 3", {"arity": 3}, {}),
                  ("arity 2, look-ahead", {"arity": 2}, {"lookahead": True}),
                  ("arity 4", {"arity": 4}, {}), ("arity 5", {"arity": 5}, {})],
    "union": [("arity 2", {"arity": 2}, {"any_kind": "val"})],
    "level_write": [("level 0", {"tensor": "T", "level": 0, "format": "compressed"}, {}),
                    ("level 1", {"tensor": "T", "level": 1, "format": "compressed"}, {})],
    "value_write": [("", {"tensor": "T"}, {})],
    "mask_scan": [("causal 64x64", {"mask": "causal", "rows": 64, "dim": 64}, {}),
                  ("band w=4 64x64", {"mask": "band:w=4", "rows": 64, "dim": 64}, {}),
                  ("bigbird 64x64 block 8", {"mask": "bigbird:block=8,window=3,global=1,random=1,seed=0",
                                             "rows": 64, "dim": 64}, {})],
    "crd_mask": [("causal 64x64", {"mask": "causal", "rows": 64, "dim": 64, "arity": 1}, {}),
                 ("bigbird 64x64 block 8", {"mask": "bigbird:block=8,window=3,global=1,random=1,seed=0",
                                            "rows": 64, "dim": 64, "arity": 1}, {})],
    "spacc": [("order 1, dim 64", {"order": 1, "dim": 64}, {}),
              ("order 1, dim 64, min", {"order": 1, "dim": 64, "op": "min"}, {}),
              ("order 2, 16 x 16", {"order": 2, "dim": 16, "dim_outer": 16}, {})],
    # B x B multipliers (4 MULT18X18D each at 32 bits): B = 8 would need 256 of the 156
    "parallelize": [("lanes 4", {"lanes": 4}, {"any_kind": "ref"})],
    "serialize": [("lanes 4", {"lanes": 4}, {"any_kind": "val"})],
    "block_matmul": [("block 2", {"block": 2}, {}), ("block 4", {"block": 4}, {}),
                     ("block 4 vector", {"block": 4, "rhs": "vector"}, {})],
}

#: kernels of the quick suite (name, scale, density); "fused_chain3" is fuseflow/programs/chain3.ff compiled
KERNELS = [("spmv_csr", 8, 0.3), ("spmv_dcsr", 8, 0.3), ("elementwise_add", 8, 0.3), ("vector_add", 16, 0.5),
           ("spmspm_gustavson", 8, 0.3), ("fused_chain3", 8, 0.3)]


def op_cases():
    from fuseflow.hw.ops import MODULES
    from fuseflow.samml.storage import BLOCK_BOUNDS_LATENCY
    cases = []
    for op in MODULES:
        for label, params, kw in VARIANTS.get(op, [("", {}, {})]):
            name = f"{op} {label}".strip()
            cases.append({"kind": "op", "name": name, "op": op, "params": params, "kw": kw, "mem_depth": None})
            if op in ("level_scan", "array") and \
                    not (op == "level_scan" and params.get("format") == "dense"):
                cases.append({"kind": "op", "name": f"{name} +mem", "op": op, "params": params, "kw": kw,
                              "mem_depth": MEM_DEPTH})
                if op == "level_scan":
                    cases.append({"kind": "op", "name": f"{name} +mem {LARGE_MEM_DEPTH}", "op": op,
                                  "params": dict(params, bounds_latency=BLOCK_BOUNDS_LATENCY), "kw": kw,
                                  "mem_depth": LARGE_MEM_DEPTH})
    return cases


def kernel_cases():
    return [{"kind": "kernel", "name": name, "n": n, "density": dens} for name, n, dens in KERNELS]


def kernel_program(name, n):
    from fuseflow.samml import kernels
    if name == "fused_chain3":
        from fuseflow.compiler import compile_program, parse_file
        here = os.path.dirname(os.path.abspath(__file__))
        return compile_program(parse_file(os.path.join(here, "..", "fuseflow", "programs", "chain3.ff")),
                               fuse="regions").program
    return kernels.build(name, n)


def run_case(case, target, seed=1):
    """One synthesis (runs in a worker process). Returns a JSON-able row."""
    from fuseflow.boards.synth import synth_component
    from fuseflow.errors import FuseFlowError
    t0 = time.monotonic()
    row = {k: v for k, v in case.items() if k != "kw"}
    if "kw" in case:
        row["kw"] = {k: sorted(v) if isinstance(v, set) else v for k, v in case["kw"].items()}
    try:
        if case["kind"] == "op":
            from fuseflow.hw.ops import MODULES
            comp = MODULES[case["op"]](case["params"], **case["kw"])
            res = synth_component(comp, case["name"], target, OP_TARGET_MHZ, mem_depth=case["mem_depth"],
                                  timeout=TOOL_TIMEOUT, seed=seed)
        else:
            from fuseflow.hw.elaborate import build
            from fuseflow.samml import kernels
            program = kernel_program(case["name"], case["n"])
            inputs = kernels.random_inputs(program, density=case["density"], seed=1)
            b = build(program, inputs, probes=False)
            mems = b.plan.memories
            row["memories"] = len(mems)
            row["memory_bits"] = sum(m.depth * m.width for m in mems)
            row["ops"] = sum(len(k.nodes) for k in program.kernels)
            row["kernels"] = len(program.kernels)
            res = synth_component(b.top, case["name"], target, KERNEL_TARGET_MHZ, timeout=TOOL_TIMEOUT,
                                  seed=seed)
        d = res.to_json()
        row.update({k: d[k] for k in ("luts", "ffs", "brams", "dsps", "lutram_luts", "logic_cells", "fmax_mhz",
                                      "target_mhz", "meets_target", "io_bits", "critical_path")})
        row["cells"] = d["cells"]
        row["fmax_mhz"] = None if row["fmax_mhz"] is None else round(row["fmax_mhz"], 2)
    except FuseFlowError as exc:
        row["error"] = f"{exc.what}: {exc.why}"
    row["seconds"] = round(time.monotonic() - t0, 1)
    row["seed"] = seed
    return row


def _seeds(rows):
    seeds = sorted({r.get("seed", 1) for r in rows})
    return f"seed {seeds[0]}" if len(seeds) == 1 else "seeds " + ", ".join(map(str, seeds)) + " (per row in the JSON)"


def tool_versions():
    from fuseflow.boards.synth import TARGETS, tool_path
    out = {}
    for name in ("yosys", TARGETS["ecp5-85f"]["nextpnr"]):
        try:
            flag = "-V" if name == "yosys" else "--version"
            p = subprocess.run([tool_path(name), flag], capture_output=True, text=True, timeout=600)
            text = p.stdout + p.stderr
            m = re.search(r"(Yosys [\w.+-]+)", text) or re.search(r"Version (nextpnr-[\w.+-]+)", text)
            out[name] = m.group(1) if m else text.strip().splitlines()[-1][:80]
        except Exception as exc:  # noqa: BLE001 - informational only
            out[name] = f"unknown ({exc})"
    return out


def describe(row):
    if "error" in row:
        return f"ERROR {row['error']}"
    io = sum(row["io_bits"].values())
    return (f"{row['luts']} LUT, {row['ffs']} FF ({io} I/O), {row['brams']} BRAM, {row['dsps']} DSP, "
            f"{row['fmax_mhz']} MHz (target {row['target_mhz']:g}: {'met' if row['meets_target'] else 'MISSED'})")


def bram_note(rows):
    """What the BRAM column holds: the rows that use block RAM or that no row does."""
    with_bram = [r["name"] for r in rows if "error" not in r and r["brams"]]
    if not with_bram:
        return "**BRAM is 0 everywhere**."
    return "Rows with block RAM (DP16KD): " + ", ".join(with_bram) + "."


def markdown(doc):
    rows = doc["results"]
    target = doc["target"]
    lines = [f"# Synthesis table: {doc['device']} ({target})", "",
             f"Generated by `benchmarks/synth_bench.py` ({doc['tools'].get('yosys', '?')}; "
             f"{doc['tools'].get(doc['nextpnr'], '?')}), nextpnr {_seeds(doc['results'])}, one run per row. "
             "Each design sits in a registered-I/O wrapper (every input bit from a shift register, every output "
             "bit captured into one), so every path is register to register; the FF column includes those "
             "wrapper registers (in brackets), LUTs include the wrapper's output capture multiplexers (about one "
             "per output bit). Fmax is nextpnr's post-route estimate for the slowest clock path.", "",
             "Tensor and accumulator memories keep the timing contract of docs/samml.md with synchronous reads "
             "addressed one cycle ahead (tensor reads: the data registered once more, MEMORY_READ_LATENCY 2), "
             "so those of 1 Kbit and more (crd, vals, spacc's accumulator; the +mem rows' 64-entry crd and vals) "
             "go to block RAM: tensor memories as DP16KD instances whose output register holds the read data "
             "(Yosys would map them without it), spacc's accumulator likewise (two read ports of latency 2, "
             "its merge pipelined); level_scan's seg and first arrays (read into registers that hold "
             "the head's entries) go to block RAM from 16 Kbit, read there with latency 2 (the +mem 2048 row: "
             "DP16KD with the output register, the clock enable on the address; bounds_latency 2, docs/samml.md "
             "level_scan), smaller ones and smaller memories to LUT RAM "
             "(TRELLIS_DPR16X4, counted in LUTs; the LUT-RAM column shows how many) (docs/hardware.md, "
             "\"Memories\"). Channel FIFOs keep their head and the entry behind it in registers. "
             + bram_note(rows) +
             " DSPs are the MULT18X18D blocks of the 32-bit fixed-point multipliers. On ECP5 the alu "
             "instantiates both primitives itself (docs/hardware.md, alu datapath): MULT18X18D with its input "
             "and output registers, and the function tables as DP16KD with the output register (REGMODE "
             "OUTREG); Yosys would map them without those registers.", ""]
    ops = [r for r in rows if r["kind"] == "op"]
    ks = [r for r in rows if r["kind"] == "kernel"]

    def path(r):
        cp = r.get("critical_path") or {}
        if not cp:
            return ""
        src = ", ".join(s.replace("fuseflow/hw/", "") for s in cp.get("sources", [])[:3])
        return (f"{cp['delay_ns']:.1f} ns, {cp['logic_levels']} levels ({cp['routing_ns']:.1f} ns routing): "
                f"{cp['from']} -> {cp['to']}" + (f" [{src}]" if src else ""))

    def table(rs, extra_cols=()):
        head = ["design", *[c for c, _ in extra_cols], "LUT", "LUT RAM", "FF (I/O)", "BRAM", "DSP",
                "Fmax MHz", "target", "critical path"]
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in rs:
            if "error" in r:
                cells = [r["name"]] + [""] * len(extra_cols) + [f"error: {r['error']}"]
                cells += [""] * (len(head) - len(cells))
                out.append("| " + " | ".join(cells) + " |")
                continue
            io = sum(r["io_bits"].values())
            status = "met" if r["meets_target"] else "**missed**"
            cells = [r["name"], *[str(f(r)) for _, f in extra_cols], str(r["luts"]), str(r["lutram_luts"]),
                     f"{r['ffs']} ({io})", str(r["brams"]), str(r["dsps"]), f"{r['fmax_mhz']:.1f}",
                     f"{r['target_mhz']:g} {status}", path(r)]
            out.append("| " + " | ".join(cells) + " |")
        return out

    def verdict(rs, tgt):
        ok = [r for r in rs if "error" not in r and r["meets_target"]]
        bad = [r for r in rs if "error" not in r and not r["meets_target"]]
        err = [r for r in rs if "error" in r]
        s = f"{len(ok)} of {len(rs)} meet {tgt:g} MHz"
        if bad:
            s += "; below: " + ", ".join(f"{r['name']} ({r['fmax_mhz']:.0f})" for r in sorted(bad, key=lambda r: r["fmax_mhz"]))
        if err:
            s += f"; {len(err)} failed"
        return s

    lines += [f"## Ops alone (target {OP_TARGET_MHZ:g} MHz)", "", verdict(ops, OP_TARGET_MHZ) + ".", ""]
    lines += table(ops)
    lines += ["", f"## Kernels of the quick suite (target {KERNEL_TARGET_MHZ:g} MHz)", "",
              verdict(ks, KERNEL_TARGET_MHZ) + ".", ""]
    lines += table(ks, (("ops", lambda r: r.get("ops", "")), ("memory bits", lambda r: r.get("memory_bits", ""))))
    seeded = [r for r in ks if "error" not in r and r.get("fmax_by_seed")]
    if seeded:
        lines += ["", f"Across placement seeds (`--kernel-seeds`; {median_verdict(seeded, KERNEL_TARGET_MHZ)}):", "",
                  "| design | Fmax MHz by nextpnr seed | median |", "|---|---|---|"]
        for r in seeded:
            by = r["fmax_by_seed"]
            cells = ", ".join(f"seed {k}: {v:.1f}" for k, v in sorted(by.items(), key=lambda kv: int(kv[0])))
            lines.append(f"| {r['name']} | {cells} | {median_fmax(r):.1f} |")
    if doc.get("notes"):
        lines += ["", "## Where the targets are missed", ""] + [f"- {n}" for n in doc["notes"]]
    lines += ["", f"Total: {len(rows)} runs in {doc['seconds']:.0f} s on {doc['machine']}.", ""]
    return "\n".join(lines)


def median_fmax(row):
    """The median of a row's Fmax over its seeds (``fmax_by_seed``; the row's own Fmax without one)."""
    vals = sorted(v for v in (row.get("fmax_by_seed") or {}).values() if v is not None) or [row["fmax_mhz"]]
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def median_verdict(rows, tgt):
    bad = [r for r in rows if median_fmax(r) < tgt]
    s = f"by the median {len(rows) - len(bad)} of {len(rows)} meet {tgt:g} MHz"
    if bad:
        s += "; below: " + ", ".join(f"{r['name']} ({median_fmax(r):.0f})" for r in bad)
    return s


def fold_seeds(rows, extra):
    """Give each kernel row of ``rows`` ``fmax_by_seed`` from itself and its runs at other seeds (``extra``,
    rows of the same names)."""
    for r in rows:
        runs = [x for x in extra if x["name"] == r["name"] and "error" not in x]
        if r["kind"] != "kernel" or "error" in r or not runs:
            continue
        r["fmax_by_seed"] = {str(x["seed"]): x["fmax_mhz"] for x in [r, *runs]}
    return rows


def notes(rows):
    """Remarks on the misses: for each design below target, where its critical path runs (the Amaranth source
    lines nextpnr attributes to it), then the source lines shared by several of them."""
    out = []
    by_src = {}
    for r in rows:
        if "error" in r:
            out.append(f"**{r['name']}** has no result: {r['error']}")
            continue
        if r["meets_target"]:
            continue
        cp = r.get("critical_path") or {}
        srcs = [s.replace("fuseflow/", "") for s in cp.get("sources", [])]
        for s in srcs[:6]:
            by_src.setdefault(s, []).append(r["name"])
        out.append(f"**{r['name']}** ({r['fmax_mhz']:.0f} MHz, {cp.get('delay_ns', 0):.1f} ns, "
                   f"{cp.get('logic_levels', '?')} logic levels): {cp.get('from', '?')} -> {cp.get('to', '?')}"
                   + (f"; source lines on the path: {', '.join(srcs[:6])}" if srcs else ""))
    shared = [(s, n) for s, n in by_src.items() if len(n) > 1]
    for src, names in sorted(shared, key=lambda kv: -len(kv[1]))[:8]:
        out.append(f"`{src}` is on the critical path of {len(names)} designs below target: {', '.join(names)}")
    return out


def merge_rows(old, new, order):
    """``old`` rows with ``new`` ones replacing rows of the same name; new names go to their place in
    ``order`` (the table order of every case); old rows of names no longer in ``order`` are dropped."""
    rank = {n: i for i, n in enumerate(order)}
    gone = [r["name"] for r in old if r["name"] not in rank]
    if gone:
        print(f"dropped (no longer a case): {', '.join(gone)}", file=sys.stderr)
    old = [r for r in old if r["name"] in rank]
    by_name = {r["name"]: r for r in old}
    by_name.update({r["name"]: r for r in new})
    olds = [r["name"] for r in old]
    names = olds + [r["name"] for r in new if r["name"] not in olds]
    return [by_name[n] for n in sorted(names, key=lambda n: (rank.get(n, len(rank)), olds.index(n) if n in olds
                                                            else 0))]


def runs_of(doc):
    """The runs that made ``doc``'s rows, ``[{"seconds": s, "rows": [name, ...]}]``; a file written before runs
    were kept counts as one run that made all its rows."""
    if "runs" in doc:
        return doc["runs"]
    return [{"seconds": doc.get("seconds") or 0, "rows": [r["name"] for r in doc.get("results", [])]}]


def merge_runs(runs, later, kept):
    """``runs`` with each of ``later`` taking over the rows it made; a run left without a row (every row it made
    replaced, or no longer a case: not in ``kept``) drops out. Returns (runs, seconds): the table's wall time
    is that of the runs whose rows it shows, so a merge that replaces every row takes the new runs' time.
    Builds new run dicts; the arguments are left as they are."""
    for new in later:
        taken = set(new["rows"])
        runs = [dict(run, rows=[n for n in run["rows"] if n not in taken]) for run in runs] + [new]
    runs = [dict(run, rows=[n for n in run["rows"] if n in kept]) for run in runs]
    runs = [run for run in runs if run["rows"]]
    return runs, round(sum(run["seconds"] or 0 for run in runs), 1)


def merge_files(out, md, files, order):
    """``--merge``: the rows of ``files`` (later files win) replace or join those of ``out``; tools, machine and
    targets stay ``out``'s; the seconds are those of the runs whose rows the table keeps (:func:`merge_runs`);
    the table is rendered again."""
    from fuseflow.cli import atomic_write
    try:
        with open(out) as f:
            doc = json.load(f)
        news, later = [], []
        for path in files:
            with open(path) as f:
                other = json.load(f)
            if other.get("target") != doc.get("target"):
                print(f"error: --merge: {path}: target {other.get('target')!r} is not {doc.get('target')!r}",
                      file=sys.stderr)
                return 2
            news += other["results"]
            later += runs_of(other)
        runs = runs_of(doc)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"error: --merge: {e}", file=sys.stderr)
        return 2
    doc["results"] = merge_rows(doc["results"], news, order)
    doc["runs"], doc["seconds"] = merge_runs(runs, later, {r["name"] for r in doc["results"]})
    doc["notes"] = notes(doc["results"])
    with atomic_write(out) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    with atomic_write(md or os.path.splitext(out)[0] + ".md") as f:
        f.write(markdown(doc))
    print(f"{out}: {len(news)} row(s) merged from {len(files)} file(s)")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-o", "--out", default="benchmarks/results/synth.json")
    ap.add_argument("--md", default=None, help="Markdown table (default: beside the JSON, .md)")
    ap.add_argument("--target", default="ecp5-85f")
    ap.add_argument("--only", choices=("ops", "kernels"))
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--names", nargs="+", metavar="NAME",
                    help="synthesise only these rows (e.g. 'alu sigmoid') and merge them into --out")
    ap.add_argument("--match", help="only the designs whose name contains this text (e.g. mask_scan)")
    ap.add_argument("--seed", type=int, default=1,
                    help="nextpnr's placement seed (default 1, the committed table's); another seed shows how far "
                         "a design moves between placements")
    ap.add_argument("--kernel-seeds", nargs="+", type=int, default=[], metavar="SEED",
                    help="also place and route every kernel at these nextpnr seeds (the table shows Fmax per seed "
                         "and the median)")
    ap.add_argument("--merge", nargs="+", metavar="JSON",
                    help="synthesise nothing: merge the rows of these result files (runs made elsewhere, e.g. "
                         "with --names -o other.json) into --out and re-render its table")
    args = ap.parse_args(argv)
    from fuseflow.boards.synth import TARGETS
    from fuseflow.cli import atomic_write
    if args.target not in TARGETS:
        print(f"error: --target: unknown target {args.target!r} (have: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    all_cases = ([] if args.only == "kernels" else op_cases()) + ([] if args.only == "ops" else kernel_cases())
    every_name = [c["name"] for c in op_cases() + kernel_cases()]          # the table's rows, whatever --only
    if args.merge:
        return merge_files(args.out, args.md, args.merge, every_name)
    cases = all_cases
    if args.names:
        known = {c["name"] for c in all_cases}
        bad = [n for n in args.names if n not in known]
        if bad:
            print(f"error: --names: unknown row {bad[0]!r} (rows look like 'alu exp', 'spacc order2')",
                  file=sys.stderr)
            return 2
        cases = [c for c in all_cases if c["name"] in args.names]
    if args.match:
        cases = [c for c in cases if args.match in c["name"]]
    t0 = time.monotonic()
    print(f"synthesising {len(cases)} designs for {args.target} with {args.jobs} job(s); the first YoWASP call "
          f"compiles WebAssembly (about a minute)", flush=True)
    versions = tool_versions()
    jobs = [(c, args.seed) for c in cases] + [(c, s) for s in args.kernel_seeds if s != args.seed
                                              for c in cases if c["kind"] == "kernel"]
    results = [None] * len(jobs)
    with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futs = {pool.submit(run_case, c, args.target, s): i for i, (c, s) in enumerate(jobs)}
        done = 0
        for fut in cf.as_completed(futs):
            i = futs[fut]
            r = results[i] = fut.result()
            done += 1
            at = f" (seed {r['seed']})" if r["seed"] != args.seed else ""
            print(f"[{done:2d}/{len(jobs)}] {r['name'] + at:28s} {describe(r)}  ({r['seconds']} s)", flush=True)
    rows = fold_seeds(results[:len(cases)], results[len(cases):])
    seconds = round(time.monotonic() - t0, 1)
    runs = [{"seconds": seconds, "rows": [r["name"] for r in rows]}]
    if args.names and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        rows = merge_rows(old["results"], rows, every_name)
        runs, seconds = merge_runs(runs_of(old), runs, {r["name"] for r in rows})
    t = TARGETS[args.target]
    doc = {
        "target": args.target, "device": t["device"], "nextpnr": t["nextpnr"], "tools": versions,
        "op_target_mhz": OP_TARGET_MHZ, "kernel_target_mhz": KERNEL_TARGET_MHZ, "mem_depth": MEM_DEPTH,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "seconds": seconds, "runs": runs, "results": rows, "notes": notes(rows),
    }
    md = args.md or os.path.splitext(args.out)[0] + ".md"
    with atomic_write(args.out) as f:
        f.write(json.dumps(doc, indent=1) + "\n")
    with atomic_write(md) as f:
        f.write(markdown(doc))
    ops = [r for r in rows if r["kind"] == "op" and "error" not in r]
    ks = [r for r in rows if r["kind"] == "kernel" and "error" not in r]
    print(f"{args.out}, {md}: {sum(r['meets_target'] for r in ops)}/{len(ops)} ops >= {OP_TARGET_MHZ:g} MHz, "
          f"{sum(r['meets_target'] for r in ks)}/{len(ks)} kernels >= {KERNEL_TARGET_MHZ:g} MHz "
          f"({time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
