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


# --- tensor memories of latency 2: the generic memory and the ECP5 DP16KD blocks ------------------------

def _run_ports(impl, depth, width, init, script):
    """Drive a TensorMemory (one write port, two read ports of latency 2) through ``script`` (per cycle:
    (raddr0, raddr1, waddr, wdata, wen)); returns the read data of both ports in every cycle."""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator

    from fuseflow.hw.memory import TensorMemory
    mem = TensorMemory(depth, width, init, block=True, name="t", impl=impl)
    r0, r1, w = mem.read_port(), mem.read_port(), mem.write_port()
    m = Module()
    m.submodules.mem = mem
    sim = Simulator(m)
    sim.add_clock(1e-8)
    seen = []

    async def bench(ctx):
        for a0, a1, wa, wd, we in script:
            ctx.set(r0.addr, a0)
            ctx.set(r1.addr, a1)
            ctx.set(w.addr, wa)
            ctx.set(w.data, wd)
            ctx.set(w.en, we)
            await ctx.delay(1e-9)
            seen.append((ctx.get(r0.data), ctx.get(r1.data)))
            await ctx.tick()
    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("depth,width", [(64, 32), (1024, 16), (2500, 40)])
def test_dp16kd_blocks_read_and_write_as_the_generic_memory(depth, width):
    """The DP16KD blocks (their behaviour from the instance's own parameters and pins: INITVAL packing, address
    and data pins, byte enables, OUTREG) and the row choice of a memory deeper than one block show the same
    entry as the generic memory in every cycle, and that entry is the one addressed two cycles earlier (golden:
    a Python list updated by the same writes). No read addresses the entry written in the same cycle."""
    import random
    rng = random.Random(depth + width)
    init = [rng.getrandbits(width) for _ in range(depth * 3 // 4)]
    script = []
    for _ in range(300):
        a0, a1, wa = (rng.randrange(depth) for _ in range(3))
        we = rng.random() < 0.4 and wa not in (a0, a1)
        script.append((a0, a1, wa, rng.getrandbits(width), int(we)))
    golden, model = list(init) + [0] * (depth - len(init)), []
    for a0, a1, wa, wd, we in script:          # what each cycle addresses, with the writes of earlier cycles
        model.append((golden[a0], golden[a1]))
        if we:
            golden[wa] = wd
    generic = _run_ports("generic", depth, width, init, script)
    blocks = _run_ports("dp16kd-model", depth, width, init, script)
    assert generic[2:] == model[:-2]
    assert blocks[2:] == generic[2:]


def test_dp16kd_instances_of_a_block_memory():
    """On ECP5 a block memory elaborates to DP16KD instances (1024 x 18 each: 2500 x 40 takes 3 rows of 3)
    with the output register on the read side, the write on the other side with both byte enables."""
    from amaranth.hdl import Module

    from fuseflow.boards.synth import SynthTarget
    from fuseflow.hw.memory import TensorMemory
    mem = TensorMemory(2500, 40, [5, 6], block=True, name="t")
    mem.read_port()
    w = mem.write_port()
    m = Module()
    m.submodules.mem = mem
    text = rtlil.convert(m, ports=[w.addr, w.data, w.en], name="top", platform=SynthTarget("ecp5"))
    cells = re.findall(r"cell \\DP16KD ", text)
    assert len(cells) == 9
    assert len(re.findall(r'parameter \\REGMODE_A "OUTREG"', text)) == 9
    assert "DP16KD" not in rtlil.convert(m, ports=[w.addr, w.data, w.en], name="top")


def test_kernel_with_dp16kd_memories_matches_simulator():
    """A kernel whose block memories are DP16KD blocks (their behaviour from the instances' parameters and
    pins), baked with the inputs (INITVAL) and run from them: the simulator's results and cycles."""
    program, inputs = _spmv(rows=24)
    b = build(program, inputs, probes=False, bake=True)
    assert sum(m.storage == "block" for m in b.plan.memories) >= 2
    b.top.block_ram = "dp16kd-model"
    res = run_amaranth(b)
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles


def test_kernel_writing_and_reading_one_block_memory_is_refused():
    """A kernel with a writer and a reader of one block memory is an error (read during write is undefined
    in a DP16KD); a reader alone is not."""
    from fuseflow.errors import HardwareError
    from fuseflow.hw.top import check_block_reads

    class Op:                                   # a writer and a reader of B.vals in one kernel
        def __init__(self, writes, reads):
            from fuseflow.hw.ops._common import MemPorts
            self.memories = {"vals": MemPorts(32, True, reads=reads, sync_reads=set(reads), writes=writes)}
    program, inputs = _spmv(rows=24)
    b = build(program, inputs, probes=False)
    b.top._MustUse__silence = True              # built for its plan only
    k = program.kernels[0]
    ids = [nid for nid, n in k.nodes.items()][:2]
    for nid in ids:
        k.nodes[nid].params["tensor"] = "B"
    ops = [{ids[0]: Op(["v"], []), ids[1]: Op([], ["v"])}] + [{} for _ in program.kernels[1:]]
    with pytest.raises(HardwareError, match="reads it"):
        check_block_reads(program, b.plan, ops)
    check_block_reads(program, b.plan, [{ids[1]: Op([], ["v"])}] + ops[1:])
