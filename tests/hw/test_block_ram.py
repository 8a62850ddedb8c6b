"""Block RAM: which tensor memories go to block RAM (one rule, fuseflow.hw.memory), that the kernel top
marks them for Yosys and reads them only through synchronous ports, and (slow) that Yosys maps them to
ECP5 DP16KD; a kernel whose memories are in block RAM still matches the simulator cycle for cycle."""

import re

import pytest
from amaranth.back import rtlil

from fuseflow.hw.elaborate import build, run_amaranth
from fuseflow.hw.memory import BLOCK_RAM_MIN_BITS, BOUNDS_BLOCK_MIN_BITS, memory_storage
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels


def _spmv(rows=40, density=0.4, seed=3):
    program = kernels.build("spmv_csr", rows)
    inputs = kernels.random_inputs(program, density=density, seed=seed)
    return program, inputs


def test_storage_rule():
    assert memory_storage("crd", BLOCK_RAM_MIN_BITS) == "block"
    assert memory_storage("vals", BLOCK_RAM_MIN_BITS - 1) == "lut"
    # seg and first in block RAM cost a cycle after each stop a level_scan pops (bounds_latency 2): only when large
    assert BOUNDS_BLOCK_MIN_BITS > BLOCK_RAM_MIN_BITS
    for array in ("seg", "first"):
        assert memory_storage(array, BOUNDS_BLOCK_MIN_BITS - 1) == "lut"
        assert memory_storage(array, BOUNDS_BLOCK_MIN_BITS) == "block"


def test_plan_marks_large_synchronous_arrays_block_and_the_top_tags_them():
    program, inputs = _spmv()
    b = build(program, inputs, probes=False)
    specs = {m.name: m for m in b.plan.memories}
    block = {n for n, m in specs.items() if m.storage == "block"}
    # golden from sizes: crd and vals of B hold ~0.4 * 40 * 40 entries (>= 640 of 16 or 32 bits)
    expect = {n for n, m in specs.items()
              if m.depth * m.width >= (BOUNDS_BLOCK_MIN_BITS if m.array in ("seg", "first") else BLOCK_RAM_MIN_BITS)}
    assert block == expect and {"B.1.crd", "B.vals"} <= block
    assert all(specs[n].storage == "lut" for n in specs if specs[n].array in ("seg", "first"))   # 41 x 16 bits
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
    """Yosys maps the generic block memories (``ram_style = "block"``: what the iCE40 and any other target
    gets) to DP16KD; elaborated for the ECP5 the top has exactly the DP16KD instances
    :func:`fuseflow.boards.capacity.memory_blocks` counts (no block of Yosys' own beside them)."""
    import json
    import os
    import subprocess
    import tempfile

    from fuseflow.boards.capacity import memory_blocks
    from fuseflow.boards.synth import TARGETS, RegisteredIO, SynthTarget, tool_path
    program, inputs = _spmv(rows=32, density=0.5)

    def dp16kd(platform):
        b = build(program, inputs, probes=False)
        text = rtlil.convert(RegisteredIO(b.top), name="top", platform=platform)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "top.il"), "w") as f:
                f.write(text)
            with open(os.path.join(d, "s.ys"), "w") as f:
                f.write(f"read_rtlil top.il\n{TARGETS['ecp5-85f']['synth']} -top top\n"
                        f"tee -q -o stat.json stat -json\n")
            subprocess.run([tool_path("yosys"), "-q", "s.ys"], cwd=d, check=True, capture_output=True)
            with open(os.path.join(d, "stat.json")) as f:
                cells = json.load(f)["design"]["num_cells_by_type"]
        return b, cells.get("DP16KD", 0)
    b, generic = dp16kd(None)
    block = [m for m in b.plan.memories if m.storage == "block"]
    # golden by hand for this plan: B.1.crd 1024 x 16 one DP16KD (1024 x 18), B.vals 1024 x 32 two, c.vals and
    # x.vals 32 x 32 one each in Yosys' mapping (512 x 36), two each as instances (1024 x 18 side by side);
    # none copied for the host read port (it shares the op's port)
    assert {m.name: (m.depth, m.width) for m in block} == {"B.1.crd": (1024, 16), "B.vals": (1024, 32),
                                                            "c.vals": (32, 32), "x.vals": (32, 32)}
    assert generic == 5
    _, ecp5 = dp16kd(SynthTarget("ecp5"))
    assert ecp5 == 7 == sum(memory_blocks(m.depth, m.width, "ecp5") for m in block)


