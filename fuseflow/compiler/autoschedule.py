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
from typing import TYPE_CHECKING

from ..errors import ProgramError
from ..tensors.random_data import random_sparse
from .cost import estimate

if TYPE_CHECKING:
    from .codegen import CompileResult

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
    result: CompileResult                   # the chosen CompileResult
    chosen: Schedule
    candidates: list = field(default_factory=list)     # every schedule ranked, best estimate first
    skipped: list = field(default_factory=list)        # [Skipped]: what was not ranked or simulated, and why
    seconds: float = 0.0                    # the autoscheduler's own time
    rank_seconds: float = 0.0               # of which ranking (compiling and estimating)
    compiles: int = 0                       # schedules compiled
    simulations: int = 0                    # confirming simulations run

    def report(self) -> str:
        """What it tried, what it skipped and why, what it chose, in a few lines."""
        c = self.chosen
        how = (f"{c.simulated_cycles:,} simulated cycles" if c.simulated_cycles is not None else
               f"{c.estimated_cycles:,.0f} estimated cycles (not simulated)")
        lines = [f"auto: chose {c.key()}: {how}",
                 f"auto: ranked {len(self.candidates)} schedule(s) ({self.compiles} compiled) with the cost model in "
                 f"{self.rank_seconds:.2f} s, simulated {self.simulations}, {self.seconds:.2f} s in all"]
        lines += [f"auto: skipped {s}" for s in self.skipped]
        return "\n".join(lines)


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
        if regions == [list(r) for r in ir.regions if len(r) > 1]:
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
            key = graph_key(res.program)
            if key in seen:
                continue
            seen.add(key)
            out.append((fuse, order, res, _groups(ir, regions)) + ((regions,) if with_regions else ()))
    return out


def graph_key(program) -> str:
    """A program's graph as canonical JSON: equal keys, the same graph (no validation: the compiler's graphs are
    valid, and ``samml_io.dumps`` validating each candidate took 40 % of the decoder's ranking time)."""
    import json
    return json.dumps(program.to_json(), sort_keys=True)


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


#: default time budget of :func:`autoschedule`, seconds (ranking and confirming simulations together)
DEFAULT_BUDGET = 60.0
#: seconds between two progress lines, and before the first
PROGRESS_SECONDS = 0.5
PROGRESS_DELAY = 1.0
#: share of the budget the ranking (compiling and estimating schedules) may use; the rest is for simulations
RANK_SHARE = 0.5
#: fusion choices (ranked at their default orders) whose order combinations are then tried
ORDER_BASES = 4
#: simulated cycles per second assumed when predicting a confirming simulation's time from its estimated cycles
#: (the compiled engine does about 1-20 M tokens/s on this machine, a few tokens per cycle; measured on the
#: example programs and the GCNs: conservative)
SIM_CYCLES_PER_SECOND = {"compiled": 1.5e6, "python": 5e4}


@dataclass
class Skipped:
    """A schedule (or a group of them) the autoscheduler did not rank or simulate, and why."""
    what: str
    why: str

    def __str__(self):
        return f"{self.what}: {self.why}"


def _progress(progress):
    """A callable ``say(line, force=False)``: ``progress`` itself, or lines on stderr at most every
    :data:`PROGRESS_SECONDS` (``force``: always) for True."""
    if progress is None or progress is False:
        return lambda line, force=False: None
    if callable(progress):
        return lambda line, force=False: progress(line)
    import sys
    import time
    last = [time.perf_counter()]          # nothing in the first PROGRESS_DELAY: a fast run prints nothing
    start = last[0]

    def show(line, force=False):
        now = time.perf_counter()
        if now - start >= PROGRESS_DELAY and (force or now - last[0] >= PROGRESS_SECONDS):
            last[0] = now
            sys.stderr.write(f"auto: {line}\n")
            sys.stderr.flush()
    return show


