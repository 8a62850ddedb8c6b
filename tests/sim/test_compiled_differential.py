"""The compiled engine against the Python reference engine (issue "compiled simulator engine"): every output
bit-identical, every cycle count and every counter equal (:func:`fuseflow.sim.differential.compare`).

Compared, in float and fixed mode:

* the correlation suites (:mod:`fuseflow.reports.suites`): ``quick``, ``default`` (the classic kernels, every
  example program at every granularity, the blocked programs), ``parallel``, ``blocks`` and ``models``;
* every example program (``fuseflow/programs/*.ff``) at every granularity at 2 and 4 lanes of ``i``, where the
  compiler accepts them (at one lane they are the default suite's compiled entries: the same builder and data);
* the models bench's configurations (``benchmarks/models_bench.py``) at the small size of the ladder that the
  bench finished (``benchmarks/results/models.json``), in fixed mode (float too where the bench's compiled-engine
  simulation took under a second);
* FIFO depths 1 and 3, traces (the cycle and the token of every push) and an off-chip memory;
* programs that deadlock at depth 1: both engines raise the same DeadlockError;
* random programs (``tests/compiler/compiler_randprog.py``) on random data at random granularities and depths.

``make test`` runs a deterministic sample (every 7th default-suite entry, all of quick, a few of the others, 40
random programs); ``make slow`` runs everything (``-m slow``), with at least 1,000 random programs
(``FUSEFLOW_DIFF_RANDOM`` sets how many). A program the compiled engine cannot run yet (an op without a compiled
model, blocked tensors) is skipped with the reason, so the comparison grows as ops are ported.
"""

import collections
import copy
import functools
import glob
import json
import os
import sys

import numpy as np
import pytest

from fuseflow.errors import DeadlockError, FuseFlowError
from fuseflow.reports import suites
from fuseflow.samml import kernels
from fuseflow.sim import compiled, run
from fuseflow.sim import differential
from fuseflow.sim.differential import Unsupported

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MODES = ("float", "fixed")
#: the default run takes every DEFAULT_STRIDE-th entry of the default suite (and of the lanes sweep)
DEFAULT_STRIDE = 7
LANES_STRIDE = 8
#: entries left out of the default run's sample (seconds to minutes on the Python engine): slow only
HEAVY = ("decoder.ff",)
#: random programs: the default run and the slow run (at least 1,000: the issue's bar)
RANDOM_DEFAULT = 40
RANDOM_SLOW = int(os.environ.get("FUSEFLOW_DIFF_RANDOM", "1000"))


def _check(program, inputs, mode, **kw):
    """Both engines on one program: skip when the compiled engine cannot run it, fail on any difference."""
    try:
        mism = differential.compare(program, inputs, mode, **kw)
    except Unsupported as exc:
        pytest.skip(f"compiled engine: {exc.why}")
    assert not mism, f"the engines differ ({mode}, {kw}):\n" + "\n".join(mism)


# --- the correlation suites ----------------------------------------------------------------------------------
# Parameters are the entries' names, derived from suites.py's constants without building anything (building
# `default` compiles every example program); each suite is built once per session, on first use.
# test_suite_names_match_the_suites checks the derivation against the built suites.

def _program_files():
    ex = suites.examples_dir()
    return sorted(glob.glob(os.path.join(ex, "*.ff"))) if ex else []


def _base(path):
    return os.path.splitext(os.path.basename(path))[0]


def _lanes_id(parallel):
    return "/parallel=" + ",".join(f"{i}{n}" for i, n in parallel.items()) if parallel else ""


def _suite_names(name):
    """The names of a suite's entries (and of the compiled programs it may leave out, with a note)."""
    if name == "quick":
        return ([f"{k}/default/d{d:g}/s{s}" for k in suites.QUICK_KERNELS for s, d in suites.QUICK_DATASETS]
                + [f"{_base(f)}.ff/fuse={fuse}" for f, fuse in suites.QUICK_PROGRAMS])
    if name == "blocks":
        return ([f"{p}/b{b}/n{suites.BLOCK_GRID * b}/d{d:g}/s{s}" for p in suites.BLOCK_PROGRAMS
                 for b in suites.BLOCK_SIZES for s, d in suites.BLOCK_DATASETS]
                + [f"battention/b{b}/n{n}/d{d}/s{s}" for b, n, d, s in suites.BLOCK_ATTENTION_CASES])
    if name == "default":
        return ([f"{k}/n{n}/d{d:g}/s{suites._seed(k, n, d)}" for k in kernels.SUITE
                 for n in suites.DEFAULT_SIZES for d in suites.DEFAULT_DENSITIES]
                + [f"{k}/n{n}/d{d:g}/s{s}" for k, n, d, s in suites.LARGE_LEVELS]
                + [f"{_base(f)}.ff/fuse={fuse}" for f in _program_files() for fuse in suites.FUSIONS]
                + _suite_names("blocks"))
    if name == "parallel":
        return ([f"{_base(f)}.ff/fuse=regions{_lanes_id({'i': n})}" for f in suites.PARALLEL_PROGRAMS
                 for n in suites.PARALLEL_FACTORS]
                + [f"{_base(f)}.ff/fuse=regions{_lanes_id(s)}" for f, s in suites.PARALLEL_SCHEDULES])
    if name == "models":
        return [f"{_base(f)}.ff/fuse={fuse}" for f, fuse in suites.MODEL_PROGRAMS]
    raise KeyError(name)


