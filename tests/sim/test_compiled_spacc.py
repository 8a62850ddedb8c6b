"""The compiled engine's spacc (fuseflow/sim/csrc/ops/spacc.cpp) against the Python engine's
(fuseflow/sim/ops/spacc.py): the same outputs, cycles and counters, token for token, and the same error
messages. One op at a time (run_op: orders 1-3, group 1-3, sum/max/min, float and fixed, unsorted and repeated
coordinates, malformed streams), two spaccs chained on bounded channels (the emit side blocks, the accumulate
side waits for a free bank) and whole programs (the example kernels and kernels built around spacc)."""

from pathlib import Path

import numpy as np
import pytest

from fuseflow.compiler import CompileOptions
from fuseflow.compiler.passes import run_passes
from fuseflow.errors import FuseFlowError
from fuseflow.hw.testing import spacc_streams
from fuseflow.samml import io as samml_io
from fuseflow.samml.kernels import DCSR, _program, random_inputs, spmspm_gustavson, spmspm_outer
from fuseflow.sim import compiled, run
from fuseflow.sim.differential import compare, compare_results
from fuseflow.sim.engine import UNBOUNDED, Env, NodeState, _run_with_test_nodes, run_op

pytestmark = pytest.mark.skipif(not compiled.available() or "spacc" not in compiled.compiled_ops(),
                                reason="the compiled engine (with spacc) is not built")

ROOT = Path(__file__).resolve().parents[2]
OPS = ("sum", "max", "min")
DIMS = {1: [7], 2: [4, 6], 3: [3, 4, 5]}


def outcome(fn):
    """What a run gives: ("ok", value) or ("err", exception class, message)."""
    try:
        return ("ok", fn())
    except FuseFlowError as exc:
        return ("err", type(exc).__name__, str(exc))


def both_op(params, inputs, mode="float"):
    """run_op("spacc") on both engines (outputs and {cycles, busy}); asserts they agree, returns the result."""
    py = outcome(lambda: run_op("spacc", params, inputs, mode=mode, stats=True, engine="python"))
    cc = outcome(lambda: run_op("spacc", params, inputs, mode=mode, stats=True, engine="compiled"))
    assert py == cc, (params, inputs)
    return py


# --- random sub-trees (spacc_streams' nested lists) ---------------------------------------------------------

def value(rng, mode):
    if rng.random() < 0.12:
        return "N"
    if mode == "fixed":
        return int(rng.integers(-5 << 16, 5 << 16))
    return float(np.round(rng.uniform(-4, 4), 2)) if rng.random() < 0.7 else float(rng.integers(-3, 4))


def fibre(rng, order, d, mode, max_len, sorted_):
    """A sub-tree fibre of depth d (0 = outermost) as spacc_streams takes it: [(coordinate, child), ...]."""
    n = int(rng.integers(0, max_len + 1))
    dim = DIMS[order][d]
    cs = rng.integers(0, dim, n).tolist()
    if sorted_:
        cs = sorted(set(cs))
    if d == order - 1:
        return [(c, value(rng, mode)) for c in cs]
    return [(c, fibre(rng, order, d + 1, mode, max_len, sorted_)) for c in cs]


def tree(rng, levels, order, mode, max_len, sorted_):
    """A nested list of ``levels`` levels whose elements are sub-tree fibres."""
    if levels == 0:
        return fibre(rng, order, 0, mode, max_len, sorted_)
    return [tree(rng, levels - 1, order, mode, max_len, sorted_) for _ in range(int(rng.integers(0, 4)))]


def case(rng, order, group, mode, kept=None):
    kept = int(rng.integers(0, 2)) if kept is None else kept
    max_len = 3 if order < 3 else 2
    t = tree(rng, kept + group, order, mode, max_len, bool(rng.random() < 0.3))
    return spacc_streams(t, kept + group, order)


# --- run_op ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ("float", "fixed"))
@pytest.mark.parametrize("order", (1, 2, 3))
def test_random_streams(order, mode):
    rng = np.random.default_rng(order * 10 + (mode == "fixed"))
    for k in range(60):
        group = 1 + k % 3
        params = {"order": order, "group": group, "op": OPS[k % 3]}
        got = both_op(params, case(rng, order, group, mode), mode)
        assert got[0] == "ok", got


