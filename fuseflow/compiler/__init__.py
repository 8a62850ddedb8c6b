"""The FuseFlow compiler: Einsum programs -> cross-expression fusion -> fusion tables -> SAMML graph.json.

>>> from fuseflow.compiler import EinsumProgram, compile_program
>>> p = EinsumProgram("spmv")
>>> _ = p.tensor("B", (3, 4), "csr")
>>> _ = p.tensor("c", (4,), "sv")
>>> _ = p.statement("x(i) = B(i,j) * c(j)")
>>> result = compile_program(p)
>>> [k.name for k in result.program.kernels]
['x']

Modules: :mod:`.frontend` (Python API and ``.ff`` text), :mod:`.ir` (Einsum IR), :mod:`.fusion`
(Algorithm 1, schedules, orders), :mod:`.tables` (fusion tables, Algorithm 2), :mod:`.codegen`
(factored-iteration SAMML). ``python -m fuseflow.compiler`` is the command line.
"""

from __future__ import annotations

from ..errors import ProgramError

# Everything heavy (the fusion planner, codegen, NumPy, networkx) is imported on first use: `import
# fuseflow.compiler` and `fuseflow compile --help` stay cheap (issue 42). name -> submodule that defines it.
_LAZY = {
    "CompileResult": "codegen", "build_program": "codegen",
    "EinsumProgram": "frontend", "parse_file": "frontend",
    "SCHEDULES": "fusion", "KernelPlan": "fusion", "TransposePlan": "fusion", "check_block_plans": "fusion",
    "plan_program": "fusion", "resolve_parallel": "fusion",
    "parse_parallel": "lanes", "lower_blocks": "blocks", "ProgramIR": "ir",
}
# (``fuseflow.compiler.lower_sugar`` is the submodule; the pass is ``fuseflow.compiler.lower_sugar.lower_sugar``)


