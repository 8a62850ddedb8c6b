"""The loaders of :mod:`fuseflow.datasets`: files users already have, and in-memory graphs, to a
:class:`fuseflow.models.data.Graph`. Nothing downloads; every missing or malformed input is one
:class:`~fuseflow.errors.DatasetError` line."""

from __future__ import annotations

import gzip
import os
import warnings
import zipfile

from typing import IO, Any, Callable, Literal, overload

import numpy as np
import scipy.sparse as sp

from ..errors import DatasetError
from ..models.data import SPLITS, Graph, graph_from_arrays, random_features

#: ``split`` keys accepted for each of :data:`~fuseflow.models.data.SPLITS` (OGB says ``valid``)
_SPLIT_ALIASES = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}


def _require_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise DatasetError("torch", "fuseflow.datasets returns torch tensors: install the torch extra "
                                    "(pip install 'fuseflow[torch]')") from None


# ---- building a Graph ------------------------------------------------------------------------------------------

def _to_numpy(x: Any) -> np.ndarray:
    """A torch tensor (any device, autograd or not), array or sequence as a NumPy array (duck-typed)."""
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "cpu"):
        x = x.cpu()
    if hasattr(x, "numpy"):
        return x.numpy()
    return np.asarray(x)


def _is_torch_sparse(x: Any) -> bool:
    layout = getattr(x, "layout", None)
    return layout is not None and "sparse" in str(layout)


def _torch_sparse_to_scipy(x: Any) -> Any:
    coo = x.to_sparse_coo().coalesce() if hasattr(x, "to_sparse_coo") else x.coalesce()
    idx = _to_numpy(coo.indices())
    return sp.csr_matrix((_to_numpy(coo.values()).astype(np.float64), (idx[0], idx[1])), shape=tuple(coo.shape))


def clean_adjacency(adj: Any, undirected: bool = True, self_loops: bool = False, what: str = "adjacency") -> Any:
    """The plain 0/1 adjacency the models use: any nonzero entry (edge weight) is 1; ``undirected``: made
    symmetric (an edge either way is an edge both ways); self loops dropped unless ``self_loops``."""
    if _is_torch_sparse(adj):
        adj = _torch_sparse_to_scipy(adj)
    elif not sp.issparse(adj):
        arr = _to_numpy(adj)
        if arr.ndim != 2:
            raise DatasetError(what, f"expected a square matrix, got an array of shape {arr.shape}")
        adj = sp.csr_matrix(arr)
    if adj.ndim != 2 or adj.shape[0] != adj.shape[1]:
        raise DatasetError(what, f"is {adj.shape[0]} x {adj.shape[1]}: an adjacency must be square")
    a = sp.csr_matrix(adj, dtype=np.float64, copy=True)
    a.sum_duplicates()
    a.data = (a.data != 0).astype(np.float64)
    a.eliminate_zeros()
    if undirected:
        a = a.maximum(a.T).tocsr()
    if not self_loops and a.diagonal().any():
        a = (a - sp.diags(a.diagonal())).tocsr()
        a.eliminate_zeros()
    a.sort_indices()
    return a


def _features(features: Any, n: int, seed: int = 0, what: str = "features") -> Any:
    """Features as stored (SciPy sparse stays sparse); ``None``: the identity (one-hot node ids, sparse);
    an int ``k``: ``k`` random dense features per node (seeded)."""
    if features is None:
        return sp.identity(n, dtype=np.float32, format="csr")
    if isinstance(features, (int, np.integer)) and not isinstance(features, bool):
        if features < 1:
            raise DatasetError(what, f"a feature count must be at least 1, got {features}")
        return random_features(n, int(features), seed)
    if _is_torch_sparse(features):
        features = _torch_sparse_to_scipy(features)
    if sp.issparse(features):
        x = sp.csr_matrix(features, dtype=np.float32)
    else:
        x = _to_numpy(features)
        if x.ndim == 1:
            x = x[:, None]
        if x.ndim != 2:
            raise DatasetError(what, f"expected an (nodes x features) matrix, got shape {x.shape}")
        try:
            x = np.asarray(x, dtype=np.float32)
        except (TypeError, ValueError):
            raise DatasetError(what, f"are not numbers (dtype {x.dtype})") from None
    if x.shape[0] != n:
        raise DatasetError(what, f"have {x.shape[0]} rows for {n} nodes")
    return x