# --- tensor memories of latency 2: the generic memory and the ECP5 DP16KD blocks ------------------------

def _drive(mem, reads, write, script, enables=None, also=()):
    """Simulate ``mem`` (a TensorMemory) with its read ports ``reads`` and write port ``write`` through
    ``script`` (per cycle: (read addresses, one per port), waddr, wdata, wen; ``enables``: per cycle the read
    ports' enables, for ports of latency 1 with one); returns every read port's data in every cycle, sampled
    before the clock edge (and after them the signals ``also``)."""
    from amaranth.hdl import Module
    from amaranth.sim import Simulator

    m = Module()
    m.submodules.mem = mem
    sim = Simulator(m)
    sim.add_clock(1e-8)
    seen = []

    async def bench(ctx):
        for c, (addrs, wa, wd, we) in enumerate(script):
            for port, a in zip(reads, addrs):
                ctx.set(port.addr, a)
            for port, e in zip(reads, enables[c] if enables else ()):
                ctx.set(port.en, e)
            ctx.set(write.addr, wa)
            ctx.set(write.data, wd)
            ctx.set(write.en, we)
            await ctx.delay(1e-9)
            seen.append(tuple(ctx.get(port.data) for port in reads) + tuple(ctx.get(x) for x in also))
            await ctx.tick()
    sim.add_testbench(bench)
    sim.run()
    return seen


def _run_ports(impl, depth, width, init, script):
    """Drive a TensorMemory (one write port, two read ports of latency 2) through ``script`` (per cycle:
    (raddr0, raddr1, waddr, wdata, wen)); returns the read data of both ports in every cycle."""
    from fuseflow.hw.memory import TensorMemory
    mem = TensorMemory(depth, width, init, block=True, name="t", impl=impl)
    r0, r1, w = mem.read_port(), mem.read_port(), mem.write_port()
    return _drive(mem, (r0, r1), w, [((a0, a1), wa, wd, we) for a0, a1, wa, wd, we in script])


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


@pytest.mark.parametrize("pack", [1, 4])
def test_offset_read_port_reads_the_next_entry_through_writes(pack):
    """A LUT memory's read port of offset 1 (level_scan's seg[r + 1], addressed with r) shows the entry after
    the one addressed, in the same cycle, through writes of every entry (the shifted copy is written with the
    memory; golden: a Python list updated by the same writes). ``pack`` 4: rows of 4 entries (a tiled build's
    memory that the DMA fills 4 entries a beat), the offset an adder before the read."""
    import random

    from fuseflow.hw.memory import TensorMemory
    depth, width = 21, 12
    rng = random.Random(11)
    init = [rng.getrandbits(width) for _ in range(depth)]
    mem = TensorMemory(depth, width, init, name="seg", pack=pack)
    plain, nxt, w = mem.read_port(0), mem.read_port(0, offset=1), mem.write_port()
    golden = list(init)
    script = [(rng.randrange(depth - 1), rng.randrange(depth), rng.getrandbits(width), rng.random() < 0.5)
              for _ in range(200)]
    seen = _drive(mem, (plain, nxt), w, [((a, a), wa, wd, we) for a, wa, wd, we in script])
    for (a, wa, wd, we), got in zip(script, seen):
        assert got == (golden[a], golden[a + 1])
        if we:
            golden[wa] = wd
    from fuseflow.errors import HardwareError
    block = TensorMemory(64, 32, block=True, name="v")
    block._MustUse__silence = True
    with pytest.raises(HardwareError, match="combinational"):      # block RAM reads through a register
        block.read_port(0)
    with pytest.raises(HardwareError, match="offset"):
        block.read_port(1, offset=-1)


@pytest.mark.parametrize("impl,depth,block,pack", [("generic", 40, False, 1), ("generic", 40, True, 1),
                                                   ("dp16kd-model", 40, True, 1), ("dp16kd-model", 2100, True, 1),
                                                   ("generic", 40, False, 8), ("generic", 42, True, 2)])
