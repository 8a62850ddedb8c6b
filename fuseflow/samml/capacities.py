"""Declared capacities: how many entries each level of a tensor may hold, so that hardware builds without data.

Rule (:func:`declared_capacity`): a tensor gets its worst case (every position of a dense tensor of its
shape, :meth:`~fuseflow.samml.graph.TensorDecl.worst_case_capacity`) when that has at most
:data:`WORST_CASE_LIMIT` values: any data of the shape then fits. Larger tensors that declare an expected
``density`` get a bound from it instead: ``nnz = density x size`` plus a binomial margin of four standard
deviations and 16, capped at the worst case; a compressed level holds at most that many entries, a dense
level its parent's entries times its dimension. Larger tensors without a density keep the worst case (which
may not fit a board: declare a density). Data that exceeds a declared capacity is refused with one line.

Example
-------
>>> from fuseflow.samml import Program
>>> p = Program("x")
>>> B = p.tensor("B", "input", [2500, 2500], ["dense", "compressed"], density=0.05)
>>> declared_capacity(B)
[2500, 314696, 314696]
"""

from __future__ import annotations

import math

#: tensors with at most this many values in the worst case get the worst case (any data of the shape fits)
WORST_CASE_LIMIT = 1 << 16

__all__ = ["WORST_CASE_LIMIT", "declared_capacity", "declare_capacities"]


def declared_capacity(decl) -> list:
    """Capacity (entries per level, then values) a tensor declaration gets by the rule above."""
    worst = decl.worst_case_capacity()
    if worst[-1] <= WORST_CASE_LIMIT or decl.density is None or decl.density >= 1:
        return worst
    size = worst[-1]
    mean = decl.density * size
    nnz = min(size, int(math.ceil(mean + 4 * math.sqrt(mean * (1 - decl.density)) + 16)))
    caps, prev = [], 1
    for level, fmt in enumerate(decl.levels):
        full = prev * int(decl.level_dim(level))
        prev = full if fmt == "dense" else min(full, nnz)
        caps.append(prev)
    return caps + [prev]


def declare_capacities(program, options=None) -> dict:
    """The capacities pass: every tensor without a declared capacity gets :func:`declared_capacity` (in place).
    Returns ``{tensor: capacity}`` of the tensors it declared."""
    done = {}
    for t in program.tensors.values():
        if t.capacity is None:
            t.capacity = declared_capacity(t)
            done[t.name] = list(t.capacity)
    return done
