"""The SAMML contract: op registry, program/kernel graph model, graph.json load/validate/save, DOT export."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:                       # what __getattr__ gives, for type checkers
    from .graph import Kernel, Node, NodeHandle, PortRef, Program, Stream, TensorDecl
    from .io import dumps, from_dict, load, save
    from .registry import OPS, OpSpec, Param, Port, get_op

# The graph model (networkx), graph.json I/O (jsonschema) and the op registry are imported on first use, so that
# a command's --help does not pay for them (issue 42). name -> submodule that defines it.
_LAZY = {**dict.fromkeys(("Kernel", "Node", "NodeHandle", "PortRef", "Program", "Stream", "TensorDecl"), "graph"),
         **dict.fromkeys(("dumps", "from_dict", "load", "save"), "io"),
         **dict.fromkeys(("OPS", "OpSpec", "Param", "Port", "get_op"), "registry")}


def __getattr__(name: str) -> Any:
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module: ModuleType
    if sub == "graph":                  # only the submodule asked for: OPS does not load jsonschema
        from . import graph as module
    elif sub == "io":
        from . import io as module
    else:
        from . import registry as module
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["OPS", "OpSpec", "Param", "Port", "get_op", "Program", "Kernel", "Node", "NodeHandle", "PortRef",
           "Stream", "TensorDecl", "load", "save", "dumps", "from_dict"]
