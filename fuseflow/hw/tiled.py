"""A tiled program (graph.json with a ``tiling`` section, docs/tiling.md) on the RTL's AXI4 master port.

    from fuseflow.hw.build import build_design
    from fuseflow.hw.tiled import tiled_image, tiled_outputs
    files = build_design("graph.json", "build/")                 # a tiled graph: --interface axi-master, its contract
    run = tiled_image(files.build, files.manifest, {"A": A, "x": x})   # full-size inputs
    res = run_axim(bdir, files.manifest, run.image, memory="contract")  # fuseflow.hw.axi_master
    outs = tiled_outputs(files.manifest, run, res["memory"])     # full-size outputs: run.sim.outputs, bit for bit
    res["registers"]["cycles"] == run.sim.cycles                 # the tiled simulator's cycles, exactly

One definition on each side: :func:`tiled_image` runs the tiled simulator (:func:`fuseflow.sim.tiled.run_tiled`,
fixed point, keeping each tile's packed inputs) and lays its tile steps out as the off-chip image
(:func:`fuseflow.hw.offchip_image.build_image`): the same tiles, the same transfers (what each tile loads, which
operands stay in their memories, every output memory stored whole) at the same addresses
(:func:`fuseflow.samml.offchip.layout`), so the image's cycles under the contract are the simulator's; it checks
that before returning. The RTL implements the plans of one kernel without split sums (no accumulator), with
``buffers`` 1 or 2; :func:`check_plan` refuses the others in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import HardwareError

if TYPE_CHECKING:
    from ..samml.graph import Program
    from ..samml.offchip import OffchipContract
    from ..sim.engine import SimResult
    from .elaborate import Build
    from .offchip_image import OffchipImage

__all__ = ["check_plan", "plan_contract", "TiledRun", "tiled_image", "tiled_outputs"]


def _tiling(program: Program) -> dict:
    """The program's ``tiling`` section; a program without one is refused in one line."""
    if program.tiling is None:
        raise HardwareError("tiling", f"program {program.name} has no tiling section (not a tiled graph)")
    return program.tiling


def check_plan(program: Program) -> None:
    """Refuse (one line) a tiling plan the RTL's tile sequencer does not run."""
    t = _tiling(program)
    if len(program.kernels) != 1:
        raise HardwareError("tiling", f"{len(program.kernels)} kernels: the RTL's tile sequencer runs one tiled "
                                      f"kernel (compile with fuse='full' or build each kernel's graph)")
    accs = {o: a for k in t["kernels"] for o, a in k["acc"].items()}
    if accs:
        split = sorted({d for k in t["kernels"] for d in k["grid"]}
                       - {d for o in accs for d in t["tensors"][o]["dims"] if d is not None})
        raise HardwareError("tiling", f"a split sum ({', '.join(split)}: partial outputs "
                                      f"{', '.join(sorted(accs))} merged across tiles) is not in the RTL yet: "
                                      f"tile only the output's indices")


def plan_contract(program: Program, given: OffchipContract | None = None) -> OffchipContract:
    """The off-chip contract of a tiled program's build: its plan's; ``given`` (``--offchip``) must equal it."""
    from ..samml.tileplan import contract_of
    check_plan(program)
    plan = contract_of(_tiling(program))
    if given is not None and given != plan:
        diff = ", ".join(f"{k} {getattr(given, k)} != {getattr(plan, k)}" for k in plan.__dataclass_fields__
                         if getattr(given, k) != getattr(plan, k))
        raise HardwareError("--offchip", f"differs from the tiled graph's contract ({diff}): leave --offchip out, "
                                         f"the build takes the graph's")
    return plan


@dataclass
class TiledRun:
    """A tiled program's run on the RTL: ``sim`` the tiled simulator's result (fixed point; ``sim.cycles`` the
    cycles the RTL takes behind the contract memory), ``image`` the off-chip image, ``steps`` the tile steps (one
    per image tile), ``program``."""
    program: Program
    sim: SimResult
    image: OffchipImage
    steps: list


