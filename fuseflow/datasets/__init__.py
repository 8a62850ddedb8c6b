"""Real graphs for the GNN models, offline: a bundled Cora, and loaders for the files users already have.

    from fuseflow import datasets
    g = datasets.load("cora")                       # bundled: 2,708 nodes, 1,433 sparse features, 7 classes
    g = datasets.load_planetoid("data/", "citeseer")   # Kipf's ind.citeseer.* files
    g = datasets.load_ogb("dataset/ogbn_arxiv")     # a directory the ogb package downloaded earlier
    g = datasets.load_mtx("web.mtx"); g = datasets.load_snap("roadNet-CA.txt.gz")
    g = datasets.from_scipy(adj, features, labels); g = datasets.from_pyg(data); g = datasets.from_dgl(dgl_g)
    model, inputs = fuseflow.models.gcn_for(g.subgraph(200))   # two layers, hidden 16

Every loader returns a :class:`fuseflow.models.data.Graph`: the GCN's normalised adjacency
``D^-1/2 (A + I) D^-1/2``, the plain 0/1 adjacency and degrees for GraphSAGE, the features as stored
(sparse stays sparse: a torch sparse CSR tensor), labels, the train / val / test split and the class count
when the data has them. Graphs are made undirected and self loops dropped from ``A`` unless asked otherwise
(``undirected=False``, ``self_loops=True``). Nothing is downloaded; a missing or malformed file is one
:class:`~fuseflow.errors.DatasetError` line (``error: <file>: <why>`` from the command line,
``fuseflow datasets info ...``). The user guide is docs/datasets.md.

Bundled data (``fuseflow/datasets/data/``, attribution in its README.md):

- ``cora``: the Cora citation graph (McCallum et al., 2000) in the Planetoid split of Yang, Cohen and
  Salakhutdinov (2016), as distributed with Kipf and Welling's GCN reference code (github.com/tkipf/gcn,
  ``gcn/data/ind.cora.*``), converted to plain arrays: 2,708 nodes, 10,556 adjacency entries (5,278 undirected
  edges, no self loops), 2,708 x 1,433 bag-of-words features with 49,216 nonzeros, 7 classes, the standard
  140 / 500 / 1,000 split.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import DatasetError
from .loaders import (clean_adjacency, from_dgl, from_pyg, from_scipy, load_mtx, load_npz, load_ogb,
                      load_planetoid, load_snap, save_npz)

if TYPE_CHECKING:
    from ..models.data import Graph

__all__ = ["load", "names", "describe", "load_planetoid", "load_ogb", "load_mtx", "load_snap", "load_npz",
           "save_npz", "from_scipy", "from_pyg", "from_dgl", "clean_adjacency", "BUNDLED", "DATA_DIR"]

#: the directory of the bundled files
DATA_DIR = os.path.join(os.path.dirname(__file__), "data")

#: bundled datasets: name -> (file in DATA_DIR, attribution)
BUNDLED = {
    "cora": ("cora.npz", "Cora (McCallum et al. 2000), Planetoid split (Yang, Cohen and Salakhutdinov 2016) as "
                         "distributed with Kipf and Welling's GCN code (github.com/tkipf/gcn)"),
}


def names() -> list[str]:
    """The bundled datasets' names."""
    return sorted(BUNDLED)


def load(source: str | os.PathLike, **options: Any) -> Graph:
    """A bundled dataset by name (``"cora"``), or a dataset on disk by its path, the kind recognised from it:
    a directory with ``raw/`` (OGB), a directory with ``ind.<name>.*`` files (Planetoid; ``name=`` when it
    holds several), a ``.npz`` (:func:`load_npz`), a ``.mtx`` / ``.mtx.gz`` (Matrix Market), any other file a
    SNAP edge list. ``options`` go to that loader."""
    key = str(source)
    if key.lower() in BUNDLED and not os.path.exists(key):
        file, attribution = BUNDLED[key.lower()]
        path = os.path.join(DATA_DIR, file)
        if not os.path.isfile(path):
            raise DatasetError(path, "missing from this installation (the package data was not installed)")
        return load_npz(path, name=key.lower(), source=f"bundled: {attribution}", **options)
    path = os.fspath(source)
    if not os.path.exists(path):
        raise DatasetError(key, f"neither a bundled dataset ({', '.join(names())}) nor an existing file or "
                                "directory")
    if os.path.isdir(path):
        for directory in (path, os.path.join(path, "raw")):       # PyTorch Geometric keeps them in raw/
            found = _planetoid_names(directory)
            if found or "name" in options:
                if "name" in options:
                    return load_planetoid(directory, options.pop("name"), **options)
                if len(found) == 1:
                    return load_planetoid(directory, found[0], **options)
                raise DatasetError(directory, f"holds several Planetoid datasets ({', '.join(found)}): give name=")
        if os.path.isdir(os.path.join(path, "raw")):
            return load_ogb(path, **options)
        raise DatasetError(path, "is neither an OGB dataset directory (raw/) nor a Planetoid one (ind.<name>.*)")
    lower = path.lower()
    if lower.endswith(".npz"):
        return load_npz(path, **options)
    if lower.endswith((".mtx", ".mtx.gz")):
        return load_mtx(path, **options)
    return load_snap(path, **options)


def _planetoid_names(directory: str) -> list[str]:
    if not os.path.isdir(directory):
        return []
    return sorted({f[len("ind."):-len(".graph")] for f in os.listdir(directory)
                   if f.startswith("ind.") and f.endswith(".graph")})


def describe(graph: Graph) -> dict[str, Any]:
    """Sizes of a graph: nodes, edges, degrees, features (count, nonzeros, density), classes, split."""
    import numpy as np
    a = graph.scipy_adjacency()
    n = graph.nodes
    entries = int(a.nnz)
    loops = int(np.count_nonzero(a.diagonal()))
    symmetric = (a != a.T).nnz == 0
    deg = np.diff(a.indptr)
    nnz = graph.feature_nonzeros()
    f = graph.num_features
    out = {
        "name": graph.name,
        "source": graph.source,
        "nodes": n,
        "adjacency_entries": entries,
        "symmetric": bool(symmetric),
        "edges": (entries - loops) // 2 + loops if symmetric else entries,
        "self_loops": loops,
        "adjacency_density": entries / (n * n) if n else 0.0,
        "degree_mean": float(deg.mean()) if n else 0.0,
        "degree_max": int(deg.max()) if n else 0,
        "isolated_nodes": int(np.count_nonzero(deg == 0)),
        "features": f,
        "features_stored": "sparse" if graph.sparse_features else "dense",
        "feature_nonzeros": nnz,
        "feature_density": nnz / (n * f) if n and f else 0.0,
        "classes": graph.num_classes,
        "labelled_nodes": None,
        "split": None,
    }
    if graph.labels is not None:
        lab = graph.labels
        out["labelled_nodes"] = int((lab >= 0).sum()) if lab.dim() == 1 else n
    if graph.split is not None:
        out["split"] = {k: int(v.numel()) for k, v in graph.split.items()}
    for k in ("split_note",):
        if k in graph.meta:
            out[k] = graph.meta[k]
    return out
