"""Redundancy check: does a fused kernel do more work than the statements it fuses do unfused?

Fusing a producer into its consumer inlines the producer's expression, so its work runs inside the consumer's
loops. When the consumer iterates an index the producer does not have, the producer is recomputed for every
position of that index: ReACT's loop-invariant redundancy (seed 001). The transform-first GCN layer
``A (X W)`` fused into one kernel computes ``X W`` once per nonzero of ``A`` instead of once per row of ``X``.

:func:`find_redundancies` compares every fused kernel's ALU ops and bytes, as the cost model
(:mod:`.cost`) estimates them, with the sum over the same statements compiled unfused (one kernel each); a
kernel over the unfused work by more than :data:`TOLERANCE` (the cost model's error, with
:data:`SLACK_OPS` of absolute slack for toy kernels) is a :class:`Redundancy`, reported in one line. Which
inlined statements it recomputes, and per nonzero of which tensors, is read off the kernel plan: an inlined
statement is recomputed when the kernel iterates indices above it that are not its own.

:func:`compile_checked` compiles a schedule and checks it; with ``rewrite=True`` it removes each
recomputed statement from its fusion group (materialises it: it runs as its own kernel and the fused kernel
reads its result) until no kernel does more work than unfused, and the report says so. :func:`reassociate`
tries the other association of a product chain ``A (X W)`` -> ``(A X) W`` (item 1 of issue 43) and keeps
it when the cost model says it is cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..errors import ProgramError

if TYPE_CHECKING:
    from .codegen import CompileResult

#: relative excess of a fused kernel's estimated ALU ops (or bytes) over unfused that is reported; the cost
#: model's mean FLOPs error is 1.2 % on points of at least 100 FLOPs and 16 % on toy points
#: (docs/evaluation.md), but both sides of the comparison come from the same model, so most of it cancels
TOLERANCE = 0.10
#: absolute ALU ops (and bytes / 8) below which an excess is never reported (toy kernels, sampling noise)
SLACK_OPS = 16.0


@dataclass
class Redundancy:
    """A fused kernel that does more work than its statements unfused (cost model estimates)."""
    kernel: str
    statements: tuple              # the statements (outputs) it fuses
    recomputed: tuple              # inlined statements run under indices that are not theirs
    per: tuple                     # the tensors whose nonzeros (positions) they are recomputed for
    fused_alu: float
    unfused_alu: float
    fused_bytes: float
    unfused_bytes: float
    action: str = ""               # what the compiler did about it ("" : reported only)

    @property
    def alu_ratio(self) -> float:
        return self.fused_alu / self.unfused_alu if self.unfused_alu else float("inf")

    @property
    def bytes_ratio(self) -> float:
        return self.fused_bytes / self.unfused_bytes if self.unfused_bytes else float("inf")

    def line(self) -> str:
        """One line: what is recomputed, how much more work, what to do (or what was done)."""
        what = (f"recomputes {', '.join(self.recomputed)}" if self.recomputed else "does more work than unfused")
        if self.recomputed and self.per:
            what += f" per nonzero of {', '.join(self.per)}"
        if self.fused_alu > self.unfused_alu * (1 + TOLERANCE):
            how = f"{_ratio(self.alu_ratio)} the ALU ops of unfused ({self.fused_alu:,.0f} vs {self.unfused_alu:,.0f})"
        else:
            how = (f"{_ratio(self.bytes_ratio)} the bytes of unfused ({self.fused_bytes:,.0f} vs "
                   f"{self.unfused_bytes:,.0f})")
        todo = self.action or "use --fuse none, --fuse auto or --redundancy rewrite"
        return f"kernel {self.kernel} {what}: {how}; {todo}"

    def __str__(self):
        return self.line()


class FusionRedundancyWarning(UserWarning):
    """A fused kernel does more work than unfused (see :class:`Redundancy`)."""


def _ratio(r: float) -> str:
    return "infinitely many times" if r == float("inf") else f"{r:.1f}x"


def _kernel_costs(result, densities, inputs, memory) -> dict:
    """{kernel name: (ALU ops, bytes)} of a compiled program, estimated."""
    from .cost import estimate
    est = estimate(result.program, densities=densities, inputs=inputs, memory=memory)
    return {k["name"]: (k["alu_ops"], k["read"] + k["write"]) for k in est.kernels}


def _excess(fused: float, unfused: float, scale: float = 1.0) -> bool:
    return fused > unfused * (1 + TOLERANCE) + SLACK_OPS * scale


def recomputed_statements(ir, plan) -> tuple:
    """(recomputed inlined statements, the tensors they are recomputed per) of a fused kernel plan: an inlined
    statement whose work (a reduction or arithmetic) sits below a kernel index that is not one of its own."""
    from .ir import Leaf, is_mask
    by_id = {s.id: s for s in ir.stmts}
    order = list(plan.order or ())
    recomputed, per = [], []
    sink = plan.stmt.id
    for sid, mapping in plan.instances:
        if sid == sink or sid not in by_id:
            continue
        s = by_id[sid]
        if isinstance(s.rhs, Leaf):              # a copy: no work to repeat
            continue
        mine = set(mapping.values())
        reduced = {mapping.get(i, i) for i in s.indices if i not in s.idx}
        # the positions of its work: below its first index in the kernel order
        first = min((order.index(i) for i in (reduced or mine) if i in order), default=None)
        if first is None:
            continue
        above = [i for i in order[:first] if i not in mine]
        if not above or s.lhs in recomputed:
            continue
        recomputed.append(s.lhs)
        outs = {mapping.get(i, i) for i in s.idx}
        for leaf in plan.expr.leaves():
            idx = set(leaf.idx)
            name = "mask" if is_mask(leaf.tensor) else leaf.tensor
            if idx & set(above) and idx & outs and name not in per:
                per.append(name)
    return tuple(recomputed), tuple(per)


def find_redundancies(fused, unfused, densities=None, inputs=None, memory=None) -> list:
    """[:class:`Redundancy`] of the fused kernels of ``fused`` (a CompileResult) against ``unfused`` (the same
    program compiled with ``fuse="none"``), by the cost model on ``densities`` or ``inputs``."""
    from .fusion import KernelPlan
    fk = _kernel_costs(fused, densities, inputs, memory)
    uk = _kernel_costs(unfused, densities, inputs, memory)
    ir = fused.ir
    by_id = {s.id: s for s in ir.stmts}
    out = []
    for plan in fused.plans:
        if not isinstance(plan, KernelPlan) or not plan.inlined or plan.name not in fk:
            continue
        names = [by_id[sid].lhs for sid, _ in plan.instances if sid in by_id]
        names = tuple(dict.fromkeys(names))
        if not all(n in uk for n in names):
            continue                              # a statement the unfused compile names otherwise
        alu, nbytes = fk[plan.name]
        ualu = sum(uk[n][0] for n in names)
        ubytes = sum(uk[n][1] for n in names)
        if _excess(alu, ualu) or _excess(nbytes, ubytes, 8.0):
            rec, per = recomputed_statements(ir, plan)
            out.append(Redundancy(plan.name, names, rec, per, alu, ualu, nbytes, ubytes))
    return out


def fusion_groups(ir, fuse, regions=None) -> list:
    """The statement groups (ids) a schedule fuses: ``regions`` if given, else those of ``fuse``."""
    from .fusion import schedule_groups
    if regions is not None:
        return [list(r) for r in regions]
    if fuse == "regions":
        return [list(r) for r in ir.regions]
    return [g for g in schedule_groups(ir, fuse) if len(g) > 1]


def _without(groups, sids) -> list:
    """``groups`` with the statements ``sids`` taken out; what remains of a group is cut into runs of
    statements that were consecutive in it."""
    out = []
    for g in groups:
        run = []
        for sid in g:
            if sid in sids:
                if len(run) > 1:
                    out.append(run)
                run = []
            else:
                run.append(sid)
        if len(run) > 1:
            out.append(run)
    return out


@dataclass
class Checked:
    """What :func:`compile_checked` returns."""
    result: CompileResult               # the CompileResult kept
    redundancies: list = field(default_factory=list)   # every redundancy found (with what was done about it)
    groups: list | None = None          # the fused groups compiled (None: as the schedule said)
    notes: list = field(default_factory=list)           # one line per rewrite (materialised, reassociated)


def compile_checked(src, fuse="regions", order=None, parallel=None, densities=None, inputs=None, memory=None,
                    rewrite: bool = False, max_rounds: int = 8, passes: dict | None = None,
                    unfused=None) -> Checked:
    """Compile ``src`` at ``fuse`` (``regions``, ``full``) and check every fused kernel against unfused.

    ``rewrite``: remove the redundancies. Two rewrites are tried and the one with fewer estimated cycles kept:
    materialising each recomputed statement (taking it out of its fusion group, again until no kernel is over
    unfused or nothing is left to take out), and, where a recomputed statement is the inner product of a chain
    ``A (X W)``, reassociating the chain as ``(A X) W`` (then materialising what still recomputes). The
    redundancies come back with ``action`` saying what was done. Without ``rewrite`` they are only reported.
    ``passes``: the graph passes' options of every compile (:func:`fuseflow.compiler.compile_program`).
    ``unfused``: the program already compiled at ``fuse="none"`` with the same ``parallel`` and ``passes`` (a caller
    that compiled it for its example data), so it is not compiled twice."""
    from . import compile_program as _compile
    from .lower_sugar import lower_sugar

    def compile_program(*a, **kw):
        return _compile(*a, passes=passes, **kw)
    ir = lower_sugar(src if not hasattr(src, "to_ir") else src.to_ir())
    result = compile_program(ir, fuse=fuse, order=order, parallel=parallel)
    if not any(p.inlined for p in result.kernels):
        return Checked(result)
    if unfused is None:
        unfused = compile_program(ir, fuse="none", parallel=parallel)
    found = find_redundancies(result, unfused, densities, inputs, memory)
    if not found or not rewrite:
        return Checked(result, found)
    args = (order, parallel, densities, inputs, memory, max_rounds, passes)
    original = _cycles(result, densities, inputs, memory)
    best = _materialise(ir, fusion_groups(ir, fuse), result, unfused, found, *args)
    recomputed = {n for r in found for n in r.recomputed}
    todo = [c for c in chains(ir) if c[0].lhs in recomputed]
    if not todo:
        return _no_worse(best, result, found, original, densities, inputs, memory)
    ir2, done = ir, []
    for c in todo:
        now = [x for x in chains(ir2) if x[1].lhs == c[1].lhs]
        if now:
            done.append((now[0][0].lhs, describe_chain(now[0])))
            ir2 = reassociate(ir2, now[0])
    try:
        res2 = compile_program(ir2, fuse=fuse, order=_kept_order(order, ir2), parallel=parallel)
        un2 = compile_program(ir2, fuse="none", parallel=parallel)
    except ProgramError:
        return _no_worse(best, result, found, original, densities, inputs, memory)
    left = find_redundancies(res2, un2, densities, inputs, memory)
    other = _materialise(ir2, fusion_groups(ir2, fuse), res2, un2, left, *args) if left else Checked(res2, [])
    cycles = _cycles(other.result, densities, inputs, memory)
    before = _cycles(best.result, densities, inputs, memory)
    if cycles >= before:
        return _no_worse(best, result, found, original, densities, inputs, memory)
    if cycles >= original:
        return _no_worse(Checked(other.result), result, found, original, densities, inputs, memory, cycles)
    for r in found:
        mine = [d for p, d in done if p in r.recomputed] or [d for _, d in done]
        r.action = (f"reassociated {'; '.join(mine)} (program {cycles:,.0f} estimated cycles, against "
                    f"{before:,.0f} materialising)")
    return Checked(other.result, found + other.redundancies, other.groups,
                   [r.line() for r in found] + other.notes)


def _no_worse(rewritten, result, found, original, densities, inputs, memory, cycles=None) -> Checked:
    """``rewritten`` unless its estimated cycles exceed the original fused program's: then the original, its
    redundancies reported with what the rewrite would have cost (more work, but fewer cycles: fusion's trade)."""
    cycles = _cycles(rewritten.result, densities, inputs, memory) if cycles is None else cycles
    if cycles <= original:
        return rewritten
    for r in found:
        r.action = (f"kept fused: rewriting it would take {cycles:,.0f} estimated cycles against {original:,.0f} "
                    f"(it saves memory traffic)")
    return Checked(result, found)


def _cycles(result, densities, inputs, memory) -> float:
    from .cost import estimate
    return estimate(result.program, densities=densities, inputs=inputs, memory=memory).cycles


def _materialise(ir, groups, result, unfused, found, order, parallel, densities, inputs, memory,
                 max_rounds, passes=None) -> Checked:
    """Take the statements each redundancy recomputes out of their fusion groups, compile again, repeat."""
    from . import compile_program
    by_name = {s.lhs: s.id for s in ir.stmts}
    reported, notes = [], []
    for _ in range(max_rounds):
        if not found:
            break
        take = set()
        for r in found:
            names = r.recomputed or r.statements[:-1] or r.statements   # unexplained: split the kernel
            take |= {by_name[n] for n in names if n in by_name}
        new_groups = _without(groups, take)
        if new_groups == groups:
            break
        try:
            new = compile_program(replace(ir, regions=new_groups), fuse="regions", order=_kept_order(order, ir),
                                  parallel=parallel, passes=passes)
        except ProgramError:
            break
        after = {r2.kernel: r2 for r2 in find_redundancies(new, unfused, densities, inputs, memory)}
        costs = _kernel_costs(new, densities, inputs, memory)
        for r in found:
            names = [n for n in (r.recomputed or r.statements[:-1] or r.statements)]
            now = costs.get(r.kernel, (None,))[0]
            done = f"materialised {', '.join(names)}"
            if now is not None and r.kernel not in after:
                done += f" (kernel {r.kernel} now {now:,.0f} ALU ops)"
            r.action = done
            reported.append(r)
            notes.append(r.line())
        groups, result, found = new_groups, new, list(after.values())
    return Checked(result, reported + found, groups, notes)


def _kept_order(order, ir):
    """A per-kernel order dict keeps only kernels that still exist; a global order stays."""
    if isinstance(order, dict):
        names = {s.lhs for s in ir.stmts}
        return {k: v for k, v in order.items() if k in names} or None
    return order


# ---- contraction order: A (X W) -> (A X) W ------------------------------------------------------------

def _product_leaves(rhs):
    """The two leaves of ``rhs`` when it is a plain product of two tensors, else None."""
    from .ir import Bin, Leaf, Red, is_mask
    if isinstance(rhs, Red) and rhs.op == "sum" and len(rhs.idx) == 1:
        rhs = rhs.body
    if isinstance(rhs, Bin) and rhs.op == "*" and isinstance(rhs.a, Leaf) and isinstance(rhs.b, Leaf) \
            and not is_mask(rhs.a.tensor) and not is_mask(rhs.b.tensor):
        return rhs.a, rhs.b
    return None


def chains(ir) -> list:
    """Product chains ``C = A P`` with ``P = X W`` (both plain products of two tensors, ``P`` an intermediate read
    only by ``C``, contracted over one index in each): [(producer statement, consumer statement, A, X, W leaves,
    A's index kept, the contracted index of C)]."""
    out = []
    for c in ir.stmts:
        lv = _product_leaves(c.rhs)
        if lv is None:
            continue
        for a, p in (lv, lv[::-1]):
            info = ir.tensors.get(p.tensor)
            if info is None or info.role != "intermediate" or len(p.idx) != 2 or len(a.idx) != 2:
                continue
            prod = ir.producer(p.tensor)
            if prod is None or [s.id for s in ir.readers(p.tensor)] != [c.id]:
                continue
            pl = _product_leaves(prod.rhs)
            if pl is None or len(prod.idx) != 2:
                continue
            k = [i for i in p.idx if i not in c.idx]          # contracted between A and P in C
            if len(k) != 1 or k[0] not in a.idx or len(set(c.idx)) != 2:
                continue
            keep = [i for i in a.idx if i != k[0]]
            if len(keep) != 1 or keep[0] not in c.idx:
                continue
            pa = prod.idx[p.idx.index(k[0])]                  # P's index that C contracts, in P's names
            m = [i for i in prod.rhs.all_indices() if i not in prod.idx]
            if len(m) != 1:
                continue
            x, w = pl if pa in pl[0].idx else pl[::-1]
            if pa not in x.idx or m[0] not in x.idx or m[0] not in w.idx or pa in w.idx or len(x.idx) != 2:
                continue
            out.append((prod, c, a, x, w, keep[0], k[0], pa, m[0]))
            break
    return out


def reassociate(ir, chain):
    """``ir`` with the chain ``C = A (X W)`` rewritten as ``Q = A X; C = Q W`` (``Q`` a new intermediate; the
    producer's statement id and fusion region go to ``Q``)."""
    import copy
    from .ir import Bin, Leaf, Red, Stmt, TensorInfo
    prod, c, a, x, w, keep, k, pa, m = chain
    # C's index names: keep (A's row), k (contracted between A and X), fresh m2 for X W's contraction
    used = set(c.indices)
    m2 = next(n for n in ("m", "q", "r", "s", "t", "u", "v") + tuple(f"m{j}" for j in range(99)) if n not in used)
    ren = {pa: k, m: m2}
    pb = [i for i in prod.idx if i != pa][0]
    ren[pb] = [i for i in c.idx if i != keep][0]
    xl = Leaf(x.tensor, [ren[i] for i in x.idx])
    wl = Leaf(w.tensor, [ren[i] for i in w.idx])
    name, n = f"{c.lhs}_{a.tensor}{x.tensor}", 0
    while name in ir.tensors:
        n += 1
        name = f"{c.lhs}_{a.tensor}{x.tensor}{n}"
    dims = {}
    for leaf in (a, xl):
        for i, d in zip(leaf.idx, ir.tensors[leaf.tensor].shape):
            dims[i] = d
    tensors = {t: v for t, v in ir.tensors.items() if t != prod.lhs}
    tensors[name] = TensorInfo(name, (dims[keep], dims[m2]), "intermediate")
    q = Stmt(prod.id, name, (keep, m2), Red("sum", (k,), Bin("*", Leaf(a.tensor, a.idx), xl)), line=c.line,
             segment=c.segment)
    q.text = str(q)
    c2 = copy.copy(c)
    c2.rhs = Red("sum", (m2,), Bin("*", Leaf(name, (keep, m2)), wl))
    c2.text, c2.shown, c2.orders = str(c2), None, []
    stmts = []
    for s in ir.stmts:
        if s.id == prod.id:
            continue
        if s.id == c.id:
            stmts += [q, c2]
        else:
            stmts.append(s)
    # ids in program order (regions list ids in order)
    new_id = {s.id: j for j, s in enumerate(stmts)}
    for s in stmts:
        s2 = s if s in (q, c2) else copy.copy(s)
        stmts[new_id[s.id]] = s2
    regions = []
    for r in ir.regions:
        ids = sorted((new_id[sid] for sid in r if sid in new_id), key=lambda j: j)
        if ids:
            regions.append(ids)
    for j, s in enumerate(stmts):
        s.id = j
    return replace(ir, tensors=tensors, stmts=stmts, regions=regions)


def describe_chain(chain) -> str:
    prod, c, a, x, w = chain[:5]
    return f"{c.lhs} = {a.tensor} ({x.tensor} {w.tensor}) as ({a.tensor} {x.tensor}) {w.tensor}"


def reassociations(src) -> list:
    """[(label, ProgramIR)]: the program with each product chain ``A (X W)`` reassociated as ``(A X) W``
    (one at a time, and all together when there are several)."""
    from .lower_sugar import lower_sugar
    try:
        ir = lower_sugar(src if not hasattr(src, "to_ir") else src.to_ir())
    except ProgramError:
        return []
    found = chains(ir)
    out = []
    for ch in found:
        out.append((f"assoc:{ch[1].lhs}", reassociate(ir, ch)))
    if len(found) > 1:
        cur, names = ir, []
        for ch in found:
            now = [x for x in chains(cur) if x[1].lhs == ch[1].lhs]
            if now:
                cur = reassociate(cur, now[0])
                names.append(ch[1].lhs)
        out.append(("assoc:" + "+".join(names), cur))
    return out
