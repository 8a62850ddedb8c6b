"""UART host bridge gateware: the protocol of :mod:`fuseflow.boards.protocol` mapped onto a kernel top's host port.

- :class:`UARTRx` / :class:`UARTTx`: 8N1 UART with a fixed clock divisor (clocks per bit); the receiver
  synchronises ``rx`` (two flip-flops), checks the start bit at mid-bit and drops bytes with a bad stop bit.
- :class:`HostBridge`: the command parser (a :class:`~amaranth.lib.wiring.Component`); its host-side ports have
  the names of the kernel top's ports (``start``, ``busy``, ``done``, ``cycles``, ``host_*``) with the flows
  flipped, so :func:`connect_top` wires them one to one.
- :class:`BridgedTop`: a kernel top plus its bridge, with the UART lines ``rx`` (In) and ``tx`` (Out) and the
  ``busy``/``done`` status as its only ports: what the simulated host talks to and what a board wraps.

The kernel top shows an entry on ``host_rdata`` ``HOST_READ_LATENCY`` (2) cycles after ``host_sel``/``host_addr``; the
bridge waits that long per word before it latches it. Host writes go to the top's write ports, which the top
ignores while a run is busy: the bridge then answers ``'B'`` instead of ``'K'``.
"""

from amaranth.hdl import Cat, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

from ..errors import HardwareError
from ..hw.memory import HOST_READ_LATENCY
from . import protocol as P


