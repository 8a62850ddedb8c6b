"""The DMA engines of the AXI4 master port: a reader (AR/R bursts to a stream of beats) and a writer (words read
from an on-chip memory to AW/W bursts).

Both split a transfer of ``words`` beats from a byte address into bursts of at most ``burst`` beats that never
cross a 4 KiB boundary (:func:`fuseflow.samml.offchip.bursts`, the same rule), keep at most ``outstanding`` bursts
in flight, and are always ready for R and B. Timing, against a memory as :mod:`fuseflow.samml.offchip` describes
it: ``start`` in cycle ``s - 1`` (the cycle the previous transfer's ``done`` shows, so transfers follow each other
without a gap), the reader's first AR in cycle ``s`` and its ``done`` in the cycle of the last beat
(:func:`~fuseflow.samml.offchip.read_cycles` cycles from ``s``); the writer's first on-chip read in cycle ``s``, its
first AW and W in cycle ``s + STORE_SETUP`` and its ``done`` in the cycle of the last B
(:func:`~fuseflow.samml.offchip.write_cycles` cycles from ``s``). A transfer of 0 words is not allowed (the tile
table never holds one).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out, Signature

from ..samml.offchip import AXI_BOUNDARY_BYTES, STORE_SETUP, OffchipContract
from .memory import HOST_READ_LATENCY

#: AXI address width of the master port (byte addresses)
AXI_ADDR_WIDTH = 32
#: width of a transfer's word count
COUNT_WIDTH = 32
#: entries of the writer's FIFO (enough for one word per cycle behind the on-chip read latency)
WRITE_FIFO_DEPTH = 4

assert STORE_SETUP == HOST_READ_LATENCY + 1      # on-chip read, then the FIFO's registered level


def burst_beats(m, contract: OffchipContract, addr, left, name):
    """A signal holding the beats of the next burst from byte ``addr`` with ``left`` words left: at most
    ``contract.burst``, never across 4 KiB (the rule of :func:`fuseflow.samml.offchip.bursts`)."""
    wb = contract.word_bytes
    page = AXI_BOUNDARY_BYTES // wb
    shift = wb.bit_length() - 1
    to_boundary = Signal(range(page + 1), name=f"{name}_to_boundary")
    m.d.comb += to_boundary.eq(page - addr[shift:12])
    b = Signal(range(contract.burst + 1), name=f"{name}_beats")
    limit = Mux(to_boundary < contract.burst, to_boundary, contract.burst)
    m.d.comb += b.eq(Mux(left < limit, left, limit))
    return b


def _axi_constants(m, contract, prefix, channel):
    """Drive the fixed fields of an address channel: INCR bursts of full-width beats, id 0, normal access."""
    m.d.comb += [getattr(channel, f"{prefix}size").eq(contract.word_bytes.bit_length() - 1),
                 getattr(channel, f"{prefix}burst").eq(1), getattr(channel, f"{prefix}id").eq(0),
                 getattr(channel, f"{prefix}cache").eq(0b0011), getattr(channel, f"{prefix}prot").eq(0)]


def read_members(data_width):
    """The AR and R members of an AXI4 master (flow as seen from the master)."""
    return {"arid": Out(1), "araddr": Out(AXI_ADDR_WIDTH), "arlen": Out(8), "arsize": Out(3), "arburst": Out(2),
            "arcache": Out(4), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1), "rvalid": In(1), "rready": Out(1)}


def write_members(data_width):
    """The AW, W and B members of an AXI4 master (flow as seen from the master)."""
    return {"awid": Out(1), "awaddr": Out(AXI_ADDR_WIDTH), "awlen": Out(8), "awsize": Out(3), "awburst": Out(2),
            "awcache": Out(4), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1), "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1)}


def axi_read_signature(data_width):
    """The AXI4 read channels (AR, R) as the master sees them."""
    return Signature(read_members(data_width))


def axi_write_signature(data_width):
    """The AXI4 write channels (AW, W, B) as the master sees them."""
    return Signature(write_members(data_width))


#: a transfer request as its requester (the sequencer) sees it: ``start`` with ``addr`` (bytes) and ``words``;
#: ``done`` in the transfer's last cycle
TRANSFER = Signature({"start": Out(1), "addr": Out(AXI_ADDR_WIDTH), "words": Out(COUNT_WIDTH), "done": In(1)})


def beat_signature(data_width):
    """The reader's beats as it sends them: ``data`` of beat ``index`` (0, 1, ... of its transfer) when ``valid``."""
    return Signature({"valid": Out(1), "data": Out(data_width), "index": Out(COUNT_WIDTH)})


