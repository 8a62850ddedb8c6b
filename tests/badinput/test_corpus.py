"""The bad-input corpus: every command, every class of bad input, one table.

Each case runs the command as the console does (``python -m <entry> argv...``, see ``harness.run_forked``)
under a memory cap and a time limit in a fresh directory holding a valid graph, data and program, and checks
the promise of the README: exit status 2, exactly one stderr line starting with ``error:``, no traceback, and
no file written (the directory is unchanged). hw and boards cases fail before Verilator or place-and-route
start (the time limit would catch them otherwise).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sys

import numpy as np
import pytest
import scipy.sparse as sp

sys.path.insert(0, os.path.dirname(__file__))
from harness import assert_one_line_error, run_forked, snapshot  # noqa: E402


# ---- the valid files every case starts from ---------------------------------------------------------------

VALID_FF = """program spmv
tensor B(3, 4) : csr
tensor c(4) : dense
x(i) = B(i,j) * c(j)
"""


@pytest.fixture(scope="session")
def base(tmp_path_factory):
    from fuseflow.samml import kernels, save
    from fuseflow.samml.io import dumps
    from fuseflow.tensors.io import save_npz
    d = tmp_path_factory.mktemp("badinput-base")
    prog, inputs = kernels.dcsr_example()
    save(prog, d / "g.json")
    save_npz(d / "d.npz", inputs)
    for t in prog.tensors.values():                   # worst-case capacities: hw builds need no data
        t.capacity = t.worst_case_capacity()
    (d / "hw.json").write_text(dumps(prog))
    (d / "p.ff").write_text(VALID_FF)
    np.save(d / "c.npy", inputs["c"])
    import scipy.io
    scipy.io.mmwrite(str(d / "B.mtx"), sp.coo_matrix(inputs["B"]))
    (d / "afile").write_text("a regular file\n")
    (d / "adir").mkdir()
    (d / "adir" / "keep").write_text("x\n")
    (d / "min.json").write_text(json.dumps({"fuseflow_correlation": 1, "records": []}))
    return d


def graph_doc(base):
    return json.loads((base / "g.json").read_text())


# ---- builders for bad files ---------------------------------------------------------------------------------

def text(s):
    return lambda base: s.encode() if isinstance(s, str) else s


def graph(edit):
    """A graph.json: the valid SpMV graph changed by ``edit(doc)`` (which may return a replacement)."""
    def make(base):
        doc = graph_doc(base)
        out = edit(doc)
        doc = doc if out is None else out
        return doc.encode() if isinstance(doc, str) else json.dumps(doc).encode()
    return make


def hwgraph(edit):
    def make(base):
        doc = json.loads((base / "hw.json").read_text())
        out = edit(doc)
        return json.dumps(doc if out is None else out).encode()
    return make


def npz(**arrays):
    def make(base):
        import io
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        return buf.getvalue()
    return make


def scipy_npz(matrix):
    """A file written by ``scipy.sparse.save_npz`` (one matrix, named after the file)."""
    def make(base):
        import io
        buf = io.BytesIO()
        sp.save_npz(buf, matrix)
        return buf.getvalue()
    return make


def npy(arr):
    def make(base):
        import io
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=True)
        return buf.getvalue()
    return make


def node(doc, nid):
    return next(n for n in doc["kernels"][0]["nodes"] if n["id"] == nid)


def stream(doc, sid):
    return next(s for s in doc["kernels"][0]["streams"] if s["id"] == sid)


def set_in(path, value):
    """edit: doc[path...] = value."""
    def edit(doc):
        d = doc
        for p in path[:-1]:
            d = d[p]
        d[path[-1]] = value
    return edit


def tensor(i, key, value):
    return set_in(["tensors", i, key], value)


def binary_alu_without_b(doc):
    k = doc["kernels"][0]
    k["nodes"] = [n for n in k["nodes"] if n["id"] != "vals_c"]
    k["streams"] = [s for s in k["streams"] if s["id"] not in ("vals_c.val", "intersect_j.ref1")]


def dense_level_dim0(doc):
    doc["tensors"][0]["format"]["levels"] = ["dense", "compressed"]
    n = node(doc, "scan_B0")
    n["params"].update(format="dense", dim=0)


def dense_huge(doc):
    doc["tensors"][0]["shape"] = [60000, 60000]
    doc["tensors"][0]["format"]["levels"] = ["dense", "dense"]
    doc["tensors"][1]["shape"] = [60000]
    doc["tensors"][2]["shape"] = [60000]
    node(doc, "scan_B0")["params"]["format"] = "dense"
    node(doc, "scan_B1")["params"]["format"] = "dense"
    doc["config"]["crd_width"] = 32


def no_capacity(doc):
    """The graph without declared capacities (the builders declare them): hardware then needs data."""
    for t in doc["tensors"]:
        t.pop("capacity", None)


def both(*edits):
    def edit(doc):
        for e in edits:
            e(doc)
    return edit


def cycle_through_reduce(doc):
    stream(doc, "vals_B.val")["to"] = ["write_x_vals.val"]
    stream(doc, "reduce_j.val")["to"] = ["mul.a"]


def two_streams_from_one_port(doc):
    """vals_B.val feeds mul.a and, through a second stream, write_x_vals.val (accepted before; deadlocked)."""
    k = doc["kernels"][0]
    k["streams"] = [s for s in k["streams"] if s["id"] != "reduce_j.val"]
    k["streams"].append({"id": "again", "kind": "val", "from": "vals_B.val", "to": ["write_x_vals.val"]})


def deep_json(depth):
    return text("[" * depth + "]" * depth)


# ---- the corpus ---------------------------------------------------------------------------------------------
# (id, entry, argv, files {name: builder}, fragments expected in the error line, env)

G = "g.json"
C = []


def case(cid, entry, argv, files=None, *fragments, env=None):
    C.append(pytest.param(entry, argv, files or {}, fragments, env or {}, id=cid))


# graph.json files: every schema rule and every semantic rule, through `samml validate` (and, for a sample,
# through every command that reads a graph: they share the one definition of validity)
BAD_GRAPHS = [
    ("missing", None, ["bad.json", "No such file"]),
    ("empty", text(""), ["not valid JSON"]),
    ("binary", text(bytes(range(256)) * 4), ["not a UTF-8 text file"]),
    ("latin1", text('{"samml": 1, "name": "caf\xe9"}'.encode("latin-1")), ["not a UTF-8 text file"]),
    ("bom-garbage", text(b"\xef\xbb\xbf\x00\x01"), ["bad.json"]),
    ("not-json", text("{ not json"), ["not valid JSON"]),
    ("array", text("[]"), ["$"]),
    ("string", text('"graph"'), ["$"]),
    ("null", text("null"), ["$"]),
    ("deep-array", deep_json(200_000), ["nested too deeply"]),
    ("deep-object", text('{"a":' * 100_000 + "1" + "}" * 100_000), ["nested too deeply"]),
    ("huge-int-literal", text('{"samml": 1, "name": "x", "tensors": [], "kernels": [], "n": ' + "9" * 5000 + "}"),
     ["not valid JSON"]),
    ("nan-fifo", graph(lambda d: json.dumps(d).replace('"fifo_depth": 2', '"fifo_depth": NaN')),
     ["$.config.fifo_depth"]),
    ("inf-shape", graph(lambda d: json.dumps(d).replace('"shape": [4]', '"shape": [Infinity]', 1)), ["shape"]),
    ("samml-version", graph(set_in(["samml"], 2)), ["$.samml"]),
    ("no-name", graph(lambda d: d.pop("name") and None), ["'name' is a required property"]),
    ("empty-name", graph(set_in(["name"], "")), ["$.name"]),
    ("extra-key", graph(set_in(["extra"], 1)), ["Additional properties"]),
    ("tensors-object", graph(set_in(["tensors"], {})), ["$.tensors"]),
    ("tensor-name", graph(tensor(0, "name", "1B")), ["$.tensors[0].name"]),
    ("tensor-role", graph(tensor(0, "role", "scratch")), ["$.tensors[0].role"]),
    ("shape-zero", graph(tensor(0, "shape", [3, 0])), ["$.tensors[0].shape"]),
    ("shape-negative", graph(tensor(0, "shape", [3, -4])), ["$.tensors[0].shape"]),
    ("shape-float", graph(tensor(0, "shape", [3, 4.5])), ["$.tensors[0].shape"]),
    ("shape-string", graph(tensor(0, "shape", "3x4")), ["$.tensors[0].shape"]),
    ("order-7", graph(tensor(0, "shape", [3, 4, 2, 2, 2, 2, 2])), ["$.tensors[0].shape"]),
    ("dim-1e30", graph(tensor(0, "shape", [3, 10 ** 30])), ["$.tensors[0].shape", "FUSEFLOW_MAX_DIMENSION"]),
    ("dim-1e13-crd64", graph(both(tensor(0, "shape", [3, 10 ** 13]), set_in(["config", "crd_width"], 64))),
     ["$.tensors[0].shape", "FUSEFLOW_MAX_DIMENSION"]),
    ("dim-70000-crd16", graph(tensor(0, "shape", [3, 70000])), ["tensor B", "need a 24-bit coordinate width, the graph declares crd_width 16"]),
    ("levels-count", graph(set_in(["tensors", 0, "format", "levels"], ["compressed"])), ["$.tensors[0].format.levels"]),
    ("level-format", graph(set_in(["tensors", 0, "format", "levels"], ["compressed", "bitmap"])), ["levels"]),
    ("mode-order", graph(set_in(["tensors", 0, "format", "mode_order"], [0, 0])), ["mode_order"]),
    ("mode-order-range", graph(set_in(["tensors", 0, "format", "mode_order"], [0, 5])), ["mode_order"]),
    ("capacity-length", graph(tensor(0, "capacity", [1, 2])), ["$.tensors[0].capacity"]),
    ("capacity-negative", graph(tensor(0, "capacity", [1, 2, -3, 4])), ["$.tensors[0].capacity"]),
    ("capacity-huge", graph(tensor(0, "capacity", [3, 12, 10 ** 12])), ["capacity", "FUSEFLOW_MAX_DENSE_ENTRIES"]),
    ("capacity-positions", graph(tensor(0, "capacity", [3, 70000, 70000])),
     ["tensor B", "positions up to 70000"]),
    ("dtype", graph(tensor(0, "dtype", "int8")), ["$.tensors[0].dtype"]),
    ("tensor-twice", graph(lambda d: d["tensors"].append(copy.deepcopy(d["tensors"][0]))), ["declared twice"]),
    ("dense-huge", graph(dense_huge), ["FUSEFLOW_MAX_DENSE_ENTRIES"]),
    ("no-kernels", graph(set_in(["kernels"], [])), ["$.kernels"]),
    ("kernel-no-streams", graph(lambda d: d["kernels"][0].pop("streams") and None), ["streams"]),
    ("node-id-twice", graph(lambda d: d["kernels"][0]["nodes"].append(copy.deepcopy(d["kernels"][0]["nodes"][0]))),
     ["duplicate node id"]),
    ("node-id-pattern", graph(lambda d: d["kernels"][0]["nodes"][0].update(id="a.b")), ["id"]),
    ("unknown-op", graph(lambda d: node(d, "mul").update(op="warp")), ["unknown op 'warp'"]),
    ("unknown-param", graph(lambda d: node(d, "mul")["params"].update(speed=3)), ["no parameter 'speed'"]),
    ("params-list", graph(lambda d: node(d, "mul").update(params=[1])), ["params"]),
    ("param-type", graph(lambda d: node(d, "scan_B0")["params"].update(level="0")), ["parameter 'level' must be int"]),
    ("param-bool", graph(lambda d: node(d, "scan_B0")["params"].update(level=True)), ["parameter 'level' must be int"]),
    ("param-choice", graph(lambda d: node(d, "mul")["params"].update(op="pow")), ["parameter 'op' must be one of"]),
    ("alu-no-b", graph(binary_alu_without_b), ["input 'b' of node 'mul' (alu) is not driven"]),
    ("alu-const-and-b", graph(lambda d: node(d, "mul")["params"].update(const=2.0)), ["both a const"]),
    ("alu-const-nan", graph(lambda d: json.dumps(d).replace('"op": "mul"}', '"op": "mul", "const": NaN}')),
     ["parameter 'const' must be a finite number"]),
    ("alu-const-inf", graph(lambda d: json.dumps(d).replace('"op": "mul"}', '"op": "mul", "const": -Infinity}')),
     ["finite"]),
    ("arity-1", graph(lambda d: node(d, "intersect_j")["params"].update(arity=1)), ["'arity' must be at least 2"]),
    ("arity-1e9", graph(lambda d: node(d, "intersect_j")["params"].update(arity=10 ** 9)),
     ["arity", "FUSEFLOW_MAX_ARITY"]),
    ("union-arity-1e9", graph(lambda d: node(d, "intersect_j").update(op="union", params={"arity": 10 ** 9})),
     ["FUSEFLOW_MAX_ARITY"]),
    ("spacc-order", graph(lambda d: node(d, "mul").update(op="spacc", params={"order": 4})), ["parameter 'order'"]),
    ("level-missing", graph(lambda d: node(d, "scan_B1")["params"].update(level=5)), ["has no level 5"]),
    ("level-format-mismatch", graph(lambda d: node(d, "scan_B1")["params"].update(format="dense")),
     ["reads level 1 of 'B' as dense"]),
    ("dense-dim-0", graph(dense_level_dim0), ["parameter 'dim' must be at least 1"]),
    ("dense-dim-wrong", graph(both(dense_level_dim0, lambda d: node(d, "scan_B0")["params"].update(dim=7))),
     ["dimension 7 but the tensor declares 3"]),
    ("undeclared-tensor", graph(lambda d: node(d, "vals_B")["params"].update(tensor="Q")), ["undeclared tensor 'Q'"]),
    ("write-input", graph(lambda d: node(d, "write_x_vals")["params"].update(tensor="c")), ["writes input tensor"]),
    ("stream-unknown-src", graph(lambda d: stream(d, "mul.out").update({"from": "ghost.out"})), ["unknown node"]),
    ("stream-bad-port", graph(lambda d: stream(d, "mul.out").update({"from": "mul.sideways"})), ["no output port"]),
    ("stream-from-pattern", graph(lambda d: stream(d, "mul.out").update({"from": "a.b.c"})), ["from"]),
    ("stream-dangling", graph(lambda d: stream(d, "mul.out").update(to=[])), ["dangling"]),
    ("stream-unknown-dst", graph(lambda d: stream(d, "mul.out").update(to=["ghost.a"])), ["unknown node 'ghost'"]),
    ("stream-bad-dst-port", graph(lambda d: stream(d, "mul.out").update(to=["reduce_j.nope"])), ["no input port"]),
    ("driven-twice", graph(lambda d: stream(d, "vals_c.val")["to"].append("mul.a")), ["driven twice"]),
    ("kind-mismatch", graph(lambda d: stream(d, "mul.out").update(kind="crd")), ["is crd but the port takes val"]),
    ("kind-unknown", graph(lambda d: stream(d, "mul.out").update(kind="bits")), ["kind"]),
    ("stream-id-twice", graph(lambda d: d["kernels"][0]["streams"].append(copy.deepcopy(stream(d, "mul.out")))),
     ["duplicate stream id"]),
    ("depth-0", graph(lambda d: stream(d, "mul.out").update(depth=0)), ["depth"]),
    ("depth-1e9", graph(lambda d: stream(d, "mul.out").update(depth=10 ** 9)), ["FUSEFLOW_MAX_FIFO_DEPTH"]),
    ("fifo-1e12", graph(set_in(["config", "fifo_depth"], 10 ** 12)), ["FUSEFLOW_MAX_FIFO_DEPTH"]),
    ("fifo-0", graph(set_in(["config", "fifo_depth"], 0)), ["$.config.fifo_depth"]),
    ("crd-width-65", graph(set_in(["config", "crd_width"], 65)), ["$.config.crd_width"]),
    ("crd-width-1", graph(set_in(["config", "crd_width"], 1)), ["$.config.crd_width"]),
    ("frac-over-width", graph(set_in(["config", "value"], {"format": "fixed", "width": 8, "frac": 20})),
     ["$.config.value", "frac"]),
    ("value-format", graph(set_in(["config", "value", "format"], "double")), ["format"]),
    ("config-unknown", graph(set_in(["config", "speed"], 1)), ["Additional properties"]),
    ("cycle", graph(cycle_through_reduce), ["cycle"]),
    ("two-streams-one-port", graph(two_streams_from_one_port), ["output vals_B.val feeds two streams"]),
    ("node-limit", graph(lambda d: None), ["FUSEFLOW_MAX_NODES"], {"FUSEFLOW_MAX_NODES": "3"}),
    ("limit-env-bad", graph(lambda d: None), ["FUSEFLOW_MAX_NODES", "positive integer"],
     {"FUSEFLOW_MAX_NODES": "lots"}),
]

for cid, make, frags, *env in BAD_GRAPHS:
    files = {} if make is None else {"bad.json": make}
    case(f"samml-validate-{cid}", "fuseflow.samml", ["validate", "bad.json"], files, *frags,
         env=env[0] if env else None)

# the same definition of validity in every command that reads a graph (a sample of the rules above)
SHARED = ["binary", "deep-array", "dim-1e30", "dim-70000-crd16", "alu-no-b", "frac-over-width", "dense-dim-0",
          "arity-1e9", "fifo-1e12", "order-7", "dense-huge", "alu-const-nan"]
for cid, make, frags, *env in BAD_GRAPHS:
    if cid not in SHARED:
        continue
    f = {"bad.json": make}
    case(f"samml-dot-{cid}", "fuseflow.samml", ["dot", "bad.json", "-o", "out.svg"], f, *frags)
    case(f"sim-run-{cid}", "fuseflow.sim", ["run", "bad.json", "--inputs", "d.npz", "--json", "r.json"], f, *frags)
    case(f"hw-build-{cid}", "fuseflow.hw", ["build", "bad.json", "--inputs", "d.npz", "-o", "out"], f, *frags)
for cid in ("binary", "alu-no-b", "arity-1e9", "dense-huge"):
    make, frags = next((m, fr) for c, m, fr, *_ in BAD_GRAPHS if c == cid)
    f = {"bad.json": make}
    case(f"size-fifos-{cid}", "fuseflow.sim", ["size-fifos", "bad.json", "--inputs", "d.npz", "-o", "s.json"], f,
         *frags)
    case(f"hw-sim-{cid}", "fuseflow.hw", ["sim", "bad.json", "--inputs", "d.npz"], f, *frags)
    case(f"boards-build-{cid}", "fuseflow.boards", ["build", "bad.json", "--board", "icebreaker", "--inputs",
                                                    "d.npz", "-o", "out"], f, *frags)
    case(f"console-sim-{cid}", "fuseflow", ["sim", "run", "bad.json", "--inputs", "d.npz"], f, *frags)

# samml: arguments and outputs
case("samml-none", "fuseflow.samml", [], None, "arguments")
case("samml-unknown-cmd", "fuseflow.samml", ["draw", G], None, "invalid choice")
case("samml-unknown-flag", "fuseflow.samml", ["validate", G, "--fast"], None, "unrecognized arguments")
case("samml-validate-dir", "fuseflow.samml", ["validate", "adir"], None, "adir")
case("samml-dot-out-is-dir", "fuseflow.samml", ["dot", G, "-o", "adir"], None, "-o/--output", "is a directory")
case("samml-dot-out-below-file", "fuseflow.samml", ["dot", G, "-o", "afile/g.dot"], None, "not a directory")
case("samml-kernels-out-is-file", "fuseflow.samml", ["kernels", "-o", "afile"], None, "not a directory")
case("samml-kernels-out-below-file", "fuseflow.samml", ["kernels", "-o", "afile/k"], None, "afile")

# tensor files (sim run)
BAD_DATA = [
    ("missing", None, "nope.npz", ["nope.npz"]),
    ("dir", None, "adir", ["adir"]),
    ("empty-npz", text(""), "e.npz", ["e.npz"]),
    ("garbage-npz", text(bytes(range(256))), "x.npz", ["x.npz"]),
    ("text-npz", text("B,c\n1,2\n"), "t.npz", ["t.npz"]),
    ("csv", text("1,2\n"), "B.csv", ["unknown tensor file extension"]),
    ("no-extension", text("1\n"), "B", ["unknown tensor file extension"]),
    ("npy-as-npz", npy(np.ones(4)), "c.npz", ["c.npz"]),
    ("npz-as-npy", npz(c=np.ones(4)), "c2.npy", ["c2.npy"]),
    ("npy-object", npy(np.array([{"a": 1}], dtype=object)), "c.npy", ["c.npy"]),
    ("npy-complex", npy(np.ones(4, dtype=complex)), "c.npy", ["values must be real numbers"]),
    ("npy-strings", npy(np.array(["a", "b", "c", "d"])), "c.npy", ["real numbers"]),
    ("npy-truncated", lambda b: npy(np.ones(1000))(b)[:200], "c.npy", ["c.npy"]),
    ("npy-huge-header", lambda b: npy(np.ones(4))(b).replace(b"(4,)", b"(4000000000000,)"), "c.npy", ["c.npy"]),
    ("npz-shape", npz(B=np.ones((4, 4)), c=np.ones(4)), "d2.npz", ["tensor B", "shape (4, 4)"]),
    ("npz-missing-tensor", npz(B=np.ones((3, 4))), "d2.npz", ["tensor c", "no data given"]),
    ("npz-extra-tensor", npz(B=np.ones((3, 4)), c=np.ones(4), z=np.ones(2)), "d2.npz", ["no input tensor called z"]),
    ("npz-order-0", npz(B=np.float64(1.0), c=np.ones(4)), "d2.npz", ["tensor B"]),
    ("npz-bad-sparse", npz(**{"B.__sparse_format__": np.array("csr"), "B.data": np.ones(2),
                              "B.indices": np.array([0, 9]), "B.indptr": np.array([0, 1, 2, 2]),
                              "B.shape": np.array([3, 4]), "c": np.ones(4)}), "d2.npz", ["inconsistent sparse"]),
    ("npz-sparse-format", npz(**{"B.__sparse_format__": np.array("bsr"), "B.data": np.ones(2),
                                 "B.indices": np.array([0, 1]), "B.indptr": np.array([0, 1, 2, 2]),
                                 "B.shape": np.array([3, 4]), "c": np.ones(4)}), "d2.npz", ["unknown sparse format"]),
    ("mtx-garbage", text("not a matrix market file\n"), "B.mtx", ["B.mtx"]),
    ("mtx-binary", text(bytes(range(256))), "B.mtx", ["B.mtx"]),
    ("mtx-complex", text("%%MatrixMarket matrix coordinate complex general\n3 4 1\n1 1 1.0 2.0\n"), "B.mtx",
     ["B.mtx"]),
    ("mtx-huge-shape", text("%%MatrixMarket matrix coordinate real general\n100000000000 100000000000 1\n1 1 1.0\n"),
     "B.mtx", ["B.mtx", "FUSEFLOW_MAX_DENSE_ENTRIES"]),
    ("mtx-index-out", text("%%MatrixMarket matrix coordinate real general\n3 4 1\n9 9 1.0\n"), "B.mtx", ["B.mtx"]),
    ("mtx-nan-fixed", text("%%MatrixMarket matrix coordinate real general\n3 4 1\n1 1 nan\n"), "B.mtx", ["nan"]),
    ("nan-fixed", npz(B=np.array([[np.nan, 0, 0, 0], [0] * 4, [0] * 4]), c=np.ones(4)), "d2.npz", ["nan"]),
    ("npz-complex", npz(B=np.ones((3, 4), dtype=complex), c=np.ones(4)), "d2.npz", ["real numbers"]),
    ("inf-fixed", npz(B=np.array([[np.inf, 0, 0, 0], [0] * 4, [0] * 4]), c=np.ones(4)), "d2.npz", ["does not fit"]),
    ("range-fixed", npz(B=np.array([[1e10, 0, 0, 0], [0] * 4, [0] * 4]), c=np.ones(4)), "d2.npz",
     ["does not fit"]),
    ("int-range-fixed", npz(B=np.array([[2 ** 40, 0, 0, 0], [0] * 4, [0] * 4]), c=np.ones(4, dtype=np.int64)),
     "d2.npz", ["does not fit"]),
    ("int-beyond-2-53", npz(B=np.array([[2 ** 60, 0, 0, 0], [0] * 4, [0] * 4]), c=np.ones(4)), "d2.npz",
     ["2**53"]),
    ("uint64-huge", npz(B=np.full((3, 4), 2 ** 64 - 1, dtype=np.uint64), c=np.ones(4)), "d2.npz", ["B"]),
    # issue 44: NaN in float mode too (it ended as a mismatch report); np.savez of a SciPy matrix; a small file
    # declaring a 3e9 x 3e9 sparse matrix (its CSR row pointers would need 24 GB)
    ("nan-float", npz(B=np.array([[0, 0, 0, 0], [0, 0, np.nan, 0], [0] * 4]), c=np.ones(4)), "d2.npz",
     ["tensor B", "1 NaN value", "(1, 2)"]),
    ("mtx-nan-float", text("%%MatrixMarket matrix coordinate real general\n3 4 1\n3 2 nan\n"), "B.mtx",
     ["tensor B", "NaN", "(2, 1)"]),
    ("npz-pickled-scipy", npz(B=sp.csr_matrix(np.eye(3, 4)), c=np.ones(4)), "d2.npz",
     ["d2.npz:B", "fuseflow.tensors.save_npz"]),
    ("scipy-npz-3e9", scipy_npz(sp.coo_matrix((np.ones(2), ([0, 7], [1, 2])), shape=(3 * 10 ** 9, 3 * 10 ** 9))),
     "B.npz", ["B.npz", "3000000000 x 3000000000", "FUSEFLOW_MAX_DENSE_ENTRIES"]),
]
for cid, make, name, frags in BAD_DATA:
    files = {} if make is None else {name: make}
    mode = ["--mode", "fixed"] if "fixed" in cid else []
    inputs = [name] if name.endswith((".npz", "adir")) or cid in ("csv", "no-extension") else [name, "d.npz"]
    if cid.startswith("mtx") or cid.startswith("npy") or cid == "npz-as-npy":
        inputs = [name, "c.npy" if name.startswith("B") else "B.mtx"]
    case(f"sim-data-{cid}", "fuseflow.sim", ["run", G, "--inputs", *inputs, *mode, "--json", "r.json"], files,
         *frags)
for cid in ("garbage-npz", "npz-shape", "inf-fixed", "npz-complex"):
    _, make, name, frags = next(x for x in BAD_DATA if x[0] == cid)
    case(f"hw-build-data-{cid}", "fuseflow.hw", ["build", G, "--inputs", name, "-o", "out"], {name: make}, *frags)
    case(f"hw-sim-data-{cid}", "fuseflow.hw", ["sim", G, "--inputs", name], {name: make}, *frags)

# sim run / size-fifos: flags and outputs
RUN = ["run", G, "--inputs", "d.npz"]
case("sim-mode", "fuseflow.sim", RUN + ["--mode", "double"], None, "--mode", "invalid choice")
case("sim-fifo-0", "fuseflow.sim", RUN + ["--fifo-depth", "0"], None, "--fifo-depth", "at least 1")
case("sim-fifo-neg", "fuseflow.sim", RUN + ["--fifo-depth", "-3"], None, "--fifo-depth")
case("sim-fifo-text", "fuseflow.sim", RUN + ["--fifo-depth", "deep"], None, "--fifo-depth", "integer")
case("sim-fifo-1e12", "fuseflow.sim", RUN + ["--fifo-depth", str(10 ** 12)], None, "FUSEFLOW_MAX_FIFO_DEPTH")
case("sim-fifo-1e9", "fuseflow.sim", RUN + ["--fifo-depth", str(10 ** 9)], None, "FUSEFLOW_MAX_FIFO_DEPTH")
case("sim-no-inputs", "fuseflow.sim", ["run", G], None, "--inputs")
case("sim-unknown-flag", "fuseflow.sim", RUN + ["--turbo"], None, "unrecognized")
case("sim-json-dir", "fuseflow.sim", RUN + ["--json", "adir"], None, "--json", "is a directory")
case("sim-json-below-file", "fuseflow.sim", RUN + ["--json", "afile/r.json"], None, "--json", "afile")
case("sim-outputs-below-file", "fuseflow.sim", RUN + ["--json", "r.json", "--outputs", "afile/o.npz"], None,
     "--outputs", "afile")
case("sim-outputs-dir", "fuseflow.sim", RUN + ["--json", "r.json", "--outputs", "adir"], None, "--outputs")
case("sim-json-empty", "fuseflow.sim", RUN + ["--json", ""], None, "--json")
case("sim-json-inside-outputs", "fuseflow.sim", RUN + ["--json", "OUT/report.json", "--outputs", "OUT"], None,
     "--json", "OUT/report.json lies inside OUT, which --outputs writes as a file")
case("sim-outputs-inside-json", "fuseflow.sim", RUN + ["--outputs", "R/o.npz", "--json", "R"], None,
     "--outputs", "lies inside R, which --json writes as a file")
case("sim-outputs-same-as-json", "fuseflow.sim", RUN + ["--json", "r.json", "--outputs", "./r.json"], None,
     "--outputs", "same path as --json r.json")
case("sim-check-no-expr", "fuseflow.sim", ["run", "noexpr.json", "--inputs", "d.npz", "--check", "--json", "r.json"],
     {"noexpr.json": graph(lambda d: d.pop("expr") and None)}, "--check needs the program's 'expr'")
case("sim-positions-crd2", "fuseflow.sim", ["run", "cw.json", "--inputs", "d.npz", "--json", "r.json"],
     {"cw.json": graph(set_in(["config", "crd_width"], 2))}, "tensor B", "positions up to 12")
case("sim-output-dense-limit", "fuseflow.sim", ["run", "nc.json", "--inputs", "d.npz"], {"nc.json": graph(no_capacity)},
     "output tensor x",
     "FUSEFLOW_MAX_DENSE_ENTRIES", env={"FUSEFLOW_MAX_DENSE_ENTRIES": "2"})
SIZE = ["size-fifos", G, "--inputs", "d.npz"]
case("size-no-output", "fuseflow.sim", SIZE, None, "-o/--output")
case("size-max-depth-0", "fuseflow.sim", SIZE + ["-o", "s.json", "--max-depth", "0"], None, "--max-depth")
case("size-min-gain-2", "fuseflow.sim", SIZE + ["-o", "s.json", "--min-gain", "2"], None, "--min-gain")
case("size-min-gain-nan", "fuseflow.sim", SIZE + ["-o", "s.json", "--min-gain", "nan"], None, "--min-gain")
case("size-min-gain-text", "fuseflow.sim", SIZE + ["-o", "s.json", "--min-gain", "lots"], None, "--min-gain")
case("size-out-dir", "fuseflow.sim", SIZE + ["-o", "adir"], None, "is a directory")
case("size-out-below-file", "fuseflow.sim", SIZE + ["-o", "afile/s.json"], None, "afile")
case("size-mode", "fuseflow.sim", SIZE + ["-o", "s.json", "--mode", "exact"], None, "--mode")
case("sim-none", "fuseflow.sim", [], None, "arguments")

# compiler
CP = ["compile"]
BAD_PROGRAMS = [
    ("missing", None, ["nope.ff"]),
    ("empty", text(""), []),
    ("binary", text(bytes(range(256)) * 8), ["not a UTF-8 text file"]),
    ("latin1", text("program caf\xe9\ntensor B(3,4)\n".encode("latin-1")), ["not a UTF-8 text file"]),
    ("nul-bytes", text("program p\x00\n"), []),
    ("overflow-1e999", text(VALID_FF.replace("* c(j)", "* c(j) * 1e999")), ["too large"]),
    ("parens-5000", text(VALID_FF.replace("B(i,j)", "(" * 5000 + "B(i,j)" + ")" * 5000)), ["nested deeper"]),
    ("unclosed-parens", text(VALID_FF.replace("B(i,j)", "(" * 5000 + "B(i,j)")), []),
    ("unary-minus-20000", text(VALID_FF.replace("B(i,j)", "-" * 20000 + "B(i,j)")), ["nested deeper"]),
    ("chain-5000", text(VALID_FF.replace("* c(j)", "* c(j)" + " + B(i,j) * c(j)" * 5000)), ["nested deeper"]),
    ("relu-nesting", text(VALID_FF.replace("B(i,j)", "relu(" * 3000 + "B(i,j)" + ")" * 3000)), ["nested deeper"]),
    ("bad-char", text(VALID_FF.replace("* c(j)", "* c(j) $")), ["unexpected character"]),
    ("undeclared", text(VALID_FF.replace("c(j)", "q(j)")), ["q"]),
    ("shape-mismatch", text(VALID_FF.replace("tensor c(4)", "tensor c(5)")), []),
    ("order-7", text("program p\ntensor A(2,2,2,2,2,2,2) : dense\nx(i) = A(i,j,k,l,m,n,o)\n"),
     ["A has order 7", "order at most 6"]),
    ("order-7-written", text("program p\ntensor A(2,2,2,2,2,2) : dense\ntensor b(2) : dense\n"
                             "X(i,j,k,l,m,n,o) = A(i,j,k,l,m,n) * b(o)\n"), ["X has order 7", "order at most 6"]),
    # order 4: conflicting outermost levels (a permuted copy re-sorts at most the 3 innermost levels)
    ("order-4-permuted-copy", text("program p\ntensor A(2,3,4,5) : cccc\ntensor B(3,2,4,5) : cccc\n"
                                   "x(a) = A(a,b,c,d) * B(b,a,c,d)\n"),
     ["no permuted copy", "3 innermost levels"]),
    ("dim-0", text(VALID_FF.replace("B(3, 4)", "B(3, 0)")), []),
    ("dim-1e20", text(VALID_FF.replace("B(3, 4)", "B(3, 100000000000000000000)").replace("c(4)", "c(100000000000000000000)")),
     []),
    ("dim-5000-digits", text(VALID_FF.replace("B(3, 4)", "B(3, " + "9" * 5000 + ")")), []),
    ("dense-huge", text(VALID_FF.replace("B(3, 4) : csr", "B(60000, 60000) : dense").replace("c(4)", "c(60000)")),
     ["tensor B", "FUSEFLOW_MAX_DENSE_ENTRIES", "sparse format"]),
    # issue 44: a missing ')' is not an unknown function; a huge sparse tensor without a density names itself
    ("missing-paren", text(VALID_FF.replace("* c(j)", "* c(j")), ["expected ')'", "end of statement"]),
    ("csr-1e8-no-density", text(VALID_FF.replace("B(3, 4)", "B(100000000, 100000000)").replace("c(4)",
                                                                                                "c(100000000)")),
     ["tensor B", "declare its density"]),
    ("format-unknown", text(VALID_FF.replace(": csr", ": bitmap")), []),
    ("tensor-twice", text(VALID_FF + "tensor B(3, 4)\n"), []),
    ("unclosed-fuse", text("program p\ntensor B(3,4)\nfuse {\nx(i) = B(i,j)\n"), []),
    ("stray-brace", text(VALID_FF + "}\n"), []),
    ("index-twice", text(VALID_FF.replace("B(i,j)", "B(i,i)")), []),
    ("order-unknown-index", text(VALID_FF + "order q,z\n"), []),
]
for cid, make, frags in BAD_PROGRAMS:
    files = {} if make is None else {"bad.ff": make}
    prog = "nope.ff" if make is None else "bad.ff"
    case(f"compile-{cid}", "fuseflow.compiler", CP + [prog, "-o", "out"], files, *frags)
for cid in ("binary", "overflow-1e999", "parens-5000", "order-7", "dim-1e20"):
    make, frags = next((m, fr) for c, m, fr in BAD_PROGRAMS if c == cid)
    case(f"console-compile-{cid}", "fuseflow", ["compile", "bad.ff", "-o", "out"], {"bad.ff": make}, *frags)
P = CP + ["p.ff"]
case("compile-fuse", "fuseflow.compiler", P + ["-o", "out", "--fuse", "most"], None, "--fuse", "invalid choice")
case("compile-iteration", "fuseflow.compiler", P + ["-o", "out", "--iteration", "x"], None, "--iteration")
case("compile-order", "fuseflow.compiler", P + ["-o", "out", "--order", "z,y"], None)
case("compile-order-empty", "fuseflow.compiler", P + ["-o", "out", "--order", ",,,"], None)
case("compile-max-orders-0", "fuseflow.compiler", P + ["--list-orders", "--max-orders", "0"], None, "--max-orders")
case("compile-max-orders-text", "fuseflow.compiler", P + ["--list-orders", "--max-orders", "all"], None,
     "--max-orders")
case("compile-nothing-to-do", "fuseflow.compiler", P, None, "nothing to do")
case("compile-out-file", "fuseflow.compiler", P + ["-o", "afile"], None, "afile", "not a directory")
case("compile-out-below-file", "fuseflow.compiler", P + ["-o", "afile/x"], None, "afile")
case("compile-no-program", "fuseflow.compiler", CP + ["-o", "out"], None, "program")
case("compile-dir", "fuseflow.compiler", CP + ["adir", "-o", "out"], None, "adir")
case("console-compile-fuse", "fuseflow", ["compile", "p.ff", "-o", "out", "--fuse", "x"], None, "--fuse")
# tiling (issue 41): sizes, unknown indices, sizes that must divide, budgets too small, sums that cannot split
case("compile-tile-zero", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=0"], None, "tile i", "at least 1")
case("compile-tile-negative", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=-4"], None, "tile i", "at least 1")
case("compile-tile-text", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=big"], None, "tile i",
     "positive integer")
case("compile-tile-syntax", "fuseflow.compiler", P + ["-o", "out", "--tile", "i:4"], None, "--tile", "INDEX=SIZE")
case("compile-tile-unknown-index", "fuseflow.compiler", P + ["-o", "out", "--tile", "q=2"], None, "tile q",
     "no statement has an index q")
case("compile-tile-lanes", "fuseflow.compiler", P + ["-o", "out", "--tile", "j=3", "--parallel", "j=2"], None,
     "tile j 3", "not a multiple of 2", "parallel j 2")
case("compile-tile-line-zero", "fuseflow.compiler", ["compile", "t.ff", "-o", "out"],
     {"t.ff": text(VALID_FF.replace("x(i) =", "tile i 0\nx(i) ="))}, "line 4", "tile i", "at least 1")
case("compile-tile-relu-sum", "fuseflow.compiler", ["compile", "r.ff", "-o", "out", "--tile", "j=2"],
     {"r.ff": text(VALID_FF.replace("B(i,j) * c(j)", "relu(B(i,j) * c(j))"))}, "do not merge by adding")
case("compile-onchip-bits-small", "fuseflow.compiler", P + ["-o", "out", "--onchip-bits", "10"], None,
     "--onchip-bits", "hold no tile")
case("compile-onchip-bits-zero", "fuseflow.compiler", P + ["-o", "out", "--onchip-bits", "0"], None,
     "--onchip-bits", "positive")
case("compile-min-tiles-no-budget", "fuseflow.compiler", P + ["-o", "out", "--min-tiles", "8"], None,
     "--min-tiles", "give --onchip-bits too")
case("compile-dma-pack", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=2", "--dma", "pack=2"], None,
     "pack 2 must be 0 or 1")
case("compile-tile-fuse-auto", "fuseflow.compiler", P + ["-o", "out", "--fuse", "auto", "--tile", "i=2"], None,
     "--tile", "--fuse auto")
case("compile-dma-key", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=2", "--dma", "buffer=1"], None,
     "--dma", "not key=value")
case("compile-dma-buffers", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=2", "--dma", "buffers=3"], None,
     "buffers 3 must be 1 or 2")
case("compile-dma-text", "fuseflow.compiler", P + ["-o", "out", "--tile", "i=2", "--dma", "latency=slow"], None,
     "--dma", "is not an integer")

# hw build / sim / correlate: all fail before Verilator starts
case("hw-build-no-capacity", "fuseflow.hw", ["build", "nc.json", "-o", "out"], {"nc.json": graph(no_capacity)},
     "no capacity")
case("hw-build-float", "fuseflow.hw", ["build", "f.json", "-o", "out"],
     {"f.json": hwgraph(set_in(["config", "value", "format"], "float"))}, "fixed-point")
case("hw-build-crd2", "fuseflow.hw", ["build", "cw.json", "--inputs", "d.npz", "-o", "out"],
     {"cw.json": graph(set_in(["config", "crd_width"], 2))}, "positions up to 12 need a 16-bit coordinate width, the graph declares crd_width 2")
case("hw-build-out-file", "fuseflow.hw", ["build", "hw.json", "-o", "afile"], None, "-o/--out", "not a directory")
case("hw-build-out-below-file", "fuseflow.hw", ["build", "hw.json", "-o", "afile/b"], None, "afile")
case("hw-build-inputs-missing", "fuseflow.hw", ["build", G, "--inputs", "nope.npz", "-o", "out"], None, "nope.npz")
case("hw-build-unknown-flag", "fuseflow.hw", ["build", G, "--fast"], None, "unrecognized")
case("hw-none", "fuseflow.hw", [], None, "arguments")
case("hw-unknown-cmd", "fuseflow.hw", ["synthesise", G], None, "invalid choice")
HS = ["sim", G, "--inputs", "d.npz"]
case("hw-sim-max-cycles-0", "fuseflow.hw", HS + ["--max-cycles", "0"], None, "--max-cycles", "at least 1")
case("hw-sim-max-cycles-neg", "fuseflow.hw", HS + ["--max-cycles", "-5"], None, "--max-cycles")
case("hw-sim-max-cycles-text", "fuseflow.hw", HS + ["--max-cycles", "many"], None, "--max-cycles")
case("hw-sim-simulator", "fuseflow.hw", HS + ["--simulator", "iverilog"], None, "--simulator", "invalid choice")
case("hw-sim-json-below-file", "fuseflow.hw", HS + ["--json", "afile/r.json"], None, "--json")
case("hw-sim-vcd-dir", "fuseflow.hw", HS + ["--vcd", "adir"], None, "--vcd", "is a directory")
case("hw-sim-json-inside-vcd", "fuseflow.hw", HS + ["--vcd", "W", "--json", "W/r.json"], None,
     "--json", "lies inside W, which --vcd writes as a file")
case("hw-sim-json-same-as-vcd", "fuseflow.hw", HS + ["--vcd", "w.vcd", "--json", "w.vcd"], None,
     "--json", "same path as --vcd w.vcd")
case("hw-sim-no-inputs", "fuseflow.hw", ["sim", G], None, "--inputs")
case("hw-sim-crd2", "fuseflow.hw", ["sim", "cw.json", "--inputs", "d.npz", "--simulator", "amaranth"],
     {"cw.json": graph(set_in(["config", "crd_width"], 2))}, "positions up to 12 need a 16-bit coordinate width, the graph declares crd_width 2")
CR = ["correlate"]
case("correlate-suite", "fuseflow.hw", CR + ["--suite", "nope", "-o", "r"], None, "--suite", "unknown suite")
case("correlate-simulator", "fuseflow.hw", CR + ["--simulator", "x", "-o", "r"], None, "--simulator")
case("correlate-out-file", "fuseflow.hw", CR + ["-o", "afile"], None, "not a directory")
case("correlate-out-below-file", "fuseflow.hw", CR + ["-o", "afile/r"], None, "afile")
case("correlate-max-trace", "fuseflow.hw", CR + ["--max-trace-cycles", "-1", "-o", "r"], None, "--max-trace-cycles")
case("correlate-only", "fuseflow.hw", CR + ["--suite", "quick", "--only", "no-such-kernel", "--simulator", "amaranth",
                                     "-o", "r"], None, "--only")
case("correlate-unknown-flag", "fuseflow.hw", CR + ["--fast"], None, "unrecognized")
case("correlate-render-missing", "fuseflow.hw", CR + ["--render", "nope.json", "-o", "r"], None, "nope.json")
case("correlate-render-minimal", "fuseflow.hw", CR + ["--render", "min.json", "-o", "r"], None, "min.json")
case("correlate-render-binary", "fuseflow.hw", CR + ["--render", "b.json", "-o", "r"],
     {"b.json": text(bytes(range(256)))}, "b.json", "UTF-8")
case("correlate-render-latin1", "fuseflow.hw", CR + ["--render", "l.json", "-o", "r"],
     {"l.json": text('{"suite": "caf\xe9"}'.encode("latin-1"))}, "l.json")
case("correlate-render-not-report", "fuseflow.hw", CR + ["--render", G, "-o", "r"], None, "not a correlation report")
case("correlate-render-deep", "fuseflow.hw", CR + ["--render", "d.json", "-o", "r"],
     {"d.json": deep_json(100_000)}, "nested too deeply")
case("correlate-render-bad-records", "fuseflow.hw", CR + ["--render", "m.json", "-o", "r"],
     {"m.json": text(json.dumps({"fuseflow_correlation": 1, "records": 5, "metrics": 3}))}, "m.json")

# boards: all fail before Yosys / nextpnr start
BB = ["build", "hw.json", "--board", "icebreaker", "-o", "out"]
case("boards-board", "fuseflow.boards", ["build", "hw.json", "--board", "de10", "-o", "out"], None, "de10")
case("boards-no-board", "fuseflow.boards", ["build", "hw.json"], None, "--board")
case("boards-baud-0", "fuseflow.boards", BB + ["--baud", "0"], None, "--baud")
case("boards-baud-text", "fuseflow.boards", BB + ["--baud", "fast"], None, "--baud")
case("boards-baud-huge", "fuseflow.boards", BB + ["--baud", str(10 ** 12)], None, "baud")
case("boards-density-0", "fuseflow.boards", ["build", G, "--board", "icebreaker", "--random-inputs", "0", "-o",
                                             "out"], None, "--random-inputs")
case("boards-density-nan", "fuseflow.boards", ["build", G, "--board", "icebreaker", "--random-inputs", "nan", "-o",
                                               "out"], None, "--random-inputs")
case("boards-density-and-inputs", "fuseflow.boards", BB + ["--random-inputs", "0.5", "--inputs", "d.npz"], None,
     "either --inputs or --random-inputs")
case("boards-data-seed", "fuseflow.boards", ["build", G, "--board", "icebreaker", "--random-inputs", "0.5",
                                             "--data-seed", "-1", "-o", "out"], None, "--data-seed")
case("boards-seed", "fuseflow.boards", BB + ["--seed", "-2"], None, "--seed")
case("boards-out-file", "fuseflow.boards", ["build", "hw.json", "--board", "icebreaker", "-o", "afile"], None,
     "not a directory")
case("boards-keep-work-file", "fuseflow.boards", BB + ["--keep-work", "afile"], None, "--keep-work")
case("boards-no-capacity", "fuseflow.boards", ["build", "nc.json", "--board", "icebreaker", "-o", "out"],
     {"nc.json": graph(no_capacity)},
     "no capacity")
case("boards-synth-freq-0", "fuseflow.boards", ["synth", "hw.json", "--freq", "0"], None, "--freq")
case("boards-synth-freq-nan", "fuseflow.boards", ["synth", "hw.json", "--freq", "nan"], None, "--freq")
case("boards-synth-json-dir", "fuseflow.boards", ["synth", "hw.json", "--json", "adir"], None, "--json")
case("boards-synth-target", "fuseflow.boards", ["synth", "hw.json", "--target", "xc7"], None, "xc7")
case("boards-simulate-divisor", "fuseflow.boards", ["simulate", G, "--inputs", "d.npz", "--divisor", "0"], None,
     "--divisor")
case("boards-run-manifest-missing", "fuseflow.boards", ["run", G, "--inputs", "d.npz", "--manifest", "nope.json",
                                                        "--port", "/dev/null"], None, "nope.json")
case("boards-run-manifest-not-board", "fuseflow.boards", ["run", G, "--inputs", "d.npz", "--manifest", G, "--port",
                                                          "/dev/null"], None, "not a board manifest")
case("boards-run-manifest-binary", "fuseflow.boards", ["run", G, "--inputs", "d.npz", "--manifest", "m.json",
                                                       "--port", "/dev/null"], {"m.json": text(b"\xff\xfe")}, "m.json")
case("boards-run-max-cycles", "fuseflow.boards", ["run", G, "--inputs", "d.npz", "--manifest", G, "--port",
                                                  "/dev/null", "--max-cycles", "0"], None, "--max-cycles")

# graph datasets (fuseflow datasets info): missing, malformed and hostile files
class _RemovesAFile:
    def __reduce__(self):
        return (os.remove, ("afile",))


def planetoid(graph_obj):
    """One file of a tiny Planetoid set ``ind.t.*``; the graph part is ``graph_obj``."""
    import pickle
    x = sp.csr_matrix(np.eye(2, dtype=np.float32))
    lab = np.eye(2)
    parts = dict(x=x[:1], y=lab[:1], tx=x[1:], ty=lab[1:], allx=x[:1], ally=lab[:1], graph=graph_obj)
    return {f"ind.t.{k}": (lambda base, v=v: pickle.dumps(v, protocol=2)) for k, v in parts.items()} | {
        "ind.t.test.index": text("1\n")}


DI = ["datasets", "info"]
case("datasets-unknown", "fuseflow", DI + ["nope"], None, "nope", "neither a bundled dataset")
case("datasets-snap-missing", "fuseflow", DI + ["--snap", "none.txt"], None, "none.txt", "missing")
case("datasets-snap-malformed", "fuseflow", DI + ["--snap", "e.txt"], {"e.txt": text("1 2\n3 x\n")}, "e.txt",
     "malformed edge list")
case("datasets-snap-binary", "fuseflow", DI + ["e.txt"], {"e.txt": text(bytes(range(256)))}, "e.txt")
case("datasets-snap-not-gzip", "fuseflow", DI + ["e.txt.gz"], {"e.txt.gz": text("0 1\n")}, "e.txt.gz", "gzip")
case("datasets-mtx-not-square", "fuseflow", DI + ["--mtx", "B.mtx"], None, "B.mtx", "square")
case("datasets-mtx-garbage", "fuseflow", DI + ["--mtx", "afile"], None, "afile", "Matrix Market")
case("datasets-npz-not-a-graph", "fuseflow", DI + ["d.npz"], None, "d.npz", "adj_indptr")
case("datasets-ogb-no-raw", "fuseflow", DI + ["--ogb", "adir"], None, "adir", "no raw/ directory")
case("datasets-planetoid-missing", "fuseflow", DI + ["--planetoid", ".", "cora"], None, "ind.cora.x", "missing")
case("datasets-planetoid-graph-list", "fuseflow", DI + ["--planetoid", ".", "t"], planetoid([[1], [0]]),
     "ind.t.graph", "dict of neighbour lists")
case("datasets-planetoid-hostile-pickle", "fuseflow", DI + ["--planetoid", ".", "t"], planetoid(_RemovesAFile()),
     "ind.t.graph", "refuses to load")
case("datasets-subgraph-0", "fuseflow", DI + ["cora", "--subgraph", "0"], None, "--subgraph")

# the console entry point
case("console-none", "fuseflow", [], None, "arguments")
case("console-unknown-part", "fuseflow", ["frobnicate"], None, "unknown task or part")
case("console-sim-mode", "fuseflow", ["sim", "run", G, "--inputs", "d.npz", "--mode", "exact"], None, "--mode")
case("console-hw-max-cycles", "fuseflow", ["hw", "sim", G, "--inputs", "d.npz", "--max-cycles", "0"], None,
     "--max-cycles")
case("console-samml-validate", "fuseflow", ["samml", "validate", "nope.json"], None, "nope.json")
case("console-boards-baud", "fuseflow", ["boards"] + BB + ["--baud", "-1"], None, "--baud")
case("console-correlate-render", "fuseflow", ["hw", "correlate", "--render", "min.json", "-o", "r"], None,
     "min.json")

# issue 44: sample inputs (samml info / samml random / --random-inputs), and output paths nothing can be created in
case("samml-info-missing", "fuseflow.samml", ["info", "nope.json"], None, "nope.json")
case("samml-info-binary", "fuseflow.samml", ["info", "b.json"], {"b.json": text(bytes(range(256)))}, "UTF-8")
case("samml-random-no-output", "fuseflow.samml", ["random", G], None, "-o/--output")
case("samml-random-density-0", "fuseflow.samml", ["random", G, "-o", "r.npz", "--density", "0"], None, "--density",
     "(0, 1]")
case("samml-random-density-2", "fuseflow.samml", ["random", G, "-o", "r.npz", "--density", "2"], None, "--density")
case("samml-random-density-nan", "fuseflow.samml", ["random", G, "-o", "r.npz", "--density", "nan"], None,
     "--density")
case("samml-random-seed", "fuseflow.samml", ["random", G, "-o", "r.npz", "--seed", "-1"], None, "--seed")
case("samml-random-out-dir", "fuseflow.samml", ["random", G, "-o", "adir"], None, "is a directory")
case("samml-random-too-large", "fuseflow.samml", ["random", "nc.json", "-o", "r.npz"],
     {"nc.json": graph(no_capacity)}, "tensor B",
     "drawn as a dense 3 x 4 array", "--inputs", env={"FUSEFLOW_MAX_DENSE_ENTRIES": "5"})
case("samml-random-bad-graph", "fuseflow.samml", ["random", "bad.json", "-o", "r.npz"],
     {"bad.json": graph(binary_alu_without_b)}, "is not driven")
case("sim-random-and-inputs", "fuseflow.sim", ["run", G, "--inputs", "d.npz", "--random-inputs", "0.5"], None,
     "either --inputs or --random-inputs")
case("sim-random-0", "fuseflow.sim", ["run", G, "--random-inputs", "0"], None, "--random-inputs")
case("sim-random-text", "fuseflow.sim", ["run", G, "--random-inputs", "half"], None, "--random-inputs")
case("sim-data-seed", "fuseflow.sim", ["run", G, "--random-inputs", "0.5", "--data-seed", "-3"], None, "--data-seed")
case("size-fifos-no-inputs", "fuseflow.sim", ["size-fifos", G, "-o", "s.json"], None, "--inputs",
     "--random-inputs")
case("hw-sim-random-and-inputs", "fuseflow.hw", ["sim", G, "--inputs", "d.npz", "--random-inputs", "0.5"], None,
     "either --inputs or --random-inputs")
case("hw-build-random-2", "fuseflow.hw", ["build", G, "--random-inputs", "2", "-o", "out"], None,
     "--random-inputs")
case("hw-sim-no-data", "fuseflow.hw", ["sim", G], None, "--inputs", "samml info")
case("console-model-huge-npz", "fuseflow", ["compile", "m.py:Net", "--inputs", "big.npz", "-o", "out"],
     {"m.py": text("import torch\nclass Net(torch.nn.Module):\n    def forward(self, big):\n        return big\n"),
      "big.npz": scipy_npz(sp.coo_matrix((np.ones(1), ([0], [1])), shape=(3 * 10 ** 9, 3 * 10 ** 9)))},
     "big.npz", "3000000000 row pointers", "FUSEFLOW_MAX_DENSE_ENTRIES")

#: every command that writes files, told to write where nothing can be created (a pseudo file system: os.access
#: says yes, as it does to root); each is refused while its arguments are parsed
UNWRITABLE = [
    ("samml-dot", "fuseflow.samml", ["dot", G, "-o", "/proc/g.dot"]),
    ("samml-kernels", "fuseflow.samml", ["kernels", "-o", "/proc/k"]),
    ("samml-random", "fuseflow.samml", ["random", G, "-o", "/proc/d.npz"]),
    ("samml-reference", "fuseflow.samml", ["reference", "-o", "/proc/ops.md"]),
    ("sim-json", "fuseflow.sim", ["run", G, "--inputs", "d.npz", "--json", "/proc/r.json"]),
    ("sim-outputs", "fuseflow.sim", ["run", G, "--inputs", "d.npz", "--outputs", "/sys/o.npz"]),
    ("size-fifos", "fuseflow.sim", ["size-fifos", G, "--inputs", "d.npz", "-o", "/proc/s.json"]),
    ("compile-ff", "fuseflow", ["compile", "p.ff", "-o", "/proc/x"]),
    ("compile-ff-build", "fuseflow", ["compile", "p.ff", "--build", "/proc/b"]),
    ("compile-model", "fuseflow", ["compile", "gcn", "-o", "/proc/x"]),
    ("compile-model-build", "fuseflow", ["compile", "gcn", "--build", "/proc/b"]),
    ("hw-build", "fuseflow.hw", ["build", "hw.json", "-o", "/proc/hwout"]),
    ("hw-sim-json", "fuseflow.hw", ["sim", G, "--inputs", "d.npz", "--json", "/proc/r.json"]),
    ("hw-sim-vcd", "fuseflow.hw", ["sim", G, "--inputs", "d.npz", "--vcd", "/proc/w.vcd"]),
    ("correlate", "fuseflow.hw", ["correlate", "--suite", "quick", "-o", "/proc/report"]),
    ("boards-build", "fuseflow.boards", ["build", "hw.json", "--board", "icebreaker", "-o", "/proc/b"]),
    ("boards-synth-json", "fuseflow.boards", ["synth", "hw.json", "--json", "/proc/s.json"]),
    ("demo", "fuseflow", ["demo", "-o", "/proc/demo"]),
]
if os.path.isdir("/proc/self"):
    for cid, entry, argv in UNWRITABLE:
        case(f"unwritable-{cid}", entry, argv, None, "/proc" if "/proc" in " ".join(argv) else "/sys",
             "nothing can be created")

CASES = C


@pytest.mark.parametrize("entry, argv, files, fragments, env", CASES)
def test_bad_input(base, tmp_path, entry, argv, files, fragments, env):
    work = tmp_path / "w"
    shutil.copytree(base, work)
    for name, make in files.items():
        (work / name).write_bytes(make(base))
    before = snapshot(work)
    res = run_forked(entry, argv, work, env=env)
    assert_one_line_error(res, *fragments)
    assert snapshot(work) == before, "the command changed its directory"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_unwritable_outputs_are_refused_in_seconds(base, tmp_path):
    """An -o where nothing can be created is refused while the arguments are parsed, before any work: every
    command that writes answers within 5 seconds (issue 44: hw build used to elaborate for minutes first)."""
    import time
    work = tmp_path / "w"
    shutil.copytree(base, work)
    slow = []
    for cid, entry, argv in UNWRITABLE:
        t0 = time.perf_counter()
        res = run_forked(entry, argv, work)
        took = time.perf_counter() - t0
        assert_one_line_error(res, "nothing can be created")
        if took >= 5:
            slow.append(f"{cid}: {took:.1f} s")
    assert not slow, slow


def test_huge_sparse_model_input_is_refused_in_seconds(base, tmp_path):
    """A 3e9 x 3e9 sparse matrix for a PyTorch model (a small COO file) is refused before torch loads the model,
    let alone runs its forward pass (issue 44: it used to be killed for memory after minutes)."""
    import time
    work = tmp_path / "w"
    shutil.copytree(base, work)
    (work / "m.py").write_text("import torch\nclass Net(torch.nn.Module):\n    def forward(self, a):\n"
                               "        return a\n")
    n = 3 * 10 ** 9
    sp.save_npz(work / "a.npz", sp.coo_matrix((np.ones(2), ([0, 5], [1, 2])), shape=(n, n)))
    t0 = time.perf_counter()
    res = run_forked("fuseflow", ["compile", "m.py:Net", "--inputs", "a.npz", "--check"], work)
    assert_one_line_error(res, "a.npz", "FUSEFLOW_MAX_DENSE_ENTRIES")
    assert time.perf_counter() - t0 < 10


def test_corpus_covers_every_command():
    """At least 150 cases, and every command has some."""
    assert len(CASES) >= 150
    have = {(p.values[0], str(p.values[1][0]) if p.values[1] else "") for p in CASES}
    for entry, cmd in [("fuseflow.samml", "validate"), ("fuseflow.samml", "dot"), ("fuseflow.samml", "kernels"),
                       ("fuseflow.sim", "run"), ("fuseflow.sim", "size-fifos"), ("fuseflow.compiler", "compile"),
                       ("fuseflow.hw", "build"), ("fuseflow.hw", "sim"), ("fuseflow.hw", "correlate"),
                       ("fuseflow.boards", "build")]:
        assert (entry, cmd) in have, (entry, cmd)


@pytest.mark.parametrize("cid", SHARED)
def test_same_message_in_every_command(base, tmp_path, cid):
    """samml validate, sim run, hw build and boards build reject a bad graph with the same line."""
    make = next(m for c, m, *_ in BAD_GRAPHS if c == cid)
    work = tmp_path / "w"
    shutil.copytree(base, work)
    (work / "bad.json").write_bytes(make(base))
    lines = set()
    for entry, argv in [("fuseflow.samml", ["validate", "bad.json"]),
                        ("fuseflow.sim", ["run", "bad.json", "--inputs", "d.npz"]),
                        ("fuseflow.hw", ["build", "bad.json", "--inputs", "d.npz", "-o", "out"]),
                        ("fuseflow.boards", ["build", "bad.json", "--board", "icebreaker", "--inputs", "d.npz",
                                             "-o", "out"])]:
        res = run_forked(entry, argv, work)
        assert_one_line_error(res)
        lines.add(res.stderr.strip())
    assert len(lines) == 1, lines


def test_compiler_refuses_what_validate_refuses(base, tmp_path):
    """An order-7 tensor: the compiler does not write a graph.json that samml validate would reject (the schema
    holds tensors of order <= 6), and refuses the program with one line saying so."""
    work = tmp_path / "w"
    shutil.copytree(base, work)
    (work / "o7.ff").write_text("program p\ntensor A(2,2,2,2,2,2,2) : dense\ntensor B(2,2,2,2,2,2,2) : dense\n"
                                "C(i,j,k,l,m,n,o) = A(i,j,k,l,m,n,o) * B(i,j,k,l,m,n,o)\n")
    res = run_forked("fuseflow.compiler", ["compile", "o7.ff", "-o", "out"], work)
    assert_one_line_error(res, "A has order 7: tensors of order at most 6 are supported")
    assert not (work / "out").exists()


def test_compiler_widens_crd_width_for_large_dimensions(base, tmp_path):
    """Dimension 70000 needs more than 16-bit coordinates: the compiler writes a width (16, 24 or 32 bits,
    fuseflow.samml.widths) that data can run with."""
    from fuseflow.samml import load
    work = tmp_path / "w"
    shutil.copytree(base, work)
    (work / "big.ff").write_text(VALID_FF.replace("B(3, 4)", "B(3, 70000)").replace("c(4)", "c(70000)"))
    res = run_forked("fuseflow.compiler", ["compile", "big.ff", "-o", "out"], work)
    assert res.returncode == 0, res.stderr
    prog = load(work / "out" / "graph.json")
    assert prog.config["crd_width"] == 24          # 69999 < 2**24
    res = run_forked("fuseflow.samml", ["validate", "out/graph.json"], work)
    assert res.returncode == 0, res.stderr


def test_integer_npz_is_accepted_in_both_modes(base, tmp_path):
    """Integer-valued data means the same numbers in float and fixed mode (NumPy is the golden model)."""
    work = tmp_path / "w"
    shutil.copytree(base, work)
    B = np.array([[1, 0, 2, 0], [0, 0, 0, 0], [0, 3, 0, 4]], dtype=np.int64)
    c = np.array([10, 20, 0, 0], dtype=np.int64)
    np.savez(work / "i.npz", B=B, c=c)
    for mode in ("float", "fixed"):
        res = run_forked("fuseflow.sim", ["run", G, "--inputs", "i.npz", "--mode", mode, "--outputs",
                                          f"{mode}.npz", "--check"], work)
        assert res.returncode == 0, res.stderr
        np.testing.assert_array_equal(np.load(work / f"{mode}.npz")["x"], B @ c)
