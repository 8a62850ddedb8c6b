"""Tensor formats, packing into level arrays, tensor files and fixed-point numbers.

- :mod:`.formats`: :class:`TensorFormat` (per-level ``dense``/``compressed`` plus mode order)
- :mod:`.packed`: :class:`PackedTensor` with :class:`DenseLevel` / :class:`CompressedLevel`
- :mod:`.io`: ``.npz`` / ``.mtx`` / ``.npy`` files and SAM-style per-level text directories
- :mod:`.fixed`: :class:`FixedFormat`, the one definition of fixed-point arithmetic
"""

from .fixed import (
    BINARY_ARRAY_OPS,
    BINARY_OPS,
    DEFAULT_FORMAT,
    FLOAT_BINARY_ARRAY_OPS,
    FLOAT_BINARY_OPS,
    FLOAT_UNARY_ARRAY_OPS,
    FLOAT_UNARY_OPS,
    UNARY_ARRAY_OPS,
    UNARY_OPS,
    FixedFormat,
    binary_op,
    exp2_table,
    unary_op,
)
from .formats import (
    COMPRESSED,
    DENSE,
    LEVEL_CAPABILITIES,
    LEVEL_FORMATS,
    NAMED_FORMATS,
    TensorFormat,
    as_format,
    can_locate,
)
from .io import (
    load_mtx,
    load_npy,
    load_npz,
    load_sam_dir,
    load_tensor_file,
    sam_file_names,
    save_npz,
    save_sam_dir,
)
from .packed import CompressedLevel, DenseLevel, PackedTensor, pack

__all__ = [
    "BINARY_ARRAY_OPS", "BINARY_OPS", "COMPRESSED", "CompressedLevel", "DEFAULT_FORMAT", "DENSE",
    "DenseLevel", "FLOAT_BINARY_ARRAY_OPS", "LEVEL_CAPABILITIES", "can_locate", "FLOAT_BINARY_OPS", "FLOAT_UNARY_ARRAY_OPS",
    "FLOAT_UNARY_OPS", "FixedFormat", "LEVEL_FORMATS", "NAMED_FORMATS", "PackedTensor", "TensorFormat",
    "UNARY_ARRAY_OPS", "UNARY_OPS", "as_format", "binary_op", "exp2_table", "load_mtx", "load_npy",
    "load_npz", "load_sam_dir", "load_tensor_file", "pack", "sam_file_names", "save_npz",
    "save_sam_dir", "unary_op",
]
