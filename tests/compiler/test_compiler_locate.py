"""The locate pass: dense operands of intersections are located, not scanned (docs/compiler.md, section 4b).

Results are checked against NumPy; cycles against the nonzero count (a bound on simulated cycles, not time)."""

import os

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import CompileOptions, compile_program, compile_text, parse_file
from fuseflow.errors import GraphError
from fuseflow.samml import kernels
from fuseflow.samml.expr import evaluate
from fuseflow.compiler.passes.locate import locate_pass
from fuseflow.sim import run

from compiler_harness import inputs_for, run_and_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def located(program):
    return sorted((n.params.get("tensor"), n.params.get("level")) for k in program.kernels
                  for n in k.nodes.values() if n.op == "locate")


def scanned(program, tensor):
    return [n for k in program.kernels for n in k.nodes.values()
            if n.op == "level_scan" and n.params.get("tensor") == tensor]


def n_nodes(program):
    return sum(len(k.nodes) for k in program.kernels)


def test_spmv_with_a_dense_vector_scales_with_nonzeros():
    n = 200
    B = sp.random(n, n, density=0.05, random_state=3, format="csr")
    c = np.random.default_rng(0).uniform(-1, 1, n)
    src = f"tensor B({n},{n}) : csr\ntensor c({n}) : dense\nx(i) = B(i,j) * c(j)\n"
    res = compile_text(src)
    assert located(res.program) == [("c", 0)] and scanned(res.program, "c") == []
    assert not any(nd.op == "intersect" for k in res.program.kernels for nd in k.nodes.values())
    got = run(res.program, {"B": B, "c": c})
    np.testing.assert_allclose(got.outputs["x"], B @ c, rtol=1e-12, atol=1e-12)
    assert got.cycles <= 1.2 * (B.nnz + n)
    scan = run(compile_text(src, locate=False).program, {"B": B, "c": c})
    np.testing.assert_allclose(scan.outputs["x"], B @ c, rtol=1e-12, atol=1e-12)
    assert scan.cycles >= n * n                       # without locate every row scans all of c


@pytest.mark.parametrize("name, want", [
    ("spmm", [("X", 0)]),                             # A(i,k) * X(k,j): X's rows located at A's k
    ("gcn", [("W", 0), ("X", 0)]),
    ("graphsage", [("W", 0), ("X", 0)]),
    ("sddmm", [("U", 0), ("V", 0), ("V", 1)]),        # U at i, V at j; at k U iterates and V is located
    ("elementwise", [("B", 0)]),                      # B is CSR: its row level is dense
    ("spmv", []),                                     # c is a sparse vector: nothing to locate
])
@pytest.mark.parametrize("fuse", ["none", "full"])
def test_examples_locate_their_dense_operands(name, want, fuse):
    ir = parse_file(os.path.join(ROOT, "fuseflow", "programs", f"{name}.ff")).to_ir()
    rng = np.random.default_rng(5)
    inputs = inputs_for(ir, rng, 0.3)
    res, on = run_and_check(ir, inputs, fuse=fuse)
    assert located(res.program) == want
    off_res, off = run_and_check(ir, inputs, fuse=fuse, locate=False)
    assert located(off_res.program) == []
    if want:
        # a located level needs neither its scanner's fibres nor an intersection with them
        assert n_nodes(res.program) < n_nodes(off_res.program)
        assert on.cycles <= off.cycles
        if name != "elementwise":     # there B's dense rows go in step with A's either way: fewer ops, same time
            assert on.cycles < off.cycles
    for t in ir.outputs:
        np.testing.assert_array_equal(on.outputs[t], off.outputs[t])


def test_unions_iterate_dense_operands():
    res, _ = run_and_check("tensor A(5,6) : dcsr\ntensor D(5,6) : dense\nT(i,j) = A(i,j) + D(i,j)\n")
    assert located(res.program) == []
    assert len(scanned(res.program, "D")) == 2


def test_no_locate_below_a_union():
    """D's j level sits below union(D_i, A_i): its parent reference may be N, so it stays a scan (a located N would
    keep B's coordinates with zero values); A(i,j) * D(i,j) alone locates both levels of D."""
    src = """
        tensor A(5,6) : dcsr
        tensor B(5,6) : dcsr
        tensor D(5,6) : dense
        Y(i,j) = (D(i,j) + A(i,j)) * B(i,j)
        Z(i,j) = A(i,j) * D(i,j)
    """
    res, _ = run_and_check(src, fuse="none")
    by_kernel = {k.name: sorted((n.params["tensor"], n.params["level"]) for n in k.nodes.values() if n.op == "locate")
                 for k in res.program.kernels}
    assert ("D", 1) not in by_kernel["Y"]
    assert by_kernel["Z"] == [("D", 0), ("D", 1)]


@pytest.mark.parametrize("order, a, x, want", [
    ("i,k,j", "csr", "dense", [("X", 0)]),            # Gustavson: X's row located at A's k
    ("i,j,k", "csr", "dense:1,0", [("X", 1)]),        # inner product: X's k located (its j level iterates)
    ("k,i,j", "csc", "dense", [("X", 0)]),            # outer product: X's rows located at A's k
])
@pytest.mark.parametrize("iteration", ["factored", "global"])
def test_spmm_orders_and_iterations(order, a, x, want, iteration):
    src = f"tensor A(6,7) : {a}\ntensor X(7,5) : {x}\nT(i,j) = A(i,k) * X(k,j)\n"
    res, _ = run_and_check(src, order=order, iteration=iteration, rng=np.random.default_rng(2))
    assert located(res.program) == want


def test_suite_kernels_locate_like_the_compiler():
    """The suite's builders run the same pass: sddmm without it (the builder's own graph) and with it compute the
    same tensor, in fewer cycles."""
    plain = kernels.sddmm.__wrapped__(6, 7, 4)
    assert located(plain) == []
    inputs = kernels.random_inputs(plain, density=0.4, seed=1)
    before = run(plain, inputs)
    after_prog = kernels.sddmm.__wrapped__(6, 7, 4)
    assert locate_pass(after_prog, CompileOptions()) == {"located": 3}
    assert located(after_prog) == [("C", 0), ("D", 0), ("D", 1)]
    after = run(after_prog, inputs)
    want = evaluate(plain.expr, inputs)["X"]
    np.testing.assert_allclose(after.outputs["X"], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(after.outputs["X"], before.outputs["X"])
    assert after.cycles < before.cycles


def test_locate_of_a_compressed_level_is_refused():
    p = kernels.spmv(3, 4, "csr")
    k = p.kernels[0]
    k.add("locate", {"ref": k.output_stream("scan_B0", "ref").src, "crd": k.output_stream("scan_B1", "crd").src},
          id="bad", dim=4, tensor="B", level=1)
    with pytest.raises(GraphError, match="only dense levels can locate"):
        p.validate()
