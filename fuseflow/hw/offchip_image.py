"""The off-chip memory image of a tiled run on the AXI4 master port: the tile table and every tile's arrays.

    from fuseflow.hw.offchip_image import build_image
    img = build_image(manifest, [{"loads": {"B.vals": words, ...}, "stores": ["x.vals", ...]}, ...])
    img.data            # bytes to put in off-chip memory at address img.base
    img.table           # the tile table's byte address (control register ``table``), img.tiles its records
    img.outputs[t]      # {memory name: (byte address, words)}: where tile t's stored arrays land

``manifest``: the build manifest of an ``--interface axi-master`` build (its ``axi`` section names the memories,
their capacities and widths and the off-chip contract). Each tile loads ``{memory name: raw entries}`` (as
:func:`fuseflow.hw.memory.tensor_images` packs a tensor; :func:`tile_loads` packs a tile's tensors), laid into
beats by :func:`fuseflow.samml.offchip.pack_beats` (the contract's entries per beat at the memory's width), and
stores the named memories whole (their capacity: what a kernel writes depends on the data). A memory keeps its contents
from one tile to the next, so an operand every tile shares is loaded by the first tile only (with ``buffers`` 2 the
memories of the inputs that change between tiles have two banks, which the tiles fill in turn).

Layout (byte addresses from ``base``): :func:`fuseflow.samml.offchip.layout`, which the tiled simulator uses too:
the tile table first (record ``t`` at ``table + t * record_stride``, see :mod:`fuseflow.hw.sequencer`), then each
tile's loads and stores in order, each array starting on an :data:`ARRAY_ALIGN`-byte boundary.
:mod:`fuseflow.hw.tiled` builds the tiles from a tiled program and full-size inputs. Everything that does not
fit the build (a memory it lacks, more entries than a memory's capacity, a word wider than the memory, more
transfers than a record holds) is refused here, before anything runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import HardwareError
from ..samml.offchip import (ARRAY_ALIGN, OffchipContract, beats, layout, pack_beats, record_stride, record_words,
                             tile_steps, tiled_cycles, unpack_beats)

if TYPE_CHECKING:
    from .elaborate import Build

#: the largest byte address of the 32-bit master port
ADDRESS_LIMIT = 1 << 32


def contract_of(manifest: dict) -> OffchipContract:
    """The off-chip contract an ``axi-master`` build was made for."""
    axi = manifest.get("axi") or {}
    if axi.get("protocol") != "AXI4" or "contract" not in axi:
        raise HardwareError("off-chip image", f"module {manifest.get('module')} has no AXI4 master port "
                                              f"(build it with --interface axi-master)")
    return OffchipContract(**axi["contract"])


@dataclass
class Transfer:
    """One row of a tile record: ``kind`` "load" or "store" of ``entries`` entries of memory ``name`` in ``words``
    beats."""
    kind: str
    name: str
    sel: int
    address: int
    words: int
    entries: int = 0


@dataclass
class OffchipImage:
    """An off-chip memory image: ``data`` (bytes) at byte address ``base``; the tile table at ``table``."""
    base: int
    data: bytes
    table: int
    tiles: int
    contract: OffchipContract
    memories: int
    transfers: list[list[Transfer]] = field(default_factory=list)      # per tile: [Transfer]

    @property
    def outputs(self) -> list[dict[str, tuple[int, int]]]:
        """Per tile: ``{memory name: (byte address, words)}`` of its stores (``words``: beats)."""
        return [{x.name: (x.address, x.words) for x in tile if x.kind == "store"} for tile in self.transfers]

    def entries(self, memory: bytes, transfer: Transfer, width: int, base: int | None = None) -> list[int]:
        """The raw entries of ``transfer`` (of a memory of ``width``-bit entries) in ``memory``."""
        return unpack_beats(self.words(memory, transfer.address, transfer.words, base), transfer.entries, width,
                            self.contract)

    def words(self, memory: bytes, address: int, count: int, base: int | None = None) -> list[int]:
        """``count`` words at byte ``address`` of ``memory`` (bytes that start at ``base``, default this image's)."""
        wb = self.contract.word_bytes
        off = address - (self.base if base is None else base)
        return [int.from_bytes(memory[off + i * wb: off + (i + 1) * wb], "little") for i in range(count)]

    def steps(self, kernel_cycles: list[int]) -> list[tuple[int, int, int]]:
        """``(load, run, store)`` cycles per tile under the contract, given each tile's kernel cycles."""
        return tile_steps(self.memories, [[(x.kind, x.address, x.words) for x in tile] for tile in self.transfers],
                          kernel_cycles, self.contract)

    def total_cycles(self, kernel_cycles: list[int]) -> int:
        """The run's cycles under the contract (:func:`fuseflow.samml.offchip.tiled_cycles`)."""
        return tiled_cycles(self.steps(kernel_cycles), self.contract)


def build_image(manifest: dict, tiles: list[dict], *, base: int = 0) -> OffchipImage:
    """The image of ``tiles`` (``[{"loads": {memory: words}, "stores": [memory, ...]}]``) for an ``axi-master``
    build's ``manifest``, starting at byte ``base`` (a multiple of the record stride). Raises
    :class:`HardwareError` (nothing is built) when a tile does not fit the build."""
    c = contract_of(manifest)
    axi = manifest["axi"]
    mems = {m["name"]: m for m in axi["memories"]}
    n = len(mems)
    stride = record_stride(n, c)
    wb = c.word_bytes
    if base % stride or base < 0:
        raise HardwareError("off-chip image", f"base {base:#x} is not a multiple of the record stride {stride}")
    if not tiles:
        raise HardwareError("off-chip image", "no tiles")
    # per tile: [(Transfer without its address, words or None)]
    rows: list[list[tuple[Transfer, list[int] | None]]] = []
    for t, tile in enumerate(tiles):
        loads, stores = dict(tile.get("loads", {})), list(tile.get("stores", []))
        unknown = sorted((set(loads) | set(stores)) - set(mems))
        if unknown:
            raise HardwareError(f"tile {t}", f"the build has no memory {', '.join(unknown)}")
        if len(loads) + len(stores) > n:
            raise HardwareError(f"tile {t}", f"{len(loads) + len(stores)} transfers exceed a record's {n}")
        if len(set(stores)) != len(stores):
            raise HardwareError(f"tile {t}", "a memory is stored twice")
        row: list[tuple[Transfer, list[int] | None]] = []
        for name, words in loads.items():
            mm = mems[name]
            words = np.asarray(words, dtype=object).ravel()
            if len(words) == 0:
                continue                          # nothing to load (an empty array): no transfer
            if len(words) > mm["capacity"]:
                raise HardwareError(f"tile {t}", f"{len(words)} entries of {name} exceed its capacity "
                                                 f"{mm['capacity']} (the graph's declared capacity)")
            bad = [int(w) for w in words if not 0 <= int(w) < (1 << mm["width"])]
            if bad:
                raise HardwareError(f"tile {t}", f"{name}: word {bad[0]} is not a raw {mm['width']}-bit entry")
            row.append((Transfer("load", name, mm["sel"], 0, beats(len(words), mm["width"], c), len(words)),
                        pack_beats([int(w) for w in words], mm["width"], c)))
        for name in stores:
            mm = mems[name]
            row.append((Transfer("store", name, mm["sel"], 0, beats(mm["capacity"], mm["width"], c),
                                 mm["capacity"]), None))
        rows.append(row)
    table, addresses, cursor = layout(n, [[x.words for x, _ in row] for row in rows], c, base)
    chunks: list[tuple[int, list[int]]] = []      # (address, words)
    transfers: list[list[Transfer]] = []          # per tile [Transfer]
    for row, where in zip(rows, addresses):
        for (x, words), address in zip(row, where):
            x.address = address
            if words is not None:
                chunks.append((address, words))
        transfers.append([x for x, _ in row])
    if cursor > ADDRESS_LIMIT:
        raise HardwareError("off-chip image", f"{cursor - base} bytes from {base:#x} exceed the 32-bit address space")
    data = bytearray(cursor - base)

    def put(address: int, words: list[int]) -> None:
        for i, w in enumerate(words):
            off = address - base + i * wb
            data[off:off + wb] = int(w).to_bytes(wb, "little")

    for t, record_row in enumerate(transfers):
        n_loads = sum(x.kind == "load" for x in record_row)
        record = [n_loads | (len(record_row) - n_loads) << 8]
        for x in record_row:
            record += [x.sel, x.address, x.words]
        record += [0] * (record_words(n) - len(record))
        put(table + t * stride, record)
    for address, words in chunks:
        put(address, words)
    return OffchipImage(base, bytes(data), table, len(tiles), c, n, transfers)


def tile_loads(build: Build, inputs: dict[str, Any]) -> dict:
    """``{memory name: raw words}`` of one tile's input tensors ``inputs`` (``{name: array | scipy matrix}``,
    packed like every input of the kernel top: :func:`fuseflow.hw.elaborate.check_inputs_fit`)."""
    from .elaborate import check_inputs_fit
    return check_inputs_fit(build, inputs)


def read_outputs(manifest: dict, image: OffchipImage, memory: bytes, tile: int, base: int | None = None) -> dict:
    """The output tensors tile ``tile`` stored (``{name: PackedTensor-like dict}`` as
    :func:`fuseflow.hw.top.host_run` reads them), decoded from ``memory`` (bytes from ``base``)."""
    import asyncio

    from .top import _read_tensor
    out = {x.name: x for x in image.transfers[tile] if x.kind == "store"}
    arrays = {m["sel"]: image.entries(memory, out[m["name"]], m["width"], base=base)
              for m in manifest["host"]["memories"] if m["name"] in out}

    class _Stored:
        async def read_burst(self, sel: int, start: int, n: int) -> list[int]:
            return arrays[sel][start:start + n]

    mems = {m["name"]: m for m in manifest["host"]["memories"]}
    tensors: dict[str, dict] = {}
    for t in manifest["tensors"]:
        needed = [m["name"] for m in manifest["host"]["memories"]
                  if m["name"].split(".")[0] == t["name"] and not m["name"].endswith(".first")]
        if t["role"] != "input" and all(name in out for name in needed):
            tensors[t["name"]] = asyncio.run(_read_tensor(_Stored(), t, mems, manifest))
    return tensors


__all__ = ["build_image", "OffchipImage", "Transfer", "tile_loads", "read_outputs", "contract_of", "ARRAY_ALIGN"]
