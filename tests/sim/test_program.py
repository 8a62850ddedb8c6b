"""Programs of several kernels: intermediates written by one kernel are read by the next."""

import numpy as np
import pytest

from fuseflow.errors import GraphError, TensorError
from fuseflow.samml import Program, from_dict
from fuseflow.samml.kernels import Builder, random_sparse
from fuseflow.sim import run
from fuseflow.tensors import FixedFormat, PackedTensor, TensorFormat


def two_kernels(m=5, n=6):
    """T(i,j) = A(i,j) * B(i,j) materialised, then x(i) = T(i,j) * c(j)."""
    p = Program("mul_then_spmv", expr="T(i,j) = A(i,j) * B(i,j)\nx(i) = T(i,j) * c(j)")
    p.tensor("A", "input", [m, n], ["compressed", "compressed"])
    p.tensor("B", "input", [m, n], ["dense", "compressed"])
    p.tensor("c", "input", [n], ["compressed"])
    p.tensor("T", "intermediate", [m, n], ["compressed", "compressed"])
    p.tensor("x", "output", [m], ["compressed"])
    b = Builder(p)
    b.k.name = "elementwise"
    cia, ria = b.scan("A", 0, b.root("A"))
    cib, rib = b.scan("B", 0, b.root("B"))
    ci, (ra, rb) = b.join("intersect", [(cia, ria), (cib, rib)], "i")
    cja, rja = b.scan("A", 1, ra)
    cjb, rjb = b.scan("B", 1, rb)
    cj, (ra, rb) = b.join("intersect", [(cja, rja), (cjb, rjb)], "j")
    ti, tj = b.drop(ci, cj, "i")
    b.write("T", [ti, tj], b.alu("mul", b.vals("A", ra), b.vals("B", rb), "mul"))
    b.k = p.kernel("spmv")
    ci, ri = b.scan("T", 0, b.root("T"))
    cj, rj = b.scan("T", 1, ri)
    cc, rc = b.scan("c", 0, b.repeat(b.root("c"), ci, "c_i"))
    cj, (rt, rc) = b.join("intersect", [(cj, rj), (cc, rc)], "j")
    x = b.reduce(b.alu("mul", b.vals("T", rt), b.vals("c", rc), "mul"), "j")
    xi, _ = b.drop(ci, cj, "i")
    b.write("x", [xi], x)
    return p


@pytest.mark.parametrize("mode", ["float", "fixed"])
@pytest.mark.parametrize("density", [0.0, 0.3, 0.9])
def test_intermediate_passes_between_kernels(density, mode):
    rng = np.random.default_rng(int(density * 10))
    A, B, c = random_sparse(rng, (5, 6), density), random_sparse(rng, (5, 6), density), random_sparse(rng, (6,), 0.7)
    res = run(two_kernels(), {"A": A, "B": B, "c": c}, mode=mode)
    tol = 1e-9 if mode == "float" else 2e-3
    np.testing.assert_allclose(res.outputs["x"], (A * B) @ c, atol=tol)
    assert len(res.kernel_cycles) == 2 and res.cycles == sum(res.kernel_cycles)
    T = res.tensors["T"]
    assert "T" not in res.outputs
    got = T.decode_fixed(FixedFormat()) if mode == "fixed" else T
    np.testing.assert_allclose(got.to_dense(), A * B, atol=tol)


def test_program_round_trips_and_keeps_kernel_order():
    p = two_kernels()
    q = from_dict(p.to_json())
    assert [k.name for k in q.kernels] == ["elementwise", "spmv"]


def test_reading_an_intermediate_before_it_is_written():
    p = two_kernels()
    p.kernels.reverse()
    with pytest.raises(GraphError, match="reads tensor 'T' before any kernel writes it"):
        run(p, {"A": np.ones((5, 6)), "B": np.ones((5, 6)), "c": np.ones(6)})


def test_prepacked_input_in_the_wrong_format():
    p = two_kernels()
    packed = PackedTensor.pack(np.ones((5, 6)), TensorFormat(("dense", "dense")))
    with pytest.raises(TensorError, match="packed as"):
        run(p, {"A": packed, "B": np.ones((5, 6)), "c": np.ones(6)})
