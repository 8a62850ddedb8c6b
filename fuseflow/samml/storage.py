"""Where a tensor array is stored in hardware (block RAM or the fabric), and the one timing rule that depends on it.

One definition, read by ``hw build`` (:func:`fuseflow.hw.memory.plan_memories` sizes and places every array with
:func:`array_shape` and :func:`memory_storage`) and by the simulator (:func:`bounds_latency` of each compressed
level_scan, from the same functions), so the two agree on every kernel without the simulator knowing anything
else about the hardware.

- :func:`memory_storage`: a memory read only through read ports of latency ``registry.MEMORY_READ_LATENCY``
  (crd, vals, spacc's accumulator) goes to block RAM from :data:`BLOCK_RAM_MIN_BITS`; a level's ``seg`` and
  ``first`` arrays (level_scan reads them at the token behind its head, into registers that hold the head's
  entries) from :data:`BOUNDS_BLOCK_MIN_BITS`.
- :func:`bounds_latency`: a compressed level_scan whose ``seg`` or ``first`` array is in block RAM reads them with
  latency 2 (the block's output register: docs/samml.md, "Latency", and docs/hardware.md, "Memories"), else 1.
  With 2, a reference is taken no earlier than two cycles after it was pushed and two cycles after the op's
  previous pop of its input (the level_scan parameter ``bounds_latency``).

Example
-------
>>> memory_storage("crd", 1024), memory_storage("seg", 1024), memory_storage("seg", 16384)
('block', 'lut', 'block')
"""

from __future__ import annotations

import copy
import math

from .blocks import tensor_block
from .widths import array_width, tensor_width

__all__ = ["BLOCK_RAM_MIN_BITS", "BOUNDS_ARRAYS", "BOUNDS_BLOCK_MIN_BITS", "memory_storage", "build_capacity",
           "array_depth", "tensor_memories", "memory_width", "memory_entries", "index_width", "array_shape", "bounds_latency", "BLOCK_BOUNDS_LATENCY"]

#: a memory read only synchronously goes to block RAM from this many bits up. One ECP5 DP16KD holds 16 Kbit
#: (18 with parity) and one iCE40 SB_RAM40_4K 4 Kbit; a 1 Kbit memory costs about 16 ECP5 LUT-RAM cells
#: (TRELLIS_DPR16X4, with their write decode) per read port and, on iCE40 (no LUT RAM), a thousand
#: flip-flops. From 1 Kbit up a block is cheaper than the fabric on both, and the 85F's 208 blocks (the
#: UP5K's 30) are not used up by the many small arrays of a kernel (a few entries each)
BLOCK_RAM_MIN_BITS = 1024

#: the arrays level_scan reads at the token behind its head, into registers that hold the head's entries (a
#: fibre's bounds and its first coordinate), and where they go to block RAM: from 16 Kbit (1024 16-bit entries,
#: one full DP16KD). In block RAM they are read with latency 2 (:func:`bounds_latency`), which costs a cycle
#: whenever a reference follows a popped stop at once (docs/samml.md, "Latency"), so a level of up to a thousand
#: fibres keeps latency 1 in LUT RAM, whose copies (one per read port, three for seg) cost at most about 1500 LUT4s
#: there; beyond, LUT RAM grows by a LUT4 per 32 bits per copy and its read by a multiplexer level per doubling
#: (a matrix with 16384 rows: about 45000 LUT4s)
BOUNDS_ARRAYS = ("seg", "first")
BOUNDS_BLOCK_MIN_BITS = 16384

#: level_scan's read latency of a level's seg and first arrays in block RAM (address register, then the block's
#: output register)
BLOCK_BOUNDS_LATENCY = 2


def memory_storage(array: str, bits: int) -> str:
    """``"block"`` when an array of ``bits`` bits goes to block RAM, else ``"lut"`` (see the module doc)."""
    least = BOUNDS_BLOCK_MIN_BITS if array in BOUNDS_ARRAYS else BLOCK_RAM_MIN_BITS
    return "block" if bits >= least else "lut"


def build_capacity(decl, measured=None):
    """The entries per level (then values) a build holds for tensor ``decl``: its declared ``capacity`` if it has one,
    else ``measured`` (capacities measured on its data, ``PackedTensor.capacities()``); None if neither."""
    cap = decl.capacity if decl.capacity is not None else measured
    return None if cap is None else [int(c) for c in cap]


