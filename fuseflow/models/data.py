"""Offline data for the bundled models: nothing is downloaded.

- :func:`karate_club`: Zachary's karate club (networkx ships it): 34 nodes, 78 edges.
- :func:`synthetic_graph`: uniform random, power-law or stochastic-block-model graphs from networkx's
  generators, at the paper's ablation size (500 nodes, 128 features) by default.
- :func:`images`: random sparse "images" (non-negative pixels, most of them zero) for the autoencoder.
- :func:`token_embeddings`: random token embeddings for attention.

Graphs come back as the GCN's normalised adjacency ``D^-1/2 (A + I) D^-1/2`` (a torch sparse CSR
tensor), features, and the node degrees (of ``A``, at least 1) for GraphSAGE's mean aggregation.
Real graphs (Cora, and loaders for the files users have: Planetoid, OGB, Matrix Market, SNAP, SciPy,
PyTorch Geometric, DGL) are in :mod:`fuseflow.datasets`; they return the same :class:`Graph`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import networkx as nx
import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    from torch import Tensor

#: the names of a graph's node split, in order
SPLITS = ("train", "val", "test")


@dataclass
class Graph:
    """A graph ready for the GNN models (torch tensors).

    ``features`` are as the data stores them: a dense tensor, or a sparse CSR tensor for sparse features
    (bag-of-words, one-hot), which the GCN and GraphSAGE keep sparse. ``labels`` is an (n,) int64 tensor
    (-1: unlabelled) or, for multi-label data, an (n, tasks) float tensor; ``split`` maps ``train``,
    ``val`` and ``test`` to int64 tensors of node indices; ``classes`` is the number of classes (outputs)
    when the data says so; ``source`` says where the graph came from (file, attribution)."""
    name: str
    adjacency: Tensor        # normalised adjacency with self loops, sparse CSR (GCN)
    neighbours: Tensor       # plain adjacency A (0/1), sparse CSR (GraphSAGE)
    degree: Tensor           # (n, 1) dense, degrees of A clamped to >= 1 (GraphSAGE mean)
    features: Tensor         # (n, f) dense, or sparse CSR as stored
    labels: Tensor | None = None
    split: dict | None = None
    classes: int | None = None
    source: str = ""
    meta: dict = field(default_factory=dict, repr=False)   # extra facts (original node ids, ...)

    @property
    def nodes(self) -> int:
        return int(self.features.shape[0])

    @property
    def entries(self) -> int:
        """Nonzeros of the plain adjacency (an undirected edge counts twice)."""
        return int(self.neighbours.values().numel())

    @property
    def num_features(self) -> int:
        return int(self.features.shape[1])

    @property
    def num_classes(self) -> int | None:
        """``classes`` if known, else one more than the largest label; None without labels."""
        if self.classes is not None:
            return int(self.classes)
        if self.labels is None or self.labels.numel() == 0:
            return None
        if self.labels.dim() > 1:
            return int(self.labels.shape[1])
        return int(self.labels.max()) + 1

    @property
    def sparse_features(self) -> bool:
        import torch
        return self.features.layout != torch.strided

    def feature_nonzeros(self) -> int:
        if self.sparse_features:
            return int(self.features.values().numel())
        return int((self.features != 0).sum())

    def sparsity(self) -> float:
        """Fraction of zeros in the adjacency."""
        n = self.nodes
        return 1.0 - self.neighbours.values().numel() / (n * n)

    def scipy_adjacency(self) -> sp.csr_matrix:
        """The plain adjacency ``A`` as a SciPy CSR matrix (float64, 0/1)."""
        return _from_torch_csr(self.neighbours)

    def bfs(self, count: int, start: int = 0) -> np.ndarray:
        """``count`` node indices in breadth-first order from ``start`` (continuing from the lowest unvisited
        node when a component runs out): ``g.subgraph(g.bfs(200))`` is a connected-looking sample, where
        ``g.subgraph(200)`` (the first 200 nodes) of a real graph is mostly isolated nodes."""
        from ..errors import DatasetError
        n = self.nodes
        if not 0 < count <= n or not 0 <= start < n:
            raise DatasetError("bfs", f"count must be in 1..{n} and start in 0..{n - 1}")
        a = self.scipy_adjacency()
        seen = np.zeros(n, dtype=bool)
        order = []
        queue = [start]
        seen[start] = True
        head, nxt = 0, 0
        while len(order) < count:
            if head == len(queue):
                while seen[nxt]:
                    nxt += 1
                seen[nxt] = True
                queue.append(nxt)
            v = queue[head]
            head += 1
            order.append(v)
            for w in a.indices[a.indptr[v]:a.indptr[v + 1]]:
                if not seen[w]:
                    seen[w] = True
                    queue.append(int(w))
        return np.asarray(order, dtype=np.int64)

    def subgraph(self, nodes) -> "Graph":
        """The graph induced by ``nodes`` (an int: the first ``nodes`` nodes; or a sequence of node indices,
        in the new order), renormalised: adjacency, degrees, features, labels and the split (restricted to
        the kept nodes, renumbered)."""
        import torch
        from ..errors import DatasetError
        n = self.nodes
        if isinstance(nodes, (int, np.integer)):
            if not 0 < int(nodes) <= n:
                raise DatasetError("subgraph", f"node count must be in 1..{n}, got {nodes}")
            idx = np.arange(int(nodes))
        else:
            idx = np.asarray(nodes.numpy() if hasattr(nodes, "numpy") else nodes).reshape(-1)
            if idx.dtype == bool:
                idx = np.flatnonzero(idx)
            if idx.size == 0 or not np.issubdtype(idx.dtype, np.integer):
                raise DatasetError("subgraph", "give a node count or a non-empty list of node indices")
            idx = idx.astype(np.int64)
            if idx.min() < 0 or idx.max() >= n:
                raise DatasetError("subgraph", f"node indices must be in 0..{n - 1}")
            if np.unique(idx).size != idx.size:
                raise DatasetError("subgraph", "node indices repeat")
        a = self.scipy_adjacency()[idx][:, idx]
        if self.sparse_features:
            x = _from_torch_csr(self.features)[idx]
        else:
            x = self.features.numpy()[idx]
        labels = None if self.labels is None else self.labels[torch.from_numpy(idx)]
        split = None
        if self.split is not None:
            where = np.full(n, -1, dtype=np.int64)
            where[idx] = np.arange(idx.size)
            split = {}
            for key, part in self.split.items():
                new = where[part.numpy()]
                split[key] = np.sort(new[new >= 0])
        g = graph_from_arrays(a, x, labels=labels, split=split, classes=self.num_classes,
                              name=f"{self.name}[{idx.size}]", source=self.source)
        g.meta = dict(self.meta, parent=self.name, parent_nodes=idx)
        return g


def _to_torch_csr(m):
    import torch
    m = sp.csr_matrix(m, copy=True)
    m.sum_duplicates()
    m.sort_indices()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")
        return torch.sparse_csr_tensor(torch.from_numpy(m.indptr.astype(np.int64)),
                                       torch.from_numpy(m.indices.astype(np.int64)),
                                       torch.from_numpy(m.data.astype(np.float32)), size=m.shape,
                                       check_invariants=False)


def _from_torch_csr(t) -> sp.csr_matrix:
    """A torch sparse CSR tensor as a SciPy CSR matrix (float64)."""
    return sp.csr_matrix((t.values().double().numpy(), t.col_indices().numpy(), t.crow_indices().numpy()),
                         shape=tuple(t.shape))


def graph_from_arrays(a, features, labels=None, split=None, classes=None, name: str = "graph",
                      source: str = "") -> Graph:
    """A :class:`Graph` from a plain adjacency ``a`` (SciPy, used as given: 0/1, self loops as they are) and
    features (a SciPy sparse matrix stays sparse, an array is dense). ``labels``: array or tensor;
    ``split``: ``{"train" | "val" | "test": node indices}``."""
    import torch
    a = sp.csr_matrix(a, dtype=np.float64)
    n = a.shape[0]
    a_hat = a + sp.eye(n, format="csr")
    d = np.asarray(a_hat.sum(axis=1)).ravel()
    dinv = sp.diags(1.0 / np.sqrt(d))
    norm = (dinv @ a_hat @ dinv).tocsr()
    deg = np.maximum(np.asarray(a.sum(axis=1)).ravel(), 1.0)
    if sp.issparse(features):
        x = _to_torch_csr(features)
    else:
        x = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float32))
    if labels is not None and not isinstance(labels, torch.Tensor):
        labels = np.asarray(labels)
        labels = torch.from_numpy(labels.astype(np.int64 if labels.ndim == 1 else np.float32))
    if split is not None:
        split = {k: torch.as_tensor(np.asarray(v, dtype=np.int64)) for k, v in split.items()}
    return Graph(name, _to_torch_csr(norm), _to_torch_csr(a), torch.from_numpy(deg.astype(np.float32)[:, None]),
                 x, labels, split, classes, source)


def graph_tensors(g: nx.Graph, features: int, seed: int = 0, name: str = "graph", labels=None) -> Graph:
    """Normalised adjacency, plain adjacency, degrees and random features of a networkx graph."""
    n = g.number_of_nodes()
    a = nx.to_scipy_sparse_array(g, nodelist=sorted(g.nodes()), format="csr", dtype=np.float64)
    a.data[:] = 1.0
    return graph_from_arrays(a, random_features(n, features, seed), labels=labels, name=name)


def random_features(nodes: int, features: int, seed: int = 0) -> np.ndarray:
    """``nodes x features`` uniform random features in [-1, 1) (float32), as the synthetic graphs have."""
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(nodes, features)).astype(np.float32)


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
