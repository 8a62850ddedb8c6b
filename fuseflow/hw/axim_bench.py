"""The cocotb test bench of an ``axi-master`` build (run by :func:`run_axim`; not a pytest module).

It reads the job named by ``$FUSEFLOW_AXIM_JOB``: the off-chip image (bytes at ``base``), the tile table, and the
memory behind the master port: ``"axiram"`` (cocotbext-axi's ``AxiRam``, with random back-pressure on every
channel when ``pause`` > 0) or ``"contract"`` (:class:`ContractMemory`: the memory
:mod:`fuseflow.samml.offchip` describes, cycle for cycle). It sets ``table`` and ``tiles`` and starts the run
through the AXI4-Lite control port (cocotbext-axi's ``AxiLiteMaster``), records the kernel's ``cycles`` at each
rise of ``kernel_done``, waits for ``irq``, reads the control registers and the memory's bytes back, and writes
the result file.
"""

import base64
import json
import os
import random
import traceback
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer

from .axi_master import CONTROL_REGISTERS
from .cocotb_bench import write_result

REG = {name: 4 * i for i, name in enumerate(CONTROL_REGISTERS)}


class ContractMemory:
    """An AXI4 slave that behaves as the off-chip contract says: AR, AW and W always ready; a read burst whose AR
    handshake is in cycle ``a`` delivers its first beat in cycle ``a + latency`` (or right behind the previous
    burst's beats), one beat per cycle; B comes ``latency`` cycles after a burst's last W beat. It checks that the
    master takes R and B when offered. Signals are sampled and driven at the falling edge (mid-cycle)."""

    def __init__(self, dut, prefix, size, latency, word_bytes):
        self.dut, self.p = dut, prefix
        self.mem = bytearray(size)
        self.latency, self.wb = latency, word_bytes
        self.errors = []

    def sig(self, name):
        return getattr(self.dut, f"{self.p}_{name}")

    async def run(self):
        lat, wb = self.latency, self.wb
        for name in ("arready", "awready", "wready"):
            self.sig(name).value = 1
        for name in ("rvalid", "bvalid", "rlast", "rdata", "rresp", "bresp", "rid", "bid"):
            self.sig(name).value = 0
        beats = deque()            # (cycle, address, last)
        free = -1                  # cycle of the last scheduled read beat
        bursts = deque()           # [address, beats, sent] of writes whose AW has come
        responses = deque()        # cycles of B
        cycle = 0
        while True:
            await FallingEdge(self.dut.clk)
            cycle += 1
            if int(self.sig("arvalid").value):
                addr, n = int(self.sig("araddr").value), int(self.sig("arlen").value) + 1
                start = max(cycle + lat, free + 1)
                for k in range(n):
                    beats.append((start + k, addr + k * wb, k == n - 1))
                free = start + n - 1
            if int(self.sig("awvalid").value):
                bursts.append([int(self.sig("awaddr").value), int(self.sig("awlen").value) + 1, 0])
            if int(self.sig("wvalid").value):
                if not bursts:
                    self.errors.append(f"cycle {cycle}: W beat without an AW")
                else:
                    b = bursts[0]
                    off = b[0] + b[2] * wb
                    self.mem[off:off + wb] = int(self.sig("wdata").value).to_bytes(wb, "little")
                    b[2] += 1
                    if bool(int(self.sig("wlast").value)) != (b[2] == b[1]):
                        self.errors.append(f"cycle {cycle}: wlast wrong at beat {b[2]} of {b[1]}")
                    if b[2] == b[1]:
                        bursts.popleft()
                        responses.append(cycle + lat)
            if beats and beats[0][0] == cycle:
                _, addr, last = beats.popleft()
                self.sig("rdata").value = int.from_bytes(self.mem[addr:addr + wb], "little")
                self.sig("rlast").value = int(last)
                self.sig("rvalid").value = 1
                if not int(self.sig("rready").value):
                    self.errors.append(f"cycle {cycle}: R not taken")
            else:
                self.sig("rvalid").value = 0
            if responses and responses[0] == cycle:
                responses.popleft()
                self.sig("bvalid").value = 1
                if not int(self.sig("bready").value):
                    self.errors.append(f"cycle {cycle}: B not taken")
            else:
                self.sig("bvalid").value = 0


def _pauses(rng, probability):
    while True:
        yield int(rng.random() < probability)


@cocotb.test()
async def axim_top(dut):
    with open(os.environ["FUSEFLOW_AXIM_JOB"]) as f:
        job = json.load(f)
    result_path = job["result"]
    res = {}
    try:
        from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam
        period = job.get("clock_period_ns", 10)
        Clock(dut.clk, period, unit="ns").start()
        image = base64.b64decode(job["image"])
        base, size = job["base"], job["size"]
        dut.rst.value = 1
        if job["memory"] == "contract":
            mem = ContractMemory(dut, "m_axi", size, job["latency"], job["word_bytes"])
            mem.mem[base:base + len(image)] = image
            cocotb.start_soon(mem.run())
            read_back = lambda: bytes(mem.mem[base:base + len(image)])      # noqa: E731
        else:
            mem = AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, size=size)
            mem.write(base, image)
            if job.get("pause"):
                rng = random.Random(job.get("seed", 0))
                for ch in (mem.write_if.aw_channel, mem.write_if.w_channel, mem.write_if.b_channel,
                           mem.read_if.ar_channel, mem.read_if.r_channel):
                    ch.set_pause_generator(_pauses(rng, job["pause"]))
            read_back = lambda: bytes(mem.read(base, len(image)))            # noqa: E731
        ctl = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        for _ in range(3):
            await FallingEdge(dut.clk)
        dut.rst.value = 0
        await FallingEdge(dut.clk)
        kernel_cycles = []

        async def watch_kernel():
            while True:
                await RisingEdge(dut.kernel_done)
                await FallingEdge(dut.clk)
                kernel_cycles.append(int(dut.kernel_cycles.value))

        cocotb.start_soon(watch_kernel())
        await ctl.write_dword(REG["table"], job["table"])
        await ctl.write_dword(REG["tiles"], job["tiles"])
        await ctl.write_dword(REG["control"], 1)
        if not int(dut.irq.value):
            await First(RisingEdge(dut.irq), Timer(job["max_cycles"] * period, unit="ns"))
        await FallingEdge(dut.clk)
        done = bool(int(dut.irq.value))
        regs = {name: await ctl.read_dword(REG[name]) for name in CONTROL_REGISTERS}
        res = {"done": done, "registers": regs, "kernel_cycles": kernel_cycles,
               "memory": base64.b64encode(read_back()).decode(),
               "errors": getattr(mem, "errors", [])}
    except Exception as exc:  # noqa: BLE001 - reported to the caller through the result file
        res = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    write_result(result_path, res)
