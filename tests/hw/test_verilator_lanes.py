"""Parallel lanes on Verilator: every example program (``fuseflow/programs/*.ff``) and every suite kernel
(``fuseflow.samml.kernels.SUITE``) that has a parallelizable index, at 2 and 4 lanes on one representative index
(the outermost, or a reduction index where the lanes then feed an order-preserving combine), plus reductions
and nested schedules. The RTL's outputs are bit-identical to the fixed-mode reference simulator and its cycles
equal (the parallelizer, the serializer and each lane's own memory read ports modelled alike), and the written
tensors equal the one-lane program's, bit for bit.

Inputs: values on a 1/64 grid (exact in fixed point), a quarter of the rows of every sparse matrix empty (rows
the lanes drop) and two densities, so each lane gets several rows, some of them empty. Slow: each case is its own
Verilator build (one to a few minutes each on a loaded 2-core machine); ``vector_add`` and ``vector_mul`` have no
index with work below it (nothing to parallelize) and are not cases."""

import os

import numpy as np
import pytest

from fuseflow.compiler import compile_text
from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run
from fuseflow.hw.top import compare_tensors
from fuseflow.reports import suites
from fuseflow.samml import kernels

from verilator_probe import requires_verilator, verilator  # noqa: E402

pytestmark = [pytest.mark.slow,
              requires_verilator]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "fuseflow", "programs")

#: one representative index per example program: the outermost, or the reduction index where the lanes then
#: feed the one reduction through serializers (chain3's k, gcn2's k, spmm's k; reductions.ff's i is both)
PROGRAM_INDEX = {
    "autoencoder": "n", "chain3": "k", "chain4": "i", "elementwise": "i", "gcn": "i", "gcn2": "k",
    "graphsage": "i", "graphsage2": "i", "masked_attention": "i", "multiuse": "i", "permute3": "i",
    "reductions": "i", "sddmm": "i", "spmm": "k", "spmv": "i",
}
#: the decoder is the largest program: last, at the granularity with the smallest design, on its heads h (2 of
#: them) and on the key index j; its query index i is refused (a layer norm's union of i from several
#: co-iterations: docs/compiler.md, "Parallel lanes", refused)
DECODER = ("decoder", "none", {2: "h", 4: "j"})
#: suite kernels: the scale n (roughly n x n; ttv is n/2 x n/2 x n) and the size of the outermost index
KERNEL_SCALE = {
    "spmv_csr": 12, "spmv_dcsr": 12, "spmspm_inner": 12, "spmspm_gustavson": 12,
    "spmspm_outer": 12,            # outermost k: the order-2 spacc reduces over the lanes' index
    "elementwise_add": 12, "elementwise_mul": 12, "sddmm": 12, "residual": 12, "ttv": 16,
}
NO_LANES = ("vector_add", "vector_mul")


