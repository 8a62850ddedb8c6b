"""softmax / layernorm / mean: parsed, evaluated by NumPy, lowered by the sugar pass before fusion, fused with
their neighbours, and checked against NumPy at every granularity (float, and fixed within tolerance)."""

import numpy as np
import pytest

from fuseflow.compiler import EinsumProgram, compile_program
from fuseflow.compiler.ir import Sugar
from fuseflow.compiler.lower_sugar import lower_sugar
from fuseflow.samml.expr import evaluate

from compiler_harness import inputs_for, run_and_check

FUSES = ("none", "regions", "full")

SOFTMAX = """
    tensor S(6,7) : dcsr
    P(i,j) = softmax[j](S(i,j))
"""

ATTENTION = """
    tensor Q(2,8,4)
    tensor K(2,8,4)
    tensor V(2,8,3)
    fuse {
      S(h,i,j) = mask[causal](i,j) * Q(h,i,d) * K(h,j,d) * 0.5
      P(h,i,j) = softmax[j](S(h,i,j))
      O(h,i,e) = P(h,i,j) * V(h,j,e)
    }
"""

LAYERNORM = """
    tensor X(5,6)
    tensor G(6)
    tensor B(6)
    Y(i,j) = layernorm[j](X(i,j), G(j), B(j))
    Z(i,j) = layernorm[j, eps=0.01](X(i,j))
    m(i) = mean[j](X(i,j))
"""


def _softmax_rows(S):
    """Softmax over the nonzero entries of each row (absent = minus infinity); empty rows stay 0."""
    out = np.zeros_like(S)
    for r, row in enumerate(S):
        nz = row != 0
        if nz.any():
            e = np.exp(row[nz] - row[nz].max())
            out[r, nz] = e / e.sum()
    return out


