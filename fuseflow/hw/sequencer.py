"""The tile sequencer of the AXI4 master port: walks the tile table in off-chip memory and runs the kernel top once
per tile (load its inputs by DMA, start, wait for done, store its outputs by DMA).

The tile table (built by :mod:`fuseflow.hw.offchip_image`, layout in docs/hardware.md) is ``tiles`` records of
:func:`~fuseflow.samml.offchip.record_words` words, one every :func:`~fuseflow.samml.offchip.record_stride` bytes
from ``table``; each word is one beat of the master port (its low 32 bits hold the field):

- word 0: the tile's number of loads (bits 0-7) and of stores (bits 8-15);
- then one transfer per memory at most, three words each: the memory's ``sel`` (the manifest's), the byte
  address in off-chip memory, the number of words (at least 1). The loads come first, then the stores; a transfer
  moves entries ``0 .. words - 1`` of the memory, one entry per beat (the entry in the beat's low bits).

Per tile: the record is read (one DMA read), the loads follow one another without a gap, the kernel's start is
pulsed in the cycle after the last load's last beat, and once the kernel shows done the stores follow one
another. ``cycles`` counts every cycle from the one after ``start`` to the one before ``done`` rises
(:func:`fuseflow.samml.offchip.tiled_cycles`); ``kernel_cycles`` sums the kernel top's ``cycles`` over the tiles.
"""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..samml.offchip import OffchipContract, record_stride, record_words
from .dma import AXI_ADDR_WIDTH, COUNT_WIDTH

#: width of the sequencer's counters and control registers
SEQ_WIDTH = 32


class TileSequencer(wiring.Component):
    """Runs the tiles of the table at ``table`` (``tiles`` records) when ``start`` is high while idle. ``rd_*``:
    a :class:`~fuseflow.hw.dma.DmaReader`; ``wr_*``: a :class:`~fuseflow.hw.dma.DmaWriter`; ``k_*`` and
    ``host_*``: the kernel top (:class:`~fuseflow.hw.top.ProgramTop`)."""

    def __init__(self, contract: OffchipContract, memories: int, sel_width: int, addr_width: int, data_width: int):
        self.contract = contract
        self.memories = memories
        self.words = record_words(memories)
        self.stride = record_stride(memories, contract)
        self.host_addr_width = addr_width
        dw = contract.word_bytes * 8
        super().__init__({
            "start": In(1), "table": In(AXI_ADDR_WIDTH), "tiles": In(SEQ_WIDTH),
            "busy": Out(1), "done": Out(1), "cycles": Out(SEQ_WIDTH), "kernel_cycles": Out(SEQ_WIDTH),
            "tiles_done": Out(SEQ_WIDTH),
            "rd_start": Out(1), "rd_addr": Out(AXI_ADDR_WIDTH), "rd_words": Out(COUNT_WIDTH), "rd_done": In(1),
            "rd_beat_valid": In(1), "rd_beat_data": In(dw), "rd_beat_index": In(COUNT_WIDTH),
            "wr_start": Out(1), "wr_addr": Out(AXI_ADDR_WIDTH), "wr_words": Out(COUNT_WIDTH), "wr_done": In(1),
            "wr_rd_addr": In(COUNT_WIDTH),
            "k_start": Out(1), "k_done": In(1), "k_cycles": In(SEQ_WIDTH),
            "host_sel": Out(sel_width), "host_addr": Out(addr_width), "host_wdata": Out(data_width),
            "host_we": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.memories
        slot_range = range(2 * n + 2)
        n_loads, n_stores = Signal(8), Signal(8)
        sels = Array(Signal(len(self.host_sel), name=f"slot{j}_sel") for j in range(n))
        addrs = Array(Signal(AXI_ADDR_WIDTH, name=f"slot{j}_addr") for j in range(n))
        counts = Array(Signal(COUNT_WIDTH, name=f"slot{j}_words") for j in range(n))
        cur = Signal(slot_range)                       # the transfer in progress (loads, then stores)
        nxt = Signal(slot_range)
        tile_addr = Signal(AXI_ADDR_WIDTH)
        left = Signal(SEQ_WIDTH)
        m.d.comb += [nxt.eq(cur + 1),
                     self.host_sel.eq(sels[cur]), self.host_wdata.eq(self.rd_beat_data)]

        def read(addr, words):
            m.d.comb += [self.rd_start.eq(1), self.rd_addr.eq(addr), self.rd_words.eq(words)]

        def write(slot):
            m.d.comb += [self.wr_start.eq(1), self.wr_addr.eq(addrs[slot]), self.wr_words.eq(counts[slot])]

        def next_tile():
            m.d.sync += [tile_addr.eq(tile_addr + self.stride), left.eq(left - 1),
                         self.tiles_done.eq(self.tiles_done + 1)]
            m.next = "TILE"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [tile_addr.eq(self.table), left.eq(self.tiles), self.cycles.eq(0),
                                 self.kernel_cycles.eq(0), self.tiles_done.eq(0), self.done.eq(0)]
                    m.next = "TILE"
            with m.State("TILE"):                     # request the tile's record, or finish
                with m.If(left == 0):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    read(tile_addr, self.words)
                    m.next = "RECORD"
            with m.State("RECORD"):
                with m.If(self.rd_beat_valid):
                    with m.Switch(self.rd_beat_index):
                        with m.Case(0):
                            m.d.sync += [n_loads.eq(self.rd_beat_data[0:8]), n_stores.eq(self.rd_beat_data[8:16])]
                        for j in range(n):
                            for f, regs in enumerate((sels, addrs, counts)):
                                with m.Case(1 + 3 * j + f):
                                    m.d.sync += regs[j].eq(self.rd_beat_data)
                with m.If(self.rd_done):
                    m.next = "LOAD_GO"
            with m.State("LOAD_GO"):
                m.d.sync += cur.eq(0)
                with m.If(n_loads == 0):
                    m.next = "KSTART"
                with m.Else():
                    read(addrs[0], counts[0])
                    m.next = "LOAD"
            with m.State("LOAD"):                     # beats to the memory of slot cur, entry = beat index
                m.d.comb += [self.host_addr.eq(self.rd_beat_index), self.host_we.eq(self.rd_beat_valid)]
                with m.If(self.rd_done):
                    with m.If(nxt < n_loads):
                        read(addrs[nxt], counts[nxt])
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        m.next = "KSTART"
            with m.State("KSTART"):
                m.d.comb += self.k_start.eq(1)
                m.next = "KRUN"
            with m.State("KRUN"):
                with m.If(self.k_done):
                    m.d.sync += self.kernel_cycles.eq(self.kernel_cycles + self.k_cycles)
                    m.next = "STORE_GO"
            with m.State("STORE_GO"):
                m.d.sync += cur.eq(n_loads)
                with m.If(n_stores == 0):
                    next_tile()
                with m.Else():
                    write(n_loads)
                    m.next = "STORE"
            with m.State("STORE"):                    # the writer reads the memory of slot cur
                m.d.comb += self.host_addr.eq(self.wr_rd_addr)
                with m.If(self.wr_done):
                    with m.If(nxt < n_loads + n_stores):
                        write(nxt)
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        next_tile()
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m


__all__ = ["TileSequencer", "SEQ_WIDTH"]
