"""The ``blocks`` graph pass: every val stream states the block shape its producer gives
(:func:`fuseflow.samml.blocks.apply_blocks`, docs/samml.md "Blocks")."""

from __future__ import annotations

from ...samml.blocks import apply_blocks

__all__ = ["blocks_pass"]


def blocks_pass(program, options) -> dict:
    """Apply the blocks of blocked tensors to the streams; reports the number of streams that carry blocks."""
    if not any(t.block for t in program.tensors.values()):
        return {"blocked_streams": 0}
    apply_blocks(program)
    return {"blocked_streams": sum(1 for k in program.kernels for s in k.streams.values() if s.block)}
