"""A layer for mynet.py, in a module of its own: ``fuseflow compile mynet.py:MyNet`` puts the model file's
directory on the import path, so a model file imports its sibling modules as ``python mynet.py`` would."""

import torch
import torch.nn as nn


class Propagate(nn.Module):
    """``relu(A @ X @ W + b)``: one graph-convolution step (sparse ``A``, dense ``X``)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, adj, x):
        return torch.relu(self.linear(torch.sparse.mm(adj, x)))
