"""A restricted unpickler for the Planetoid files (``ind.<name>.{x,y,tx,ty,allx,ally,graph}``).

Those files are Python 2 pickles of SciPy sparse matrices, NumPy arrays and a dict (or ``defaultdict``) of
lists. A pickle can name any importable callable, so unpickling an untrusted file runs arbitrary code; this
unpickler resolves only the NumPy, SciPy and builtin names those objects need and refuses every other one
(``os.system``, ``builtins.eval``, ...) before anything is called.
"""

from __future__ import annotations

import _compat_pickle
import io
import pickle
from typing import Any

from ..errors import DatasetError

#: builtin types and containers a pickled graph or array may name
_BUILTINS = {"list", "dict", "set", "frozenset", "tuple", "int", "float", "complex", "bool", "str", "bytes",
             "bytearray", "slice", "range", "object"}
_COLLECTIONS = {"defaultdict", "OrderedDict"}
#: NumPy's array and scalar reconstruction helpers (the module moved from numpy.core to numpy._core in 2.0)
_NUMPY_MODULES = {"numpy", "numpy.core.multiarray", "numpy._core.multiarray", "numpy.core.numeric",
                  "numpy._core.numeric"}
_NUMPY = {"_reconstruct", "ndarray", "dtype", "scalar", "_frombuffer", "matrix"}
#: SciPy's sparse containers (pickled under scipy.sparse.csr, scipy.sparse._csr, ... by version)
_SCIPY_SPARSE = {"csr_matrix", "csc_matrix", "coo_matrix", "lil_matrix", "dok_matrix", "bsr_matrix", "dia_matrix",
                 "csr_array", "csc_array", "coo_array", "lil_array", "dok_array", "bsr_array", "dia_array"}


class _Restricted(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Python 2 names (__builtin__, copy_reg, ...), mapped as pickle's own find_class maps them
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        if module == "builtins" and name in _BUILTINS:
            import builtins
            return getattr(builtins, name)
        if module == "collections" and name in _COLLECTIONS:
            import collections
            return getattr(collections, name)
        if module == "_codecs" and name == "encode":     # how Python 3's protocol 2 spells bytes
            import _codecs
            return _codecs.encode
        if module == "copyreg" and name == "_reconstructor":
            import copyreg
            return getattr(copyreg, "_reconstructor")    # not in typeshed's copyreg
        if module in _NUMPY_MODULES and name in _NUMPY:
            import numpy as np
            if name in ("ndarray", "dtype", "matrix"):
                return getattr(np, name)
            try:
                from numpy._core import multiarray, numeric
            except ImportError:                          # NumPy < 2
                from numpy.core import multiarray, numeric  # type: ignore[no-redef]  # the same modules' 1.x home
            for mod in (multiarray, numeric):
                if hasattr(mod, name):
                    return getattr(mod, name)
        if (module == "scipy.sparse" or module.startswith("scipy.sparse.")) and name in _SCIPY_SPARSE:
            import scipy.sparse as sp
            return getattr(sp, name)
        raise pickle.UnpicklingError(f"refuses to load {module}.{name} (only NumPy arrays, SciPy sparse matrices "
                                     "and builtin containers are allowed)")


def load(path: str) -> Any:
    """Unpickle ``path`` (Python 2 pickles read as latin-1) allowing only NumPy, SciPy sparse and builtin types.

    Raises :class:`~fuseflow.errors.DatasetError` for a missing, unreadable or malformed file, or one that
    names anything else."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise DatasetError(path, "missing") from None
    except IsADirectoryError:
        raise DatasetError(path, "is a directory, not a pickle file") from None
    except OSError as exc:
        raise DatasetError(path, exc.strerror or str(exc)) from None
    return loads(raw, path)


def loads(data: bytes, what: str = "pickle") -> Any:
    """:func:`load` of bytes in memory."""
    try:
        return _Restricted(io.BytesIO(data), encoding="latin1").load()
    except pickle.UnpicklingError as exc:
        why = str(exc)
        raise DatasetError(what, why if why.startswith("refuses") else f"not a valid pickle ({why})") from None
    except (EOFError, ValueError, TypeError, AttributeError, IndexError, KeyError, ImportError,
            UnicodeDecodeError) as exc:
        raise DatasetError(what, f"not a valid pickle ({type(exc).__name__}: {exc})") from None
