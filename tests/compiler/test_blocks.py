"""Blocked programs (issue #15): block SpMV and SpMM compile to block-granular graphs and match NumPy.

Goldens are dense NumPy products of the same matrices (in fixed mode: of the inputs rounded to the value format,
docs/numbers.md), never the code under test."""

import subprocess
import sys

import numpy as np
import pytest

from fuseflow.compiler import compile_text
from fuseflow.errors import ProgramError
from fuseflow.samml.blocks import block_shape
from fuseflow.samml.registry import block_matmul_latency
from fuseflow.sim import run, run_op
from fuseflow.tensors import FixedFormat

FX = FixedFormat(32, 16)
LSB = 2.0 ** -FX.frac


def block_sparse(rng, rows, cols, b, density=0.4, scale=1.0):
    """A (rows*b) x (cols*b) matrix whose nonzeros fill a random pattern of b x b blocks (at least one)."""
    pattern = rng.random((rows, cols)) < density
    pattern[rng.integers(rows), rng.integers(cols)] = True
    return np.kron(pattern, np.ones((b, b))) * rng.uniform(-scale, scale, (rows * b, cols * b))


def quantized(x):
    """The values the fixed-point simulator computes with (encode, then decode)."""
    return FX.decode(FX.encode(np.asarray(x, dtype=np.float64)))


def check(result, name, want, mode, contracted_blocks):
    """Float: NumPy to rounding; fixed: the block product rounds each output element once (half an LSB) per
    contracted block, the block sums are exact (docs/samml.md, block_matmul)."""
    got = result.outputs[name]
    if mode == "float":
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        assert np.max(np.abs(got - want)) <= contracted_blocks * LSB / 2 + 1e-12


def spmv(b, fmt="bcsr", vec="bdv"):
    return compile_text(f"""program bspmv
tensor A({5 * b}, {6 * b}) : {fmt}:{b}
tensor c({6 * b}) : {vec}:{b}
x(i) = A(i,j) * c(j)
""")


def spmm(b, afmt, xfmt, order):
    return compile_text(f"""program bspmm
tensor A({4 * b}, {5 * b}) : {afmt}:{b}
tensor X({5 * b}, {3 * b}) : {xfmt}:{b}
T(i,j) = A(i,k) * X(k,j)
order {order}
""")


@pytest.mark.parametrize("mode", ["float", "fixed"])
@pytest.mark.parametrize("fmt", ["bcsr", "bdcsr"])
@pytest.mark.parametrize("b", [2, 4, 8, 16])
def test_block_spmv(b, fmt, mode):
    rng = np.random.default_rng(100 * b + len(fmt))
    a, c = block_sparse(rng, 5, 6, b), rng.uniform(-1, 1, 6 * b)
    res = run(spmv(b, fmt).program, {"A": a, "c": c}, mode=mode)
    want = a @ c if mode == "float" else quantized(a) @ quantized(c)
    check(res, "x", want, mode, contracted_blocks=6)


@pytest.mark.parametrize("b", [2, 8])
def test_block_spmv_with_a_sparse_blocked_vector(b):
    rng = np.random.default_rng(b)
    a = block_sparse(rng, 5, 6, b)
    c = np.kron(rng.random(6) < 0.5, np.ones(b)) * rng.uniform(-1, 1, 6 * b)
    prog = spmv(b, "bdcsr", "bsv").program
    assert any(n.op == "intersect" for n in prog.kernels[0].nodes.values())
    check(run(prog, {"A": a, "c": c}), "x", a @ c, "float", 6)


@pytest.mark.parametrize("mode", ["float", "fixed"])
@pytest.mark.parametrize("afmt, xfmt, order", [("bcsr", "bcsr", "i,k,j"), ("bdcsr", "bdcsr", "i,k,j"),
                                                ("bdcsr", "bcsc", "i,j,k")], ids=["gustavson-bcsr",
                                                                                   "gustavson-bdcsr", "inner"])
@pytest.mark.parametrize("b", [2, 4, 8, 16])
def test_block_spmm(b, afmt, xfmt, order, mode):
    rng = np.random.default_rng(7 * b + len(afmt) + len(order))
    a, x = block_sparse(rng, 4, 5, b), block_sparse(rng, 5, 3, b, density=0.5)
    res = run(spmm(b, afmt, xfmt, order).program, {"A": a, "X": x}, mode=mode)
    want = a @ x if mode == "float" else quantized(a) @ quantized(x)
    check(res, "T", want, mode, contracted_blocks=5)


