"""Resource limits, checked before work starts (see ``docs/errors.md``, "Limits").

Each limit stops an input that would otherwise exhaust memory or time deep inside a command (a
``MemoryError`` after tens of seconds, or a machine swapping) with a one-line error that names the limit
and how to raise it. Every limit can be raised with an environment variable, for users who have the memory
(``FUSEFLOW_MAX_DENSE_ENTRIES=4000000000 python -m fuseflow.sim run ...``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import FuseFlowError


@dataclass(frozen=True)
class Limit:
    """One limit: its name, default, the environment variable that overrides it, and why it exists."""
    name: str
    default: int
    env: str
    reason: str

    @property
    def value(self) -> int:
        text = os.environ.get(self.env)
        if text is None or text == "":
            return self.default
        try:
            v = int(text)
        except ValueError:
            raise FuseFlowError(self.env, f"must be a positive integer, got {text!r}") from None
        if v < 1:
            raise FuseFlowError(self.env, f"must be a positive integer, got {text!r}")
        return v

    def check(self, value: int, what: str) -> None:
        """Raise a one-line error naming ``what``, the limit and its override when ``value`` exceeds it."""
        limit = self.value
        if value > limit:
            raise FuseFlowError(what, f"{value} exceeds the limit of {limit} {self.name} (set {self.env} to "
                                      f"raise it; see docs/errors.md)")


ARITY = Limit("inputs per intersect/union", 64, "FUSEFLOW_MAX_ARITY",
              "every input is a stream, a FIFO and a comparator in hardware, and a Python list per step in "
              "the simulator; real kernels join a handful of operands")
FIFO_DEPTH = Limit("tokens of FIFO depth", 1 << 16, "FUSEFLOW_MAX_FIFO_DEPTH",
                   "a channel's storage is allocated up front (registers or block RAM in hardware); deeper "
                   "FIFOs than the longest fibre buy nothing")
DIMENSION = Limit("per dimension", 1 << 40, "FUSEFLOW_MAX_DIMENSION",
                  "coordinates travel as crd_width-bit integers (at most 64 bits) and dense levels are "
                  "allocated by dimension")
DENSE_ENTRIES = Limit("dense entries per tensor", 1 << 27, "FUSEFLOW_MAX_DENSE_ENTRIES",
                      "the simulator materialises dense levels and dense results as float64 arrays (8 bytes "
                      "per entry: the default is 1 GiB)")
NODES = Limit("nodes per program", 100_000, "FUSEFLOW_MAX_NODES",
              "validation, scheduling and elaboration are linear or worse in the node count; compiled "
              "programs have hundreds")
STREAMS = Limit("streams per program", 200_000, "FUSEFLOW_MAX_STREAMS",
                "as for nodes: every stream is a channel with storage in the simulator and in hardware")
LANES = Limit("parallel lanes per index", 64, "FUSEFLOW_MAX_LANES",
              "every lane is a copy of the subgraph below the parallelized index (its ops, FIFOs and memory "
              "read ports), and the serializer compares every lane's head each cycle")
EXPR_DEPTH = Limit("levels of expression nesting", 100, "FUSEFLOW_MAX_EXPR_DEPTH",
                   "the compiler walks expressions recursively; Python's recursion limit (1000 frames) is "
                   "reached a few hundred levels down")

ALL = (ARITY, FIFO_DEPTH, DIMENSION, DENSE_ENTRIES, NODES, STREAMS, EXPR_DEPTH, LANES)
