"""Sample inputs for a graph, and what a graph wants: ``fuseflow samml info`` / ``fuseflow samml random`` and the
``--random-inputs DENSITY`` option of the commands that take tensor data (``sim run``, ``sim size-fifos``,
``hw build``, ``hw sim``; ``boards`` has its own).

Random inputs are :func:`fuseflow.samml.kernels.random_inputs`: every input tensor of the graph with its
declared shape, sparse-format tensors at the given density, dense-format ones full (values in [-2, 2], two
decimals). They are drawn as dense arrays, so a tensor whose dense array would exceed the dense-entries limit
(:data:`fuseflow.limits.DENSE_ENTRIES`) is refused before anything is drawn.
"""

from __future__ import annotations

import argparse

from .. import limits
from ..errors import FuseFlowError, TensorError

#: the seed of --random-inputs unless --data-seed says otherwise (as in ``boards``)
DEFAULT_SEED = 1


def density(text: str) -> float:
    """argparse type: a density in (0, 1]."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1], got {text!r}") from None
    if not 0 < v <= 1:
        raise argparse.ArgumentTypeError(f"density must be in (0, 1], got {text}")
    return v


def add_data_arguments(parser, required: bool, inputs_help: str, nargs=None) -> None:
    """``--inputs`` (tensor files), ``--random-inputs DENSITY`` and ``--data-seed`` on ``parser``; with
    ``required`` one of the two must be given (checked by :func:`load_data`)."""
    kw = {"nargs": nargs, "metavar": "FILE"} if nargs else {"metavar": "FILE"}
    parser.add_argument("--inputs", help=inputs_help + (" (or --random-inputs)" if required else ""), **kw)
    parser.add_argument("--random-inputs", type=density, metavar="DENSITY",
                        help="instead of --inputs: random data of the graph's input tensors, sparse ones at this "
                             "density (seed --data-seed); 'fuseflow samml random' writes the same data to a file")
    parser.add_argument("--data-seed", type=_seed, default=DEFAULT_SEED,
                        help=f"seed of --random-inputs (default {DEFAULT_SEED})")
    parser.set_defaults(_data_required=required)


def _seed(text):
    from ..cli import nonnegative_int
    return nonnegative_int(text)


def load_data(args, program):
    """The tensors of ``--inputs`` (one file or a list, merged) or ``--random-inputs`` for ``program``; None when
    neither is given and they are optional."""
    if args.inputs and args.random_inputs is not None:
        raise FuseFlowError("--random-inputs", "give either --inputs or --random-inputs, not both")
    if args.inputs:
        return load_files(args.inputs if isinstance(args.inputs, (list, tuple)) else [args.inputs])
    if args.random_inputs is not None:
        return random_data(program, args.random_inputs, args.data_seed)
    if getattr(args, "_data_required", False):
        raise FuseFlowError("--inputs", "give the input tensors with --inputs FILE (fuseflow samml info GRAPH lists "
                                        "them) or random ones with --random-inputs DENSITY")
    return None


def load_files(paths):
    """Tensor files (.npz/.mtx/.npy) merged into one {name: data}; a tensor given twice is an error."""
    from ..tensors.io import load_tensor_file
    inputs = {}
    for path in paths:
        for name, value in load_tensor_file(path).items():
            if name in inputs:
                raise FuseFlowError(path, f"tensor {name} is given twice")
            inputs[name] = value
    return inputs


def random_data(program, density_: float, seed: int = DEFAULT_SEED) -> dict:
    """Random inputs for every input tensor of ``program`` (refused before drawing when one is too large)."""
    from .graph import dense_entries
    from .kernels import random_inputs
    from .tileplan import full_view
    program = full_view(program)             # a tiled program's data has the full shapes
    limit = limits.DENSE_ENTRIES.value
    for t in program.inputs:
        n = dense_entries(t.shape)
        if n > limit:
            raise TensorError(f"tensor {t.name}", f"random data is drawn as a dense {_shape(t.shape)} array of {n} "
                                                  f"entries, more than the limit of {limit} "
                                                  f"{limits.DENSE_ENTRIES.name} (set {limits.DENSE_ENTRIES.env} to "
                                                  f"raise it, or give your own data with --inputs)")
    return random_inputs(program, density=density_, seed=seed)


def for_file(program, data: dict) -> dict:
    """``data`` as :func:`fuseflow.tensors.io.save_npz` stores it compactly: order-2 tensors of a sparse format
    as SciPy CSR matrices, the rest dense."""
    import scipy.sparse as sp
    from .tileplan import full_view
    out = {}
    for t in full_view(program).inputs:
        v = data[t.name]
        out[t.name] = sp.csr_array(v) if t.order == 2 and not all(lv == "dense" for lv in t.levels) else v
    return out


def _shape(shape):
    return " x ".join(str(int(d)) for d in shape) or "scalar"


def format_name(t) -> str:
    """A tensor declaration's format as a user writes it (``csr``, ``dense``, ``dcsc``, or level letters)."""
    from ..tensors.formats import TensorFormat
    try:
        return str(TensorFormat(tuple(t.levels), tuple(t.mode_order), tuple(t.block or ())).name)
    except Exception:  # noqa: BLE001 - a name is only for display
        return ",".join(t.levels)


def describe(program) -> list:
    """Lines for ``fuseflow samml info``: the program, then every tensor with its role, shape and format."""
    value = program.config.get("value", {})
    numbers = (f"fixed point, {value.get('width', 32)} bits with {value.get('frac', 16)} fractional"
               if value.get("format", "fixed") == "fixed" else "float")
    lines = [f"program {program.name}: {len(program.kernels)} kernel(s), "
             f"{sum(len(k.nodes) for k in program.kernels)} nodes; hardware values {numbers}; coordinates "
             f"{program.config.get('crd_width')} bits"]
    tiling = getattr(program, "tiling", None)
    if tiling is not None:
        lines.append("tiled (docs/tiling.md): the kernels run once per tile; data has the full shapes below, each "
                     "tile's shape after 'tile'; " + ", ".join(f"{d} in tiles of {v['size']} ({v['tiles']})"
                                                               for d, v in tiling["dims"].items()))
    accs = {n for n, info in (tiling or {}).get("tensors", {}).items() if "acc_of" in info}
    width = max([len(t.name) for t in program.tensors.values()] + [4])

    def shape_text(t):
        full = tiling["tensors"][t.name]["shape"] if tiling is not None and t.name in tiling["tensors"] else t.shape
        text = f"({', '.join(str(int(d)) for d in full)})"
        return text if list(full) == list(t.shape) else f"{text} tile ({', '.join(str(int(d)) for d in t.shape)})"
    shapes = {t.name: shape_text(t) for t in program.tensors.values()}
    swidth = max([len(s) for s in shapes.values()] + [4])
    for role, heading in (("input", "inputs (give each by name in --inputs FILE.npz, or use --random-inputs)"),
                          ("output", "outputs"), ("intermediate", "intermediates (made by one kernel, read by a "
                                                                  "later one)")):
        ts = [t for t in program.tensors.values() if t.role == role and t.name not in accs]
        if not ts:
            continue
        lines.append(f"{heading}:")
        for t in ts:
            extra = []
            if t.density is not None:
                extra.append(f"density {t.density:g}")
            if t.capacity is not None:
                extra.append(f"capacity {list(t.capacity)}")
            lines.append(f"  {t.name:{width}s}  shape {shapes[t.name]:{swidth}s}  format {format_name(t)}"
                         + (f"  ({', '.join(extra)})" if extra else ""))
    return lines