def test_documented_examples():
    # tests/sim/test_spacc.py's timing examples, on both engines
    got = both_op({"order": 1}, {"crd_inner": [2, 0, "S1", 1, "S1", 3, "S2", "D"],
                                 "val": [1.0, 2.0, "S1", 3.0, "S1", 4.0, "S2", "D"]})
    assert got[1][1] == {"cycles": 11, "busy": 11}
    got = both_op({"order": 2, "group": 2},
                  {"crd_outer0": [1, "S0", 2, "S1", 0, "S2", "D"], "crd_inner": [0, "S1", 0, "S2", 1, "S3", "D"],
                   "val": [1.0, "S1", 2.0, "S2", 3.0, "S3", "D"]})
    assert got[1][0]["crd_outer0"] == [0, 1, 2, "S0", "D"]
    got = both_op({"order": 1, "op": "min"}, {"crd_inner": [4, 1, "S0", 1, 4, "S1", "D"],
                                              "val": [3, -2, "S0", 5, -7, "S1", "D"]}, "fixed")
    assert got[1][0] == {"crd_inner": [1, 4, "S0", "D"], "val": [-2, -7, "S0", "D"]}


def test_emit_delay_comes_from_the_registry(monkeypatch):
    # the compiled model reads E as bound from registry.SPACC_EMIT_DELAY, so both engines follow a change
    from fuseflow.samml import registry
    inputs = {"crd_outer0": [1, "S0", 2, "S1", 0, "S2", "D"], "crd_inner": [0, "S1", 0, "S2", 1, "S3", "D"],
              "val": [1.0, "S1", 2.0, "S2", 3.0, "S3", "D"]}
    base = both_op({"order": 2, "group": 2}, inputs)[1][1]["cycles"]
    monkeypatch.setitem(registry.SPACC_EMIT_DELAY, 2, registry.SPACC_EMIT_DELAY[2] + 5)
    assert both_op({"order": 2, "group": 2}, inputs)[1][1]["cycles"] == base + 5


BAD = [
    # order 1: D on crd_inner, data on val; a stream ending inside a group; stops that differ; N as coordinate;
    # a coordinate meeting a stop
    ({"order": 1}, {"crd_inner": [1, "D"], "val": [1.0, 2.0, "D"]}),
    ({"order": 1}, {"crd_inner": [1, 2, "S0", "D"], "val": [1.0, 2.0, "S0", "D"]}),
    ({"order": 1}, {"crd_inner": [1, "S1", "D"], "val": [1.0, "S0", "D"]}),
    ({"order": 1}, {"crd_inner": ["N", "S1", "D"], "val": ["N", "S1", "D"]}),
    ({"order": 1}, {"crd_inner": [3, "S1", "D"], "val": ["S1", "S1", "D"]}),
    # order 2: a group left open at D; D where a stop ends the fibre; crd_inner/val disagree; N on crd_outer0;
    # a bare stop whose deeper stops are wrong; D on crd_outer0 with data left on crd_inner
    ({"order": 2, "group": 2}, {"crd_outer0": [1, "S1", "D"], "crd_inner": [0, "S2", "D"], "val": [1.0, "S2", "D"]}),
    ({"order": 2}, {"crd_outer0": [1, "D"], "crd_inner": [0, "S1", "D"], "val": [1.0, "S1", "D"]}),
    ({"order": 2}, {"crd_outer0": [1, "S1", "D"], "crd_inner": [0, "S2", "D"], "val": [1.0, "S1", "D"]}),
    ({"order": 2}, {"crd_outer0": ["N", "S1", "D"], "crd_inner": [0, "S2", "D"], "val": [1.0, "S2", "D"]}),
    ({"order": 2}, {"crd_outer0": ["S1", "D"], "crd_inner": ["S1", "D"], "val": ["S2", "D"]}),
    ({"order": 2}, {"crd_outer0": ["S1", "D"], "crd_inner": ["S2", "D"], "val": ["S1", "D"]}),
    ({"order": 2}, {"crd_outer0": ["D"], "crd_inner": [3, "D"], "val": [1.0, "D"]}),
    ({"order": 2}, {"crd_outer0": [2, "S1", "D"], "crd_inner": [0, "S2", "D"], "val": ["S0", "S2", "D"]}),
    # order 3: D on crd_outer0 inside a fibre of crd_outer1; a group left open; the stop after a fibre end is wrong
    ({"order": 3}, {"crd_outer1": [0, "S1", "D"], "crd_outer0": ["D"], "crd_inner": ["D"], "val": ["D"]}),
    ({"order": 3}, {"crd_outer1": [0, "S0", "D"], "crd_outer0": [1, "S1", "D"], "crd_inner": [2, "S2", "D"],
                    "val": [1.0, "S2", "D"]}),
    ({"order": 3}, {"crd_outer1": [0, "S1", "D"], "crd_outer0": [1, "S1", "D"], "crd_inner": [2, "S2", "D"],
                    "val": [1.0, "S2", "D"]}),
]


