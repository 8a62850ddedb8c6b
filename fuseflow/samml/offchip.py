"""The off-chip memory contract: what a tile transfer (DMA) costs, shared by both simulator engines and the RTL.

A tiled program (:mod:`fuseflow.compiler.tiling`) runs each kernel once per tile: the tile's input arrays are
loaded from off-chip memory into the kernel's on-chip tensor memories, the kernel runs (its cycles are the
ordinary on-chip simulation's, exactly), and its output arrays are stored back. Transfers go through one AXI4
memory-mapped master port of ``word_bytes`` bytes per beat. The memory the contract assumes:

- a read burst of ``b`` beats whose AR handshake happens in cycle ``a`` delivers its first beat in cycle
  ``a + latency`` at the earliest and one beat per cycle after that, in order, behind the previous burst's beats;
- the DMA keeps at most ``outstanding`` bursts in flight and issues the next AR in the cycle after the previous
  one, or in the cycle after the oldest burst in flight delivered its last beat when ``outstanding`` are in flight;
- writes: the DMA first reads the on-chip memory for :data:`STORE_SETUP` cycles, then sends a burst's AW and its
  ``b`` W beats one per cycle (the next burst's beats follow without a gap), the memory answers B ``latency``
  cycles after the burst's last W beat; at most ``outstanding`` bursts wait for their B; the transfer ends in the
  cycle after its last B;
- bursts never cross a 4 KiB boundary (AXI4) and hold at most ``burst`` beats.

:func:`read_cycles` and :func:`write_cycles` compute those cycles exactly; the RTL meets them cycle for cycle
against a memory that behaves so (tests/hw: the contract memory), and is bit-identical against any AXI slave
(cocotbext-axi's ``AxiRam`` with random delays and back-pressure).

``buffers``: 1 = load, run, store in turn; 2 = the next tile's loads overlap the current tile's run (the inputs
that change between tiles have two banks in the RTL: the kernel reads one while the DMA fills the other;
:func:`tiled_cycles`).

The tile sequencer of the RTL (:mod:`fuseflow.hw.sequencer`) reads one tile record of
:func:`record_words` words per tile from the tile table (:func:`record_cycles`: part of the tile's ``load``),
pulses the kernel's start after the loads and waits for its done: :data:`TILE_OVERHEAD` cycles per tile and
:data:`RUN_OVERHEAD` per run beyond the transfers and the kernel cycles, both counted in :func:`tiled_cycles`
(with ``buffers`` 2 the tile's overhead is split over its load, run and store: :data:`OVERLAP_OVERHEAD`).
A tile's steps for :func:`tiled_cycles` are therefore ``(record_cycles(m, c) + sum(read_cycles(...) of its
loads), kernel cycles, sum(write_cycles(...) of its stores))``: :func:`tile_steps`.

What moves, in both the tiled simulator (:mod:`fuseflow.sim.tiled`) and the RTL's off-chip image
(:mod:`fuseflow.hw.offchip_image`): one transfer per tensor memory of the kernel top
(:func:`fuseflow.samml.storage.tensor_memories`: ``seg``, ``crd`` and ``first`` per compressed level, then
``vals``); a load moves the entries the tile's packed array holds (none: no transfer), a store moves the output
memory's whole capacity (what a kernel writes depends on the data). With ``pack`` 1 a beat carries
:func:`entries_per_beat` entries of the memory (the largest power of two of its entries that fits the beat, each
in a slot of :func:`slot_bits` bits, entry ``e`` in slot ``e % k`` of beat ``e // k``), and the memory takes
them in one cycle (a row of that many entries); with ``pack`` 0 one entry per beat. A transfer of ``n`` entries
is :func:`beats` long. Where each transfer lies is :func:`layout`'s: the tile table at ``base``, then every
tile's transfers in order, each on an :data:`ARRAY_ALIGN`-byte boundary, so both sides see the same 4 KiB
crossings.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FuseFlowError
from .registry import DMA

#: AXI4: a burst may not cross a 4 KiB address boundary
AXI_BOUNDARY_BYTES = 4096
#: AXI4 INCR bursts hold at most 256 beats
AXI_MAX_BURST = 256
#: cycles a store spends reading the on-chip memory (its read latency, 2, and a FIFO's) before its first AW/W
STORE_SETUP = 3
#: sequencer cycles per tile beyond its transfers and the kernel's cycles (one-kernel tops: the record request,
#: the first load's dispatch, the start pulse, the kernel top's launch and done hand-over (4), the first store's
#: dispatch); each further kernel of the top adds 2 hand-over cycles to the tile's run
TILE_OVERHEAD = 8
#: sequencer cycles per run beyond its tiles (the final look at the tile count)
RUN_OVERHEAD = 1
#: ``buffers`` 2: the sequencer's cycles added to each tile's (load, run, store) in :func:`tiled_cycles`' schedule:
#: the record request and the first load's dispatch (2); the start pulse and the kernel top's launch and done
#: hand-over (4); the cycle that sees the kernel's done, the first store's dispatch (2). Together
#: :data:`TILE_OVERHEAD`, so one tile takes the same cycles with either ``buffers``
OVERLAP_OVERHEAD = (2, 4, 2)
#: byte alignment of each transfer's array in the off-chip image (a cache line: bursts start on it)
ARRAY_ALIGN = 64
#: words of a tile record's header (loads and stores counts) and of each transfer (sel, address, words)
RECORD_HEADER_WORDS = 1
TRANSFER_WORDS = 3
#: the port's beat widths in bytes (the registry's ``dma`` ``word_bytes`` choices)
WORD_BYTES = DMA.param("word_bytes").choices


@dataclass(frozen=True)
class OffchipContract:
    """Timing of the off-chip port (cycles of the kernel clock); defaults: the registry's ``DMA`` parameters."""
    word_bytes: int = DMA.param("word_bytes").default
    latency: int = DMA.param("latency").default
    burst: int = DMA.param("burst").default
    outstanding: int = DMA.param("outstanding").default
    buffers: int = DMA.param("buffers").default
    pack: int = DMA.param("pack").default

    def __post_init__(self):
        if self.word_bytes not in WORD_BYTES:
            raise FuseFlowError("off-chip contract", f"word_bytes {self.word_bytes} is not "
                                                     f"{', '.join(map(str, WORD_BYTES[:-1]))} or {WORD_BYTES[-1]}")
        if self.latency < 1:
            raise FuseFlowError("off-chip contract", f"latency {self.latency} must be >= 1")
        if not 1 <= self.burst <= AXI_MAX_BURST:
            raise FuseFlowError("off-chip contract", f"burst {self.burst} must be 1..{AXI_MAX_BURST} beats")
        if self.outstanding < 1:
            raise FuseFlowError("off-chip contract", f"outstanding {self.outstanding} must be >= 1")
        if self.buffers not in (1, 2):
            raise FuseFlowError("off-chip contract", f"buffers {self.buffers} must be 1 or 2")
        if self.pack not in (0, 1):
            raise FuseFlowError("off-chip contract", f"pack {self.pack} must be 0 or 1")

    @property
    def bytes_per_cycle(self) -> int:
        return self.word_bytes

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def parse_contract(spec, where: str = "--offchip", base: dict | None = None) -> OffchipContract:
    """An :class:`OffchipContract` from ``"key=N,key=N"`` text or a dict (fields not given: ``base``'s, else the
    defaults); an unknown key or a non-integer is a one-line :class:`FuseFlowError` naming ``where``."""
    if isinstance(spec, str):
        items = {}
        for part in filter(None, (p.strip() for p in spec.split(","))):
            key, sep, value = part.partition("=")
            items[key.strip() if sep else part] = value.strip() if sep else None
    else:
        items = dict(spec or {})
    fields = dict(base or {})
    for key, value in items.items():
        if key not in OffchipContract.__dataclass_fields__ or value is None:
            raise FuseFlowError(where, f"{key if value is None else key + '=' + str(value)!r} is not key=value "
                                       f"with key one of {', '.join(OffchipContract.__dataclass_fields__)}")
        try:
            fields[key] = int(value)
        except (TypeError, ValueError):
            raise FuseFlowError(where, f"{key}={value!r} is not an integer") from None
    return OffchipContract(**fields)


