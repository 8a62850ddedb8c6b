"""The cocotb test bench of a kernel top (run by :mod:`fuseflow.hw.verilator`; not a pytest module).

It reads the job file named by ``$FUSEFLOW_HW_JOB`` (manifest, memory images, watchdog, result path), drives
only top-level ports (Verilator hides internal names): loads the memories through the host port, pulses
``start``, then awaits ``RisingEdge(done)`` or a single watchdog ``Timer`` -- no Python runs per cycle while the
kernel runs -- and reads the registers and written tensors back. The result goes to the job's result file as
JSON (see :func:`fuseflow.hw.top.host_run`).

Host-port timing: inputs change just after a falling clock edge and are sampled at the next rising edge;
``host_rdata`` shows the entry addressed ``HOST_READ_LATENCY`` (2) rising edges earlier; a burst is pipelined (one
address per cycle).
"""

import json
import os
import time
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, First, RisingEdge, Timer

from .memory import HOST_READ_LATENCY
from .top import HostDriver, host_run


class CocotbDriver(HostDriver):
    def __init__(self, dut, period_ns):
        self.dut = dut
        self.period_ns = period_ns

    def now(self):
        return time.perf_counter()

    async def write_burst(self, sel, base, words):
        dut = self.dut
        dut.host_sel.value = sel
        dut.host_we.value = 1
        for i, w in enumerate(words):
            dut.host_addr.value = base + i
            dut.host_wdata.value = w
            await FallingEdge(dut.clk)
        dut.host_we.value = 0

    async def read_burst(self, sel, base, n):
        dut = self.dut
        out = []
        if n <= 0:
            return out
        dut.host_we.value = 0
        dut.host_sel.value = sel
        # pipelined: entry base + i is addressed after falling edge i, on host_rdata HOST_READ_LATENCY edges later
        for i in range(n + HOST_READ_LATENCY - 1):
            dut.host_addr.value = base + min(i, n - 1)
            await FallingEdge(dut.clk)
            if i >= HOST_READ_LATENCY - 1:
                out.append(int(dut.host_rdata.value))
        return out

    async def pulse_start(self):
        dut = self.dut
        dut.start.value = 1
        await FallingEdge(dut.clk)
        dut.start.value = 0

    async def wait_done(self, max_cycles):
        dut = self.dut
        if int(dut.done.value):
            return True
        await First(RisingEdge(dut.done), Timer(max_cycles * self.period_ns, unit="ns"))
        await FallingEdge(dut.clk)
        return bool(int(dut.done.value))


@cocotb.test()
async def kernel_top(dut):
    job_path = os.environ["FUSEFLOW_HW_JOB"]
    with open(job_path) as f:
        job = json.load(f)
    result_path = job["result"]
    period = job.get("clock_period_ns", 10)
    try:
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
        drv = CocotbDriver(dut, period)
        res = await host_run(drv, job["manifest"], job["images"], job["max_cycles"], job.get("read_probes"))
        run_s = res.get("run_seconds") or 0.0
        res["sim_cycles_per_second"] = (res["wall_cycles"] / run_s) if run_s > 0 else None
    except Exception as exc:  # noqa: BLE001 - reported to the caller through the result file
        res = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    write_result(result_path, res)


def write_result(path: str, res: dict) -> None:
    """A bench's result file for the process that started the simulation, written whole or not at all."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, path)
