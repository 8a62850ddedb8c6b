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

A **stream's width** (``width`` on a crd, ref or repsig stream in graph.json; absent: ``crd_width``) is the
narrowest of :data:`WIDTHS` that holds the largest data token the stream can carry, :func:`stream_tops`: a
coordinate of a level is below that level's dimension, a reference into a level below the level's positions
(its capacity), a root reference and a repeat signal are 0, and an op that passes tokens on (intersect,
repeat, crd_drop, ...) carries the largest of its inputs'. The registry says which (``Port.bound``,
``Port.carries``); an output it says nothing about keeps ``crd_width``. :func:`assign_widths` writes a width
on every stream narrower than ``crd_width`` (a 16-bit program is unchanged), validation refuses a width below
what the declared shapes and capacities need (:func:`check_stream_widths`), and the simulator checks every
token against its stream's width.

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
           "check_fits_width", "check_fits", "data_top", "stream_tops", "stream_width", "check_stream_widths",
           "array_width", "assign_stream_widths", "INDEX_KINDS"]

#: stream kinds whose tokens are coordinates or positions (a ``val`` stream is as wide as its values)
INDEX_KINDS = ("crd", "ref", "repsig")


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
    """The coordinate width a program needs: the widest tensor index width and node size, at least 16. A tensor
    whose numbers need more than 32 bits is named, with what to do about it."""
    for t in program.tensors.values():
        _check_tensor_top(t)
    top = max([index_top(t) for t in program.tensors.values()]
              + [s for k in program.kernels for s in _node_sizes(k)] + [0])
    return width_for(top, "program")


def _check_tensor_top(decl) -> None:
    top = index_top(decl)
    if top < (1 << WIDTHS[-1]):
        return
    shape = " x ".join(str(int(d)) for d in decl.shape)
    if max(int(d) for d in decl.shape) - 1 >= (1 << WIDTHS[-1]):
        raise GraphError(f"tensor {decl.name}", f"a dimension of {shape} needs coordinates wider than "
                                                f"{WIDTHS[-1]} bits (at most {1 << WIDTHS[-1]} per dimension)")
    density = getattr(decl, "density", None)
    if density is not None:
        raise GraphError(f"tensor {decl.name}", f"at density {density:g} its {shape} shape holds up to {top} "
                                                f"entries, and positions need more than {WIDTHS[-1]} bits: declare "
                                                f"a lower density, or split the tensor")
    if decl.capacity is not None and list(decl.capacity) != list(decl.worst_case_capacity()):
        raise GraphError(f"tensor {decl.name}", f"its declared capacity {list(decl.capacity)} has positions up to "
                                                f"{top}, more than {WIDTHS[-1]} bits hold: declare fewer entries")
    raise GraphError(f"tensor {decl.name}", f"nothing says how full it is, so every entry of its {shape} shape "
                                            f"may be stored, and positions up to {top} need more than "
                                            f"{WIDTHS[-1]} bits: declare its density (.ff: 'tensor {decl.name}(...) "
                                            f": csr density 0.0001'; Python: density=) or a capacity")


def array_width(decl, capacity, level, array) -> int:
    """Width of one index array of a tensor whose levels hold ``capacity`` entries (then values): a ``crd``
    array holds coordinates below its level's dimension, a ``seg`` array positions up to the level's entries."""
    top = int(decl.level_dim(level)) - 1 if array == "crd" else int(capacity[level])
    return width_for(max(top, 0), f"tensor {decl.name}")


def _capacity(decl, capacities):
    cap = (capacities or {}).get(decl.name)
    if cap is None:
        cap = decl.capacity if decl.capacity is not None else decl.worst_case_capacity()
    return [int(c) for c in cap]


def _made(program, node, rule, in_tops, capacities):
    """(largest data token, what it is) of an output that makes new data (``Port.bound``), or None."""
    if rule == "zero":
        return 0, "a root reference or repeat signal"
    params = node.params
    name, level = params.get("tensor"), params.get("level")
    decl = program.tensors.get(name) if name is not None else None
    if decl is not None and level is None:
        level = 0
    compressed = params.get("format") == "compressed"
    if rule == "dim":
        dim = params.get("dim")
        if decl is not None and (dim is None or compressed):     # a compressed level's crd array
            dim = decl.level_dim(level)
        if dim is None:
            return None
        where = f"tensor {name} level {level} coordinates" if decl is not None else f"{node.id} coordinates"
        return int(dim) - 1, where
    if rule == "positions":
        tops = []
        dim = params.get("dim")
        parent = in_tops.get("ref")
        if dim is not None and parent is not None and not compressed:   # r*dim + c: a dense level, locate, mask
            tops.append(((parent[0] + 1) * int(dim) - 1, f"{node.id} positions"))
        if params.get("rows") is not None and dim is not None:
            tops.append((int(params["rows"]) * int(dim) - 1, f"{node.id} positions"))
        if decl is not None and level is not None and 0 <= level < decl.order:
            tops.append((max(_capacity(decl, capacities)[level] - 1, 0), f"tensor {name} level {level} positions"))
        return min(tops) if tops else None
    raise GraphError(f"node {node.id}", f"unknown width rule {rule!r}")