def onchip_read_signature(data_width):
    """An on-chip memory read as the writer sees it: ``data`` shows entry ``addr`` ``HOST_READ_LATENCY`` cycles
    later (the kernel top's host port)."""
    return Signature({"addr": Out(COUNT_WIDTH), "data": In(data_width)})


class DmaReader(wiring.Component):
    """Reads ``cmd.words`` beats from byte ``cmd.addr`` when ``cmd.start`` is high while idle; each beat shows
    once on ``beat``; ``cmd.done`` is high in the cycle of the last beat (``cmd.start`` is taken then too).
    ``axi``: the AXI4 read channels."""

    def __init__(self, contract: OffchipContract):
        self.contract = contract
        dw = contract.word_bytes * 8
        super().__init__({"cmd": In(TRANSFER), "axi": Out(axi_read_signature(dw)), "beat": Out(beat_signature(dw)),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        c = self.contract
        axi, cmd, beat = self.axi, self.cmd, self.beat
        ar_addr = Signal(AXI_ADDR_WIDTH)
        ar_left = Signal(COUNT_WIDTH)           # words not yet requested
        r_left = Signal(COUNT_WIDTH)            # words not yet received
        inflight = Signal(range(c.outstanding + 1))
        b = burst_beats(m, c, ar_addr, ar_left, "rd")
        _axi_constants(m, c, "ar", axi)
        ar_fire = Signal()
        r_fire = Signal()
        m.d.comb += [axi.araddr.eq(ar_addr), axi.arlen.eq(b - 1),
                     axi.arvalid.eq((ar_left != 0) & (inflight < c.outstanding)),
                     ar_fire.eq(axi.arvalid & axi.arready),
                     axi.rready.eq(1), r_fire.eq(axi.rvalid & (r_left != 0)),
                     self.busy.eq(r_left != 0),
                     beat.valid.eq(r_fire), beat.data.eq(axi.rdata),
                     cmd.done.eq(r_fire & (r_left == 1))]
        index = Signal(COUNT_WIDTH)
        m.d.comb += beat.index.eq(index)
        with m.If(ar_fire):
            m.d.sync += [ar_addr.eq(ar_addr + b * c.word_bytes), ar_left.eq(ar_left - b)]
        m.d.sync += inflight.eq(inflight + ar_fire - (r_fire & axi.rlast))
        with m.If(r_fire):
            m.d.sync += [r_left.eq(r_left - 1), index.eq(index + 1)]
        with m.If(cmd.start & ((r_left == 0) | cmd.done)):
            m.d.sync += [ar_addr.eq(cmd.addr), ar_left.eq(cmd.words), r_left.eq(cmd.words), index.eq(0)]
        return m


class DmaWriter(wiring.Component):
    """Writes ``cmd.words`` beats to byte ``cmd.addr`` when ``cmd.start`` is high while idle (or in the cycle of
    ``cmd.done``), reading entries ``0 .. words - 1`` of an on-chip memory through ``onchip`` (the caller selects
    the memory); ``cmd.done`` is high in the cycle of the last B. ``axi``: the AXI4 write channels."""

    def __init__(self, contract: OffchipContract, data_width: int):
        self.contract = contract
        self.data_width = data_width
        dw = contract.word_bytes * 8
        super().__init__({"cmd": In(TRANSFER), "axi": Out(axi_write_signature(dw)),
                          "onchip": Out(onchip_read_signature(data_width)), "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        c = self.contract
        axi, cmd = self.axi, self.cmd
        m.submodules.fifo = fifo = SyncFIFO(width=self.data_width, depth=WRITE_FIFO_DEPTH)
        # on-chip reads: one per cycle while the FIFO and the reads in flight leave room
        f_left = Signal(COUNT_WIDTH)
        f_index = Signal(COUNT_WIDTH)
        pipe = Signal(HOST_READ_LATENCY)        # reads in flight, by age
        issue = Signal()
        pending = sum(pipe[i] for i in range(HOST_READ_LATENCY))
        m.d.comb += [issue.eq((f_left != 0) & (fifo.level + pending < WRITE_FIFO_DEPTH)),
                     self.onchip.addr.eq(f_index)]
        m.d.sync += pipe.eq((pipe << 1) | issue)
        with m.If(issue):
            m.d.sync += [f_left.eq(f_left - 1), f_index.eq(f_index + 1)]
        m.d.comb += [fifo.w_en.eq(pipe[HOST_READ_LATENCY - 1]), fifo.w_data.eq(self.onchip.data)]
        # AW: once the first word is in the FIFO, one burst per cycle while fewer than outstanding wait for B
        aw_addr = Signal(AXI_ADDR_WIDTH)
        aw_left = Signal(COUNT_WIDTH)
        waiting = Signal(range(c.outstanding + 1))     # bursts whose AW went out and whose B has not come
        ahead = Signal(range(c.outstanding + 1))       # bursts whose AW went out and whose W beats have not all
        go = Signal()                                  # the first word has reached the FIFO
        ab = burst_beats(m, c, aw_addr, aw_left, "aw")
        _axi_constants(m, c, "aw", axi)
        aw_fire, w_fire, b_fire = Signal(), Signal(), Signal()
        m.d.comb += [axi.awaddr.eq(aw_addr), axi.awlen.eq(ab - 1),
                     axi.awvalid.eq((aw_left != 0) & (waiting < c.outstanding) & (go | fifo.r_rdy)),
                     aw_fire.eq(axi.awvalid & axi.awready)]
        with m.If(aw_fire):
            m.d.sync += [aw_addr.eq(aw_addr + ab * c.word_bytes), aw_left.eq(aw_left - ab)]
        with m.If(fifo.r_rdy):
            m.d.sync += go.eq(1)
        # W: the FIFO's words, burst by burst behind their AW; wlast from the same burst rule
        w_addr = Signal(AXI_ADDR_WIDTH)
        w_left = Signal(COUNT_WIDTH)
        w_beat = Signal(range(c.burst + 1))
        wb = burst_beats(m, c, w_addr, w_left, "w")
        last = Signal()
        m.d.comb += [last.eq(w_beat + 1 == wb),
                     axi.wvalid.eq(fifo.r_rdy & ((ahead != 0) | aw_fire)),
                     axi.wdata.eq(fifo.r_data), axi.wstrb.eq(-1), axi.wlast.eq(last),
                     w_fire.eq(axi.wvalid & axi.wready), fifo.r_en.eq(w_fire)]
        with m.If(w_fire):
            with m.If(last):
                m.d.sync += [w_beat.eq(0), w_addr.eq(w_addr + wb * c.word_bytes), w_left.eq(w_left - wb)]
            with m.Else():
                m.d.sync += w_beat.eq(w_beat + 1)
        m.d.sync += ahead.eq(ahead + aw_fire - (w_fire & last))
        # B
        m.d.comb += [axi.bready.eq(1), b_fire.eq(axi.bvalid & (waiting != 0))]
        m.d.sync += waiting.eq(waiting + aw_fire - b_fire)
        m.d.comb += [self.busy.eq((w_left != 0) | (waiting != 0)),
                     cmd.done.eq(b_fire & (waiting == 1) & (aw_left == 0) & (w_left == 0))]
        with m.If(cmd.start & (~self.busy | cmd.done)):
            m.d.sync += [f_left.eq(cmd.words), f_index.eq(0), aw_addr.eq(cmd.addr), aw_left.eq(cmd.words),
                         w_addr.eq(cmd.addr), w_left.eq(cmd.words), w_beat.eq(0), go.eq(0)]
        return m


__all__ = ["DmaReader", "DmaWriter", "TRANSFER", "axi_read_signature", "axi_write_signature", "beat_signature",
           "onchip_read_signature", "burst_beats", "read_members", "write_members", "AXI_ADDR_WIDTH"]
