"""Every kernel of the suite against NumPy: several sizes and densities (empty rows, all-zero, 1x1), both modes."""

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.samml import kernels
from fuseflow.samml.expr import evaluate
from fuseflow.sim import run
from fuseflow.sim.check import tolerance


@pytest.mark.parametrize("mode", ["float", "fixed"])
@pytest.mark.parametrize("density", [0.0, 0.25, 0.7])
@pytest.mark.parametrize("n", [1, 5, 12])
@pytest.mark.parametrize("name", sorted(kernels.SUITE))
def test_kernel_matches_numpy(name, n, density, mode):
    prog = kernels.build(name, n)
    inputs = kernels.random_inputs(prog, density, seed=n * 7 + int(density * 10))
    want = evaluate(prog.expr, inputs)
    res = run(prog, inputs, mode=mode)
    rtol, atol = tolerance(mode)
    for out, value in want.items():
        np.testing.assert_allclose(res.outputs[out], value, rtol=rtol, atol=atol)
    assert res.cycles > 0 and res.stats["tokens"] > 0


def test_design_example_spmv_dcsr():
    prog, inputs = kernels.dcsr_example()
    res = run(prog, inputs)
    x = res.tensors["x"]
    assert dict(zip(x.levels[0].crd.tolist(), x.vals.tolist())) == {0: 10.0, 2: 60.0}


def test_outputs_are_canonical_no_empty_fibres():
    """Rows whose products vanish are dropped (the empty-fibre rule), so the written level has no empty fibre."""
    A = sp.csr_array(np.array([[1.0, 0, 0], [0, 2.0, 0], [0, 0, 0]]))
    B = sp.csr_array(np.array([[0.0, 0, 0], [0, 3.0, 0], [0, 0, 4.0]]))
    res = run(kernels.spmspm_gustavson(3, 3, 3), {"A": A, "B": B})
    X = res.tensors["X"]
    assert X.levels[0].crd.tolist() == [1]            # row 0 of A*B is empty and is dropped
    assert X.levels[1].seg.tolist() == [0, 1]
    np.testing.assert_allclose(res.outputs["X"], (A @ B).toarray())


def test_fixed_results_are_raw_integers():
    prog, inputs = kernels.dcsr_example()
    res = run(prog, inputs, mode="fixed")
    assert res.tensors["x"].vals.dtype == np.int64
    assert res.tensors["x"].vals.tolist() == [10 << 16, 60 << 16]


def test_scipy_and_dense_inputs_agree():
    prog = kernels.build("spmv_csr", 6)
    inputs = kernels.random_inputs(prog, 0.4, seed=2)
    a = run(prog, inputs)
    b = run(prog, {"B": sp.csr_array(inputs["B"]), "c": inputs["c"]})
    np.testing.assert_array_equal(a.outputs["x"], b.outputs["x"])
    assert a.cycles == b.cycles
