"""The compiled engine's lane ops (parallelize, serialize) against the Python engine's: the same outputs, cycles
and counters, token for token, and the same error messages; one op at a time (run_op), a parallelize ->
serialize chain on bounded channels (blocking), and laned kernels (float and fixed, nested lanes, small FIFOs)."""

import numpy as np
import pytest

from fuseflow.compiler import CompileOptions
from fuseflow.compiler.passes import run_passes
from fuseflow.errors import FuseFlowError
from fuseflow.samml.kernels import DCSR, _program, random_inputs
from fuseflow.sim import compiled, run
from fuseflow.sim.differential import compare, compare_results
from fuseflow.sim.engine import UNBOUNDED, Env, NodeState, _run_with_test_nodes, run_op

pytestmark = pytest.mark.skipif(not compiled.available() or
                                not {"parallelize", "serialize"} <= compiled.compiled_ops(),
                                reason="the compiled engine (with the lane ops) is not built")

LANES = (2, 3, 4)


def S(m):
    return f"S{m}"


def outcome(fn):
    """What a run gives: ("ok", value) or ("err", exception class, message)."""
    try:
        return ("ok", fn())
    except FuseFlowError as exc:
        return ("err", type(exc).__name__, str(exc))


def both_op(op, params, inputs):
    """run_op on both engines (outputs and {cycles, busy}); asserts they agree, returns the Python one's."""
    py = outcome(lambda: run_op(op, params, inputs, stats=True, engine="python"))
    cc = outcome(lambda: run_op(op, params, inputs, stats=True, engine="compiled"))
    assert py == cc
    return py


# --- random token streams ----------------------------------------------------------------------------------

def value(rng):
    r = rng.random()
    if r < 0.15:
        return "N"
    if r < 0.5:
        return int(rng.integers(0, 50))
    return float(np.round(rng.uniform(-4, 4), 3))


def unit(rng, d):
    """The tokens of a depth-d sub-tree without its closing stop (d >= 1): inner fibres closed by S_(d-2)."""
    if d == 1:
        return [value(rng) for _ in range(int(rng.integers(0, 4)))]
    toks = []
    for j in range(int(rng.integers(1, 4))):
        if j:
            toks.append(S(d - 2))
        toks += unit(rng, d - 1)
    return toks


def sam_stream(rng, levels):
    """A stream of ``levels`` nested levels: fibres of data or N, stops, one D."""
    return unit(rng, levels) + [S(levels - 1), "D"]


def lane_case(rng, n, depth):
    """Lane inputs of a serializer (keys dealt round robin by position, as parallelize deals them; every lane's
    payload laid out as the registry's serialize doc says) and the single-lane stream it must give."""
    nfib = int(rng.integers(0, 5))
    stops = [int(rng.choice([0, 0, 0, 1])) for _ in range(nfib)]
    stops.append(max(stops, default=0) + int(rng.integers(0, 2)))
    keys = [[] for _ in range(n)]
    pays = [[] for _ in range(n)]
    want = []
    for m in stops:
        coords = sorted(rng.choice(20, size=int(rng.integers(0, 6)), replace=False).tolist())
        units = [[value(rng)] if depth == 0 else unit(rng, depth) for _ in coords]
        mine = [[k for k in range(len(coords)) if k % n == lane] for lane in range(n)]
        for lane in range(n):
            keys[lane] += [coords[k] for k in mine[lane]] + [S(m)]
            if depth == 0:
                pays[lane] += [units[k][0] for k in mine[lane]] + [S(m)]
                continue
            for k in mine[lane]:
                pays[lane] += units[k] + [S(depth + m) if k == mine[lane][-1] else S(depth - 1)]
            if not mine[lane]:
                pays[lane].append(S(depth + m))
        if depth == 0:
            want += [u[0] for u in units] + [S(m)]
        else:
            for k, u in enumerate(units):
                want += u + [S(depth + m) if k == len(units) - 1 else S(depth - 1)]
            if not units:
                want.append(S(depth + m))
    inputs = {}
    for lane in range(n):
        inputs[f"key{lane}"] = keys[lane] + ["D"]
        inputs[f"in{lane}"] = pays[lane] + ["D"]
    return inputs, want + ["D"]


# --- run_op ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", LANES)
def test_parallelize_random_streams(n):
    rng = np.random.default_rng(100 + n)
    for _ in range(25):
        toks = sam_stream(rng, int(rng.integers(1, 4)))
        got = both_op("parallelize", {"lanes": n}, {"in": toks})
        assert got[0] == "ok"
        outs, info = got[1]
        assert info["busy"] == len(toks)
        assert sorted(outs) == [f"out{i}" for i in range(n)]


@pytest.mark.parametrize("n", LANES)
@pytest.mark.parametrize("depth", (0, 1, 2, 3))
def test_serialize_random_lanes(n, depth):
    rng = np.random.default_rng(10 * n + depth)
    for _ in range(20):
        inputs, want = lane_case(rng, n, depth)
        got = both_op("serialize", {"lanes": n, "depth": depth}, inputs)
        assert got[0] == "ok", got
        assert got[1][0]["out"] == want