@pytest.mark.parametrize("b", [2, 4])
def test_fixed_point_is_exact_on_dyadic_values(b):
    """Values k/16 multiply to at most 8 fractional bits: no product is rounded, so fixed equals NumPy."""
    rng = np.random.default_rng(b)
    a = np.round(block_sparse(rng, 4, 5, b, scale=4.0) * 16) / 16
    x = np.round(block_sparse(rng, 5, 3, b, scale=4.0) * 16) / 16
    res = run(spmm(b, "bcsr", "bcsr", "i,k,j").program, {"A": a, "X": x}, mode="fixed")
    assert np.array_equal(res.outputs["T"], a @ x)


def test_graph_is_block_granular():
    b = 4
    prog = spmm(b, "bcsr", "bcsr", "i,k,j").program
    k = prog.kernels[0]
    ops = [n.op for n in k.nodes.values()]
    assert ops.count("block_matmul") == 1 and "alu" not in ops
    bmm = next(n for n in k.nodes.values() if n.op == "block_matmul")
    assert bmm.params == {"block": b, "rhs": "matrix"}
    assert prog.tensors["A"].shape == [4 * b, 5 * b] and prog.tensors["A"].block == [b, b]
    assert prog.tensors["A"].level_dim(1) == 5                       # levels over block coordinates
    scans = [n for n in k.nodes.values() if n.op in ("level_scan", "locate", "spacc")]
    assert all(n.params.get("dim") in (None, 3, 4, 5) for n in scans)
    for s in k.streams.values():
        assert block_shape(s) == ((b, b) if s.kind == "val" else ())
    vec = spmv(b).program.kernels[0]
    bmv = next(n for n in vec.nodes.values() if n.op == "block_matmul")
    assert bmv.params["rhs"] == "vector"
    assert block_shape(vec.output_stream(bmv.id, "out")) == (b,)


def test_unblocked_program_has_no_blocks():
    prog = compile_text("tensor A(8, 8) : csr\ntensor c(8) : dv\nx(i) = A(i,j) * c(j)\n").program
    assert "block" not in str(prog.to_json())


@pytest.mark.parametrize("mode", ["float", "fixed"])
def test_fused_relu_of_block_product(mode):
    res_prog = compile_text("""tensor A(16, 24) : bcsr:4
tensor X(24, 8) : bdcsr:4
fuse {
  T(i,j) = A(i,k) * X(k,j)
  order i,k,j
  H(i,j) = relu(T(i,j)) * 2
}
""").program
    assert len(res_prog.kernels) == 1
    rng = np.random.default_rng(5)
    a, x = block_sparse(rng, 4, 6, 4), block_sparse(rng, 6, 2, 4, density=0.6)
    res = run(res_prog, {"A": a, "X": x}, mode=mode)
    q = (lambda v: v) if mode == "float" else quantized
    check(res, "H", np.maximum(q(a) @ q(x), 0) * 2, mode, contracted_blocks=2 * 6)


@pytest.mark.parametrize("mode", ["float", "fixed"])
def test_element_wise_blocks(mode):
    prog = compile_text("""tensor A(8, 12) : bcsr:4
tensor M(8, 12) : bdcsr:4
Y(i,j) = A(i,j) * M(i,j) + A(i,j) * 0.5
""").program
    rng = np.random.default_rng(9)
    a, m = block_sparse(rng, 2, 3, 4, 0.7), block_sparse(rng, 2, 3, 4, 0.7)
    res = run(prog, {"A": a, "M": m}, mode=mode)
    q = (lambda v: v) if mode == "float" else quantized
    want = q(a) * q(m) + q(a) * 0.5
    np.testing.assert_allclose(res.outputs["Y"], want, atol=1e-12 if mode == "float" else 2 * LSB)


@pytest.mark.parametrize("text, why", [
    ("tensor A(8, 8) : bcsr:4\ntensor c(8) : dv\nx(i) = A(i,j) * c(j)\n",
     "A is blocked \\(bcsr:4\\) but c is not: declare c as bdv:4"),
    ("tensor A(8, 8) : bcsr:4\ntensor c(8) : bdv:2\nx(i) = A(i,j) * c(j)\n",
     "mismatched block sizes: c is bdv:2 but A is bcsr:4"),
    ("tensor A(8, 6) : bcsr:4\ntensor c(6) : bdv:4\nx(i) = A(i,j) * c(j)\n",
     "dimension 1 of size 6 is not divisible by the block size 4"),
    ("tensor A(8, 8) : bcsr:4\ntensor c(8) : bdv:4\nx(j) = A(i,j) * c(i)\n",
     "needs the layout A\\(i,k\\) \\* B\\(k,j\\)"),
    ("tensor A(8, 8) : bcsr:4\ntensor c(8) : bdv:4\nY(i,j) = A(i,j) * c(j)\n",
     "neither element-wise"),
])
def test_bad_blocked_programs(text, why):
    with pytest.raises(ProgramError, match=why):
        compile_text(text)


