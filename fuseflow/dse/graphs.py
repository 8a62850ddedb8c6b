"""Graph adjacencies for the experiments (networkx, offline): three synthetic families and karate club.

Each adjacency has self loops (GCN's A + I) and values 1/deg(row) (a row-normalised mean aggregation), as a
SciPy CSR matrix. ``density`` is the target fraction of nonzero entries of the n x n matrix.
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import scipy.sparse as sp

FAMILIES = ("uniform", "powerlaw", "sbm")


def graph(family: str, n: int, density: float = 0.1, seed: int = 0) -> nx.Graph:
    """A graph of ``n`` nodes whose adjacency (with self loops) has about ``density`` nonzeros."""
    avg_deg = max(1.0, density * n - 1.0)                # self loops add one entry per row
    if family == "uniform":                              # Erdos-Renyi G(n, p)
        return nx.gnp_random_graph(n, min(1.0, avg_deg / (n - 1)), seed=seed)
    if family == "powerlaw":                             # Barabasi-Albert preferential attachment
        return nx.barabasi_albert_graph(n, max(1, min(n - 1, round(avg_deg / 2))), seed=seed)
    if family == "sbm":                                  # 4 communities, 90 % of the edges inside them
        k = 4
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        p_in = min(1.0, 0.9 * avg_deg / (n / k))
        p_out = min(1.0, 0.1 * avg_deg / (n - n / k))
        probs = [[p_in if a == b else p_out for b in range(k)] for a in range(k)]
        return nx.stochastic_block_model(sizes, probs, seed=seed)
    if family == "karate":
        return nx.karate_club_graph()
    raise ValueError(f"unknown graph family {family!r} (known: {', '.join(FAMILIES + ('karate',))})")


def adjacency(family: str, n: int = 34, density: float = 0.1, seed: int = 0) -> sp.csr_matrix:
    """Row-normalised adjacency with self loops of :func:`graph` (shape n x n; karate club is 34 x 34)."""
    g = graph(family, n, density, seed)
    a = nx.to_scipy_sparse_array(g, nodelist=sorted(g.nodes), format="csr", weight=None).astype(np.float64)
    a = sp.csr_matrix(a + sp.identity(a.shape[0], format="csr"))
    a.data[:] = 1.0
    deg = np.asarray(a.sum(axis=1)).ravel()
    return sp.csr_matrix(sp.diags(1.0 / deg) @ a)
