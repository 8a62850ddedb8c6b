"""The tiling plan of a tiled program: graph.json's ``tiling`` section, read by the simulator and the RTL.

A tiled program's kernels are ordinary SAMML kernels at *tile shape* (every tensor declaration in graph.json has
the tile's shape); the plan says how the full tensors are cut into tiles and what moves between off-chip memory
and the kernels' tensor memories per tile (docs/tiling.md):

- ``dims``: the split dimensions, ``{name: {"size": tile size, "extent": full size, "tiles": count,
  "indices": [the program's index names on it]}}``;
- ``tensors``: every tensor of the program, ``{name: {"shape": full shape, "dims": [split dim or null per
  mode]}}`` (an accumulator input has ``"acc_of"``: the output whose partials it carries);
- ``kernels``: in execution order, ``{"name", "grid": [split dims, outer to inner: the output's first],
  "loads": [tensors read from off-chip], "stores": [tensors written], "resident": [loads whose tile never
  changes: loaded once], "acc": {output: accumulator input}, "skip_empty": [a tile where one of these is empty is
  not run]}``;
- ``merge``: how partial outputs over a split reduction merge (``"on-chip"``: tiles are visited output-partition
  major, so the partial stays in the kernel's output memory, which is also its accumulator input, between the
  tiles of one partition and is stored once after the partition's last tile; a partition visited again later
  would be loaded back, read-modify-write, which this visiting order never does);
- ``contract``: the DMA parameters (registry ``DMA``, :class:`~fuseflow.samml.offchip.OffchipContract`);
- ``chosen``, ``onchip_bits``, ``tile_bits``, ``notes``: how the sizes were chosen (``manual`` or ``auto``) and
  the on-chip bits of one tile against the budget.

Transfers: a packed tile of a tensor moves as one transfer per tensor memory it fills
(:func:`fuseflow.samml.storage.memory_entries`: ``seg``, ``crd`` and ``first`` per compressed level, then
``vals``; dense levels have no array), one entry per beat, at the addresses of
:func:`fuseflow.samml.offchip.layout`; an output is stored whole (every memory's capacity), as the RTL does.
"""

from __future__ import annotations

from ..errors import GraphError
from .offchip import OffchipContract
from .registry import DMA, memory_role

__all__ = ["contract_of", "check_tiling", "full_shape", "full_view", "banked_inputs"]


def contract_of(tiling: dict) -> OffchipContract:
    """The :class:`OffchipContract` of a plan."""
    return OffchipContract(**{**DMA.defaults(), **tiling.get("contract", {})})


def banked_inputs(kernels: list, buffers: int) -> set:
    """The tensors whose memories a plan's ``kernels`` (its ``kernels`` list) hold in ``buffers`` banks: the loads
    that change between tiles (not ``resident``); every other tensor has one. What the compiler's on-chip bits
    count (:func:`fuseflow.compiler.tiling.program_tile_bits`) and the RTL builds (:mod:`fuseflow.hw.axi_master`:
    with ``buffers`` 2 the kernel reads one bank while the DMA fills the other)."""
    if buffers == 1:
        return set()
    resident = {t for k in kernels for t in k["resident"]}
    return {t for k in kernels for t in k["loads"]} - resident


def full_shape(tiling: dict, name: str) -> tuple:
    """The full (untiled) shape of tensor ``name``."""
    return tuple(tiling["tensors"][name]["shape"])


