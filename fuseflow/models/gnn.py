"""Graph models of the FuseFlow paper: a two-layer GCN and a two-layer GraphSAGE (mean aggregation).

Each layer is a child module, so ``fuse="regions"`` is the paper's partial fusion (one region per layer).
"""

from __future__ import annotations

import torch
import torch.nn as nn

#: the paper's fusion configurations (Appendix C, Figure 22 b and c)
FUSION = {"unfused": "none", "partial": "regions", "full": "full"}


class GCNLayer(nn.Module):
    """``act(A @ X @ W + b)``: neighbourhood sum with the normalised adjacency, then the weights."""

    def __init__(self, in_features: int, out_features: int, activation: bool = True):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.activation = activation

    def forward(self, adj, x):
        h = self.linear(torch.sparse.mm(adj, x))
        return torch.relu(h) if self.activation else h


class GCN(nn.Module):
    """Two-layer GCN (Kipf and Welling): ``A relu(A X W1 + b1) W2 + b2``.

    Inputs: ``adj`` (n x n, sparse CSR: the normalised adjacency), ``x`` (n x in_features)."""

    FUSION = FUSION

    def __init__(self, in_features: int = 16, hidden: int = 8, classes: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.conv1 = GCNLayer(in_features, hidden)
        self.conv2 = GCNLayer(hidden, classes, activation=False)

    def forward(self, adj, x):
        return self.conv2(adj, self.conv1(adj, x))


class SAGELayer(nn.Module):
    """``act(X W_self + mean_neighbours(X) W_neigh + b)``, the mean taken as ``(A @ X) / degree``.

    ``x`` may be sparse (CSR): ``A @ X`` is then sparse in PyTorch, and ``to_dense`` (nothing to the
    compiler) lets PyTorch divide it; the compiled program keeps ``X`` in its sparse format."""

    def __init__(self, in_features: int, out_features: int, activation: bool = True):
        super().__init__()
        self.self_linear = nn.Linear(in_features, out_features)
        self.neigh_linear = nn.Linear(in_features, out_features, bias=False)
        self.activation = activation

    def forward(self, adj, degree, x):
        mean = torch.sparse.mm(adj, x).to_dense() / degree
        h = self.self_linear(x) + self.neigh_linear(mean)
        return torch.relu(h) if self.activation else h


class GraphSAGE(nn.Module):
    """Two-layer GraphSAGE with mean aggregation (Hamilton et al.).

    Inputs: ``adj`` (n x n sparse CSR, 0/1), ``degree`` (n x 1, at least 1), ``x`` (n x in_features)."""

    FUSION = FUSION

    def __init__(self, in_features: int = 16, hidden: int = 8, classes: int = 4, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.sage1 = SAGELayer(in_features, hidden)
        self.sage2 = SAGELayer(hidden, classes, activation=False)

    def forward(self, adj, degree, x):
        return self.sage2(adj, degree, self.sage1(adj, degree, x))