def test_held_read_ports_in_block_ram(impl, depth, block, pack):
    """Reads of latency 1 with an enable (level_scan's seg and first), plain (also giving the entry + 1, level_scan's
    seg[r] + 1) and of offset 1, from a LUT memory (a combinational read and a register), the generic block memory
    and a block memory as DP16KD blocks (without their output register, the clock enable on the read side; 2100
    entries: three rows of blocks; the entry + 1 from blocks of its own): in every cycle each port shows the entry
    (+ offset) addressed at the last edge with its enable set, and the plain port that entry + 1 modulo 2^width,
    through writes of every entry, the largest word included (golden: a Python list updated by the same writes).
    No read addresses an entry written in the same cycle."""
    import random

    from fuseflow.hw.memory import TensorMemory
    width = 20
    rng = random.Random(depth)
    top = (1 << width) - 1
    init = [rng.getrandbits(width) for _ in range(depth)]
    init[3] = top                   # its + 1 wraps to 0
    mem = TensorMemory(depth, width, init, block=block, name="seg", impl=impl, pack=pack)
    plain = mem.read_port(1, enable=True, plus_one=True)
    nxt, w = mem.read_port(1, offset=1, enable=True), mem.write_port()
    script, enables = [], []
    for _ in range(300):
        a0, a1, wa = rng.randrange(depth), rng.randrange(depth - 1), rng.randrange(depth)
        we = rng.random() < 0.4 and wa not in (a0, a1 + 1)
        script.append(((a0, a1), wa, top if rng.random() < 0.1 else rng.getrandbits(width), int(we)))
        enables.append((rng.random() < 0.6, rng.random() < 0.6))
    script[0] = ((3, 0), 0, 0, 0)
    enables[0] = (1, 1)
    seen = _drive(mem, (plain, nxt), w, script, enables, also=(plain.data1,))
    golden = list(init)
    latched = [None, None]          # the data each port latched at its last enabled edge (the old entry on a write)
    loads = wraps = 0
    for ((a0, a1), wa, wd, we), (e0, e1), got in zip(script, enables, seen):
        for i in range(2):
            if latched[i] is not None:
                assert got[i] == latched[i]
        if latched[0] is not None:
            assert got[2] == (latched[0] + 1) & top
            wraps += latched[0] == top
        if e0:
            latched[0] = golden[a0]
        if e1:
            latched[1] = golden[a1 + 1]
        loads += e0 + e1
        if we:
            golden[wa] = wd
    assert 200 < loads < 500         # the enables were both set and clear
    assert wraps                     # the largest word was read (its + 1 is 0)


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
    pins), baked with the inputs (INITVAL) and run from them: the simulator's results and cycles. x.vals is
    written by the kernel's writer and read back by the host through its own blocks."""
    program, inputs = _spmv(rows=40)
    b = build(program, inputs, probes=False, bake=True)
    assert {m.name for m in b.plan.memories if m.storage == "block"} >= {"B.1.crd", "B.vals", "x.vals"}
    b.top.block_ram = "dp16kd-model"
    res = run_amaranth(b)
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles


@pytest.mark.parametrize("array", ["vals", "seg"])
def test_kernel_writing_and_reading_one_memory_is_refused(array):
    """A kernel with a writer and a reader of one memory, block (B.vals) or LUT RAM (B.1.seg), is an error
    (writes land a cycle after the firing; read during write is undefined in a DP16KD); a reader alone is not."""
    from fuseflow.errors import HardwareError
    from fuseflow.hw.top import check_kernel_reads

    class Op:                                   # a writer or a reader of B's array in one kernel
        def __init__(self, writes, reads):
            from fuseflow.hw.ops._common import MemPorts
            self.memories = {array: MemPorts(32, True, reads=reads, sync_reads=set(reads), writes=writes)}
    program, inputs = _spmv(rows=24)
    b = build(program, inputs, probes=False)
    b.top._MustUse__silence = True              # built for its plan only
    assert b.plan.memory("B", None if array == "vals" else 1, array).storage == ("block" if array == "vals" else "lut")
    k = program.kernels[0]
    ids = [nid for nid, n in k.nodes.items()][:2]
    for nid in ids:
        k.nodes[nid].params.update(tensor="B", level=1)
    ops = [{ids[0]: Op(["v"], []), ids[1]: Op([], ["v"])}] + [{} for _ in program.kernels[1:]]
    with pytest.raises(HardwareError, match="reads it"):
        check_kernel_reads(program, b.plan, ops)
    check_kernel_reads(program, b.plan, [{ids[1]: Op([], ["v"])}] + ops[1:])


