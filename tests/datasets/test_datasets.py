"""fuseflow.datasets: the bundled Cora, every loader on small files written here (good, missing and malformed:
one-line DatasetErrors), in-memory graphs (SciPy, PyTorch Geometric- and DGL-like objects), subgraphs, the GNN
models on a loaded graph, and ``fuseflow datasets`` on the command line."""

import gzip
import json
import os
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

torch = pytest.importorskip("torch")

import fuseflow  # noqa: E402
import fuseflow.__main__ as top  # noqa: E402
from fuseflow import datasets  # noqa: E402
from fuseflow.errors import DatasetError, FuseFlowError  # noqa: E402
from fuseflow.models import gcn_for, graphsage_for  # noqa: E402


def dense(t):
    return t.to_dense().numpy() if t.layout != torch.strided else t.numpy()


def one_line(exc_info, *fragments):
    """The error is a DatasetError (a FuseFlowError) of one line naming each fragment."""
    err = exc_info.value
    assert isinstance(err, DatasetError) and isinstance(err, FuseFlowError)
    text = str(err)
    assert "\n" not in text, text
    for f in fragments:
        assert f in text, text
    return text


@pytest.fixture(scope="module")
def cora():
    return datasets.load("cora")


# ---- the bundled Cora ------------------------------------------------------------------------------------------

def test_cora_is_bundled_with_the_published_sizes(cora):
    g = cora
    assert g.name == "cora" and "McCallum" in g.source and "Kipf" in g.source
    assert g.nodes == 2708 and g.entries == 10556
    a = g.scipy_adjacency()
    assert (a != a.T).nnz == 0 and not a.diagonal().any() and set(np.unique(a.data)) == {1.0}
    assert g.sparse_features and tuple(g.features.shape) == (2708, 1433)
    assert g.feature_nonzeros() == 49216 and np.all(g.features.values().numpy() == 1.0)
    assert g.num_classes == 7 and g.labels.dtype == torch.int64
    assert g.labels.min() == 0 and g.labels.max() == 6
    assert {k: v.numel() for k, v in g.split.items()} == {"train": 140, "val": 500, "test": 1000}
    assert g.split["train"].tolist() == list(range(140)) and g.split["val"].tolist() == list(range(140, 640))
    assert g.split["test"].tolist() == list(range(1708, 2708))
    # the GCN's normalised adjacency D^-1/2 (A + I) D^-1/2 and GraphSAGE's degrees
    assert g.adjacency.values().numel() == 10556 + 2708
    deg = np.asarray(a.sum(axis=1)).ravel()
    assert np.allclose(g.degree.numpy().ravel(), np.maximum(deg, 1))
    d = 1 / np.sqrt(deg + 1)
    want = (sp.diags(d) @ (a + sp.eye(2708)) @ sp.diags(d)).tocsr()
    got = sp.csr_matrix((g.adjacency.values().numpy(), g.adjacency.col_indices().numpy(),
                         g.adjacency.crow_indices().numpy()), shape=(2708, 2708))
    assert abs(got - want).max() < 1e-6
    info = datasets.describe(g)
    assert info["edges"] == 5278 and info["features"] == 1433 and info["classes"] == 7
    assert info["split"] == {"train": 140, "val": 500, "test": 1000} and info["isolated_nodes"] == 0


def test_cora_file_ships_with_its_attribution():
    readme = open(os.path.join(datasets.DATA_DIR, "README.md")).read()
    for fact in ("McCallum", "Yang, Cohen and Salakhutdinov", "tkipf/gcn", "10,556", "49,216"):
        assert fact in readme
    assert "McCallum" in datasets.__doc__ and datasets.names() == ["cora"]
    with open(os.path.join(os.path.dirname(datasets.__file__), "..", "..", "pyproject.toml")) as f:
        assert "datasets/data/*.npz" in f.read()


def test_unknown_name_is_one_line(tmp_path):
    with pytest.raises(DatasetError) as e:
        datasets.load("citeseer")
    one_line(e, "citeseer", "bundled dataset (cora)")
    os.mkdir(tmp_path / "empty")
    with pytest.raises(DatasetError) as e:
        datasets.load(tmp_path / "empty")
    one_line(e, "neither an OGB")


# ---- Planetoid -------------------------------------------------------------------------------------------------

