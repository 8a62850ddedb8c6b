"""The ``codegen`` stage: fusion tables, then the SAMML program (:func:`fuseflow.compiler.codegen.generate_program`)."""

from __future__ import annotations

from ..codegen import generate_program

__all__ = ["codegen_stage"]


def codegen_stage(c, options) -> dict:
    """Set ``c.program`` and ``c.tables`` from ``c.plans``; reports the kernels and nodes made."""
    c.program, c.tables = generate_program(c.ir, c.plans, options.name, options.general_transposes)
    return {"kernels": len(c.program.kernels), "nodes": sum(len(k.nodes) for k in c.program.kernels)}
