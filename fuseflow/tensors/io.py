"""Tensor files: ``.npz`` archives, Matrix Market, ``.npy``, and SAM/Comal per-level text directories.

See ``docs/tensors.md`` for the conventions. Every bad file raises :class:`TensorError` naming the
file; every write goes through :func:`fuseflow.cli.atomic_write` (temporary file, then rename).
"""

from __future__ import annotations

import os
import zipfile

import numpy as np
import scipy.sparse as sp

from ..errors import FuseFlowError, TensorError
from .formats import COMPRESSED, DENSE, TensorFormat
from .packed import CompressedLevel, DenseLevel, PackedTensor

SPARSE_TAG = "__sparse_format__"
_SPARSE_PARTS = ("data", "indices", "indptr", "shape")
_SCIPY_NPZ_KEYS = {"format", "shape", "data", "indices", "indptr", "row", "col", "coords", "offsets",
                   "_is_array"}
_SCIPY_FORMATS = {"csr", "csc", "bsr", "coo", "dia"}


def _atomic_write(path, mode):
    from ..cli import atomic_write
    return atomic_write(path, mode)


def check_no_nan(data, what):
    """Raise a one-line error naming ``what`` (a tensor) when its values (dense, or a SciPy matrix's stored
    entries) hold a NaN: the simulator, the fixed-point encoding and the NumPy check cannot give it a meaning."""
    vals = data.data if sp.issparse(data) else data
    arr = np.asarray(vals)
    if arr.dtype.kind not in "fc" or not arr.size:
        return
    bad = np.isnan(arr)
    if not bad.any():
        return
    count = int(bad.sum())
    if sp.issparse(data):
        coo = sp.coo_array(data)
        k = int(np.flatnonzero(np.isnan(coo.data))[0])
        where = (int(coo.row[k]), int(coo.col[k]))
    else:
        where = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad.ravel())[0]), arr.shape))
    raise TensorError(what, f"holds {count} NaN value{'s' if count != 1 else ''} (the first at {where}): inputs "
                            f"must be numbers; replace them (e.g. numpy.nan_to_num) before saving the data")


# ---- .npz ------------------------------------------------------------------------------------
def save_npz(path, mapping):
    """Write dense arrays and SciPy sparse matrices into one ``np.savez`` archive (atomically).

    A sparse matrix ``X`` is stored as CSR in the entries ``X.__sparse_format__`` (``"csr"``),
    ``X.data``, ``X.indices``, ``X.indptr`` and ``X.shape``; :func:`load_npz` decodes it."""
    path = os.fspath(path)
    if not isinstance(mapping, dict):
        raise TensorError(path, f"expected a dict of name -> array, got {type(mapping).__name__}")
    arrays = {}
    sparse_names = set()
    for name, obj in mapping.items():
        if not isinstance(name, str) or not name:
            raise TensorError(path, f"tensor names must be non-empty strings, got {name!r}")
        if sp.issparse(obj):
            if len(obj.shape) != 2:
                raise TensorError(f"{path}:{name}", f"only order-2 sparse matrices can be stored, got "
                                                    f"shape {obj.shape}")
            csr = sp.csr_array(obj)
            csr.sum_duplicates()
            arrays[f"{name}.{SPARSE_TAG}"] = np.array("csr")
            arrays[f"{name}.data"] = np.asarray(csr.data)
            arrays[f"{name}.indices"] = np.asarray(csr.indices, dtype=np.int64)
            arrays[f"{name}.indptr"] = np.asarray(csr.indptr, dtype=np.int64)
            arrays[f"{name}.shape"] = np.asarray(csr.shape, dtype=np.int64)
            sparse_names.add(name)
        else:
            arr = np.asarray(obj)
            if arr.dtype.kind not in "biuf":
                raise TensorError(f"{path}:{name}", f"cannot store arrays of dtype {arr.dtype}")
            arrays[name] = arr
    for name in mapping:
        if name in sparse_names:
            continue
        for sname in sparse_names:
            if name.startswith(sname + ".") and name[len(sname) + 1:] in _SPARSE_PARTS + (SPARSE_TAG,):
                raise TensorError(path, f"name {name!r} collides with the encoding of sparse matrix {sname!r}")
    with _atomic_write(path, "wb") as f:
        np.savez(f, **arrays)


def _open_npz(path):
    try:
        return np.load(path, allow_pickle=False)
    except MemoryError:
        raise TensorError(path, "declares an array too large for the available memory") from None
    except FileNotFoundError:
        raise TensorError(path, "no such file") from None
    except IsADirectoryError:
        raise TensorError(path, "is a directory, not a file") from None
    except PermissionError:
        raise TensorError(path, "permission denied") from None
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise TensorError(path, f"not a readable .npz archive ({exc})") from None


