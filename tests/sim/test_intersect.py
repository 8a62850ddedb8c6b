"""intersect's look-ahead in the reference simulator: when it applies (every input channel of depth >= 3, or
run_op's unbounded sources), that it changes cycles only, and why the ref channels count too.

The tables of docs/samml.md (## intersect) check the rule token by token and cycle by cycle; here: properties
against the op without look-ahead, and whole kernels."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import fuseflow.sim.ops.intersect as intersect
from fuseflow.errors import DeadlockError
from fuseflow.hw.testing import st_joiner_case
from fuseflow.samml import kernels
from fuseflow.samml.expr import evaluate
from fuseflow.sim import run as run_any, run_op


def run(*args, **kw):
    """These tests patch the Python engine's intersect model (the reference): run that engine."""
    return run_any(*args, engine="python", **kw)


def no_lookahead(monkeypatch):
    monkeypatch.setattr(intersect, "lookahead", lambda chans: False)


@settings(max_examples=150, deadline=None)
@given(st_joiner_case(arity=(2, 4), depth=(1, 3), dim=(1, 16)))
def test_same_tokens_in_no_more_cycles(case):
    """With every token visible from cycle 0 the look-ahead never waits: same tokens, at most as many cycles."""
    params, inputs = case
    got, info = run_op("intersect", params, inputs, mode="fixed", stats=True)
    with pytest.MonkeyPatch.context() as mp:
        no_lookahead(mp)
        want, base = run_op("intersect", params, inputs, mode="fixed", stats=True)
    assert got == want
    assert info["cycles"] <= base["cycles"]


@settings(max_examples=100, deadline=None)
@given(st_joiner_case(arity=(2, 2), depth=(1, 3), dim=(1, 16)))
def test_two_input_fast_path_is_the_n_input_rule(case):
    """Without look-ahead (which arity 2 alone has) the two-input path and the n-input one are the same rule."""
    params, inputs = case
    with pytest.MonkeyPatch.context() as mp:
        no_lookahead(mp)
        got = run_op("intersect", params, inputs, mode="fixed", stats=True)
        mp.setattr(intersect, "_run2", intersect._run_n)
        assert run_op("intersect", params, inputs, mode="fixed", stats=True) == got


def test_lookahead_and_its_depth_only_at_arity_2():
    """The registry asks for depth-3 inputs at arity 2 only (input_depth_for), the graph builder gives them, and
    a wider intersect takes the cycles of the op without look-ahead even on deep channels."""
    from fuseflow.samml.graph import Kernel
    from fuseflow.samml.registry import get_op
    spec = get_op("intersect")
    assert [spec.input_depth_for({"arity": a}) for a in (2, 3, 5)] == [3, None, None]
    assert get_op("union").input_depth_for({"arity": 2}) is None
    for arity, want in ((2, 3), (3, None)):
        k = Kernel("k")
        src = k.add("root")
        x = k.add("intersect", arity=arity)
        for i in range(arity):
            k.connect(src["ref"], x.id, f"crd{i}")
            k.connect(src["ref"], x.id, f"ref{i}")
        assert {k.driver(x.id, f"crd{i}").depth for i in range(arity)} == {want}
    params, inputs = {"arity": 3}, {}
    for i, fib in enumerate(([0, 1, 2, 5, 7], [1, 3, 5, 6, 7], [0, 2, 4, 5, 7])):
        inputs[f"crd{i}"] = fib + ["S0", "D"]
        inputs[f"ref{i}"] = list(range(len(fib))) + ["S0", "D"]
    got, info = run_op("intersect", params, inputs, mode="fixed", stats=True)
    with pytest.MonkeyPatch.context() as mp:
        no_lookahead(mp)
        assert run_op("intersect", params, inputs, mode="fixed", stats=True) == (got, info)
    assert got["crd"] == [5, 7, "S0", "D"]


def test_long_fibres_take_about_L():
    """Two random fibres of 300 coordinates in [0, 1000): about L cycles with look-ahead (a lower side pops two
    tokens after a match), 1.7 L without; and below the matched-pair floor, which binds any intersect that pops
    one token per input per firing (fuseflow.sim.bounds)."""
    from fuseflow.sim.bounds import matched_pair_floor
    rng = np.random.default_rng(0)
    fib = [sorted(rng.choice(1000, 300, replace=False).tolist()) for _ in range(2)]
    inputs = {}
    for i, f in enumerate(fib):
        inputs[f"crd{i}"] = f + ["S0", "D"]
        inputs[f"ref{i}"] = list(range(len(f))) + ["S0", "D"]
    out, info = run_op("intersect", {}, inputs, stats=True)
    assert out["crd"] == sorted(set(fib[0]) & set(fib[1])) + ["S0", "D"]
    with pytest.MonkeyPatch.context() as mp:
        no_lookahead(mp)
        _, base = run_op("intersect", {}, inputs, stats=True)
    floor = matched_pair_floor([inputs["crd0"], inputs["crd1"]])
    assert 300 < info["cycles"] < 1.1 * 300 < floor
    assert 1.6 * 300 < base["cycles"] < 1.8 * 300


