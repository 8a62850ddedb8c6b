"""Softmax across the blocks of a row (issue #15): BigBird attention ``O = softmax[j](M * Q KT) V`` compiled
blocked (``reduce`` with ``rows``, the alu's B-vector broadcast, block products) gives the unblocked program's
outputs and NumPy's; the softmax alone is bit-identical to the unblocked program in fixed mode; what blocks
cannot do is refused in one line."""

import numpy as np
import pytest

from fuseflow.compiler import compile_text
from fuseflow.errors import ProgramError
from fuseflow.samml.blocks import block_shape
from fuseflow.samml.masks import dense_mask, parse_mask
from fuseflow.sim import run
from fuseflow.tensors import FixedFormat

FX = FixedFormat(32, 16)
LSB = 2.0 ** -FX.frac
PATTERN = 16                 # the mask's block granularity: every B dividing it sees the same kept entries


def attention_text(n, d, b):
    """BigBird attention over a mask tensor M: unblocked (b = 1: csr / dense) or blocked (bcsr:b)."""
    fm, fd = ("csr", "dense") if b == 1 else (f"bcsr:{b}", f"bcsr:{b}")
    return (f"tensor M({n}, {n}) : {fm}\ntensor Q({n}, {d}) : {fd}\ntensor KT({d}, {n}) : {fd}\n"
            f"tensor V({n}, {d}) : {fd}\n"
            "S(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\n"
            "P(i,j) = softmax[j](S(i,j))\n"
            "O(i,e) = sum[j](P(i,j) * V(j,e))\n")


def attention_data(n, d, seed):
    rng = np.random.default_rng(seed)
    spec = f"bigbird:block={PATTERN},window=3,global=1,random=1,seed={seed}"
    mask = dense_mask(parse_mask(spec, "test"), n, n).astype(np.float64)
    q, k, v = (rng.uniform(-1, 1, (n, d)) for _ in range(3))
    return {"M": mask, "Q": q, "KT": np.ascontiguousarray(k.T), "V": v}


def numpy_attention(ins):
    """Masked softmax attention over the kept entries (NumPy, float64)."""
    m = ins["M"] > 0
    s = np.where(m, ins["Q"] @ ins["KT"], -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)) @ ins["V"]


def _check_attention(n, d, b, seed):
    ins = attention_data(n, d, seed)
    blocked, plain = compile_text(attention_text(n, d, b)).program, compile_text(attention_text(n, d, 1)).program
    want = numpy_attention(ins)
    got, ref = run(blocked, ins), run(plain, ins)
    scale = np.max(np.abs(ref.outputs["O"]))
    assert np.max(np.abs(got.outputs["O"] - ref.outputs["O"])) <= 1e-9 * scale      # float: rel. error <= 1e-9
    np.testing.assert_allclose(got.outputs["O"], want, rtol=1e-9, atol=1e-12)
    # fixed: the block products round once per block (the unblocked program once per product), so the scores
    # differ by a few LSBs; the softmax and P V keep the difference within 1/16 of a unit in 2**-12
    gfx, rfx = run(blocked, ins, mode="fixed"), run(plain, ins, mode="fixed")
    assert np.max(np.abs(gfx.outputs["O"] - rfx.outputs["O"])) <= d * LSB * 2
    assert gfx.cycles == got.cycles and got.cycles < ref.cycles
    return blocked


def test_blocked_attention_b4_equals_the_unblocked_program():
    prog = _check_attention(32, 8, 4, seed=1)
    rows = [n for k in prog.kernels for n in k.nodes.values() if n.op == "reduce" and n.params.get("rows")]
    assert {n.params["op"] for n in rows} == {"max", "sum"}
    for k in prog.kernels:
        for n in k.nodes.values():
            if n.op == "reduce" and n.params.get("rows"):
                assert block_shape(k.driver(n.id, "val")) == (4, 4)
                assert block_shape(next(s for s in k.streams.values() if s.src.node == n.id)) == (4,)


@pytest.mark.slow
@pytest.mark.parametrize("b", [8, 16])
def test_blocked_attention_big_b_equals_the_unblocked_program(b):
    _check_attention(64, 16, b, seed=2)


@pytest.mark.parametrize("b", [2, 4])
def test_blocked_softmax_is_bit_identical_in_fixed_mode(b):
    """The softmax alone (scores given): row max and row sum are exact (no intermediate saturates: a row sum of
    exp values <= 1 stays far below max_raw), exp, sub and div are the same per-element rules, so the blocked
    program's P equals the unblocked one's bit for bit."""
    n = 16
    rng = np.random.default_rng(b)
    pattern = rng.random((n // 4, n // 4)) < 0.5
    np.fill_diagonal(pattern, True)
    s = np.kron(pattern, np.ones((4, 4))) * rng.uniform(-3, 3, (n, n))
    s[s == 0] = 0.25 * np.kron(pattern, np.ones((4, 4)))[s == 0]         # every kept entry stored (nonzero)
    stmt = "P(i,j) = softmax[j](S(i,j))\n"
    blocked = compile_text(f"tensor S({n}, {n}) : bcsr:{b}\n" + stmt).program
    plain = compile_text(f"tensor S({n}, {n}) : csr\n" + stmt).program
    got, ref = run(blocked, {"S": s}, mode="fixed"), run(plain, {"S": s}, mode="fixed")
    assert np.array_equal(got.tensors["P"].to_dense(), ref.tensors["P"].to_dense())
    kept = s != 0
    e = np.where(kept, np.exp(s - np.where(kept, s, -np.inf).max(axis=1, keepdims=True)), 0.0)
    np.testing.assert_allclose(got.outputs["P"], e / e.sum(axis=1, keepdims=True), atol=8 * LSB)


@pytest.mark.parametrize("text, why", [
    ("tensor A(8, 8) : bcsr:4\ny(j) = max[i](A(i,j))\n", "reduces over a block's row index \\(i\\)"),
    ("tensor A(8, 8) : bcsr:4\nP(i,j) = softmax[i](A(i,j))\n", "reduces over a block's row index"),
    ("tensor A(8, 8) : bcsr:4\ntensor c(8) : bdv:4\nY(i,j) = A(i,j) - c(j)\n",
     "broadcasts a vector over j, a block's column index"),
])
def test_what_blocks_cannot_reduce_or_broadcast_is_refused(text, why):
    with pytest.raises(ProgramError, match=why):
        compile_text(text)


def test_row_reduction_and_row_broadcast_of_a_blocked_matrix():
    """y(i) = sum[j](A(i,j)) is each block row's row sums; Y = A - y broadcasts them back over the rows."""
    rng = np.random.default_rng(5)
    a = np.kron(rng.random((3, 2)) < 0.7, np.ones((4, 4))) * rng.uniform(-1, 1, (12, 8))
    prog = compile_text("tensor A(12, 8) : bcsr:4\ntensor c(12) : bdv:4\ny(i) = sum[j](A(i,j))\n"
                        "Y(i,j) = A(i,j) * c(i)\n").program
    c = rng.uniform(-1, 1, 12)
    res = run(prog, {"A": a, "c": c})
    np.testing.assert_allclose(res.outputs["y"], a.sum(axis=1), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.outputs["Y"], a * c[:, None], rtol=1e-12, atol=1e-12)