def _pickle_like_python2(obj):
    """Protocol 2 with the module names Kipf's Python 2 pickles carry (scipy.sparse.csr, numpy.core...)."""
    data = pickle.dumps(obj, protocol=2)
    for new, old in ((b"scipy.sparse._csr\n", b"scipy.sparse.csr\n"),
                     (b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")):
        data = data.replace(new, old)
    return data


def write_planetoid(root, name, parts, test_index):
    os.makedirs(root, exist_ok=True)
    for key, obj in parts.items():
        with open(os.path.join(root, f"ind.{name}.{key}"), "wb") as f:
            f.write(_pickle_like_python2(obj))
    with open(os.path.join(root, f"ind.{name}.test.index"), "w") as f:
        f.write("".join(f"{i}\n" for i in test_index))


def planetoid_from(g, seed=0):
    """The Planetoid files of a graph whose nodes are [train | val | rest of allx | test], test rows shuffled
    in the file as in the original data."""
    from collections import defaultdict
    a = g.scipy_adjacency()
    x = sp.csr_matrix((g.features.values().numpy(), g.features.col_indices().numpy(),
                       g.features.crow_indices().numpy()), shape=tuple(g.features.shape))
    onehot = np.eye(g.num_classes, dtype=np.int32)[g.labels.numpy()]
    test = np.random.default_rng(seed).permutation(g.split["test"].numpy())
    n_all = int(g.split["test"].min())
    ntrain = g.split["train"].numel()
    graph = defaultdict(list)
    for i in range(g.nodes):
        graph[i] = a.indices[a.indptr[i]:a.indptr[i + 1]].tolist()
    parts = dict(x=x[:ntrain], y=onehot[:ntrain], tx=x[test], ty=onehot[test], allx=x[:n_all],
                 ally=onehot[:n_all], graph=graph)
    return parts, test


def test_planetoid_files_load_as_kipfs_loader_orders_them(tmp_path, cora):
    parts, test = planetoid_from(cora)
    assert "scipy.sparse.csr\n" in _pickle_like_python2(parts["x"]).decode("latin1")
    write_planetoid(tmp_path, "cora", parts, test)
    g = datasets.load_planetoid(tmp_path, "cora")
    assert g.name == "cora" and g.nodes == 2708 and g.num_classes == 7 and g.sparse_features
    assert (g.scipy_adjacency() != cora.scipy_adjacency()).nnz == 0
    assert np.array_equal(dense(g.features), dense(cora.features))
    assert torch.equal(g.labels, cora.labels)
    for k in ("train", "val", "test"):
        assert torch.equal(g.split[k], cora.split[k]), k
    # recognised from the directory alone, also in PyTorch Geometric's layout (Cora/raw/ind.cora.*)
    assert datasets.load(tmp_path).nodes == 2708
    os.makedirs(tmp_path / "Cora")
    pyg = tmp_path / "Cora" / "raw"
    os.makedirs(pyg)
    for f in os.listdir(tmp_path):
        if f.startswith("ind."):
            os.rename(tmp_path / f, pyg / f)
    assert datasets.load(tmp_path / "Cora").nodes == 2708
    assert datasets.load_planetoid(tmp_path / "Cora", "cora").nodes == 2708


def test_planetoid_gaps_in_the_test_ids_are_isolated_unlabelled_nodes(tmp_path):
    # CiteSeer's case: test ids 4..7 but only 4, 6 and 7 have rows; node 5 exists only in the numbering
    x = sp.csr_matrix(np.arange(1, 13, dtype=np.float32).reshape(4, 3))
    tx = sp.csr_matrix(np.array([[7, 0, 0], [0, 8, 0], [0, 0, 9]], dtype=np.float32))
    ally = np.eye(2)[[0, 1, 0, 1]]
    ty = np.eye(2)[[1, 1, 0]]
    graph = {0: [1], 1: [0, 7], 2: [], 3: [6], 4: [], 6: [3], 7: [1]}
    write_planetoid(tmp_path, "tiny", dict(x=x[:2], y=ally[:2], tx=tx, ty=ty, allx=x, ally=ally, graph=graph),
                    [7, 4, 6])
    g = datasets.load_planetoid(tmp_path, "tiny")
    assert g.nodes == 8 and g.num_classes == 2
    f = dense(g.features)
    assert f[7].tolist() == [7, 0, 0] and f[4].tolist() == [0, 8, 0] and f[6].tolist() == [0, 0, 9]
    assert not f[5].any()
    assert g.labels.tolist() == [0, 1, 0, 1, 1, -1, 0, 1]
    assert g.split["train"].tolist() == [0, 1] and g.split["val"].tolist() == [2, 3]
    assert g.split["test"].tolist() == [4, 6, 7]
    a = g.scipy_adjacency().toarray()
    assert a[1, 7] == a[7, 1] == 1 and a[3, 6] == 1 and not a[5].any()
    info = datasets.describe(g)
    assert info["labelled_nodes"] == 7 and info["isolated_nodes"] == 3


def _tiny_planetoid(tmp_path, name="t"):
    x = sp.csr_matrix(np.eye(3, dtype=np.float32))
    lab = np.eye(2)[[0, 1, 0]]
    write_planetoid(tmp_path, name, dict(x=x[:1], y=lab[:1], tx=x[2:], ty=lab[2:], allx=x[:2], ally=lab[:2],
                                         graph={0: [1], 1: [0, 2], 2: [1]}), [2])


def test_planetoid_missing_and_malformed_files(tmp_path):
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path / "nowhere", "cora")
    one_line(e, "nowhere", "missing")
    _tiny_planetoid(tmp_path)
    assert datasets.load_planetoid(tmp_path, "t").nodes == 3
    os.remove(tmp_path / "ind.t.ally")
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "ind.t.ally", "missing", "test.index")
    _tiny_planetoid(tmp_path)
    (tmp_path / "ind.t.tx").write_bytes(_pickle_like_python2(np.eye(3))[:20])
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "ind.t.tx", "not a valid pickle")
    _tiny_planetoid(tmp_path)
    (tmp_path / "ind.t.test.index").write_text("2\n1\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "test.index", "names 2 nodes", "1 rows")
    _tiny_planetoid(tmp_path)
    (tmp_path / "ind.t.test.index").write_text("two\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "test.index", "malformed")
    _tiny_planetoid(tmp_path)
    (tmp_path / "ind.t.graph").write_bytes(pickle.dumps([1, 2], protocol=2))
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "ind.t.graph", "dict of neighbour lists")
    _tiny_planetoid(tmp_path)
    (tmp_path / "ind.t.graph").write_bytes(pickle.dumps({0: [9]}, protocol=2))
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "names node 9", "3 rows")


