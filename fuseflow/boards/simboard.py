"""A simulated board: a kernel top behind its UART bridge in Amaranth's simulator, with a bit-level UART model
on the host side of the ``rx``/``tx`` pins, exposed as a :class:`fuseflow.boards.client.Transport`.

    board = SimBoard(build, divisor=4)          # 4 clocks per UART bit keeps runs short
    client = BridgeClient(board, build.manifest(), clock_hz=board.clock_hz)
    res = client.run(build.images)

Bytes the client writes are queued and shifted onto ``rx`` (start bit, 8 data bits LSB first, stop bit,
``divisor`` clocks each) by a testbench; another testbench waits for the falling edge of ``tx``, samples each
bit in its middle and checks the stop bit. :meth:`SimBoard.read` runs the simulation until the bytes asked for
have arrived (or a budget of simulated time passes: :class:`~fuseflow.boards.client.BridgeError`).
"""

import collections

from amaranth.sim import Simulator

from . import protocol as P
from .bridge import BridgedTop
from .client import BridgeError, Transport


async def _ticks(ctx, n):
    for _ in range(n):
        await ctx.tick()


class SimBoard(Transport):
    """``build``: :class:`fuseflow.hw.elaborate.Build`; ``divisor``: clocks per UART bit (both sides);
    ``clock_hz``: the simulated clock; ``timeout_bits``: the bridge's silence timeout; ``vcd``: waveform path.
    ``dut``: instead of ``build``, any Elaboratable with ``rx``/``tx`` signals and a bridge of the same divisor."""

    def __init__(self, build=None, divisor=4, clock_hz=100e6, timeout_bits=64, vcd=None, dut=None):
        self.divisor = int(divisor)
        self.clock_hz = float(clock_hz)
        self.dut = dut if dut is not None else BridgedTop(build, self.divisor, timeout_bits)
        self.manifest = getattr(self.dut, "manifest", None)
        self.timeout_bits = timeout_bits
        self._period = 1.0 / self.clock_hz
        self._txq = collections.deque()
        self._rx = bytearray()
        self.framing_errors = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.cycles = 0
        self.sim = Simulator(self.dut)
        self.sim.add_clock(self._period)
        self.sim.add_testbench(self._host_tx, background=True)
        self.sim.add_testbench(self._host_rx, background=True)
        self._vcd = None
        if vcd:
            self._vcd = self.sim.write_vcd(vcd)
            self._vcd.__enter__()

    # --- the host's UART ---------------------------------------------------------------------
    async def _host_tx(self, ctx):
        ctx.set(self.dut.rx, 1)
        d = self.divisor
        while True:
            if not self._txq:
                await _ticks(ctx, d)
                continue
            byte = self._txq.popleft()
            for bit in [0] + [(byte >> i) & 1 for i in range(8)] + [1]:
                ctx.set(self.dut.rx, bit)
                await _ticks(ctx, d)
            self.bytes_sent += 1

    async def _host_rx(self, ctx):
        d = self.divisor
        while True:
            await ctx.negedge(self.dut.tx)
            await _ticks(ctx, d // 2)
            if ctx.get(self.dut.tx):             # a glitch, not a start bit
                continue
            byte = 0
            for i in range(8):
                await _ticks(ctx, d)
                byte |= ctx.get(self.dut.tx) << i
            await _ticks(ctx, d)
            if not ctx.get(self.dut.tx):
                self.framing_errors += 1
                continue
            self._rx.append(byte)
            self.bytes_received += 1

    # --- Transport -------------------------------------------------------------------------------
    def _run_cycles(self, n):
        self.cycles += int(n)
        self.sim.run_until(self.cycles * self._period)

    def write(self, data):
        self._txq.extend(bytes(data))

    def read(self, n, max_cycles=None):
        """Run until ``n`` bytes were received; the budget (default) covers sending what is queued, ``n``
        replies and a margin."""
        bit = self.divisor
        if max_cycles is None:
            max_cycles = (10 * (len(self._txq) + n) + 400) * bit
        step = 10 * bit
        spent = 0
        while len(self._rx) < n:
            if spent >= max_cycles:
                got = len(self._rx)
                raise BridgeError("simulated board", f"no reply: got {got} of {n} bytes within {max_cycles} "
                                                     f"cycles")
            self._run_cycles(step)
            spent += step
        out = bytes(self._rx[:n])
        del self._rx[:n]
        return out

    def now(self):
        return self.cycles * self._period

    def sleep(self, seconds):
        self._run_cycles(max(1, round(seconds * self.clock_hz)))

    def idle(self, bits):
        """Let ``bits`` bit-times of silence pass."""
        self._run_cycles(bits * self.divisor)

    def reset_input(self):
        self._rx.clear()

    def quiet_seconds(self):
        """Silence after which the bridge drops an incomplete command (for :meth:`BridgeClient.resync`)."""
        return 2 * self.timeout_bits * self.divisor * self._period

    def close(self):
        if self._vcd is not None:
            self._vcd.__exit__(None, None, None)
            self._vcd = None


def prepare_run(graph, inputs, build=None):
    """(program, fixed-mode reference, build) of a board run: ``build`` elaborated for ``inputs`` unless given,
    its output memories checked to hold the reference's results."""
    from ..hw.elaborate import build as hw_build
    from ..hw.elaborate import check_outputs_fit, load_program, reference_run
    program = load_program(graph)
    ref = reference_run(program, inputs)
    b = build or hw_build(program, inputs, probes=False, reference=ref)
    check_outputs_fit(b.plan, ref)
    return program, ref, b


def run_summary(program, ref, res, **transport) -> dict:
    """A board run's summary: every written tensor against the reference, cycles (whole run and per kernel),
    then the transport's own counters, then the client's result."""
    from ..hw.top import compare_tensors
    mismatches = compare_tensors(ref.tensors, res["tensors"]) if res["done"] else ["run never finished"]
    return {
        "name": program.name, "ok": res["done"] and not mismatches, "mismatches": mismatches,
        "rtl_cycles": res["cycles"], "sim_cycles": ref.cycles,
        "rtl_kernel_cycles": [res["kernel_cycles"][k.name] for k in program.kernels],
        "sim_kernel_cycles": list(ref.kernel_cycles), **transport, "result": res,
    }


def simulate(graph, inputs, divisor=4, max_cycles=None, build=None):
    """Elaborate ``graph`` with ``inputs``, run it through the simulated board and the client, and compare with
    the fixed-mode reference simulator. Returns a summary dict (``ok``, ``mismatches``, ``rtl_cycles``,
    ``sim_cycles``, ``bytes``, ``uart_cycles``)."""
    from .client import BridgeClient, images_for
    program, ref, b = prepare_run(graph, inputs, build)
    board = SimBoard(b, divisor=divisor)
    client = BridgeClient(board, board.manifest, clock_hz=board.clock_hz)
    images = images_for(program, board.manifest, inputs)
    res = client.run(images, max_cycles=max_cycles or 4 * ref.cycles + 10_000)
    return run_summary(program, ref, res, bytes_sent=board.bytes_sent, bytes_received=board.bytes_received,
                       uart_cycles=board.cycles, framing_errors=board.framing_errors)


__all__ = ["SimBoard", "simulate", "P"]
