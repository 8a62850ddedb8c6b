"""The paper's three-layer sparse autoencoder: magnitude-pruned weights (>= 50% zeros), relu and sigmoid."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.utils.prune as prune

FUSION = {"unfused": "none", "partial": "regions", "full": "full"}

#: the size ladder of :func:`fuseflow.models.example` ("autoencoder", size=...): flattened square images of
#: ``features`` pixels. "paper" is the paper's ImageNet input (224 x 224) at its 50 % weight sparsity; the
#: paper does not state the hidden widths, these are ours.
SIZES = {"small": dict(features=64, hidden=32, code=16, sparsity=0.6),
         "medium": dict(features=32 * 32, hidden=128, code=32, sparsity=0.5),
         "paper": dict(features=224 * 224, hidden=256, code=64, sparsity=0.5)}


class SAELayer(nn.Module):
    """``act(X W^T + b)`` with ``W`` magnitude-pruned (``torch.nn.utils.prune.l1_unstructured``)."""

    def __init__(self, in_features: int, out_features: int, sparsity: float, activation: str = "relu"):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        prune.l1_unstructured(self.linear, "weight", amount=sparsity)
        self.activation = activation

    def forward(self, x):
        h = self.linear(x)
        return torch.sigmoid(h) if self.activation == "sigmoid" else torch.relu(h)


class SparseAutoencoder(nn.Module):
    """features -> hidden (relu) -> code (relu) -> features (sigmoid); every weight pruned to ``sparsity``.

    The front end stores pruned weights compressed (the prune mask says they are sparse)."""

    FUSION = FUSION

    def __init__(self, features: int = 64, hidden: int = 32, code: int = 16, sparsity: float = 0.6, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.enc1 = SAELayer(features, hidden, sparsity)
        self.enc2 = SAELayer(hidden, code, sparsity)
        self.dec = SAELayer(code, features, sparsity, activation="sigmoid")

    def forward(self, x):
        return self.dec(self.enc2(self.enc1(x)))

    def weight_sparsity(self) -> float:
        """Fraction of zero weights over the three layers."""
        ws = [m.linear.weight for m in (self.enc1, self.enc2, self.dec)]
        return float(sum((w == 0).sum() for w in ws) / sum(w.numel() for w in ws))