BAD_SERIALIZE = [
    # depth 0: a key coordinate whose payload is a stop
    (0, {"key0": [0, "S0", "D"], "key1": ["S0", "D"], "in0": ["S0", "D"], "in1": ["S0", "D"]}),
    # depth 0: a lane's payload holds data where its key fibre ends
    (0, {"key0": ["S0", "D"], "key1": ["S0", "D"], "in0": [3.5, "S0", "D"], "in1": ["S0", "D"]}),
    # the keys end their fibres differently
    (0, {"key0": ["S0", "D"], "key1": ["S1", "D"], "in0": ["S0", "D"], "in1": ["S0", "D"]}),
    # N on a key
    (1, {"key0": ["N", "S0", "D"], "key1": ["S0", "D"], "in0": ["S1", "D"], "in1": ["S1", "D"]}),
    # D on the keys, a stop left on a payload
    (0, {"key0": ["D"], "key1": ["D"], "in0": ["D"], "in1": ["S0", "D"]}),
    # depth 1: a unit ends where the keys hold D (no closing stop on the keys)
    (1, {"key0": [0, "D"], "key1": ["D"], "in0": [5, "S0", "D"], "in1": ["D"]}),
    # depth 1: a unit closed by a stop above S_(d+m)
    (1, {"key0": [0, "S0", "D"], "key1": ["S0", "D"], "in0": [5, "S2", "D"], "in1": ["S1", "D"]}),
    # depth 2: a unit closed by S2 inside the key fibre (above S_(d-1))
    (2, {"key0": [0, 4, "S0", "D"], "key1": ["S0", "D"], "in0": [5, "S2", 1, "S2", "D"], "in1": ["S2", "D"]}),
    # depth 1: a payload ends inside a unit
    (1, {"key0": [0, "S0", "D"], "key1": ["S0", "D"], "in0": [5, 6, "D"], "in1": ["S1", "D"]}),
    # depth 1: a lane without coordinates has data where its key fibre ends
    (1, {"key0": [0, "S0", "D"], "key1": ["S0", "D"], "in0": [5, "S1", "D"], "in1": [7, "S1", "D"]}),
]


@pytest.mark.parametrize("depth,inputs", BAD_SERIALIZE)
def test_serialize_errors_are_the_same(depth, inputs):
    got = both_op("serialize", {"lanes": 2, "depth": depth}, inputs)
    assert got[0] == "err" and got[1] == "StreamError", got


# --- a parallelize -> serialize chain on bounded channels: blocking, per-node counters ------------------------

def chain(n, keys, pays, depth_lane, depth_out):
    """Nodes and streams of src -> parallelize (keys, payload) -> serialize (depth 0) -> sink."""
    env = Env("float")
    nodes = [NodeState("src_k", "_source", {"tokens": keys}, env),
             NodeState("src_p", "_source", {"tokens": pays}, env),
             NodeState("par_k", "parallelize", {"lanes": n}, env),
             NodeState("par_p", "parallelize", {"lanes": n}, env),
             NodeState("ser", "serialize", {"lanes": n, "depth": 0}, env),
             NodeState("sink", "_sink", {}, env)]
    streams = [("k", ("src_k", "out"), [("par_k", "in")], UNBOUNDED),
               ("p", ("src_p", "out"), [("par_p", "in")], UNBOUNDED)]
    for i in range(n):
        streams.append((f"k{i}", ("par_k", f"out{i}"), [("ser", f"key{i}")], depth_lane[i]))
        streams.append((f"p{i}", ("par_p", f"out{i}"), [("ser", f"in{i}")], depth_lane[n + i]))
    streams.append(("o", ("ser", "out"), [("sink", "in")], depth_out))
    return nodes, streams, env


COUNTERS = ("busy", "blocked", "alu_ops", "mem_reads", "mem_writes", "clock", "moved")


@pytest.mark.parametrize("n", LANES)
def test_lane_chain_on_bounded_channels(n):
    rng = np.random.default_rng(7 + n)
    for _ in range(12):
        inputs, want = lane_case(rng, 1, 0)
        keys, pays = inputs["key0"], inputs["in0"]
        depth_lane = [int(x) for x in rng.integers(1, 4, 2 * n)]
        depth_out = int(rng.integers(1, 3))
        res = []
        for engine in ("python", "compiled"):
            nodes, streams, env = chain(n, keys, pays, depth_lane, depth_out)

            def go():
                if engine == "python":
                    cycles, outs, _ = _run_with_test_nodes(nodes, streams)
                else:
                    cycles, outs, _ = compiled.run_kernel(nodes, streams, 2, {}, env, False, UNBOUNDED)
                return (cycles, {sid: o.count for sid, o in outs.items()},
                        [tuple(getattr(st, c) for c in COUNTERS) for st in nodes], nodes[-1].result)
            res.append(outcome(go))
        assert res[0] == res[1]
        if res[0][0] == "ok":
            assert res[0][1][3] == want


