"""cocotb test of one FuseFlow-HW kernel top, driven by the test vectors in ``vectors.json`` beside this file.

Written by ``python -m fuseflow.hw build ... --testbench`` and run by ``run_tb.py`` (or any cocotb flow: top
level = the module named in ``vectors.json``). It needs cocotb only, never ``fuseflow``.

The test resets the kernel top, writes every input memory image through the host port (one word per cycle),
pulses ``start``, waits for ``done`` (a watchdog bounds the wait), then reads the register file and every output
memory back and checks each word against the reference simulator's fixed-mode run, and the cycle counters
against the simulator's cycle counts.

Host-port timing: inputs change just after a falling clock edge and are sampled at the next rising edge;
the word addressed in one cycle is on ``host_rdata`` ``host.read_latency`` cycles later (2: a synchronous read, then
a register).
"""

import json
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer
from cocotb.utils import get_sim_time

VECTORS = Path(__file__).resolve().parent / "vectors.json"
#: mismatching words listed per memory in the failure message
SHOWN = 8


async def write_burst(dut, sel, words):
    """Write ``words`` to entries 0.. of memory ``sel``, one per cycle."""
    dut.host_sel.value = sel
    dut.host_we.value = 1
    for addr, word in enumerate(words):
        dut.host_addr.value = addr
        dut.host_wdata.value = word
        await FallingEdge(dut.clk)
    dut.host_we.value = 0


async def read_burst(dut, sel, n, latency):
    """Read entries 0..n-1 of memory (or register file) ``sel``, one per cycle: entry i is addressed after falling
    edge i and is on ``host_rdata`` ``latency`` edges later (``vectors.json``'s ``host.read_latency``)."""
    out = []
    dut.host_we.value = 0
    dut.host_sel.value = sel
    for i in range(n + latency - 1):
        dut.host_addr.value = min(i, n - 1)
        await FallingEdge(dut.clk)
        if i >= latency - 1:
            out.append(int(dut.host_rdata.value))
    return out


def compare(name, want, have):
    """Mismatch descriptions of one memory (empty when every word is equal)."""
    bad = [i for i, (a, b) in enumerate(zip(want, have)) if a != b]
    msgs = [f"{name}[{i}] = {have[i]:#x}, expected {want[i]:#x}" for i in bad[:SHOWN]]
    if len(bad) > SHOWN:
        msgs.append(f"{name}: {len(bad) - SHOWN} more mismatching words")
    return msgs


@cocotb.test()
async def kernel_matches_reference(dut):
    vec = json.loads(VECTORS.read_text())
    host, expected = vec["host"], vec["expected"]
    period = vec["clock_period_ns"]
    regs = host["registers"]
    Clock(dut.clk, period, unit="ns").start()
    dut.start.value = 0
    dut.host_we.value = 0
    dut.host_sel.value = 0
    dut.host_addr.value = 0
    dut.host_wdata.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await FallingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)

    loaded = 0
    for mem in vec["inputs"]:
        await write_burst(dut, mem["sel"], mem["words"])
        loaded += len(mem["words"])
    dut._log.info("%s: loaded %d words into %d input memories", vec["module"], loaded, len(vec["inputs"]))

    dut.start.value = 1
    await FallingEdge(dut.clk)
    dut.start.value = 0
    t_start = get_sim_time("ns")
    if not int(dut.done.value):
        await First(RisingEdge(dut.done), Timer(vec["max_cycles"] * period, unit="ns"))
    await FallingEdge(dut.clk)
    assert int(dut.done.value), (f"done never rose within {vec['max_cycles']} cycles "
                                 f"(reference: {expected['cycles']} kernel cycles)")
    elapsed = round((get_sim_time("ns") - t_start) / period)

    words = await read_burst(dut, host["reg_sel"], max(regs.values()) + 1, host["read_latency"])
    reg = {name: words[index] for name, index in regs.items()}
    problems = []
    if reg["overflow"]:
        problems.append(f"a writer wrote past a memory's capacity (overflow register {reg['overflow']:#x})")
    if reg.get("op_overflow"):
        problems.append(f"an op exceeded its capacity (op_overflow register {reg['op_overflow']:#x})")
    checked = 0
    for mem in expected["memories"]:
        have = await read_burst(dut, mem["sel"], len(mem["words"]), host["read_latency"])
        problems += compare(mem["memory"], mem["words"], have)
        checked += len(mem["words"])
    for kernel, want in expected["kernel_cycles"].items():
        have = reg[f"kernel.{kernel}.cycles"]
        if have != want:
            problems.append(f"kernel {kernel}: {have} cycles, the reference simulator takes {want}")
    if reg["cycles"] != expected["cycles"]:
        problems.append(f"cycles register {reg['cycles']}, the reference simulator takes {expected['cycles']}")

    dut._log.info("%s: %d kernel cycles (reference %d), %d cycles from start to done (wall_cycles register %d)",
                  vec["module"], reg["cycles"], expected["cycles"], elapsed, reg["wall_cycles"])
    dut._log.info("%s: checked %d output words in %d memories", vec["module"], checked, len(expected["memories"]))
    assert not problems, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems)
    dut._log.info("%s: every output word bit-identical to the reference simulator, cycles equal", vec["module"])