@pytest.mark.slow
def test_dp16kd_instance_matches_yosys_mapping(tmp_path):
    """The DP16KD instance's pins and INITVAL are Yosys' own: a 1024 x 18 memory with one write and one
    synchronous read port, which Yosys maps to one DP16KD (write on one side, read on the other; it registers
    the write and forwards it to the read, to give the old entry on a collision), has the same INITVAL_00..3F
    and data widths, the read address on the read side's ADx13..4, the write address and data on the write side
    (through Yosys' write registers), the write's byte enables ADx1..0 on when it writes, and DOx bit i reaching
    the read data's bit i, as the instance :func:`fuseflow.hw.block_ram.dp16kd` builds."""
    import json
    import random
    import subprocess

    from amaranth.hdl import Module, Signal
    from amaranth.lib.memory import Memory

    from fuseflow.boards.synth import tool_path
    from fuseflow.hw.block_ram import dp16kd
    words = [random.Random(7).getrandbits(18) for _ in range(1024)]

    def mapped(m, ports, name):
        """Per side ("R" read, "W" write) the pins' nets named by the top's ports (through flip-flops), the
        port bits whose cone holds each DO pin, the parameters."""
        (tmp_path / f"{name}.il").write_text(rtlil.convert(m, ports={k: (v, None) for k, v in ports.items()},
                                                            name="top"))
        (tmp_path / f"{name}.ys").write_text(f"read_rtlil {name}.il\nsynth_ecp5 -top top\nwrite_json {name}.json\n")
        subprocess.run([tool_path("yosys"), "-q", f"{name}.ys"], cwd=tmp_path, check=True, capture_output=True)
        mod = json.loads((tmp_path / f"{name}.json").read_text())["modules"]["top"]
        names = {b: f"{p}[{i}]" for p, d in mod["ports"].items() for i, b in enumerate(d["bits"])}
        ffs = {c["connections"]["Q"][0]: c["connections"]["DI"][0] for c in mod["cells"].values()
               if c["type"] == "TRELLIS_FF"}
        drivers = {}                               # net -> input nets of the cell driving it (LUTs, muxes)
        for c in mod["cells"].values():
            if c["type"] in ("DP16KD", "TRELLIS_FF"):
                continue
            ins = [b for p, v in c["connections"].items() if c["port_directions"][p] == "input" for b in v]
            for p, v in c["connections"].items():
                if c["port_directions"][p] == "output":
                    drivers.update({b: ins for b in v})
        (cell,) = [c for c in mod["cells"].values() if c["type"] == "DP16KD"]
        net = lambda b: names.get(ffs.get(b, b), str(b))       # noqa: E731
        con = {p: net(v[0]) for p, v in cell["connections"].items()}
        rside = "A" if con["ADA4"] == "ra[0]" else "B"
        wside = "B" if rside == "A" else "A"
        pins = {f"ADR{i}": con[f"AD{rside}{i}"] for i in range(4, 14)}
        pins.update({f"ADW{i}": con[f"AD{wside}{i}"] for i in range(14)})
        pins.update({f"DIW{i}": con[f"DI{wside}{i}"] for i in range(18)})
        pins["WEW"] = con[f"WE{wside}"]
        do = {cell["connections"][f"DO{rside}{i}"][0]: i for i in range(18)}
        reach = {}
        for i, b in enumerate(mod["ports"]["out"]["bits"]):
            seen, todo = set(), [b]
            while todo:
                x = todo.pop()
                if x in seen or not isinstance(x, int):
                    continue
                seen.add(x)
                todo += drivers.get(x, [])
            reach[i] = sorted(do[x] for x in seen if x in do)
        params = {k: v for k, v in cell["parameters"].items() if k.startswith(("INITVAL", "DATA_WIDTH"))}
        return pins, reach, params

    def ports():
        return dict(ra=Signal(10), wa=Signal(10), wd=Signal(18), we=Signal(), out=Signal(18))
    p = ports()
    m = Module()
    m.submodules.mem = mem = Memory(shape=18, depth=1024, init=words)
    rp, wp = mem.read_port(), mem.write_port()
    m.d.comb += [rp.addr.eq(p["ra"]), p["out"].eq(rp.data), wp.addr.eq(p["wa"]), wp.data.eq(p["wd"]),
                 wp.en.eq(p["we"])]
    theirs = mapped(m, p, "yosys")
    p = ports()
    m = Module()
    dp16kd(m, "b", words, p["ra"], p["out"], p["wa"], p["wd"], p["we"])
    mine = mapped(m, p, "mine")
    assert mine[2] == theirs[2] and len(mine[2]) == 66
    assert mine[1] == theirs[1] == {i: [i] for i in range(18)}
    # byte enables: on (1) in mine, the write enable in Yosys' (the same when the block writes)
    assert [mine[0].pop(f"ADW{i}") for i in range(2)] == ["1", "1"]
    assert [theirs[0].pop(f"ADW{i}") for i in range(2)] == ["we[0]", "we[0]"]
    assert mine[0] == theirs[0]
    assert mine[0]["WEW"] == "we[0]" and mine[0]["ADR4"] == "ra[0]" and mine[0]["DIW17"] == "wd[17]"


