"""Tensor formats, packing into level arrays, tensor files and fixed-point numbers.

- :mod:`.formats`: :class:`TensorFormat` (per-level ``dense``/``compressed`` plus mode order)
- :mod:`.packed`: :class:`PackedTensor` with :class:`DenseLevel` / :class:`CompressedLevel`
- :mod:`.io`: ``.npz`` / ``.mtx`` / ``.npy`` files and SAM-style per-level text directories
- :mod:`.fixed`: :class:`FixedFormat`, the one definition of fixed-point arithmetic
"""

# NumPy, SciPy (sparse matrices, Matrix Market) and the fixed-point tables are imported on first use, so that
# a command's --help does not pay for them (issue 42). name -> submodule that defines it.
_LAZY = {
    **dict.fromkeys(("BINARY_ARRAY_OPS", "BINARY_OPS", "DEFAULT_FORMAT", "FLOAT_BINARY_ARRAY_OPS", "FLOAT_BINARY_OPS",
                     "FLOAT_UNARY_ARRAY_OPS", "FLOAT_UNARY_OPS", "FixedFormat", "UNARY_ARRAY_OPS", "UNARY_OPS",
                     "binary_op", "exp2_table", "unary_op"), "fixed"),
    **dict.fromkeys(("COMPRESSED", "DENSE", "LEVEL_CAPABILITIES", "LEVEL_FORMATS", "NAMED_FORMATS", "TensorFormat",
                     "as_format", "can_locate"), "formats"),
    **dict.fromkeys(("load_mtx", "load_npy", "load_npz", "load_sam_dir", "load_tensor_file", "sam_file_names",
                     "save_npz", "save_sam_dir"), "io"),
    **dict.fromkeys(("CompressedLevel", "DenseLevel", "PackedTensor", "pack"), "packed"),
}


def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if sub == "fixed":                  # only the submodule asked for: TensorFormat does not load SciPy
        from . import fixed as module
    elif sub == "formats":
        from . import formats as module
    elif sub == "io":
        from . import io as module
    else:
        from . import packed as module
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "BINARY_ARRAY_OPS", "BINARY_OPS", "COMPRESSED", "CompressedLevel", "DEFAULT_FORMAT", "DENSE",
    "DenseLevel", "FLOAT_BINARY_ARRAY_OPS", "LEVEL_CAPABILITIES", "can_locate", "FLOAT_BINARY_OPS", "FLOAT_UNARY_ARRAY_OPS",
    "FLOAT_UNARY_OPS", "FixedFormat", "LEVEL_FORMATS", "NAMED_FORMATS", "PackedTensor", "TensorFormat",
    "UNARY_ARRAY_OPS", "UNARY_OPS", "as_format", "binary_op", "exp2_table", "load_mtx", "load_npy",
    "load_npz", "load_sam_dir", "load_tensor_file", "pack", "sam_file_names", "save_npz",
    "save_sam_dir", "unary_op",
]
