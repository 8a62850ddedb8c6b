"""Block RAM: which tensor memories go to block RAM (one rule, fuseflow.hw.memory), that the kernel top
marks them for Yosys and reads them only through synchronous ports, and (slow) that Yosys maps them to
ECP5 DP16KD; a kernel whose memories are in block RAM still matches the simulator cycle for cycle."""

import re

import pytest
from amaranth.back import rtlil

from fuseflow.hw.elaborate import build, run_amaranth
from fuseflow.hw.memory import BLOCK_RAM_MIN_BITS, memory_storage
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels


def _spmv(rows=40, density=0.4, seed=3):
    program = kernels.build("spmv_csr", rows)
    inputs = kernels.random_inputs(program, density=density, seed=seed)
    return program, inputs


def test_storage_rule():
    assert memory_storage("crd", BLOCK_RAM_MIN_BITS) == "block"
    assert memory_storage("vals", BLOCK_RAM_MIN_BITS - 1) == "lut"
    # level_scan reads seg and first combinationally (at its next head, written in the cycle before at the latest)
    assert memory_storage("seg", 100 * BLOCK_RAM_MIN_BITS) == "lut"
    assert memory_storage("first", 100 * BLOCK_RAM_MIN_BITS) == "lut"


def test_plan_marks_large_synchronous_arrays_block_and_the_top_tags_them():
    program, inputs = _spmv()
    b = build(program, inputs, probes=False)
    specs = {m.name: m for m in b.plan.memories}
    block = {n for n, m in specs.items() if m.storage == "block"}
    # golden from sizes: crd and vals of B hold ~0.4 * 40 * 40 entries (>= 640 of 16 or 32 bits)
    expect = {n for n, m in specs.items()
              if m.array not in ("seg", "first") and m.depth * m.width >= BLOCK_RAM_MIN_BITS}
    assert block == expect and {"B.1.crd", "B.vals"} <= block
    assert all(specs[n].storage == "lut" for n in specs if specs[n].array in ("seg", "first"))
    man = b.manifest()
    assert {m["name"] for m in man["host"]["memories"] if m["storage"] == "block"} == block
    text = rtlil.convert(b.top, name="top")
    assert len(re.findall(r'attribute \\ram_style "block"', text)) == len(block)


def test_kernel_with_block_ram_memories_matches_simulator():
    program, inputs = _spmv(rows=24)
    b = build(program, inputs, probes=False)
    assert any(m.storage == "block" for m in b.plan.memories)
    res = run_amaranth(b)
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles


@pytest.mark.slow
def test_yosys_maps_block_memories_to_dp16kd():
    import json
    import os
    import subprocess
    import tempfile

    from fuseflow.boards.synth import TARGETS, RegisteredIO, tool_path
    program, inputs = _spmv(rows=32, density=0.5)
    b = build(program, inputs, probes=False)
    block = [m for m in b.plan.memories if m.storage == "block"]
    text = rtlil.convert(RegisteredIO(b.top), name="top")
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "top.il"), "w") as f:
            f.write(text)
        with open(os.path.join(d, "s.ys"), "w") as f:
            f.write(f"read_rtlil top.il\n{TARGETS['ecp5-85f']['synth']} -top top\n"
                    f"tee -q -o stat.json stat -json\n")
        subprocess.run([tool_path("yosys"), "-q", "s.ys"], cwd=d, check=True, capture_output=True)
        with open(os.path.join(d, "stat.json")) as f:
            cells = json.load(f)["design"]["num_cells_by_type"]
    # golden by hand for this plan: B.1.crd 1024 x 16 one DP16KD (1024 x 18), B.vals 1024 x 32 two, c.vals and
    # x.vals 32 x 32 one each (512 x 36); none copied for the host read port (it shares the op's port). The
    # capacity module (fuseflow.boards.capacity) counts the same
    from fuseflow.boards.capacity import memory_blocks
    assert {m.name: (m.depth, m.width) for m in block} == {"B.1.crd": (1024, 16), "B.vals": (1024, 32),
                                                            "c.vals": (32, 32), "x.vals": (32, 32)}
    assert cells.get("DP16KD", 0) == 5 == sum(memory_blocks(m.depth, m.width, "ecp5") for m in block)