class _Evil:
    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.remove, (self.target,))


def test_planetoid_pickles_cannot_run_code(tmp_path):
    """A pickle naming anything but NumPy, SciPy and builtin types is refused before anything is called."""
    _tiny_planetoid(tmp_path)
    victim = tmp_path / "keep.txt"
    victim.write_text("still here")
    (tmp_path / "ind.t.graph").write_bytes(pickle.dumps(_Evil(str(victim)), protocol=2))
    with pytest.raises(DatasetError) as e:
        datasets.load_planetoid(tmp_path, "t")
    one_line(e, "ind.t.graph", "refuses to load", "remove")
    assert victim.read_text() == "still here"
    from fuseflow.datasets import safe_pickle
    for payload in (pickle.dumps(types.SimpleNamespace(a=1)), b"cos\nsystem\n(S'true'\ntR."):
        with pytest.raises(DatasetError) as e:
            safe_pickle.loads(payload)
        one_line(e, "refuses to load")
    # what the files do hold: arrays (old and new NumPy names), sparse matrices, defaultdicts of lists
    from collections import defaultdict
    ok = [np.arange(3), sp.csr_matrix(np.eye(2)), defaultdict(list, {0: [1]}), np.float32(2)]
    for proto in (2, pickle.HIGHEST_PROTOCOL):
        back = safe_pickle.loads(_pickle_like_python2(ok) if proto == 2 else pickle.dumps(ok, protocol=proto))
        assert back[0].tolist() == [0, 1, 2] and back[1].toarray().tolist() == [[1, 0], [0, 1]]
        assert back[2][0] == [1] and back[3] == 2


# ---- OGB -------------------------------------------------------------------------------------------------------