def test_second_pops_wait_for_their_references():
    """A LOW input pops its second coordinate only with its second reference visible. Input 0's references
    arrive one every three cycles (pushed at 3k), everything else at once: by the rule of docs/samml.md it pops
    one (crd, ref) pair at cycles 1, 4, 7, 10, matches 9 at 13, then S0 at 16 and D at 19 (20 cycles). Popping the
    second coordinate without its reference would finish sooner."""
    from fuseflow.sim.engine import UNBOUNDED, Env, NodeState

    def late_source(st, ins, outs):
        for k, tok in enumerate(st.params["tokens"]):
            outs["out"].push(tok, st.params["every"] * k)
        return
        yield

    from fuseflow.sim import engine
    env = Env("fixed")
    toks = {"crd0": [0, 1, 2, 3, 9, "S0", "D"], "ref0": [0, 1, 2, 3, 4, "S0", "D"], "crd1": [9, "S0", "D"],
            "ref1": [0, "S0", "D"]}
    nodes, streams = [], []
    for port, t in toks.items():
        src = NodeState(f"src_{port}", "_late", {"tokens": t, "every": 3 if port == "ref0" else 0}, env)
        nodes.append(src)
        streams.append((f"in.{port}", (src.id, "out"), [("x", port)], UNBOUNDED))
    x = NodeState("x", "intersect", {"arity": 2}, env)
    nodes.append(x)
    sinks = {}
    for port in ("crd", "ref0", "ref1"):
        sinks[port] = NodeState(f"sink_{port}", "_sink", {}, env)
        nodes.append(sinks[port])
        streams.append((f"out.{port}", ("x", port), [(sinks[port].id, "in")], UNBOUNDED))
    models = {**engine.MODELS, "_sink": engine._sink, "_late": late_source}
    engine.run_kernel(nodes, streams, models=models)
    assert sinks["crd"].result == [9, "S0", "D"] and sinks["ref0"].result == [4, "S0", "D"]
    assert x.clock + 1 == 20 and x.busy == 7


def intersect_inputs(program, crd_depth, ref_depth):
    """Set the depth of every stream into an intersect (crd and ref ports separately)."""
    for k in program.kernels:
        for nid, node in k.nodes.items():
            if node.op == "intersect":
                for i in range(node.params.get("arity", 2)):
                    k.driver(nid, f"crd{i}").depth = crd_depth
                    k.driver(nid, f"ref{i}").depth = ref_depth
    return program


@pytest.mark.parametrize("name,depths", [("vector_mul", (1, 2, 3)), ("spmv_csr", (2, 3)), ("elementwise_mul", (2, 3))])
def test_kernels_look_ahead_from_depth_3(name, depths, monkeypatch):
    """Depth 1 and 2: the cycles of the op without look-ahead; depth 3: fewer. Results: NumPy's. (spmv and
    elementwise_mul deadlock at depth 1 with or without look-ahead.)"""
    # the builder gives streams into an intersect depth 3 (registry input_depth); clear that so that
    # fifo_depth sets every channel
    p = intersect_inputs(kernels.build(name, 16), None, None)
    inputs = kernels.random_inputs(p, density=0.4, seed=2)
    base, cyc = {}, {}
    for depth in depths:
        res = run(p, inputs, fifo_depth=depth)
        cyc[depth] = res.cycles
        for t, want in evaluate(p.expr, inputs).items():
            np.testing.assert_allclose(res.outputs[t], want, rtol=1e-12, atol=1e-12)
    no_lookahead(monkeypatch)
    for depth in depths:
        base[depth] = run(p, inputs, fifo_depth=depth).cycles
    assert all(cyc[d] == base[d] for d in depths if d < 3)
    assert cyc[3] < base[3]


def test_a_depth1_ref_channel_turns_it_off(monkeypatch):
    """Deep crd channels but depth-1 ref channels: no look-ahead (the cycles of the op without it). Looking at the
    crd channels alone would deadlock: the scanner pushes a crd and its ref together, and the ref channel stays
    full until the intersect pops the ref the look-ahead holds back."""
    p = intersect_inputs(kernels.build("vector_mul", 16), crd_depth=8, ref_depth=1)
    inputs = kernels.random_inputs(p, density=0.5, seed=1)
    got = run(p, inputs)
    with pytest.MonkeyPatch.context() as mp:
        no_lookahead(mp)
        assert run(p, inputs).cycles == got.cycles
    crds_only = lambda chans: all(ch.depth >= 3 for ch in chans[:len(chans) // 2])  # noqa: E731
    monkeypatch.setattr(intersect, "lookahead", crds_only)
    with pytest.raises(DeadlockError, match="intersect"):
        run(p, inputs)