@pytest.mark.parametrize("params,inputs", BAD)
def test_errors_are_the_same(params, inputs):
    got = both_op(params, inputs)
    assert got[0] == "err", got


def test_bad_params_are_the_same():
    got = both_op({"order": 1, "group": 0}, {"crd_inner": ["S1", "D"], "val": ["S1", "D"]})
    assert got[0] == "err" and got[1] == "GraphError" and "group must be an integer >= 1" in got[2]
    assert both_op({"order": 4}, {})[0] == "err"


TOKENS = [0, 1, 2, 3, 0, 1, 2, 3, "S0", "S1", "S2", "S3", "N", 1.5]


@pytest.mark.parametrize("order", (1, 2, 3))
def test_mutated_streams(order):
    """Random well-formed streams with one token replaced, removed or added: both engines give the same result
    or the same error (StreamError, or a deadlock with the same waits)."""
    rng = np.random.default_rng(50 + order)
    errors = 0
    for k in range(80):
        group = 1 + k % 2
        inputs = case(rng, order, group, "float", kept=1)
        port = sorted(inputs)[int(rng.integers(0, len(inputs)))]
        toks = list(inputs[port])
        pos = int(rng.integers(0, len(toks)))          # before D: the stream keeps its one D at the end
        what = k % 3
        tok = TOKENS[int(rng.integers(0, len(TOKENS)))]
        if what == 0 and pos < len(toks) - 1:
            toks[pos] = tok
        elif what == 1 and pos < len(toks) - 1:
            del toks[pos]
        else:
            toks.insert(pos, tok)
        inputs[port] = toks
        got = both_op({"order": order, "group": group, "op": OPS[k % 3]}, inputs)
        errors += got[0] == "err"
    assert errors > 10


# --- two spaccs on bounded channels: blocking, bank waits, per-node counters ---------------------------------

COUNTERS = ("busy", "blocked", "alu_ops", "mem_reads", "mem_writes", "clock", "moved")