@functools.lru_cache(maxsize=None)
def _suite(name):
    s = suites.get_suite(name)
    return {e.name: e for e in s.entries}, tuple(s.notes)


def _entry(suite, name):
    entries, notes = _suite(suite)
    if name in entries:
        return entries[name]
    file, _, rest = name.partition("/")
    left_out = [n for n in notes if n.startswith(f"{file} ({rest})")]
    if left_out:
        pytest.skip(left_out[0])
    pytest.fail(f"suite {suite} has no entry {name!r} (its names changed: update _suite_names)")


def _sample(suite):
    """The default run's entries of a suite."""
    names = _suite_names(suite)
    if suite == "default":
        return [n for i, n in enumerate(names) if i % DEFAULT_STRIDE == 0 and not n.startswith(HEAVY)]
    if suite == "parallel":
        return names[::4]
    if suite == "blocks":
        return [names[0], names[-1]]
    if suite == "models":
        return [n for n in names if not n.startswith(HEAVY)]
    return names                                # quick: all


SUITE_NAMES = ("quick", "default", "parallel", "blocks", "models")


def _suite_params(sample):
    params = []
    for suite in SUITE_NAMES:
        names = _sample(suite) if sample else _suite_names(suite)
        if not sample and suite == "blocks":
            continue                            # part of default
        params += [pytest.param(suite, n, mode, id=f"{suite}:{n}:{mode}") for n in names for mode in MODES]
    return params


@pytest.mark.parametrize("suite, name, mode", _suite_params(sample=True))
def test_suite_sample(suite, name, mode):
    e = _entry(suite, name)
    _check(e.program, e.inputs, mode)


@pytest.mark.slow
@pytest.mark.parametrize("suite, name, mode", _suite_params(sample=False))
def test_suite_all(suite, name, mode):
    e = _entry(suite, name)
    _check(e.program, e.inputs, mode)


def test_suite_names_match_the_suites():
    """The parameters above are exactly the suites' entries (plus any compiled program a suite leaves out)."""
    for suite in SUITE_NAMES:
        entries, notes = _suite(suite)
        derived = _suite_names(suite)
        assert set(entries) <= set(derived), (suite, sorted(set(entries) - set(derived)))
        for name in set(derived) - set(entries):
            file, _, rest = name.partition("/")
            assert any(n.startswith(f"{file} ({rest})") for n in notes), (suite, name, notes)
    # the lanes sweep below leaves one lane to the default suite: every example at every granularity is there
    default = _suite_names("default")
    assert all(f"{_base(f)}.ff/fuse={fuse}" in default for f in _program_files() for fuse in suites.FUSIONS)


# --- every example program at every granularity at 2 and 4 lanes -----------------------------------------------

LANES = (2, 4)


def _lanes_keys():
    return [(_base(f), fuse, n) for f in _program_files() for fuse in suites.FUSIONS for n in LANES]


@functools.lru_cache(maxsize=None)
def _lanes_entry(base, fuse, lanes):
    """The example compiled with ``parallel i <lanes>`` on the suites' data, or the compiler's reason not to."""
    path = os.path.join(suites.examples_dir(), base + ".ff")
    try:
        return suites.compiled(path, fuse, parallel={"i": lanes}), None
    except FuseFlowError as exc:
        return None, f"the compiler rejects {base}.ff at fuse={fuse} with parallel i {lanes}: {exc}"


def _lanes_params(sample):
    keys = _lanes_keys()
    if sample:
        keys = keys[::LANES_STRIDE]
    return [pytest.param(*k, mode, id=f"{k[0]}.ff:{k[1]}:i{k[2]}:{mode}") for k in keys for mode in MODES]


def _check_lanes(base, fuse, lanes, mode):
    e, why = _lanes_entry(base, fuse, lanes)
    if e is None:
        pytest.skip(why)
    _check(e.program, e.inputs, mode)


@pytest.mark.parametrize("base, fuse, lanes, mode", _lanes_params(sample=True))
def test_examples_in_lanes_sample(base, fuse, lanes, mode):
    _check_lanes(base, fuse, lanes, mode)


