"""A GCN trained on Cora in PyTorch keeps its accuracy when compiled to fixed point (issue: real data).

The golden value is PyTorch's own accuracy of the same trained model; the simulator's outputs are scored
with the same labels and split. Needs the compiled engine (the Python engine takes minutes on Cora)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import fuseflow  # noqa: E402
from fuseflow import datasets  # noqa: E402
from fuseflow.errors import FuseFlowError  # noqa: E402
from fuseflow.models import gcn_for  # noqa: E402
from fuseflow.models.training import accuracy, train  # noqa: E402
from fuseflow.sim import compiled  # noqa: E402


def test_accuracy_counts_argmax_hits_on_the_split():
    g = datasets.load("cora").subgraph(datasets.load("cora").bfs(300))
    labels = np.asarray(g.labels)
    idx = np.asarray(g.split["test"])
    logits = np.zeros((g.nodes, g.num_classes))
    logits[np.arange(g.nodes), labels] = 1.0            # every node right
    assert accuracy(logits, g) == 1.0
    wrong = idx[: len(idx) // 2]
    logits[wrong] = 0.0
    logits[wrong, (labels[wrong] + 1) % g.num_classes] = 1.0
    assert accuracy(logits, g) == pytest.approx(1 - len(wrong) / len(idx))
    with pytest.raises(FuseFlowError, match="one row per node"):
        accuracy(logits[:-1], g)


def test_training_learns_on_a_cora_sample():
    g = datasets.load("cora")
    g = g.subgraph(g.bfs(300))
    model, inputs = gcn_for(g)
    before = accuracy(model(*inputs).detach(), g, "train")
    r = train(model, g, inputs, epochs=40)
    assert accuracy(model(*inputs).detach(), g, "train") > max(before, 0.8)
    assert set(r) >= {"loss", "test_accuracy"}


@pytest.mark.skipif(not compiled.available(), reason="the compiled simulator engine is not built")
def test_trained_cora_gcn_fixed_point_accuracy_within_one_point_of_pytorch():
    g = datasets.load("cora")
    model, inputs = gcn_for(g)
    train(model, g, inputs, epochs=100)
    with torch.no_grad():
        want = accuracy(model(*inputs), g)
    assert want > 0.7                                  # it learned (Kipf and Welling report 81.5 %)
    m = fuseflow.compile(model, inputs, fuse="none", mode="fixed")
    sim = m.simulate(engine="compiled")
    got = accuracy(sim.outputs, g)
    assert abs(got - want) <= 0.01, (got, want)
