"""The tile sequencer of the AXI4 master port: walks the tile table in off-chip memory and runs the kernel top once
per tile (load its inputs by DMA, start, wait for done, store its outputs by DMA).

The tile table (built by :mod:`fuseflow.hw.offchip_image`, layout in docs/hardware.md) is ``tiles`` records of
:func:`~fuseflow.samml.offchip.record_words` words, one every :func:`~fuseflow.samml.offchip.record_stride` bytes
from ``table``; each word is one beat of the master port (its low 32 bits hold the field):

- word 0: the tile's number of loads (bits 0-7) and of stores (bits 8-15);
- then one transfer per memory at most, three words each: the memory's ``sel`` (the manifest's), the byte
  address in off-chip memory, the number of words (beats, at least 1). The loads come first, then the stores; beat
  ``b`` of a transfer is row ``b`` of the memory: :func:`~fuseflow.samml.offchip.entries_per_beat` entries
  (entries ``b * k .. b * k + k - 1``, each in its slot; with ``pack`` 0 or k = 1 the entry in the beat's low
  bits), written or read in one cycle (:meth:`fuseflow.hw.top.ProgramTop.pack_host`).

Per tile: the record is read (one DMA read), the loads follow one another without a gap, the kernel's start is
pulsed in the cycle after the last load's last beat, and once the kernel shows done the stores follow one
another. ``cycles`` counts every cycle from the one after ``start`` to the one before ``done`` rises
(:func:`fuseflow.samml.offchip.tiled_cycles`); ``kernel_cycles`` sums the kernel top's ``cycles`` over the tiles.

With ``buffers`` 2 the inputs that change between tiles have two banks in the kernel top
(:meth:`fuseflow.hw.top.ProgramTop.double_buffer`): ``bank_host`` is the bank the loads fill, ``bank_run`` the one
the kernel reads. The first tile's record and loads come first; then, per tile, the kernel's start is pulsed (its
bank is the one just filled, and the banks swap), the next tile's record and loads follow at once into the other
bank while the kernel runs, and once both the loads and the run are done the tile's stores follow (the record's
stores are kept aside when the start is pulsed, as the next record replaces it); then the next tile starts. The
outputs have one bank, so a tile's stores end before the next tile runs. The cycles are
:func:`~fuseflow.samml.offchip.tiled_cycles`' for ``buffers`` 2 (its sequencer cycles per tile:
:data:`~fuseflow.samml.offchip.OVERLAP_OVERHEAD`).
"""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out, Signature

from ..samml.offchip import OffchipContract, record_stride, record_words
from .dma import AXI_ADDR_WIDTH, COUNT_WIDTH, TRANSFER, beat_signature, onchip_read_signature

#: width of the sequencer's counters and control registers
SEQ_WIDTH = 32


def kernel_signature():
    """The kernel top's run control as the sequencer sees it."""
    return Signature({"start": Out(1), "done": In(1), "cycles": In(SEQ_WIDTH)})


def host_signature(sel_width, addr_width, data_width):
    """The kernel top's host port (:class:`~fuseflow.hw.top.ProgramTop`) as the sequencer drives it."""
    return Signature({"sel": Out(sel_width), "addr": Out(addr_width), "wdata": Out(data_width), "we": Out(1),
                      "rdata": In(data_width)})


