"""Coordinate and reference widths: one rule, used by the compiler, the simulator and ``hw build``.

A tensor's index arrays and streams carry coordinates (below the dimension of their level) and positions
(references into the next level or the values, and the ``seg`` entries that bound them: up to the level's
capacity). Its **index width** is the narrowest of :data:`WIDTHS` (16, 24 or 32 bits) that holds the largest
of these numbers, :func:`index_top`; with no declared capacity, the worst case (every position of a dense
tensor of the shape) is assumed. Hardware memories of a tensor's ``seg`` and ``crd`` arrays are that wide.

A program's **coordinate width** (``config.crd_width``, the width of every crd, ref and repsig stream) is the
widest index width of its tensors and of the sizes its nodes name (a dense scan's ``dim``, a sparse
accumulator's dimensions): :func:`program_width`. :func:`assign_widths` writes it into a program (the widths
pass of the compiler and the kernel builders); a hand-written graph keeps what it declares, and data that
does not fit is refused by :func:`check_fits_width` with one line naming the tensor and the width it needs
(the simulator and ``hw build``/``hw sim`` call the same function).

Example
-------
>>> width_for(65535), width_for(65536), width_for(1 << 24)
(16, 24, 32)
"""

from __future__ import annotations

from ..errors import GraphError, TensorError

#: the widths a coordinate/reference stream or index array can have, narrowest first
WIDTHS = (16, 24, 32)

__all__ = ["WIDTHS", "width_for", "index_top", "tensor_width", "program_width", "assign_widths",
           "check_fits_width", "check_fits", "data_top"]


def width_for(top: int, where: str = "width") -> int:
    """The narrowest of :data:`WIDTHS` that holds the unsigned number ``top``."""
    for w in WIDTHS:
        if int(top) < (1 << w):
            return w
    raise GraphError(where, f"numbers up to {top} need more than {WIDTHS[-1]} bits")


def data_top(shape, capacity) -> int:
    """The largest coordinate or position of a tensor of ``shape`` whose levels hold ``capacity`` entries
    (per level, then values): the largest coordinate is ``max(shape) - 1``; ``seg`` entries and counts reach
    the entries of their level."""
    return max([int(d) - 1 for d in shape] + [int(c) for c in capacity] + [0])


def index_top(decl) -> int:
    """:func:`data_top` of a :class:`~fuseflow.samml.graph.TensorDecl` at its declared capacity (the worst case
    when it declares none)."""
    cap = decl.capacity if decl.capacity is not None else decl.worst_case_capacity()
    return data_top(decl.shape, cap)


def tensor_width(decl) -> int:
    """Index width of a tensor declaration (its ``seg``/``crd`` memories)."""
    return width_for(index_top(decl), f"tensor {decl.name}")


def _node_sizes(kernel):
    for node in kernel.nodes.values():
        for key in ("dim", "dim_outer", "dim_outer1"):
            v = node.params.get(key)
            if isinstance(v, int) and v > 0:
                yield v - 1


def program_width(program) -> int:
    """The coordinate width a program needs: the widest tensor index width and node size, at least 16."""
    top = max([index_top(t) for t in program.tensors.values()]
              + [s for k in program.kernels for s in _node_sizes(k)] + [0])
    return width_for(top, "program")


def assign_widths(program, options=None):
    """The widths pass: set ``config.crd_width`` from the program's shapes and capacities (in place).

    Returns a report ``{"crd_width": w, "tensors": {name: index width}}``."""
    program.config["crd_width"] = program_width(program)
    return {"crd_width": program.config["crd_width"],
            "tensors": {t.name: tensor_width(t) for t in program.tensors.values()}}


def check_fits_width(program, name, shape, capacity, error=TensorError) -> None:
    """Raise ``error`` (one line, naming the tensor and the width it needs) if data of tensor ``name`` with
    ``capacity`` entries per level (then values) does not fit the program's coordinate width."""
    check_fits(name, shape, capacity, int(program.config.get("crd_width", 16)), error)


def check_fits(name, shape, capacity, declared, error=TensorError) -> None:
    """:func:`check_fits_width` for a coordinate width ``declared`` (validation checks a declaration with it:
    ``capacity`` may be empty, then only the coordinates are checked)."""
    top = data_top(shape, capacity or ())
    if top < (1 << declared):
        return
    what = "coordinates" if top == max(int(d) for d in shape) - 1 else "positions"
    need = width_for(top, f"tensor {name}") if top < (1 << WIDTHS[-1]) else None
    need_text = f"a {need}-bit coordinate width" if need else f"more than {WIDTHS[-1]} bits"
    raise error(f"tensor {name}", f"{what} up to {top} need {need_text}, the graph declares "
                                  f"crd_width {declared} (recompile, or rebuild the graph with a wider crd_width)")