def tiled_image(b: Build, manifest: dict, inputs: dict[str, Any], *, base: int = 0, engine: str = "auto") -> TiledRun:
    """The off-chip image of tiled program ``b.program`` (``b``: its :class:`~fuseflow.hw.elaborate.Build`,
    ``manifest``: the ``axi-master`` build's) on full-size ``inputs``, with the tiled simulation it follows.
    ``base``: the image's byte address (a multiple of 4096 keeps the simulator's cycles; the simulator lays the
    image out from 0)."""
    from ..sim.tiled import run_tiled
    from .offchip_image import build_image, contract_of, tile_loads
    program = b.program
    if getattr(program, "tiling", None) is None:
        raise HardwareError("tiled image", f"program {program.name} has no tiling section (not a tiled graph)")
    if plan_contract(program) != contract_of(manifest):
        raise HardwareError("tiled image", "the build's contract is not the tiled graph's: rebuild from the graph")
    sim = run_tiled(program, inputs, mode="fixed", engine=engine, keep_tiles=True)
    steps = sim.stats["steps"]
    if not steps:
        raise HardwareError("tiled image", "every tile is empty: nothing to run")
    tiles = []
    for i, s in enumerate(steps):
        words = tile_loads(b, s.packed)
        loads = {}
        for _, mem, n in s.loads:
            if len(words[mem]) != n:
                raise HardwareError(f"tile {i}", f"{mem}: {len(words[mem])} words packed, the simulation moved {n}")
            loads[mem] = words[mem]
        tiles.append({"loads": loads, "stores": [mem for _, mem, _ in s.stores]})
    image = build_image(manifest, tiles, base=base)
    want = [(s.load_cycles, s.run_cycles, s.store_cycles) for s in steps]
    got = image.steps([s.run_cycles for s in steps])
    if base % 4096 == 0 and got != want:
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
        raise HardwareError(f"tile {bad}", f"the image's (load, run, store) cycles {got[bad]} are not the "
                                           f"simulation's {want[bad]}")
    return TiledRun(program, sim, image, steps)


def _dense(t: dict, stored: dict, frac: int) -> np.ndarray:
    """A stored tensor (:func:`fuseflow.hw.offchip_image.read_outputs`'s ``{"levels", "vals"}``, raw fixed point)
    as a dense array at tile shape."""
    shape, order = t["shape"], t["mode_order"]
    coords: list[tuple[int, ...]] = [()]
    for lv, level in enumerate(stored["levels"]):
        if "dense" in level:
            coords = [c + (k,) for c in coords for k in range(level["dense"])]
        else:
            seg, crd = level["seg"], level["crd"]
            coords = [c + (crd[q],) for p, c in enumerate(coords) for q in range(seg[p], seg[p + 1])]
    out = np.zeros(shape)
    for c, v in zip(coords, stored["vals"]):
        idx = [0] * len(shape)
        for lv, k in enumerate(c):
            idx[order[lv]] = k
        out[tuple(idx)] = v * 2.0 ** -frac
    return out


def tiled_outputs(manifest: dict, run: TiledRun, memory: bytes, base: int | None = None) -> dict:
    """The full-size output tensors the RTL stored (``memory``: the off-chip bytes after the run, from ``base``,
    default the image's), each tile's stores decoded and placed where the simulator places them (tiles that were
    never run, being empty, stay 0)."""
    from ..samml.tileplan import full_shape
    from .offchip_image import read_outputs
    t = _tiling(run.program)
    frac = int(manifest["config"].get("value", {}).get("frac", 16))
    decls = {d["name"]: d for d in manifest["tensors"]}
    outs: dict[str, np.ndarray] = {}
    for i, step in enumerate(run.steps):
        stored = read_outputs(manifest, run.image, memory, i, base)
        for name, tensor in stored.items():
            full = outs.setdefault(name, np.zeros(full_shape(t, name)))
            tile = _dense(decls[name], tensor, frac)
            dims = t["tensors"][name]["dims"]
            rg = [step.box[d] if d is not None else (0, full.shape[m]) for m, d in enumerate(dims)]
            full[tuple(slice(x, y) for x, y in rg)] = tile[tuple(slice(0, y - x) for x, y in rg)]
    return {o.name: outs.get(o.name, np.zeros(full_shape(t, o.name))) for o in run.program.outputs}
