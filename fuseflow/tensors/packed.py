"""Packed (level-array) tensors: the seg/crd/vals arrays that scanners read and writers build.

Positions (normative, see DESIGN.md section 3 and ``docs/tensors.md``):

- the root has the single position 0;
- a dense level of size ``d`` under parent position ``p`` has child positions ``p*d + c`` for
  coordinates ``c = 0..d-1``;
- a compressed level's fibre under parent position ``p`` is ``crd[seg[p]:seg[p+1]]``; the child
  positions are the indices into ``crd``;
- ``vals`` holds one value per position of the last level (for order 0: exactly one value).

Packing (:meth:`PackedTensor.pack`) keeps only nonzeros: a compressed level holds a coordinate iff
its subtree holds a nonzero; a compressed level below dense levels has one (possibly empty) fibre per
dense position; the top level of a compressed tensor has exactly one fibre, possibly empty.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import TensorError
from .formats import COMPRESSED, DENSE, TensorFormat


class DenseLevel:
    """A dense level: every coordinate ``0..size-1`` under every parent position."""

    kind = DENSE
    __slots__ = ("size",)

    def __init__(self, size):
        self.size = int(size)

    def positions(self, parent_positions):
        return parent_positions * self.size

    def __repr__(self):
        return f"DenseLevel({self.size})"


class CompressedLevel:
    """A compressed level: ``seg`` (one more entry than parent positions) and ``crd``."""

    kind = COMPRESSED
    __slots__ = ("seg", "crd")

    def __init__(self, seg, crd):
        self.seg = _as_index_array(seg)
        self.crd = _as_index_array(crd)

    def positions(self, parent_positions):
        return int(self.seg[-1]) if len(self.seg) else 0

    def fibre(self, p):
        """Coordinates of the fibre under parent position ``p``."""
        return self.crd[self.seg[p]:self.seg[p + 1]]

    def __repr__(self):
        return f"CompressedLevel(seg={self.seg.tolist()}, crd={self.crd.tolist()})"


def _as_index_array(x):
    """int64 view/copy of integer (or empty) input; anything else is kept for validation to reject."""
    arr = np.asarray(x)
    if arr.dtype.kind in "iu" or arr.size == 0:
        return arr.astype(np.int64, copy=False)
    return arr


def _fail(what, why):
    raise TensorError(what, why)


def _int_array(x, what):
    arr = np.asarray(x)
    if arr.ndim != 1:
        _fail(what, f"must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 and arr.max() > np.iinfo(np.int64).max:
            _fail(what, "values do not fit int64")
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            _fail(what, "must hold integers")
        return arr.astype(np.int64)
    _fail(what, f"must hold integers, got dtype {arr.dtype}")


def _vals_array(x, what="vals"):
    arr = np.asarray(x)
    if arr.dtype.kind in "iu":
        if arr.dtype.kind == "u" and arr.size and arr.dtype.itemsize >= 8 and arr.max() > np.iinfo(np.int64).max:
            _fail(what, "values do not fit int64")
        return arr.astype(np.int64, copy=False)
    if arr.dtype.kind in "fb":
        return arr.astype(np.float64, copy=False)
    _fail(what, f"values must be real numbers (float64, or int64 raw fixed point), got dtype {arr.dtype}")


def _check_shape(shape, what="shape"):
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        _fail(what, f"must be a sequence of ints, got {shape!r}")
    out = []
    for s in shape:
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (numbers.Integral,)):
            _fail(what, f"must hold ints, got {list(shape)}")
        if s < 0:
            _fail(what, f"dimensions must be >= 0, got {list(shape)}")
        out.append(int(s))
    return tuple(out)


class PackedTensor:
    """A tensor in level format: ``shape`` (tensor-dimension order), ``format``, ``levels``, ``vals``."""

    __slots__ = ("shape", "format", "levels", "vals")

    def __init__(self, shape, format, levels, vals, _validate=True):
        if _validate:
            other = PackedTensor.from_levels(shape, format, levels, vals)
            shape, format, levels, vals = other.shape, other.format, other.levels, other.vals
        self.shape = shape
        self.format = format
        self.levels = levels
        self.vals = vals

    # ---- properties -------------------------------------------------------------------------
    @property
    def order(self):
        return len(self.shape)

    @property
    def level_dims(self):
        """Size of each level (shape permuted into level order)."""
        return self.format.level_dims(self.shape)

    @property
    def dtype(self):
        return self.vals.dtype

    @property
    def nnz(self):
        """Number of nonzero values stored (explicit zeros in ``vals`` are not counted)."""
        return int(np.count_nonzero(self.vals))

    def positions(self):
        """Number of positions at each level (dense: product so far; compressed: ``len(crd)``)."""
        out = []
        p = 1
        for lv in self.levels:
            p = p * lv.size if lv.kind == DENSE else len(lv.crd)
            out.append(p)
        return out

    def capacities(self):
        """Entries per level (``len(crd)`` for compressed, positions for dense), then ``len(vals)``."""
        return self.positions() + [len(self.vals)]

    def __repr__(self):
        return (f"PackedTensor(shape={list(self.shape)}, format={self.format.name!r}, "
                f"levels={self.levels!r}, vals={self.vals.tolist() if self.vals.size <= 16 else '...'})")

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_levels(cls, shape, fmt, levels, vals):
        """Build from level arrays, checking the structure; raises :class:`TensorError`."""
        fmt = TensorFormat.parse(fmt) if not isinstance(fmt, TensorFormat) else fmt
        shape = _check_shape(shape)
        if len(shape) != fmt.order:
            _fail("shape", f"shape {list(shape)} has {len(shape)} dimensions but format {fmt} has order "
                           f"{fmt.order}")
        dims = fmt.level_dims(shape)
        levels = list(levels)
        if len(levels) != fmt.order:
            _fail("levels", f"{len(levels)} levels given for format {fmt} of order {fmt.order}")
        out_levels = []
        parents = 1
        for k, (lv, kind, dim) in enumerate(zip(levels, fmt.levels, dims)):
            what = f"level {k}"
            if kind == DENSE:
                if not isinstance(lv, DenseLevel):
                    _fail(what, f"format {fmt} says dense, got {type(lv).__name__}")
                if lv.size != dim:
                    _fail(what, f"dense level size {lv.size} does not match dimension "
                                f"{fmt.mode_order[k]} of shape {list(shape)} ({dim})")
                out_levels.append(DenseLevel(dim))
                parents = parents * dim
                continue
            if not isinstance(lv, CompressedLevel):
                _fail(what, f"format {fmt} says compressed, got {type(lv).__name__}")
            seg = _int_array(lv.seg, f"{what} seg")
            crd = _int_array(lv.crd, f"{what} crd")
            if len(seg) != parents + 1:
                _fail(f"{what} seg", f"has {len(seg)} entries, expected {parents + 1} "
                                     f"(parent positions + 1)")
            if seg[0] != 0:
                _fail(f"{what} seg", f"must start at 0, starts at {int(seg[0])}")
            if len(seg) > 1 and np.any(np.diff(seg) < 0):
                _fail(f"{what} seg", "must be non-decreasing")
            if int(seg[-1]) != len(crd):
                _fail(f"{what} crd", f"has {len(crd)} entries but seg ends at {int(seg[-1])}")
            if len(crd):
                lo, hi = int(crd.min()), int(crd.max())
                if lo < 0 or hi >= dim:
                    bad = lo if lo < 0 else hi
                    _fail(f"{what} crd", f"coordinate {bad} out of range 0..{dim - 1}")
                if len(crd) > 1:
                    starts = np.zeros(len(crd), dtype=bool)
                    s = seg[:-1]
                    starts[s[s < len(crd)]] = True
                    inner = ~starts[1:]
                    if np.any(np.diff(crd)[inner] <= 0):
                        _fail(f"{what} crd", "coordinates must be strictly increasing within each fibre")
            out_levels.append(CompressedLevel(seg, crd))
            parents = len(crd)
        vals = _vals_array(vals)
        if fmt.block:
            if vals.shape[1:] != fmt.block:
                _fail("vals", f"must hold blocks of shape {list(fmt.block)} (shape (blocks, "
                              f"{', '.join(map(str, fmt.block))})), got shape {vals.shape}")
        elif vals.ndim != 1:
            if vals.ndim == 0 and fmt.order == 0:
                vals = vals.reshape(1)
            else:
                _fail("vals", f"must be 1-D, got shape {vals.shape}")
        if len(vals) != parents:
            _fail("vals", f"has {len(vals)} entries, expected {parents} (positions of the last level)")
        return cls(shape, fmt, out_levels, vals, _validate=False)

    @classmethod
    def from_coo(cls, shape, coords, vals, fmt, sum_duplicates=False):
        """Pack coordinates (``coords[d]`` = coordinates of dimension ``d``, shape ``(order, n)``) and
        values. Zeros are dropped; duplicates are an error unless ``sum_duplicates``."""
        shape = _check_shape(shape)
        fmt = _fmt(fmt, len(shape))
        order = len(shape)
        vals = _vals_array(vals).reshape(-1)
        n = len(vals)
        coords = np.asarray(coords)
        if coords.size == 0:
            coords = np.zeros((order, n), dtype=np.int64)
        if coords.ndim != 2 or coords.shape != (order, n):
            _fail("coords", f"expected shape ({order}, {n}), got {coords.shape}")
        coords = np.stack([_int_array(coords[d], f"coords[{d}]") for d in range(order)]) if order else \
            np.zeros((0, n), dtype=np.int64)
        for d in range(order):
            if n and (coords[d].min() < 0 or coords[d].max() >= shape[d]):
                bad = coords[d][(coords[d] < 0) | (coords[d] >= shape[d])][0]
                _fail("coords", f"coordinate {int(bad)} of dimension {d} out of range 0..{shape[d] - 1}")
        if order == 0:
            total = vals.sum() if n else vals.dtype.type(0)
            if n > 1 and not sum_duplicates:
                _fail("coords", "a scalar takes one value")
            return cls(shape, fmt, [], np.array([total], dtype=vals.dtype), _validate=False)
        lc = coords[list(fmt.mode_order)]
        # lexicographic sort in level order (last key is primary for lexsort)
        perm = np.lexsort(lc[::-1]) if n > 1 else np.arange(n)
        lc = lc[:, perm]
        vals = vals[perm]
        if n > 1:
            same = np.all(lc[:, 1:] == lc[:, :-1], axis=0)
            if same.any():
                if not sum_duplicates:
                    i = int(np.argmax(same))
                    where = coords[:, perm[i]].tolist()
                    _fail("coords", f"duplicate coordinate {where}")
                keep = np.r_[True, ~same]
                vals = np.add.reduceat(vals, np.flatnonzero(keep))
                lc = lc[:, keep]
        nz = vals != 0
        if not nz.all():
            lc = lc[:, nz]
            vals = vals[nz]
        return cls._pack_sorted(shape, fmt, lc, vals)

    @classmethod
    def _pack_sorted(cls, shape, fmt, lc, vals):
        """Pack lexicographically sorted, unique level-order coordinates ``lc`` of nonzeros."""
        dims = fmt.level_dims(shape)
        levels = []
        pos = np.zeros(lc.shape[1], dtype=np.int64)
        parents = 1
        for k, (kind, dim) in enumerate(zip(fmt.levels, dims)):
            c = lc[k]
            if kind == DENSE:
                pos = pos * dim + c
                parents = parents * dim
                levels.append(DenseLevel(dim))
            else:
                n = len(c)
                if n:
                    new = np.empty(n, dtype=bool)
                    new[0] = True
                    np.logical_or(pos[1:] != pos[:-1], c[1:] != c[:-1], out=new[1:])
                    crd = c[new]
                    parent = pos[new]
                    counts = np.bincount(parent, minlength=parents)
                    pos = np.cumsum(new) - 1
                else:
                    crd = np.zeros(0, dtype=np.int64)
                    counts = np.zeros(parents, dtype=np.int64)
                seg = np.zeros(parents + 1, dtype=np.int64)
                np.cumsum(counts, out=seg[1:])
                levels.append(CompressedLevel(seg, crd.astype(np.int64, copy=False)))
                parents = len(crd)
        out_vals = np.zeros(parents, dtype=vals.dtype)
        if len(vals):
            out_vals[pos] = vals
        return cls(shape, fmt, levels, out_vals, _validate=False)

    @classmethod
    def from_dense(cls, array, fmt):
        """Pack a NumPy array (any order; 0-d for scalars)."""
        arr = np.asarray(array)
        vals_dtype = _vals_array(np.zeros(0, dtype=arr.dtype)).dtype
        fmt = _fmt(fmt, arr.ndim)
        shape = tuple(int(s) for s in arr.shape)
        if arr.ndim == 0:
            return cls(shape, fmt, [], arr.reshape(1).astype(vals_dtype), _validate=False)
        la = arr.transpose(fmt.mode_order)
        if fmt.is_dense:
            return cls(shape, fmt, [DenseLevel(d) for d in la.shape],
                       np.ascontiguousarray(la).reshape(-1).astype(vals_dtype, copy=False), _validate=False)
        idx = np.nonzero(la)
        lc = np.stack([i.astype(np.int64, copy=False) for i in idx]) if idx else np.zeros((0, 0), np.int64)
        vals = la[idx].astype(vals_dtype, copy=False)
        return cls._pack_sorted(shape, fmt, lc, vals)

    @classmethod
    def from_scipy(cls, matrix, fmt):
        """Pack any SciPy sparse matrix/array of order 2; explicit zeros are dropped."""
        import scipy.sparse as sp
        if not sp.issparse(matrix):
            _fail("matrix", f"expected a SciPy sparse matrix, got {type(matrix).__name__}")
        if len(matrix.shape) != 2:
            _fail("matrix", f"expected order 2, got shape {matrix.shape}")
        fmt = _fmt(fmt, 2)
        coo = sp.coo_array(matrix)
        data = np.asarray(coo.data)
        _vals_array(np.zeros(0, dtype=data.dtype), "matrix")  # dtype check
        rows, cols = (np.asarray(c).astype(np.int64, copy=False) for c in coo.coords)
        keep = data != 0
        if not keep.all():
            rows, cols, data = rows[keep], cols[keep], data[keep]
        vals = _vals_array(data)
        shape = tuple(int(s) for s in matrix.shape)
        lc = np.stack([rows, cols])[list(fmt.mode_order)]
        if lc.shape[1] > 1:
            d0 = np.diff(lc[0])
            d1 = np.diff(lc[1])
            if not np.all((d0 > 0) | ((d0 == 0) & (d1 > 0))):
                # unsorted or duplicated entries: the general path sorts and sums duplicates
                return cls.from_coo(shape, np.stack([rows, cols]), vals, fmt, sum_duplicates=True)
        return cls._pack_sorted(shape, fmt, lc, vals)

    @classmethod
    def pack(cls, obj, fmt):
        """Pack a NumPy array, a SciPy sparse matrix, a Python/NumPy scalar, or another PackedTensor."""
        import scipy.sparse as sp
        order = obj.order if isinstance(obj, PackedTensor) else len(getattr(obj, "shape", np.shape(obj)))
        fmt = _fmt(fmt, order)
        if fmt.block:                                   # blocks are values: fuseflow.tensors.blocked
            from . import blocked
            if isinstance(obj, PackedTensor):
                return obj if fmt == obj.format else blocked.from_dense(cls, obj.to_dense(), fmt)
            if sp.issparse(obj):
                return blocked.from_scipy(cls, obj, fmt)
            return blocked.from_dense(cls, np.asarray(obj), fmt)
        if isinstance(obj, PackedTensor):
            if fmt == obj.format:
                return obj
            return cls.from_coo(obj.shape, *obj.to_coo(), fmt)
        if sp.issparse(obj):
            return cls.from_scipy(obj, fmt)
        if isinstance(obj, np.ndarray):
            return cls.from_dense(obj, fmt)
        if isinstance(obj, (numbers.Real, np.generic)) and not isinstance(obj, (str, bytes)):
            return cls.from_dense(np.asarray(obj), fmt)
        if isinstance(obj, (list, tuple)):
            return cls.from_dense(np.asarray(obj), fmt)
        _fail("tensor", f"cannot pack an object of type {type(obj).__name__}")

    # ---- unpacking --------------------------------------------------------------------------
    def _position_coords(self):
        """Level-order coordinates of every position of the last level: array ``(order, P)``."""
        coords = np.zeros((0, 1), dtype=np.int64)
        parents = 1
        for lv in self.levels:
            if lv.kind == DENSE:
                d = lv.size
                coords = np.repeat(coords, d, axis=1)
                c = np.tile(np.arange(d, dtype=np.int64), parents)
                parents = parents * d
            else:
                counts = np.diff(lv.seg)
                coords = np.repeat(coords, counts, axis=1)
                c = lv.crd
                parents = len(c)
            coords = np.vstack([coords, c[None, :]])
        return coords

    def to_coo(self):
        """``(coords, vals)`` of the nonzeros: ``coords`` has shape ``(order, nnz)`` in tensor-dimension
        order, entries sorted lexicographically in level order."""
        if self.format.block:
            from . import blocked
            return blocked.to_coo(self)
        if self.order == 0:
            nz = self.vals != 0
            return np.zeros((0, int(nz.sum())), dtype=np.int64), self.vals[nz].copy()
        nz = self.vals != 0
        if self.format.is_dense:
            # avoid materialising every position
            flat = np.flatnonzero(nz)
            lc = np.stack(np.unravel_index(flat, self.level_dims)).astype(np.int64) if len(flat) else \
                np.zeros((self.order, 0), dtype=np.int64)
        else:
            lc = self._position_coords()[:, nz]
        coords = lc[list(self.format.level_of_mode)]
        return coords, self.vals[nz].copy()

    def to_dense(self):
        """A NumPy array in tensor-dimension order with shape ``shape``."""
        if self.format.block:
            from . import blocked
            return blocked.to_dense(self)
        if self.order == 0:
            return np.asarray(self.vals[0])
        dims = self.level_dims
        if self.format.is_dense:
            la = self.vals.reshape(dims)
        else:
            la = np.zeros(dims, dtype=self.vals.dtype)
            if len(self.vals):
                lc = self._position_coords()
                la[tuple(lc)] = self.vals
        return np.ascontiguousarray(la.transpose(self.format.level_of_mode))

    def to_bsr(self):
        """A ``scipy.sparse.bsr_array`` holding this blocked tensor's blocks (order 2, blocked formats)."""
        if not self.format.block:
            _fail("tensor", f"to_bsr needs a blocked format, this tensor is {self.format}")
        from . import blocked
        return blocked.to_bsr(self)

    def to_scipy(self):
        """A ``scipy.sparse.csr_array`` (order 2 only); zero values are not stored."""
        import scipy.sparse as sp
        if self.order != 2:
            _fail("tensor", f"to_scipy needs order 2, this tensor has order {self.order}")
        coords, vals = self.to_coo()
        return sp.csr_array((vals, (coords[0], coords[1])), shape=self.shape)

    # ---- values -----------------------------------------------------------------------------
    def with_vals(self, new_vals):
        """Same structure, new values (length must equal ``len(vals)``)."""
        vals = _vals_array(new_vals)
        if vals.ndim == 0 and self.order == 0:
            vals = vals.reshape(1)
        if vals.shape[1:] != self.vals.shape[1:] or len(vals) != len(self.vals):
            _fail("vals", f"expected {len(self.vals)} values, got shape {vals.shape}")
        return PackedTensor(self.shape, self.format, self.levels, vals, _validate=False)

    def encode_fixed(self, fixed_format, checked=False):
        """Values converted to raw fixed point (int64) with :mod:`fuseflow.tensors.fixed` rules."""
        vals = self.vals
        if vals.dtype.kind == "i":
            _fail("vals", "already raw fixed point (int64)")
        enc = fixed_format.encode_checked if checked else fixed_format.encode
        return self.with_vals(enc(vals))

    def decode_fixed(self, fixed_format):
        """Raw fixed-point values (int64) converted back to float64."""
        if self.vals.dtype.kind != "i":
            _fail("vals", "not raw fixed point (expected int64 values)")
        return self.with_vals(fixed_format.decode(self.vals))

    def allclose(self, other, rtol=1e-9, atol=0.0):
        """Same shape and numerically close values (structure and explicit zeros are ignored)."""
        if isinstance(other, PackedTensor):
            if tuple(other.shape) != tuple(self.shape):
                return False
            if self.order == 0:
                return bool(np.allclose(self.vals, other.vals, rtol=rtol, atol=atol, equal_nan=True))
            ca, va = self.to_coo()
            cb, vb = other.to_coo()
            if np.prod(self.shape, dtype=object) >= 2 ** 62:
                _fail("tensor", "too large to compare")
            ia = np.ravel_multi_index(tuple(ca), self.shape) if ca.shape[1] else np.zeros(0, np.int64)
            ib = np.ravel_multi_index(tuple(cb), self.shape) if cb.shape[1] else np.zeros(0, np.int64)
            keys = np.union1d(ia, ib)
            a = np.zeros(len(keys), dtype=np.float64)
            b = np.zeros(len(keys), dtype=np.float64)
            a[np.searchsorted(keys, ia)] = va
            b[np.searchsorted(keys, ib)] = vb
            return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
        arr = np.asarray(other.toarray() if hasattr(other, "toarray") else other)
        if arr.shape != tuple(self.shape):
            return False
        return bool(np.allclose(self.to_dense(), arr, rtol=rtol, atol=atol, equal_nan=True))

    def same_structure(self, other):
        """True when shape, format, every seg/crd array and the number of values agree exactly."""
        if tuple(self.shape) != tuple(other.shape) or self.format != other.format:
            return False
        for a, b in zip(self.levels, other.levels):
            if a.kind != b.kind:
                return False
            if a.kind == DENSE:
                if a.size != b.size:
                    return False
            elif not (np.array_equal(a.seg, b.seg) and np.array_equal(a.crd, b.crd)):
                return False
        return len(self.vals) == len(other.vals)


def _fmt(fmt, order):
    if isinstance(fmt, TensorFormat):
        if fmt.order != order:
            _fail("format", f"format {fmt} has order {fmt.order} but the tensor has order {order}")
        return fmt
    return TensorFormat.parse(fmt, order)


def pack(obj, fmt):
    """Shorthand for :meth:`PackedTensor.pack`."""
    return PackedTensor.pack(obj, fmt)