class UARTRx(Elaboratable):
    """8N1 receiver: ``data`` is valid for the one cycle ``valid`` is high; ``error`` pulses on a bad stop bit."""

    def __init__(self, divisor):
        if divisor < 4:
            self._MustUse__silence = True
            raise HardwareError("uart", f"clock divisor {divisor} is below 4 clocks per bit")
        self.divisor = int(divisor)
        self.rx = Signal(init=1)
        self.data = Signal(8)
        self.valid = Signal()
        self.error = Signal()

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        rx = Signal(init=1)
        m.submodules.sync_rx = FFSynchronizer(self.rx, rx, init=1)
        ctr = Signal(range(d))
        nbit = Signal(range(8))
        sh = Signal(8)
        m.d.sync += [self.valid.eq(0), self.error.eq(0)]
        with m.If(ctr != 0):
            m.d.sync += ctr.eq(ctr - 1)
        with m.FSM(name="uart_rx"):
            with m.State("IDLE"):
                with m.If(~rx):
                    m.d.sync += ctr.eq(d // 2 - 1)
                    m.next = "START"
            with m.State("START"):
                with m.If(ctr == 0):
                    with m.If(~rx):
                        m.d.sync += [ctr.eq(d - 1), nbit.eq(0)]
                        m.next = "DATA"
                    with m.Else():                      # a glitch, not a start bit
                        m.next = "IDLE"
            with m.State("DATA"):
                with m.If(ctr == 0):
                    m.d.sync += [sh.eq(Cat(sh[1:], rx)), ctr.eq(d - 1), nbit.eq(nbit + 1)]
                    with m.If(nbit == 7):
                        m.next = "STOP"
            with m.State("STOP"):
                with m.If(ctr == 0):
                    with m.If(rx):
                        m.d.sync += [self.data.eq(sh), self.valid.eq(1)]
                    with m.Else():
                        m.d.sync += self.error.eq(1)
                    m.next = "IDLE"
        return m


class UARTTx(Elaboratable):
    """8N1 transmitter: pulse ``start`` with ``data`` while ``ready``; ``tx`` idles high."""

    def __init__(self, divisor):
        if divisor < 4:
            self._MustUse__silence = True
            raise HardwareError("uart", f"clock divisor {divisor} is below 4 clocks per bit")
        self.divisor = int(divisor)
        self.data = Signal(8)
        self.start = Signal()
        self.ready = Signal()
        self.tx = Signal(init=1)

    def elaborate(self, platform):
        m = Module()
        d = self.divisor
        sh = Signal(10)
        n = Signal(range(11))
        ctr = Signal(range(d))
        m.d.comb += self.ready.eq((n == 0) & (ctr == 0))
        with m.If(ctr != 0):
            m.d.sync += ctr.eq(ctr - 1)
        with m.Elif(n != 0):
            m.d.sync += [self.tx.eq(sh[0]), sh.eq(sh[1:]), n.eq(n - 1), ctr.eq(d - 1)]
        with m.Elif(self.start):
            m.d.sync += [sh.eq(Cat(Const(0, 1), self.data, Const(1, 1))), n.eq(10)]
        return m


class HostBridge(wiring.Component):
    """The command parser. ``layout``: :class:`~fuseflow.boards.protocol.Layout`; ``widths``: the kernel top's
    ``(sel_width, addr_width, data_width)``; ``divisor``: clocks per UART bit; ``build_id``: 32-bit id sent
    in the ``I`` reply; ``timeout_bits``: bit-times of silence after which an incomplete command is dropped."""

    def __init__(self, widths, divisor, build_id=0, timeout_bits=P.DEFAULT_TIMEOUT_BITS, cycles_width=32):
        sw, aw, dw = (int(w) for w in widths)
        self.layout = P.Layout.from_widths(sw, aw, dw)
        if self.layout.sel_bytes > 2 or self.layout.addr_bytes > 4:
            raise HardwareError("bridge", f"host port too wide for the bridge (sel {sw} bits, addr {aw} bits)")
        self.divisor = int(divisor)
        self.build_id = int(build_id) & 0xFFFFFFFF
        self.timeout = max(2, int(timeout_bits)) * self.divisor
        self.widths = (sw, aw, dw)
        super().__init__({
            "rx": In(1, init=1),
            "tx": Out(1, init=1),
            "start": Out(1),
            "busy": In(1),
            "done": In(1),
            "cycles": In(cycles_width),
            "host_sel": Out(sw),
            "host_addr": Out(aw),
            "host_wdata": Out(dw),
            "host_we": Out(1),
            "host_rdata": In(dw),
        })

    def elaborate(self, platform):
        m = Module()
        L = self.layout
        sw, aw, dw = self.widths
        m.submodules.rx = rx = UARTRx(self.divisor)
        m.submodules.tx = tx = UARTTx(self.divisor)
        m.d.comb += [rx.rx.eq(self.rx), self.tx.eq(tx.tx)]

        cmd = Signal(8)
        hb = L.header_bytes
        hdr = Signal(8 * hb)
        hdr_n = Signal(range(hb + 1))
        sel = Signal(8 * L.sel_bytes)
        addr = Signal(8 * L.addr_bytes)
        count = Signal(16)
        wbuf = Signal(8 * L.data_bytes)
        db_n = Signal(range(L.data_bytes + 1))
        wbusy = Signal()
        tb_bytes = max(P.IDENT_BYTES, L.data_bytes, P.CYCLES_BYTES)
        txbuf = Signal(8 * tb_bytes)
        txn = Signal(range(tb_bytes + 1))
        rwait = Signal(range(HOST_READ_LATENCY + 1))
        quiet = Signal(range(self.timeout + 1))
        ident = int.from_bytes(P.ident_bytes(L, self.build_id), "little")

        m.d.comb += [
            self.host_sel.eq(sel),
            self.host_addr.eq(addr),
            self.host_wdata.eq(wbuf),
            tx.data.eq(txbuf[:8]),
        ]

        def reply(byte):
            m.d.sync += [txbuf.eq(byte), txn.eq(1)]
            m.next = "SEND"

        # silence watchdog for commands left incomplete
        with m.If(rx.valid):
            m.d.sync += quiet.eq(0)
        with m.Elif(quiet != self.timeout):
            m.d.sync += quiet.eq(quiet + 1)
        timed_out = quiet == self.timeout

        with m.FSM(name="bridge"):
            with m.State("IDLE"):
                with m.If(rx.valid):
                    m.d.sync += cmd.eq(rx.data)
                    with m.Switch(rx.data):
                        with m.Case(P.CMD_IDENT):
                            m.d.sync += [txbuf.eq(ident), txn.eq(P.IDENT_BYTES)]
                            m.next = "SEND"
                        with m.Case(P.CMD_WRITE, P.CMD_READ):
                            m.d.sync += [hdr_n.eq(hb), wbusy.eq(0)]
                            m.next = "HEADER"
                        with m.Case(P.CMD_START):
                            with m.If(self.busy):
                                reply(P.BUSY)
                            with m.Else():
                                m.d.comb += self.start.eq(1)
                                reply(P.ACK)
                        with m.Case(P.CMD_STATUS):
                            reply(Cat(self.busy, self.done))
                        with m.Case(P.CMD_CYCLES):
                            m.d.sync += [txbuf.eq(self.cycles), txn.eq(P.CYCLES_BYTES)]
                            m.next = "SEND"
                        with m.Default():
                            reply(P.NAK)
            with m.State("HEADER"):
                with m.If(rx.valid):
                    m.d.sync += [hdr.eq(Cat(hdr[8:], rx.data)), hdr_n.eq(hdr_n - 1)]
                    with m.If(hdr_n == 1):
                        m.next = "PARSE"
                with m.Elif(timed_out):
                    m.next = "IDLE"
            with m.State("PARSE"):
                s0, a0 = 8 * L.sel_bytes, 8 * (L.sel_bytes + L.addr_bytes)
                n = hdr[a0:a0 + 16]
                m.d.sync += [sel.eq(hdr[:s0]), addr.eq(hdr[s0:a0]), count.eq(n), db_n.eq(L.data_bytes),
                             rwait.eq(HOST_READ_LATENCY)]
                with m.If(cmd == P.CMD_WRITE):
                    with m.If(n == 0):
                        reply(P.ACK)
                    with m.Else():
                        m.next = "WDATA"
                with m.Else():
                    with m.If(n == 0):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "RWAIT"
            with m.State("WDATA"):
                with m.If(rx.valid):
                    m.d.sync += [wbuf.eq(Cat(wbuf[8:], rx.data)), db_n.eq(db_n - 1)]
                    with m.If(db_n == 1):
                        m.next = "WRITE"
                with m.Elif(timed_out):
                    m.next = "IDLE"
            with m.State("WRITE"):
                m.d.comb += self.host_we.eq(1)
                m.d.sync += [addr.eq(addr + 1), count.eq(count - 1), db_n.eq(L.data_bytes)]
                with m.If(count == 1):
                    reply(Mux(wbusy | self.busy, P.BUSY, P.ACK))
                with m.Else():
                    m.d.sync += wbusy.eq(wbusy | self.busy)
                    m.next = "WDATA"
            with m.State("RWAIT"):
                # host_addr has shown addr since the cycle after PARSE (or SEND) set rwait: host_rdata has its
                # entry HOST_READ_LATENCY cycles later, when rwait reaches 0
                m.d.sync += rwait.eq(rwait - 1)
                with m.If(rwait == 0):
                    m.d.sync += [txbuf.eq(self.host_rdata), txn.eq(L.data_bytes), addr.eq(addr + 1),
                                 count.eq(count - 1)]
                    m.next = "SEND"
            with m.State("SEND"):
                with m.If(txn == 0):
                    with m.If((cmd == P.CMD_READ) & (count != 0)):
                        m.d.sync += rwait.eq(HOST_READ_LATENCY)
                        m.next = "RWAIT"
                    with m.Else():
                        m.next = "IDLE"
                with m.Elif(tx.ready):
                    m.d.comb += tx.start.eq(1)
                    m.d.sync += [txbuf.eq(txbuf >> 8), txn.eq(txn - 1)]
        return m


def connect_top(m, bridge, top):
    """Wire a :class:`HostBridge` to a kernel top (:class:`fuseflow.hw.top.ProgramTop`)."""
    m.d.comb += [
        top.start.eq(bridge.start),
        bridge.busy.eq(top.busy),
        bridge.done.eq(top.done),
        bridge.cycles.eq(top.cycles),
        top.host_sel.eq(bridge.host_sel),
        top.host_addr.eq(bridge.host_addr),
        top.host_wdata.eq(bridge.host_wdata),
        top.host_we.eq(bridge.host_we),
        bridge.host_rdata.eq(top.host_rdata),
    ]


class BridgedTop(Elaboratable):
    """A kernel top behind a UART bridge. ``build``: :class:`fuseflow.hw.elaborate.Build`; ``divisor``: clocks
    per UART bit. Ports: ``rx`` (host -> FPGA), ``tx`` (FPGA -> host), ``busy``, ``done``."""

    def __init__(self, build, divisor, timeout_bits=P.DEFAULT_TIMEOUT_BITS):
        top = build.top
        self.build = build
        self.manifest = build.manifest()
        self.build_id = P.build_id(self.manifest)
        widths = (len(top.host_sel), len(top.host_addr), len(top.host_wdata))
        host = self.manifest["host"]
        if widths != (host["sel_width"], host["addr_width"], host["data_width"]):
            raise HardwareError("bridge", f"the kernel top's host port widths {widths} differ from its manifest's")
        self.bridge = HostBridge(widths, divisor, self.build_id, timeout_bits, cycles_width=len(top.cycles))
        self.layout = self.bridge.layout
        self.rx = Signal(init=1)
        self.tx = Signal(init=1)
        self.busy = Signal()
        self.done = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.kernel = top = self.build.top
        m.submodules.bridge = br = self.bridge
        connect_top(m, br, top)
        m.d.comb += [br.rx.eq(self.rx), self.tx.eq(br.tx), self.busy.eq(top.busy), self.done.eq(top.done)]
        return m
