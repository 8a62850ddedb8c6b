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


class _Slots:
    """A tile record's transfers in registers, one slot per memory at most.

    Attributes
    ----------
    sel : Array of Signal
        The memory of each slot (the manifest's ``sel``), registers ``{prefix}{j}_sel``.
    addr : Array of Signal
        The byte address of each slot's transfer in off-chip memory, registers ``{prefix}{j}_addr``.
    words : Array of Signal
        The number of words (beats) of each slot's transfer, registers ``{prefix}{j}_words``.
    """

    def __init__(self, memories: int, sel_width: int, prefix: str):
        self.sel = Array(Signal(sel_width, name=f"{prefix}{j}_sel") for j in range(memories))
        self.addr = Array(Signal(AXI_ADDR_WIDTH, name=f"{prefix}{j}_addr") for j in range(memories))
        self.words = Array(Signal(COUNT_WIDTH, name=f"{prefix}{j}_words") for j in range(memories))


class _Walk:
    """The registers of the walk over the tile table that both state machines keep.

    Attributes
    ----------
    n_loads, n_stores : Signal
        The numbers of loads and of stores of the record last read.
    slots : _Slots
        Its transfers: the loads in slots ``0 .. n_loads - 1``, then the stores.
    cur, nxt : Signal
        The slot of the transfer in progress (loads, then stores), and the one after it.
    tile_addr : Signal
        The byte address of the next record to read.
    left : Signal
        The tiles not started (``buffers`` 2) or not done (``buffers`` 1).
    """

    def __init__(self, memories: int, sel_width: int):
        n_loads, n_stores = Signal(8), Signal(8)       # named by the tracer as before: n_loads is $signal
        self.n_loads, self.n_stores = n_loads, n_stores
        self.slots = _Slots(memories, sel_width, "slot")
        slot_range = range(2 * memories + 2)
        self.cur = Signal(slot_range)
        self.nxt = Signal(slot_range)
        self.tile_addr = Signal(AXI_ADDR_WIDTH)
        self.left = Signal(SEQ_WIDTH)


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
        walk = _Walk(self.memories, len(self.host.sel))
        self._connect(m, walk)

        def start_kernel():
            m.next = "KSTART"

        def next_tile():
            m.d.sync += [walk.tile_addr.eq(walk.tile_addr + self.stride), walk.left.eq(walk.left - 1),
                         self.tiles_done.eq(self.tiles_done + 1)]
            m.next = "TILE"

        with m.FSM() as fsm:
            self._load_states(m, walk, loaded=start_kernel)
            with m.State("KSTART"):
                m.d.comb += self.kernel.start.eq(1)
                m.next = "KRUN"
            self._store_states(m, walk, "KRUN", walk.slots, walk.n_loads, walk.n_stores, stored=next_tile)
        self._count_cycles(m, fsm)
        return m

    def _elaborate_double(self):
        """``buffers`` 2 (module doc): the next tile's record and loads during the kernel's run."""
        m = Module()
        walk = _Walk(self.memories, len(self.host.sel))
        # the running tile's record (its stores), kept while the next tile's record replaces the slots
        s_first, s_count = Signal(8), Signal(8)
        kept = _Slots(self.memories, len(self.host.sel), "kept")
        pending = Signal()                             # a tile started whose stores are due
        self._connect(m, walk)

        def loaded():                                  # the loads are in: run, or wait for the running tile
            with m.If(pending):
                m.next = "WAIT"
            with m.Else():
                m.next = "KSTART"

        def stored():
            m.d.sync += [self.tiles_done.eq(self.tiles_done + 1), pending.eq(0)]
            with m.If(walk.left != 0):
                m.next = "KSTART"
            with m.Else():
                m.next = "TILE"

        with m.FSM() as fsm:
            self._load_states(m, walk, loaded=loaded, reset=[self.bank_host.eq(0), pending.eq(0)])
            with m.State("KSTART"):                   # run the loaded tile; the next tile's record at once
                m.d.comb += self.kernel.start.eq(1)
                m.d.sync += [self.bank_run.eq(self.bank_host), self.bank_host.eq(~self.bank_host), pending.eq(1),
                             walk.tile_addr.eq(walk.tile_addr + self.stride), walk.left.eq(walk.left - 1),
                             s_first.eq(walk.n_loads), s_count.eq(walk.n_stores)]
                m.d.sync += [k.eq(s) for keep, slots in ((kept.sel, walk.slots.sel), (kept.addr, walk.slots.addr),
                                                         (kept.words, walk.slots.words))
                             for k, s in zip(keep, slots)]
                with m.If(walk.left != 1):
                    self._read(m, walk.tile_addr + self.stride, self.words)
                    m.next = "RECORD"
                with m.Else():
                    m.next = "WAIT"
            self._store_states(m, walk, "WAIT", kept, s_first, s_count, stored=stored)
        self._count_cycles(m, fsm)
        return m

    def _connect(self, m, walk):
        """The host port's default connections: the beats in and the memory read out, at slot ``walk.cur``."""
        m.d.comb += [walk.nxt.eq(walk.cur + 1), self.onchip.data.eq(self.host.rdata),
                     self.host.sel.eq(walk.slots.sel[walk.cur]), self.host.wdata.eq(self.beat.data)]

    def _read(self, m, addr, words):
        """Start a DMA read of ``words`` beats from byte address ``addr``."""
        m.d.comb += [self.rd.start.eq(1), self.rd.addr.eq(addr), self.rd.words.eq(words)]

    def _write(self, m, slots, slot):
        """Start the DMA write of slot ``slot`` of ``slots``."""
        m.d.comb += [self.wr.start.eq(1), self.wr.addr.eq(slots.addr[slot]), self.wr.words.eq(slots.words[slot])]

    def _load_states(self, m, walk, loaded, reset=()):
        """The states from IDLE to the tile's loads (IDLE, TILE, RECORD, LOAD_GO, LOAD).

        Parameters
        ----------
        m : Module
            The module, inside its FSM.
        walk : _Walk
            The registers of the walk.
        loaded : callable
            Emits what follows once the tile's loads are in (none or the last one done).
        reset : list of Assign
            More statements for the cycle that starts a walk.
        """
        n = self.memories
        with m.State("IDLE"):
            with m.If(self.start):
                m.d.sync += [walk.tile_addr.eq(self.table), walk.left.eq(self.tiles), self.cycles.eq(0),
                             self.kernel_cycles.eq(0), self.tiles_done.eq(0), self.done.eq(0), *reset]
                m.next = "TILE"
        with m.State("TILE"):                         # request a record (buffers 2: the first tile's), or finish
            with m.If(walk.left == 0):
                m.d.sync += self.done.eq(1)
                m.next = "IDLE"
            with m.Else():
                self._read(m, walk.tile_addr, self.words)
                m.next = "RECORD"
        with m.State("RECORD"):
            with m.If(self.beat.valid):
                with m.Switch(self.beat.index):
                    with m.Case(0):
                        m.d.sync += [walk.n_loads.eq(self.beat.data[0:8]), walk.n_stores.eq(self.beat.data[8:16])]
                    for j in range(n):
                        for f, regs in enumerate((walk.slots.sel, walk.slots.addr, walk.slots.words)):
                            with m.Case(1 + 3 * j + f):
                                m.d.sync += regs[j].eq(self.beat.data)
            with m.If(self.rd.done):
                m.next = "LOAD_GO"
        with m.State("LOAD_GO"):
            m.d.sync += walk.cur.eq(0)
            with m.If(walk.n_loads == 0):
                loaded()
            with m.Else():
                self._read(m, walk.slots.addr[0], walk.slots.words[0])
                m.next = "LOAD"
        with m.State("LOAD"):                         # beats to slot cur's memory (buffers 2: bank bank_host)
            m.d.comb += [self.host.addr.eq(self.beat.index), self.host.we.eq(self.beat.valid)]
            with m.If(self.rd.done):
                with m.If(walk.nxt < walk.n_loads):
                    self._read(m, walk.slots.addr[walk.nxt], walk.slots.words[walk.nxt])
                    m.d.sync += walk.cur.eq(walk.nxt)
                with m.Else():
                    loaded()

    def _store_states(self, m, walk, run, slots, first, count, stored):
        """The states from the kernel's run to the tile's stores (``run``, STORE_GO, STORE).

        Parameters
        ----------
        m : Module
            The module, inside its FSM.
        walk : _Walk
            The registers of the walk.
        run : str
            The state that waits for the kernel's done and sums its cycles.
        slots : _Slots
            The slots of the stores: ``walk.slots``, or a copy kept of them (their ``sel`` then drives the host's).
        first, count : Value
            The slot of the first store and the number of stores.
        stored : callable
            Emits what follows once the stores are out (none or the last one done).
        """
        with m.State(run):
            with m.If(self.kernel.done):
                m.d.sync += self.kernel_cycles.eq(self.kernel_cycles + self.kernel.cycles)
                m.next = "STORE_GO"
        with m.State("STORE_GO"):
            m.d.sync += walk.cur.eq(first)
            with m.If(count == 0):
                stored()
            with m.Else():
                self._write(m, slots, first)
                m.next = "STORE"
        with m.State("STORE"):                        # the writer reads the memory of slot cur of slots
            m.d.comb += self.host.addr.eq(self.onchip.addr)
            if slots is not walk.slots:
                m.d.comb += self.host.sel.eq(slots.sel[walk.cur])
            with m.If(self.wr.done):
                with m.If(walk.nxt < first + count):
                    self._write(m, slots, walk.nxt)
                    m.d.sync += walk.cur.eq(walk.nxt)
                with m.Else():
                    stored()

    def _count_cycles(self, m, fsm):
        """``busy`` while the FSM is not idle, and ``cycles`` counting its cycles."""
        m.d.comb += self.busy.eq(~fsm.ongoing("IDLE"))
        with m.If(self.busy):
            m.d.sync += self.cycles.eq(self.cycles + 1)


__all__ = ["TileSequencer", "kernel_signature", "host_signature", "SEQ_WIDTH"]
