"""Training the graph models on a loaded graph, and their accuracy on its split.

A few seconds of full-batch CPU training make a GCN or GraphSAGE whose compiled, fixed-point twin can be
judged on a real task (``accuracy`` of the simulator's outputs against PyTorch's)::

    g = fuseflow.datasets.load("cora")
    model, inputs = gcn_for(g)
    train(model, g, inputs)                          # Kipf and Welling's recipe: 200 epochs, Adam
    m = fuseflow.compile(model, inputs, mode="fixed")
    print(accuracy(m.simulate().outputs, g), accuracy(model(*inputs), g))
"""

from __future__ import annotations

import numpy as np

from ..errors import FuseFlowError


def _dropout(x, p: float, training: bool):
    """Dropout; on a sparse CSR tensor (the features as stored) on its nonzeros only, then densified
    (Kipf and Welling's sparse dropout; PyTorch has no backward through sparse @ sparse, and the RNG over
    the nonzeros is 80x cheaper than over Cora's dense 2,708 x 1,433)."""
    import torch
    import torch.nn.functional as F
    if isinstance(x, torch.Tensor) and x.layout == torch.sparse_csr:
        vals = F.dropout(x.values(), p, training)
        return torch.sparse_csr_tensor(x.crow_indices(), x.col_indices(), vals, x.shape,
                                       check_invariants=False).to_dense()
    return F.dropout(x, p, training)


def _split(graph, part: str):
    if graph.labels is None or graph.split is None or part not in graph.split:
        raise FuseFlowError("graph", f"{graph.name!r} has no labels or no {part!r} split to train or score on")
    return graph.split[part]


def train(model, graph, inputs, epochs: int = 200, lr: float = 0.01, weight_decay: float = 5e-4,
          dropout: float = 0.5, seed: int = 0) -> dict:
    """Train ``model`` in place on ``graph``'s ``train`` nodes (cross entropy, Adam, dropout on each layer's
    input: Kipf and Welling's recipe). Returns ``{"epochs", "loss", "val_accuracy", "test_accuracy"}``.

    ``inputs`` are the model's inputs as :func:`~fuseflow.models.gcn_for` gives them."""
    import torch
    import torch.nn.functional as F
    train_idx = _split(graph, "train")
    labels = graph.labels
    if labels.dim() != 1:
        raise FuseFlowError("graph", "training needs single-label node classes (labels of shape (n,))")
    args = list(inputs)
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    layers = [m for m in model.children()]
    hooks = [layer.register_forward_pre_hook(
        lambda mod, a: (*a[:-1], _dropout(a[-1], dropout, mod.training))) for layer in layers]
    model.train()
    try:
        for _ in range(epochs):
            opt.zero_grad()
            loss = F.cross_entropy(model(*args)[train_idx], labels[train_idx])
            loss.backward()
            opt.step()
    finally:
        for h in hooks:
            h.remove()
    model.eval()
    with torch.no_grad():
        logits = model(*args)
    out = {"epochs": epochs, "loss": float(loss.detach())}
    for part in ("val", "test"):
        if graph.split is not None and part in graph.split:
            out[f"{part}_accuracy"] = accuracy(logits, graph, part)
    return out


def accuracy(logits, graph, part: str = "test") -> float:
    """Fraction of ``graph``'s ``part`` nodes whose largest output is their label (``logits``: n x classes,
    a tensor or an array, e.g. a simulation's outputs)."""
    idx = np.asarray(_split(graph, part))
    scores = np.asarray(logits.detach() if hasattr(logits, "detach") else logits, dtype=np.float64)
    if scores.ndim != 2 or scores.shape[0] != graph.nodes:
        raise FuseFlowError("logits", f"want one row per node ({graph.nodes}), got shape {scores.shape}")
    labels = np.asarray(graph.labels)
    return float(np.mean(scores[idx].argmax(axis=1) == labels[idx]))