def array_depth(capacity, level, array) -> int:
    """Entries of one array of a tensor with ``capacity`` (per level, then vals)."""
    if array == "vals":
        return capacity[-1]
    if array == "crd":
        return capacity[level]
    parents = 1 if level == 0 else capacity[level - 1]
    return parents if array == "first" else parents + 1


def tensor_memories(decl) -> list:
    """``[(level, array, memory name)]`` of a tensor declaration, in host order (levels outer to inner: ``seg``,
    ``crd``, ``first`` per compressed level; then ``vals``): the kernel top's memories of the tensor
    (:func:`fuseflow.hw.memory.plan_memories`) and the off-chip transfers of a tile of it
    (:mod:`fuseflow.samml.offchip`)."""
    out = []
    for lv, fmt in enumerate(decl.levels):
        if fmt == "compressed":
            out += [(lv, a, f"{decl.name}.{lv}.{a}") for a in ("seg", "crd", "first")]
    out.append((None, "vals", f"{decl.name}.vals"))
    return out


def memory_entries(decl, packed) -> list:
    """``[(memory name, entries)]`` a packed tensor (:class:`fuseflow.tensors.PackedTensor` in ``decl``'s format)
    fills, in :func:`tensor_memories` order: ``seg`` and ``crd`` as packed, ``first`` one per fibre, ``vals`` one
    per value (a blocked tensor: one per block)."""
    out = []
    for lv, array, name in tensor_memories(decl):
        if array == "vals":
            out.append((name, int(len(packed.vals))))
            continue
        seg = packed.levels[lv].seg
        n = {"seg": len(seg), "crd": len(packed.levels[lv].crd), "first": max(len(seg) - 1, 0)}[array]
        out.append((name, int(n)))
    return out


def index_width(program, decl, capacity) -> int:
    """Width of the seg and crd memories of tensor ``decl`` holding ``capacity`` entries per level (then values):
    its index width at that capacity (:func:`fuseflow.samml.widths.tensor_width`), at most the program's
    ``config.crd_width``."""
    d = copy.copy(decl)
    d.capacity = list(capacity)
    return min(int(program.config.get("crd_width", 16)), tensor_width(d))


def array_shape(program, decl, capacity, level, array) -> tuple[int, int]:
    """``(entries, bits per entry)`` of index array ``array`` (``seg``, ``crd`` or ``first``) of compressed level
    ``level`` of tensor ``decl`` whose levels hold ``capacity`` entries (then values), in a program of coordinate
    width ``config.crd_width``: seg and crd as wide as their largest entry needs (at most the tensor's index width),
    first two bits wider than crd (the fibre's first coordinate, then its 'single' and 'empty' flags:
    :func:`fuseflow.hw.memory.first_words`). At least one entry (a memory of no entries is built with one)."""
    widest = index_width(program, decl, capacity)
    depth = max(1, array_depth(capacity, level, array))
    if array == "first":
        return depth, min(widest, array_width(decl, capacity, level, "crd")) + 2
    return depth, min(widest, array_width(decl, capacity, level, array))


def memory_width(program, decl, capacity, level, array) -> int:
    """Bits per entry of a tensor memory in hardware (the kernel top's, :func:`fuseflow.hw.memory.plan_memories`):
    an index array's :func:`array_shape` width; the values at the program's fixed-point value width
    (``config.value.width``, 32 by default) times the entries of a block (one block per entry). What the off-chip
    contract packs into a beat (:func:`fuseflow.samml.offchip.entries_per_beat`), whatever the simulated number
    mode."""
    if array == "vals":
        return int(program.config.get("value", {}).get("width", 32)) * math.prod(tensor_block(decl))
    return array_shape(program, decl, capacity, level, array)[1]


def bounds_latency(program, decl, capacity, level) -> int:
    """The ``bounds_latency`` of a compressed level_scan of level ``level`` of tensor ``decl`` holding ``capacity``
    entries per level: :data:`BLOCK_BOUNDS_LATENCY` if its seg or first array goes to block RAM, else 1."""
    for array in BOUNDS_ARRAYS:
        depth, width = array_shape(program, decl, capacity, level, array)
        if memory_storage(array, depth * width) == "block":
            return BLOCK_BOUNDS_LATENCY
    return 1
