"""The graph model: builder, registry checks, round trips through graph.json, validation errors."""

import copy
import json

import pytest

from fuseflow.errors import GraphError, UnknownOpError
from fuseflow.samml import Program, dumps, from_dict, load, save
from fuseflow.samml import kernels
from fuseflow.samml.registry import OPS, get_op


def small():
    p = Program("t", expr="x(i) = c(i) * c(i)")
    p.tensor("c", "input", [4], ["compressed"])
    p.tensor("x", "output", [4], ["compressed"])
    k = p.kernel("main")
    r = k.add("root", id="root")
    s = k.add("level_scan", {"ref": r["ref"]}, id="scan", tensor="c", level=0)
    v = k.add("array", {"ref": s["ref"]}, id="vals", tensor="c")
    m = k.add("alu", {"a": v["val"], "b": v["val"]}, id="sq", op="mul")
    k.add("level_write", {"crd": s["crd"]}, id="wx", tensor="x", level=0)
    k.add("value_write", {"val": m["out"]}, id="wv", tensor="x")
    return p


def test_builder_fanout_is_one_stream_with_two_consumers():
    p = small().validate()
    s = p.kernels[0].streams["vals.val"]
    assert [str(d) for d in s.dsts] == ["sq.a", "sq.b"]
    assert s.kind == "val"


@pytest.mark.parametrize("name", sorted(kernels.SUITE))
def test_suite_round_trips_through_json(name, tmp_path):
    p = kernels.build(name)
    path = tmp_path / "graph.json"
    save(p, path)
    q = load(path)
    assert q.to_json() == p.to_json()
    assert json.loads(path.read_text())["samml"] == 1


def test_registry_covers_issue_ops():
    for op in ["root", "level_scan", "intersect", "union", "repeat_sig", "repeat", "array", "alu", "reduce",
               "spacc", "crd_drop", "crd_hold", "level_write", "value_write"]:
        assert op in OPS
    spec = get_op("intersect")
    names = [n for n, _ in spec.input_ports({"arity": 3})]
    assert names == ["crd0", "crd1", "crd2", "ref0", "ref1", "ref2"]
    assert [n for n, _ in get_op("spacc").input_ports({"order": 2})] == ["crd_inner", "crd_outer0", "val"]
    assert [n for n, _ in get_op("spacc").input_ports({"order": 1})] == ["crd_inner", "val"]


def test_unknown_op():
    with pytest.raises(UnknownOpError, match="unknown op 'frobnicate'"):
        Program("p").kernel().add("frobnicate")


def test_driving_an_input_twice():
    p = small()
    k = p.kernels[0]
    with pytest.raises(GraphError, match="driven twice"):
        k.connect(k.streams["root.ref"].src, "sq", "a")


def mutate(fn):
    doc = copy.deepcopy(small().to_json())
    fn(doc)
    return doc


@pytest.mark.parametrize("fn, path, why", [
    (lambda d: d.update(samml=2), "$.samml", "1 was expected"),
    (lambda d: d["kernels"][0]["nodes"][1].update(op="nope"), "$.kernels[0].nodes[1].op", "unknown op 'nope'"),
    (lambda d: d["kernels"][0]["nodes"][1]["params"].update(bogus=1), "$.kernels[0].nodes[1].params",
     "no parameter 'bogus'"),
    (lambda d: d["kernels"][0]["streams"][0].update(to=[]), "$.kernels[0].streams[0].to", "dangling"),
    (lambda d: d["kernels"][0]["streams"][2]["to"].append("sq.a"), "$.kernels[0].streams[2].to[2]",
     "driven twice"),
    (lambda d: d["kernels"][0]["streams"][0].update(**{"from": "ghost.ref"}), "$.kernels[0].streams[0].from",
     "unknown node 'ghost'"),
    (lambda d: d["kernels"][0]["streams"][0].update(kind="val"), "$.kernels[0].streams[0].from",
     "is val but the port takes ref"),
    (lambda d: d["kernels"][0]["nodes"][1]["params"].update(tensor="Q"), "$.kernels[0].nodes[1].params.tensor",
     "undeclared tensor 'Q'"),
    (lambda d: d["kernels"][0]["nodes"][1]["params"].update(format="dense"),
     "$.kernels[0].nodes[1].params.format", "it is compressed"),
    (lambda d: d["tensors"][0].update(shape=[0]), "$.tensors[0].shape[0]", "less than the minimum"),
    (lambda d: d["tensors"][0]["format"].update(mode_order=[1]), "$.tensors[0].format.mode_order",
     "not a permutation"),
    (lambda d: d["kernels"][0]["streams"].pop(2), "$.kernels[0].nodes[3]", "input 'a' of node 'sq'"),
])
def test_invalid_documents_name_path_and_reason(fn, path, why):
    with pytest.raises(GraphError) as info:
        from_dict(mutate(fn))
    assert info.value.what == path
    assert why in info.value.why


def test_cycle_is_rejected():
    doc = mutate(lambda d: d["kernels"][0]["streams"].append(
        {"id": "back", "kind": "val", "from": "sq.out", "to": ["scan.ref"]}))
    # scan.ref is driven by root: first the kind check fails; make a pure cycle instead
    doc = small().to_json()
    doc["kernels"][0]["nodes"].append({"id": "a2", "op": "alu", "params": {"op": "neg"}})
    doc["kernels"][0]["nodes"].append({"id": "a3", "op": "alu", "params": {"op": "neg"}})
    doc["kernels"][0]["streams"] += [{"id": "x1", "kind": "val", "from": "a2.out", "to": ["a3.a"]},
                                     {"id": "x2", "kind": "val", "from": "a3.out", "to": ["a2.a"]}]
    with pytest.raises(GraphError, match="cycle"):
        from_dict(doc)


def test_dumps_is_valid_json_with_expr():
    text = dumps(small())
    assert json.loads(text)["expr"] == "x(i) = c(i) * c(i)"


def test_intersect_inputs_sharing_a_stream_must_be_ring_neighbours():
    # y = c * d * (b1 + ... + b4): the union's crd drives intersect inputs 2-5, next to each other on the ring;
    # swapping d's stream with input 3 splits them into {1, 2} and {4, 5}, which could drift apart without bound
    from fuseflow.compiler import compile_text
    decl = "".join(f"tensor {x}(12) : sparse\n" for x in ("c", "d", "b1", "b2", "b3", "b4"))
    doc = compile_text(decl + "y(i) = c(i) * d(i) * (b1(i) + b2(i) + b3(i) + b4(i))\n",
                       passes={"profile": False}).program.to_json()
    from_dict(copy.deepcopy(doc))
    (kernel,) = doc["kernels"]
    (node,) = [n for n in kernel["nodes"] if n["op"] == "intersect"]
    assert node["params"]["arity"] == 6
    by_from = {s["from"]: s for s in kernel["streams"]}
    d_crd, union_crd = by_from["scan_d_i.crd"], by_from["union.crd"]
    assert sorted(union_crd["to"]) == [f"{node['id']}.crd{i}" for i in range(2, 6)]
    d_crd["to"] = [t.replace(".crd1", ".crd3") for t in d_crd["to"]]
    union_crd["to"] = [t.replace(".crd3", ".crd1") for t in union_crd["to"]]
    with pytest.raises(GraphError) as info:
        from_dict(doc)
    assert info.value.what.endswith(f".nodes[{kernel['nodes'].index(node)}]")
    assert "crd1, crd2, crd4, crd5 share stream 'union.crd'" in info.value.why
    assert "not next to each other on the ring" in info.value.why
