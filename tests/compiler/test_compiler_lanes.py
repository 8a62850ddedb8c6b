"""Parallel lanes (``parallel i N``): the schedule in the language, the CLI and the API; the lanes pass; outputs
identical, bit for bit, to one lane; bad factors and indices refused with one-line errors."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fuseflow.compiler import EinsumProgram, compile_text
from fuseflow.errors import ProgramError
from fuseflow.samml.lanes import stream_levels
from fuseflow.sim import run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "fuseflow", "programs")
PROGRAMS = ("spmv", "spmm", "elementwise", "gcn")


def source(name):
    with open(os.path.join(EX, f"{name}.ff")) as f:
        return f.read()


def random_inputs(prog, seed, density=0.3):
    """Sparse inputs with values on a 1/64 grid (exact in fixed point), some rows empty."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in prog.inputs:
        vals = rng.integers(-128, 128, t.shape) / 64.0
        sparse = any(lv == "compressed" for lv in t.levels)
        mask = rng.random(t.shape) < (density if sparse else 1.0)
        if sparse and len(t.shape) == 2:
            mask[rng.random(t.shape[0]) < 0.25] = False          # whole empty rows: dropped in the lanes
        out[t.name] = vals * mask
    return out


def same_tensors(a, b):
    """Every written tensor identical: the same levels (seg, crd) and the same values, exactly."""
    assert set(a.tensors) == set(b.tensors)
    for name, ta in a.tensors.items():
        tb = b.tensors[name]
        for la, lb in zip(ta.levels, tb.levels):
            for arr in ("seg", "crd"):
                if hasattr(la, arr):
                    assert np.array_equal(getattr(la, arr), getattr(lb, arr)), (name, arr)
        assert np.array_equal(ta.vals, tb.vals, equal_nan=ta.vals.dtype.kind == "f"), name


def ops(prog):
    return [n.op for k in prog.kernels for n in k.nodes.values()]


@pytest.mark.parametrize("name", PROGRAMS)
def test_lanes_give_the_single_lane_outputs(name):
    text = source(name)
    one = compile_text(text, name=name).program
    ins = random_inputs(one, seed=3)
    for mode in ("float", "fixed"):
        ref = run(one, ins, mode=mode)
        for factor in (2, 4):
            prog = compile_text(text, name=name, parallel={"i": factor}).program
            assert ops(prog).count("parallelize") >= 1 and ops(prog).count("serialize") >= 2
            got = run(prog, ins, mode=mode)
            same_tensors(ref, got)
            for out in ref.outputs:
                assert np.array_equal(ref.outputs[out], got.outputs[out], equal_nan=True)


def test_spmv_lanes_match_numpy_and_speed_up():
    text = source("spmv")
    one = compile_text(text, name="spmv").program
    ins = random_inputs(one, seed=5, density=0.6)
    want = ins["B"] @ ins["c"]
    cycles = []
    for factor in (1, 2, 4):
        r = run(compile_text(text, name="spmv", parallel={"i": factor}).program, ins)
        np.testing.assert_allclose(r.outputs["x"], want, rtol=1e-12, atol=1e-12)
        cycles.append(r.cycles)
    assert cycles[0] > cycles[1] > cycles[2]


def test_no_parallel_changes_nothing():
    text = source("spmm")
    a = compile_text(text, name="spmm").program.to_json()
    b = compile_text(text, name="spmm", parallel={"i": 1}).program.to_json()
    assert a == b


def test_lane_copies_and_boundaries():
    """SpMV at factor 2: two copies of every op below i, parallelizers on the i-level streams into the lanes,
    one serializer per writer fed by the lanes; the head (root, i scan) and the writers stay single."""
    prog = compile_text(source("spmv"), name="spmv", parallel={"i": 2}).program
    k = prog.kernels[0]
    assert {"root", "scan_B_i", "write_x0", "write_x_vals"} <= set(k.nodes)
    assert {"scan_B_j_l0", "scan_B_j_l1", "reduce_j_l0", "reduce_j_l1"} <= set(k.nodes)
    assert "scan_B_j" not in k.nodes
    for wid in ("write_x0", "write_x_vals"):
        ser = k.nodes[k.driver(wid, "crd" if wid == "write_x0" else "val").src.node]
        assert ser.op == "serialize" and ser.params == {"lanes": 2, "depth": 0}
    levels = stream_levels(k)
    assert levels["root.ref"] == -1 and levels["scan_B_i.crd"] == 0 and levels["scan_B_j_l0.crd"] == 1


def test_language_line():
    text = source("spmv") + "\nparallel i 2\n"
    prog = compile_text(text, name="spmv").program
    assert ops(prog).count("serialize") == 2
    # the API's parameter wins over the program's line
    prog4 = compile_text(text, name="spmv", parallel="i=4").program
    assert {n.params["lanes"] for n in prog4.kernels[0].nodes.values() if n.op == "serialize"} == {4}


