"""Fusion of PyTorch models that never silently loses (issue 43): transform-first GCN layers (PyTorch Geometric's
order, ``A @ lin(x)``) fused per child module are reported or rewritten, flat models get regions by data flow,
and ``fuse="auto"`` finds the fast schedule within its time budget.

Golden values: the PyTorch model itself in float64 (``CompiledModel.check``); work: the simulator's counters."""

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import fuseflow  # noqa: E402
from fuseflow.compiler.redundancy import TOLERANCE, FusionRedundancyWarning  # noqa: E402

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")


def graph(nodes=64, features=12, density=0.08, seed=1):
    """A random symmetric normalised adjacency with self loops (sparse CSR) and dense features."""
    rng = np.random.default_rng(seed)
    a = (rng.random((nodes, nodes)) < density).astype(float)
    a = np.maximum(a, a.T) + np.eye(nodes)
    d = 1.0 / np.sqrt(a.sum(1))
    a = a * d[:, None] * d[None, :]
    return (torch.tensor(a, dtype=torch.float32).to_sparse_csr(),
            torch.tensor(rng.standard_normal((nodes, features)), dtype=torch.float32))


class TransformFirstConv(nn.Module):
    """``A @ lin(x) + bias`` (the bias after the aggregation, as in PyG)."""

    def __init__(self, i, o):
        super().__init__()
        self.lin = nn.Linear(i, o, bias=False)
        self.bias = nn.Parameter(torch.linspace(-0.2, 0.2, o))

    def forward(self, a, x):
        return torch.sparse.mm(a, self.lin(x)) + self.bias


class TransformFirstGCN(nn.Module):
    def __init__(self, i=12, h=7, c=3):
        super().__init__()
        torch.manual_seed(3)
        self.layer1 = TransformFirstConv(i, h)
        self.layer2 = TransformFirstConv(h, c)

    def forward(self, a, x):
        return self.layer2(a, torch.relu(self.layer1(a, x)))


class FlatGCN(nn.Module):
    """Everything in the top-level forward(): aggregate-first layer 1, transform-first layer 2."""

    def __init__(self, i=12, h=7, c=3):
        super().__init__()
        torch.manual_seed(4)
        self.w1 = nn.Linear(i, h)
        self.w2 = nn.Linear(h, c, bias=False)

    def forward(self, a, x):
        h = torch.relu(self.w1(torch.sparse.mm(a, x)))
        return torch.sparse.mm(a, self.w2(h))


@pytest.fixture(scope="module")
def data():
    return graph()


def test_transform_first_regions_warn_in_one_line(data):
    with pytest.warns(FusionRedundancyWarning) as got:
        m = fuseflow.compile(TransformFirstGCN(), data, fuse="regions", mode="float")
    lines = [str(w.message) for w in got if w.category is FusionRedundancyWarning]
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith("kernel ") and "recomputes Layer1_lin per nonzero of a" in lines[0]
    assert [r.line() for r in m.redundancies] == lines
    # the warning is true: fused does several times the unfused ALU ops and is slower
    none = fuseflow.compile(TransformFirstGCN(), data, fuse="none", mode="float").simulate()
    fused = m.simulate()
    assert fused.stats["alu_ops"] > 3 * none.stats["alu_ops"] and fused.cycles > none.cycles
    assert m.check().ok


def test_rewrite_is_at_most_as_slow_as_none_and_matches_pytorch(data):
    none = fuseflow.compile(TransformFirstGCN(), data, fuse="none", mode="float")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        m = fuseflow.compile(TransformFirstGCN(), data, fuse="regions", mode="float", redundancy="rewrite")
    notes = [str(w.message) for w in got if w.category is FusionRedundancyWarning]
    assert notes and all(("reassociated" in n or "materialised" in n) for n in notes)
    assert m.simulate().cycles <= none.simulate().cycles * (1 + TOLERANCE)
    assert m.check().ok


def test_flat_forward_is_grouped_by_data_flow(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionRedundancyWarning)
        m = fuseflow.compile(FlatGCN(), data, fuse="regions", mode="float", redundancy="ignore")
    none = fuseflow.compile(FlatGCN(), data, fuse="none", mode="float")
    # two regions: [A @ x, w1, relu] and [w2, A @ h]
    assert m.ff_text.count("fuse {") == 2
    assert len(m.program.kernels) == 2 < len(none.program.kernels)
    assert m.check().ok


def test_auto_finds_the_fast_schedule_within_its_budget(data):
    from fuseflow.sim import run

    def hbm2_cycles(m):                                  # what the autoscheduler ranks and simulates under
        return run(m.program, m._inputs(None), memory="hbm2").cycles
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionRedundancyWarning)
        cycles = {f: hbm2_cycles(fuseflow.compile(TransformFirstGCN(), data, fuse=f, mode="float"))
                  for f in ("none", "regions")}
    lines = []
    m = fuseflow.compile(TransformFirstGCN(), data, fuse="auto", mode="float", budget=30, progress=lines.append)
    rep = m.schedule_report
    assert m.compile_seconds < 30 and rep.seconds <= m.compile_seconds
    assert m.schedule.simulated_cycles <= 1.05 * min(cycles.values())
    assert hbm2_cycles(m) == m.schedule.simulated_cycles
    assert m.check().ok
    assert rep.simulations >= 1 and rep.report().startswith("auto: chose ")
    assert any("assoc:" in c.fuse for c in m.candidates)          # reassociated forms were ranked
    assert m.report().split("\n")[0].endswith(f"compiled in {m.compile_seconds:.2f} s")


def test_auto_without_simulation_and_a_tiny_budget(data):
    m = fuseflow.compile(TransformFirstGCN(), data, fuse="auto", mode="float", simulate=False, budget=0.05)
    assert m.schedule.simulated_cycles is None
    rep = m.schedule_report
    assert rep.simulations == 0 and any("budget" in s.why for s in rep.skipped)
    assert m.check().ok
    with pytest.raises(fuseflow.errors.FuseFlowError, match="budget"):
        fuseflow.compile(TransformFirstGCN(), data, fuse="regions", budget=5)
    with pytest.raises(fuseflow.errors.FuseFlowError, match="redundancy"):
        fuseflow.compile(TransformFirstGCN(), data, fuse="regions", redundancy="maybe")
