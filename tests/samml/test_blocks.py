"""The block contract in graph.json (issue #15): tensor and stream blocks, their rules, block_matmul's timing."""

import json

import pytest

from fuseflow.errors import GraphError
from fuseflow.samml import Program, dumps, from_dict
from fuseflow.samml.blocks import apply_blocks, block_shape
from fuseflow.samml.registry import block_matmul_latency, op_interval, op_latency


def relu_program(block=(2, 2), out_block=(2, 2)):
    """X = relu(A) for a 4 x 6 bcsr:2 tensor A (levels over 2 x 3 block coordinates)."""
    p = Program("brelu")
    p.tensor("A", "input", [4, 6], ["dense", "compressed"], block=block)
    p.tensor("X", "output", [4, 6], ["dense", "compressed"], block=out_block)
    k = p.kernel("main")
    root = k.add("root")
    i = k.add("level_scan", {"ref": root["ref"]}, format="dense", tensor="A", level=0)
    j = k.add("level_scan", {"ref": i["ref"]}, tensor="A", level=1)
    v = k.add("array", {"ref": j["ref"]}, tensor="A")
    r = k.add("alu", {"a": v["val"]}, op="relu")
    k.add("level_write", {"crd": i["crd"]}, format="dense", tensor="X", level=0)
    k.add("level_write", {"crd": j["crd"]}, tensor="X", level=1)
    k.add("value_write", {"val": r["out"]}, tensor="X")
    return p


def test_blocked_tensor_levels_count_blocks():
    p = relu_program()
    assert [p.tensors["A"].level_dim(lv) for lv in (0, 1)] == [2, 3]


def test_apply_blocks_marks_the_value_streams():
    p = relu_program()
    apply_blocks(p)
    k = p.kernels[0]
    blocked = {sid: block_shape(s) for sid, s in k.streams.items() if block_shape(s)}
    assert blocked == {"array0.val": (2, 2), "alu0.out": (2, 2)}
    doc = json.loads(dumps(p))                    # valid, and the blocks survive a round trip
    assert from_dict(doc).kernels[0].streams["alu0.out"].block == [2, 2]


def test_unblocked_graph_has_no_block_fields():
    p = relu_program(block=None, out_block=None)
    apply_blocks(p)
    assert "block" not in dumps(p)


def test_missing_stream_block_is_rejected():
    with pytest.raises(GraphError, match="producer gives \\[2, 2\\]"):
        relu_program().validate()


def test_block_on_a_crd_stream_is_rejected():
    p = relu_program()
    apply_blocks(p)
    p.kernels[0].streams["level_scan0.crd"].block = [2, 2]
    with pytest.raises(GraphError, match="only val streams carry blocks"):
        p.validate()


@pytest.mark.parametrize("shape, block, why", [
    ([5, 6], [2, 2], "not divisible by the block size 2"),
    ([4, 6], [2], "has a block of 1 dimensions"),
    ([4, 4], [2, 4], "non-square block"),
])
def test_bad_tensor_blocks(shape, block, why):
    p = Program("bad")
    p.tensor("A", "input", shape, ["dense", "compressed"], block=block)
    p.kernel("main").add("root")
    with pytest.raises(GraphError, match=why):
        p.validate()


def test_value_write_of_another_block_size_is_rejected():
    p = relu_program(out_block=(3, 3))
    p.tensors["X"].shape = [6, 6]
    p.tensors["A"].shape = [6, 6]
    p.tensors["A"].block = [2, 2]
    with pytest.raises(GraphError, match="writes \\[2, 2\\] into tensor 'X' of block \\[3, 3\\]"):
        apply_blocks(p)


def test_block_matmul_interval_and_latency():
    for b in (1, 2, 4, 8, 16):
        assert op_interval("block_matmul", {"block": b}) == b
        assert op_latency("block_matmul", {"block": b}) == block_matmul_latency(b)
    assert [block_matmul_latency(b) for b in (1, 2, 4, 8, 16)] == [6, 8, 11, 16, 25]
    assert block_matmul_latency(1) == op_latency("alu", {"op": "mul"})     # B = 1 is the scalar multiplier
    assert op_interval("alu", {"op": "mul"}) == 1


def test_docs_state_the_block_matmul_latencies():
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "samml.md").read_text()
    section = text.split("\n## block_matmul\n", 1)[1].split("\n## ", 1)[0]
    lat, sizes = re.search(r"L = ([\d, ]+) for B = ([\d, ]+)", section).groups()
    assert [block_matmul_latency(int(b)) for b in sizes.split(",")] == [int(x) for x in lat.split(",")]