@pytest.mark.parametrize("impl", ["generic", "dp16kd-model"])
def test_kernel_with_seg_and_first_in_block_ram_matches_simulator(impl, monkeypatch):
    """With the threshold lowered so that SpMV's seg and first arrays go to block RAM (level_scan's reads of
    latency 2 with an enable, its bounds_latency 2: DP16KD blocks with the output register, the clock enable on the
    read side), the kernel still gives the simulator's results and cycles (the simulator applies the same rule), and
    the host reads seg back through the op's port (no port of its own)."""
    import fuseflow.samml.storage as storage
    monkeypatch.setattr(storage, "BOUNDS_BLOCK_MIN_BITS", 256)
    program, inputs = _spmv(rows=24, density=0.3, seed=6)
    b = build(program, inputs, probes=False, bake=True)
    specs = {m.name: m for m in b.plan.memories}
    assert specs["B.1.seg"].storage == "block" and specs["B.1.first"].storage == "block"
    b.top.block_ram = impl
    from amaranth.sim import Simulator

    from fuseflow.hw.elaborate import AmaranthDriver, packed_inputs
    from fuseflow.hw.memory import tensor_images
    from fuseflow.hw.top import host_run
    images = tensor_images(b.plan, "B", packed_inputs(program, inputs)["B"])
    man = b.manifest()
    res, back = {}, {}
    sim = Simulator(b.top)
    sim.add_clock(1e-8)

    async def bench(ctx):
        drv = AmaranthDriver(ctx, b.top)
        res.update(await host_run(drv, man, {}, 100_000))
        for name in ("B.1.seg", "B.1.first"):        # read back after the run, through the op's shared port
            back[name] = await drv.read_burst(specs[name].sel, 0, len(images[name]))
    sim.add_testbench(bench)
    sim.run()
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles
    for name in back:
        assert back[name] == images[name]
    # the rule costs cycles here (a reference after each popped stop waits one): the simulator applied it too
    assert {(op.params["level"], op.bounds_latency) for ops in b.top.ops for op in ops.values()
            if hasattr(op, "bounds_latency") and op.params.get("tensor") == "B"} == {(1, 2)}
    monkeypatch.undo()
    from fuseflow.hw.elaborate import reference_run
    assert reference_run(program, inputs).cycles < res["cycles"]
    reads = [mp for op in b.top.ops[0].values() for a, mp in getattr(op, "memories", {}).items()
             if a == "seg" and mp.reads]
    assert reads and all(mp.held_reads == {"seg_lo_b", "seg_hi_b"} for mp in reads)


def test_bounds_latency_follows_the_storage_of_seg_and_first_at_the_rule_threshold():
    """At the real threshold (no monkeypatch): the CSR SpMV of the kernel suite (capacities declared for a dense
    matrix: 24-bit seg) with 600 rows has a 601 x 24-bit seg and a 600 x 18-bit first (14424 and 10800 bits: LUT
    RAM), with 1024 rows 1025 x 24 and 1024 x 18 bits (block RAM). The kernel top gives its level_scan
    bounds_latency 2 exactly when the plan put seg or first in block RAM, and the simulator's parameter binding
    (from the same capacities) says the same."""
    from fuseflow.samml.storage import BOUNDS_BLOCK_MIN_BITS
    from fuseflow.sim.engine import _bind
    seen = set()
    for rows in (600, 1024):
        program, inputs = _spmv(rows=rows, density=0.001, seed=2)
        b = build(program, inputs, probes=False)
        specs = {m.name: m for m in b.plan.memories}
        seg, first = specs["B.1.seg"], specs["B.1.first"]
        big = max(seg.depth * seg.width, first.depth * first.width) >= BOUNDS_BLOCK_MIN_BITS
        assert (seg.storage == "block" or first.storage == "block") == big
        want = 2 if big else 1
        hw = {op.bounds_latency for ops in b.top.ops for op in ops.values()
              if getattr(op, "op_name", None) == "level_scan" and op.params.get("level") == 1}
        node = next(n for k in program.kernels for n in k.nodes.values()
                    if n.op == "level_scan" and n.params.get("tensor") == "B" and n.params.get("level") == 1)
        assert hw == {want} and _bind(program, node, b.packed, None)["bounds_latency"] == want
        seen.add(want)
    assert seen == {1, 2}
