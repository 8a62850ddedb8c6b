"""FuseFlow-HW: fusion-centric compilation of sparse ML programs to SAMML dataflow graphs,
a cycle-level reference simulator, and Amaranth hardware for the same graphs.

``fuseflow.compile(model, example_inputs)`` takes a PyTorch model (the ``torch`` extra), and
``fuseflow.compile("prog.ff")`` a ``.ff`` program (a path, its text, or a parsed ``EinsumProgram``; shapes and
formats are declared, so no example inputs are needed); both return one model object with simulate / check /
build / rtl_sim / report / save (see :mod:`fuseflow.model`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import CompiledModel

__version__ = "0.1.0"


def _take_signals_when_run_as_a_command() -> None:
    # `python -m fuseflow...` and the `fuseflow` script: SIGINT/SIGTERM give the one-line message and exit
    # 130/143 even while the command's (slow) imports run; a library import changes nothing.
    from . import cli
    if cli.started_as_command():
        cli.install_signal_handlers()


_take_signals_when_run_as_a_command()


def compile(model: Any, example_inputs: Any = None, fuse: str | list = "regions", order: Any = None,
            mode: str = "fixed", formats: dict | None = None, name: str | None = None, max_nodes: int | None = None,
            max_kernels: int | None = None, memory: str = "hbm2", parallel: dict | str | None = None,
            max_lanes: int | None = None, redundancy: str = "warn", budget: float | None = None,
            simulate: bool = True, progress: Any = None, tiles: dict | str | None = None,
            onchip_bits: int | None = None, dma: dict | str | None = None, tile_fusion: str | None = None,
            min_tiles: int | None = None) -> CompiledModel:
    """Trace and compile a PyTorch model, or compile a ``.ff`` program (a path, source text or an
    ``EinsumProgram``; ``example_inputs`` optional) (``fuse="auto"``: the autoscheduler; ``tiles``, ``onchip_bits``,
    ``dma``, ``tile_fusion``, ``min_tiles``: tiling, docs/tiling.md): see :func:`fuseflow.model.compile`."""
    from .model import compile as _compile
    return _compile(model, example_inputs, fuse=fuse, order=order, mode=mode, formats=formats, name=name,
                    max_nodes=max_nodes, max_kernels=max_kernels, memory=memory, parallel=parallel,
                    max_lanes=max_lanes, redundancy=redundancy, budget=budget, simulate=simulate, progress=progress,
                    tiles=tiles, onchip_bits=onchip_bits, dma=dma, tile_fusion=tile_fusion, min_tiles=min_tiles)


def load(path: str, model: Any = None) -> CompiledModel:
    """Load a compiled model saved with ``CompiledModel.save``: see :func:`fuseflow.model.load`."""
    from .model import load as _load
    return _load(path, model)
