"""The ``lower_sugar`` stage: softmax / layernorm / mean become primitive statements
(:func:`fuseflow.compiler.lower_sugar.lower_sugar`, docs/compiler.md)."""

from __future__ import annotations

from ..lower_sugar import lower_sugar

__all__ = ["lower_sugar_stage"]


def lower_sugar_stage(c, options) -> dict:
    """Replace ``c.ir`` by the IR without sugar; reports the statements before and after."""
    before = len(c.ir.stmts)
    c.ir = lower_sugar(c.ir)
    return {"statements": len(c.ir.stmts), "added": len(c.ir.stmts) - before}
