"""The paper's four models traced from PyTorch at every fusion configuration, checked against PyTorch;
one configuration of each on Verilator, bit-identical to the fixed-mode simulator."""

import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fuseflow  # noqa: E402
from fuseflow.models import MODELS, example  # noqa: E402
from fuseflow.models import data  # noqa: E402
from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")

#: (model, configuration) pairs too long for the default run (seconds to minutes of simulation each)
SLOW = {("graphsage", "full"), ("decoder", "partial"), ("decoder", "full")}
CASES = [pytest.param(name, cfg, marks=[pytest.mark.slow] if (name, cfg) in SLOW else [])
         for name in MODELS for cfg in ("unfused", "partial", "full")]


@pytest.mark.parametrize("name, config", CASES)
def test_model_matches_pytorch(name, config):
    # the fused decoder recomputes heavily (docs/pytorch.md): checked at 16 x 8 to keep the run in minutes
    sizes = dict(seq=16, dim=8) if (name, config) in {("decoder", "partial"), ("decoder", "full")} else {}
    model, inputs = example(name, **sizes)
    m = fuseflow.compile(model, inputs, fuse=model.FUSION[config])
    flt = m.check(mode="float")
    assert flt.ok and flt.max_rel_error <= 1e-6, flt.problems
    fixed = m.check(mode="fixed")
    assert fixed.ok, fixed.problems
    if config == "unfused":
        # one kernel per PyTorch op, and more for softmax / layer norm (lowered to several statements first)
        sugar = sum(("softmax[" in text or "layernorm[" in text) for text, *_ in m.statements)
        assert len(m.program.kernels) == len(m.statements) if not sugar else len(m.program.kernels) > len(m.statements)
    else:
        assert len(m.program.kernels) < len(m.statements)


RTL = [pytest.param("gcn", "partial"),
       pytest.param("autoencoder", "full", marks=pytest.mark.slow),
       pytest.param("graphsage", "partial", marks=pytest.mark.slow),
       pytest.param("decoder", "unfused", marks=pytest.mark.slow)]


@requires_verilator
@pytest.mark.parametrize("name, config", RTL)
def test_model_on_verilator(name, config, tmp_path):
    """Each model at its configuration with the smallest design (GCN: the demo's), bit- and cycle-identical to
    the fixed-mode simulator; the files written are the design that ran. The autoencoder's C++ is compiled at
    -O0 (``compile_fast``, as ``make demo`` does); the decoder's is by default (its Verilog is over 4 MB)."""
    model, inputs = example(name)
    m = fuseflow.compile(model, inputs, fuse=model.FUSION[config])
    r = m.rtl_sim(out_dir=tmp_path / "build", compile_fast=True if name == "autoencoder" else None)
    assert r["done"] and r["ok"], r["mismatches"] or r["stuck"]
    assert r["cycles_equal"], (r["rtl_kernel_cycles"], r["sim_kernel_cycles"])
    assert r["sim_cycles"] == m.simulate(mode="fixed").cycles
    with open(r["paths"]["manifest"]) as f:
        manifest = json.load(f)
    assert [k["name"] for k in manifest["kernels"]] == [k.name for k in m.program.kernels]
    assert f"module {manifest['module']}" in open(r["paths"]["verilog"]).read()


def test_partial_fusion_groups_each_layer():
    model, inputs = example("gcn")
    m = fuseflow.compile(model, inputs, fuse="regions")
    regions = {key for _, _, key in m.statements}
    assert regions == {"conv1", "conv2"}
    assert [k.name for k in m.program.kernels] == ["Relu", "Conv2_linear"]


def test_decoder_fusion_configs_follow_the_reshapes():
    from fuseflow.frontends.pytorch import region_key
    cfg = fuseflow.models.Decoder(blocks=2).FUSION
    assert len(cfg["partial"]) == 6 and len(cfg["full"]) == 5
    assert region_key("blocks.0.attn.q_proj", cfg["partial"]) == 0
    assert region_key("blocks.0.attn", cfg["partial"]) == 1
    assert region_key("blocks.0.attn.o_proj", cfg["partial"]) == 2
    assert region_key("blocks.0", cfg["partial"]) == 2                 # the residual adds
    # full: subset 3 of block 0 and subset 1 of block 1 are one region
    assert region_key("blocks.0.mlp.fc2", cfg["full"]) == region_key("blocks.1.ln1", cfg["full"])


def test_autoencoder_weights_are_pruned_and_stored_sparse():
    model, inputs = example("autoencoder")
    assert model.weight_sparsity() >= 0.5
    m = fuseflow.compile(model, inputs)
    assert m.ff_text.count(": dcsr") == 3


def test_karate_club_offline():
    g = data.karate_club()
    assert g.nodes == 34
    assert g.neighbours.values().numel() == 2 * 78
    a = g.adjacency.to_dense().numpy()
    assert np.allclose(a, a.T) and np.all(np.diag(a) > 0)
    assert sorted(np.bincount(g.labels.numpy()).tolist()) == [17, 17]


