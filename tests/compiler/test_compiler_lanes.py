"""Parallel lanes (``parallel i N``): the schedule in the language, the CLI and the API; the lanes pass; outputs
identical, bit for bit, to one lane; bad factors and indices refused with one-line errors."""

import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from fuseflow.compiler import EinsumProgram, compile_text
from fuseflow.compiler.fusion import KernelPlan
from fuseflow.errors import ProgramError
from fuseflow.compiler.passes.lanes import stream_levels
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
    ("parallel j 11", "factor 11 is larger than the dimension of j (10)"),
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
    ("i=abc", "positive integer"),
    ("i=2.0", "positive integer"),
    ("j=11", "larger than the dimension of j (10)"),
    ("i=", "expected INDEX=FACTOR"),
])
def test_cli_bad_parallel(tmp_path, value, why):
    r = cli("compile", os.path.join(EX, "spmv.ff"), "-o", str(tmp_path / "out"), f"--parallel={value}")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], r.stderr
    assert not (tmp_path / "out" / "graph.json").exists()


@pytest.mark.parametrize("line, why", [
    ("parallel i 0", "must be at least 1"),
    ("parallel i -2", "must be at least 1"),
    ("parallel i 2.5", "positive integer"),
    ("parallel q 2", "no kernel has index q"),
    ("parallel i 9", "larger than the dimension of i (8)"),
])
def test_cli_bad_parallel_line(tmp_path, line, why):
    """The same refusals from a ``parallel`` line of the program: one line, exit 2, nothing written."""
    prog = tmp_path / "bad.ff"
    prog.write_text(source("spmv") + "\n" + line + "\n")
    r = cli("compile", str(prog), "-o", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and why in lines[0], r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


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


# ---- inner indices and nested lanes ------------------------------------------------------------------------

def indices_of(text, name):
    """The indices of a program's kernels, in first-seen order."""
    seen = []
    for plan in compile_text(text, name=name).plans:
        if isinstance(plan, KernelPlan):
            seen += [i for i in plan.order if i not in seen]
    return seen


def check_schedules(name, schedules, modes=("float", "fixed"), seed=7):
    """Every schedule of ``name`` gives the single lane's written tensors, bit for bit."""
    text = source(name)
    one = compile_text(text, name=name).program
    ins = random_inputs(one, seed)
    refs = {mode: run(one, ins, mode=mode) for mode in modes}
    for schedule in schedules:
        prog = compile_text(text, name=name, parallel=schedule).program
        for mode in modes:
            same_tensors(refs[mode], run(prog, ins, mode=mode))


def test_nested_4x4_sddmm():
    """SDDMM (order i,j,k) with i on 4 lanes and j on 4 lanes inside each: 16 copies of the k loop, outputs
    identical to one lane, fewer cycles than either factor alone."""
    text = source("sddmm")
    one = compile_text(text, name="sddmm").program
    ins = random_inputs(one, seed=9, density=0.6)
    nested = compile_text(text, name="sddmm", parallel="i=4,j=4").program
    ids = set(nested.kernels[0].nodes)
    inner = [nid for nid in ids if nid.startswith("reduce_k_")]
    assert len(inner) == 16 and {"reduce_k_l0_l0", "reduce_k_l3_l3"} <= set(inner)
    cycles = {}
    for mode in ("float", "fixed"):
        ref = run(one, ins, mode=mode)
        got = run(nested, ins, mode=mode)
        same_tensors(ref, got)
        cycles[mode] = got.cycles
    outer = run(compile_text(text, name="sddmm", parallel="i=4").program, ins, mode="fixed").cycles
    assert cycles["fixed"] < outer < run(one, ins, mode="fixed").cycles


def test_nested_language_lines_and_cli(tmp_path):
    """``parallel i 2`` + ``parallel j 2`` in a program and ``--parallel i=2,j=2`` give the same graph."""
    text = source("sddmm")
    a = compile_text(text + "\nparallel i 2\nparallel j 2\n", name="sddmm").program.to_json()
    b = compile_text(text, name="sddmm", parallel="i=2,j=2").program.to_json()
    assert a == b
    r = cli("compile", os.path.join(EX, "sddmm.ff"), "-o", str(tmp_path), "--parallel", "i=2,j=2")
    assert r.returncode == 0, r.stderr
    from fuseflow.samml import load
    assert load(str(tmp_path / "graph.json")).to_json() == b


def test_inner_index_with_a_reduction_over_it():
    """SpMM T(i,j) = A(i,k) X(k,j), order i,k,j, with k on lanes: the spacc over k stays single and gets the
    lanes' terms through serializers keyed on the k coordinates (several fibres: one per row)."""
    check_schedules("spmm", ["k=2", "k=3", "i=2,k=2"])
    prog = compile_text(source("spmm"), name="spmm", parallel="k=2").program
    k = prog.kernels[0]
    assert [n.op for n in k.nodes.values()].count("spacc") == 1
    sers = [n for n in k.nodes.values() if n.op == "serialize"]
    assert sers and all(k.driver(n.id, "key0").src.node.startswith("par_") for n in sers)


def test_chain_reduced_index_keys():
    """chain3 (A B) C fused, k on lanes: k's coordinates come from an intersection whose crd output is unused
    (k is reduced); the serializers' keys are that output, not the j coordinates after the reduction."""
    check_schedules("chain3", ["k=2", "i=2,k=2"])


ALL_PROGRAMS = sorted(f[:-3] for f in os.listdir(EX) if f.endswith(".ff") and f != "decoder.ff")
FAST = {"spmv", "spmm", "sddmm", "elementwise", "gcn", "reductions", "chain3"}


def coverage_cases():
    cases = []
    for name in ALL_PROGRAMS:
        marks = () if name in FAST else (pytest.mark.slow,)
        cases.append(pytest.param(name, id=name, marks=marks))
    return cases


@pytest.mark.parametrize("name", coverage_cases())
def test_every_index_at_2_and_4(name):
    """Every example program, every index of its kernels at factors 2 and 4 (capped at the index's dimension)
    and the first two indices nested at 2 x 2: the single lane's outputs, float and fixed."""
    text = source(name)
    idx = indices_of(text, name)
    res = compile_text(text, name=name)
    sizes = {}
    for plan in res.plans:
        if isinstance(plan, KernelPlan):
            for i in plan.order:
                sizes[i] = min(sizes.get(i, 1 << 30), int(plan.sizes.get(i) or 1))
    schedules = [{i: min(f, sizes[i])} for i in idx for f in (2, 4) if sizes[i] >= 2]
    if len(idx) >= 2:
        schedules.append({idx[0]: 2, idx[1]: 2})
    assert schedules
    check_schedules(name, schedules)


@settings(max_examples=10, deadline=None)
@given(st.data())
def test_random_programs_on_lanes(data):
    """Random fused programs (tests/compiler/compiler_randprog.py), a random index (or two nested) at a random
    factor, random inputs: the written tensors of one lane, bit for bit, in fixed and float mode."""
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    from compiler_randprog import random_programs
    rp = data.draw(random_programs(max_stmts=3, allow_exp=False, allow_div=False, concordant=True))
    try:
        res = compile_text(rp.text, name="rand")
    except ProgramError:
        return                                        # a program the compiler refuses is not this test's subject
    plans = [p for p in res.plans if isinstance(p, KernelPlan)]
    idx = sorted({i for p in plans for i in p.order})
    chosen = data.draw(st.lists(st.sampled_from(idx), min_size=1, max_size=2, unique=True))
    schedule = {i: data.draw(st.integers(2, rp.size)) for i in chosen}
    mode = data.draw(st.sampled_from(["float", "fixed"]))
    ins = random_inputs(res.program, data.draw(st.integers(0, 1 << 16)), density=0.5)
    ref = run(res.program, ins, mode=mode)
    try:
        prog = compile_text(rp.text, name="rand", parallel=schedule).program
    except ProgramError as exc:
        # the schedules the pass refuses (test_lanes_refuse_two_dealings, test_lanes_refuse_a_repeat_signal_tail):
        # anything else is a failure
        assert "which the lanes would deal differently" in str(exc) or "which no serializer merges" in str(exc), exc
        return
    same_tensors(ref, run(prog, ins, mode=mode))


def test_lanes_refuse_a_repeat_signal_tail():
    """A repeat signal made in the lanes (a dense scan of i) and read by a repeat outside them (T0() broadcast
    over i) would need a serializer for repsig tokens, which carry no coordinate to order the lanes by: refused
    in one line, not a graph that fails validation (found by test_random_programs_on_lanes)."""
    text = ("tensor A(2, 2, 2) : ddd\ntensor B(2, 2) : dd\ntensor C(2) : d\nfuse {\n  T0() = A(i,j,k)\n"
            "  T1(i) = B(i,j)\n  T2(i) = A(i,j,k) * T0()\n}\n")
    compile_text(text, name="rep")                      # one lane compiles
    with pytest.raises(ProgramError) as exc:
        compile_text(text, name="rep", parallel="i=2")
    msg = str(exc.value)
    assert "repeat signal" in msg and "which no serializer merges" in msg and "\n" not in msg


def test_lanes_refuse_two_dealings():
    """A lane op merging the parallelized level of two different co-iterations (here a union of B's compressed
    rows with A's dense ones) is refused with one line: the parallelizers deal by position, so one row would go
    to two lanes (found by test_random_programs_on_lanes)."""
    text = ("tensor A(2) : d\ntensor B(2, 2, 2) : dcc\ntensor C(2, 2, 2) : dcc\nfuse {\n  T0(i,j) = C(i,j,k)\n"
            "  T1(i) = T0(k,j) * A(k) * B(i,j,k) + A(i)\n}\n")
    with pytest.raises(ProgramError) as exc:
        compile_text(text, name="two", parallel="i=2")
    assert "union node union merges coordinates of the parallelized index from scan_Ap_i and scan_B_p021_i" \
        in str(exc.value)
