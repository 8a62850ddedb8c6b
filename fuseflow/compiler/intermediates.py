"""Format inference for intermediates (Scorch, Section V): the level formats of a tensor one kernel writes and a
later kernel reads.

User-visible outputs keep the canonical rule (every level compressed, empty fibres dropped). An intermediate is
read only by the compiler's own kernels, so each of its levels gets the format its data supports
(:func:`fuseflow.tensors.formats.written_level_format`):

- **dense** when the writing kernel emits every coordinate of the level's dimension in every fibre (the
  fusion-table planner's ``covers``: a scan of a dense level under dense levels, a dense iterator, or a union
  with one; a bias ``+ b(j)`` or a CSR operand's row level makes a level covered). Its estimated density is 1,
  it stores nothing, and a reader that intersects it with a sparse operand *locates* into it (the locate pass)
  instead of scanning the whole fibre: ``A(i,k) * H(k,j)`` with ``H``'s row level dense costs the nonzeros of
  ``A``, not ``n`` per row of ``A``;
- **compressed** otherwise (only the coordinates the kernel writes).

Levels are dense from the top down only (a dense level below a compressed one would need the compressed level's
fibres to be complete as well); below the last dense level the writer's ``crd_drop`` chain keeps the usual
canonical form. Blocked programs keep every level compressed.
"""

from __future__ import annotations

from ..tensors.formats import DENSE, written_level_format
from .tables import plan_kernel


def infer_levels(kp, readers=()) -> tuple[tuple, list]:
    """(level formats in storage order, notes saying why) of the tensor kernel plan ``kp`` writes, at its
    selected order. ``readers``: text of the statements that read the tensor (for the notes)."""
    planner, levels, _ = plan_kernel(kp.expr, kp.out_idx, kp.order, kp.views, kp.leaf_view, kp.sizes, kp.out)
    out, why = [], []
    for lv, (x, crd) in enumerate(levels):
        above = all(f == DENSE for f in out)
        covered = above and planner.covers(crd)
        fmt = written_level_format(covered)
        out.append(fmt)
        if covered:
            why.append(f"{x} {fmt} (every coordinate is written: density 1, readers locate into it)")
        elif not above:
            why.append(f"{x} {fmt} (below a compressed level)")
        else:
            why.append(f"{x} {fmt} (only the coordinates some operand holds are written)")
    note = f"format of intermediate {kp.out}: " + ", ".join(why)
    if readers:
        note += f"; read by {'; '.join(readers)}"
    return tuple(out), [note]