@pytest.mark.parametrize("text, why", [
    ("parallel i 0", "must be at least 1"),
    ("parallel i -2", "must be at least 1"),
    ("parallel i 2.5", "positive integer"),
    ("parallel i", "expected 'parallel INDEX FACTOR'"),
    ("parallel q 2", "no kernel has index q"),
    ("parallel i 9", "factor 9 is larger than the dimension of i (8)"),
    ("parallel j 2", "index j is not the outermost of kernel x"),
    ("parallel i 2\nparallel i 3", "given twice"),
])
def test_bad_schedules(text, why):
    with pytest.raises(ProgramError, match=".*") as exc:
        compile_text(source("spmv") + "\n" + text + "\n", name="spmv")
    assert why in str(exc.value)


def colsum_program(fmt="csr", rows=12, cols=7):
    p = EinsumProgram("colsum")
    p.tensor("A", (rows, cols), fmt)
    p.tensor("x", (rows,), "dense")
    p.statement("y(j) = A(i,j) * x(i)", order="i,j")
    return p


@pytest.mark.parametrize("fmt", ["csr", "dcsr"])
def test_reduction_over_the_parallelized_index(fmt):
    """y(j) = sum_i A(i,j) x(i) with i on lanes: the lanes' products are merged back in row order before the one
    spacc, so the sums are the single lane's, bit for bit (float and fixed) and equal to NumPy's."""
    from fuseflow.compiler import compile_program
    one = compile_program(colsum_program(fmt)).program
    ins = random_inputs(one, seed=11, density=0.5)
    for mode in ("float", "fixed"):
        ref = run(one, ins, mode=mode)
        for factor in (2, 3, 4):
            prog = compile_program(colsum_program(fmt), parallel={"i": factor}).program
            k = prog.kernels[0]
            spaccs = [n for n in k.nodes.values() if n.op == "spacc"]
            assert len(spaccs) == 1                           # the reduction stays single: one order of additions
            for port in ("crd_inner", "val"):
                assert k.nodes[k.driver(spaccs[0].id, port).src.node].op == "serialize"
            got = run(prog, ins, mode=mode)
            same_tensors(ref, got)
    np.testing.assert_allclose(run(one, ins).outputs["y"], ins["A"].T @ ins["x"], rtol=1e-12, atol=1e-12)


def test_reductions_program_on_lanes():
    """reductions.ff: a max over j (inside the lanes) and a sum over i (over the lanes) in one fused kernel."""
    text = source("reductions")
    one = compile_text(text, name="reductions").program
    ins = random_inputs(one, seed=2)
    for mode in ("float", "fixed"):
        ref = run(one, ins, mode=mode)
        for factor in (2, 4):
            same_tensors(ref, run(compile_text(text, name="reductions", parallel={"i": factor}).program, ins,
                                  mode=mode))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fuseflow.compiler", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


@pytest.mark.parametrize("value, why", [
    ("i=0", "must be at least 1"),
    ("i=-1", "must be at least 1"),
    ("i=1.5", "positive integer"),
    ("k=2", "no kernel has index k"),
    ("i=9", "larger than the dimension of i (8)"),
    ("i=65", "exceeds the limit of 64 parallel lanes"),
])
def test_cli_bad_parallel(tmp_path, value, why):
    r = cli("compile", os.path.join(EX, "spmv.ff"), "-o", str(tmp_path / "out"), f"--parallel={value}")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], r.stderr
    assert not (tmp_path / "out" / "graph.json").exists()


def test_cli_parallel(tmp_path):
    r = cli("compile", os.path.join(EX, "spmv.ff"), "-o", str(tmp_path), "--parallel", "i=2")
    assert r.returncode == 0, r.stderr
    from fuseflow.samml import load
    prog = load(str(tmp_path / "graph.json"))
    assert ops(prog).count("parallelize") >= 1


SPMM = """
tensor A({m}, {n}) : {fmt}
tensor X({n}, 3) : dense
T(i,j) = A(i,k) * X(k,j)
order i,k,j
"""


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["spmv", "spmm"]), st.integers(1, 9), st.integers(1, 7), st.sampled_from(["csr", "dcsr"]),
       st.floats(0.05, 0.9), st.integers(2, 6), st.integers(0, 1 << 16), st.sampled_from(["float", "fixed"]))
def test_random_inputs_and_factors(kind, m, n, fmt, density, factor, seed, mode):
    if kind == "spmv":
        text = f"tensor B({m}, {n}) : {fmt}\ntensor c({n}) : sv\nx(i) = B(i,j) * c(j)\n"
    else:
        text = SPMM.format(m=m, n=n, fmt=fmt)
    factor = min(factor, m)
    one = compile_text(text, name=kind).program
    ins = random_inputs(one, seed, density)
    ref = run(one, ins, mode=mode)
    prog = compile_text(text, name=kind, parallel={"i": factor}).program
    same_tensors(ref, run(prog, ins, mode=mode))


def test_pytorch_model_with_lanes():
    """``fuseflow.compile(..., parallel=...)``: a traced Linear + ReLU on 3 lanes gives the one-lane result."""
    torch = pytest.importorskip("torch")
    import fuseflow
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(6, 4)
    one = fuseflow.compile(model, x, mode="fixed")
    three = fuseflow.compile(model, x, mode="fixed", parallel={"i": 3})
    assert "serialize" in ops(three.program) and "serialize" not in ops(one.program)
    a, b = one.simulate(x).outputs.numpy(), three.simulate(x).outputs.numpy()
    assert np.array_equal(a, b)
    np.testing.assert_allclose(b, model(x).detach().numpy(), atol=1e-3)