def lane_inputs(program, seed, density):
    """Values on a 1/64 grid; sparse tensors at ``density`` with a quarter of their rows empty, dense ones full."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in program.inputs:
        vals = rng.integers(-128, 128, t.shape) / 64.0
        sparse = any(lv != "dense" for lv in t.levels)
        mask = rng.random(t.shape) < (density if sparse else 1.0)
        if sparse and len(t.shape) >= 2:
            mask[rng.random(t.shape[0]) < 0.25] = False
        out[t.name] = vals * mask
    return out


def check_lanes_on_verilator(prog, one, input_sets, cache, label, compile_fast=True):
    """Build ``prog`` (with lanes) once on Verilator; for every input set the RTL's tensors are bit-identical to
    the fixed-mode simulator's, its per-kernel cycles equal, and the tensors equal the one-lane program ``one``'s.
    Returns [(lane cycles, one-lane cycles)] per input set (printed for the record). ``compile_fast``: the
    design's C++ unoptimised (the runs are short); None for the default, which shares the correlation suite's
    builds."""
    assert any(n.op == "serialize" for k in prog.kernels for n in k.nodes.values())
    b = build(prog)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache, compile_fast=compile_fast)
    cycles = []
    for inputs in input_sets:
        ref = reference_run(prog, inputs)
        res = verilator.run_verilator(bdir, b.name, b.manifest(), check_inputs_fit(b, inputs),
                                      20 * ref.cycles + 1000)
        assert res["done"], res
        assert compare_tensors(ref.tensors, res["tensors"]) == []
        assert [res["kernel_cycles"][k.name] for k in prog.kernels] == list(ref.kernel_cycles)
        single = reference_run(one, inputs)
        assert set(single.tensors) == set(ref.tensors)
        for t in single.tensors:
            assert np.array_equal(single.tensors[t].vals, ref.tensors[t].vals), t
        cycles.append((ref.cycles, single.cycles))
    print(f"\nLANES {label}: RTL = simulator, cycles (lanes, one lane) {cycles}", flush=True)
    return cycles


def source(name):
    with open(os.path.join(EX, f"{name}.ff")) as f:
        return f.read()


def check_program(name, schedule, cache, fuse="regions", input_sets=None):
    text = source(name)
    one = compile_text(text, name=name, fuse=fuse).program
    prog = compile_text(text, name=name, fuse=fuse, parallel=schedule).program
    if input_sets is None:
        input_sets = [lane_inputs(one, seed, density) for seed, density in ((1, 0.5), (2, 0.2))]
    label = f"{name}.ff/fuse={fuse}/" + ",".join(f"{i}={n}" for i, n in schedule.items())
    return check_lanes_on_verilator(prog, one, input_sets, cache, label,
                                    None if in_parallel_suite(name, fuse, schedule) else True)


def in_parallel_suite(name, fuse, schedule):
    """Whether the ``parallel`` correlation suite builds the same design (then the test shares its build)."""
    f = f"{name}.ff"
    return fuse == "regions" and ((f in suites.PARALLEL_PROGRAMS and list(schedule) == ["i"]
                                   and schedule["i"] in suites.PARALLEL_FACTORS)
                                  or (f, schedule) in suites.PARALLEL_SCHEDULES)


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("name", sorted(PROGRAM_INDEX))
def test_program_lanes_on_verilator(name, factor, cache):
    check_program(name, {PROGRAM_INDEX[name]: factor}, cache)


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("name", sorted(KERNEL_SCALE))
def test_suite_kernel_lanes_on_verilator(name, factor, cache):
    n = KERNEL_SCALE[name]
    one = kernels.build(name, n)
    outer = one.inputs[0].shape[0] if name != "spmspm_outer" else n
    assert one.reports["lanes"] == {}
    prog = kernels.build(name, n, passes={"parallel": {one.kernels[0].name: {"lanes": factor, "dim": outer}}})
    assert prog.reports["lanes"] == {one.kernels[0].name: factor}
    input_sets = [lane_inputs(one, seed, density) for seed, density in ((1, 0.5), (2, 0.2))]
    check_lanes_on_verilator(prog, one, input_sets, cache, f"kernel {name} n={n} outer x{factor}")


def test_vector_kernels_have_no_lanes():
    # the only index has no work below it: the pass leaves the kernel as it is (not a Verilator case)
    for name in NO_LANES:
        one = kernels.build(name, 12)
        prog = kernels.build(name, 12, passes={"parallel": {one.kernels[0].name: {"lanes": 2, "dim": 12}}})
        assert prog.reports["lanes"] == {}
        assert [n.op for n in prog.kernels[0].nodes.values()] == [n.op for n in one.kernels[0].nodes.values()]


@pytest.mark.parametrize("factor", [2, 4])
def test_spmv_lanes_on_verilator(factor, cache):
    # kernels.random_inputs at three densities; fewer cycles than one lane
    one = compile_text(source("spmv"), name="spmv").program
    input_sets = [kernels.random_inputs(one, density=d, seed=s) for s, d in ((1, 0.5), (2, 0.2), (3, 0.9))]
    for lanes, single in check_program("spmv", {"i": factor}, cache, input_sets=input_sets):
        assert lanes < single


@pytest.mark.parametrize("name, schedule", [
    ("spmm", {"k": 2}),             # the spacc over k gets the lanes' terms in order: a reduction across lanes
    ("reductions", {"i": 2}),       # a sum over i (and a max over j inside the lanes)
    ("sddmm", {"i": 2, "j": 2}),    # nested: two lanes of j inside each of two lanes of i
])
def test_reductions_and_nested_lanes_on_verilator(name, schedule, cache):
    one = compile_text(source(name), name=name).program
    input_sets = [kernels.random_inputs(one, density=d, seed=s) for s, d in ((1, 0.5), (2, 0.2))]
    check_program(name, schedule, cache, input_sets=input_sets)


@pytest.mark.parametrize("factor", [2, 4])
def test_decoder_lanes_on_verilator(factor, cache):
    """The decoder (the largest program) at granularity ``none``, on its model-scale example data."""
    from fuseflow.models import example_inputs
    name, fuse, index = DECODER
    one = compile_text(source(name), name=name, fuse=fuse).program
    inputs = example_inputs(name, {t.name: t.shape for t in one.inputs}, seed=1)
    check_program(name, {index[factor]: factor}, cache, fuse=fuse, input_sets=[inputs])