class TileSequencer(wiring.Component):
    """Runs the tiles of the table at ``table`` (``tiles`` records) when ``start`` is high while idle. ``rd`` and
    ``beat``: a :class:`~fuseflow.hw.dma.DmaReader`; ``wr`` and ``onchip``: a :class:`~fuseflow.hw.dma.DmaWriter`;
    ``kernel`` and ``host``: the kernel top (:class:`~fuseflow.hw.top.ProgramTop`); with ``buffers`` 2 also
    ``bank_run`` and ``bank_host``, its banks (module doc)."""

    def __init__(self, contract: OffchipContract, memories: int, sel_width: int, addr_width: int, data_width: int):
        self.contract = contract
        self.memories = memories
        self.words = record_words(memories)
        self.stride = record_stride(memories, contract)
        dw = contract.word_bytes * 8
        banks = {"bank_run": Out(1), "bank_host": Out(1)} if contract.buffers == 2 else {}
        super().__init__(banks | {
            "start": In(1), "table": In(AXI_ADDR_WIDTH), "tiles": In(SEQ_WIDTH),
            "busy": Out(1), "done": Out(1), "cycles": Out(SEQ_WIDTH), "kernel_cycles": Out(SEQ_WIDTH),
            "tiles_done": Out(SEQ_WIDTH),
            "rd": Out(TRANSFER), "beat": In(beat_signature(dw)),
            "wr": Out(TRANSFER), "onchip": In(onchip_read_signature(data_width)),
            "kernel": Out(kernel_signature()), "host": Out(host_signature(sel_width, addr_width, data_width)),
        })

    def elaborate(self, platform):
        if self.contract.buffers == 2:
            return self._elaborate_double()
        m = Module()
        n = self.memories
        slot_range = range(2 * n + 2)
        n_loads, n_stores = Signal(8), Signal(8)
        sels = Array(Signal(len(self.host.sel), name=f"slot{j}_sel") for j in range(n))
        addrs = Array(Signal(AXI_ADDR_WIDTH, name=f"slot{j}_addr") for j in range(n))
        counts = Array(Signal(COUNT_WIDTH, name=f"slot{j}_words") for j in range(n))
        cur = Signal(slot_range)                       # the transfer in progress (loads, then stores)
        nxt = Signal(slot_range)
        tile_addr = Signal(AXI_ADDR_WIDTH)
        left = Signal(SEQ_WIDTH)
        m.d.comb += [nxt.eq(cur + 1), self.onchip.data.eq(self.host.rdata),
                     self.host.sel.eq(sels[cur]), self.host.wdata.eq(self.beat.data)]

        def read(addr, words):
            m.d.comb += [self.rd.start.eq(1), self.rd.addr.eq(addr), self.rd.words.eq(words)]

        def write(slot):
            m.d.comb += [self.wr.start.eq(1), self.wr.addr.eq(addrs[slot]), self.wr.words.eq(counts[slot])]

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
                with m.If(self.beat.valid):
                    with m.Switch(self.beat.index):
                        with m.Case(0):
                            m.d.sync += [n_loads.eq(self.beat.data[0:8]), n_stores.eq(self.beat.data[8:16])]
                        for j in range(n):
                            for f, regs in enumerate((sels, addrs, counts)):
                                with m.Case(1 + 3 * j + f):
                                    m.d.sync += regs[j].eq(self.beat.data)
                with m.If(self.rd.done):
                    m.next = "LOAD_GO"
            with m.State("LOAD_GO"):
                m.d.sync += cur.eq(0)
                with m.If(n_loads == 0):
                    m.next = "KSTART"
                with m.Else():
                    read(addrs[0], counts[0])
                    m.next = "LOAD"
            with m.State("LOAD"):                     # beats to the memory of slot cur, entry = beat index
                m.d.comb += [self.host.addr.eq(self.beat.index), self.host.we.eq(self.beat.valid)]
                with m.If(self.rd.done):
                    with m.If(nxt < n_loads):
                        read(addrs[nxt], counts[nxt])
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        m.next = "KSTART"
            with m.State("KSTART"):
                m.d.comb += self.kernel.start.eq(1)
                m.next = "KRUN"
            with m.State("KRUN"):
                with m.If(self.kernel.done):
                    m.d.sync += self.kernel_cycles.eq(self.kernel_cycles + self.kernel.cycles)
                    m.next = "STORE_GO"
            with m.State("STORE_GO"):
                m.d.sync += cur.eq(n_loads)
                with m.If(n_stores == 0):
                    next_tile()
                with m.Else():
                    write(n_loads)
                    m.next = "STORE"
            with m.State("STORE"):                    # the writer reads the memory of slot cur
                m.d.comb += self.host.addr.eq(self.onchip.addr)
                with m.If(self.wr.done):
                    with m.If(nxt < n_loads + n_stores):
                        write(nxt)
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        next_tile()
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m

    def _elaborate_double(self):
        """``buffers`` 2 (module doc): the next tile's record and loads during the kernel's run."""
        m = Module()
        n = self.memories
        slot_range = range(2 * n + 2)
        n_loads, n_stores = Signal(8), Signal(8)
        sels = Array(Signal(len(self.host.sel), name=f"slot{j}_sel") for j in range(n))
        addrs = Array(Signal(AXI_ADDR_WIDTH, name=f"slot{j}_addr") for j in range(n))
        counts = Array(Signal(COUNT_WIDTH, name=f"slot{j}_words") for j in range(n))
        # the running tile's record (its stores), kept while the next tile's record replaces the slots
        s_first, s_count = Signal(8), Signal(8)
        s_sels = Array(Signal(len(self.host.sel), name=f"kept{j}_sel") for j in range(n))
        s_addrs = Array(Signal(AXI_ADDR_WIDTH, name=f"kept{j}_addr") for j in range(n))
        s_counts = Array(Signal(COUNT_WIDTH, name=f"kept{j}_words") for j in range(n))
        cur = Signal(slot_range)                       # the transfer in progress (loads, then stores)
        nxt = Signal(slot_range)
        tile_addr = Signal(AXI_ADDR_WIDTH)
        left = Signal(SEQ_WIDTH)                       # tiles not started
        pending = Signal()                             # a tile started whose stores are due
        m.d.comb += [nxt.eq(cur + 1), self.onchip.data.eq(self.host.rdata),
                     self.host.sel.eq(sels[cur]), self.host.wdata.eq(self.beat.data)]

        def read(addr, words):
            m.d.comb += [self.rd.start.eq(1), self.rd.addr.eq(addr), self.rd.words.eq(words)]

        def write(slot):
            m.d.comb += [self.wr.start.eq(1), self.wr.addr.eq(s_addrs[slot]), self.wr.words.eq(s_counts[slot])]

        def loaded():                                  # the loads are in: run, or wait for the running tile
            with m.If(pending):
                m.next = "WAIT"
            with m.Else():
                m.next = "KSTART"

        def stored():
            m.d.sync += [self.tiles_done.eq(self.tiles_done + 1), pending.eq(0)]
            with m.If(left != 0):
                m.next = "KSTART"
            with m.Else():
                m.next = "TILE"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [tile_addr.eq(self.table), left.eq(self.tiles), self.cycles.eq(0),
                                 self.kernel_cycles.eq(0), self.tiles_done.eq(0), self.done.eq(0),
                                 self.bank_host.eq(0), pending.eq(0)]
                    m.next = "TILE"
            with m.State("TILE"):                     # the first tile's record, or finish
                with m.If(left == 0):
                    m.d.sync += self.done.eq(1)
                    m.next = "IDLE"
                with m.Else():
                    read(tile_addr, self.words)
                    m.next = "RECORD"
            with m.State("RECORD"):
                with m.If(self.beat.valid):
                    with m.Switch(self.beat.index):
                        with m.Case(0):
                            m.d.sync += [n_loads.eq(self.beat.data[0:8]), n_stores.eq(self.beat.data[8:16])]
                        for j in range(n):
                            for f, regs in enumerate((sels, addrs, counts)):
                                with m.Case(1 + 3 * j + f):
                                    m.d.sync += regs[j].eq(self.beat.data)
                with m.If(self.rd.done):
                    m.next = "LOAD_GO"
            with m.State("LOAD_GO"):
                m.d.sync += cur.eq(0)
                with m.If(n_loads == 0):
                    loaded()
                with m.Else():
                    read(addrs[0], counts[0])
                    m.next = "LOAD"
            with m.State("LOAD"):                     # beats to bank bank_host of slot cur's memory
                m.d.comb += [self.host.addr.eq(self.beat.index), self.host.we.eq(self.beat.valid)]
                with m.If(self.rd.done):
                    with m.If(nxt < n_loads):
                        read(addrs[nxt], counts[nxt])
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        loaded()
            with m.State("KSTART"):                   # run the loaded tile; the next tile's record at once
                m.d.comb += self.kernel.start.eq(1)
                m.d.sync += [self.bank_run.eq(self.bank_host), self.bank_host.eq(~self.bank_host), pending.eq(1),
                             tile_addr.eq(tile_addr + self.stride), left.eq(left - 1),
                             s_first.eq(n_loads), s_count.eq(n_stores)]
                m.d.sync += [kept.eq(slot) for keep, slots in ((s_sels, sels), (s_addrs, addrs),
                                                                (s_counts, counts))
                             for kept, slot in zip(keep, slots)]
                with m.If(left != 1):
                    read(tile_addr + self.stride, self.words)
                    m.next = "RECORD"
                with m.Else():
                    m.next = "WAIT"
            with m.State("WAIT"):                     # the running tile's end
                with m.If(self.kernel.done):
                    m.d.sync += self.kernel_cycles.eq(self.kernel_cycles + self.kernel.cycles)
                    m.next = "STORE_GO"
            with m.State("STORE_GO"):
                m.d.sync += cur.eq(s_first)
                with m.If(s_count == 0):
                    stored()
                with m.Else():
                    write(s_first)
                    m.next = "STORE"
            with m.State("STORE"):                    # the writer reads the memory of kept slot cur
                m.d.comb += [self.host.addr.eq(self.onchip.addr), self.host.sel.eq(s_sels[cur])]
                with m.If(self.wr.done):
                    with m.If(nxt < s_first + s_count):
                        write(nxt)
                        m.d.sync += cur.eq(nxt)
                    with m.Else():
                        stored()
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        return m


__all__ = ["TileSequencer", "kernel_signature", "host_signature", "SEQ_WIDTH"]