@pytest.mark.slow
@pytest.mark.parametrize("base, fuse, lanes, mode", _lanes_params(sample=False))
def test_examples_in_lanes_all(base, fuse, lanes, mode):
    _check_lanes(base, fuse, lanes, mode)


# --- FIFO depths, traces, off-chip memory ----------------------------------------------------------------------

OPTIONS = (dict(fifo_depth=1), dict(fifo_depth=3), dict(trace=True), dict(fifo_depth=1, trace=True),
           dict(memory="hbm2"))


def _opt_id(kw):
    return ",".join(f"{k}={v}" for k, v in kw.items())


@pytest.mark.parametrize("kw", OPTIONS, ids=_opt_id)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", _suite_names("quick") + _sample("default")[::5])
def test_run_options_sample(name, mode, kw):
    suite = "quick" if name in _suite_names("quick") else "default"
    e = _entry(suite, name)
    _check(e.program, e.inputs, mode, **kw)


@pytest.mark.slow
@pytest.mark.parametrize("kw", OPTIONS[:3], ids=_opt_id)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", _suite_names("default"))
def test_run_options_all(name, mode, kw):
    e = _entry("default", name)
    _check(e.program, e.inputs, mode, **kw)


# --- deadlocks: the same DeadlockError from both engines ---------------------------------------------------------

def _without_depths(program):
    """``program`` with every depth the depths pass chose reset to the default (a copy)."""
    p = copy.deepcopy(program)
    for k in p.kernels:
        for s in k.streams.values():
            s.depth = None
    return p


def _reconvergent():
    """A fibre's values reach an alu directly and through a full reduction: no depth is enough."""
    from fuseflow.samml import Program
    p = Program("reconvergent")
    p.tensor("v", "input", [8], ["dense"])
    p.tensor("o", "output", [8], ["dense"])
    k = p.kernel()
    r = k.add("root")
    s = k.add("level_scan", {"ref": r["ref"]}, id="scan", tensor="v", level=0, format="dense")
    a1 = k.add("array", {"ref": s["ref"]}, id="direct", tensor="v")
    a2 = k.add("array", {"ref": s["ref"]}, id="viasum", tensor="v")
    red = k.add("reduce", {"val": a2["val"]}, id="sum")
    alu = k.add("alu", {"a": a1["val"], "b": red["val"]}, id="mul", op="mul")
    k.add("value_write", {"val": alu["out"]}, id="w", tensor="o")
    return p, {"v": np.arange(1.0, 9.0)}


#: (suite, entry) whose depths-pass depths, reset to the default, deadlock at depth 1 (and run at 2)
DEADLOCKS = (("default", "spmv_csr/n4/d0.1/s45377"), ("default", "spmv_dcsr/n4/d0.3/s37297"),
             ("default", "elementwise_add/n4/d0.1/s96596"), ("default", "ttv/n4/d0.1/s72064"),
             ("default", "spmv.ff/fuse=none"), ("reconvergent", None))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("suite, name", DEADLOCKS, ids=[n or s for s, n in DEADLOCKS])
def test_deadlock_at_depth_1_is_the_same_error(suite, name, mode):
    if suite == "reconvergent":
        program, inputs = _reconvergent()
    else:
        e = _entry(suite, name)
        program, inputs = _without_depths(e.program), e.inputs
    if compiled.unsupported(program):
        pytest.skip(f"compiled engine: {compiled.unsupported(program)}")
    with pytest.raises(DeadlockError):          # the case is a deadlock on the reference ...
        run(program, inputs, mode, fifo_depth=1, engine="python")
    _check(program, inputs, mode, fifo_depth=1)  # ... and the compiled engine raises the same one


# --- special values --------------------------------------------------------------------------------------------

#: x86's default NaN (what inf - inf and 0 * inf give): the only NaN in these operands. Where two NaNs of different
#: sign or payload meet in an add or a multiply, the reference engine itself is not deterministic: CPython 3.11
#: returns the second operand's NaN from its generic float add and multiply and the first from the specialised
#: bytecode that takes over after a few executions, so the same model gives different bits early and late in a
#: process (and neither rule is a contract of the compiled engine either).
DEFAULT_NAN = np.array([0xFFF8000000000000], dtype=np.uint64).view(np.float64)[0]


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("name", ["vector_add", "vector_mul", "elementwise_add", "elementwise_mul", "spmv_csr",
                                  "spmv_dcsr", "sddmm", "ttv"])
