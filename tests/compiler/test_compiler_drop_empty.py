"""The drop_empty pass: a CSR operand's empty rows stop right after its scanners (docs/compiler.md, section 4b).

Results are checked against NumPy; cycles (simulated, not time) against the same graph without the pass."""

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import compile_text
from fuseflow.sim import run


def drops(program):
    return [nid for k in program.kernels for nid, nd in k.nodes.items()
            if nd.op == "crd_drop" and nd.params.get("arity")]


def few_rows(n, rows, deg, seed):
    """An n x n CSR matrix with ``rows`` non-empty rows of ``deg`` nonzeros each."""
    rng = np.random.default_rng(seed)
    r = np.repeat(rng.choice(n, size=rows, replace=False), deg)
    c = np.concatenate([rng.choice(n, size=deg, replace=False) for _ in range(rows)])
    return sp.csr_array((rng.uniform(0.5, 1.5, rows * deg), (r, c)), shape=(n, n))


def gcn(n, f):
    return (f"tensor A({n},{n}) : csr\ntensor X({n},{f}) : dense\ntensor W({f},{f}) : dense\n"
            f"fuse {{\n  T(i,j) = A(i,k) * X(k,j)\n  H(i,h) = relu(T(i,j) * W(j,h))\n}}\n")


def test_gcn_cycles_do_not_grow_with_empty_rows():
    # the scanners still visit every row (two cycles per empty row, mostly in parallel with the work below)
    f, rng = 8, np.random.default_rng(1)
    cycles, before = [], []
    for n in (40, 400):
        A = few_rows(n, 16, 8, seed=n)
        X, W = rng.uniform(-1, 1, (n, f)), rng.uniform(-1, 1, (f, f))
        want = np.maximum(A @ X @ W, 0)
        prog = compile_text(gcn(n, f)).program
        assert drops(prog) == ["drop_A_i"]
        got = run(prog, {"A": A, "X": X, "W": W})
        np.testing.assert_allclose(got.outputs["H"], want, rtol=1e-12, atol=1e-12)
        cycles.append(got.cycles)
        off = compile_text(gcn(n, f), passes={"drop_empty": False}).program
        assert drops(off) == []
        ref = run(off, {"A": A, "X": X, "W": W})
        np.testing.assert_allclose(ref.outputs["H"], want, rtol=1e-12, atol=1e-12)
        before.append(ref.cycles)
    assert cycles[1] - cycles[0] <= 360              # 360 more empty rows: under a cycle each
    assert before[1] - before[0] >= 3 * 360           # without the pass they cost several cycles each


@pytest.mark.parametrize("expr, extra", [
    ("A(i,k) * X(k,h) + b(h)", "tensor b(4) : dense\n"),   # b survives in an empty row of A: rows needed
    ("A(i,k) * X(k,h) * Y(i,h)", "tensor Y(30,4) : dense\n"),  # the rows meet another operand at i
])
def test_rows_that_matter_are_kept(expr, extra):
    n, f, rng = 30, 4, np.random.default_rng(2)
    A = few_rows(n, 5, 3, seed=3)
    X, b, Y = rng.uniform(-1, 1, (n, f)), rng.uniform(0.5, 1, f), rng.uniform(-1, 1, (n, f))
    prog = compile_text(f"tensor A({n},{n}) : csr\ntensor X({n},{f}) : dense\n{extra}H(i,h) = {expr}\n").program
    assert drops(prog) == []
    ins = {k: v for k, v in {"A": A, "X": X, "b": b, "Y": Y}.items() if k in prog.tensors}
    want = A @ X + b if "b" in ins else (A @ X) * Y
    np.testing.assert_allclose(run(prog, ins).outputs["H"], want, rtol=1e-12, atol=1e-12)


def test_spmv_into_a_sparse_vector_keeps_its_rows():
    # the row's nonzeros are the busiest stream: the drop's held S0 would cost a cycle per row
    n = 30
    A = few_rows(n, 20, 3, seed=4)
    c = np.random.default_rng(5).uniform(-1, 1, n)
    prog = compile_text(f"tensor A({n},{n}) : csr\ntensor c({n}) : dense\nx(i) = A(i,k) * c(k)\n").program
    assert drops(prog) == []
    np.testing.assert_allclose(run(prog, {"A": A, "c": c}).outputs["x"], A @ c, rtol=1e-12, atol=1e-12)

