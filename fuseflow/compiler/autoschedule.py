"""Autoscheduler: choose fusion granularity, dataflow orders and parallel factors under a resource budget.

FuseFlow leaves this as future work; ours is prune-then-confirm:

1. enumerate schedules: fusion per region (each ``fuse { }`` region fused whole, split into single statements,
   or, where the number of choices stays bounded, split into runs of consecutive statements; every combination
   over the regions), everything fused (``full``), and per fusion choice the combinations of each kernel's
   valid dataflow orders (capped);
2. drop schedules over the resource budget (``max_nodes``: SAMML ops, the area proxy; ``max_kernels``);
3. rank the rest by the cost heuristic's cycles (:mod:`.cost`, milliseconds each, no simulation);
4. with a lane budget (``max_lanes``: lanes per kernel, the product of its indices' factors), parallel factors
   for the :data:`LANE_BASES` best-ranked schedules: every index at each factor of :data:`FACTORS` (up to its
   dimension), then the two best indices nested, each laned schedule compiled, checked against the node budget
   (lanes copy nodes) and ranked with the rest;
5. simulate the ``top`` best-ranked on sample data and keep the fastest.

``benchmarks/autoschedule_bench.py`` measures how often this picks the schedule exhaustive simulation finds
best, and the regret in cycles when it does not.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

from ..errors import ProgramError
from ..tensors.random_data import random_sparse
from .cost import estimate

MAX_ORDER_COMBOS = 24          # order combinations tried per fusion choice
MAX_FUSION_CHOICES = 32        # per-region fusion choices enumerated (beyond it: each region fused or split)
MAX_COMPILES = 96              # order combinations over all fusion choices (each choice gets its share)
FACTORS = (2, 4, 8)            # parallel factors tried per index (1: the index is not parallelized)
LANE_BASES = 3                 # best-ranked unlaned schedules that parallel factors are tried on


@dataclass
class Schedule:
    """One schedule: ``fuse`` names the granularity (``none``, ``regions``, ``full``, or ``per-region`` for a
    mix), ``groups`` the statements (by output) each kernel group fuses."""
    fuse: str
    order: dict | None
    nodes: int
    kernels: int
    estimated_cycles: float
    simulated_cycles: int | None = None
    groups: list | None = None
    parallel: dict | None = None            # {index: lanes} (None: one lane)

    def key(self) -> str:
        orders = ";".join(f"{k}={''.join(v)}" for k, v in sorted((self.order or {}).items()))
        fused = "".join("{" + ",".join(g) + "}" for g in self.groups) if self.groups else ""
        lanes = "|" + ",".join(f"{i}={f}" for i, f in self.parallel.items()) if self.parallel else ""
        return f"{self.fuse}{fused}|{orders}{lanes}"


@dataclass
class AutoResult:
    result: object                          # the chosen CompileResult
    chosen: Schedule
    candidates: list = field(default_factory=list)


def _splits(region: list) -> list:
    """The ways to cut one region into runs of consecutive statements: [[run, ...], ...], fused whole first."""
    out = []
    for cuts in itertools.product((False, True), repeat=len(region) - 1):
        runs, run = [], [region[0]]
        for sid, cut in zip(region[1:], cuts):
            if cut:
                runs.append(run)
                run = [sid]
            else:
                run.append(sid)
        out.append(runs + [run])
    return out


def fusion_choices(ir, bound: int = MAX_FUSION_CHOICES) -> list:
    """Fusion choices for a program's IR (sugar lowered): [(label, regions)], ``regions`` the statement groups
    to fuse (statements outside them run alone), compiled with ``fuse="regions"``; ``("full", None)`` fuses
    everything. Per region: every split into runs of consecutive statements when the combinations stay within
    ``bound``, else fused whole or split; the combinations over regions, capped at ``bound``."""
    per_region = [_splits(list(r)) for r in ir.regions]
    if _count(per_region) > bound:
        per_region = [[[list(r)], [[sid] for sid in r]] for r in ir.regions]
    out = []
    for combo in itertools.islice(itertools.product(*per_region), bound):
        regions = [run for runs in combo for run in runs if len(run) > 1]
        if regions == [list(r) for r in ir.regions]:
            label = "regions"
        elif not regions:
            label = "none"
        else:
            label = "per-region"
        out.append((label, regions))
    out.append(("full", None))
    return out


def _count(per_region):
    n = 1
    for r in per_region:
        n *= len(r)
    return n


def compile_choice(src, regions, order=None, parallel=None):
    """Compile ``src`` fusing exactly ``regions`` (lists of statement ids; None: everything fused), with
    ``parallel`` lanes ({index: factor})."""
    from . import compile_program
    from .lower_sugar import lower_sugar
    ir = lower_sugar(src if not hasattr(src, "to_ir") else src.to_ir())
    if regions is None:
        return compile_program(ir, fuse="full", order=order, parallel=parallel)
    return compile_program(replace(ir, regions=[list(r) for r in regions]), fuse="regions", order=order,
                           parallel=parallel)


def _groups(ir, regions):
    name = {s.id: s.lhs for s in ir.stmts}
    if regions is None:
        return [[name[s.id] for s in ir.stmts]]
    fused = {sid for r in regions for sid in r}
    groups = [[name[sid] for sid in r] for r in regions] + [[name[s.id]] for s in ir.stmts if s.id not in fused]
    return sorted(groups, key=lambda g: [s.lhs for s in ir.stmts].index(g[0]))


def candidate_schedules(src, max_orders: int = MAX_ORDER_COMBOS, max_fusion: int = MAX_FUSION_CHOICES,
                        parallel: dict | None = None, with_regions: bool = False):
    """[(fuse label, order dict or None, CompileResult, groups)] over per-region fusion choices (and full
    fusion) and, per choice, order combinations; one per distinct graph. ``parallel``: lanes every candidate
    gets (a candidate they do not fit is left out); ``with_regions``: each tuple also carries the fused
    statement groups, as :func:`compile_choice` takes them."""
    from ..samml import io as samml_io
    from .fusion import KernelPlan
    from .lower_sugar import lower_sugar
    ir = lower_sugar(src if not hasattr(src, "to_ir") else src.to_ir())
    out, seen = [], set()
    choices = fusion_choices(ir, max_fusion)
    max_orders = max(1, min(max_orders, MAX_COMPILES // len(choices)))
    for fuse, regions in choices:
        try:
            base = compile_choice(ir, regions, parallel=parallel)
        except ProgramError:
            continue
        plans = [p for p in base.plans if isinstance(p, KernelPlan)]
        per_kernel = [[tuple(o) for o in p.orders(8)[0]] or [tuple(p.order)] for p in plans]
        for combo in itertools.islice(itertools.product(*per_kernel), max_orders):
            order = {p.name: o for p, o in zip(plans, combo)}
            if all(tuple(p.order) == o for p, o in zip(plans, combo)):
                res = base
            else:
                try:
                    res = compile_choice(ir, regions, order=order, parallel=parallel)
                except ProgramError:
                    continue
            # one candidate per distinct graph (a one-statement program compiles alike at every granularity)
            key = samml_io.dumps(res.program)
            if key in seen:
                continue
            seen.add(key)
            out.append((fuse, order, res, _groups(ir, regions)) + ((regions,) if with_regions else ()))
    return out


def lane_choices(plans, max_lanes: int, factors=FACTORS) -> list:
    """Parallel factors to try on one schedule: [{index: factor}], every index of its kernels alone at each
    factor up to its dimension and ``max_lanes``."""
    from .fusion import KernelPlan
    dims = {}
    for p in plans:
        if isinstance(p, KernelPlan):
            for i in p.order:
                if p.sizes.get(i) is not None:
                    dims[i] = min(dims.get(i, int(p.sizes[i])), int(p.sizes[i]))
    return [{i: f} for i in sorted(dims) for f in factors if f <= min(dims[i], max_lanes)]


def _nested(singles: list, max_lanes: int) -> list:
    """Two indices laned together, from the ranked single-index choices: the two best indices, every pair of
    their factors within ``max_lanes`` lanes."""
    best = []
    for par in singles:
        (i, _), = par.items()
        if i not in best:
            best.append(i)
    if len(best) < 2:
        return []
    a, b = best[:2]
    fa = [next(iter(p.values())) for p in singles if a in p]
    fb = [next(iter(p.values())) for p in singles if b in p]
    return [{a: x, b: y} for x in fa for y in fb if x * y <= max_lanes]


def exhaustive(src, inputs: dict, memory="hbm2", max_lanes: int | None = None) -> list:
    """Every candidate schedule simulated on ``inputs``: [(Schedule, CompileResult)], fastest first. With
    ``max_lanes``, every schedule also at every parallel factor of every index and every pair of indices
    (within ``max_lanes`` lanes)."""
    from ..sim import engine
    out = []

    def run(fuse, order, res, groups, par=None):
        est = estimate(res.program, inputs=inputs, memory=memory)
        s = Schedule(fuse, order, sum(len(k.nodes) for k in res.program.kernels), len(res.program.kernels),
                     est.cycles, engine.run(res.program, inputs, memory=memory).cycles, groups, par)
        out.append((s, res))

    for fuse, order, res, groups, regions in candidate_schedules(src, with_regions=True):
        run(fuse, order, res, groups)
        if max_lanes is None or max_lanes < 2:
            continue
        singles = lane_choices(res.plans, max_lanes)
        pairs = [{**a, **b} for a, b in itertools.combinations(singles, 2)
                 if next(iter(a)) != next(iter(b)) and next(iter(a.values())) * next(iter(b.values())) <= max_lanes]
        for par in singles + pairs:
            try:
                laned = compile_choice(src, regions, order=order, parallel=par)
            except ProgramError:
                continue
            if _has_lanes(laned.program):
                run(fuse, order, laned, groups, par)
    out.sort(key=lambda c: c[0].simulated_cycles)
    return out


def autoschedule(src, inputs: dict | None = None, densities: dict | None = None, max_nodes: int | None = None,
                 max_kernels: int | None = None, top: int = 3, memory="hbm2", simulate: bool = True,
                 max_lanes: int | None = None, parallel: dict | None = None) -> AutoResult:
    """Pick a schedule for ``src`` (an EinsumProgram) on sample ``inputs`` (or input ``densities``).

    ``max_lanes``: also choose parallel factors (per index, from :data:`FACTORS`), at most this many lanes per
    kernel; ``parallel``: fixed lanes ({index: factor}) every schedule gets instead. Raises ProgramError (one
    line) when no schedule fits the budget.
    """
    from ..samml import kernels as samml_kernels
    from ..sim import engine
    if (max_nodes is not None and max_nodes < 1) or (max_kernels is not None and max_kernels < 1):
        raise ProgramError("budget", "must allow at least one node and one kernel")
    if max_lanes is not None and max_lanes < 1:
        raise ProgramError("budget", f"must allow at least one lane per kernel, got {max_lanes}")
    if max_lanes is not None and parallel:
        raise ProgramError("parallel", "give fixed lanes (parallel) or a lane budget (max_lanes), not both")
    cands = []
    smallest = None

    def consider(fuse, order, res, groups, par=None):
        nonlocal smallest
        nodes = sum(len(k.nodes) for k in res.program.kernels)
        nk = len(res.program.kernels)
        smallest = nodes if smallest is None else min(smallest, nodes)
        if (max_nodes is not None and nodes > max_nodes) or (max_kernels is not None and nk > max_kernels):
            return None
        est = estimate(res.program, densities=densities, inputs=inputs if densities is None else None,
                       memory=memory)
        cands.append((Schedule(fuse, order, nodes, nk, est.cycles, groups=groups, parallel=par), res))
        return cands[-1]

    bases = []
    for fuse, order, res, groups, regions in candidate_schedules(src, parallel=parallel, with_regions=True):
        c = consider(fuse, order, res, groups, dict(parallel) if parallel else None)
        if c is not None:
            bases.append((c, regions))
    if max_lanes is not None and max_lanes > 1:
        bases.sort(key=lambda b: b[0][0].estimated_cycles)
        for (sched, res), regions in bases[:LANE_BASES]:
            singles = []
            for par in lane_choices(res.plans, max_lanes):
                c = _laned(consider, sched, regions, src, par)
                if c is not None:
                    singles.append((c[0].estimated_cycles, par))
            singles = [par for _, par in sorted(singles, key=lambda t: t[0])]
            for par in _nested(singles, max_lanes):
                _laned(consider, sched, regions, src, par)
    if not cands:
        limits = ", ".join(f"{v} {what}" for v, what in ((max_nodes, "nodes"), (max_kernels, "kernels"))
                           if v is not None)
        raise ProgramError("budget", f"impossible: no schedule fits within {limits} (the smallest schedule "
                                     f"has {smallest} nodes)")
    cands.sort(key=lambda c: c[0].estimated_cycles)
    if not simulate:
        return AutoResult(cands[0][1], cands[0][0], [c[0] for c in cands])
    best = None
    for sched, res in cands[:top]:
        data = inputs if inputs is not None else samml_kernels.random_inputs(res.program, density=0.1, seed=0)
        if densities is not None and inputs is None:
            data = _inputs_of_densities(res.program, densities)
        r = engine.run(res.program, data, memory=memory)
        sched.simulated_cycles = r.cycles
        if best is None or r.cycles < best[0].simulated_cycles:
            best = (sched, res)
    return AutoResult(best[1], best[0], [c[0] for c in cands])


def _laned(consider, sched, regions, src, par):
    """``sched`` compiled again with lanes ``par`` and considered; None when the lanes pass refuses it or it
    is over the budget."""
    try:
        res = compile_choice(src, regions, order=sched.order, parallel=par)
    except ProgramError:
        return None
    if not _has_lanes(res.program):            # the index has no work below it to split: the same graph
        return None
    return consider(sched.fuse, sched.order, res, sched.groups, par)


def _has_lanes(program) -> bool:
    return any(n.op == "serialize" for k in program.kernels for n in k.nodes.values())


def _inputs_of_densities(program, densities):
    import numpy as np
    rng = np.random.default_rng(0)
    return {t.name: random_sparse(rng, tuple(t.shape), densities.get(t.name, 1.0)) for t in program.inputs}