# --- laned kernels -----------------------------------------------------------------------------------------
# Written with the builder and without crd_drop (union-only co-iterations of tensors without empty fibres write
# canonical outputs as they are), so they run on the ops the compiled engine has.

def _laned(p, lanes):
    p.reports = run_passes(p, CompileOptions(lanes={"main": lanes}))
    return p


def ew_add(lanes, names=("A", "B"), m=12, n=9):
    p, b = _program("ew_add", "X(i,j) = " + " + ".join(f"{t}(i,j)" for t in names),
                    [(t, [m, n], DCSR) for t in names], ("X", [m, n], None))
    ci, rs = b.join("union", [b.scan(t, 0, b.root(t)) for t in names], "i")
    cj, rs = b.join("union", [b.scan(t, 1, r) for t, r in zip(names, rs)], "j")
    x = b.vals(names[0], rs[0])
    for t, r in zip(names[1:], rs[1:]):
        x = b.alu("add", x, b.vals(t, r), f"add_{t}")
    b.write("X", [ci, cj], x)
    return _laned(p, lanes)


def rowsum(lanes, m=12, n=9):
    p, b = _program("rowsum", "x(i) = A(i,j) * 2 + B(i,j)", [("A", [m, n], DCSR), ("B", [m, n], DCSR)],
                    ("x", [m], None))
    ci, rs = b.join("union", [b.scan(t, 0, b.root(t)) for t in "AB"], "i")
    cj, rs = b.join("union", [b.scan(t, 1, r) for t, r in zip("AB", rs)], "j")
    a2 = b.alu("mul", b.vals("A", rs[0]), None, "scale", const=2.0)
    x = b.reduce(b.alu("add", a2, b.vals("B", rs[1]), "add"), "j", crd=ci)
    b.write("x", [ci], x)
    return _laned(p, lanes)


def csf3(lanes, m=6, n=5, k=7):
    p, b = _program("ew3", "X(i,j,k) = A(i,j,k) + B(i,j,k)",
                    [(t, [m, n, k], ["compressed"] * 3) for t in "AB"], ("X", [m, n, k], None))
    rs = [b.root(t) for t in "AB"]
    crds = []
    for lv, ix in enumerate("ijk"):
        c, rs = b.join("union", [b.scan(t, lv, r) for t, r in zip("AB", rs)], ix)
        crds.append(c)
    b.write("X", crds, b.alu("add", b.vals("A", rs[0]), b.vals("B", rs[1]), "add"))
    return _laned(p, lanes)


KERNELS = {
    "ew_add": ew_add,
    "ew_add3": lambda lanes: ew_add(lanes, ("A", "B", "C"), m=10),
    "rowsum": rowsum,
    "csf3": csf3,
    "csf3_nested": lambda lanes: csf3([{"lanes": lanes, "level": 0}, {"lanes": 2, "level": 1}]),
}

def exact(p, ins, **kw):
    """Both engines on a program that must run: identical results (fuseflow.sim.differential); the reference's."""
    ref = run(p, ins, engine="python", **kw)
    assert compare_results(ref, run(p, ins, engine="compiled", **kw)) == []
    return ref


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("lanes", (2, 4))
def test_laned_kernels(name, lanes):
    p = KERNELS[name](lanes)
    ops = [nd.op for k in p.kernels for nd in k.nodes.values()]
    assert "parallelize" in ops and "serialize" in ops
    why = compiled.unsupported(p)
    if why:
        pytest.skip(why)
    for seed, density in ((1, 0.3), (2, 0.6)):
        ins = random_inputs(p, density, seed)
        for mode in ("float", "fixed"):
            exact(p, ins, mode=mode)


@pytest.mark.parametrize("name", ("ew_add", "rowsum", "csf3"))
def test_laned_kernels_on_small_fifos(name):
    """Every channel at the default depth, 1 to 3: the lane ops block on full lanes (or the kernel deadlocks,
    with the same message on both engines)."""
    p = KERNELS[name](3)
    if compiled.unsupported(p):
        pytest.skip(compiled.unsupported(p))
    for k in p.kernels:
        for s in k.streams.values():
            s.depth = None
    ins = random_inputs(p, 0.4, 5)
    for fd in (1, 2, 3):
        assert compare(p, ins, fifo_depth=fd) == []     # also when both deadlock: the same message


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_laned_kernels_with_blocked_serializers(name):
    """The serializers' outputs at depth 1: they wait for room (blocked cycles) on every write."""
    p = KERNELS[name](3)
    if compiled.unsupported(p):
        pytest.skip(compiled.unsupported(p))
    for k in p.kernels:
        for s in k.streams.values():
            if k.nodes[s.src.node].op == "serialize":
                s.depth = 1
    ins = random_inputs(p, 0.4, 5)
    nodes = exact(p, ins).stats["kernels"][0]["nodes"]
    assert any(v["blocked"] for nid, v in nodes.items() if p.kernels[0].nodes[nid].op == "serialize")
