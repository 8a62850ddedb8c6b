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
    from .model import compile, load

__all__ = ["compile", "load", "__version__"]

__version__ = "0.1.0"


def _take_signals_when_run_as_a_command() -> None:
    # `python -m fuseflow...` and the `fuseflow` script: SIGINT/SIGTERM give the one-line message and exit
    # 130/143 even while the command's (slow) imports run; a library import changes nothing.
    from . import cli
    if cli.started_as_command():
        cli.install_signal_handlers()


_take_signals_when_run_as_a_command()


def __getattr__(name: str) -> Any:
    # ``compile`` and ``load`` are :mod:`fuseflow.model`'s, imported on first use so that ``import fuseflow`` stays
    # light (the command line's start-up imports neither NumPy nor the compiler)
    if name in ("compile", "load"):
        from . import model
        return getattr(model, name)
    raise AttributeError(f"module 'fuseflow' has no attribute {name!r}")