def entries_per_beat(width: int, contract: OffchipContract) -> int:
    """Entries of a memory of ``width``-bit entries one beat carries (and the memory takes in one cycle): with
    ``pack`` 1 the largest power of two ``k`` with ``k * width <= word_bytes * 8`` (a power of two, so the
    memory's row and slot are its address's bits), else 1."""
    bits = contract.word_bytes * 8
    if width > bits:
        raise FuseFlowError("off-chip contract", f"entries of {width} bits do not fit a {bits}-bit beat: use a "
                                                 f"larger word_bytes")
    if not contract.pack:
        return 1
    return 1 << ((bits // max(width, 1)).bit_length() - 1)


def slot_bits(width: int, contract: OffchipContract) -> int:
    """Bits of each entry's slot in a beat (the entry in its low bits; :func:`entries_per_beat`)."""
    return contract.word_bytes * 8 // entries_per_beat(width, contract)


def beats(entries: int, width: int, contract: OffchipContract) -> int:
    """Beats of a transfer of ``entries`` entries of ``width`` bits."""
    k = entries_per_beat(width, contract)
    return -(-entries // k)


def pack_beats(entries, width: int, contract: OffchipContract) -> list[int]:
    """The beats (unsigned ints of ``word_bytes * 8`` bits) of a transfer of raw ``width``-bit ``entries``."""
    k, slot = entries_per_beat(width, contract), slot_bits(width, contract)
    out = []
    for b in range(0, len(entries), k):
        word = 0
        for j, e in enumerate(entries[b:b + k]):
            word |= int(e) << (j * slot)
        out.append(word)
    return out


def unpack_beats(words, entries: int, width: int, contract: OffchipContract) -> list[int]:
    """The first ``entries`` raw entries of a transfer's beats ``words`` (:func:`pack_beats` reversed)."""
    k, slot = entries_per_beat(width, contract), slot_bits(width, contract)
    mask = (1 << width) - 1
    return [(int(words[e // k]) >> ((e % k) * slot)) & mask for e in range(entries)]


def bursts(address: int, beats: int, contract: OffchipContract) -> list[int]:
    """Beats of each burst of a transfer of ``beats`` words from byte ``address`` (never across 4 KiB)."""
    out = []
    while beats > 0:
        to_boundary = (AXI_BOUNDARY_BYTES - address % AXI_BOUNDARY_BYTES) // contract.word_bytes
        b = min(beats, contract.burst, max(to_boundary, 1))
        out.append(b)
        beats -= b
        address += b * contract.word_bytes
    return out


def read_cycles(address: int, beats: int, contract: OffchipContract) -> int:
    """Cycles from the first AR until the last beat of a read of ``beats`` words has arrived (0 for none)."""
    if beats <= 0:
        return 0
    ends = []                  # cycle of each burst's last beat
    ar = 0
    last_end = -1
    for i, b in enumerate(bursts(address, beats, contract)):
        if i >= contract.outstanding:
            ar = max(ar, ends[i - contract.outstanding] + 1)
        start = max(ar + contract.latency, last_end + 1)
        last_end = start + b - 1
        ends.append(last_end)
        ar += 1
    return last_end + 1


def write_cycles(address: int, beats: int, contract: OffchipContract) -> int:
    """Cycles from a store's start (:data:`STORE_SETUP` cycles of on-chip reads, then the first AW) until the last
    B response of a write of ``beats`` words (0 for none)."""
    if beats <= 0:
        return 0
    responses = []             # cycle of each burst's B
    w = STORE_SETUP            # cycle of the next W beat
    for i, b in enumerate(bursts(address, beats, contract)):
        if i >= contract.outstanding:
            w = max(w, responses[i - contract.outstanding] + 1)
        last_w = w + b - 1
        responses.append(last_w + contract.latency)
        w = last_w + 1
    return responses[-1] + 1


def record_words(memories: int) -> int:
    """Words of one tile record of the tile table for a kernel top of ``memories`` tensor memories (its memory
    plan's: ``seg``, ``crd`` and ``first`` per compressed level of every tensor, and ``vals``; the manifest's
    ``axi.memories``)."""
    return RECORD_HEADER_WORDS + TRANSFER_WORDS * memories


def record_stride(memories: int, contract: OffchipContract) -> int:
    """Bytes from one tile record to the next: a power of two (records never cross 4 KiB)."""
    size = record_words(memories) * contract.word_bytes
    stride = 1 << max(0, (size - 1).bit_length())
    if stride > AXI_BOUNDARY_BYTES:
        raise FuseFlowError("off-chip contract", f"a tile record of {memories} memories ({size} bytes) exceeds "
                                                 f"{AXI_BOUNDARY_BYTES} bytes")
    return stride


def record_cycles(memories: int, contract: OffchipContract) -> int:
    """Cycles of reading one tile record (aligned to :func:`record_stride`): part of each tile's ``load``."""
    return read_cycles(0, record_words(memories), contract)


def tiled_cycles(steps: list[tuple[int, int, int]], contract: OffchipContract) -> int:
    """Total cycles of a tile sequence: ``steps`` is ``[(load, run, store)]`` cycles per tile (``load`` includes
    the tile record's :func:`record_cycles`); 0 tiles: :data:`RUN_OVERHEAD`.

    ``buffers`` 1: each tile loads, runs and stores in turn, plus :data:`TILE_OVERHEAD` per tile and
    :data:`RUN_OVERHEAD` per run. ``buffers`` 2: each tile's steps grow by :data:`OVERLAP_OVERHEAD` (the
    sequencer's cycles), then: the inputs have two banks, so tile t+1's loads start once tile t's run has started
    and the port is free; tile t's store follows its run (and tile t+1's loads: one port), and tile t+1's run
    starts once its loads and tile t's store are done (the outputs have one bank); plus :data:`RUN_OVERHEAD`.
    """
    if contract.buffers == 1:
        return sum(load + run + store + TILE_OVERHEAD for load, run, store in steps) + RUN_OVERHEAD
    if not steps:
        return RUN_OVERHEAD
    dl, dr, ds = OVERLAP_OVERHEAD
    steps = [(load + dl, run + dr, store + ds) for load, run, store in steps]
    port = steps[0][0]                     # the cycle the port is next free
    run_start, run_end = port, port + steps[0][1]
    for i in range(1, len(steps)):
        load, run, _ = steps[i]
        port = max(port, run_start) + load             # tile i's loads into the other bank
        load_end = port
        port = max(port, run_end) + steps[i - 1][2]    # tile i-1's store
        run_start = max(load_end, port)
        run_end = run_start + run
    return max(port, run_end) + steps[-1][2] + RUN_OVERHEAD


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def layout(memories: int, tiles: list, contract: OffchipContract, base: int = 0) -> tuple[int, list, int]:
    """Byte addresses of a tile sequence's off-chip image: ``tiles`` is, per tile, the entries of each transfer in
    record order (loads, then stores). Returns ``(table, [[address of each transfer] per tile], end)``: the tile
    table at ``base`` (one record every :func:`record_stride` bytes), then each transfer's array on an
    :data:`ARRAY_ALIGN` boundary; ``end`` is the first byte after the image."""
    stride = record_stride(memories, contract)
    cursor = _align(base + stride * len(tiles), ARRAY_ALIGN)
    addresses = []
    for tile in tiles:
        row = []
        for words in tile:
            row.append(cursor)
            cursor = _align(cursor + contract.word_bytes * words, ARRAY_ALIGN)
        addresses.append(row)
    return base, addresses, cursor


def tile_steps(memories: int, tiles: list, runs: list, contract: OffchipContract) -> list[tuple[int, int, int]]:
    """``(load, run, store)`` cycles per tile for :func:`tiled_cycles`: ``tiles`` is, per tile, its transfers
    ``(kind "load"|"store", byte address, beats)``, ``runs`` the kernel cycles per tile; ``load`` includes the
    tile record's :func:`record_cycles`."""
    out = []
    rec = record_cycles(memories, contract)
    for tile, run in zip(tiles, runs, strict=True):
        load = rec + sum(read_cycles(a, w, contract) for kind, a, w in tile if kind == "load")
        store = sum(write_cycles(a, w, contract) for kind, a, w in tile if kind == "store")
        out.append((load, run, store))
    return out
