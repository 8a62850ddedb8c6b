"""Offline data for the bundled models: nothing is downloaded.

- :func:`karate_club`: Zachary's karate club (networkx ships it): 34 nodes, 78 edges.
- :func:`synthetic_graph`: uniform random, power-law or stochastic-block-model graphs from networkx's
  generators, at the paper's ablation size (500 nodes, 128 features) by default.
- :func:`images`: random sparse "images" (non-negative pixels, most of them zero) for the autoencoder.
- :func:`token_embeddings`: random token embeddings for attention.

Graphs come back as the GCN's normalised adjacency ``D^-1/2 (A + I) D^-1/2`` (a torch sparse CSR
tensor), features, and the node degrees (of ``A``, at least 1) for GraphSAGE's mean aggregation.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import numpy as np
import scipy.sparse as sp


@dataclass
class Graph:
    """A graph ready for the GNN models (torch tensors)."""
    name: str
    adjacency: object        # normalised adjacency with self loops, sparse CSR (GCN)
    neighbours: object       # plain adjacency A (0/1), sparse CSR (GraphSAGE)
    degree: object           # (n, 1) dense, degrees of A clamped to >= 1 (GraphSAGE mean)
    features: object         # (n, f) dense
    labels: object = None

    @property
    def nodes(self) -> int:
        return int(self.features.shape[0])

    def sparsity(self) -> float:
        """Fraction of zeros in the adjacency."""
        n = self.nodes
        return 1.0 - self.neighbours.values().numel() / (n * n)


def _to_torch_csr(m):
    import torch
    m = sp.csr_matrix(m)
    m.sort_indices()
    return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                   torch.from_numpy(m.indices.astype(np.int64)),
                                   torch.from_numpy(m.data.astype(np.float32)), size=m.shape,
                                   check_invariants=False)


def graph_tensors(g: nx.Graph, features: int, seed: int = 0, name: str = "graph", labels=None) -> Graph:
    """Normalised adjacency, plain adjacency, degrees and random features of a networkx graph."""
    import torch
    n = g.number_of_nodes()
    a = nx.to_scipy_sparse_array(g, nodelist=sorted(g.nodes()), format="csr", dtype=np.float64)
    a.data[:] = 1.0
    a_hat = a + sp.eye(n, format="csr")
    d = np.asarray(a_hat.sum(axis=1)).ravel()
    dinv = sp.diags(1.0 / np.sqrt(d))
    norm = (dinv @ a_hat @ dinv).tocsr()
    deg = np.maximum(np.asarray(a.sum(axis=1)).ravel(), 1.0)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, features)).astype(np.float32)
    return Graph(name, _to_torch_csr(norm), _to_torch_csr(a), torch.from_numpy(deg.astype(np.float32)[:, None]),
                 torch.from_numpy(x), labels)


def karate_club(features: int = 16, seed: int = 0) -> Graph:
    """Zachary's karate club (34 nodes) with random features; labels are the two clubs."""
    import torch
    g = nx.karate_club_graph()
    labels = torch.tensor([0 if g.nodes[v]["club"] == "Mr. Hi" else 1 for v in sorted(g.nodes())])
    return graph_tensors(g, features, seed, "karate_club", labels)


GRAPH_KINDS = ("uniform", "powerlaw", "blocks")


def synthetic_graph(kind: str = "uniform", nodes: int = 500, features: int = 128, sparsity: float = 0.95,
                    seed: int = 0) -> Graph:
    """A synthetic graph of the paper's sparsity ablation (Section 8.5): ``uniform`` (Erdos-Renyi),
    ``powerlaw`` (Barabasi-Albert, scale-free) or ``blocks`` (stochastic block model, 4 communities),
    with about ``1 - sparsity`` of the adjacency's entries nonzero."""
    from ..errors import FuseFlowError
    density = 1.0 - sparsity
    if not 0.0 < density < 1.0:
        raise FuseFlowError("sparsity", f"must be in (0, 1), got {sparsity}")
    if kind == "uniform":
        g = nx.gnp_random_graph(nodes, density, seed=seed)
    elif kind == "powerlaw":
        m = max(1, int(round(density * nodes / 2)))
        g = nx.barabasi_albert_graph(nodes, min(m, nodes - 1), seed=seed)
    elif kind == "blocks":
        k = 4
        sizes = [nodes // k + (1 if i < nodes % k else 0) for i in range(k)]
        p_in = min(1.0, density * k * 0.8)
        p_out = max(0.0, (density * nodes * nodes - p_in * sum(s * s for s in sizes)) /
                    max(1, nodes * nodes - sum(s * s for s in sizes)))
        probs = [[p_in if i == j else p_out for j in range(k)] for i in range(k)]
        g = nx.stochastic_block_model(sizes, probs, seed=seed)
    else:
        raise FuseFlowError("graph kind", f"expected one of {', '.join(GRAPH_KINDS)}, got {kind!r}")
    return graph_tensors(g, features, seed, f"{kind}_{nodes}")


def images(count: int = 5, side: int = 8, zeros: float = 0.7, seed: int = 0):
    """``count`` random ``side x side`` images flattened to rows (pixels in [0, 1], ``zeros`` of them 0)."""
    import torch
    rng = np.random.default_rng(seed)
    x = rng.uniform(0.0, 1.0, size=(count, side * side))
    x[rng.uniform(size=x.shape) < zeros] = 0.0
    return torch.from_numpy(x.astype(np.float32))


def token_embeddings(seq: int = 32, dim: int = 16, seed: int = 0):
    """Random token embeddings (seq x dim), standard normal scaled by 1/2."""
    import torch
    rng = np.random.default_rng(seed)
    return torch.from_numpy((0.5 * rng.standard_normal((seq, dim))).astype(np.float32))
