"""The NumPy reference (``fuseflow.samml.expr.evaluate``, what ``--check`` and ``m.check()`` compare with) on large
SciPy sparse inputs: read by their entries in sums of products, never densified there, equal to the dense
evaluation and to SciPy's own products."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import fuseflow.samml.expr as expr

RNG = np.random.default_rng(0)
A = sp.random(30, 40, density=0.1, format="csr", random_state=1)
S = sp.random(40, 40, density=0.1, format="csr", random_state=2)
X = RNG.uniform(-1, 1, 40)


@pytest.mark.parametrize("program, inputs", [
    ("y(i) = A(i,j) * x(j)", {"A": A, "x": X}),
    ("C(i,k) = A(i,j) * B(j,k)", {"A": A, "B": RNG.uniform(size=(40, 5))}),
    ("C(k,i) = A(i,j) * B(j,k)", {"A": A, "B": RNG.uniform(size=(40, 5))}),
    ("s(i) = A(i,j) * D(i,j)", {"A": A, "D": RNG.uniform(size=(30, 40))}),
    ("M(i,j) = A(i,j) * x(j)", {"A": A, "x": X}),
    ("y(i) = A(i,j) * x(j) * 2", {"A": A, "x": X}),
    ("r(i,j) = A(i,j) + A(i,j)", {"A": A}),
    ("T(i,k) = Z(i,j) * W(j,k)\nG(i,k) = S(i,l) * T(l,k)\nH(i,k) = relu(G(i,k))",
     {"Z": RNG.uniform(size=(40, 7)), "W": RNG.uniform(size=(7, 3)), "S": S}),
])
def test_sparse_entries_equal_the_dense_evaluation(monkeypatch, program, inputs):
    dense = expr.evaluate(program, inputs)
    monkeypatch.setattr(expr, "SPARSE_KEEP_ENTRIES", 0)        # every sparse input kept sparse
    got = expr.evaluate(program, inputs)
    assert set(got) == set(dense)
    for name in dense:
        np.testing.assert_allclose(got[name], dense[name], rtol=1e-12, atol=1e-12)


def test_a_large_spmv_reference_is_scipys_without_densifying():
    """SpMV with 3 x 10^6 nonzeros over 300,000 columns (dense: 720 GB): SciPy's result, in under 400 MB."""
    n = 300_000
    a = sp.random(n, n, density=3e6 / n / n, format="csr", random_state=np.random.default_rng(1))
    x = RNG.uniform(-1, 1, n)
    tracemalloc.start()
    try:
        y = expr.evaluate("y(i) = A(i,j) * x(j)", {"A": a, "x": x})["y"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(y, a @ x, rtol=1e-12, atol=1e-12)
    assert peak < 400e6, peak
