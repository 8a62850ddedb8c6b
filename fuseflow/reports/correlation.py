"""RTL-vs-simulator correlation report: every kernel of a suite through the reference simulator and the RTL.

    python -m fuseflow.reports.correlation [--suite default|quick|models] [-o report/] [--simulator verilator|amaranth]
                                           [--only TEXT] [--exclude TEXT] [--cache DIR] [--no-trace] [--no-progress] [--strict]

For every entry of the suite (:mod:`fuseflow.reports.suites`) the fixed-mode reference simulator
(``fuseflow.sim.run(..., mode="fixed")``) gives the golden tensors and cycles; the elaborated kernel top
(:mod:`fuseflow.hw`) runs the same program on the same data under Verilator (or Amaranth's simulator), its
written tensors are read back through the host port and compared **bit for bit**, and its cycle counter is set
beside the simulator's. ``outdir`` receives ``correlation.md``, ``correlation.json`` and ``correlation.png``
(log-log scatter with the parity line), with R^2 on raw and log cycles, median and maximum absolute percentage
error, and a per-kernel table. Outputs that differ, runs that never finish and builds that fail are failures of
the report (listed, never dropped).

Where a kernel disagrees (cycles, outputs, or a run that never finished), the report names where: the per-channel
probe counters of the kernel top (tokens popped + tokens waiting = tokens pushed) are compared with the simulator's
per-stream token counts, and, for runs short enough, the cycle of every push on every stream is traced on both
sides (the RTL in Amaranth's simulator with a waveform, the reference through its channel objects); the stream
whose push times diverge first, and the op producing it, are named.

Builds are shared: the entries of a suite that differ only in data (and, for all-compressed tensors, in size) get
one set of declared capacities (the maximum over their data), so their Verilog is identical and one Verilator
build (cached like :func:`fuseflow.hw.verilator.build_verilator`) serves them all.

Exit status: 0 when every output is bit-identical (``--strict``: and every cycle count equal), 1 otherwise (the
report is still written), 2 for bad arguments (``error: what: why``, nothing written).
"""

import argparse
import hashlib
import io
import json
import math
import os
import pickle
import shutil
import sys
import tempfile
import time

import numpy as np

from ..cli import atomic_write, check_output_dir, commit_outputs, main_guard, nonnegative_int, output_dir
from ..errors import FuseFlowError
from .sweep import Task, parse_scheduler, run_sweep
from .suites import SUITES, get_suite

#: the issue's targets
TARGET_R2 = 0.999
TARGET_MEDIAN_APE = 1.0
#: runs (reference cycles) longer than this are not traced in Amaranth's simulator by default
MAX_TRACE_CYCLES = 20_000
SIMULATORS = ("verilator", "amaranth")


class ReportError(FuseFlowError):
    default_what = "correlation"


# --- statistics -------------------------------------------------------------------------------------

def _pairs(sim, rtl, log=False):
    x = np.asarray(sim, dtype=float)
    y = np.asarray(rtl, dtype=float)
    if x.shape != y.shape:
        raise ValueError("sim and rtl need the same length")
    if log:
        x, y = np.log10(np.maximum(x, 1.0)), np.log10(np.maximum(y, 1.0))
    return x, y


