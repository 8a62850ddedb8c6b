"""registry.op_latency: the one definition of op latencies, and the docs' table that states it."""

import os
import re

import pytest

from fuseflow.samml.registry import BINARY_ALU_OPS, MEMORY_READ_LATENCY, OPS, UNARY_ALU_OPS, op_latency
from fuseflow.sim.engine import run_op
from fuseflow.tensors.fixed import FixedFormat

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "samml.md")


def _doc_table():
    """{op: latency} from the alu section's latency table (default fixed32.16)."""
    text = open(DOC).read()
    sec = text[text.index("## alu"):text.index("## reduce")]
    out = {}
    for ops, lat in re.findall(r"^\| (`[^|]*`) \| (\d+|[^|]*= \d+) \|", sec, flags=re.M):
        for op in re.findall(r"[a-z]+", ops.replace("`", " ")):
            out[op] = int(lat.split("=")[-1])
    return out


def test_docs_table_states_the_registry():
    table = _doc_table()
    pipelined = {op for op in BINARY_ALU_OPS + UNARY_ALU_OPS if op_latency("alu", {"op": op}) > 1}
    assert set(table) == pipelined
    for op, lat in table.items():
        assert op_latency("alu", {"op": op}) == lat, op


def test_every_other_op_has_latency_one():
    for name in OPS:
        if name not in ("alu", "block_matmul", "array", "level_scan"):   # block_matmul: tests/samml/test_blocks.py
            assert op_latency(name, {}) == 1


def test_memory_readers_register_their_read():
    assert MEMORY_READ_LATENCY == 2
    assert op_latency("array", {"tensor": "B"}) == MEMORY_READ_LATENCY
    assert op_latency("level_scan", {"format": "compressed"}) == MEMORY_READ_LATENCY
    assert op_latency("level_scan", {}) == MEMORY_READ_LATENCY          # the format's default is compressed
    assert op_latency("level_scan", {"format": "dense", "dim": 4}) == 1   # no memory


@pytest.mark.parametrize("fx", [FixedFormat(32, 16), FixedFormat(16, 8), FixedFormat(24, 12)], ids=str)
def test_width_dependent_latencies(fx):
    w, f = fx.width, fx.frac
    assert op_latency("alu", {"op": "div"}, fx) == w + 2
    assert op_latency("alu", {"op": "sqrt"}, fx) == (w + f) // 2 + 3


@pytest.mark.parametrize("op", ["add", "mul", "exp", "div"])
def test_simulator_delays_by_the_latency(op):
    """Without stalls n tokens take n + L - 1 cycles (one firing per cycle, the last result L - 1 later)."""
    one = 1 << 16
    a = [one, 2 * one, "S0", 3 * one, -one, "S1", "D"]
    inp = {"a": a} if op in UNARY_ALU_OPS else {"a": a, "b": [one, one, "S0", 2 * one, one, "S1", "D"]}
    _, info = run_op("alu", {"op": op}, inp, mode="fixed", stats=True)
    assert info["cycles"] == len(a) + op_latency("alu", {"op": op}) - 1
    assert info["busy"] == len(a)
