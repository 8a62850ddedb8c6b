"""Coordinate masks through the compiler and the simulator: the kept coordinates are exactly NumPy's (sparse
and dense operands, float and fixed mode, every granularity), masked attention scores over dense Q and K,
and bad masks on the command line (one-line error, exit 2, nothing written)."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from compiler_harness import random_tensor, run_and_check
from fuseflow.compiler import compile_text
from fuseflow.errors import ProgramError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRANULARITIES = ("none", "regions", "full")

sys.path.insert(0, os.path.join(ROOT, "tests", "samml"))
from mask_reference import numpy_mask  # noqa: E402


@st.composite
def masked_case(draw):
    kind = draw(st.sampled_from(["causal", "band", "bigbird"]))
    if kind == "bigbird":
        block = draw(st.integers(1, 3))
        rows, cols = block * draw(st.integers(1, 4)), block * draw(st.integers(1, 4))
        text = (f"bigbird:block={block},window={draw(st.sampled_from([0, 1, 3]))},global={draw(st.integers(0, 1))},"
                f"random={draw(st.integers(0, 2))},seed={draw(st.integers(0, 99))}")
    else:
        rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 9))
        text = "causal" if kind == "causal" else f"band:w={draw(st.integers(0, 3))}"
    fmt = draw(st.sampled_from(["csr", "dcsr", "dense"]))
    density = draw(st.sampled_from([0.2, 0.6, 1.0]))
    mode = draw(st.sampled_from(["float", "fixed"]))
    seed = draw(st.integers(0, 1 << 16))
    return text, rows, cols, fmt, density, mode, seed


@settings(max_examples=40, deadline=None)
@given(masked_case())
def test_mask_keeps_exactly_numpys_coordinates(case):
    """S = mask * A: the written S stores exactly the coordinates that NumPy's mask and A's nonzeros keep."""
    text, rows, cols, fmt, density, mode, seed = case
    rng = np.random.default_rng(seed)
    A = random_tensor((rows, cols), density, rng)
    src = f"tensor A({rows}, {cols}) : {fmt}\nS(i,j) = mask[{text}](i,j) * A(i,j)\n"
    tol = dict(rtol=1e-9, atol=1e-9) if mode == "float" else dict(rtol=1e-3, atol=1e-3)
    res, out = run_and_check(src, {"A": A}, fuse="full", mode=mode, **tol)
    keep = numpy_mask(text, rows, cols) & (A != 0)
    assert out.tensors["S"].nnz == int(keep.sum())
    np.testing.assert_array_equal(out.outputs["S"] != 0, keep)
    # a sparse operand is filtered (crd_mask), a dense one meets generated coordinates (mask_scan)
    ops = {n.op for k in res.program.kernels for n in k.nodes.values()}
    assert ("mask_scan" if fmt == "dense" else "crd_mask") in ops


@settings(max_examples=15, deadline=None)
@given(masked_case())
def test_masked_row_sums_and_empty_rows(case):
    """x(i) = sum[j](mask * A): rows the mask empties are dropped (canonical output), values match NumPy."""
    text, rows, cols, fmt, density, mode, seed = case
    rng = np.random.default_rng(seed)
    A = random_tensor((rows, cols), density, rng)
    src = f"tensor A({rows}, {cols}) : {fmt}\nx(i) = sum[j](mask[{text}](i,j) * A(i,j))\n"
    tol = dict(rtol=1e-9, atol=1e-9) if mode == "float" else dict(rtol=1e-3, atol=1e-3)
    _, out = run_and_check(src, {"A": A}, fuse="full", mode=mode, **tol)
    keep = numpy_mask(text, rows, cols) & (A != 0)
    assert out.tensors["x"].nnz == int(keep.any(axis=1).sum())


ATTENTION = """
tensor Q(16, 4) : dense
tensor K(16, 4) : dense
tensor V(16, 3) : dense
tensor A(16, 16) : csr
fuse {
  S(i,j) = mask[MASK](i,j) * sum[d](Q(i,d) * K(j,d))
  O(i,e) = sum[j](S(i,j) * V(j,e))
}
C(i,j) = mask[causal](i,j) * A(i,j)
"""
MASKS = ["bigbird:block=4,window=3,global=1,random=1,seed=0", "causal", "band:w=2",
         "bigbird:block=2,window=1,global=2,random=2,seed=5"]


@pytest.mark.parametrize("fuse", GRANULARITIES)
@pytest.mark.parametrize("mask", MASKS)
def test_masked_attention_scores(mask, fuse):
    """SDDMM with a mask over dense Q, K (the mask is the only sparse iterator), the scores times V, and a
    causal mask on a sparse operand, at every granularity, float and fixed."""
    rng = np.random.default_rng(1)
    inputs = {"Q": rng.uniform(-1, 1, (16, 4)), "K": rng.uniform(-1, 1, (16, 4)), "V": rng.uniform(-1, 1, (16, 3)),
              "A": random_tensor((16, 16), 0.4, rng)}
    src = ATTENTION.replace("MASK", mask)
    res, out = run_and_check(src, inputs, fuse=fuse)
    keep = numpy_mask(mask, 16, 16)
    assert out.tensors["C"].nnz == int((np.tril(np.ones((16, 16))) * (inputs["A"] != 0)).sum())
    if "S" in out.tensors:                       # S is materialised unless fused away
        assert out.tensors["S"].nnz == int(keep.sum())
    run_and_check(src, inputs, fuse=fuse, mode="fixed", rtol=1e-3, atol=1e-3)


def test_dense_scores_do_work_per_kept_entry():
    """With dense Q and K the products of the d loop run once per kept (i, j), not n^2 times."""
    n, d = 16, 4
    rng = np.random.default_rng(2)
    inputs = {"Q": rng.uniform(-1, 1, (n, d)), "K": rng.uniform(-1, 1, (n, d))}
    base = f"tensor Q({n}, {d}) : dense\ntensor K({n}, {d}) : dense\n"
    alu = {}
    for mask in ("", "mask[band:w=1](i,j) * "):
        _, out = run_and_check(base + f"S(i,j) = {mask}sum[d](Q(i,d) * K(j,d))\n", inputs)
        alu[mask] = out.stats["alu_ops"]
    kept = int(numpy_mask("band:w=1", n, n).sum())
    # every (i, j) costs the same d multiplies and adds: the masked kernel does kept/n^2 of the unmasked work
    assert alu[""] % (n * n) == 0 and alu[""] >= n * n * d
    assert alu["mask[band:w=1](i,j) * "] == alu[""] // (n * n) * kept
    # fused: the band of a consumer moves into the producer's reduction beside the BigBird mask
    bigbird = "bigbird:block=4,window=1,global=1,random=1,seed=3"
    src = base + f"S(i,j) = mask[{bigbird}](i,j) * sum[d](Q(i,d) * K(j,d))\nB(i,j) = mask[band:w=1](i,j) * S(i,j)\n"
    _, out = run_and_check(src, inputs, fuse="full")
    both = int((numpy_mask(bigbird, n, n) & numpy_mask("band:w=1", n, n)).sum())
    assert both < kept
    assert out.stats["alu_ops"] == alu[""] // (n * n) * both


def test_mask_tensor_still_intersects():
    """A mask *tensor* (data in memory) keeps working beside a coordinate mask."""
    rng = np.random.default_rng(4)
    M = (rng.random((8, 8)) < 0.5).astype(float)
    A = random_tensor((8, 8), 0.7, rng)
    src = "tensor M(8, 8) : csr\ntensor A(8, 8) : csr\nS(i,j) = M(i,j) * mask[causal](i,j) * A(i,j)\n"
    _, out = run_and_check(src, {"M": M, "A": A})
    np.testing.assert_allclose(out.outputs["S"], M * np.tril(A))


def test_mask_tables_and_text():
    res = compile_text("tensor A(8, 8) : csr\nS(i,j) = mask[band:w=1](i,j) * A(i,j)\n")
    assert "mask[band:w=1](i,j)" in res.program.expr
    table = res.tables["S"].render()
    assert "MaskFilter" in table and "LS_dense(8)" in table
    res = compile_text("tensor A(8, 8) : dense\nS(i,j) = mask[band:w=1](i,j) * A(i,j)\n")
    assert "MaskScan" in res.tables["S"].render()


@pytest.mark.parametrize("stmt, why", [
    ("S(i,j) = mask[causal](i,j) + A(i,j)", "must multiply an expression"),
    ("S(i,j) = mask[causal](i,j)", "must multiply an expression"),
    ("S(i,j) = exp(mask[causal](i,j)) * A(i,j)", "must multiply an expression"),
    ("x(i) = sum[k](mask[causal](i,k) * A(i,j))", "index k has no size"),
    ("S(i,j) = mask[bigbird:block=3](i,j) * A(i,j)", "block 3 does not divide the 8 rows"),
])
def test_compile_errors(stmt, why):
    with pytest.raises(ProgramError, match=why):
        compile_text(f"tensor A(8, 8) : csr\n{stmt}\n")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fuseflow.compiler", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("mask, why", [
    ("frobnicate", "unknown mask pattern 'frobnicate'"),
    ("band:w=-2", "w must be >= 0"),
    ("bigbird:block=3,window=3,global=1,random=1,seed=0", "block 3 does not divide the 8 rows"),
    ("band:width=2", "has no parameter 'width'"),
    ("bigbird:block=2,window=2", "window must be odd"),
])
def test_cli_bad_masks(tmp_path, mask, why):
    src = tmp_path / "bad.ff"
    src.write_text(f"tensor A(8, 8) : csr\nS(i,j) = mask[{mask}](i,j) * A(i,j)\n")
    out = tmp_path / "out"
    r = cli("compile", str(src), "-o", str(out))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not (out / "graph.json").exists()


def test_graph_with_bad_mask_scan_is_refused():
    from fuseflow.errors import GraphError
    from fuseflow.samml import Program
    p = Program("bad")
    k = p.kernel("k")
    root = k.add("root")
    k.add("mask_scan", {"ref": root["ref"]}, mask="bigbird:block=3", rows=8, dim=8)
    with pytest.raises(GraphError, match="block 3 does not divide"):
        p.validate()
