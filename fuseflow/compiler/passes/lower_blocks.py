"""The ``lower_blocks`` stage: a program with blocked operands is compiled at block granularity
(:func:`fuseflow.compiler.blocks.lower_blocks`, docs/compiler.md)."""

from __future__ import annotations

from ..blocks import lower_blocks

__all__ = ["lower_blocks_stage"]


def lower_blocks_stage(c, options) -> dict:
    """Replace ``c.ir`` by the IR at block granularity; reports the blocked tensors {name: block size}."""
    c.ir = lower_blocks(c.ir)
    return {"blocked": {t.name: t.block for t in c.ir.tensors.values() if t.block}}
