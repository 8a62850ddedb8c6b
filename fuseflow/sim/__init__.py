"""The reference simulator: token-exact, cycle-level models of every SAMML op (float and fixed modes)."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:                       # what __getattr__ gives, for type checkers
    from .engine import SimResult, run_op
    from .tiled import run

__all__ = ["run", "run_op", "SimResult"]


def __getattr__(name: str) -> Any:
    # the engine (NumPy, the op models, the compiled engine) is imported on first use: `fuseflow sim --help` does
    # not pay for it (issue 42)
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    engine: ModuleType
    if name == "run":                   # tiled programs (graph.json "tiling") run tile by tile
        from . import tiled as engine
    else:
        from . import engine
    value = getattr(engine, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
