"""Shared pieces of the board tests: a small stand-in kernel top behind the real bridge gateware, and a
Python model of the bridge protocol (for client tests that need no simulator)."""

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from fuseflow.boards import protocol as P
from fuseflow.boards.bridge import HostBridge, connect_top
from fuseflow.boards.client import BridgeError, Transport

SEL_W, ADDR_W, DATA_W = 2, 4, 32
RUN_CYCLES = 23
REG_SEL = 1


class FakeTop(wiring.Component):
    """The kernel top's ports: memory ``sel`` 0 holds 16 words; ``sel`` 1 is a register file whose entry i reads
    ``0x1000 + i``; a start makes it busy for RUN_CYCLES cycles, then done with ``cycles = RUN_CYCLES``; host
    writes are ignored while busy (like :class:`fuseflow.hw.top.ProgramTop`)."""

    def __init__(self, run_cycles=RUN_CYCLES):
        self.run_cycles = run_cycles
        super().__init__({"start": In(1), "busy": Out(1), "done": Out(1), "cycles": Out(32),
                          "host_sel": In(SEL_W), "host_addr": In(ADDR_W), "host_wdata": In(DATA_W),
                          "host_we": In(1), "host_rdata": Out(DATA_W)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=DATA_W, depth=16, init=[])
        rp = mem.read_port(domain="comb")
        wp = mem.write_port()
        n = self.run_cycles
        left = Signal(range(n + 1))
        m.d.comb += [rp.addr.eq(self.host_addr), wp.addr.eq(self.host_addr), wp.data.eq(self.host_wdata),
                     wp.en.eq(self.host_we & (self.host_sel == 0) & ~self.busy)]
        with m.If(self.busy):
            m.d.sync += left.eq(left - 1)
            with m.If(left == 1):
                m.d.sync += [self.busy.eq(0), self.done.eq(1), self.cycles.eq(n)]
        with m.Elif(self.start):
            m.d.sync += [self.busy.eq(1), self.done.eq(0), left.eq(n)]
        with m.If(self.host_sel == 0):
            m.d.sync += self.host_rdata.eq(rp.data)
        with m.Else():
            m.d.sync += self.host_rdata.eq(0x1000 + self.host_addr)
        return m


class FakeBridged(Elaboratable):
    def __init__(self, divisor=4, timeout_bits=64, build_id=0x12345678, run_cycles=RUN_CYCLES):
        self.bridge = HostBridge((SEL_W, ADDR_W, DATA_W), divisor, build_id, timeout_bits)
        self.top = FakeTop(run_cycles)
        self.rx = Signal(init=1)
        self.tx = Signal(init=1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.top = self.top
        m.submodules.bridge = self.bridge
        connect_top(m, self.bridge, self.top)
        m.d.comb += [self.bridge.rx.eq(self.rx), self.tx.eq(self.bridge.tx)]
        return m


def fake_manifest():
    """A manifest whose host map matches FakeTop (one memory, three registers)."""
    return {
        "name": "fake", "module": "fake",
        "host": {"sel_width": SEL_W, "addr_width": ADDR_W, "data_width": DATA_W, "reg_sel": REG_SEL,
                 "memories": [{"name": "M.vals", "sel": 0, "depth": 16, "width": 32, "capacity": 16}],
                 "registers": [{"name": "status", "index": 0}, {"name": "cycles", "index": 1},
                               {"name": "wall_cycles", "index": 2}]},
    }


class ModelBridge(Transport):
    """A Python model of the bridge (protocol level) over a dict memory, for client tests."""

    def __init__(self, layout, build_id=0, busy=False):
        self.layout = layout
        self.build_id = build_id
        self.mem = {}
        self.busy = busy
        self.done = False
        self.out = bytearray()
        self.sent = []
        self.drop_next_reply = False

    def write(self, data):
        data = bytes(data)
        self.sent.append(data)
        L = self.layout
        cmd = data[0]
        reply = b""
        if cmd == P.CMD_IDENT:
            reply = P.ident_bytes(L, self.build_id)
        elif cmd in (P.CMD_WRITE, P.CMD_READ):
            o = 1
            sel = int.from_bytes(data[o:o + L.sel_bytes], "little")
            o += L.sel_bytes
            addr = int.from_bytes(data[o:o + L.addr_bytes], "little")
            o += L.addr_bytes
            n = int.from_bytes(data[o:o + 2], "little")
            o += 2
            if cmd == P.CMD_WRITE:
                words = P.decode_words(L, data[o:])
                assert len(words) == n
                if not self.busy:
                    for i, w in enumerate(words):
                        self.mem[(sel, addr + i)] = w
                reply = bytes([P.BUSY if self.busy else P.ACK])
            else:
                reply = b"".join(P.le(self.mem.get((sel, addr + i), 0), L.data_bytes) for i in range(n))
        elif cmd == P.CMD_START:
            reply = bytes([P.BUSY if self.busy else P.ACK])
            self.done = not self.busy
        elif cmd == P.CMD_STATUS:
            reply = bytes([int(self.busy) | int(self.done) << 1])
        elif cmd == P.CMD_CYCLES:
            reply = P.le(42, 4)
        else:
            reply = bytes([P.NAK])
        if self.drop_next_reply:
            self.drop_next_reply = False
            return
        self.out += reply

    def read(self, n):
        if len(self.out) < n:
            got = len(self.out)
            self.out.clear()
            raise BridgeError("model", f"no reply: got {got} of {n} bytes")
        data = bytes(self.out[:n])
        del self.out[:n]
        return data

    def reset_input(self):
        self.out.clear()


@pytest.fixture
def fake_board():
    """A factory: ``fake_board(divisor=4, timeout_bits=64, ...)`` -> SimBoard around FakeBridged."""
    from fuseflow.boards.simboard import SimBoard

    def make(divisor=4, timeout_bits=64, build_id=0x12345678, run_cycles=RUN_CYCLES):
        dut = FakeBridged(divisor, timeout_bits, build_id, run_cycles)
        return SimBoard(divisor=divisor, timeout_bits=timeout_bits, dut=dut)
    return make


@pytest.fixture
def model_bridge():
    return ModelBridge


@pytest.fixture
def manifest():
    return fake_manifest()