def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if sub == "codegen":                # only the submodule asked for
        from . import codegen as module
    elif sub == "frontend":
        from . import frontend as module
    elif sub == "fusion":
        from . import fusion as module
    elif sub == "lanes":
        from . import lanes as module
    elif sub == "blocks":
        from . import blocks as module
    else:
        from . import ir as module
    value = getattr(module, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["EinsumProgram", "parse_file", "compile_program", "compile_text", "CompileResult", "SCHEDULES",
           "KernelPlan", "TransposePlan", "parse_order", "list_orders"]


def parse_order(order):
    """``"i,k,j"`` / ``"i->k->j"`` / a sequence -> a tuple of index names (None stays None). A list of
    ``"KERNEL=i,k,j"`` strings (the command line's repeated ``--order``) -> {kernel: order}."""
    if order is None:
        return None
    if isinstance(order, (list, tuple)) and order and all(isinstance(o, str) and "=" in o for o in order):
        out = {}
        for o in order:
            name, chain = (x.strip() for x in o.split("=", 1))
            if name in out:
                raise ProgramError("--order", f"two orders for kernel {name}")
            out[name] = parse_order(chain)
        return out
    if isinstance(order, (list, tuple)) and order and all(isinstance(o, str) and "," in o for o in order):
        if len(order) > 1:
            raise ProgramError("--order", "give one chain for every kernel, or KERNEL=ORDER for each kernel")
        order = order[0]
    if isinstance(order, str) and "=" in order:
        return parse_order([order])
    if isinstance(order, str):
        import re
        parts = [p.strip() for p in re.split(r",|->", order)]
        for p in parts:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
                raise ProgramError("--order", f"expected index names separated by commas, got {order!r}")
        if not parts:
            raise ProgramError("--order", "needs at least one index name")
        return tuple(parts)
    return tuple(order)


def compile_program(src, fuse="regions", order=None, iteration="factored", name=None, passes=None, locate=True,
                    parallel=None, tiles=None, onchip_bits=None, tile_inputs=None, dma=None, min_tiles=None):
    """Compile an :class:`EinsumProgram` (or a :class:`~.ir.ProgramIR`) to a SAMML program.

    ``fuse``: ``none`` | ``regions`` | ``full``; ``order``: a global dataflow order (or a partial one:
    each kernel takes the indices it has, as constraints), or a dict {kernel (output) name: order}; ``iteration``: ``factored`` (default) or
    ``global`` (one iteration space per kernel, for comparisons; sums of products only).
    Returns a :class:`CompileResult` (``.program`` is the graph, ``.plans`` the kernels with their orders,
    ``.tables`` the fusion tables, ``.reports`` the graph passes' reports). ``passes``: options of the graph
    passes (:mod:`.passes`), e.g. ``{"fifo_depth": 4}`` or ``{"budget_bits": 32768}``; ``locate=False`` skips
    the locate pass (dense operands of intersections are then scanned, for comparison). ``parallel``:
    {index: factor} or ``"i=4"`` (:mod:`.lanes`; added to the program's own ``parallel`` lines, and winning over
    them): every kernel with a parallelized index runs the sub-tree below it on that many lanes (several
    indices: nested lanes). ``tiles``: {index: size} or ``"i=1024"`` (added to the program's ``tile`` lines) and
    ``onchip_bits`` (automatic sizes under that budget; ``tile_inputs``: data to size them on) tile the program
    (:mod:`.tiling`, docs/tiling.md); without either, nothing is tiled. ``dma``: the tiled program's off-chip
    contract, ``"buffers=1,latency=20"`` or a dict (:class:`~fuseflow.samml.offchip.OffchipContract` fields; the
    rest: the registry's ``dma`` defaults, ``buffers`` 2; the RTL runs ``buffers=1``). ``min_tiles`` (with
    ``onchip_bits``): split the output rows into at least that many tiles even when the program fits, to stream
    data that lives off chip (:func:`.tiling.auto_sizes`)."""
    from .blocks import lower_blocks
    from .codegen import CompileResult, build_program
    from .fusion import check_block_plans, plan_program, resolve_parallel
    from .ir import ProgramIR
    from .lanes import parse_parallel
    from .lower_sugar import lower_sugar
    from .tiling import parse_tiles
    tiles = {**getattr(src, "tile_sizes", {}), **parse_tiles(tiles)}
    if (tiles or onchip_bits is not None) and not isinstance(src, ProgramIR):
        from .tiling import compile_tiled

        def at_tile_shape(source):
            return compile_program(source, fuse, order, iteration, name, passes, locate, parallel)
        contract = None
        if dma is not None:
            from ..samml.offchip import parse_contract
            from ..samml.registry import DMA
            from .tiling import DEFAULT_BUFFERS
            contract = parse_contract(dma, "--dma", {**DMA.defaults(), "buffers": DEFAULT_BUFFERS}).to_json()
        tiled = compile_tiled(src, at_tile_shape, tiles or None, onchip_bits, parallel, tile_inputs, contract,
                              min_tiles=min_tiles)
        if tiled is not None:
            return tiled
        src = _untiled(src)
    ir = src if isinstance(src, ProgramIR) else src.to_ir()
    if iteration not in ("factored", "global"):
        raise ProgramError("iteration", f"expected 'factored' or 'global', got {iteration!r}")
    if isinstance(order, dict):
        order = {k: parse_order(v) for k, v in order.items()}
    else:
        order = parse_order(order)
        if isinstance(order, tuple) and any("=" in o for o in order):
            raise ProgramError("--order", "mixes KERNEL=ORDER with a plain chain")
    ir = lower_sugar(ir)                     # the pass pipeline before fusion (docs/compiler.md)
    ir = lower_blocks(ir)
    plans, full_ir = plan_program(ir, fuse, order, iteration)
    check_block_plans(ir, plans)
    lanes = resolve_parallel(plans, {**getattr(src, "parallel_factors", {}), **parse_parallel(parallel)})
    if lanes:
        passes = {**(passes or {}), "parallel": lanes}
    reports = {}
    if not locate:
        passes = {**(passes or {}), "locate": False}
    prog, tables = build_program(full_ir, plans, name, options=passes, reports=reports)
    return CompileResult(prog, plans, tables, full_ir, reports)


def list_orders(src, result, limit=None, fuse="regions", order=None, iteration="factored", parallel=None):
    """The dataflow orders ``--list-orders`` prints: for every kernel plan of ``result`` (``src`` compiled with
    these arguments), ``(plan, orders, capped, left_out)``. An order is listed when the program compiles with it
    given back as ``order={kernel: order}`` (on top of a per-kernel ``order`` of the compile): the kernel's valid
    orders (:meth:`.fusion.KernelPlan.orders`, capped at ``limit``) less those the rest of the program cannot
    follow, which ``left_out`` names with the reason (:func:`.fusion.replayable_orders`). Transpose plans come
    with ``orders`` None. ``fuse="auto"`` (a schedule the autoscheduler chose) lists each kernel's own valid
    orders."""
    from .fusion import DEFAULT_MAX_ORDERS, SCHEDULES as SCHEDULES_FIXED, KernelPlan, replayable_orders
    given = parse_order(order)
    given = given if isinstance(given, dict) else {}
    out = []
    for p in result.plans:
        if not isinstance(p, KernelPlan):
            out.append((p, None, False, []))
            continue
        orders, capped = p.orders(limit or DEFAULT_MAX_ORDERS)
        if fuse not in SCHEDULES_FIXED:      # an autoscheduled program: its orders as the kernel lists them
            out.append((p, orders, capped, []))
            continue

        def compile_with(o, p=p):
            return compile_program(src, fuse=fuse, order={**given, p.out: o}, iteration=iteration, parallel=parallel)
        kept, left_out = replayable_orders(p, orders, compile_with)
        out.append((p, kept, capped, left_out))
    return out


def _untiled(src):
    """``src`` without its ``tile`` lines (a copy; the tiling pass found nothing to split)."""
    if not getattr(src, "_tiles", None):
        return src
    import copy
    new = copy.copy(src)
    new._tiles = {}
    return new


def compile_text(text, fuse="regions", order=None, iteration="factored", name="program", passes=None,
                 locate=True, parallel=None, tiles=None, onchip_bits=None, tile_inputs=None, dma=None,
                 min_tiles=None):
    """Compile ``.ff`` source text."""
    from .frontend import EinsumProgram
    return compile_program(EinsumProgram.parse(text, name), fuse, order, iteration, passes=passes, locate=locate,
                           parallel=parallel, tiles=tiles, onchip_bits=onchip_bits, tile_inputs=tile_inputs,
                           dma=dma, min_tiles=min_tiles)
