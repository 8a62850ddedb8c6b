"""What a board's block RAM holds: the blocks of a kernel top's memory plan, its memory map, and the largest
SpMV that fits.

Block counts are those of one copy per op read port (each op read port of a block RAM has blocks of its own, all
written together; the kernel top shares the first op read port with the host, :mod:`fuseflow.hw.top`): on the
ECP5 the DP16KD instances that the kernel top builds (1024 x 18 each, side by side and stacked:
:mod:`fuseflow.hw.block_ram`), on the iCE40 Yosys' mapping, the cheapest of SB_RAM40_4K 2048 x 2 .. 256 x 16.
Memories below :data:`fuseflow.samml.storage.BLOCK_RAM_MIN_BITS` (seg and first arrays: below
:data:`fuseflow.samml.storage.BOUNDS_BLOCK_MIN_BITS`) stay in the fabric: LUT RAM on the ECP5 (two LUT4s per 16 x 4
``TRELLIS_DPR16X4``, one copy per read port, the host's own included), flip-flops on the iCE40.
"""

import functools
from math import ceil

from ..errors import HardwareError
from .synth import TARGETS

#: (depth, width) aspect ratios of one block RAM per family
BLOCK_SHAPES = {
    "ice40": [(2048, 2), (1024, 4), (512, 8), (256, 16)],
}

#: LUT4s (iCE40: logic cells) of the SpMV kernel top apart from its LUT RAM, with the board's UART bridge:
#: ECP5 about 3400 in benchmarks/results/synth.md plus room; iCE40 the 7240 logic cells of the iCEBreaker
#: SpMV build (docs/boards.md), more than the UP5K's 5280 whatever the memories
SPMV_LOGIC_LUTS = {"ecp5": 6000, "ice40": 7240}


def memory_blocks(depth: int, width: int, family: str) -> int:
    """Block RAMs of one memory of ``depth`` x ``width`` bits (one write port, one read port): on the ECP5
    the DP16KD instances the kernel top builds (1024 x 18 each, :func:`fuseflow.hw.block_ram.dp16kd_blocks`),
    on the iCE40 Yosys' cheapest aspect ratio."""
    if family == "ecp5":
        from ..hw.block_ram import dp16kd_blocks
        return dp16kd_blocks(depth, width)
    return min(ceil(depth / d) * ceil(width / w) for d, w in BLOCK_SHAPES[family])


def lutram_luts(depth: int, width: int, copies: int) -> int:
    """ECP5 LUT4s of a LUT-RAM memory read through ``copies`` read ports (2 per TRELLIS_DPR16X4)."""
    return 2 * copies * ceil(depth / 16) * ceil(width / 4)


def memory_map(plan, target: str, read_ports: dict | None = None) -> list:
    """The host memory map of a :class:`fuseflow.hw.memory.MemoryPlan` with each memory's storage and block
    RAMs on ``target``: ``[{"sel", "name", "depth", "width", "bits", "storage", "blocks"}]``. ``read_ports``:
    memory name -> op read ports (:func:`op_read_ports`; a block memory has a copy per port, one without)."""
    family = TARGETS[target]["family"]
    ports = read_ports or {}
    return [{"sel": m.sel, "name": m.name, "depth": m.depth, "width": m.width, "bits": m.depth * m.width,
             "storage": m.storage,
             "blocks": memory_blocks(m.depth, m.width, family) * max(1, ports.get(m.name, 1))
             if m.storage == "block" else 0}
            for m in plan.memories]


def op_read_ports(top) -> dict:
    """Memory name -> the op read ports a built kernel top (:class:`fuseflow.hw.top.ProgramTop`) gives it, as
    copies in block RAM (:meth:`fuseflow.hw.ops._common.MemPorts.block_copies`: a port that also gives the entry
    + 1, level_scan's seg[r], counts twice)."""
    counts = {}
    for k, ops in zip(top.program.kernels, top.ops):
        for nid, op in ops.items():
            node = k.nodes[nid]
            for array, mp in getattr(op, "memories", {}).items():
                spec = top.plan.memory(node.params.get("tensor"), node.params.get("level", 0), array)
                if spec is not None and mp.reads:
                    counts[spec.name] = counts.get(spec.name, 0) + mp.block_copies()
    return counts


@functools.cache
def level_scan_read_ports() -> dict:
    """Array -> read ports of a compressed level_scan (seg: seg[r], and seg[r + 1] from a shifted copy; first;
    crd), as the op module declares them (in LUT RAM a copy each; block RAM: :func:`level_scan_block_copies`)."""
    from ..hw.ops import MODULES
    op = MODULES["level_scan"]({"format": "compressed"})
    op._MustUse__silence = True                   # only its declared memory interfaces are read
    return {array: len(mp.reads) for array, mp in op.memories.items()}