def test_bad_blocked_program_on_the_command_line(tmp_path):
    src = tmp_path / "mixed.ff"
    src.write_text("tensor A(8, 8) : bcsr:4\ntensor c(8) : sv\nx(i) = A(i,j) * c(j)\n")
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(src), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: ")
    assert "declare c as bdv:4" in r.stderr and "Traceback" not in r.stderr
    assert not (out / "graph.json").exists()


@pytest.mark.parametrize("b", [1, 2, 4, 8, 16])
def test_block_products_take_b_cycles_each(b):
    """n block products back to back: firings every B cycles, the last result L cycles after its firing."""
    n = 5
    rng = np.random.default_rng(b)
    blocks = [rng.standard_normal((b, b)) for _ in range(2 * n)]
    a, x = blocks[:n] + ["S0", "D"], blocks[n:] + ["S0", "D"]
    out, info = run_op("block_matmul", {"block": b}, {"a": a, "b": x}, stats=True)
    for k in range(n):
        np.testing.assert_allclose(out["out"][k], blocks[k] @ blocks[n + k], rtol=1e-12)
    # firings at 0, B, ..., (n-1)B; S0 at nB, D at nB + 1, visible L cycles later
    assert info["cycles"] == n * b + 1 + block_matmul_latency(b)
    assert info["busy"] == n * b + 2


@pytest.mark.parametrize("b", [2, 8])
def test_cost_model_counts_block_products(b):
    from fuseflow.compiler.cost import estimate
    rng = np.random.default_rng(b)
    a, x = block_sparse(rng, 6, 6, b, 0.3), block_sparse(rng, 6, 3, b, 1.0)
    prog = compile_text(
        f"tensor A({6 * b}, {6 * b}) : bcsr:{b}\ntensor X({6 * b}, {3 * b}) : bcsr:{b}\n"
        f"T(i,j) = A(i,k) * X(k,j)\norder i,k,j\n").program
    est, sim = estimate(prog, inputs={"A": a, "X": x}), run(prog, {"A": a, "X": x})
    assert est.mem_read_bytes == pytest.approx(sim.stats["mem_read_bytes"])     # every element of every block
    assert abs(est.cycles - sim.cycles) <= 0.25 * sim.cycles


@pytest.mark.parametrize("lanes", [2, 4])
def test_parallel_lanes_on_a_blocked_kernel(lanes):
    b = 4
    rng = np.random.default_rng(lanes)
    a, x = block_sparse(rng, 8, 6, b, 0.5), block_sparse(rng, 6, 3, b, 1.0)
    text = (f"tensor A({8 * b}, {6 * b}) : bcsr:{b}\ntensor X({6 * b}, {3 * b}) : bcsr:{b}\n"
            f"T(i,j) = A(i,k) * X(k,j)\norder i,k,j\n")
    prog = compile_text(text, parallel=f"i={lanes}").program
    ops = [n.op for n in prog.kernels[0].nodes.values()]
    assert ops.count("block_matmul") == lanes and "parallelize" in ops
    res = run(prog, {"A": a, "X": x})
    check(res, "T", a @ x, "float", 6)
    assert res.cycles < run(compile_text(text).program, {"A": a, "X": x}).cycles


@pytest.mark.parametrize("b", [4, 8, 16])
def test_blocked_attention_scores_equal_the_unblocked_program(b):
    """BigBird-style scores S = M * (Q KT) with M a block mask: blocked at B, unblocked, and NumPy agree."""
    n, d = 32, 16
    rng = np.random.default_rng(b)
    pattern = rng.random((n // 16, n // 16)) < 0.6          # 16 x 16 mask blocks: the same mask at every B
    np.fill_diagonal(pattern, True)
    mask = np.kron(pattern, np.ones((16, 16)))
    q, kt = rng.uniform(-1, 1, (n, d)), rng.uniform(-1, 1, (d, n))
    stmt = "S(i,j) = M(i,j) * sum[d](Q(i,d) * KT(d,j))\n"
    blocked = compile_text(f"tensor M({n}, {n}) : bcsr:{b}\ntensor Q({n}, {d}) : bcsr:{b}\n"
                           f"tensor KT({d}, {n}) : bcsr:{b}\n" + stmt).program
    plain_ = compile_text(f"tensor M({n}, {n}) : csr\ntensor Q({n}, {d}) : dense\ntensor KT({d}, {n}) : dense\n"
                          + stmt).program
    inputs = {"M": mask, "Q": q, "KT": kt}
    got, ref = run(blocked, inputs), run(plain_, inputs)
    np.testing.assert_allclose(got.outputs["S"], mask * (q @ kt), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.outputs["S"], ref.outputs["S"], rtol=1e-12, atol=1e-12)
    assert got.cycles < ref.cycles