def autoschedule(src, inputs: dict | None = None, densities: dict | None = None, max_nodes: int | None = None,
                 max_kernels: int | None = None, top: int = 3, memory="hbm2", simulate: bool = True,
                 max_lanes: int | None = None, parallel: dict | None = None, budget: float | None = DEFAULT_BUDGET,
                 progress=None, sources=None) -> AutoResult:
    """Pick a schedule for ``src`` (an EinsumProgram) on sample ``inputs`` (or input ``densities``).

    Fusion choices are ranked first at their default orders, then the order combinations of the
    :data:`ORDER_BASES` best (all by the cost model); with ``max_lanes`` parallel factors (per index, from
    :data:`FACTORS`, at most this many lanes per kernel) of the :data:`LANE_BASES` best; ``parallel``: fixed
    lanes ({index: factor}) every schedule gets instead. ``simulate``: confirm the ``top`` best by simulation
    (those whose predicted simulation time fits the rest of the budget). ``budget``: seconds for all of it
    (None: no limit); ranking stops at :data:`RANK_SHARE` of it. ``progress``: a callable taking one line, or
    True (stderr). ``sources``: other forms of the same program (reassociated products) to rank alongside,
    [(label, EinsumProgram or ProgramIR)]. Raises ProgramError (one line) when no schedule fits the budget.
    """
    import time
    from ..samml import kernels as samml_kernels
    from ..sim import engine
    from .fusion import KernelPlan
    from .lower_sugar import lower_sugar
    if (max_nodes is not None and max_nodes < 1) or (max_kernels is not None and max_kernels < 1):
        raise ProgramError("budget", "must allow at least one node and one kernel")
    if max_lanes is not None and max_lanes < 1:
        raise ProgramError("budget", f"must allow at least one lane per kernel, got {max_lanes}")
    if max_lanes is not None and parallel:
        raise ProgramError("parallel", "give fixed lanes (parallel) or a lane budget (max_lanes), not both")
    if budget is not None and budget <= 0:
        raise ProgramError("budget", f"must be a positive number of seconds, got {budget}")
    say = _progress(progress)
    t0 = time.perf_counter()

    def elapsed():
        return time.perf_counter() - t0

    def over(share=RANK_SHARE):
        return budget is not None and elapsed() > budget * share

    cands, skipped, seen = [], [], set()
    smallest = None
    compiles = 0

    def consider(fuse, order, res, groups, par=None, variant=""):
        nonlocal smallest
        key = graph_key(res.program)
        if key in seen:
            return None
        seen.add(key)
        nodes = sum(len(k.nodes) for k in res.program.kernels)
        nk = len(res.program.kernels)
        smallest = nodes if smallest is None else min(smallest, nodes)
        if (max_nodes is not None and nodes > max_nodes) or (max_kernels is not None and nk > max_kernels):
            skipped.append(Skipped(f"{fuse} ({nk} kernels, {nodes} nodes)", "over the resource budget"))
            return None
        est = estimate(res.program, densities=densities, inputs=inputs if densities is None else None,
                       memory=memory)
        sched = Schedule(fuse if not variant else f"{fuse}+{variant}", order, nodes, nk, est.cycles, groups=groups,
                         parallel=par)
        cands.append((sched, res))
        return cands[-1]

    forms = [("", src)] + list(sources or [])
    irs = [(variant, lower_sugar(form if not hasattr(form, "to_ir") else form.to_ir())) for variant, form in forms]
    choices = [("", irs[0][1], fuse, regions) for fuse, regions in fusion_choices(irs[0][1])]
    later = [(variant, ir, fusion_choices(ir)) for variant, ir in irs[1:]]
    bases = []
    fixed = dict(parallel) if parallel else None
    n = -1
    while True:
        n += 1
        if n == len(choices):
            # another form of the program (a reassociated product): its every fusion choice is ranked only when
            # its unfused or its region-fused schedule beats the best so far (two compiles decide)
            if not later:
                break
            variant, ir, its = later.pop(0)
            probe = [c for c in its if c[0] in ("none", "regions")]
            best_so_far = min((b[0][0].estimated_cycles for b in bases), default=None)
            scores = []
            for fuse, regions in probe:
                try:
                    res = compile_choice(ir, regions, parallel=parallel)
                    compiles += 1
                except ProgramError:
                    continue
                scores.append(estimate(res.program, densities=densities,
                                       inputs=inputs if densities is None else None, memory=memory).cycles)
            if best_so_far is not None and (not scores or min(scores) >= best_so_far):
                skipped.append(Skipped(f"the fusion choices of form {variant}", "neither its unfused nor its "
                                       "region-fused schedule beats the best so far"))
            else:
                choices += [(variant, ir, fuse, regions) for fuse, regions in its]
            n -= 1
            continue
        variant, ir, fuse, regions = choices[n]
        if over() and cands:                 # a spent budget still ranks one schedule: the result
            skipped.append(Skipped(f"{len(choices) - n} fusion choice(s) and {len(later)} form(s)",
                                   f"the ranking used its share of the {budget:g} s budget"))
            break
        try:
            res = compile_choice(ir, regions, parallel=parallel)
            compiles += 1
        except ProgramError as exc:
            skipped.append(Skipped(f"{fuse} {_groups_text(_groups(ir, regions))}", f"does not compile: {exc}"))
            continue
        c = consider(fuse, None, res, _groups(ir, regions), fixed, variant)
        if c is not None:
            c[0].order = {p.name: tuple(p.order) for p in res.plans if isinstance(p, KernelPlan)}
            bases.append((c, ir, regions))
        say(f"ranked fusion choice {n + 1}/{len(choices)} ({elapsed():.1f} s)")
    bases.sort(key=lambda b: b[0][0].estimated_cycles)
    # the order combinations of the best fusion choices
    for rank, ((sched, res), ir, regions) in enumerate(bases):
        if rank >= ORDER_BASES:
            skipped.append(Skipped(f"order combinations of {len(bases) - ORDER_BASES} fusion choice(s)",
                                   f"ranked below the best {ORDER_BASES} at their default orders"))
            break
        plans = [p for p in res.plans if isinstance(p, KernelPlan)]
        per_kernel = [[tuple(o) for o in p.orders(8)[0]] or [tuple(p.order)] for p in plans]
        combos = list(itertools.islice(itertools.product(*per_kernel), MAX_ORDER_COMBOS))
        for m, combo in enumerate(combos):
            if all(tuple(p.order) == o for p, o in zip(plans, combo)):
                continue
            if over():
                skipped.append(Skipped(f"{len(combos) - m} order combination(s) of {sched.key()}",
                                       f"the ranking used its share of the {budget:g} s budget"))
                break
            order = {p.name: o for p, o in zip(plans, combo)}
            try:
                res2 = compile_choice(ir, regions, order=order, parallel=parallel)
                compiles += 1
            except ProgramError:
                continue
            consider(sched.fuse.split("+")[0], order, res2, sched.groups, fixed, sched.fuse.partition("+")[2])
        say(f"ranked the orders of fusion choice {rank + 1}/{min(ORDER_BASES, len(bases))} ({elapsed():.1f} s)",
            force=rank + 1 == min(ORDER_BASES, len(bases)))
    if max_lanes is not None and max_lanes > 1:
        lane_bases = sorted(((c, ir, regions) for c in cands for b, ir, regions in bases
                             if c[0].groups == b[0].groups and c[0].fuse == b[0].fuse),
                            key=lambda b: b[0][0].estimated_cycles)
        done = set()
        for (sched, res), ir, regions in lane_bases:
            if len(done) >= LANE_BASES or over():
                break
            if sched.key() in done:
                continue
            done.add(sched.key())
            singles = []
            for par in lane_choices(res.plans, max_lanes):
                c = _laned(consider, sched, regions, ir, par)
                if c is not None:
                    singles.append((c[0].estimated_cycles, par))
            singles = [par for _, par in sorted(singles, key=lambda t: t[0])]
            for par in _nested(singles, max_lanes):
                _laned(consider, sched, regions, ir, par)
            say(f"ranked lanes of {sched.key()} ({elapsed():.1f} s)")
    if not cands:
        limits = ", ".join(f"{v} {what}" for v, what in ((max_nodes, "nodes"), (max_kernels, "kernels"))
                           if v is not None)
        raise ProgramError("budget", f"impossible: no schedule fits within {limits} (the smallest schedule "
                                     f"has {smallest} nodes)")
    cands.sort(key=lambda c: c[0].estimated_cycles)
    rank_seconds = elapsed()
    result = AutoResult(cands[0][1], cands[0][0], [c[0] for c in cands], skipped=skipped,
                        rank_seconds=rank_seconds, compiles=compiles)
    if not simulate:
        result.seconds = elapsed()
        return result
    best = None
    rate = SIM_CYCLES_PER_SECOND["compiled" if engine_available() else "python"]
    # the best of each distinct fusion choice first (orders of one choice rarely differ much; fusion choices do,
    # and the cost model's ranking between them is where it errs), then the rest in rank order
    first, rest, fused_as = [], [], set()
    for c in cands:
        key = (c[0].fuse, _groups_text(c[0].groups))
        (rest if key in fused_as else first).append(c)
        fused_as.add(key)
    picks = (first + rest)[:top]
    for n, (sched, res) in enumerate(picks):
        predicted = sched.estimated_cycles / rate
        left = None if budget is None else budget - elapsed()
        if left is not None and predicted > left and best is not None:
            skipped.append(Skipped(f"simulating {sched.key()}", f"predicted {predicted:.0f} s of simulation, "
                                                                f"{max(0.0, left):.0f} s of the budget left"))
            continue
        if left is not None and predicted > left:
            skipped.append(Skipped(f"simulating {sched.key()}", f"predicted {predicted:.0f} s of simulation, "
                                                                f"{max(0.0, left):.0f} s of the budget left; kept "
                                                                f"the cost model's choice"))
            break
        data = inputs if inputs is not None else samml_kernels.random_inputs(res.program, density=0.1, seed=0)
        if densities is not None and inputs is None:
            data = _inputs_of_densities(res.program, densities)
        r = engine.run(res.program, data, memory=memory)
        sched.simulated_cycles = r.cycles
        result.simulations += 1
        say(f"simulated {n + 1}/{min(top, len(cands))}: {r.cycles} cycles ({elapsed():.1f} s)", force=True)
        if best is None or r.cycles < best[0].simulated_cycles:
            best = (sched, res)
    if best is not None:
        result.chosen, result.result = best
    result.seconds = elapsed()
    return result


def engine_available() -> bool:
    """Is the compiled simulator built (what ``engine="auto"`` runs)?"""
    try:
        from ..sim import compiled
        return bool(compiled.available())
    except Exception:          # noqa: BLE001 - no compiled engine: the Python one's rate
        return False


def _groups_text(groups) -> str:
    return "".join("{" + ",".join(g) + "}" for g in groups or [])


def _laned(consider, sched, regions, src, par):
    """``sched`` compiled again with lanes ``par`` and considered; None when the lanes pass refuses it or it
    is over the budget."""
    try:
        res = compile_choice(src, regions, order=sched.order, parallel=par)
    except ProgramError:
        return None
    if not _has_lanes(res.program):            # the index has no work below it to split: the same graph
        return None
    fuse, _, variant = sched.fuse.partition("+")
    return consider(fuse, sched.order, res, sched.groups, par, variant)


def _has_lanes(program) -> bool:
    return any(n.spec.lane_role == "merge" for k in program.kernels for n in k.nodes.values())


def _inputs_of_densities(program, densities):
    import numpy as np
    rng = np.random.default_rng(0)
    return {t.name: random_sparse(rng, tuple(t.shape), densities.get(t.name, 1.0)) for t in program.inputs}