def _labels(labels: Any, n: int, what: str = "labels") -> np.ndarray | None:
    """(n,) int64 (-1 where missing: NaN or negative) or, with several columns, (n, tasks) float32."""
    if labels is None:
        return None
    y = _to_numpy(labels)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim not in (1, 2):
        raise DatasetError(what, f"expected one label per node, got shape {y.shape}")
    if y.shape[0] != n:
        raise DatasetError(what, f"have {y.shape[0]} rows for {n} nodes")
    if not (np.issubdtype(y.dtype, np.number) or y.dtype == bool):
        raise DatasetError(what, f"are not numbers (dtype {y.dtype})")
    if y.ndim == 2:
        return y.astype(np.float32)
    if np.issubdtype(y.dtype, np.floating):
        missing = ~np.isfinite(y)
        if np.any(y[~missing] != np.round(y[~missing])):
            raise DatasetError(what, "are not whole numbers (class indices)")
        y = np.where(missing, -1, y)
    y = y.astype(np.int64)
    y[y < 0] = -1
    return y


def _split(split: Any, n: int, what: str = "split") -> dict[str, np.ndarray] | None:
    """``{"train", "val", "test": sorted node indices}`` from index arrays or boolean masks."""
    if split is None:
        return None
    if not hasattr(split, "items"):
        raise DatasetError(what, "expected a mapping of train / val / test to node indices or masks")
    out = {}
    for key, part in split.items():
        name = _SPLIT_ALIASES.get(str(key).lower())
        if name is None:
            raise DatasetError(what, f"unknown part {key!r} (expected {', '.join(SPLITS)})")
        if part is None:
            continue
        idx = _to_numpy(part)
        if idx.dtype == bool:
            if idx.ndim == 2:                  # several random splits (one column each): the first
                idx = idx[:, 0]
            if idx.shape != (n,):
                raise DatasetError(what, f"{name} mask has shape {idx.shape} for {n} nodes")
            idx = np.flatnonzero(idx)
        idx = idx.reshape(-1)
        if idx.size and not np.issubdtype(idx.dtype, np.integer):
            if np.issubdtype(idx.dtype, np.floating) and np.all(idx == np.round(idx)):
                idx = idx.astype(np.int64)
            else:
                raise DatasetError(what, f"{name} holds non-integer node indices")
        idx = np.unique(idx.astype(np.int64))
        if idx.size and (idx[0] < 0 or idx[-1] >= n):
            raise DatasetError(what, f"{name} names node {idx[0] if idx[0] < 0 else idx[-1]}, outside 0..{n - 1}")
        out[name] = idx
    return {k: out[k] for k in SPLITS if k in out} or None


def from_scipy(adj: Any, features: Any = None, labels: Any = None, *, split: Any = None, classes: int | None = None,
               name: str = "graph",
               undirected: bool = True, self_loops: bool = False, seed: int = 0, source: str = "") -> Graph:
    """A :class:`Graph` from an adjacency (SciPy sparse or dense, square; weights become 1).

    ``features``: a SciPy sparse matrix (kept sparse) or an array; ``None`` gives the identity (sparse
    one-hot node ids, the usual choice for a graph without features); an int ``k`` gives ``k`` random dense
    features (uniform in [-1, 1), seeded). ``labels``: one class per node (NaN or negative: unlabelled), or
    an (n, tasks) matrix for multi-label data. ``split``: ``{"train", "val", "test": indices or boolean
    masks}``. ``undirected``: symmetrise; ``self_loops``: keep the data's self loops in the plain adjacency
    (the GCN's ``A + I`` adds one to every node either way)."""
    _require_torch()
    a = clean_adjacency(adj, undirected, self_loops)
    n = a.shape[0]
    x = _features(features, n, seed)
    y = _labels(labels, n)
    s = _split(split, n)
    if classes is not None and (not isinstance(classes, (int, np.integer)) or classes < 1):
        raise DatasetError("classes", f"must be a positive int, got {classes!r}")
    return graph_from_arrays(a, x, labels=y, split=s, classes=None if classes is None else int(classes),
                             name=name, source=source)


# ---- files -----------------------------------------------------------------------------------------------------

