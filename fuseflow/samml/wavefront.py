"""The two wavefronts of a tile-fused ``T = X W; G = A T`` region: which nonzeros of ``A`` each runs on.

One definition for the compiler's cost model (:mod:`fuseflow.compiler.tiling`) and the tiled simulator
(:mod:`fuseflow.sim.tiled`); docs/tiling.md, "Tile fusion".
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["wavefront_split"]


def wavefront_split(A, tile: int, lag: int = 0):
    """The dependence of ``G = A T`` on the row tiles of ``T`` (``A`` square, SciPy sparse; row tile ``k`` of both
    is rows ``k*tile`` to ``(k+1)*tile``) in a wavefront plan of lag ``lag`` (docs/tiling.md, "Tile fusion"): row
    tile ``m`` of ``G`` runs in wavefront 1 right after ``T``'s row tile ``m + lag`` (the last one for the last
    tiles), on the blocks ``(m, w)`` of ``A`` with ``w <= m + lag``; its block ``(m, min(m + lag, last))`` reads
    ``T``'s tile on chip (fused). The other blocks are wavefront 2's. Returns ``(wave1, wave2, stats)``: the two
    parts of A and the counts: ``rows`` (non-empty rows of A), ``fused_rows`` (rows whose every nonzero reads
    ``T``'s tile on chip: seed 003's fused iterations; with lag 0, the rows whose dependence stays inside their own
    tile), ``wave1_rows`` (rows complete after wavefront 1), ``nnz``, ``fused_nnz``, ``wave1_nnz`` and the ratios
    ``fused_ratio`` (rows, seed 003's), ``fused_nnz_ratio``, ``wave1_ratio`` and ``wave1_nnz_ratio``."""
    coo = sp.coo_matrix(A)
    coo.sum_duplicates()
    n = coo.shape[0]
    last = max(-(-n // tile) - 1, 0)
    br, bc = coo.row // tile, coo.col // tile
    onchip_col = np.minimum(br + lag, last)
    first = bc <= onchip_col
    fused = bc == onchip_col
    nonempty = np.zeros(n, bool)
    nonempty[coo.row] = True

    def complete(keep):
        out = np.zeros(n, bool)
        out[coo.row[~keep]] = True
        return int((nonempty & ~out).sum())
    rows = int(nonempty.sum())
    nnz = int(coo.nnz)

    def part(keep):
        return sp.csr_matrix((coo.data[keep], (coo.row[keep], coo.col[keep])), shape=coo.shape)

    def ratio(a, b):
        return round(a / b, 4) if b else 1.0
    stats = {"tile": tile, "lag": lag, "rows": rows, "fused_rows": complete(fused), "wave1_rows": complete(first),
             "nnz": nnz, "fused_nnz": int(fused.sum()), "wave1_nnz": int(first.sum())}
    stats.update({"fused_ratio": ratio(stats["fused_rows"], rows), "fused_nnz_ratio": ratio(stats["fused_nnz"], nnz),
                  "wave1_ratio": ratio(stats["wave1_rows"], rows), "wave1_nnz_ratio": ratio(stats["wave1_nnz"], nnz)})
    return part(first), part(~first), stats
