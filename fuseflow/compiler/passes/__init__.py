"""Graph-to-graph passes run after code generation, in the order :data:`PIPELINE` lists them.

Each pass is a function ``pass(program, options) -> report`` that changes the program in place; the compiler
(:func:`fuseflow.compiler.codegen.build_program`) and the kernel builders (:mod:`fuseflow.samml.kernels`) run
the same pipeline through :func:`run_passes`, so every graph the project writes gets the same treatment:

1. ``locate`` (:func:`fuseflow.compiler.passes.locate.locate_pass`): dense operands of intersections are located, not
   scanned (option ``locate=False`` skips it, for comparison);
2. ``drop_empty`` (:func:`fuseflow.compiler.passes.drop_empty.drop_empty_pass`): a CSR-style operand's empty rows are
   dropped right after its scanners when nothing below needs them (option ``drop_empty=False`` skips it);
3. ``lanes`` (:func:`fuseflow.compiler.passes.lanes.lanes_pass`): kernels the schedule parallelizes (option
   ``parallel``: {kernel: lanes}) run the sub-tree below their outermost index on that many lanes;
   ``blocks`` (:func:`fuseflow.samml.blocks.apply_blocks`): with blocked tensors, every val stream states the
   block shape its producer gives (docs/samml.md, "Blocks");
4. ``capacities`` (:func:`fuseflow.samml.capacities.declare_capacities`): worst-case or density-based
   capacities, so hardware builds without data;
5. ``widths`` (:func:`fuseflow.samml.widths.assign_widths`): the coordinate width from shapes and capacities;
6. ``depths`` (:func:`.depths.assign_depths`): channel depths from the graph's structure and a profile on
   synthetic inputs, within a budget of FIFO bits (it reads the widths: a channel's cost is its token width).
"""

from __future__ import annotations

from ...samml.blocks import apply_blocks
from ...samml.capacities import declare_capacities
from .drop_empty import drop_empty_pass
from .lanes import lanes_pass
from .locate import locate_kernel
from ...samml.widths import assign_widths
from .depths import assign_depths


def locate(program, options) -> dict:
    """The locate pass (:mod:`fuseflow.compiler.passes.locate`); reports the number of locate nodes added."""
    if options.get("locate", True) is False:
        return {"located": 0, "skipped": True}
    return {"located": sum(locate_kernel(program, k) for k in program.kernels)}


def blocks(program, options) -> dict:
    """Every val stream states the block shape its producer gives (:func:`fuseflow.samml.blocks.apply_blocks`);
    reports the number of streams that carry blocks."""
    if not any(t.block for t in program.tensors.values()):
        return {"blocked_streams": 0}
    apply_blocks(program)
    return {"blocked_streams": sum(1 for k in program.kernels for s in k.streams.values() if s.block)}


#: the passes, in order: (name, function)
PIPELINE = (
    ("locate", locate),
    ("drop_empty", drop_empty_pass),
    ("lanes", lanes_pass),
    ("blocks", blocks),
    ("capacities", declare_capacities),
    ("widths", assign_widths),
    ("depths", assign_depths),
)

__all__ = ["PIPELINE", "run_passes"]


def run_passes(program, options=None, *, dump_after=None) -> dict:
    """Run :data:`PIPELINE` on ``program`` (in place); returns {pass name: report}. ``options`` is given to
    every pass (e.g. ``{"fifo_depth": 4, "budget_bits": 32768, "profile": False}``); ``dump_after`` (a pass
    name) makes the program's graph.json text after that pass appear in the reports as ``"dump"``."""
    import json
    reports = {}
    options = dict(options or {})
    dump_after = dump_after or options.pop("dump_after", None)
    names = [n for n, _ in PIPELINE]
    if dump_after is not None and dump_after not in names:
        from ...errors import ProgramError
        raise ProgramError("--dump-after", f"no pass called {dump_after!r} (passes: {', '.join(names)})")
    for name, fn in PIPELINE:
        reports[name] = fn(program, options)
        if name == dump_after:
            reports["dump"] = json.dumps(program.to_json(), indent=1)
    program.validate()
    return reports