def test_evaluator_softmax_and_layernorm_match_formulas():
    rng = np.random.default_rng(1)
    S = np.where(rng.random((5, 6)) < 0.5, rng.normal(size=(5, 6)), 0.0)
    S[2] = 0.0
    np.testing.assert_allclose(evaluate("P(i,j) = softmax[j](S(i,j))", {"S": S})["P"], _softmax_rows(S))
    X, G, B = rng.normal(size=(4, 6)), rng.normal(size=6), rng.normal(size=6)
    mu, var = X.mean(1, keepdims=True), X.var(1, keepdims=True)
    want = (X - mu) / np.sqrt(var + 1e-5) * G + B
    got = evaluate("Y(i,j) = layernorm[j](X(i,j), G(j), B(j))", {"X": X, "G": G, "B": B})["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = evaluate("Y(i,j) = layernorm[j, eps=0.5](X(i,j))", {"X": X})["Y"]
    np.testing.assert_allclose(got, (X - mu) / np.sqrt(var + 0.5), rtol=1e-12)
    np.testing.assert_allclose(evaluate("m(i) = mean[j](X(i,j))", {"X": X})["m"], X.mean(1), rtol=1e-12)


def test_implicit_sum_goes_inside_the_sugar():
    from fuseflow.samml.expr import parse_statement
    st = parse_statement("P(i,j) = softmax[j](Q(i,d) * K(j,d))")
    assert str(st) == "P(i,j) = softmax[j](sum[d]((Q(i,d) * K(j,d))))"


@pytest.mark.parametrize("fuse", FUSES)
def test_softmax_over_stored_coordinates(fuse):
    ir = EinsumProgram.parse(SOFTMAX).to_ir()
    for seed, density in ((0, 0.5), (1, 0.15)):
        rng = np.random.default_rng(seed)
        inputs = inputs_for(ir, rng, density)
        inputs["S"][1] = 0.0                                    # an all-empty row stays empty
        _, out = run_and_check(ir, inputs, fuse=fuse)
        P, S = out.outputs["P"], inputs["S"]
        np.testing.assert_allclose(P, _softmax_rows(S), rtol=1e-9, atol=1e-12)
        assert ((P != 0) == (S != 0)).all()                     # exactly the stored coordinates
        sums = P.sum(axis=1)
        np.testing.assert_allclose(sums[(S != 0).any(axis=1)], 1.0, rtol=1e-12)
        _, fixed = run_and_check(ir, inputs, fuse=fuse, mode="fixed", rtol=0, atol=1e-3)
        rows = fixed.outputs["P"].sum(axis=1)[(S != 0).any(axis=1)]
        assert np.abs(rows - 1.0).max() <= 1e-3                 # docs/numbers.md: softmax rows


@pytest.mark.parametrize("fuse", FUSES)
def test_layernorm_and_mean(fuse):
    ir = EinsumProgram.parse(LAYERNORM).to_ir()
    rng = np.random.default_rng(2)
    inputs = {"X": rng.normal(size=(5, 6)), "G": 1 + 0.1 * rng.normal(size=6), "B": 0.1 * rng.normal(size=6)}
    run_and_check(ir, inputs, fuse=fuse)
    run_and_check(ir, inputs, fuse=fuse, mode="fixed", rtol=0, atol=2e-3)


def test_layernorm_of_a_sparse_row_counts_absent_entries_as_zero():
    src = "tensor X(4,6) : dcsr\ntensor B(6)\nY(i,j) = layernorm[j](X(i,j), B(j), B(j))\n"
    ir = EinsumProgram.parse(src).to_ir()
    rng = np.random.default_rng(5)
    inputs = inputs_for(ir, rng, 0.4)
    inputs["X"][2] = 0.0                                        # an empty row gives the bias (NumPy's 0 / sqrt(eps))
    for fuse in FUSES:
        _, out = run_and_check(ir, inputs, fuse=fuse)
    np.testing.assert_allclose(out.outputs["Y"][2], inputs["B"], rtol=1e-12)


@pytest.mark.parametrize("fuse", FUSES)
def test_attention_with_heads(fuse):
    ir = EinsumProgram.parse(ATTENTION).to_ir()
    rng = np.random.default_rng(3)
    inputs = {k: rng.normal(size=ir.tensors[k].shape) for k in ("Q", "K", "V")}
    res, _ = run_and_check(ir, inputs, fuse=fuse)
    if fuse != "none":
        assert [k.name for k in res.program.kernels] == ["O"]   # score, softmax and weighting in one kernel
    run_and_check(ir, inputs, fuse=fuse, mode="fixed", rtol=0, atol=2e-3)


def test_sugar_is_lowered_before_fusion():
    ir = EinsumProgram.parse(ATTENTION).to_ir()
    assert any(isinstance(n, Sugar) for s in ir.stmts for n in s.rhs.walk())
    low = lower_sugar(ir)
    assert not any(isinstance(n, Sugar) for s in low.stmts for n in s.rhs.walk())
    assert [s.lhs for s in low.stmts] == ["S", "P_max", "P_exp", "P_sum", "P", "O"]
    assert [s.synthetic for s in low.stmts] == [False, True, True, True, False, False]
    assert low.regions == [[0, 1, 2, 3, 4, 5]]                  # the helpers join the source's region
    res = compile_program(EinsumProgram.parse(ATTENTION), fuse="none")
    assert "softmax[j](S(h,i,j))" in res.program.expr           # graph.json keeps the source text
    assert [k.name for k in res.program.kernels] == ["S", "P_max", "P_exp", "P_sum", "P", "O"]
    plain = EinsumProgram.parse(SOFTMAX.replace("softmax[j]", "exp")).to_ir()
    assert lower_sugar(plain) is plain                          # nothing to lower: the same IR


def test_lowering_leaves_the_source_ir_as_it_was():
    """Compiling one IR twice gives one graph (lowering once renumbered the caller's statements, so a second
    compile of the same IR put statements in the wrong regions)."""
    from fuseflow.samml import dumps
    ir = EinsumProgram.parse(ATTENTION).to_ir()
    before = [(s.id, str(s), [l.stmt for l in s.rhs.leaves()]) for s in ir.stmts]
    first = dumps(compile_program(ir, fuse="regions").program)
    assert [(s.id, str(s), [l.stmt for l in s.rhs.leaves()]) for s in ir.stmts] == before
    assert dumps(compile_program(ir, fuse="regions").program) == first


def test_python_api_spells_sugar_the_same():
    p = EinsumProgram("api")
    p.tensor("S", (4, 5), "dcsr")
    p.statement("P(i,j) = softmax[j](S(i,j))")
    rng = np.random.default_rng(4)
    S = np.where(rng.random((4, 5)) < 0.6, rng.normal(size=(4, 5)), 0.0)
    _, out = run_and_check(p, {"S": S}, fuse="regions")
    np.testing.assert_allclose(out.outputs["P"], _softmax_rows(S), rtol=1e-9, atol=1e-12)


def test_statement_outside_a_region_is_one_unit():
    res = compile_program(EinsumProgram.parse(SOFTMAX), fuse="regions")
    assert [k.name for k in res.program.kernels] == ["P"]
