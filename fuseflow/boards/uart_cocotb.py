"""The cocotb test of a board top's Verilog (run by :func:`fuseflow.boards.verilog_board.run_bridged_verilog`; not a
pytest module).

The host's UART is cocotbext-uart: ``UartSource`` on ``rx``, ``UartSink`` on ``tx``, at one bit per ``divisor``
clocks. The host speaks the bridge protocol (:mod:`fuseflow.boards.protocol`) as :class:`~fuseflow.boards.client.
BridgeClient` does: identify (version, field sizes, build id checked against the manifest), then
:func:`fuseflow.hw.top.host_run` over a driver whose bursts are write/read commands, whose start is the start command
and whose wait polls the status command. The result (host_run's dict, bytes each way, clock cycles) goes to the
job's result file as JSON.
"""

import json
import os
import traceback

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, Timer
from cocotb.utils import get_sim_time
from cocotbext.uart import UartSink, UartSource

from fuseflow.boards import protocol as P
from fuseflow.hw.top import HostDriver, host_run


class UartHost(HostDriver):
    def __init__(self, dut, man, divisor, period_ns):
        baud = 1e9 / (divisor * period_ns)
        self.dut = dut
        self.period_ns = period_ns
        self.src = UartSource(dut.rx, baud=baud)
        self.sink = UartSink(dut.tx, baud=baud)
        self.layout = P.Layout.from_manifest(man)
        self.byte_ns = 10 * divisor * period_ns
        self.sent = self.received = 0

    async def send(self, data):
        await FallingEdge(self.dut.clk)          # bit edges fall between the bridge's sampling edges
        await self.src.write(bytes(data))
        self.sent += len(data)

    async def recv(self, n, budget_bytes=None):
        """``n`` bytes from the bridge, or TimeoutError after the time of ``budget_bytes`` (default 2n + 64)."""
        out = bytearray()
        deadline = get_sim_time("ns") + ((budget_bytes or 2 * n + 64) + self.src.count()) * self.byte_ns
        while len(out) < n:
            left = deadline - get_sim_time("ns")
            if left <= 0:
                raise TimeoutError(f"the bridge sent {len(out)} of {n} bytes")
            await self.sink.wait(timeout=int(left), timeout_unit="ns")
            out += self.sink.read_nowait(min(n - len(out), self.sink.count()))
        self.received += n
        return bytes(out)

    async def reply(self, what):
        r = (await self.recv(1))[0]
        if r != P.ACK:
            raise RuntimeError(f"{what}: reply {r:#04x}, expected ACK")

    async def identify(self, man):
        await self.send([P.CMD_IDENT])
        info = P.parse_ident(await self.recv(P.IDENT_BYTES))
        want = (P.VERSION, self.layout, P.build_id(man))
        if (info["version"], info["layout"], info["build_id"]) != want:
            raise RuntimeError(f"identify: {info}, expected version/layout/build id {want}")

    async def write_burst(self, sel, base, words):
        for i in range(0, len(words), P.MAX_BURST):
            chunk = words[i:i + P.MAX_BURST]
            await self.send(P.encode_write(self.layout, sel, base + i, chunk))
            await self.reply("write")

    async def read_burst(self, sel, base, n):
        out = []
        while n > 0:
            k = min(n, P.MAX_BURST)
            await self.send(P.encode_read(self.layout, sel, base, k))
            out += P.decode_words(self.layout, await self.recv(k * self.layout.data_bytes))
            base, n = base + k, n - k
        return out

    async def pulse_start(self):
        await self.send([P.CMD_START])
        await self.reply("start")

    async def wait_done(self, max_cycles):
        deadline = get_sim_time("ns") + max_cycles * self.period_ns
        while True:
            await self.send([P.CMD_STATUS])
            s = (await self.recv(1))[0]
            if s & P.STATUS_DONE and not s & P.STATUS_BUSY:
                return True
            if get_sim_time("ns") > deadline:
                return False


@cocotb.test()
async def board_over_uart(dut):
    with open(os.environ["FUSEFLOW_BOARD_JOB"]) as f:
        job = json.load(f)
    period = job["clock_period_ns"]
    try:
        Clock(dut.clk, period, unit="ns").start()
        dut.rst.value = 1
        host = UartHost(dut, job["manifest"], job["divisor"], period)
        for _ in range(2):
            await FallingEdge(dut.clk)
        dut.rst.value = 0
        await Timer(10 * period, unit="ns")
        t0 = get_sim_time("ns")
        await host.identify(job["manifest"])
        res = await host_run(host, job["manifest"], job["images"], job["max_cycles"])
        res.update(bytes_sent=host.sent, bytes_received=host.received,
                   uart_cycles=round((get_sim_time("ns") - t0) / period))
        res.pop("run_seconds", None)
    except Exception as exc:  # noqa: BLE001 - reported to the caller through the result file
        res = {"error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"}
    tmp = job["result"] + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f)
    os.replace(tmp, job["result"])