def _check_file(path: str | os.PathLike, kind: str) -> str:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DatasetError(path, f"missing ({kind})")
    if os.path.isdir(path):
        raise DatasetError(path, f"is a directory, not {kind}")
    return path


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _load_text_array(path: str, *, dtype: Any, what: str, usecols: Any = None, comments: str | None = None,
                     delimiter: str | None = None) -> np.ndarray:
    """``np.loadtxt`` of a text or gzip file, every failure one DatasetError line."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="strict") as f, warnings.catch_warnings():
            warnings.simplefilter("ignore")          # "input contained no data": an empty file is empty
            arr = np.loadtxt(f, dtype=dtype, delimiter=delimiter, comments=comments, usecols=usecols, ndmin=2)
    except (gzip.BadGzipFile, EOFError, zipfile.BadZipFile) as exc:
        raise DatasetError(path, f"not a readable gzip file ({_first_line(exc)})") from None
    except UnicodeDecodeError:
        raise DatasetError(path, f"not a text file ({what})") from None
    except (ValueError, IndexError, OverflowError) as exc:
        raise DatasetError(path, f"malformed {what}: {_first_line(exc)}") from None
    return arr


def _edges_to_adjacency(edges: np.ndarray, n: int, path: str) -> Any:
    if edges.size == 0:
        return sp.csr_matrix((n, n))
    if edges.min() < 0:
        raise DatasetError(path, f"names node {int(edges.min())}: node ids must not be negative")
    if edges.max() >= n:
        raise DatasetError(path, f"names node {int(edges.max())} but the graph has {n} nodes")
    return sp.csr_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])), shape=(n, n))


def load_mtx(path: str | os.PathLike, *, features: Any = None, labels: Any = None, name: str | None = None,
             undirected: bool = True, self_loops: bool = False, seed: int = 0) -> Graph:
    """A graph from a Matrix Market file (``.mtx`` or ``.mtx.gz``, e.g. the SuiteSparse collection): the
    matrix is the adjacency (square; pattern, weighted or symmetric). The file has no features: ``features``
    as in :func:`from_scipy` (default the sparse identity)."""
    path = _check_file(path, "a Matrix Market file")
    import scipy.io
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = scipy.io.mmread(path)
    except (ValueError, TypeError, IndexError, OverflowError, EOFError, RuntimeError, OSError,
            UnicodeDecodeError) as exc:
        raise DatasetError(path, f"not a valid Matrix Market file ({_first_line(exc)})") from None
    if not sp.issparse(m):
        m = np.asarray(m)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise DatasetError(path, f"is a {m.shape[0]} x {m.shape[1]} matrix: an adjacency must be square")
    return from_scipy(m, features, labels, name=name or _stem(path), undirected=undirected,
                      self_loops=self_loops, seed=seed, source=f"Matrix Market file {path}")


def load_snap(path: str | os.PathLike, *, features: Any = None, labels: Any = None, name: str | None = None,
              relabel: bool = True, undirected: bool = True, self_loops: bool = False, seed: int = 0) -> Graph:
    """A graph from a SNAP edge list (text, optionally ``.gz``): one ``FROM TO`` pair of integer node ids per
    line (tabs or spaces; further columns such as timestamps ignored), ``#`` comments. ``relabel``: number
    the nodes that occur 0..n-1 in id order (SNAP ids are often sparse; the original ids are kept in
    ``graph.meta["node_ids"]``); otherwise node ``i`` is id ``i`` and there are ``max id + 1`` nodes."""
    path = _check_file(path, "a SNAP edge list")
    edges = _load_text_array(path, dtype=np.int64, what="edge list (two integer node ids per line)",
                             usecols=(0, 1), comments="#")
    if edges.size and edges.min() < 0:
        raise DatasetError(path, f"names node {int(edges.min())}: node ids must not be negative")
    meta = {}
    if relabel:
        ids, flat = np.unique(edges.reshape(-1), return_inverse=True)
        edges = flat.reshape(edges.shape)
        n = int(ids.size)
        meta["node_ids"] = ids
    else:
        n = int(edges.max()) + 1 if edges.size else 0
    if n == 0:
        raise DatasetError(path, "holds no edges")
    g = from_scipy(_edges_to_adjacency(edges, n, path), features, labels, name=name or _stem(path),
                   undirected=undirected, self_loops=self_loops, seed=seed, source=f"SNAP edge list {path}")
    g.meta.update(meta)
    return g


def _stem(path: str) -> str:
    base = os.path.basename(os.path.normpath(path))
    for ext in (".gz", ".mtx", ".txt", ".tsv", ".csv", ".edges", ".npz", ".el"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return base or "graph"


# ---- Planetoid -------------------------------------------------------------------------------------------------

PLANETOID_PARTS = ("x", "y", "tx", "ty", "allx", "ally", "graph")


def load_planetoid(root: str | os.PathLike, name: str, *, undirected: bool = True, self_loops: bool = False) -> Graph:
    """A Planetoid dataset (Yang et al. 2016) in the layout of Kipf and Welling's GCN code and of PyTorch
    Geometric (``root`` or ``root/raw``): ``ind.<name>.{x,y,tx,ty,allx,ally,graph}`` (Python 2 pickles of
    SciPy sparse features, NumPy one-hot labels and a dict of neighbour lists, read by a restricted unpickler
    that loads nothing but NumPy, SciPy and builtin types) and ``ind.<name>.test.index`` (one node id per
    line).

    Nodes are numbered as Kipf's loader numbers them: ``allx`` rows first, then each test row at its id from
    ``test.index``; ids between the test ids that no row names (CiteSeer's isolated nodes) get zero features
    and no label (-1). The split is Kipf's: the ``y`` nodes train, the next 500 validate, the test ids test.
    Features stay sparse when stored sparse."""
    from . import safe_pickle
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise DatasetError(root, "missing (a directory with the Planetoid files ind.<name>.*)")
    if not os.path.isfile(os.path.join(root, f"ind.{name}.graph")) and \
            os.path.isfile(os.path.join(root, "raw", f"ind.{name}.graph")):
        root = os.path.join(root, "raw")                        # a PyTorch Geometric dataset directory
    paths = {p: os.path.join(root, f"ind.{name}.{p}") for p in PLANETOID_PARTS + ("test.index",)}
    absent = [p for p, path in paths.items() if not os.path.isfile(path)]
    if absent:
        raise DatasetError(paths[absent[0]], f"missing (the Planetoid layout needs ind.{name}."
                                             f"{{{','.join(PLANETOID_PARTS)},test.index}})")
    obj = {p: safe_pickle.load(paths[p]) for p in PLANETOID_PARTS}
    test = _load_text_array(paths["test.index"], dtype=np.int64, what="test index (one node id per line)")
    test = test.reshape(-1)

    def matrix(p: str) -> Any:
        v = obj[p]
        if sp.issparse(v):
            return sp.csr_matrix(v, dtype=np.float32)
        if isinstance(v, np.ndarray) and v.ndim == 2 and np.issubdtype(v.dtype, np.number):
            return np.asarray(v, dtype=np.float32)
        raise DatasetError(paths[p], f"expected a 2-d SciPy sparse matrix or NumPy array, got "
                                     f"{type(v).__name__}{getattr(v, 'shape', '')}")

    x, tx, allx = matrix("x"), matrix("tx"), matrix("allx")
    y, ty, ally = (_dense(matrix(p)) for p in ("y", "ty", "ally"))
    widths = {p: m.shape[1] for p, m in (("x", x), ("tx", tx), ("allx", allx))}
    if len(set(widths.values())) != 1:
        raise DatasetError(paths["tx"], f"feature widths differ: {widths}")
    classes = {p: m.shape[1] for p, m in (("y", y), ("ty", ty), ("ally", ally))}
    if len(set(classes.values())) != 1:
        raise DatasetError(paths["ty"], f"label widths differ: {classes}")
    for a, b in (("x", "y"), ("tx", "ty"), ("allx", "ally")):
        if obj[a].shape[0] != obj[b].shape[0]:
            raise DatasetError(paths[b], f"has {obj[b].shape[0]} rows but ind.{name}.{a} has {obj[a].shape[0]}")
    if x.shape[0] > allx.shape[0]:
        raise DatasetError(paths["x"], f"has {x.shape[0]} rows, more than allx's {allx.shape[0]}")
    if test.size != tx.shape[0]:
        raise DatasetError(paths["test.index"], f"names {test.size} nodes but ind.{name}.tx has {tx.shape[0]} rows")
    n_all = allx.shape[0]
    if test.size:
        if test.min() < n_all:
            raise DatasetError(paths["test.index"],
                               f"names node {int(test.min())}, one of allx's rows (0..{n_all - 1})")
        if np.unique(test).size != test.size:
            raise DatasetError(paths["test.index"], "names a node twice")
    n = max(n_all, int(test.max()) + 1 if test.size else 0)

    # rows of allx are nodes 0..n_all-1; row i of tx is node test[i]; gaps stay empty
    node_of_row = np.concatenate([np.arange(n_all), test])
    if sp.issparse(allx) or sp.issparse(tx):
        stacked = sp.vstack([sp.csr_matrix(allx), sp.csr_matrix(tx)]).tocoo()
        features = sp.csr_matrix((stacked.data, (node_of_row[stacked.row], stacked.col)),
                                 shape=(n, allx.shape[1]), dtype=np.float32)
    else:
        features = np.zeros((n, allx.shape[1]), dtype=np.float32)
        features[node_of_row] = np.vstack([allx, tx])
    onehot = np.zeros((n, ally.shape[1]), dtype=np.float32)
    onehot[node_of_row] = np.vstack([ally, ty])
    labels = np.where(onehot.any(axis=1), onehot.argmax(axis=1), -1)

    graph = obj["graph"]
    if not isinstance(graph, dict):
        raise DatasetError(paths["graph"], f"expected a dict of neighbour lists, got {type(graph).__name__}")
    try:
        src = np.fromiter((int(k) for k, vs in graph.items() for _ in vs), dtype=np.int64)
        dst = np.fromiter((int(v) for vs in graph.values() for v in vs), dtype=np.int64)
    except (TypeError, ValueError):
        raise DatasetError(paths["graph"], "expected a dict of node id -> list of node ids") from None
    keys = np.fromiter((int(k) for k in graph), dtype=np.int64)
    top = max(int(keys.max()) if keys.size else -1, int(dst.max()) if dst.size else -1)
    if top >= n:
        raise DatasetError(paths["graph"], f"names node {top} but the features have {n} rows")
    edges = np.stack([src, dst], axis=1)
    t = y.shape[0]
    split = {"train": np.arange(t), "val": np.arange(t, min(t + 500, n_all)), "test": np.sort(test)}
    g = from_scipy(_edges_to_adjacency(edges, n, paths["graph"]), features, labels, split=split,
                   classes=int(ally.shape[1]), name=name, undirected=undirected, self_loops=self_loops,
                   source=f"Planetoid files {os.path.join(root, f'ind.{name}.*')}")
    return g


def _dense(m: Any) -> np.ndarray:
    return m.toarray() if sp.issparse(m) else m


# ---- OGB -------------------------------------------------------------------------------------------------------

@overload
def _ogb_file(directory: str, stem: str, required: Literal[True] = True) -> str: ...


@overload
def _ogb_file(directory: str, stem: str, required: bool) -> str | None: ...


def _ogb_file(directory: str, stem: str, required: bool = True) -> str | None:
    for ext in (".csv.gz", ".csv"):
        path = os.path.join(directory, stem + ext)
        if os.path.isfile(path):
            return path
    if required:
        raise DatasetError(os.path.join(directory, stem + ".csv.gz"), "missing (OGB dataset layout)")
    return None


def _ogb_csv(path: str, dtype: Any, what: str) -> np.ndarray:
    return _load_text_array(path, dtype=dtype, what=what, delimiter=",")


def load_ogb(root: str | os.PathLike, *, split: str | None = None, relation: str | None = None, name: str | None = None,
             undirected: bool = True, self_loops: bool = False, seed: int = 0) -> Graph:
    """An OGB node- or link-property dataset directory as the ``ogb`` package leaves it (for example
    ``dataset/ogbn_arxiv`` or ``dataset/ogbl_collab``):

    - ``raw/edge.csv.gz`` (one ``src,dst`` pair per line), ``raw/num-node-list.csv.gz`` (the node count),
      optional ``raw/node-feat.csv.gz`` (dense features) and ``raw/node-label.csv.gz`` (one class per node, or
      one column per task; NaN: unlabelled);
    - ``split/<name>/{train,valid,test}.csv.gz`` (node indices), when present: ``split`` picks a name if
      there are several. Link-property splits (``.pt`` edge files) are not node splits and are not read.

    Heterogeneous datasets (``ogbn-mag``: ``raw/num-node-dict.csv.gz``, ``raw/relations/<h>___<r>___<t>/``)
    give the graph of one relation between nodes of one type: ``relation`` (``paper___cites___paper`` or
    just ``cites``), by default the only relation whose head and tail types are the same; features, labels
    and split are that type's. OGB stores undirected graphs one way: ``undirected`` (the default) adds the
    other direction."""
    root = os.fspath(root)
    if not os.path.isdir(root):
        raise DatasetError(root, "missing (an OGB dataset directory with raw/ inside, as the ogb package "
                                 "leaves it)")
    raw = os.path.join(root, "raw")
    if not os.path.isdir(raw):
        if any(_ogb_file(root, s, False) for s in ("edge", "num-node-list", "num-node-dict")):
            raw, root = root, os.path.dirname(os.path.abspath(root))
        else:
            raise DatasetError(root, "has no raw/ directory: not an OGB dataset directory (expected "
                                     "raw/edge.csv.gz, raw/num-node-list.csv.gz, ...)")
    name = name or os.path.basename(os.path.normpath(root))
    if _ogb_file(raw, "num-node-dict", False):
        return _load_ogb_hetero(root, raw, split, relation, name, undirected, self_loops, seed)
    counts = _ogb_csv(_ogb_file(raw, "num-node-list"), np.int64, "node count").reshape(-1)
    if counts.size != 1:
        raise DatasetError(_ogb_file(raw, "num-node-list"), f"lists {counts.size} graphs: a graph-property "
                           "dataset (fuseflow.datasets loads node- and link-property datasets, one graph)")
    n = int(counts[0])
    edge_path = _ogb_file(raw, "edge")
    edges = _ogb_csv(edge_path, np.int64, "edge list (src,dst per line)")
    if edges.size and edges.shape[1] != 2:
        raise DatasetError(edge_path, f"malformed edge list: {edges.shape[1]} columns, expected 2 (src,dst)")
    edges = edges.reshape(-1, 2)
    features = _ogb_node_file(raw, "node-feat", n)
    labels = _ogb_node_file(raw, "node-label", n)
    s, split_note = _ogb_split(root, split, None, n)
    g = from_scipy(_edges_to_adjacency(edges, n, edge_path), features, labels, split=s, name=name,
                   undirected=undirected, self_loops=self_loops, seed=seed, source=f"OGB dataset {root}")
    if split_note:
        g.meta["split_note"] = split_note
    return g


def _ogb_node_file(directory: str, stem: str, n: int, what: str | None = None) -> np.ndarray | None:
    path = _ogb_file(directory, stem, required=False)
    if path is None:
        return None
    arr = _ogb_csv(path, np.float64 if stem == "node-label" else np.float32,
                   what or ("node labels" if stem == "node-label" else "node features"))
    if arr.shape[0] != n:
        raise DatasetError(path, f"has {arr.shape[0]} rows for {n} nodes")
    return arr


def _ogb_split(root: str, split: str | None, node_type: str | None, n: int) -> tuple[dict | None, str | None]:
    """(split dict or None, note): the node split under root/split/<name>[/<node_type>]."""
    base = os.path.join(root, "split")
    if not os.path.isdir(base):
        return None, None
    names = sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)))
    if split is None:
        if not names:
            return None, None
        if len(names) > 1:
            raise DatasetError(base, f"holds several splits ({', '.join(names)}): choose one (split=...)")
        split = names[0]
    elif split not in names:
        raise DatasetError(os.path.join(base, split), f"missing (splits here: {', '.join(names) or 'none'})")
    d = os.path.join(base, split, *( [node_type] if node_type else []))
    found = {part: _ogb_file(d, part, required=False) for part in ("train", "valid", "test")}
    if not any(found.values()):
        if os.path.isdir(d) and any(f.endswith(".pt") for f in os.listdir(d)):
            return None, f"split/{split} holds edge splits (.pt, link prediction): no node split"
        raise DatasetError(d, "has no train/valid/test.csv.gz node split")
    out = {}
    for part, path in found.items():
        if path is not None:
            idx = _ogb_csv(path, np.int64, "node index list (one per line)").reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= n):
                raise DatasetError(path, f"names node {int(idx.max() if idx.max() >= n else idx.min())}, "
                                         f"outside 0..{n - 1}")
            out[part] = idx
    return out, None


def _load_ogb_hetero(root: str, raw: str, split: str | None, relation: str | None, name: str | None,
                     undirected: bool, self_loops: bool, seed: int) -> Graph:
    count_path = _ogb_file(raw, "num-node-dict")
    opener: Callable[..., IO[str]] = gzip.open if count_path.endswith(".gz") else open
    try:
        with opener(count_path, "rt", encoding="utf-8") as f:
            rows = [line.strip().split(",") for line in f if line.strip()]
        if len(rows) != 2 or len(rows[0]) != len(rows[1]):
            raise ValueError("expected a header of node types and one row of counts")
        counts = dict(zip(rows[0], (int(v) for v in rows[1])))
    except (OSError, EOFError, UnicodeDecodeError, ValueError, IndexError) as exc:
        raise DatasetError(count_path, f"malformed node counts: {_first_line(exc)}") from None
    rel_dir = os.path.join(raw, "relations")
    triplets = sorted(d for d in os.listdir(rel_dir) if len(d.split("___")) == 3) if os.path.isdir(rel_dir) else []
    if not triplets:
        raise DatasetError(rel_dir, "missing or empty (heterogeneous OGB layout: relations/<head>___<rel>___<tail>)")
    if relation is None:
        same = [t for t in triplets if t.split("___")[0] == t.split("___")[2]]
        if len(same) != 1:
            raise DatasetError(name, f"choose a relation (relation=...): {', '.join(triplets)}")
        chosen = same[0]
    else:
        match = [t for t in triplets if relation in (t, t.split("___")[1])]
        if len(match) != 1:
            raise DatasetError(relation, f"{'ambiguous' if match else 'unknown'} relation "
                                         f"(known: {', '.join(triplets)})")
        chosen = match[0]
    head, _, tail = chosen.split("___")
    if head != tail:
        raise DatasetError(chosen, "joins two node types: a graph for these models needs one (head == tail)")
    if head not in counts:
        raise DatasetError(count_path, f"has no count for node type {head!r}")
    n = counts[head]
    edge_path = _ogb_file(os.path.join(rel_dir, chosen), "edge")
    edges = _ogb_csv(edge_path, np.int64, "edge list (src,dst per line)")
    if edges.size and edges.shape[1] != 2:
        raise DatasetError(edge_path, f"malformed edge list: {edges.shape[1]} columns, expected 2 (src,dst)")
    edges = edges.reshape(-1, 2)
    features = _ogb_node_file(os.path.join(raw, "node-feat", head), "node-feat", n)
    labels = _ogb_node_file(os.path.join(raw, "node-label", head), "node-label", n)
    s, note = _ogb_split(root, split, head, n)
    g = from_scipy(_edges_to_adjacency(edges, n, edge_path), features, labels, split=s, name=f"{name}:{chosen}",
                   undirected=undirected, self_loops=self_loops, seed=seed,
                   source=f"OGB dataset {root} (relation {chosen})")
    if note:
        g.meta["split_note"] = note
    return g


# ---- PyTorch Geometric and DGL (duck-typed: neither is imported) ---------------------------------------------

def from_pyg(data: Any, *, name: str = "pyg", undirected: bool = True, self_loops: bool = False,
             seed: int = 0) -> Graph:
    """A graph from a PyTorch Geometric ``Data`` object (or anything with its attributes): ``edge_index``
    (2 x E), ``x`` (dense or sparse; absent: the identity), ``y``, ``num_nodes``, and ``train_mask`` /
    ``val_mask`` / ``test_mask`` (boolean; with one column per random split, the first). PyTorch Geometric
    is not imported."""
    ei = getattr(data, "edge_index", None)
    if ei is None:
        raise DatasetError(name, "has no edge_index (expected a torch_geometric.data.Data-like object)")
    ei = _to_numpy(ei)
    if ei.ndim != 2 or ei.shape[0] != 2 or not np.issubdtype(ei.dtype, np.integer):
        raise DatasetError(f"{name}.edge_index", f"expected a 2 x E integer tensor, got shape {ei.shape} "
                                                 f"({ei.dtype})")
    x = getattr(data, "x", None)
    n = getattr(data, "num_nodes", None)
    if n is None:
        n = x.shape[0] if x is not None else (int(ei.max()) + 1 if ei.size else 0)
    n = int(n)
    masks = {k: getattr(data, f"{k}_mask", None) for k in SPLITS}
    split = {k: v for k, v in masks.items() if v is not None} or None
    return from_scipy(_edges_to_adjacency(ei.T.astype(np.int64), n, f"{name}.edge_index"), x,
                      getattr(data, "y", None), split=split, name=name, undirected=undirected,
                      self_loops=self_loops, seed=seed, source="PyTorch Geometric Data")


_DGL_FEATURES = ("feat", "features", "x")
_DGL_LABELS = ("label", "labels", "y")


def from_dgl(g: Any, *, name: str = "dgl", undirected: bool = True, self_loops: bool = False,
             seed: int = 0) -> Graph:
    """A graph from a homogeneous DGL graph (or anything with its methods): ``g.edges()``, ``g.num_nodes()``
    and ``g.ndata`` with ``feat`` (features), ``label`` and ``train_mask`` / ``val_mask`` / ``test_mask``, as
    DGL's built-in datasets store them. DGL is not imported."""
    ntypes = getattr(g, "ntypes", None)
    if ntypes is not None and len(ntypes) > 1:
        raise DatasetError(name, f"is heterogeneous (node types {', '.join(map(str, ntypes))}): give one "
                                 "homogeneous graph (e.g. dgl.to_homogeneous or g.edge_type_subgraph)")
    if not callable(getattr(g, "edges", None)) or not callable(getattr(g, "num_nodes", None)):
        raise DatasetError(name, "expected a DGL graph (with edges() and num_nodes())")
    src, dst = g.edges()
    src, dst = _to_numpy(src).astype(np.int64), _to_numpy(dst).astype(np.int64)
    n = int(g.num_nodes())
    ndata = getattr(g, "ndata", None) or {}
    x = next((ndata[k] for k in _DGL_FEATURES if k in ndata), None)
    y = next((ndata[k] for k in _DGL_LABELS if k in ndata), None)
    split = {k: ndata[f"{k}_mask"] for k in SPLITS if f"{k}_mask" in ndata} or None
    return from_scipy(_edges_to_adjacency(np.stack([src, dst], axis=1), n, f"{name}.edges"), x, y, split=split,
                      name=name, undirected=undirected, self_loops=self_loops, seed=seed, source="DGL graph")


# ---- the project's own .npz layout (the bundled files) ----------------------------------------------------------

def load_npz(path: str | os.PathLike, *, name: str | None = None, source: str | None = None) -> Graph:
    """A graph saved by :func:`save_npz` (the bundled files' layout): ``adj_indptr``, ``adj_indices``,
    ``adj_shape`` (the plain adjacency, CSR, used as stored); ``feat_indptr``, ``feat_indices``,
    ``feat_data``, ``feat_shape`` (sparse features) or ``features`` (dense); optional ``labels``,
    ``train_index``, ``val_index``, ``test_index`` and ``classes``. Read without pickles."""
    path = _check_file(path, "a .npz graph")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError) as exc:
        raise DatasetError(path, f"not a readable .npz file ({_first_line(exc)})") from None

    def need(*keys: str) -> list[np.ndarray]:
        for k in keys:
            if k not in arrays:
                raise DatasetError(path, f"has no array {k!r} (expected adj_indptr, adj_indices, adj_shape)")
        return [arrays[k] for k in keys]

    def csr(prefix: str, data: np.ndarray | None = None) -> Any:
        indptr, indices, shape = need(f"{prefix}_indptr", f"{prefix}_indices", f"{prefix}_shape")
        if data is None:
            data = np.ones(indices.size)
        try:
            m = sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in shape))
            m.check_format(full_check=True)
        except (ValueError, TypeError, IndexError) as exc:
            raise DatasetError(path, f"malformed {prefix}_* CSR arrays ({_first_line(exc)})") from None
        return m

    a = csr("adj", arrays.get("adj_data"))
    if a.shape[0] != a.shape[1]:
        raise DatasetError(path, f"adjacency is {a.shape[0]} x {a.shape[1]}: must be square")
    n = a.shape[0]
    if "feat_indptr" in arrays:
        x = csr("feat", need("feat_data")[0])
    elif "features" in arrays:
        x = arrays["features"]
    else:
        x = None
    split = {k: arrays[f"{k}_index"] for k in SPLITS if f"{k}_index" in arrays} or None
    classes = int(arrays["classes"]) if "classes" in arrays else None
    return from_scipy(a, x, arrays.get("labels"), split=split, classes=classes, name=name or _stem(path),
                      undirected=False, self_loops=True, source=source or f"graph file {path}")