def test_special_float_values(name, seed):
    """-0.0, infinities, NaN, subnormals and values that overflow in the operands: the same bits out."""
    program = kernels.build(name, 8)
    inputs = kernels.random_inputs(program, density=0.6, seed=seed)
    specials = np.array([-0.0, np.inf, -np.inf, DEFAULT_NAN, 1e-310, -1e308, 1e308, 5e-324, -0.0, DEFAULT_NAN])
    out = {}
    for k, (t, v) in enumerate(inputs.items()):
        a = np.asarray(v.toarray() if hasattr(v, "toarray") else v, dtype=np.float64).copy()
        flat = a.reshape(-1)
        nz = np.flatnonzero(flat)
        flat[nz[: len(specials)]] = np.roll(specials, k)[: len(nz)]
        out[t] = a
    _check(program, out, "float")


# --- the models bench's configurations ---------------------------------------------------------------------------

def _bench_cases():
    """(model, config, size, seconds) of every models-bench case at the small size that the bench finished."""
    try:
        with open(os.path.join(ROOT, "benchmarks", "results", "models.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return []
    return [(r["model"], r["config"], r["size"], r.get("simulate_seconds") or 0.0)
            for r in doc.get("results", []) if "cycles" in r and r.get("size") == "small"]


#: float mode too for the bench cases whose simulation took under this many seconds on the compiled engine (the
#: Python engine takes 20-40x longer); fixed mode always
BENCH_FLOAT_SECONDS = 1.0


def _bench_params():
    params = []
    for model, config, size, secs in _bench_cases():
        for mode in ("fixed", "float") if secs < BENCH_FLOAT_SECONDS else ("fixed",):
            params.append(pytest.param(model, config, size, mode, id=f"{model}/{config}/{size}:{mode}"))
    return params


@functools.lru_cache(maxsize=None)
def _bench_model(model, config, size):
    pytest.importorskip("torch")
    bench = os.path.join(ROOT, "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import fuseflow
    from fuseflow.dse.points import paper_model
    from models_bench import DATASET
    m, inputs = paper_model(model, DATASET, size)
    c = fuseflow.compile(m, inputs, fuse=m.FUSION[config], mode="fixed")
    return c.program, c._inputs(None)


@pytest.mark.slow
@pytest.mark.parametrize("model, config, size, mode", _bench_params())
def test_models_bench(model, config, size, mode):
    program, inputs = _bench_model(model, config, size)
    _check(program, inputs, mode)


# --- random programs -------------------------------------------------------------------------------------------

def _randprog():
    d = os.path.join(HERE, "..", "compiler")
    d = os.path.normpath(d)
    if d not in sys.path:
        sys.path.insert(0, d)
    import compiler_harness
    import compiler_randprog
    return compiler_randprog, compiler_harness


def _random_programs_agree(n, fast):
    from hypothesis import HealthCheck, Phase, assume, given, settings
    from hypothesis import strategies as st

    from fuseflow.compiler import EinsumProgram, compile_program
    from fuseflow.errors import ProgramError
    randprog, harness = _randprog()
    tally = collections.Counter()
    skipped = collections.Counter()
    extra = dict(derandomize=True, phases=[Phase.explicit, Phase.generate]) if fast else {}

    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck), **extra)
    @given(randprog.random_programs(), st.sampled_from(suites.FUSIONS), st.booleans(), st.integers(0, 2 ** 32 - 1),
           st.sampled_from([None, None, None, 1, 3]), st.integers(0, 3))
    def one(rp, fuse, locate, seed, fifo_depth, trace):
        try:
            ir = EinsumProgram.parse(rp.text, "rand").to_ir()
            program = compile_program(ir, fuse=fuse, locate=locate).program
        except ProgramError:
            skipped["rejected by the compiler"] += 1
            assume(False)
        why = compiled.unsupported(program)
        if why is not None:
            skipped[why] += 1
            assume(False)
        rng = np.random.default_rng(seed)
        inputs = {t.name: harness.random_tensor(tuple(t.shape), rp.densities.get(t.name, 0.5), rng)
                  for t in program.inputs}
        for mode in MODES:
            try:
                mism = differential.compare(program, inputs, mode, fifo_depth=fifo_depth, trace=trace == 0)
            except Unsupported as exc:              # pragma: no cover - checked above
                skipped[exc.why] += 1
                assume(False)
            assert not mism, (f"the engines differ on a random program ({mode}, fuse={fuse}, locate={locate}, "
                              f"seed={seed}, fifo_depth={fifo_depth}, trace={trace == 0}):\n{rp.text}\n"
                              + "\n".join(mism))
        tally["compared"] += 1

    one()
    summary = f"{tally['compared']} random programs compared (float and fixed); not compared: {dict(skipped)}"
    print(summary)
    if tally["compared"] < n:
        pytest.skip(f"only {summary}")


def test_random_programs_agree():
    _random_programs_agree(RANDOM_DEFAULT, fast=True)


@pytest.mark.slow
def test_random_programs_agree_long():
    _random_programs_agree(RANDOM_SLOW, fast=False)