def check_tiling(program) -> None:
    """Semantic checks of a program's ``tiling`` section (the schema checked its shape): every tensor it names
    exists, tile shapes are the declared shapes, split dims are consistent; raises GraphError."""
    t = program.tiling
    if t is None:
        return
    where = "$.tiling"
    for d, info in t["dims"].items():
        if not 1 <= info["size"] <= info["extent"]:
            raise GraphError(f"{where}.dims.{d}", f"tile size {info['size']} is not in 1..{info['extent']}")
        if info["tiles"] != -(-info["extent"] // info["size"]):
            raise GraphError(f"{where}.dims.{d}", f"{info['tiles']} tiles, but {info['extent']} / {info['size']} "
                                                  f"gives {-(-info['extent'] // info['size'])}")
    for name, info in t["tensors"].items():
        decl = program.tensors.get(name)
        if decl is None:
            raise GraphError(f"{where}.tensors.{name}", "no such tensor in the program")
        if len(info["shape"]) != decl.order or len(info["dims"]) != decl.order:
            raise GraphError(f"{where}.tensors.{name}", f"order {decl.order} in the program")
        for m, (full, d) in enumerate(zip(info["shape"], info["dims"])):
            tile = t["dims"][d]["size"] if d is not None else full
            if d is not None and d not in t["dims"]:
                raise GraphError(f"{where}.tensors.{name}.dims[{m}]", f"unknown split dimension {d!r}")
            if d is not None and t["dims"][d]["extent"] != full:
                raise GraphError(f"{where}.tensors.{name}.shape[{m}]", f"{full}, but dimension {d} has extent "
                                                                      f"{t['dims'][d]['extent']}")
            if decl.shape[m] != tile:
                raise GraphError(f"{where}.tensors.{name}", f"mode {m} is declared {decl.shape[m]} but its tile "
                                                            f"is {tile}")
    kernels = [k.name for k in program.kernels]
    if [k["name"] for k in t["kernels"]] != kernels:
        raise GraphError(f"{where}.kernels", f"names {[k['name'] for k in t['kernels']]} but the program's kernels "
                                             f"are {kernels}")
    for i, k in enumerate(t["kernels"]):
        for key in ("loads", "stores", "resident", "skip_empty"):
            for n in k[key]:
                if n not in t["tensors"]:
                    raise GraphError(f"{where}.kernels[{i}].{key}", f"unknown tensor {n!r}")
        for d in k["grid"]:
            if d not in t["dims"]:
                raise GraphError(f"{where}.kernels[{i}].grid", f"unknown split dimension {d!r}")
    wf = t.get("wavefront")
    if wf is not None:
        names = {k["name"]: k for k in t["kernels"]}
        for key in ("producer", "consumer"):
            if wf[key] not in names:
                raise GraphError(f"{where}.wavefront.{key}", f"no kernel {wf[key]!r}")
        for key in ("tensor", "sparse"):
            if wf[key] not in t["tensors"]:
                raise GraphError(f"{where}.wavefront.{key}", f"unknown tensor {wf[key]!r}")
        for key in ("rows", "window"):
            if wf[key] not in t["dims"]:
                raise GraphError(f"{where}.wavefront.{key}", f"unknown split dimension {wf[key]!r}")
        if t["dims"][wf["rows"]]["size"] != t["dims"][wf["window"]]["size"]:
            raise GraphError(f"{where}.wavefront", f"the rows ({wf['rows']}) and the window ({wf['window']}) need "
                                                   f"the same tile size")
        if set(names[wf["consumer"]]["grid"]) != {wf["rows"], wf["window"]}:
            raise GraphError(f"{where}.wavefront", f"kernel {wf['consumer']}'s grid must be its rows and window")
        if wf.get("units", 2) not in (1, 2):
            raise GraphError(f"{where}.wavefront.units", f"must be 1 (one kernel at a time) or 2 (both kernels on "
                                                         f"chip), not {wf['units']!r}")
    contract_of(t)                         # its parameters' validation (FuseFlowError names the bad one)


def full_view(program):
    """``program``'s tensors at their full shapes, without the accumulators (for drawing or checking data of a tiled
    program; it has no kernels). An untiled program is returned as it is."""
    t = getattr(program, "tiling", None)
    if t is None:
        return program
    view = type(program)(program.name, program.expr, program.config)     # a Program (graph.py imports this module)
    for name, decl in program.tensors.items():
        info = t["tensors"].get(name)
        if info is not None and "acc_of" in info:
            continue
        shape = info["shape"] if info is not None else decl.shape
        view.tensor(name, decl.role, shape, decl.levels, decl.mode_order, None, decl.dtype, decl.density, decl.block)
    return view


def kernel_tensors(kernel) -> tuple:
    """(tensors the kernel reads, tensors it writes) by its memory-backed nodes, in node order."""
    reads, writes = [], []
    for n in kernel.nodes.values():
        t = n.params.get("tensor")
        if t is None:
            continue
        lst = writes if memory_role(n.op)[0] == "write" else reads
        if t not in lst:
            lst.append(t)
    return reads, writes
