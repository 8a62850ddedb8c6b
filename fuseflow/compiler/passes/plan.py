"""The ``plan`` stage: fusion (:func:`fuseflow.compiler.fusion.plan_program`), the plans checked against
blocked tensors, and the parallel schedule resolved to the kernels that have each index."""

from __future__ import annotations

import dataclasses

from ..fusion import KernelPlan, check_block_plans, plan_program, resolve_parallel

__all__ = ["plan_stage"]


def plan_stage(c, options) -> dict:
    """Set ``c.plans`` (in execution order) and ``c.ir`` (with the temporaries fusion made); the lanes it resolves
    from ``options.parallel`` go into ``c.options.lanes``. Reports the kernels {name: order} and the lanes."""
    plans, full_ir = plan_program(c.ir, options.fuse, options.order, options.iteration)
    check_block_plans(c.ir, plans)
    lanes = resolve_parallel(plans, options.parallel)
    if lanes:
        c.options = dataclasses.replace(c.options, lanes={**c.options.lanes, **lanes})
    c.plans, c.ir = plans, full_ir
    return {"kernels": {p.name: ",".join(p.order) if isinstance(p, KernelPlan) else "transpose" for p in plans},
            "lanes": {k: [s["lanes"] for s in v] for k, v in lanes.items()}}