def stream_tops(program, kernel, capacities=None) -> dict:
    """``{stream id: (largest data token, what it is) or None}`` of the kernel's crd, ref and repsig streams
    (None: not known from the registry, the stream keeps ``crd_width``). ``capacities``: {tensor: capacity}
    measured on data, instead of the declared ones."""
    import networkx as nx
    tops = {}
    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        spec = node.spec
        in_tops = {}
        for pname, _ in spec.input_ports(node.params):
            s = kernel.driver(nid, pname)
            in_tops[pname] = tops.get(s.id) if s is not None else None
        for pname, port in spec.output_ports(node.params):
            s = kernel.output_stream(nid, pname)
            if s is None or s.kind not in INDEX_KINDS:
                continue
            top = None
            if port.bound is not None:
                top = _made(program, node, port.bound, in_tops, capacities)
            elif port.carries:
                index = pname[len(port.name.split("{")[0]):] if port.count else None
                found = []
                for pattern in port.carries:
                    if "{i}" in pattern and index is not None:
                        names = [pattern.format(i=index)]
                    elif "{i}" in pattern:
                        stem = pattern.split("{")[0]
                        names = [n for n in in_tops if n.startswith(stem) and n[len(stem):].isdigit()]
                    else:
                        names = [pattern]
                    found += [in_tops.get(n) for n in names if n in in_tops]
                if found and all(f is not None for f in found):
                    top = max(found)
            tops[s.id] = top
    return tops


def stream_width(program, stream) -> int:
    """Data width of a stream's tokens: a crd/ref/repsig stream's ``width`` (else ``crd_width``); a val
    stream's value width (times the elements of a block)."""
    import math
    cfg = program.config
    if stream.kind == "val":
        return int(cfg.get("value", {}).get("width", 32)) * math.prod(stream.block or ())
    return int(stream.width or cfg.get("crd_width", 16))


def assign_widths(program, options=None):
    """The widths pass: set ``config.crd_width`` from the program's shapes and capacities, and each stream's
    ``width`` where it is narrower (in place).

    Returns a report ``{"crd_width": w, "tensors": {name: index width}, "streams": {width: count}}``."""
    program.config["crd_width"] = program_width(program)
    return {"crd_width": program.config["crd_width"],
            "tensors": {t.name: tensor_width(t) for t in program.tensors.values()},
            "streams": assign_stream_widths(program)}


def assign_stream_widths(program) -> dict:
    """Set each crd/ref/repsig stream's ``width`` from :func:`stream_tops` where it is narrower than the
    program's ``crd_width`` (else None); returns ``{width: streams}``."""
    crd_width = int(program.config.get("crd_width", 16))
    counts = {}
    for k in program.kernels:
        tops = stream_tops(program, k)
        for sid, s in k.streams.items():
            if s.kind not in INDEX_KINDS:
                continue
            top = tops.get(sid)
            w = min(width_for(top[0], f"stream {sid}"), crd_width) if top is not None else crd_width
            s.width = w if w < crd_width else None
            counts[str(w)] = counts.get(str(w), 0) + 1
    return dict(sorted(counts.items()))


def check_stream_widths(program, capacities=None, error=GraphError) -> None:
    """Raise ``error`` (one line, naming the tensor or stream and the width it needs) if a stream's declared
    ``width`` cannot hold what it carries at the declared capacities (or ``capacities`` measured on data)."""
    for ki, k in enumerate(program.kernels):
        declared = {sid: s.width for sid, s in k.streams.items() if s.width is not None}
        if not declared:
            continue
        tops = stream_tops(program, k, capacities)
        for sid, w in declared.items():
            top = tops.get(sid)
            if top is None or top[0] < (1 << w):
                continue
            need = width_for(top[0], f"stream {sid}") if top[0] < (1 << WIDTHS[-1]) else None
            what, carried = f"stream {sid}", top[1]
            if carried.startswith("tensor "):            # "tensor B level 1 positions": name the tensor
                what, carried = " ".join(carried.split()[:2]), " ".join(carried.split()[2:])
            raise error(what, f"{carried} up to {top[0]} need {f'{need} bits' if need else 'more than 32 bits'}, "
                              f"stream {sid} declares width {w} (recompile, or widen the stream)")


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
