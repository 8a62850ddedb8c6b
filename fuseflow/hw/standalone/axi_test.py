"""cocotb test of one FuseFlow-HW kernel behind its AXI4-Lite slave, with ``cocotbext-axi``'s AXI4-Lite master (and,
for ``--interface axis``, its AXI4-Stream source and sink on the data ports).

Written by ``python -m fuseflow.hw build ... --interface axi|axis --testbench`` and run by ``run_tb.py``. Needs cocotb
and cocotbext-axi, never ``fuseflow``. The vectors (``vectors.json``) hold the address map (``axi``), the input
memory images and the reference simulator's expected output words and cycles.

The test resets the design, writes every input image through the AXI window, writes CONTROL.start, polls
CONTROL until done, then reads CYCLES, the register file and every output memory through AXI and checks each word
against the reference, the kernel cycles against the simulator's, and that ``done`` rose (``irq``) exactly
``wall_cycles`` cycles after the start write's handshake: the launch and hand-over cycles of the host-port top,
the same with or without AXI.

With AXI4-Stream data ports (the map's ``streams``), the inputs go in as one ``AxiStreamFrame`` per memory
(``tdest`` = its sel) and must take exactly one cycle per word (the slave never stalls an idle kernel's stream); each
output memory comes back as one frame after writing STREAM_SEL and STREAM_COUNT, its words ``cycles_per_word``
cycles apart, the first ``first_word_after_write`` cycles after the STREAM_COUNT write's handshake.
"""

import json
import logging
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge
from cocotb.utils import get_sim_time
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

VECTORS = Path(__file__).resolve().parent / "vectors.json"
SHOWN = 8


def compare(name, want, have):
    bad = [i for i, (a, b) in enumerate(zip(want, have)) if a != b]
    msgs = [f"{name}[{i}] = {have[i]:#x}, expected {want[i]:#x}" for i in bad[:SHOWN]]
    if len(bad) > SHOWN:
        msgs.append(f"{name}: {len(bad) - SHOWN} more mismatching words")
    return msgs


async def handshakes(dut, prefix, period, out):
    """Record the cycle of every transfer on AXI4-Stream port ``prefix`` (sampled mid-cycle, before its edge)."""
    valid, ready = getattr(dut, f"{prefix}_tvalid"), getattr(dut, f"{prefix}_tready")
    while True:
        await FallingEdge(dut.clk)
        if int(valid.value) and int(ready.value):
            out.append(round(get_sim_time("ns") / period + 0.5))


async def write_handshake(dut, period, out):
    """Record the cycle of the next AXI4-Lite write address handshake."""
    while True:
        await FallingEdge(dut.clk)
        if int(dut.s_axil_awvalid.value) and int(dut.s_axil_awready.value):
            out.append(round(get_sim_time("ns") / period + 0.5))
            return


async def edge_time(dut, signal, period, out):
    """Record the cycle (sim time / period) of ``signal``'s next rising edge into ``out``."""
    await RisingEdge(signal)
    out.append(get_sim_time("ns") / period)