def names(order):
    return [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner", "val"]


def chain(order, group, op, inputs, depths, mode):
    """sources -> spacc a (order, group) -> spacc b (order, group 1: one group of all of a's) -> sinks, the
    streams between them at ``depths``, b's outputs at depth 1."""
    env = Env(mode)
    ports = names(order)
    nodes = [NodeState(f"src_{p}", "_source", {"tokens": inputs[p]}, env) for p in ports]
    nodes += [NodeState("a", "spacc", {"order": order, "group": group, "op": op}, env),
              NodeState("b", "spacc", {"order": order, "group": 1, "op": op}, env)]
    nodes += [NodeState(f"sink_{p}", "_sink", {}, env) for p in ports]
    streams = [(f"in.{p}", (f"src_{p}", "out"), [("a", p)], UNBOUNDED) for p in ports]
    streams += [(f"mid.{p}", ("a", p), [("b", p)], d) for p, d in zip(ports, depths)]
    streams += [(f"out.{p}", ("b", p), [(f"sink_{p}", "in")], 1) for p in ports]
    return nodes, streams, env


@pytest.mark.parametrize("mode", ("float", "fixed"))
@pytest.mark.parametrize("order", (1, 2, 3))
def test_chained_on_bounded_channels(order, mode):
    rng = np.random.default_rng(200 + order * 2 + (mode == "fixed"))
    blocked = 0
    for k in range(25):
        group = 1 + k % 3
        inputs = case(rng, order, group, mode, kept=1 + k % 2)
        depths = [int(x) for x in rng.integers(1, 4, order + 1)]
        res = []
        for engine in ("python", "compiled"):
            nodes, streams, env = chain(order, group, OPS[k % 3], inputs, depths, mode)

            def go():
                if engine == "python":
                    cycles, outs, _ = _run_with_test_nodes(nodes, streams)
                else:
                    cycles, outs, _ = compiled.run_kernel(nodes, streams, 2, {}, env, False, UNBOUNDED)
                return (cycles, {sid: o.count for sid, o in outs.items()},
                        [tuple(getattr(st, c) for c in COUNTERS) for st in nodes],
                        [st.result for st in nodes if st.op == "_sink"])
            res.append(outcome(go))
        assert res[0] == res[1]
        assert res[0][0] == "ok", res[0]
        blocked += res[0][1][2][order + 1][COUNTERS.index("blocked")]      # spacc a's (after the sources)
    assert blocked > 0


def test_deadlock_messages_are_the_same():
    """A fork that joins again: p's crd_inner feeds b directly (depth 1) and through a, which emits only when
    its group closes; b holds p's first coordinate and waits for a's value, so p cannot write its second."""
    res = []
    for engine in ("python", "compiled"):
        env = Env("float")
        nodes = [NodeState("src_c", "_source", {"tokens": [3, 1, 2, "S1", "D"]}, env),
                 NodeState("src_v", "_source", {"tokens": [1.0, 2.0, 3.0, "S1", "D"]}, env),
                 NodeState("p", "spacc", {"order": 1, "group": 1, "op": "sum"}, env),
                 NodeState("a", "spacc", {"order": 1, "group": 1, "op": "sum"}, env),
                 NodeState("b", "spacc", {"order": 1, "group": 1, "op": "max"}, env),
                 NodeState("sink_c", "_sink", {}, env), NodeState("sink_v", "_sink", {}, env),
                 NodeState("sink_ac", "_sink", {}, env)]
        streams = [("c", ("src_c", "out"), [("p", "crd_inner")], UNBOUNDED),
                   ("v", ("src_v", "out"), [("p", "val")], UNBOUNDED),
                   ("pc", ("p", "crd_inner"), [("a", "crd_inner"), ("b", "crd_inner")], 1),
                   ("pv", ("p", "val"), [("a", "val")], 1),
                   ("av", ("a", "val"), [("b", "val")], 1),
                   ("ac", ("a", "crd_inner"), [("sink_ac", "in")], 1),
                   ("bc", ("b", "crd_inner"), [("sink_c", "in")], 1),
                   ("bv", ("b", "val"), [("sink_v", "in")], 1)]
        if engine == "python":
            res.append(outcome(lambda: _run_with_test_nodes(nodes, streams)[0]))
        else:
            res.append(outcome(lambda: compiled.run_kernel(nodes, streams, 2, {}, env, False, UNBOUNDED)[0]))
    assert res[0] == res[1]
    assert res[0][1] == "DeadlockError" and "'a.banks'" in res[0][2], res[0]


# --- programs ----------------------------------------------------------------------------------------------

def _finish(p):
    p.reports = run_passes(p, CompileOptions(skip=("drop_empty",)))
    return p


def sum_over_i(op="sum", m=5, n=6, q=7):
    """Y(j,k) = op[i] A(i,j,k): spacc order 2 merging the (j, k) sub-trees of every i."""
    p, b = _program("sum_over_i", f"Y(j,k) = {op}[i](A(i,j,k))", [("A", [m, n, q], ["compressed"] * 3)],
                    ("Y", [n, q], None))
    _, ri = b.scan("A", 0, b.root("A"))
    cj, rj = b.scan("A", 1, ri)
    ck, rk = b.scan("A", 2, rj)
    acc = b.k.add("spacc", {"crd_outer0": cj, "crd_inner": ck, "val": b.vals("A", rk)}, id="spacc", order=2,
                  op=op, dim=q, dim_outer=n)
    b.write("Y", [acc["crd_outer0"], acc["crd_inner"]], acc["val"])
    return _finish(p)


def sum_over_ij(op="sum", m=5, n=6, q=7):
    """y(k) = op[i,j] A(i,j,k): spacc order 1 with group 2."""
    p, b = _program("sum_over_ij", f"y(k) = {op}[i,j](A(i,j,k))", [("A", [m, n, q], ["compressed"] * 3)],
                    ("y", [q], None))
    _, ri = b.scan("A", 0, b.root("A"))
    _, rj = b.scan("A", 1, ri)
    ck, rk = b.scan("A", 2, rj)
    acc = b.k.add("spacc", {"crd_inner": ck, "val": b.vals("A", rk)}, id="spacc", order=1, group=2, op=op, dim=q)
    b.write("y", [acc["crd_inner"]], acc["val"])
    return _finish(p)


def sum_over_j(op="sum", m=5, n=6, q=7):
    """Z(i,k) = op[j] A(i,j,k): spacc order 1, group 1 under a kept level i (one group per i)."""
    p, b = _program("sum_over_j", f"Z(i,k) = {op}[j](A(i,j,k))", [("A", [m, n, q], ["compressed"] * 3)],
                    ("Z", [m, q], None))
    ci, ri = b.scan("A", 0, b.root("A"))
    _, rj = b.scan("A", 1, ri)
    ck, rk = b.scan("A", 2, rj)
    acc = b.k.add("spacc", {"crd_inner": ck, "val": b.vals("A", rk)}, id="spacc", order=1, op=op, dim=q)
    b.write("Z", [ci, acc["crd_inner"]], acc["val"])
    return _finish(p)


def ttm_outer(m=4, n=5, q=4, r=3):
    """Y(j,k,l) = A(i,j,k) * B(i,l) over i outermost: spacc order 3 merges the (j, k, l) products of every i."""
    p, b = _program("ttm_outer", "Y(j,k,l) = A(i,j,k) * B(i,l)",
                    [("A", [m, n, q], ["compressed"] * 3), ("B", [m, r], DCSR)], ("Y", [n, q, r], None))
    cia, ria = b.scan("A", 0, b.root("A"))
    cib, rib = b.scan("B", 0, b.root("B"))
    _, (ra, rb) = b.join("intersect", [(cia, ria), (cib, rib)], "i")
    cj, rj = b.scan("A", 1, ra)
    ck, rk = b.scan("A", 2, rj)
    rbk = b.repeat(b.repeat(rb, cj, "B_j"), ck, "B_k")
    cl, rl = b.scan("B", 1, rbk)
    av = b.repeat(b.vals("A", rk), cl, "A_l")
    prod = b.alu("mul", av, b.vals("B", rl), "mul")
    acc = b.k.add("spacc", {"crd_outer1": cj, "crd_outer0": ck, "crd_inner": cl, "val": prod}, id="spacc", order=3,
                  dim=r, dim_outer=q, dim_outer1=n)
    b.write("Y", [acc["crd_outer1"], acc["crd_outer0"], acc["crd_inner"]], acc["val"])
    return _finish(p)


PROGRAMS = {
    "example_spmspm_outer": lambda: "examples/kernels/spmspm_outer/graph.json",
    "example_spmspm_gustavson": lambda: "examples/kernels/spmspm_gustavson/graph.json",
    "spmspm_outer": lambda: spmspm_outer(m=7, k=6, n=8),
    "spmspm_gustavson": lambda: spmspm_gustavson(m=7, k=6, n=8),
    "sum_over_i": sum_over_i,
    "max_over_i": lambda: sum_over_i("max"),
    "min_over_ij": lambda: sum_over_ij("min"),
    "sum_over_ij": sum_over_ij,
    "max_over_j": lambda: sum_over_j("max"),
    "ttm_outer": ttm_outer,
}

def exact(p, ins, **kw):
    """Both engines on a program that must run: identical results (fuseflow.sim.differential); the reference's."""
    ref = run(p, ins, engine="python", **kw)
    assert compare_results(ref, run(p, ins, engine="compiled", **kw)) == []
    return ref


def _program_of(name):
    p = PROGRAMS[name]()
    return samml_io.load(ROOT / p) if isinstance(p, str) else p


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs(name):
    p = _program_of(name)
    assert any(nd.op == "spacc" for k in p.kernels for nd in k.nodes.values())
    why = compiled.unsupported(p)
    if why:
        pytest.skip(why)
    for seed, density in ((1, 0.3), (2, 0.7)):
        ins = random_inputs(p, density, seed)
        for mode in ("float", "fixed"):
            exact(p, ins, mode=mode)


@pytest.mark.parametrize("name", ("spmspm_outer", "sum_over_i", "max_over_j", "ttm_outer"))
def test_programs_on_small_fifos(name):
    """Every channel at the default depth, 1 to 3: spacc's emit side blocks on full outputs (or the kernel
    deadlocks, with the same message on both engines)."""
    p = _program_of(name)
    why = compiled.unsupported(p)
    if why:
        pytest.skip(why)
    for k in p.kernels:
        for s in k.streams.values():
            s.depth = None
    ins = random_inputs(p, 0.5, 5)
    for fd in (1, 2, 3):
        assert compare(p, ins, fifo_depth=fd) == []     # also when both deadlock: the same message