@functools.cache
def level_scan_block_copies() -> dict:
    """Array -> copies of a compressed level_scan's arrays in block RAM (one per read port, and seg's copy holding
    seg + 1, :meth:`fuseflow.hw.ops._common.MemPorts.block_copies`)."""
    from ..hw.ops import MODULES
    op = MODULES["level_scan"]({"format": "compressed"})
    op._MustUse__silence = True
    return {array: mp.block_copies() for array, mp in op.memories.items()}


def spmv_plan(rows: int, nnz: int, cols: int | None = None, crd_width: int = 16):
    """The memory plan of the suite's CSR SpMV (``x(i) = B(i,j) c(j)``, c a sparse vector, x compressed) for a
    ``rows`` x ``cols`` matrix with ``nnz`` nonzeros, c and x at full capacity. Raises HardwareError when the
    positions do not fit ``crd_width`` bits."""
    from ..hw.memory import plan_memories
    from ..samml import kernels
    cols = rows if cols is None else cols
    program = kernels.spmv(2, 2, "csr")          # the graph; shapes and capacities are set below
    program.config["crd_width"] = crd_width
    shapes = {"B": [rows, cols], "c": [cols], "x": [rows]}
    for t in program.tensors.values():
        t.shape, t.capacity = shapes[t.name], None
    caps = {"B": [rows, nnz, nnz], "c": [cols, cols], "x": [rows, rows]}
    return plan_memories(program, caps)


def spmv_fits(rows: int, nnz: int, target: str, cols: int | None = None, crd_width: int = 16) -> dict | None:
    """Blocks and LUT-RAM LUTs of the SpMV memories on ``target`` if they fit the device, else None."""
    try:
        plan = spmv_plan(rows, nnz, cols, crd_width)
    except HardwareError:
        return None
    t = TARGETS[target]
    family, cap = t["family"], t["capacity"]
    from ..samml.storage import BOUNDS_ARRAYS
    reads, copies = level_scan_read_ports(), level_scan_block_copies()
    ports = {m.name: copies.get(m.array, 1) for m in plan.memories}
    blocks = sum(e["blocks"] for e in memory_map(plan, target, ports))
    # in LUT RAM each of seg's and first's ports has a copy, and the host one more of its own (the other LUT
    # memories: counted as two)
    lut = sum(lutram_luts(m.depth, m.width, reads[m.array] + 1 if m.array in BOUNDS_ARRAYS else 2)
              for m in plan.memories if m.storage == "lut") if family == "ecp5" else 0
    if blocks > cap["brams"] or SPMV_LOGIC_LUTS[family] + lut > cap["luts"]:
        return None
    return {"rows": rows, "cols": cols or rows, "nonzeros": nnz, "brams": blocks, "lutram_luts": lut}


def largest_spmv(target: str, rows: int, cols: int | None = None, crd_width: int = 16) -> dict | None:
    """The SpMV with the most nonzeros (at most rows x cols) whose memories fit ``target`` (None: not even
    one nonzero fits)."""
    cols = rows if cols is None else cols
    hi = min(rows * cols, 1 << crd_width)        # positions are crd_width bits
    if spmv_fits(rows, 1, target, cols, crd_width) is None:
        return None
    lo = 1
    while lo < hi:                                # the largest nnz that fits (fitting is monotone in nnz)
        mid = (lo + hi + 1) // 2
        if spmv_fits(rows, mid, target, cols, crd_width) is not None:
            lo = mid
        else:
            hi = mid - 1
    return spmv_fits(rows, lo, target, cols, crd_width)


def spmv_capacity_table(target: str, rows_list=(64, 256, 1024, 2048, 4096, 8192, 16384),
                        crd_width: int = 16) -> list:
    """:func:`largest_spmv` of square matrices for each of ``rows_list`` (rows that do not fit are left out)."""
    return [r for r in (largest_spmv(target, n, crd_width=crd_width) for n in rows_list) if r is not None]


def largest_spmv_overall(target: str, crd_width: int = 16) -> dict | None:
    """The square SpMV with the most nonzeros that fits ``target``, and the most rows at that count."""
    best = max((r for r in spmv_capacity_table(target, crd_width=crd_width)), key=lambda r: r["nonzeros"],
               default=None)
    if best is None:
        return None
    lo, hi = best["rows"], (1 << crd_width) - 1
    while lo < hi:                                # more rows cost c and x blocks: monotone
        mid = (lo + hi + 1) // 2
        if spmv_fits(mid, best["nonzeros"], target, crd_width=crd_width) is not None:
            lo = mid
        else:
            hi = mid - 1
    return spmv_fits(lo, best["nonzeros"], target, crd_width=crd_width)