@cocotb.test()
async def kernel_matches_reference_over_axi(dut):
    vec = json.loads(VECTORS.read_text())
    axi, expected = vec["axi"], vec["expected"]
    period = vec["clock_period_ns"]
    Clock(dut.clk, period, unit="ns").start()
    for name in ("awvalid", "wvalid", "bready", "arvalid", "rready"):
        getattr(dut, f"s_axil_{name}").value = 0
    streams = axi.get("streams")
    if streams:
        dut.s_axis_tvalid.value = 0
        dut.m_axis_tready.value = 0
    dut.rst.value = 1
    for _ in range(2):
        await FallingEdge(dut.clk)
    # created in reset, once the design's outputs are defined (Icarus evaluates them only after time 0)
    master = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
    for interface in (master.write_if, master.read_if):
        interface.log.setLevel(logging.WARNING)      # not one line per transaction
    if streams:                 # byte_lanes=1: a frame's tdata is a list of 32-bit words
        source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis"), dut.clk, dut.rst, byte_lanes=1)
        sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis"), dut.clk, dut.rst, byte_lanes=1)
        for s in (source, sink):
            s.log.setLevel(logging.WARNING)
        loads, reads = [], []
        cocotb.start_soon(handshakes(dut, "s_axis", period, loads))
        cocotb.start_soon(handshakes(dut, "m_axis", period, reads))
    await FallingEdge(dut.clk)
    dut.rst.value = 0
    await FallingEdge(dut.clk)

    bases = {m["name"]: m["base"] for m in axi["memories"]}
    t0 = get_sim_time("ns")
    loaded = 0
    problems = []
    for mem in vec["inputs"]:
        if mem["words"] and streams:
            await source.send(AxiStreamFrame(mem["words"], tdest=mem["sel"]))
        elif mem["words"]:
            await master.write_dwords(bases[mem["memory"]], mem["words"])
        loaded += len(mem["words"])
    if streams:
        await source.wait()
        for _ in range(2):
            await FallingEdge(dut.clk)
        span = loads[-1] - loads[0] + 1 if loads else 0
        if len(loads) != loaded or span != loaded:
            problems.append(f"AXI4-Stream load: {len(loads)} transfers in {span} cycles for {loaded} words "
                            f"(one per cycle expected)")
    load_cycles = span if streams else (get_sim_time("ns") - t0) / period
    dut._log.info("%s: loaded %d words over %s in %d cycles", vec["module"], loaded,
                  "AXI4-Stream" if streams else "AXI4-Lite", round(load_cycles))

    # the start write's handshake is the cycle the kernel top samples start
    handshake, done_at = [], []
    cocotb.start_soon(edge_time(dut, dut.irq, period, done_at))

    async def start_handshake():
        while True:        # sampled mid-cycle: the handshake is at the next rising edge
            await FallingEdge(dut.clk)
            if int(dut.s_axil_awvalid.value) and int(dut.s_axil_awready.value):
                handshake.append(get_sim_time("ns") / period + 0.5)
                return
    cocotb.start_soon(start_handshake())
    await master.write_dword(axi["control"]["control"], 1 << axi["control_bits"]["start"])
    polls = 0
    deadline = get_sim_time("ns") + vec["max_cycles"] * period
    while True:
        status = await master.read_dword(axi["control"]["control"])
        polls += 1
        if status >> axi["control_bits"]["done"] & 1:
            break
        assert get_sim_time("ns") < deadline, f"done never rose within {vec['max_cycles']} cycles"
    cycles = await master.read_dword(axi["control"]["cycles"])
    regs = axi["register_file"]["registers"]
    reg = {name: await master.read_dword(addr) for name, addr in regs.items() if not name.startswith("probe.")}

    if reg["overflow"]:
        problems.append(f"a writer wrote past a memory's capacity (overflow register {reg['overflow']:#x})")
    if reg.get("op_overflow"):
        problems.append(f"an op exceeded its capacity (op_overflow register {reg['op_overflow']:#x})")
    checked = 0
    for mem in expected["memories"]:
        n = len(mem["words"])
        if n and streams:
            have = await read_stream(dut, master, sink, axi, mem, reads, period, problems)
        else:
            have = await master.read_dwords(bases[mem["memory"]], n) if n else []
        problems += compare(mem["memory"], mem["words"], list(have))
        checked += n
    if cycles != expected["cycles"] or reg["cycles"] != expected["cycles"]:
        problems.append(f"CYCLES {cycles} (register file {reg['cycles']}), the reference simulator takes "
                        f"{expected['cycles']}")
    for kernel, want in expected["kernel_cycles"].items():
        if reg[f"kernel.{kernel}.cycles"] != want:
            problems.append(f"kernel {kernel}: {reg[f'kernel.{kernel}.cycles']} cycles, the reference takes {want}")
    run = round(done_at[0] - handshake[0]) if done_at and handshake else None
    if run != reg["wall_cycles"]:
        problems.append(f"done rose {run} cycles after the start handshake, wall_cycles says {reg['wall_cycles']}")
    dut._log.info("%s: %d kernel cycles (reference %d); done %s cycles after the start write's handshake "
                  "(wall_cycles %d = cycles + %d launch and hand-over); %d status polls",
                  vec["module"], cycles, expected["cycles"], run, reg["wall_cycles"],
                  reg["wall_cycles"] - reg["cycles"], polls)
    dut._log.info("%s: checked %d output words in %d memories%s", vec["module"], checked, len(expected["memories"]),
                  " (read as AXI4-Stream frames)" if streams else "")
    assert not problems, f"{len(problems)} problem(s):\n  " + "\n  ".join(problems)
    dut._log.info("%s: every output word bit-identical to the reference simulator, cycles equal", vec["module"])


async def read_stream(dut, master, sink, axi, mem, reads, period, problems):
    """One output memory through the AXI4-Stream master: STREAM_SEL, STREAM_COUNT, one frame; checks its tdest,
    length and timing (the documented cycles per word and first-word latency)."""
    out = axi["streams"]["out"]
    n = len(mem["words"])
    await master.write_dword(axi["control"]["stream_sel"], mem["sel"])
    written = []
    cocotb.start_soon(write_handshake(dut, period, written))
    del reads[:]
    await master.write_dword(axi["control"]["stream_count"], n)
    frame = await sink.recv()
    have = list(frame.tdata)
    if frame.tdest != mem["sel"] or len(have) != n:
        problems.append(f"{mem['memory']}: frame of {len(have)} words to tdest {frame.tdest}, expected {n} to "
                        f"{mem['sel']}")
    want = [written[0] + out["first_word_after_write"] + out["cycles_per_word"] * k for k in range(n)] \
        if written else None
    if reads != want:
        problems.append(f"{mem['memory']}: stream words at cycles {reads[:4]}..., expected {want[:4] if want else None}"
                        f"... ({out['cycles_per_word']} cycles per word)")
    return have
