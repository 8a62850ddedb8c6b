"""The SAMML contract: op registry, program/kernel graph model, graph.json load/validate/save, DOT export."""

from .graph import Kernel, Node, NodeHandle, PortRef, Program, Stream, TensorDecl
from .io import dumps, from_dict, load, save
from .registry import OPS, OpSpec, Param, Port, get_op

__all__ = ["OPS", "OpSpec", "Param", "Port", "get_op", "Program", "Kernel", "Node", "NodeHandle", "PortRef",
           "Stream", "TensorDecl", "load", "save", "dumps", "from_dict"]
