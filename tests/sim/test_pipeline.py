"""The output pipeline of latency-L ops (``sim.ops._common.pipeline``) against its recurrence, under random
stalls of a consumer that also needs a second stream from the same producer (so the op sometimes waits for
input with results still in flight, and only the drain process can deliver them)."""

import random

import pytest

from fuseflow.samml.registry import op_latency
from fuseflow.sim.channel import TracingOut
from fuseflow.sim.engine import Env, NodeState, run_kernel
from fuseflow.sim.ops import MODELS
from fuseflow.sim.ops._common import wait_heads


def _source(st, ins, outs):
    """Pushes token k on ``x`` and on ``y`` at cycles of its own (gaps from ``params['gaps']``)."""
    x, y = outs["x"], outs["y"]
    toks, gaps = st.params["tokens"], st.params["gaps"]
    clock = -1
    for tok, gap in zip(toks, gaps):
        for o in (x, y):
            while o.room() is None:
                yield o
        t = max(clock + 1 + gap, x.room(), y.room())
        x.push(tok, t)
        y.push(tok, t)
        clock = st.clock = t
        st.busy += 1


def _join(st, ins, outs):
    """Pops the op's result and the source's copy together, after a random delay each; logs its pop cycles."""
    a, b = ins["a"], ins["b"]
    delays = iter(st.params["delays"])
    pops = st.params["pops"]
    clock = -1
    while True:
        t = (yield from wait_heads((a, b), clock)) + next(delays)
        tok = a.pop(t)
        b.pop(t)
        pops.append(t)
        clock = st.clock = t
        st.busy += 1
        if tok == "D":
            return


def expected_pushes(src_pushes, pops, latency, depth):
    """The op's output push cycles by the recurrence of docs/hardware.md: firing f_k no earlier than its input
    is visible, one firing per cycle, at most ``latency`` in flight (f_k > p_(k-L)); p_k = max(f_k + L - 1,
    p_(k-1) + 1, the output slot's free cycle: one after the consumer's pop of token k - depth)."""
    f, p = [], []
    for k, s in enumerate(src_pushes):
        fk = s + 1
        if f:
            fk = max(fk, f[-1] + 1)
        if k >= latency:
            fk = max(fk, p[k - latency] + 1)
        pk = fk + latency - 1
        if p:
            pk = max(pk, p[-1] + 1)
        if k >= depth:
            pk = max(pk, pops[k - depth] + 1)
        f.append(fk)
        p.append(pk)
    return p


@pytest.mark.parametrize("op", ["mul", "exp", "div"])
@pytest.mark.parametrize("seed", range(6))
def test_pipeline_matches_its_recurrence(op, seed):
    rng = random.Random(seed)
    n = 60
    toks = [rng.randrange(1, 1 << 16) for _ in range(n)] + ["S0", "D"]
    depth_x, depth_y, depth_out = rng.choice([1, 2, 3]), rng.choice([2, 4, 8]), rng.choice([1, 2, 3])
    gaps = [rng.choice([0, 0, 0, 1, 3]) for _ in toks]
    delays = [rng.choice([0, 0, 0, 1, 2, 5]) for _ in toks]
    env = Env("fixed")
    src = NodeState("src", "_source", {"tokens": toks, "gaps": gaps}, env)
    alu = NodeState("alu", "alu", {"op": op, "const": 1.5} if op in ("mul", "div") else {"op": op}, env)
    pops = []
    join = NodeState("join", "_join", {"delays": delays, "pops": pops}, env)
    streams = [("x", ("src", "x"), [("alu", "a")], depth_x),
               ("y", ("src", "y"), [("join", "b")], depth_y),
               ("out", ("alu", "out"), [("join", "a")], depth_out)]
    latency = op_latency("alu", alu.params, env.fixed)
    assert latency > 1
    cycles, outs, _ = run_kernel([src, alu, join], streams, models={**MODELS, "_source": _source, "_join": _join},
                                 out_class=TracingOut)
    want = expected_pushes(outs["x"].log, pops, latency, depth_out)
    assert outs["out"].log == want
    assert len(pops) == len(toks)
    assert cycles == max(pops) + 1