@pytest.mark.parametrize("kind", data.GRAPH_KINDS)
def test_synthetic_graphs_have_the_asked_size(kind):
    g = data.synthetic_graph(kind, nodes=500, features=128, sparsity=0.95, seed=1)
    assert g.nodes == 500 and tuple(g.features.shape) == (500, 128)
    assert 0.90 <= g.sparsity() <= 0.99


def test_model_object_save_load_report(tmp_path):
    model, inputs = example("gcn")
    m = fuseflow.compile(model, inputs, fuse="regions")
    want = m.simulate()
    m.save(tmp_path / "m")
    back = fuseflow.load(tmp_path / "m", model)
    got = back.simulate(inputs)
    assert got.cycles == want.cycles
    assert torch.equal(got.outputs, want.outputs)
    assert back.check(inputs).ok
    table = m.report()
    assert "Relu" in table and "Conv2_linear" in table and "FIFO slots" in table
    assert str(want.cycles) in table.splitlines()[-1]


@pytest.mark.slow
def test_model_object_build(tmp_path):
    model, inputs = example("autoencoder")
    m = fuseflow.compile(model, inputs, fuse="full")
    paths = m.build(tmp_path / "build")
    assert open(paths["verilog"]).read().count("module ") >= 1
    assert fuseflow.compiler.EinsumProgram.parse(open(paths["ff"]).read()).to_ir().outputs


def test_wrong_inputs_are_refused():
    from fuseflow.errors import TensorError
    model, inputs = example("gcn")
    m = fuseflow.compile(model, inputs)
    with pytest.raises(TensorError):
        m.simulate((inputs[0], inputs[1][:, :3]))
    with pytest.raises(TensorError):
        m.simulate(inputs[:1])


def test_fuse_auto_picks_the_fastest_schedule_it_simulated():
    from fuseflow.errors import ProgramError
    from fuseflow.sim import engine
    model, inputs = example("gcn")
    m = fuseflow.compile(model, inputs, fuse="auto")
    assert m.check(mode="float").ok and m.check(mode="fixed").ok
    simulated = [c for c in m.candidates if c.simulated_cycles is not None]
    assert len(simulated) >= 2 and m.schedule.simulated_cycles == min(c.simulated_cycles for c in simulated)
    # the compiled program is the chosen schedule: it runs in the cycles the autoscheduler measured
    assert engine.run(m.program, m._inputs(None), memory="hbm2").cycles == m.schedule.simulated_cycles
    assert len(m.program.kernels) == m.schedule.kernels
    # a kernel budget: only schedules within it are ranked
    one = fuseflow.compile(model, inputs, fuse="auto", max_kernels=1)
    assert len(one.program.kernels) == 1 and one.check(mode="float").ok
    with pytest.raises(ProgramError, match="impossible"):
        fuseflow.compile(model, inputs, fuse="auto", max_nodes=5)


def test_fuse_auto_lane_options():
    from fuseflow.errors import FuseFlowError
    model, inputs = example("gcn")
    with pytest.raises(FuseFlowError, match="not both"):
        fuseflow.compile(model, inputs, fuse="auto", parallel={"i": 2}, max_lanes=4)
    with pytest.raises(FuseFlowError, match="max_lanes"):
        fuseflow.compile(model, inputs, fuse="regions", max_lanes=4)


def test_fuse_auto_with_a_lane_budget_checks_against_pytorch():
    model, inputs = example("gcn")
    m = fuseflow.compile(model, inputs, fuse="auto", max_lanes=2, max_kernels=1)
    assert m.schedule.parallel and set(m.schedule.parallel.values()) == {2}
    assert any(n.op == "serialize" for k in m.program.kernels for n in k.nodes.values())
    assert m.check(mode="float").ok


@pytest.mark.parametrize("name", ["decoder", "autoencoder", "attention"])
def test_size_ladders_build_the_declared_sizes(name):
    """example(name, size=...) builds each rung of the ladder with the sizes its table declares."""
    import importlib
    from fuseflow.errors import FuseFlowError
    from fuseflow.models import example
    sizes = importlib.import_module(f"fuseflow.models.{name}").SIZES
    assert set(sizes) == {"small", "medium", "paper"}
    for size in ("small", "medium"):
        model, inputs = example(name, size=size)
        want = sizes[size]
        if name == "decoder":
            assert tuple(inputs[0].shape) == (want["seq"], want["dim"])
            assert model.blocks[0].attn.heads == want["heads"]
        elif name == "autoencoder":
            assert tuple(inputs[0].shape)[1] == want["features"]
            assert model.weight_sparsity() == pytest.approx(want["sparsity"], abs=0.01)
        else:
            assert tuple(inputs[0].shape) == (want["heads"], want["seq"], want["head_dim"])
    with pytest.raises(FuseFlowError, match="unknown size"):
        example(name, size="huge")