def load_npz(path):
    """Read an ``.npz`` file into ``{name: np.ndarray | scipy.sparse.csr_array}``.

    Accepts ``np.savez`` archives (dense arrays, plus sparse matrices encoded by :func:`save_npz`) and
    single matrices written by ``scipy.sparse.save_npz`` (returned under the file's stem)."""
    path = os.fspath(path)
    npz = _open_npz(path)
    if isinstance(npz, np.ndarray):
        raise TensorError(path, "is a .npy array, not an .npz archive")
    try:
        keys = list(npz.files)
        if _looks_like_scipy_npz(npz, keys):
            _check_sparse_shape(npz["shape"], path)
            try:
                mat = sp.load_npz(path)
            except Exception as exc:  # noqa: BLE001 - any failure is a bad file
                raise TensorError(path, f"not a readable SciPy sparse .npz ({exc})") from None
            return {_stem(path): sp.csr_array(mat)}
        out = {}
        tagged = {k[: -len(SPARSE_TAG) - 1] for k in keys if k.endswith("." + SPARSE_TAG)}
        used = set()
        for name in sorted(tagged):
            out[name] = _decode_sparse(npz, path, name)
            used.update(f"{name}.{p}" for p in _SPARSE_PARTS + (SPARSE_TAG,))
        for k in keys:
            if k in used:
                continue
            try:
                out[k] = npz[k]
            except ValueError as exc:
                if "allow_pickle" in str(exc):
                    raise TensorError(f"{path}:{k}", "holds a Python object, not an array (np.savez pickles a SciPy "
                                                     "sparse matrix): write the file with "
                                                     "fuseflow.tensors.save_npz(path, {name: matrix}), which stores "
                                                     "SciPy matrices as arrays") from None
                raise TensorError(f"{path}:{k}", f"unreadable array ({exc})") from None
            except (OSError, EOFError, zipfile.BadZipFile) as exc:
                raise TensorError(f"{path}:{k}", f"unreadable array ({exc})") from None
            except MemoryError:
                raise TensorError(f"{path}:{k}", "declares an array too large for the available memory") from None
        return out
    finally:
        npz.close()


def _looks_like_scipy_npz(npz, keys):
    if "format" not in keys or "shape" not in keys or not set(keys) <= _SCIPY_NPZ_KEYS:
        return False
    try:
        fmt = npz["format"]
    except ValueError:
        return False
    if fmt.dtype.kind not in "SU" or fmt.ndim != 0:
        return False
    text = fmt.item()
    text = text.decode("ascii", "replace") if isinstance(text, bytes) else str(text)
    return text in _SCIPY_FORMATS


def _decode_sparse(npz, path, name):
    what = f"{path}:{name}"
    parts = {}
    for p in _SPARSE_PARTS + (SPARSE_TAG,):
        key = f"{name}.{p}"
        if key not in npz.files:
            raise TensorError(what, f"sparse matrix encoding lacks {key!r}")
        try:
            parts[p] = npz[key]
        except ValueError as exc:
            raise TensorError(what, f"unreadable entry {key!r} ({exc})") from None
    kind = str(parts[SPARSE_TAG].item() if parts[SPARSE_TAG].ndim == 0 else parts[SPARSE_TAG])
    if kind not in ("csr", "csc"):
        raise TensorError(what, f"unknown sparse format {kind!r} (expected 'csr' or 'csc')")
    shape = parts["shape"]
    if shape.ndim != 1 or len(shape) != 2 or shape.dtype.kind not in "iu" or np.any(shape < 0):
        raise TensorError(what, f"bad shape {shape.tolist()}")
    cls = sp.csr_array if kind == "csr" else sp.csc_array
    try:
        mat = cls((parts["data"], parts["indices"], parts["indptr"]), shape=tuple(int(s) for s in shape))
        mat.check_format(full_check=True)
    except Exception as exc:  # noqa: BLE001 - SciPy raises ValueError/IndexError/TypeError
        raise TensorError(what, f"inconsistent sparse matrix arrays ({exc})") from None
    return sp.csr_array(mat)


def _check_sparse_shape(shape, what):
    """Refuse a SciPy sparse matrix (``scipy.sparse.save_npz``: COO, say, a small file whatever its shape) whose CSR
    form would not fit the limits, before SciPy allocates it: its row pointers are a dense array of rows + 1
    entries, however few nonzeros it has (see fuseflow.limits). (A matrix in :func:`save_npz`'s encoding holds
    its row pointers in the file already.)"""
    from .. import limits
    try:
        dims = [int(d) for d in np.asarray(shape).ravel()]
    except (TypeError, ValueError):
        return                                   # SciPy's own checks name the problem
    if len(dims) != 2:
        return
    try:
        for d in dims:
            limits.DIMENSION.check(d, what)
    except FuseFlowError as exc:
        raise TensorError(exc.what, exc.why) from None
    limit = limits.DENSE_ENTRIES.value
    if dims[0] > limit:
        raise TensorError(what, f"a sparse {dims[0]} x {dims[1]} matrix is read as CSR, whose {dims[0]} row "
                                f"pointers are a dense array: more than the limit of {limit} "
                                f"{limits.DENSE_ENTRIES.name} (set {limits.DENSE_ENTRIES.env} to raise it; "
                                f"see docs/errors.md)")