def write_csv_gz(path, rows, fmt="{}"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(",".join(fmt.format(v) for v in np.atleast_1d(row)) + "\n")


def write_ogb_node(root, nodes=6):
    raw = os.path.join(root, "raw")
    write_csv_gz(os.path.join(raw, "edge.csv.gz"), [[0, 1], [1, 2], [2, 0], [3, 4], [5, 5]])
    write_csv_gz(os.path.join(raw, "num-node-list.csv.gz"), [nodes])
    write_csv_gz(os.path.join(raw, "num-edge-list.csv.gz"), [5])
    feats = np.arange(nodes * 3, dtype=np.float32).reshape(nodes, 3) / 10
    write_csv_gz(os.path.join(raw, "node-feat.csv.gz"), feats, "{:.1f}")
    write_csv_gz(os.path.join(raw, "node-label.csv.gz"), [[2], [0], [1], ["nan"], [2], [0]][:nodes])
    for part, idx in (("train", [0, 1, 2]), ("valid", [4]), ("test", [5, 3])):
        write_csv_gz(os.path.join(root, "split", "time", f"{part}.csv.gz"), idx)
    return feats


def test_ogb_node_property_directory(tmp_path):
    root = tmp_path / "ogbn_tiny"
    feats = write_ogb_node(str(root))
    g = datasets.load_ogb(root)
    assert g.name == "ogbn_tiny" and g.nodes == 6 and not g.sparse_features
    assert np.allclose(g.features.numpy(), feats)
    a = g.scipy_adjacency().toarray()
    assert (a == a.T).all() and a[0, 1] == a[1, 0] == 1 and a[4, 3] == 1 and a[5, 5] == 0
    assert g.entries == 8
    assert g.labels.tolist() == [2, 0, 1, -1, 2, 0] and g.num_classes == 3
    assert {k: v.tolist() for k, v in g.split.items()} == {"train": [0, 1, 2], "val": [4], "test": [3, 5]}
    directed = datasets.load_ogb(root, undirected=False, self_loops=True)
    assert directed.entries == 5 and directed.scipy_adjacency()[5, 5] == 1
    # the raw directory itself, and recognition by load()
    assert datasets.load_ogb(root / "raw").nodes == 6
    assert datasets.load(root).nodes == 6


def test_ogb_link_property_directory_has_no_node_split(tmp_path):
    root = tmp_path / "ogbl_tiny"
    raw = root / "raw"
    write_csv_gz(str(raw / "edge.csv.gz"), [[0, 1], [1, 2]])
    write_csv_gz(str(raw / "num-node-list.csv.gz"), [4])
    os.makedirs(root / "split" / "time")
    (root / "split" / "time" / "train.pt").write_bytes(b"not read")
    g = datasets.load_ogb(root)
    assert g.nodes == 4 and g.split is None and g.labels is None and g.num_classes is None
    assert g.sparse_features and g.num_features == 4           # no node-feat: the identity
    assert "edge splits" in datasets.describe(g)["split_note"]


def test_ogb_heterogeneous_directory_takes_one_relation(tmp_path):
    root = tmp_path / "ogbn_mag"
    raw = root / "raw"
    os.makedirs(raw)
    with gzip.open(raw / "num-node-dict.csv.gz", "wt") as f:
        f.write("author,paper\n3,4\n")
    write_csv_gz(str(raw / "relations" / "paper___cites___paper" / "edge.csv.gz"), [[0, 1], [2, 3]])
    write_csv_gz(str(raw / "relations" / "author___writes___paper" / "edge.csv.gz"), [[0, 1]])
    write_csv_gz(str(raw / "node-feat" / "paper" / "node-feat.csv.gz"), np.ones((4, 2)), "{:g}")
    write_csv_gz(str(raw / "node-label" / "paper" / "node-label.csv.gz"), [0, 1, 1, 0])
    for part, idx in (("train", [0, 1]), ("valid", [2]), ("test", [3])):
        write_csv_gz(str(root / "split" / "time" / "paper" / f"{part}.csv.gz"), idx)
    g = datasets.load_ogb(root)
    assert g.name == "ogbn_mag:paper___cites___paper" and g.nodes == 4 and g.entries == 4
    assert g.num_features == 2 and g.labels.tolist() == [0, 1, 1, 0] and g.split["val"].tolist() == [2]
    assert datasets.load_ogb(root, relation="cites").nodes == 4
    with pytest.raises(DatasetError) as e:
        datasets.load_ogb(root, relation="writes")
    one_line(e, "joins two node types")


def test_ogb_missing_and_malformed_files(tmp_path):
    with pytest.raises(DatasetError) as e:
        datasets.load_ogb(tmp_path / "nowhere")
    one_line(e, "nowhere", "missing")
    os.makedirs(tmp_path / "plain")
    with pytest.raises(DatasetError) as e:
        datasets.load_ogb(tmp_path / "plain")
    one_line(e, "no raw/ directory")
    root = tmp_path / "d"
    write_ogb_node(str(root))
    cases = [
        ("raw/edge.csv.gz", None, "missing"),
        ("raw/edge.csv.gz", [[0, "x"]], "malformed edge list"),
        ("raw/edge.csv.gz", [[0, 1, 2]], "3 columns"),
        ("raw/edge.csv.gz", [[0, 9]], "names node 9 but the graph has 6 nodes"),
        ("raw/num-node-list.csv.gz", [6, 6], "2 graphs"),
        ("raw/node-feat.csv.gz", [[1.0, 2.0]], "1 rows for 6 nodes"),
        ("raw/node-label.csv.gz", [[0.5]] * 6, "whole numbers"),
        ("split/time/test.csv.gz", [7], "outside 0..5"),
    ]
    for rel, rows, why in cases:
        write_ogb_node(str(root))
        path = root / rel
        if rows is None:
            os.remove(path)
        else:
            write_csv_gz(str(path), rows)
        with pytest.raises(DatasetError) as e:
            datasets.load_ogb(root)
        one_line(e, why)
    write_ogb_node(str(root))
    (root / "raw" / "edge.csv.gz").write_bytes(b"plain text, not gzip")
    with pytest.raises(DatasetError) as e:
        datasets.load_ogb(root)
    one_line(e, "edge.csv.gz", "gzip")
    write_ogb_node(str(root))
    write_csv_gz(str(root / "split" / "other" / "train.csv.gz"), [0])
    with pytest.raises(DatasetError) as e:
        datasets.load_ogb(root)
    one_line(e, "several splits", "other", "time")
    assert datasets.load_ogb(root, split="other").split["train"].tolist() == [0]


# ---- Matrix Market and SNAP ------------------------------------------------------------------------------------

def test_matrix_market_adjacency(tmp_path):
    m = sp.coo_matrix(([2.5, 1.0, 3.0, 4.0], ([0, 1, 2, 3], [1, 2, 2, 0])), shape=(4, 4))
    scipy.io.mmwrite(str(tmp_path / "g.mtx"), m)
    g = datasets.load_mtx(tmp_path / "g.mtx")
    assert g.name == "g" and g.nodes == 4 and g.entries == 6         # symmetrised, 0/1, self loop dropped
    assert set(g.neighbours.values().tolist()) == {1.0}
    assert g.sparse_features and g.num_features == 4 and g.feature_nonzeros() == 4   # identity features
    g8 = datasets.load_mtx(tmp_path / "g.mtx", features=8, undirected=False, self_loops=True)
    assert g8.entries == 4 and not g8.sparse_features and tuple(g8.features.shape) == (4, 8)
    # a symmetric pattern file (as SuiteSparse stores undirected graphs)
    (tmp_path / "p.mtx").write_text("%%MatrixMarket matrix coordinate pattern symmetric\n% comment\n3 3 2\n2 1\n3 2\n")
    p = datasets.load_mtx(tmp_path / "p.mtx", undirected=False)
    assert p.scipy_adjacency().toarray().tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert datasets.load(tmp_path / "p.mtx").nodes == 3


def test_matrix_market_errors(tmp_path):
    with pytest.raises(DatasetError) as e:
        datasets.load_mtx(tmp_path / "none.mtx")
    one_line(e, "none.mtx", "missing")
    scipy.io.mmwrite(str(tmp_path / "r.mtx"), sp.coo_matrix(np.ones((2, 3))))
    with pytest.raises(DatasetError) as e:
        datasets.load_mtx(tmp_path / "r.mtx")
    one_line(e, "2 x 3", "square")
    (tmp_path / "bad.mtx").write_text("this is not matrix market\n1 2 3\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_mtx(tmp_path / "bad.mtx")
    one_line(e, "bad.mtx", "not a valid Matrix Market file")


SNAP_TEXT = """# Directed graph (each unordered pair of nodes is saved once): tiny.txt
# Nodes: 4 Edges: 4
# FromNodeId\tToNodeId
10\t20
20\t30
30\t10
10\t99
"""


def test_snap_edge_list(tmp_path):
    (tmp_path / "tiny.txt").write_text(SNAP_TEXT)
    g = datasets.load_snap(tmp_path / "tiny.txt")
    assert g.name == "tiny" and g.nodes == 4 and g.entries == 8
    assert g.meta["node_ids"].tolist() == [10, 20, 30, 99]
    with gzip.open(tmp_path / "tiny.txt.gz", "wt") as f:
        f.write(SNAP_TEXT.replace("\t", " "))
    assert (datasets.load(tmp_path / "tiny.txt.gz").scipy_adjacency() != g.scipy_adjacency()).nnz == 0
    raw = datasets.load_snap(tmp_path / "tiny.txt", relabel=False, undirected=False)
    assert raw.nodes == 100 and raw.entries == 4 and raw.scipy_adjacency()[10, 99] == 1
    (tmp_path / "t3.txt").write_text("1 2 1000\n2 3 1001\n")          # temporal: a third column, ignored
    assert datasets.load_snap(tmp_path / "t3.txt").entries == 4


def test_snap_errors(tmp_path):
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "missing.txt")
    one_line(e, "missing.txt", "missing")
    (tmp_path / "bad.txt").write_text("# c\n1 2\n3 x\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "bad.txt")
    one_line(e, "bad.txt", "malformed edge list")
    (tmp_path / "one.txt").write_text("1\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "one.txt")
    one_line(e, "one.txt", "malformed")
    (tmp_path / "empty.txt").write_text("# only comments\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "empty.txt")
    one_line(e, "holds no edges")
    (tmp_path / "neg.txt").write_text("1 -2\n")
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "neg.txt")
    one_line(e, "negative")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(DatasetError) as e:
        datasets.load_snap(tmp_path / "bin.txt")
    one_line(e, "bin.txt", "not a text file")


# ---- in-memory graphs ------------------------------------------------------------------------------------------

def test_from_scipy():
    adj = np.array([[0, 3, 0], [0, 1, 0], [1, 0, 0]])
    g = datasets.from_scipy(adj, labels=[0, np.nan, 1], split={"train": [True, False, False], "valid": [2]})
    assert g.scipy_adjacency().toarray().tolist() == [[0, 1, 1], [1, 0, 0], [1, 0, 0]]
    assert g.labels.tolist() == [0, -1, 1] and g.num_classes == 2
    assert g.split["train"].tolist() == [0] and g.split["val"].tolist() == [2] and "test" not in g.split
    x = sp.random(3, 5, density=0.4, format="csr", random_state=0)
    g = datasets.from_scipy(sp.csr_matrix(adj), x, self_loops=True, undirected=False, classes=4)
    assert g.sparse_features and np.allclose(dense(g.features), x.toarray())
    assert g.scipy_adjacency().toarray().tolist() == [[0, 1, 0], [0, 1, 0], [1, 0, 0]] and g.num_classes == 4
    multi = datasets.from_scipy(adj, np.ones((3, 2)), labels=np.eye(3))
    assert multi.labels.shape == (3, 3) and multi.num_classes == 3 and not multi.sparse_features
    for kwargs, why in ((dict(adj=np.ones((2, 3))), "square"),
                        (dict(adj=adj, features=np.ones((2, 2))), "2 rows for 3 nodes"),
                        (dict(adj=adj, labels=[1, 2]), "2 rows for 3 nodes"),
                        (dict(adj=adj, split={"train": [5]}), "outside 0..2"),
                        (dict(adj=adj, split={"dev": [0]}), "unknown part"),
                        (dict(adj=adj, features=0), "at least 1"),
                        (dict(adj=adj, labels=["a", "b", "c"]), "not numbers")):
        with pytest.raises(DatasetError) as e:
            datasets.from_scipy(**kwargs)
        one_line(e, why)


def test_from_pyg_duck_typed():
    """A torch_geometric Data stand-in: the attributes PyG's Planetoid datasets have."""
    data = types.SimpleNamespace(edge_index=torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]),
                                 x=torch.eye(4)[:3].to_sparse_csr(), y=torch.tensor([0, 1, 1]), num_nodes=3,
                                 train_mask=torch.tensor([True, False, False]),
                                 val_mask=torch.tensor([False, True, False]),
                                 test_mask=torch.tensor([[False, True], [False, False], [True, False]]))
    g = datasets.from_pyg(data, name="pyg_tiny")
    assert g.nodes == 3 and g.entries == 4 and g.sparse_features and g.num_features == 4
    assert g.labels.tolist() == [0, 1, 1] and {k: v.tolist() for k, v in g.split.items()} == {
        "train": [0], "val": [1], "test": [2]}
    bare = types.SimpleNamespace(edge_index=np.array([[0], [4]]))
    g = datasets.from_pyg(bare)
    assert g.nodes == 5 and g.labels is None and g.split is None
    with pytest.raises(DatasetError) as e:
        datasets.from_pyg(types.SimpleNamespace(x=torch.ones(2, 2)))
    one_line(e, "edge_index")
    with pytest.raises(DatasetError) as e:
        datasets.from_pyg(types.SimpleNamespace(edge_index=torch.zeros(3, 2, dtype=torch.long)))
    one_line(e, "2 x E")


class FakeDGLGraph:
    """The part of dgl.DGLGraph the loader uses."""

    def __init__(self, src, dst, n, ndata, ntypes=("_N",)):
        self._e, self._n, self.ndata, self.ntypes = (torch.tensor(src), torch.tensor(dst)), n, ndata, list(ntypes)

    def edges(self):
        return self._e

    def num_nodes(self):
        return self._n


def test_from_dgl_duck_typed():
    ndata = {"feat": torch.ones(4, 2), "label": torch.tensor([0, 1, 2, 1]),
             "train_mask": torch.tensor([1, 1, 0, 0]).bool()}
    g = datasets.from_dgl(FakeDGLGraph([0, 1], [1, 3], 4, ndata))
    assert g.nodes == 4 and g.entries == 4 and g.num_features == 2 and g.num_classes == 3
    assert g.split == {"train": g.split["train"]} and g.split["train"].tolist() == [0, 1]
    bare = datasets.from_dgl(FakeDGLGraph([0], [1], 2, {}))
    assert bare.labels is None and bare.sparse_features
    with pytest.raises(DatasetError) as e:
        datasets.from_dgl(FakeDGLGraph([0], [1], 2, {}, ntypes=("paper", "author")))
    one_line(e, "heterogeneous")
    with pytest.raises(DatasetError) as e:
        datasets.from_dgl(object())
    one_line(e, "DGL graph")


def test_npz_round_trip(tmp_path, cora):
    sub = cora.subgraph(cora.bfs(50))
    datasets.save_npz(sub, tmp_path / "sub.npz")
    back = datasets.load(tmp_path / "sub.npz")
    assert back.name == "sub" and (back.scipy_adjacency() != sub.scipy_adjacency()).nnz == 0
    assert np.array_equal(dense(back.features), dense(sub.features)) and back.sparse_features
    assert torch.equal(back.labels, sub.labels) and back.num_classes == 7
    assert all(torch.equal(back.split[k], sub.split[k]) for k in sub.split)
    d = datasets.from_scipy(np.eye(3)[::-1], np.ones((3, 2)))
    datasets.save_npz(d, tmp_path / "d.npz")
    assert not datasets.load_npz(tmp_path / "d.npz").sparse_features
    (tmp_path / "junk.npz").write_bytes(b"PK not really")
    with pytest.raises(DatasetError) as e:
        datasets.load(tmp_path / "junk.npz")
    one_line(e, "junk.npz", "not a readable .npz")
    np.savez(tmp_path / "noadj.npz", labels=np.zeros(3))
    with pytest.raises(DatasetError) as e:
        datasets.load_npz(tmp_path / "noadj.npz")
    one_line(e, "adj_indptr")


# ---- subgraphs and the models ----------------------------------------------------------------------------------

def test_subgraph_renormalises_and_renumbers(cora):
    first = cora.subgraph(200)
    assert first.nodes == 200 and first.split["train"].numel() == 140 and first.split["test"].numel() == 0
    idx = cora.bfs(100, start=1708)
    assert idx[0] == 1708 and len(set(idx.tolist())) == 100
    sub = cora.subgraph(idx)
    ref = datasets.from_scipy(cora.scipy_adjacency()[idx][:, idx], dense(cora.features)[idx],
                              cora.labels.numpy()[idx])
    assert np.allclose(dense(sub.adjacency), dense(ref.adjacency)) and torch.equal(sub.degree, ref.degree)
    assert sub.sparse_features and np.array_equal(dense(sub.features), dense(ref.features))
    assert torch.equal(sub.labels, ref.labels) and sub.num_classes == 7
    assert sub.split["test"].numel() > 0 and (sub.split["test"] >= 0).all()
    assert sorted(idx[sub.split["test"].numpy()].tolist()) == sorted(set(idx.tolist()) & set(range(1708, 2708)))
    assert datasets.describe(sub)["isolated_nodes"] == 0        # a breadth-first sample is connected
    for bad in (0, 5000, [1, 1], [-1], []):
        with pytest.raises(DatasetError):
            cora.subgraph(bad)


def test_gnn_models_for_a_loaded_graph(cora):
    """The paper's configuration (two layers, hidden 16) sized from the graph; the features stay sparse
    through PyTorch and into the compiled program; unfused simulation equals PyTorch (float)."""
    sub = cora.subgraph(cora.bfs(60))
    model, inputs = gcn_for(sub)
    assert model.conv1.linear.in_features == 1433 and model.conv1.linear.out_features == 16
    assert model.conv2.linear.out_features == 7
    assert inputs[1].layout == torch.sparse_csr
    m = fuseflow.compile(model, inputs, fuse="none")
    assert "x(60, 1433) : csr" in m.ff_text
    res = m.simulate(mode="float")
    assert res.cycles > 0 and tuple(res.outputs.shape) == (60, 7)
    assert m.check(mode="float").max_rel_error <= 1e-9
    # GraphSAGE on sparse features (a small graph: its mean aggregation is wide)
    rng = np.random.default_rng(0)
    small = datasets.from_scipy(sp.random(12, 12, density=0.25, random_state=1),
                                sp.random(12, 20, density=0.2, format="csr", random_state=2),
                                labels=rng.integers(0, 3, 12))
    sage, sinputs = graphsage_for(small)
    assert sage.sage1.self_linear.in_features == 20 and sage.sage2.self_linear.out_features == 3
    assert sinputs[2].layout == torch.sparse_csr and sage(*sinputs).shape == (12, 3)
    ms = fuseflow.compile(sage, sinputs, fuse="none")
    assert "x(12, 20) : csr" in ms.ff_text
    assert ms.check(mode="float").max_rel_error <= 1e-9
    unlabelled = datasets.from_scipy(np.ones((3, 3)))
    assert gcn_for(unlabelled, hidden=4)[0].conv2.linear.out_features == 4


# ---- the command line ------------------------------------------------------------------------------------------

def test_cli_info_cora(capsys):
    assert top.main(["datasets", "info", "cora"]) == 0
    out = capsys.readouterr().out
    for fact in ("2,708", "5,278 undirected", "10,556 adjacency entries", "1,433 per node", "49,216 nonzeros",
                 "classes    7", "train 140, val 500, test 1,000", "McCallum"):
        assert fact in out, out
    assert top.main(["datasets", "info", "cora", "--json", "--subgraph", "50"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["nodes"] == 50 and d["features"] == 1433 and d["classes"] == 7
    assert top.main(["datasets", "list"]) == 0
    assert "cora" in capsys.readouterr().out


def test_cli_info_of_each_kind(tmp_path, capsys):
    _tiny_planetoid(tmp_path / "pl")
    write_ogb_node(str(tmp_path / "ogbn_x"))
    (tmp_path / "s.txt").write_text(SNAP_TEXT)
    scipy.io.mmwrite(str(tmp_path / "m.mtx"), sp.coo_matrix(np.ones((3, 3))))
    runs = [(["--planetoid", str(tmp_path / "pl"), "t"], "split      train 1, val 1, test 1"),
            (["--ogb", str(tmp_path / "ogbn_x"), "--split", "time"], "5 nodes labelled"),
            ([str(tmp_path / "ogbn_x")], "features   3 per node, dense"),
            (["--snap", str(tmp_path / "s.txt")], "4 undirected"),
            (["--snap", str(tmp_path / "s.txt"), "--directed"], "4 directed"),
            (["--mtx", str(tmp_path / "m.mtx"), "--self-loops"], "3 self loops"),
            ([str(tmp_path / "m.mtx")], "classes    none")]
    for args, fact in runs:
        assert top.main(["datasets", "info", *args]) == 0, args
        assert fact in capsys.readouterr().out, args


def test_cli_errors_are_one_line(tmp_path, capsys):
    (tmp_path / "bad.txt").write_text("1 x\n")
    for args, fragment in ((["info", "nope"], "error: nope: neither a bundled dataset"),
                           (["info", "--snap", str(tmp_path / "bad.txt")], "malformed edge list"),
                           (["info", "--mtx", str(tmp_path / "none.mtx")], "missing"),
                           (["info", "--planetoid", str(tmp_path), "cora"], "ind.cora.x: missing"),
                           (["info"], "give a bundled dataset"),
                           (["info", "cora", "--ogb", str(tmp_path)], "not both"),
                           (["info", "cora", "--split", "x"], "only for OGB"),
                           (["info", "cora", "--directed"], "read as stored"),
                           (["frobnicate"], "invalid choice")):
        assert top.main(["datasets", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and fragment in err, (args, err)


def test_cli_as_a_command(tmp_path):
    """The real console entry point: output, and a one-line error with exit status 2 and no traceback."""
    (tmp_path / "e.txt").write_text("0 1\n1 2\n")
    ok = subprocess.run([sys.executable, "-m", "fuseflow", "datasets", "info", str(tmp_path / "e.txt")],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "2 undirected" in ok.stdout and not ok.stderr, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "fuseflow", "datasets", "info", "--ogb", str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no raw/ directory" in bad.stderr
    assert "Traceback" not in bad.stderr