def save_npz(graph: Graph, path: str | os.PathLike) -> str:
    """Write ``graph`` in :func:`load_npz`'s layout (compressed; plain adjacency, features as stored, labels,
    split): a big graph read once from CSV or text files loads in a fraction of the time afterwards."""
    from ..cli import atomic_write
    from ..models.data import _from_torch_csr
    a = graph.scipy_adjacency()
    out = {"adj_indptr": a.indptr.astype(np.int64), "adj_indices": a.indices.astype(np.int64),
           "adj_shape": np.array(a.shape, dtype=np.int64)}
    if graph.sparse_features:
        x = _from_torch_csr(graph.features)
        out.update(feat_indptr=x.indptr.astype(np.int64), feat_indices=x.indices.astype(np.int64),
                   feat_data=x.data.astype(np.float32), feat_shape=np.array(x.shape, dtype=np.int64))
    else:
        out["features"] = graph.features.numpy()
    if graph.labels is not None:
        out["labels"] = graph.labels.numpy()
    for k, v in (graph.split or {}).items():
        out[f"{k}_index"] = v.numpy()
    if graph.classes is not None:
        out["classes"] = np.array(graph.classes)
    path = os.fspath(path)
    with atomic_write(path, "wb") as f:
        np.savez_compressed(f, **out)
    return path
