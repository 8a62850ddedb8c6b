"""Your own nn.Module, as the README compiles it:

    fuseflow compile examples/pytorch/mynet.py:MyNet --check --report -o out/mynet

The inputs come from ``example_inputs()`` below, or from a file: ``python examples/pytorch/mynet.py mynet.npz``
writes them (one array or SciPy sparse matrix per ``forward()`` argument, by name, with
``fuseflow.tensors.save_npz``; ``np.savez`` cannot store SciPy matrices), and

    fuseflow compile examples/pytorch/mynet.py:MyNet --inputs mynet.npz --check

reads them.
"""

import sys

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn as nn

from layers import Propagate          # a sibling module of this file

NODES, FEATURES = 24, 8


class MyNet(nn.Module):
    """Two propagation steps over a sparse adjacency: ``adj`` (NODES x NODES, sparse), ``x`` (NODES x FEATURES)."""

    def __init__(self, hidden: int = 8, classes: int = 4):
        super().__init__()
        torch.manual_seed(0)
        self.layer1 = Propagate(FEATURES, hidden)
        self.layer2 = Propagate(hidden, classes)

    def forward(self, adj, x):
        return self.layer2(adj, self.layer1(adj, x))


def example_arrays(seed: int = 0):
    """{forward() argument: NumPy array or SciPy matrix}: a random graph with self-loops and random features."""
    rng = np.random.default_rng(seed)
    adj = sp.random(NODES, NODES, density=0.15, random_state=seed, format="csr") + sp.eye(NODES, format="csr")
    adj.data[:] = 1.0 / 3.0
    x = np.round(rng.standard_normal((NODES, FEATURES)), 2)
    return {"adj": sp.csr_array(adj), "x": x}


def example_inputs():
    """The forward() arguments as tensors (the adjacency as a sparse CSR tensor)."""
    a = example_arrays()
    adj = sp.csr_matrix(a["adj"])
    return (torch.sparse_csr_tensor(torch.from_numpy(adj.indptr.astype(np.int64)),
                                    torch.from_numpy(adj.indices.astype(np.int64)),
                                    torch.from_numpy(adj.data.astype(np.float32)), size=adj.shape),
            torch.from_numpy(a["x"].astype(np.float32)))


if __name__ == "__main__":
    from fuseflow.tensors import save_npz
    path = sys.argv[1] if len(sys.argv) > 1 else "mynet.npz"
    save_npz(path, example_arrays())
    print(f"wrote {path}: adj ({NODES} x {NODES}, sparse), x ({NODES} x {FEATURES})")