def r2_parity(sim, rtl, log=False):
    """Coefficient of determination of the RTL cycles predicted by the simulator's (the parity line y = x):
    ``1 - sum((rtl - sim)^2) / sum((rtl - mean(rtl))^2)``; on log10 cycles with ``log``. NaN for fewer than two
    points; when every RTL count is the same, 1.0 if the prediction is exact, else NaN."""
    x, y = _pairs(sim, rtl, log)
    if len(x) < 2:
        return float("nan")
    ss_res = float(np.sum((y - x) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    if ss_tot == 0.0:
        return 1.0 if ss_res == 0.0 else float("nan")
    return 1.0 - ss_res / ss_tot


def r2_fit(sim, rtl, log=False):
    """Squared Pearson correlation of simulator and RTL cycles (the R^2 of a least-squares line, as validation
    papers usually quote it); on log10 cycles with ``log``. NaN when undefined."""
    x, y = _pairs(sim, rtl, log)
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    r = np.corrcoef(x, y)[0, 1]
    return float(r * r)


def ape(sim, rtl):
    """Absolute percentage error of each RTL count against the simulator's: ``100 |rtl - sim| / sim``
    (0 when both are 0, inf when only the simulator's is)."""
    x, y = _pairs(sim, rtl)
    out = np.empty_like(x)
    for i, (a, b) in enumerate(zip(x, y)):
        out[i] = 0.0 if a == b else (math.inf if a == 0 else 100.0 * abs(b - a) / a)
    return out


def metrics(sim, rtl):
    """The report's summary numbers over paired cycle counts."""
    e = ape(sim, rtl)
    n = len(e)
    return {
        "n": n,
        "r2": r2_parity(sim, rtl),
        "r2_log": r2_parity(sim, rtl, log=True),
        "r2_fit": r2_fit(sim, rtl),
        "r2_fit_log": r2_fit(sim, rtl, log=True),
        "median_ape": float(np.median(e)) if n else float("nan"),
        "mean_ape": float(np.mean(e)) if n else float("nan"),
        "max_ape": float(np.max(e)) if n else float("nan"),
        "exact": int(np.sum(np.asarray(sim) == np.asarray(rtl))) if n else 0,
    }


# --- builds shared across data ----------------------------------------------------------------------

def family_key(program):
    """Entries with the same key get the same capacities (and so one build): the program's JSON without
    capacities and ``expr``, with each tensor's shape reduced to the sizes of its dense levels (compressed levels'
    sizes do not reach the hardware)."""
    d = program.to_json()
    d.pop("expr", None)
    for t in d["tensors"]:
        t.pop("capacity", None)
        levels, mo = t["format"]["levels"], t["format"]["mode_order"]
        t["shape"] = [t["shape"][mo[i]] if lv == "dense" else None for i, lv in enumerate(levels)]
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def program_key(program):
    d = program.to_json()
    for t in d["tensors"]:
        t.pop("capacity", None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def measured_capacities(program, inputs, ref):
    """Capacities the data needs: inputs packed, outputs and intermediates as the reference run wrote them."""
    from ..hw.elaborate import packed_inputs
    caps = {n: list(p.capacities()) for n, p in packed_inputs(program, inputs).items()}
    caps.update({n: list(p.capacities()) for n, p in ref.tensors.items()})
    return caps


def with_capacities(program, caps):
    """A copy of ``program`` declaring ``caps`` (at least 1 per array) instead of its own capacities: one build
    serves a family's data (the builders declare worst-case capacities, which differ with the dense size)."""
    from ..samml import Program
    p = Program.from_json(program.to_json())
    for name, t in p.tensors.items():
        c = caps.get(name)
        if c is None:
            continue
        t.capacity = [max(1, int(a)) for a in c]
    return p


def _merge_caps(acc, caps):
    for n, c in caps.items():
        acc[n] = [max(a, b) for a, b in zip(acc[n], c)] if n in acc else list(c)


# --- diagnosis ----------------------------------------------------------------------------------------

def stream_order(kernel):
    """Stream ids of a kernel in the topological order of their producers (ties by id)."""
    import networkx as nx
    order = {n: i for i, n in enumerate(nx.lexicographical_topological_sort(kernel.graph(), key=lambda n: n))}
    return sorted(kernel.streams, key=lambda s: (order.get(kernel.streams[s].src.node, 1 << 30), s))


def rtl_stream_counts(manifest, probes):
    """Tokens each stream carried in the RTL: per ``(kernel, stream)``, tokens popped + tokens waiting of one of
    its channels (every consumer channel of a stream receives every token). None when probes were not read."""
    if not probes:
        return None
    out = {}
    for ch in manifest["channels"]:
        pr = probes.get(f"{ch['kernel']}.{ch['stream']} -> {ch['dst']}")
        if pr is None or "tokens" not in pr:
            continue
        n = int(pr["tokens"]) + int(pr.get("level", 0))
        key = (ch["kernel"], ch["stream"])
        out[key] = max(out.get(key, 0), n)
    return out


def count_divergences(program, ref, manifest, probes):
    """Streams whose token counts differ between the simulator (``ref.stats``) and the RTL probes, in program
    order (kernel order, then producers' topological order). Each item: kernel, stream, producer, op, sim, rtl."""
    rtl = rtl_stream_counts(manifest, probes)
    if rtl is None:
        return None
    out = []
    for ki, k in enumerate(program.kernels):
        sim_streams = ref.stats["kernels"][ki]["streams"]
        for sid in stream_order(k):
            s = k.streams[sid]
            a, b = sim_streams.get(sid, 0), rtl.get((k.name, sid))
            if b is None or a == b:
                continue
            out.append({"kernel": k.name, "stream": sid, "producer": f"{s.src.node}.{s.src.port}",
                        "op": k.nodes[s.src.node].op, "sim": int(a), "rtl": int(b)})
    return out


def reference_trace(program, inputs):
    """Per kernel ``{stream id: [cycle of each push]}`` of the fixed-mode reference run."""
    from ..sim import run
    logs = run(program, inputs, mode="fixed", trace=True).trace
    if len(logs) != len(program.kernels):
        raise ReportError("trace", f"recorded {len(logs)} kernel runs for {len(program.kernels)} kernels")
    return logs


def _ident(name):
    return "".join(c if c.isalnum() else "_" for c in str(name))


def parse_vcd_pushes(text, program):
    """Per kernel ``{stream id: [kernel cycle of each push]}`` from a waveform of the kernel top (Amaranth's VCD):
    the ``push_<stream>`` and ``en_<kernel>`` wires of each ``kernel_<name>`` scope, sampled just before each
    rising clock edge; kernel cycle 0 is the first edge at which ``en_<kernel>`` is high."""
    want = {}                      # vcd id -> [(kind, kernel index, stream)]
    clk_id = None
    scopes = []
    kscope = {f"kernel_{_ident(k.name)}": ki for ki, k in enumerate(program.kernels)}
    push_names = [{f"push_{_ident(sid)}": sid for sid in k.streams} for k in program.kernels]
    lines = iter(text.splitlines())
    for line in lines:
        tok = line.split()
        if not tok:
            continue
        if tok[0] == "$scope":
            scopes.append(tok[2])
        elif tok[0] == "$upscope":
            scopes.pop()
        elif tok[0] == "$var":
            vid, name = tok[3], tok[4]
            if name == "clk" and len(scopes) <= 2 and clk_id is None:
                clk_id = vid
            if scopes and scopes[-1] in kscope and len(scopes) >= 2:
                ki = kscope[scopes[-1]]
                if name == f"en_{_ident(program.kernels[ki].name)}":
                    want.setdefault(vid, []).append(("en", ki, None))
                elif name in push_names[ki]:
                    want.setdefault(vid, []).append(("push", ki, push_names[ki][name]))
        elif tok[0] == "$enddefinitions":
            break
    if clk_id is None:
        raise ReportError("trace", "no clk in the waveform")
    value = {}                     # vcd id -> value before the current timestamp
    pending = {}                   # changes at the current timestamp
    nk = len(program.kernels)
    cyc = [0] * nk
    out = [{sid: [] for sid in k.streams} for k in program.kernels]

    def advance():
        # a rising clock edge at this timestamp samples the values from before it
        if pending.get(clk_id) == 1 and value.get(clk_id, 0) == 0:
            en = [0] * nk
            for vid, roles in want.items():
                for kind, ki, _ in roles:
                    if kind == "en":
                        en[ki] = value.get(vid, 0)
            for vid, roles in want.items():
                if value.get(vid, 0):
                    for kind, ki, sid in roles:
                        if kind == "push" and en[ki]:
                            out[ki][sid].append(cyc[ki])
            for ki in range(nk):
                cyc[ki] += bool(en[ki])
        value.update(pending)
        pending.clear()

    for line in lines:
        if not line:
            continue
        c = line[0]
        if c == "#":
            advance()
            continue
        if c in "01xzXZ":
            vid, v = line[1:].strip(), 1 if c == "1" else 0
        elif c in "bB":
            parts = line.split()
            if len(parts) != 2:
                continue
            vid = parts[1]
            v = int(parts[0][1:], 2) if set(parts[0][1:]) <= {"0", "1"} else 0
        else:
            continue
        if vid == clk_id or vid in want:
            pending[vid] = v
    advance()
    return out


def rtl_trace(program, inputs, max_cycles, vcd_dir=None):
    """Per kernel ``{stream id: [cycle of each push]}`` of the RTL, run in Amaranth's simulator with a waveform.
    ``program`` must declare capacities that hold ``inputs`` (see :func:`with_capacities`)."""
    from ..hw.elaborate import build, check_inputs_fit, run_amaranth
    b = build(program)
    images = check_inputs_fit(b, inputs)
    with tempfile.TemporaryDirectory(prefix="fuseflow-trace-", dir=vcd_dir) as tmp:
        path = os.path.join(tmp, "trace.vcd")
        res = run_amaranth(b, images, max_cycles=max_cycles, vcd=path, read_probes=True)
        with open(path) as f:
            text = f.read()
    return parse_vcd_pushes(text, program), res


def first_divergence(program, sim_trace, rtl_trace_):
    """Streams whose push times differ, earliest divergence first. Each item: kernel, stream, producer, op,
    index (token number), sim_cycle and rtl_cycle of that token (None when that side pushed fewer tokens),
    sim_tokens, rtl_tokens."""
    found = []
    for ki, k in enumerate(program.kernels):
        order = {sid: i for i, sid in enumerate(stream_order(k))}
        a_all = sim_trace[ki] if ki < len(sim_trace) else {}
        b_all = rtl_trace_[ki] if ki < len(rtl_trace_) else {}
        for sid in k.streams:
            a, b = list(a_all.get(sid, [])), list(b_all.get(sid, []))
            if a == b:
                continue
            i = 0
            while i < min(len(a), len(b)) and a[i] == b[i]:
                i += 1
            ta = a[i] if i < len(a) else None
            tb = b[i] if i < len(b) else None
            at = min(t for t in (ta, tb) if t is not None)
            s = k.streams[sid]
            found.append({"kernel": k.name, "kernel_index": ki, "stream": sid,
                          "producer": f"{s.src.node}.{s.src.port}", "op": k.nodes[s.src.node].op,
                          "index": i, "sim_cycle": ta, "rtl_cycle": tb, "sim_tokens": len(a), "rtl_tokens": len(b),
                          "_key": (ki, at, order.get(sid, 1 << 30))})
    found.sort(key=lambda d: d["_key"])
    for d in found:
        d.pop("_key")
    return found


def _node_stats(ref, program, kernel_name, node):
    for ki, k in enumerate(program.kernels):
        if k.name == kernel_name:
            return ref.stats["kernels"][ki]["nodes"].get(node)
    return None


def describe_divergence(d, ref=None, program=None):
    """One sentence about a diverging stream (from :func:`first_divergence`)."""
    node = d["producer"].split(".")[0]
    text = f"kernel {d['kernel']}: stream {_stream_name(d)} first differs at token {d['index']}: "
    if d["sim_cycle"] is None:
        text += f"the RTL pushes it in cycle {d['rtl_cycle']}, the simulator pushes only {d['sim_tokens']} tokens"
    elif d["rtl_cycle"] is None:
        text += f"the simulator pushes it in cycle {d['sim_cycle']}, the RTL pushes only {d['rtl_tokens']} tokens"
    else:
        delta = d["rtl_cycle"] - d["sim_cycle"]
        text += (f"simulator cycle {d['sim_cycle']}, RTL cycle {d['rtl_cycle']} ({delta:+d}); "
                 f"{d['sim_tokens']} vs {d['rtl_tokens']} tokens in all")
    if ref is not None and program is not None:
        st = _node_stats(ref, program, d["kernel"], node)
        if st:
            text += f" (simulator: {node} busy {st['busy']}, blocked {st['blocked']} cycles)"
    return text


def _stream_name(d):
    """``s3 (from scan_B1.crd, op level_scan)`` / ``scan_B1.crd (op level_scan)``."""
    if d["stream"] == d["producer"]:
        return f"{d['stream']} (op {d['op']})"
    return f"{d['stream']} (from {d['producer']}, op {d['op']})"


def describe_count(d):
    return (f"kernel {d['kernel']}: stream {_stream_name(d)} carries {d['rtl']} tokens in the RTL, {d['sim']} in "
            f"the simulator")


# --- one entry ----------------------------------------------------------------------------------------

def _summarise_result(rec, program, ref, man, res, max_cycles):
    from ..hw.top import compare_tensors, stuck_report
    rec["done"] = bool(res["done"])
    rec["rtl_cycles"] = int(res["cycles"]) if res["done"] else None
    rec["rtl_kernel_cycles"] = [int(res["kernel_cycles"][k.name]) for k in program.kernels]
    rec["wall_cycles"] = int(res["wall_cycles"])
    rec["rtl_run_seconds"] = res.get("run_seconds")
    if not res["done"]:
        rec["status"] = "stuck"
        rec["problems"] = [stuck_report(man, res, max_cycles)]
    else:
        problems = compare_tensors(ref.tensors, res["tensors"])
        if res["overflow"]:
            mems = [mm["name"] for mm in man["host"]["memories"] if res["overflow"] >> mm["sel"] & 1]
            problems.append(f"writes past the capacity of {', '.join(mems)}")
        if res.get("op_overflow"):
            ops = [o for i, o in enumerate(man["overflow_ops"]) if res["op_overflow"] >> i & 1]
            problems.append(f"{', '.join(ops)} exceeded its capacity (dim)")
        rec["problems"] = problems
        rec["status"] = "mismatch" if problems else "ok"
    rec["cycles_equal"] = bool(res["done"] and rec["rtl_kernel_cycles"] == rec["sim_kernel_cycles"])
    rec["counts"] = count_divergences(program, ref, man, res.get("probes"))


def _diagnose(rec, entry, ref, rtl_program, opts):
    """Fill ``rec['diagnosis']`` for an entry that disagrees (cycles, outputs, counts, or never finished)."""
    disagree = (rec["status"] != "ok" or not rec["cycles_equal"] or rec.get("counts"))
    if not disagree or rec["status"] == "error":
        return
    diag = {"kernels": [], "counts": rec.get("counts") or [], "trace": None, "first": None, "text": []}
    for k, a, b in zip(entry.program.kernels, rec["sim_kernel_cycles"], rec["rtl_kernel_cycles"]):
        if a != b:
            diag["kernels"].append({"kernel": k.name, "sim": a, "rtl": b})
            diag["text"].append(f"kernel {k.name}: RTL {b} cycles, simulator {a} ({b - a:+d})")
    if diag["counts"]:
        diag["text"].append("token counts differ: " + describe_count(diag["counts"][0])
                            + (f" (and {len(diag['counts']) - 1} more stream(s))" if len(diag["counts"]) > 1 else ""))
    if not opts["trace"]:
        diag["text"].append("push-time trace skipped (--no-trace)")
    elif ref.cycles > opts["max_trace_cycles"]:
        diag["text"].append(f"push-time trace skipped: {ref.cycles} cycles is over the trace limit "
                            f"({opts['max_trace_cycles']})")
    else:
        try:
            sim_tr = reference_trace(entry.program, entry.inputs)
            rtl_tr, _ = rtl_trace(rtl_program, entry.inputs, 4 * ref.cycles + 1000)
            div = first_divergence(entry.program, sim_tr, rtl_tr)
            diag["trace"] = div[:10]
            if div:
                diag["first"] = div[0]
                diag["text"].append("first divergence: " + describe_divergence(div[0], ref, entry.program))
            else:
                diag["text"].append("push times of every stream agree in Amaranth's simulator (the difference is "
                                    "specific to the " + rec["simulator"] + " run)")
        except Exception as exc:  # noqa: BLE001 - a diagnosis that fails must not lose the report
            diag["text"].append(f"push-time trace unavailable ({type(exc).__name__}: {exc})")
    if diag["first"] is None and diag["counts"]:
        c = diag["counts"][0]
        diag["first"] = {k: c[k] for k in ("kernel", "stream", "producer", "op")}
    rec["diagnosis"] = diag


# --- the whole suite ----------------------------------------------------------------------------------

def correlate(suite, outdir, simulator="verilator", *, cache=None, progress=True, trace=True,
              max_trace_cycles=MAX_TRACE_CYCLES, only=None, exclude=None, rtl_variant=None, stream=None,
              scheduler=None):
    """Run ``suite`` (a name or a :class:`~fuseflow.reports.suites.Suite`) through the reference simulator and
    the RTL, and write ``outdir/correlation.{md,json,png}``. Returns the report (the JSON's content).

    ``simulator``: ``verilator`` (cached builds under ``cache``, default :func:`fuseflow.hw.verilator.cache_root`)
    or ``amaranth``. ``only``: keep entries whose name contains this text; ``exclude``: drop those whose name contains
    this one (e.g. ``decoder.ff``, whose Verilator builds take an hour). ``trace``: trace push times of
    disagreeing runs (up to ``max_trace_cycles`` reference cycles). ``rtl_variant(program) -> program``: changes
    the program on the RTL side only (fault injection, for testing the diagnosis). ``scheduler``: where the
    families of entries (entries sharing capacities and so builds) run: ``serial`` (default), ``local[:N]`` or a
    Dask scheduler's ``tcp://`` address (:mod:`fuseflow.reports.sweep`); the report is the same either way."""
    if simulator not in SIMULATORS:
        raise ReportError("--simulator", f"unknown simulator {simulator!r} (known: {', '.join(SIMULATORS)})")
    outdir = os.fspath(outdir)
    check_output_dir(outdir)
    parse_scheduler(scheduler)
    if simulator == "verilator":
        from ..hw import verilator as vl
        vl.ensure_verilator()
        cache = os.fspath(cache) if cache else str(vl.cache_root())
    suite = get_suite(suite)
    entries = [e for e in suite.entries if (not only or only in e.name) and not (exclude and exclude in e.name)]
    if not entries:
        raise ReportError("--only" if only else "--exclude", f"no entry of suite '{suite.name}' is left "
                          f"(--only {only!r}, --exclude {exclude!r})")
    # each finished entry is also written here by its worker, so an interrupt keeps the entries a family finished
    # before it (a family's records otherwise come back only when the whole family is done)
    checkpoints = tempfile.mkdtemp(prefix="fuseflow-correlate-")
    opts = {"trace": trace, "max_trace_cycles": max_trace_cycles, "checkpoints": checkpoints}
    t_start = time.monotonic()
    # entries of one family share capacities (and so Verilator builds): a family is one task of the sweep
    families = {}
    for i, e in enumerate(entries):
        families.setdefault(family_key(e.program), []).append(i)
    tasks = [Task(fam, correlate_family, ([entries[i] for i in idxs], simulator, cache, opts, rtl_variant),
                  weight=len(idxs)) for fam, idxs in families.items()]
    records = [None] * len(entries)

    def collect(fam, recs):
        for i, rec in zip(families[fam], recs):
            records[i] = rec

    try:
        run_sweep(tasks, scheduler, progress=progress, stream=stream, on_result=collect,
                  label=f"correlation ({suite.name}, {simulator})")
    except KeyboardInterrupt as exc:
        # keep what was measured: a partial report, the entries not run marked as such
        partial = getattr(exc, "fuseflow_partial", None)       # the interrupted family's finished entries
        if partial:
            collect(*partial)
        for i, e in enumerate(entries):
            if records[i] is None or records[i]["status"] is None:
                records[i] = read_checkpoint(checkpoints, e.name) or records[i]
            if records[i] is None:
                records[i] = _new_record(e, simulator)
            if records[i]["status"] is None:
                records[i].update(status="not run", problems=["interrupted before this entry ran"])
        report = make_report(suite, entries, records, simulator, time.monotonic() - t_start)
        report["interrupted"] = True
        write_report(report, outdir)
        commit_outputs()             # the partial report is a consistent set of files: keep it
        raise
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)
    report = make_report(suite, entries, records, simulator, time.monotonic() - t_start)
    write_report(report, outdir)
    return report


def _checkpoint_path(checkpoints, name):
    return os.path.join(checkpoints, hashlib.sha256(name.encode()).hexdigest()[:24] + ".pickle")


def write_checkpoint(checkpoints, rec):
    """Keep a finished entry's record under ``checkpoints`` (best effort: a worker on another machine, which
    does not see the directory, loses only what an interrupt would have lost anyway)."""
    if not checkpoints:
        return
    path = _checkpoint_path(checkpoints, rec["name"])
    try:
        with open(path + ".tmp", "wb") as f:
            pickle.dump(rec, f)
        os.replace(path + ".tmp", path)     # a reader sees the whole record or none
    except OSError:
        pass


def read_checkpoint(checkpoints, name):
    """The record :func:`write_checkpoint` kept for entry ``name``, or None."""
    try:
        with open(_checkpoint_path(checkpoints, name), "rb") as f:
            return pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def _new_record(e, simulator):
    return {"name": e.name, "meta": dict(e.meta), "simulator": simulator, "status": None, "problems": [],
            "program": e.program.name, "kernels": [k.name for k in e.program.kernels],
            "sim_cycles": None, "rtl_cycles": None, "sim_kernel_cycles": None, "rtl_kernel_cycles": None,
            "cycles_equal": False, "done": False, "counts": None, "diagnosis": None, "build": None}


def correlate_family(entries, simulator, cache, opts, rtl_variant=None):
    """Reference runs, builds and RTL runs of one family of entries (same :func:`family_key`); returns their
    records in order. One task of the sweep: it needs nothing from the other families."""
    records = []
    try:
        _correlate_family(entries, simulator, cache, opts, rtl_variant, records)
    except KeyboardInterrupt as exc:
        exc.fuseflow_partial = (family_key(entries[0].program), records)
        raise
    return records


def _correlate_family(entries, simulator, cache, opts, rtl_variant, records):
    from ..sim import run
    refs, caps = {}, {}
    # 1. reference runs (golden tensors, cycles, per-stream counts) and the capacities the family needs
    for i, e in enumerate(entries):
        rec = _new_record(e, simulator)
        records.append(rec)
        try:
            t0 = time.perf_counter()
            ref = run(e.program, e.inputs, mode="fixed")
            rec["sim_seconds"] = time.perf_counter() - t0
            rec["sim_cycles"] = int(ref.cycles)
            rec["sim_kernel_cycles"] = [int(c) for c in ref.kernel_cycles]
            refs[i] = ref
            rec["family"] = family_key(e.program)
            _merge_caps(caps, measured_capacities(e.program, e.inputs, ref))
        except Exception as exc:  # noqa: BLE001 - a failing entry is a failure of the report, not of the run
            rec["status"] = "error"
            rec["problems"] = [f"reference simulator: {_why(exc)}"]
    # 2. group entries by program (same Verilog across data) and run them build by build
    groups = {}
    for i, e in enumerate(entries):
        if i in refs:
            groups.setdefault(program_key(e.program), []).append(i)
    for idxs in groups.values():
        _run_group(entries, records, refs, idxs, caps, simulator, cache, rtl_variant, opts)


def _why(exc):
    if isinstance(exc, FuseFlowError):
        return f"{exc.what}: {exc.why}"
    return f"{type(exc).__name__}: {exc}"


def _run_group(entries, records, refs, idxs, caps, simulator, cache, rtl_variant, opts):
    """Build once and run every entry of ``idxs`` (one program); fills ``records``."""
    from ..hw.elaborate import build, check_inputs_fit, check_outputs_fit
    if simulator == "verilator":
        from ..hw import verilator as vl

    def rtl_program(e):
        p = with_capacities(e.program, caps)
        return rtl_variant(p) if rtl_variant else p

    first = entries[idxs[0]]
    b = bdir = man = None
    build_info = {"module": None, "seconds": None, "cached": None, "entries": len(idxs)}
    if simulator == "verilator":
        try:
            t0 = time.perf_counter()
            b = build(rtl_program(first))
            text = b.verilog()
            before = set(os.listdir(cache)) if os.path.isdir(cache) else set()
            bdir = vl.build_verilator(text, b.name, root=cache)
            build_info.update(module=b.name, seconds=time.perf_counter() - t0,
                              cached=os.path.basename(str(bdir)) in before, dir=str(bdir))
            man = b.manifest()
        except Exception as exc:  # noqa: BLE001
            for i in idxs:
                records[i].update(status="error", problems=[f"build: {_why(exc)}"], build=build_info)
            return
    for i in idxs:
        e, rec, ref = entries[i], records[i], refs[i]
        rec["build"] = build_info
        max_cycles = 4 * ref.cycles + 10_000
        try:
            rp = rtl_program(e)
            t0 = time.perf_counter()
            if simulator == "verilator":
                images = check_inputs_fit(b, e.inputs)
                check_outputs_fit(b.plan, ref)
                res = vl.run_verilator(bdir, b.name, man, images, max_cycles, read_probes=True)
                rman = man
            else:
                from ..hw.elaborate import run_amaranth
                bb = build(rp)
                rman = bb.manifest()
                images = check_inputs_fit(bb, e.inputs)
                check_outputs_fit(bb.plan, ref)
                res = run_amaranth(bb, images, max_cycles=max_cycles, read_probes=True)
            rec["rtl_seconds"] = time.perf_counter() - t0
            _summarise_result(rec, e.program, ref, rman, res, max_cycles)
            _diagnose(rec, e, ref, rp, opts)
        except Exception as exc:  # noqa: BLE001
            rec.update(status="error", problems=[f"rtl: {_why(exc)}"])
        write_checkpoint(opts.get("checkpoints"), rec)


def make_report(suite, entries, records, simulator, seconds):
    finished = [r for r in records if r["done"] and r["rtl_cycles"] is not None and r["sim_cycles"] is not None]
    sim = [r["sim_cycles"] for r in finished]
    rtl = [r["rtl_cycles"] for r in finished]
    m = metrics(sim, rtl)
    errs = ape(sim, rtl) if finished else []
    for r, err in zip(finished, errs):
        r["ape"] = float(err)
    failures = [r for r in records if r["status"] != "ok"]
    disagree = [r for r in finished if not r["cycles_equal"]]
    builds = {}
    for r in records:
        b = r.get("build") or {}
        if b.get("module"):
            builds[b.get("dir", b["module"])] = b
    return {
        "fuseflow_correlation": 1,
        "suite": suite.name,
        "simulator": simulator,
        "entries": len(records),
        "compared": len(finished),
        "bit_identical": sum(r["status"] == "ok" for r in records),
        "failures": len(failures),
        "cycle_disagreements": len(disagree),
        "metrics": m,
        "targets": {"r2": TARGET_R2, "median_ape": TARGET_MEDIAN_APE,
                    "met": bool(finished) and _ge(m["r2"], TARGET_R2) and m["median_ape"] <= TARGET_MEDIAN_APE},
        "notes": list(suite.notes),
        "builds": {"distinct": len(builds), "compiled": sum(1 for b in builds.values() if b.get("cached") is False),
                   "cached": sum(1 for b in builds.values() if b.get("cached"))},
        "seconds": seconds,
        "created": time.strftime("%Y-%m-%d %H:%M:%S"),
        "records": records,
    }


def _ge(a, b):
    return a is not None and not (isinstance(a, float) and math.isnan(a)) and a >= b


# --- writing ----------------------------------------------------------------------------------------------

def _clean(x):
    """JSON-safe: NaN and infinities become null, numpy scalars plain numbers."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return None if math.isnan(x) or math.isinf(x) else x
    return x


def _num(x, fmt="{:.6f}"):
    if x is None or (isinstance(x, float) and (math.isnan(x))):
        return "n/a"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return fmt.format(x)


def _meta_cols(r):
    m = r["meta"]
    if m.get("source") == "compiled":
        density = "model data" if m.get("data") == "model" else f"{m.get('density', '')}"
        return m.get("kernel", ""), "-", density, f"fuse={m.get('fuse')}"
    if m.get("source") == "blocked":
        return m.get("kernel", ""), str(m.get("size")), f"{m.get('density', '')} (blocks)", f"block {m.get('block')}"
    kind = "large level (bounds_latency 2)" if m.get("source") == "large level" else "classic"
    return m.get("kernel", ""), str(m.get("size") or "default"), f"{m.get('density', '')}", kind


def render_markdown(report):
    m = report["metrics"]
    L = [f"# RTL vs simulator correlation: suite `{report['suite']}`", ""]
    L.append(f"{report['entries']} kernels; RTL on {report['simulator']}; reference simulator in fixed mode. "
             f"Generated {report['created']} in {report['seconds'] / 60:.1f} min "
             f"({report['builds']['distinct']} distinct builds: {report['builds']['compiled']} compiled, "
             f"{report['builds']['cached']} from the cache).")
    if report.get("interrupted"):
        L.append("")
        L.append("**Interrupted**: the entries marked `not run` were not measured.")
    L.append("")
    L.append("| | |")
    L.append("|---|---|")
    L.append(f"| kernels compared (RTL finished) | {report['compared']} of {report['entries']} |")
    L.append(f"| outputs bit-identical | {report['bit_identical']} of {report['entries']} |")
    L.append(f"| failures (mismatch, never finished, error) | {report['failures']} |")
    L.append(f"| cycle counts equal | {m['exact']} of {report['compared']} |")
    L.append(f"| R^2 (raw cycles, parity line) | {_num(m['r2'])} |")
    L.append(f"| R^2 (log cycles, parity line) | {_num(m['r2_log'])} |")
    L.append(f"| r^2 of a fitted line (raw / log) | {_num(m['r2_fit'])} / {_num(m['r2_fit_log'])} |")
    L.append(f"| median absolute % error | {_num(m['median_ape'], '{:.3f}')} % |")
    L.append(f"| mean absolute % error | {_num(m['mean_ape'], '{:.3f}')} % |")
    L.append(f"| maximum absolute % error | {_num(m['max_ape'], '{:.3f}')} % |")
    t = report["targets"]
    L.append(f"| targets (R^2 >= {t['r2']}, median <= {t['median_ape']} %) | {'met' if t['met'] else 'NOT met'} |")
    L.append("")
    L.append("R^2 is `1 - sum((rtl - sim)^2) / sum((rtl - mean(rtl))^2)`: the parity line y = x as the model, no fit. "
             "Errors are `100 |rtl - sim| / sim` per kernel, over the kernels whose RTL run finished "
             "(outputs that differ are still failures below).")
    L.append("")
    L.append("![RTL vs simulator cycles](correlation.png)")
    L.append("")
    if report["notes"]:
        L.append("Notes on the suite: " + "; ".join(report["notes"]) + ".")
        L.append("")
    recs = report["records"]
    fails = [r for r in recs if r["status"] != "ok"]
    L.append("## Failures")
    L.append("")
    if not fails:
        L.append("None: every RTL output is bit-identical to the reference simulator's.")
    for r in fails:
        L.append(f"- **{r['name']}** ({r['status']}): " + "; ".join(r["problems"] or ["?"]))
    L.append("")
    L.append("## Disagreements")
    L.append("")
    dis = [r for r in recs if r.get("diagnosis")]
    if not dis:
        L.append("None: every finished kernel has the simulator's cycle count and every stream its token count.")
    for r in dis:
        L.append(f"- **{r['name']}**: " + "; ".join(r["diagnosis"]["text"]))
    L.append("")
    L.append("## Per kernel")
    L.append("")
    L.append("| kernel | program | size | density | kind | sim cycles | RTL cycles | diff | error % | outputs | "
             "where it differs |")
    L.append("|---|---|---|---|---|---:|---:|---:|---:|---|---|")
    for r in recs:
        prog, size, dens, kind = _meta_cols(r)
        diff = (r["rtl_cycles"] - r["sim_cycles"]) if r["rtl_cycles"] is not None and r["sim_cycles"] is not None \
            else None
        where = ""
        d = r.get("diagnosis")
        if d and d.get("first"):
            f = d["first"]
            where = f"{f['kernel']}: {_stream_name(f)}"
        out = {"ok": "bit-identical", "mismatch": "MISMATCH", "stuck": "NEVER FINISHED", "error": "ERROR"}.get(
            r["status"], str(r["status"]))
        L.append(f"| {r['name']} | {prog} | {size} | {dens} | {kind} | {_num(r['sim_cycles'], '{}')} | "
                 f"{_num(r['rtl_cycles'], '{}')} | {_num(diff, '{:+d}')} | {_num(r.get('ape'), '{:.2f}')} | {out} | "
                 f"{where} |")
    L.append("")
    return "\n".join(L)


def render_plot(report, f):
    """The log-log scatter (PNG) into the binary file ``f``."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    recs = [r for r in report["records"] if r["done"] and r["rtl_cycles"] is not None]
    m = report["metrics"]
    fig, ax = plt.subplots(figsize=(6.4, 6.0), dpi=110)
    styles = {"classic": ("tab:blue", "o"), "compiled": ("tab:orange", "s"), "blocked": ("tab:green", "^"),
              "large level": ("tab:purple", "D")}
    for src, (color, marker) in styles.items():
        pts = [r for r in recs if r["meta"].get("source") == src and r["status"] == "ok"]
        if pts:
            ax.scatter([max(1, r["sim_cycles"]) for r in pts], [max(1, r["rtl_cycles"]) for r in pts], s=18,
                       c=color, marker=marker, alpha=0.75, label=f"{src} ({len(pts)})")
    bad = [r for r in recs if r["status"] != "ok"]
    if bad:
        ax.scatter([max(1, r["sim_cycles"]) for r in bad], [max(1, r["rtl_cycles"]) for r in bad], s=40, c="red",
                   marker="x", label=f"outputs differ ({len(bad)})")
    vals = [max(1, r[k]) for r in recs for k in ("sim_cycles", "rtl_cycles")] or [1, 10]
    lo, hi = min(vals) / 1.5, max(vals) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="parity (RTL = simulator)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel("reference simulator cycles (fixed mode)")
    ax.set_ylabel(f"RTL cycles ({report['simulator']})")
    ax.set_title(f"suite {report['suite']}: {report['compared']} kernels\n"
                 f"R$^2$ = {_num(m['r2'], '{:.5f}')} (log: {_num(m['r2_log'], '{:.5f}')}), "
                 f"median err {_num(m['median_ape'], '{:.2f}')} %, max {_num(m['max_ape'], '{:.2f}')} %",
                 fontsize=10)
    if not recs:
        ax.text(0.5, 0.5, "no finished RTL run", transform=ax.transAxes, ha="center")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(f, format="png")
    plt.close(fig)


def write_report(report, outdir):
    """Write ``correlation.md``, ``.json`` and ``.png`` into ``outdir`` (each atomically)."""
    md = render_markdown(report)
    js = json.dumps(_clean(report), indent=1) + "\n"
    png = io.BytesIO()
    render_plot(report, png)
    with atomic_write(os.path.join(outdir, "correlation.png"), "wb") as f:
        f.write(png.getvalue())
    with atomic_write(os.path.join(outdir, "correlation.json")) as f:
        f.write(js)
    with atomic_write(os.path.join(outdir, "correlation.md")) as f:
        f.write(md + "\n")


# --- command line -------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ReportError("arguments", message)


def parser(prog="python -m fuseflow.reports.correlation"):
    ap = _Parser(prog=prog, description="Correlate RTL cycles with the reference simulator's over a kernel suite "
                                        "and write correlation.md/.json/.png.")
    ap.add_argument("--suite", default="default", help=f"kernel suite: {' | '.join(SUITES)} (default: default)")
    ap.add_argument("-o", "--output", "--out", dest="out", metavar="DIR",
                   default="report", type=output_dir, help="output directory (default: report)")
    ap.add_argument("--simulator", default="verilator", help="verilator (default) or amaranth")
    ap.add_argument("--only", help="run only the entries whose name contains this text")
    ap.add_argument("--exclude", help="leave out the entries whose name contains this text")
    ap.add_argument("--cache", help="Verilator build cache (default: $FUSEFLOW_HW_CACHE or "
                                    "~/.cache/fuseflow/verilator)")
    ap.add_argument("--no-trace", action="store_true", help="do not trace push times of disagreeing kernels")
    ap.add_argument("--max-trace-cycles", type=nonnegative_int, default=MAX_TRACE_CYCLES,
                    help=f"longest run (reference cycles) to trace in Amaranth's simulator "
                         f"(default {MAX_TRACE_CYCLES})")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    ap.add_argument("--scheduler", default="serial",
                    help="where the kernels run: serial (default), local[:N] (a local Dask cluster of N worker "
                         "processes, default: one per core) or tcp://HOST:PORT (an existing Dask scheduler)")
    ap.add_argument("--strict", action="store_true", help="exit 1 also when a cycle count differs")
    ap.add_argument("--render", metavar="JSON", help="only re-render correlation.md/.png (and .json) into -o from "
                                                      "an earlier correlation.json; runs nothing")
    return ap


def load_report(path):
    """A report written earlier (``correlation.json``)."""
    from ..samml.io import load_json
    report = load_json(path, ReportError)
    if not isinstance(report, dict) or report.get("fuseflow_correlation") != 1 or "records" not in report:
        raise ReportError(path, "not a correlation report (no fuseflow_correlation/records)")
    return report


def _main(argv, prog=None):
    args = (parser(prog) if prog else parser()).parse_args(argv)
    if args.suite not in SUITES:
        raise ReportError("--suite", f"unknown suite {args.suite!r} (known: {', '.join(SUITES)})")
    if args.simulator not in SIMULATORS:
        raise ReportError("--simulator", f"unknown simulator {args.simulator!r} (known: {', '.join(SIMULATORS)})")
    if args.max_trace_cycles < 0:
        raise ReportError("--max-trace-cycles", "must not be negative")
    check_output_dir(args.out)
    if args.render:
        report = load_report(args.render)
        try:
            write_report(report, args.out)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ReportError(args.render, f"incomplete or malformed correlation report ({detail})") from None
        print(f"{os.path.join(args.out, 'correlation.md')}: re-rendered from {args.render}")
        return 0
    report = correlate(args.suite, args.out, args.simulator, cache=args.cache, progress=not args.no_progress,
                       trace=not args.no_trace, max_trace_cycles=args.max_trace_cycles, only=args.only,
                       exclude=args.exclude, scheduler=args.scheduler)
    m = report["metrics"]
    print(f"{os.path.join(args.out, 'correlation.md')}: {report['entries']} kernels ({report['suite']}, "
          f"{report['simulator']}), {report['bit_identical']} bit-identical, {report['failures']} failure(s), "
          f"{m['exact']}/{report['compared']} cycle counts equal")
    print(f"  R^2 {_num(m['r2'])} (log {_num(m['r2_log'])}), median error {_num(m['median_ape'], '{:.3f}')} %, "
          f"max {_num(m['max_ape'], '{:.3f}')} %")
    for r in report["records"]:
        if r["status"] != "ok":
            print(f"  FAIL {r['name']} ({r['status']}): {'; '.join(r['problems'])}")
        elif r.get("diagnosis"):
            print(f"  DIFF {r['name']}: {'; '.join(r['diagnosis']['text'])}")
    if report["failures"]:
        print(f"error: correlation: {report['failures']} kernel(s) failed (see {args.out}/correlation.md)",
              file=sys.stderr)
        return 1
    if args.strict and report["cycle_disagreements"]:
        print(f"error: correlation: {report['cycle_disagreements']} kernel(s) with a different cycle count",
              file=sys.stderr)
        return 1
    return 0


def main(argv=None, prog=None):
    """Entry point (``python -m fuseflow.reports.correlation``; ``python -m fuseflow.hw correlate`` passes the
    arguments after ``correlate`` and ``prog="python -m fuseflow.hw correlate"`` for its usage line). Returns the
    exit status."""
    return main_guard(lambda a: _main(a, prog), argv)


if __name__ == "__main__":
    sys.exit(main())
