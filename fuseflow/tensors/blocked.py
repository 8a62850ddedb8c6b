"""Blocked tensors (``bcsr:B``, ``bdcsr:B``, ``bdv:B``): sparse levels over block coordinates, dense blocks as values.

A blocked :class:`~fuseflow.tensors.packed.PackedTensor` has the element ``shape`` (every dimension divisible by
B), levels over the block coordinates ``(i // B, j // B)`` (exactly the levels the unblocked format would have
for the pattern of stored blocks) and ``vals`` of shape ``(blocks, B, B)`` (``(blocks, B)`` for a vector): block
``k`` is the value at position ``k``, row-major in tensor-dimension order. Packing keeps the blocks that hold a
nonzero (from NumPy arrays and SciPy matrices) or every stored block (from a ``scipy.sparse.bsr_array`` of the
same block size, so ``bsr_array -> packed -> bsr_array`` is exact). See docs/tensors.md, "Blocked formats".
"""

from __future__ import annotations

import numpy as np

from ..errors import TensorError
from .formats import TensorFormat


def _fail(what, why):
    raise TensorError(what, why)


def _block_grid(shape, fmt):
    """Block-coordinate shape (tensor-dimension order); raises for a shape not divisible by B."""
    fmt.level_dims(shape)                      # the divisibility check, one definition
    return tuple(n // b for n, b in zip(shape, fmt.block))


def from_blocks(cls, shape, fmt: TensorFormat, block_coords, blocks):
    """Pack blocks at block coordinates (``block_coords``: ``(order, n)`` in tensor-dimension order, unique)."""
    grid = _block_grid(shape, fmt)
    n = block_coords.shape[1]
    base = fmt.unblocked()
    lc = block_coords[list(fmt.mode_order)]
    perm = np.lexsort(lc[::-1]) if n > 1 else np.arange(n)
    lc = lc[:, perm]
    if n > 1 and np.any(np.all(lc[:, 1:] == lc[:, :-1], axis=0)):
        _fail("blocks", "duplicate block coordinate")
    # pack the pattern with values 1..n: the packed value at each position names its block (0: none, zero block)
    pattern = cls._pack_sorted(grid, base, lc, np.arange(1, n + 1, dtype=np.int64))
    dtype = np.int64 if blocks.dtype.kind in "iu" else np.float64
    vals = np.zeros((len(pattern.vals),) + fmt.block, dtype=dtype)
    where = pattern.vals > 0
    vals[where] = blocks[perm][pattern.vals[where] - 1]
    return cls(tuple(shape), fmt, pattern.levels, vals, _validate=False)


def from_dense(cls, array, fmt: TensorFormat):
    """Pack a NumPy array: the blocks that hold a nonzero (every block of a dense level)."""
    arr = np.asarray(array)
    if arr.dtype.kind not in "iufb":
        _fail("tensor", f"values must be real numbers, got dtype {arr.dtype}")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.float64)
    if fmt.order not in (1, 2) or arr.ndim != fmt.order:
        _fail("format", f"blocked format {fmt} needs a tensor of order 1 or 2 matching it, got shape {arr.shape}")
    grid = _block_grid(arr.shape, fmt)
    b = fmt.block[0]
    if arr.ndim == 1:
        tiles = arr.reshape(grid[0], b)
    else:
        tiles = arr.reshape(grid[0], b, grid[1], b).transpose(0, 2, 1, 3)       # [I, J] is block (I, J)
    nz = np.any(tiles != 0, axis=tuple(range(len(grid), tiles.ndim)))
    idx = np.nonzero(nz)
    coords = np.stack([i.astype(np.int64) for i in idx])
    return from_blocks(cls, arr.shape, fmt, coords, tiles[idx])


def from_scipy(cls, matrix, fmt: TensorFormat):
    """Pack a SciPy sparse matrix; a ``bsr_array``/``bsr_matrix`` of the same block size keeps its stored blocks."""
    import scipy.sparse as sp
    if fmt.order != 2:
        _fail("format", f"blocked format {fmt} has order {fmt.order}; a SciPy matrix has order 2")
    b = fmt.block[0]
    _block_grid(matrix.shape, fmt)
    if matrix.format != "bsr" or tuple(matrix.blocksize) != (b, b):
        matrix = sp.bsr_array(sp.csr_array(matrix), blocksize=(b, b))
        matrix.eliminate_zeros()               # drops the blocks that came out all zero
    else:
        matrix = sp.bsr_array(matrix, copy=True)
    matrix.sum_duplicates()                    # sorted, unique block columns per block row
    indptr, indices = np.asarray(matrix.indptr, np.int64), np.asarray(matrix.indices, np.int64)
    rows = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    data = np.asarray(matrix.data)
    if data.dtype.kind not in "iuf":
        _fail("matrix", f"values must be real numbers, got dtype {data.dtype}")
    data = data.astype(np.int64 if data.dtype.kind in "iu" else np.float64)
    return from_blocks(cls, tuple(int(s) for s in matrix.shape), fmt, np.stack([rows, indices]), data)


def block_coords(packed):
    """Block coordinates (``(order, P)``, tensor-dimension order) of every stored position."""
    grid_fmt = packed.format.unblocked()
    lc = packed._position_coords()
    return lc[list(grid_fmt.level_of_mode)]


def to_dense(packed) -> np.ndarray:
    """The element array (tensor-dimension order)."""
    fmt = packed.format
    grid = tuple(n // bb for n, bb in zip(packed.shape, fmt.block))
    tiles = np.zeros(grid + fmt.block, dtype=packed.vals.dtype)
    if len(packed.vals):
        tiles[tuple(block_coords(packed))] = packed.vals
    if packed.order == 1:
        return tiles.reshape(packed.shape)
    return np.ascontiguousarray(tiles.transpose(0, 2, 1, 3)).reshape(packed.shape)


def to_bsr(packed):
    """A ``scipy.sparse.bsr_array`` with one stored block per packed block (order 2)."""
    import scipy.sparse as sp
    if packed.order != 2:
        _fail("tensor", f"to_bsr needs order 2, this tensor has order {packed.order}")
    b = packed.format.block[0]
    coords = block_coords(packed)
    order = np.lexsort((coords[1], coords[0]))
    rows, cols = coords[0][order], coords[1][order]
    nrows = packed.shape[0] // b
    indptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=indptr[1:])
    return sp.bsr_array((packed.vals[order], cols, indptr), shape=tuple(packed.shape), blocksize=(b, b))


def to_coo(packed):
    """``(coords, vals)`` of the nonzero elements, coordinates in tensor-dimension order, sorted row-major."""
    dense = to_dense(packed)
    idx = np.nonzero(dense)
    coords = np.stack([i.astype(np.int64) for i in idx]) if idx else np.zeros((packed.order, 0), np.int64)
    return coords, dense[idx]
