"""The ML model examples (``fuseflow/programs/decoder.ff``, ``autoencoder.ff``, ``graphsage2.ff``) compiled at
none / regions / full and simulated on model-scale data (``fuseflow.models``): float mode matches NumPy within
a relative error of 1e-9, fixed mode within the tolerance of ``docs/numbers.md`` (example models)."""

import os

import numpy as np
import pytest

import fuseflow.sim as sim
from fuseflow.compiler import EinsumProgram, compile_program, parse_file
from fuseflow.models import PRUNED_KEEP, example_inputs

from compiler_harness import reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: fixed-mode tolerance (absolute, on outputs of magnitude up to about 4): docs/numbers.md, example models
FIXED_ATOL = {"decoder": 2e-3, "autoencoder": 5e-4, "graphsage2": 1e-3}
#: (model, fuse) pairs too slow for the default run (the decoder's full fusion is its regions graph: below)
SLOW = {("decoder", "regions"), ("decoder", "full")}
CASES = [pytest.param(m, f, marks=[pytest.mark.slow] if (m, f) in SLOW else [])
         for m in ("autoencoder", "graphsage2", "decoder") for f in ("none", "regions", "full")]


def load(name):
    ir = parse_file(os.path.join(ROOT, "fuseflow", "programs", f"{name}.ff")).to_ir()
    inputs = example_inputs(name, {t.name: t.shape for t in ir.tensors.values() if t.role == "input"}, seed=0)
    return ir, inputs


@pytest.mark.parametrize("name,fuse", CASES)
def test_model_matches_numpy(name, fuse):
    ir, inputs = load(name)
    res = compile_program(ir, fuse=fuse)
    ref = reference(ir, inputs)
    flt = sim.run(res.program, inputs, mode="float")
    fix = sim.run(res.program, inputs, mode="fixed")
    for out in ir.outputs:
        np.testing.assert_allclose(flt.outputs[out], ref[out], rtol=1e-9, atol=1e-12, err_msg=f"{name} {fuse}")
        np.testing.assert_allclose(fix.outputs[out], ref[out], rtol=0, atol=FIXED_ATOL[name],
                                   err_msg=f"{name} {fuse} fixed")
    assert flt.cycles == fix.cycles                   # timing does not depend on the number format


def test_models_are_what_they_say():
    ir, inputs = load("autoencoder")
    for w in ("W1", "W2", "W3"):
        assert ir.tensors[w].levels == ("compressed", "compressed")
        assert np.mean(inputs[w] == 0) >= 0.5                     # pruned: at least half the weights are zero
    assert PRUNED_KEEP <= 0.5
    ir, inputs = load("graphsage2")
    assert (inputs["A"].sum(axis=1) >= 1).all() and set(np.unique(inputs["A"])) == {0.0, 1.0}
    ir, _ = load("decoder")
    assert ir.tensors["X"].shape[0] >= 32 and ir.tensors["X"].shape[1] >= 16 and ir.tensors["WQ"].shape[0] == 2
    res = compile_program(ir, fuse="none")
    ops = {n.op for k in res.program.kernels for n in k.nodes.values()}
    assert "mask_scan" in ops                                      # BigBird: a coordinate mask, no mask tensor
    alu = {n.params["op"] for k in res.program.kernels for n in k.nodes.values() if n.op == "alu"}
    assert {"rsqrt", "gelu", "exp"} <= alu                     # layer norm, MLP, softmax
    assert not any(t.name.startswith("mask") for t in res.program.tensors.values())


def test_decoder_full_fusion_stops_at_its_barriers():
    """Full fusion fuses everything between the barriers (the paper's reshapes); for one decoder block that is
    the regions graph, byte for byte, so what is checked for ``regions`` holds for ``full``."""
    from fuseflow.samml import dumps
    ir, _ = load("decoder")
    assert len({s.segment for s in ir.stmts}) == 3                    # heads split, heads merged
    full, regions = compile_program(ir, fuse="full"), compile_program(ir, fuse="regions")
    assert [k.name for k in full.program.kernels] == ["Q", "K", "V", "Att", "R1_t1", "R1", "Out"]
    assert dumps(full.program) == dumps(regions.program)


@pytest.mark.slow        # about 10 s to compile: one kernel of about 6800 nodes
def test_decoder_without_barriers_is_one_kernel_at_full():
    text = open(os.path.join(ROOT, "fuseflow", "programs", "decoder.ff")).read()
    lines = [ln for ln in text.splitlines() if ln.split("#")[0].strip() != "barrier"]
    assert len(lines) == len(text.splitlines()) - 2
    res = compile_program(EinsumProgram.parse("\n".join(lines)).to_ir(), fuse="full")
    assert [k.name for k in res.program.kernels] == ["Out"]
    assert sum(len(k.nodes) for k in res.program.kernels) > 3000      # recomputation: docs/language.md, "Barriers"


def test_attention_of_the_decoder_is_one_kernel_at_regions():
    ir, _ = load("decoder")
    res = compile_program(ir, fuse="regions")
    names = [k.name for k in res.program.kernels]
    assert "Att" in names and not any(n.startswith("P_") for n in names)
