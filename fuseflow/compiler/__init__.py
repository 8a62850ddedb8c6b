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

from types import ModuleType
from typing import TYPE_CHECKING, Any

from .options import CompileOptions, parse_order
from .passes import Compilation, run_pipeline

if TYPE_CHECKING:                       # what __getattr__ gives, for type checkers
    from .blocks import lower_blocks
    from .codegen import CompileResult, generate_program
    from .frontend import EinsumProgram, parse_file
    from .fusion import SCHEDULES, KernelPlan, TransposePlan, check_block_plans, plan_program, resolve_parallel
    from .ir import ProgramIR
    from .lanes import parse_parallel

# Everything heavy (the fusion planner, codegen, NumPy, networkx) is imported on first use: `import
# fuseflow.compiler` and `fuseflow compile --help` stay cheap (issue 42). name -> submodule that defines it.
_LAZY = {
    "CompileResult": "codegen", "generate_program": "codegen",
    "EinsumProgram": "frontend", "parse_file": "frontend",
    "SCHEDULES": "fusion", "KernelPlan": "fusion", "TransposePlan": "fusion", "check_block_plans": "fusion",
    "plan_program": "fusion", "resolve_parallel": "fusion",
    "parse_parallel": "lanes", "lower_blocks": "blocks", "ProgramIR": "ir",
}
# (``fuseflow.compiler.lower_sugar`` is the submodule; the pass is ``fuseflow.compiler.lower_sugar.lower_sugar``)


def __getattr__(name: str) -> Any:
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module: ModuleType
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


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["EinsumProgram", "parse_file", "compile_program", "compile_text", "CompileOptions", "CompileResult",
           "SCHEDULES", "KernelPlan", "TransposePlan", "parse_order", "list_orders"]


def compile_program(src: EinsumProgram | ProgramIR, options: CompileOptions | None = None, /,
                    **kwargs: Any) -> CompileResult:
    """Compile an :class:`EinsumProgram` (or a :class:`~.ir.ProgramIR`) to a SAMML program.

    ``options``: a :class:`~.options.CompileOptions` (every option, typed and documented there); ``kwargs``
    change it (its fields, and the older ``locate=False``, ``drop_empty=False`` and ``passes={...}``), e.g.
    ``compile_program(p, fuse="full", order="i,k,j", parallel="i=4", skip=["locate"])``. The stages of
    :data:`.passes.PIPELINE` run in order. With ``tiles`` or ``onchip_bits`` the program is tiled first
    (:mod:`.tiling`, docs/tiling.md).

    Returns a :class:`CompileResult` (``.program`` is the graph, ``.plans`` the kernels with their orders,
    ``.tables`` the fusion tables, ``.reports`` the stages' reports)."""
    options = CompileOptions.from_kwargs(options, **kwargs)
    from .codegen import CompileResult
    from .ir import ProgramIR
    tiles = {**getattr(src, "tile_sizes", {}), **options.tiles}
    if (tiles or options.onchip_bits is not None) and not isinstance(src, ProgramIR):
        from .tiling import compile_tiled
        at_tile = options.replace(tiles={}, onchip_bits=None, tile_inputs=None, dma=None, tile_fusion=None,
                                  min_tiles=None)

        def at_tile_shape(source: EinsumProgram) -> CompileResult:
            return compile_program(source, at_tile)
        tiled = compile_tiled(src, at_tile_shape, tiles or None, options.onchip_bits, options.parallel,
                              options.tile_inputs, options.dma, fusion=options.tile_fusion,
                              regions=options.fuse == "regions", min_tiles=options.min_tiles)
        if tiled is not None:
            return tiled
        src = _untiled(src)
    options = options.replace(parallel={**getattr(src, "parallel_factors", {}), **options.parallel})
    c = Compilation(options, ir=src if isinstance(src, ProgramIR) else src.to_ir())
    run_pipeline(c)
    return CompileResult(c.program, c.plans or [], c.tables, c.ir, c.reports)   # plans: set by the plan stage


def list_orders(src: EinsumProgram | ProgramIR, result: CompileResult, limit: int | None = None, fuse: str = "regions",
                order: Any = None, iteration: str = "factored", parallel: dict | str | None = None) -> list[tuple]:
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
    out: list[tuple] = []
    for p in result.plans:
        if not isinstance(p, KernelPlan):
            out.append((p, None, False, []))
            continue
        orders, capped = p.orders(limit or DEFAULT_MAX_ORDERS)
        if fuse not in SCHEDULES_FIXED:      # an autoscheduled program: its orders as the kernel lists them
            out.append((p, orders, capped, []))
            continue

        def compile_with(o: tuple, p: KernelPlan = p) -> CompileResult:
            return compile_program(src, fuse=fuse, order={**given, p.out: o}, iteration=iteration, parallel=parallel)
        kept, left_out = replayable_orders(p, orders, compile_with)
        out.append((p, kept, capped, left_out))
    return out


def _untiled(src: EinsumProgram) -> EinsumProgram:
    """``src`` without its ``tile`` lines (a copy; the tiling pass found nothing to split)."""
    if not getattr(src, "_tiles", None):
        return src
    import copy
    new = copy.copy(src)
    new._tiles = {}
    return new


def compile_text(text: str, options: CompileOptions | None = None, /, **kwargs: Any) -> CompileResult:
    """Compile ``.ff`` source text with the options of :func:`compile_program`; the keyword ``name`` is the
    program's name when the text has no ``program`` line (default ``"program"``)."""
    from .frontend import EinsumProgram
    name = kwargs.pop("name", None) or "program"
    return compile_program(EinsumProgram.parse(text, name), options, **kwargs)