def _stem(path):
    base = os.path.basename(path)
    stem, _ = os.path.splitext(base)
    return stem


# ---- .mtx / .npy / dispatch ------------------------------------------------------------------
def load_mtx(path):
    """Read a Matrix Market file: a ``scipy.sparse.csr_array`` for coordinate files, else an ndarray."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TensorError(path, "no such file")
    if os.path.isdir(path):
        raise TensorError(path, "is a directory, not a file")
    _check_mtx_header(path)
    import scipy.io                     # Matrix Market only: a quarter of the start-up otherwise (issue 42)
    try:
        obj = scipy.io.mmread(path)
    except MemoryError:
        raise TensorError(path, "too large for the available memory") from None
    except Exception as exc:  # noqa: BLE001 - mmread raises many types on bad input
        raise TensorError(path, f"not a readable Matrix Market file ({exc})") from None
    if sp.issparse(obj):
        if np.asarray(obj.data).dtype.kind not in "biuf":
            raise TensorError(path, f"unsupported value type {obj.dtype} (need real numbers)")
        return sp.csr_array(obj)
    arr = np.asarray(obj)
    if arr.dtype.kind not in "biuf":
        raise TensorError(path, f"unsupported value type {arr.dtype} (need real numbers)")
    return arr


def _check_mtx_header(path):
    """Refuse sizes that would exhaust memory before reading the entries (see fuseflow.limits)."""
    import scipy.io
    from .. import limits
    try:
        rows, cols, entries, fmt, field, _ = scipy.io.mminfo(path)
    except Exception as exc:  # noqa: BLE001 - a bad header
        raise TensorError(path, f"not a readable Matrix Market file ({exc})") from None
    try:
        for d in (rows, cols):
            limits.DIMENSION.check(int(d), path)
        # a coordinate file becomes CSR (rows + 1 pointers); an array file is dense
        limits.DENSE_ENTRIES.check(int(rows) * int(cols) if fmt == "array" else int(rows) + int(entries), path)
    except FuseFlowError as exc:
        raise TensorError(exc.what, exc.why) from None


def load_npy(path):
    path = os.fspath(path)
    obj = _open_npz(path)
    if not isinstance(obj, np.ndarray):
        obj.close()
        raise TensorError(path, "is an .npz archive, not an .npy array")
    return obj


def load_tensor_file(path):
    """Load ``.npz``, ``.mtx`` or ``.npy``; always returns ``{name: array or sparse matrix}``
    (``.mtx`` and ``.npy`` files give one entry named after the file's stem)."""
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        return load_npz(path)
    if ext == ".mtx":
        return {_stem(path): load_mtx(path)}
    if ext == ".npy":
        return {_stem(path): load_npy(path)}
    raise TensorError(path, f"unknown tensor file extension {ext or '(none)'!r} (expected .npz, .mtx, .npy)")


# ---- SAM / Comal per-level text files --------------------------------------------------------
def sam_file_names(name, fmt):
    """The files :func:`save_sam_dir` writes for tensor ``name`` in format ``fmt`` (in order)."""
    files = [f"tensor_{name}_mode_shape"]
    for k, kind in enumerate(fmt.levels):
        if kind == COMPRESSED:
            d = fmt.mode_order[k]
            files += [f"tensor_{name}_mode_{d}_seg", f"tensor_{name}_mode_{d}_crd"]
    files += [f"tensor_{name}_mode_vals", f"tensor_{name}_mode_format"]
    return files


def _write_numbers(path, arr):
    arr = np.asarray(arr)
    if arr.dtype.kind == "f":
        text = "\n".join(map(repr, arr.tolist()))
    else:
        text = "\n".join(map(str, arr.astype(np.int64).tolist()))
    with _atomic_write(path, "w") as f:
        f.write(text)
        if len(arr):
            f.write("\n")


def save_sam_dir(packed, directory, name):
    """Write ``packed`` as SAM-style per-level text files ``tensor_<name>_mode_*`` in ``directory``.

    Compressed level ``k`` storing tensor dimension ``d`` writes ``tensor_<name>_mode_<d>_seg`` and
    ``..._crd``; dense levels write nothing (their size is in the shape file, as the SAM simulator
    expects); ``tensor_<name>_mode_vals`` has the values, ``tensor_<name>_mode_shape`` the shape in
    tensor-dimension order, and ``tensor_<name>_mode_format`` the format spec (our addition). A blocked tensor
    (``bcsr:B``...) writes its levels over block coordinates and its blocks into the vals file one after the
    other, each row-major (B*B numbers per block); the format file (``bcsr:4``) says how to regroup them."""
    if not isinstance(packed, PackedTensor):
        raise TensorError("tensor", f"expected a PackedTensor, got {type(packed).__name__}")
    _check_name(name)
    directory = os.fspath(directory)
    os.makedirs(directory, exist_ok=True)
    pre = os.path.join(directory, f"tensor_{name}_mode_")
    _write_numbers(pre + "shape", np.asarray(packed.shape, dtype=np.int64))
    for k, lv in enumerate(packed.levels):
        if lv.kind == COMPRESSED:
            d = packed.format.mode_order[k]
            _write_numbers(f"{pre}{d}_seg", lv.seg)
            _write_numbers(f"{pre}{d}_crd", lv.crd)
    _write_numbers(pre + "vals", packed.vals.reshape(-1))
    spec = str(packed.format) if packed.format.block else \
        packed.format.letters + ":" + ",".join(str(m) for m in packed.format.mode_order)
    with _atomic_write(pre + "format", "w") as f:
        f.write(spec + "\n")


def _check_name(name):
    if not isinstance(name, str) or not name or "/" in name or os.sep in name:
        raise TensorError("tensor", f"bad tensor name {name!r}")


def _read_numbers(path, kind):
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        raise TensorError(path, "no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise TensorError(path, f"unreadable ({exc})") from None
    tokens = text.split()
    if kind == "int":
        try:
            return np.array([int(t) for t in tokens], dtype=np.int64)
        except ValueError:
            pass
        try:
            vals = [float(t) for t in tokens]
        except ValueError:
            raise TensorError(path, "expected one integer per line") from None
        if not all(v == int(v) for v in vals if np.isfinite(v)) or not all(np.isfinite(vals)):
            raise TensorError(path, "expected one integer per line")
        return np.array([int(v) for v in vals], dtype=np.int64)
    if kind == "raw":
        try:
            return np.array([int(t) for t in tokens], dtype=np.int64)
        except ValueError:
            raise TensorError(path, "expected raw fixed-point integers, one per line") from None
    try:
        return np.array([float(t) for t in tokens], dtype=np.float64)
    except ValueError:
        raise TensorError(path, "expected one number per line") from None


def load_sam_dir(directory, name, fmt=None, raw=False):
    """Read SAM-style files ``tensor_<name>_mode_*`` from ``directory`` into a :class:`PackedTensor`.

    ``fmt`` (a :class:`TensorFormat` or spec) fixes the format; without it the format comes from
    ``tensor_<name>_mode_format`` if present, else the identity mode order with a level compressed
    iff its ``_crd`` file exists. ``raw=True`` reads values as int64 raw fixed point."""
    _check_name(name)
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise TensorError(directory, "no such directory")
    pre = os.path.join(directory, f"tensor_{name}_mode_")
    shape = _read_numbers(pre + "shape", "int")
    if np.any(shape < 0):
        raise TensorError(pre + "shape", f"negative dimension in {shape.tolist()}")
    order = len(shape)
    if fmt is not None:
        fmt = TensorFormat.parse(fmt, order) if not isinstance(fmt, TensorFormat) else fmt
    elif os.path.exists(pre + "format"):
        with open(pre + "format") as f:
            spec = f.read().strip()
        fmt = TensorFormat.parse(spec, order)
    else:
        fmt = TensorFormat(tuple(COMPRESSED if os.path.exists(f"{pre}{d}_crd") else DENSE
                                 for d in range(order)))
    if fmt.order != order:
        raise TensorError(pre + "shape", f"shape {shape.tolist()} has order {order} but the format "
                                         f"{fmt} has order {fmt.order}")
    levels = []
    for k, kind in enumerate(fmt.levels):
        d = fmt.mode_order[k]
        if kind == DENSE:
            levels.append(DenseLevel(int(shape[d]) // (fmt.block[d] if fmt.block else 1)))
        else:
            levels.append(CompressedLevel(_read_numbers(f"{pre}{d}_seg", "int"),
                                          _read_numbers(f"{pre}{d}_crd", "int")))
    vals = _read_numbers(pre + "vals", "raw" if raw else "float")
    if fmt.block:
        size = int(np.prod(fmt.block))
        if len(vals) % size:
            raise TensorError(pre + "vals", f"{len(vals)} numbers do not make whole blocks of {size}")
        vals = vals.reshape((-1,) + fmt.block)
    try:
        return PackedTensor.from_levels(tuple(int(s) for s in shape), fmt, levels, vals)
    except TensorError as exc:
        raise TensorError(f"{directory}: tensor {name}", f"{exc.what}: {exc.why}") from None
