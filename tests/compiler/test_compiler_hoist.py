"""Loop-invariant code motion of reduction results (``tables.Planner.hoist_top``): an expression that depends on
nothing but one reduction and constants (a layer norm's ``rsqrt(sum / n + eps)``) is computed once per point of
the reduction's context, before the result is repeated over the consumer's inner levels, and only where no
coordinate of the result can be absent (the consumer loads an absent one as 0, but ``f(0)`` need not be 0)."""

import numpy as np
import scipy.sparse as sp

from fuseflow.compiler import compile_text
from fuseflow.sim import run

LN_MATMUL = """program ln
tensor X(4, 6) : dense
tensor G(6)
tensor B(6)
tensor W(6, 3)
fuse {
  Xn(i,m) = layernorm[m](X(i,m), G(m), B(m))
  Q(i,d) = Xn(i,m) * W(m,d)
}
"""


def _ln_inputs():
    rng = np.random.default_rng(0)
    return {"X": rng.normal(size=(4, 6)), "G": rng.normal(size=6), "B": rng.normal(size=6),
            "W": rng.normal(size=(6, 3))}


def _producer(kernel, node_id, port):
    return kernel.nodes[kernel.driver(node_id, port).src.node]


def test_layernorm_rsqrt_is_computed_on_the_reduction_stream():
    kernel = compile_text(LN_MATMUL, fuse="regions").program.kernels[0]
    rsqrt = [n for n in kernel.nodes.values() if n.op == "alu" and n.params["op"] == "rsqrt"]
    assert rsqrt
    for node in rsqrt:
        # walk back through the constant ops (/ 16, + eps): the chain starts at the reducer, not at a repeat
        src = _producer(kernel, node.id, "a")
        while src.op == "alu" and "const" in src.params:
            src = _producer(kernel, src.id, "a")
        assert src.op == "reduce", src


def test_layernorm_matmul_matches_numpy_with_fewer_cycles_per_output():
    inp = _ln_inputs()
    X = inp["X"]
    mu = X.mean(1, keepdims=True)
    var = ((X - mu) ** 2).mean(1, keepdims=True)
    want = ((X - mu) / np.sqrt(var + 1e-5) * inp["G"] + inp["B"]) @ inp["W"]
    for fuse in ("none", "regions", "full"):
        res = run(compile_text(LN_MATMUL, fuse=fuse).program, inp, mode="float")
        np.testing.assert_allclose(res.outputs["Q"], want, rtol=1e-9, atol=1e-12)


def test_not_hoisted_where_the_reduction_can_be_empty():
    # row 2 of A is empty: the consumer sees no sum there and must still compute c * exp(0 / 4) = c
    prog = """program p
tensor A(6, 5) : csr
tensor c(6)
y(i) = c(i) * exp(sum[j](A(i,j)) / 4)
"""
    A = sp.random(6, 5, density=0.4, random_state=1, format="lil")
    A[2, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    c = np.arange(1, 7.0)
    res = run(compile_text(prog, fuse="regions").program, {"A": A, "c": c}, mode="float")
    np.testing.assert_allclose(res.outputs["y"], c * np.exp(np.asarray(A.sum(1)).ravel() / 4), rtol=1e-12)
