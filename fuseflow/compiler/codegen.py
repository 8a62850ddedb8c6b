"""Code generation: fusion tables -> SAMML kernels -> one :class:`~fuseflow.samml.Program` (graph.json).

Every kernel plan becomes one kernel. Its fusion table is planned for the selected order, then the output's
cells are evaluated top-down: the level writers pull the output coordinate streams (through the crd_drop
chain that makes the written tensor canonical, see the empty-fibre rule in ``docs/samml.md``) and
the value writer pulls the value stream; every cell builds its node once, so only cells the output needs
become nodes.

Tensors of the program: inputs keep their declared formats; outputs have every level ``compressed`` with the
mode order in which the producing kernel iterates their indices (the canonical rule); intermediates (tensors
written by one kernel and read by a later one) have that mode order and the level formats
:mod:`.intermediates` infers (dense levels where every coordinate is written); permuted copies (``A_T``,
``B_p201``) are compressed with the mode order the fusion pass chose for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..samml import Program
from .fusion import PERMUTED_LEVELS, KernelPlan, TransposePlan, kept_levels
from .tables import Cell, Planner


class KernelBuilder:
    """Adds deferred cells to a :class:`~fuseflow.samml.Kernel` with unique, readable node ids."""

    def __init__(self, kernel):
        self.k = kernel

    def add(self, op, ins, name, params):
        base = re.sub(r"\W", "_", name) or op
        nid, n = base, 1
        while nid in self.k.nodes:
            nid = f"{base}_{n}"
            n += 1
        return self.k.add(op, ins, id=nid, **params)

    def portref(self, handle, port):
        return handle[port]


@dataclass
class CompileResult:
    """What :func:`compile_program` returns."""
    program: Program
    plans: list
    tables: dict = field(default_factory=dict)
    ir: object = None
    reports: dict = field(default_factory=dict)      # pass name -> report (see .passes)

    @property
    def kernels(self):
        return [p for p in self.plans if isinstance(p, KernelPlan)]

    def save(self, path):
        from ..samml import save
        save(self.program, path)


def write_tensor(kb, name, levels, val, formats=None):
    """Level writers (after a crd_drop chain, innermost first) and the value writer of ``name``. ``formats``:
    the level formats (default all compressed); a dense level (a top prefix whose streams hold every coordinate,
    .intermediates) has no writer and no drop below it: its fibres below stay, empty ones included, one per
    coordinate."""
    crds = [c for _, c in levels]
    formats = list(formats or ["compressed"] * len(crds))
    for k in range(len(crds) - 2, -1, -1):
        if formats[k] == "dense":
            continue
        d = Cell("crd_drop", {"outer": crds[k], "inner": crds[k + 1]}, f"drop_{name}{k}")
        crds[k], crds[k + 1] = d["outer"], d["inner"]
    for lv, c in enumerate(crds):
        if formats[lv] == "dense":
            continue
        below_dense = 0 < lv and formats[lv - 1] == "dense"
        Cell("level_write", {"crd": c}, f"write_{name}{lv}", tensor=name, level=lv, format=formats[lv],
             dense_above=True if below_dense else None).build(kb)
    Cell("value_write", {"val": val}, f"write_{name}_vals", tensor=name).build(kb)


def gen_kernel(prog, kp):
    """Plan ``kp`` at its selected order and build its kernel; returns the fusion table."""
    block = next((t.block[0] for t in prog.tensors.values() if t.block), None)
    planner = Planner(kp.expr, kp.out_idx, kp.order, kp.views, kp.leaf_view, kp.sizes, kp.out, block=block)
    levels, val = planner.plan()
    k = prog.kernel(kp.name)
    write_tensor(KernelBuilder(k), kp.out, levels, val, prog.tensors[kp.out].levels)
    planner.table.put("val", kp.out, f"Write({kp.out})")
    return planner.table


def _scan_source(tp):
    """Scanners of every level of a permuted copy's source, outermost first."""
    scans, ref = [], Cell("root", {}, "root")["ref"]
    for lv in range(len(tp.shape)):
        s = Cell("level_scan", {"ref": ref}, f"scan_{tp.src}{lv}", tensor=tp.src, level=lv,
                 format=tp.src_levels[lv])
        scans.append(s)
        ref = s["ref"]
    return scans


def gen_transpose(prog, tp, general=False):
    """A transpose kernel (a permuted copy ``tp.dst`` of ``tp.src``); the cheap kernel for a swap of the two
    innermost levels unless ``general``, else the general one."""
    if tp.cheap and not general:
        return _gen_swap(prog, tp)
    return _gen_permute(prog, tp)


def _hold(crd, inners, name):
    """``crd`` held down through the inner coordinate streams ``inners`` (one crd_hold per level)."""
    for n, inner in enumerate(inners):
        crd = Cell("crd_hold", {"outer": crd, "inner": inner}, f"{name}{n}")["outer"]
    return crd


def _gen_swap(prog, tp):
    """The levels above the two swapped ones are scanned and kept; below them, each entry becomes a
    one-coordinate fibre (a dense scan of size 1) holding the upper swapped coordinate (crd_hold), and an
    order-2 sparse accumulator whose reduced index is the upper swapped level re-sorts every group by
    (lower, upper): one entry per position, so nothing is actually summed."""
    k = prog.kernel(tp.name)
    kb = KernelBuilder(k)
    n = len(tp.shape)
    scans = _scan_source(tp)
    ref = scans[-1]["ref"]
    unit = Cell("level_scan", {"ref": ref}, "unit", format="dense", dim=1)
    upper, lower = scans[n - 2], scans[n - 1]
    held = _hold(upper["crd"], [lower["crd"], unit["crd"]], "hold")
    vals = Cell("array", {"ref": unit["ref"]}, f"vals_{tp.src}", tensor=tp.src)
    outer_dim = tp.shape[tp.src_mode_order[n - 1]]
    inner_dim = tp.shape[tp.src_mode_order[n - 2]]
    acc = Cell("spacc", {"crd_inner": held, "crd_outer0": lower["crd"], "val": vals["val"]},
               "spacc_transpose", order=2, op="sum", dim=int(inner_dim), dim_outer=int(outer_dim))
    levels = [(f"l{lv}", scans[lv]["crd"]) for lv in range(n - 2)]
    levels += [("a", acc["crd_outer0"]), ("b", acc["crd_inner"])]
    write_tensor(kb, tp.dst, levels, acc["val"])


def _gen_permute(prog, tp):
    """A permutation of the k innermost levels of an order-n tensor (k = n up to order 3; above, the n - k
    outer levels the permutation keeps in place stay: :func:`~fuseflow.compiler.fusion.kept_levels`). Every
    source level is scanned (the outer n - k kept, the inner k the reduced levels of the accumulator); below
    them each entry becomes a chain of k one-coordinate fibres (dense scans of size 1, no tensor: the sub-tree
    levels), the d-th carrying the
    coordinate of target level n - k + d held down from its source level (crd_hold); the values are read
    through the last unit scan's references (a dense scan of size 1 maps reference r to r). One ``spacc`` of
    order k with ``group`` k merges everything under one kept coordinate (the whole tensor when k = n) as one
    group and emits it sorted in the target order (every position once: nothing is summed); capacity: the
    product of the k permuted dimensions."""
    k = prog.kernel(tp.name)
    kb = KernelBuilder(k)
    n = len(tp.shape)
    # up to order PERMUTED_LEVELS every level is re-sorted (one group: the whole tensor)
    p = 0 if n <= PERMUTED_LEVELS else kept_levels(tp.src_mode_order, tp.dst_mode_order)
    m = n - p
    if not 2 <= m <= PERMUTED_LEVELS:
        raise ValueError(f"a permuted copy re-sorts 2 to {PERMUTED_LEVELS} innermost levels, not {m}")
    scans = _scan_source(tp)
    ref = scans[-1]["ref"]
    units = []
    for d in range(m):
        u = Cell("level_scan", {"ref": ref}, f"unit{d}", format="dense", dim=1)
        units.append(u)
        ref = u["ref"]
    inners = [s["crd"] for s in scans] + [u["crd"] for u in units]
    sub = []
    for d, dim in enumerate(tp.dst_mode_order[p:]):
        lv = list(tp.src_mode_order).index(dim)
        sub.append(_hold(scans[lv]["crd"], inners[lv + 1:n + d + 1], f"hold{d}_"))
    vals = Cell("array", {"ref": ref}, f"vals_{tp.src}", tensor=tp.src)
    dims = [int(tp.shape[d]) for d in tp.dst_mode_order[p:]]
    inputs = {"crd_inner": sub[-1], "val": vals["val"]}
    params = {"order": m, "group": m, "op": "sum", "dim": dims[-1]}
    for j in range(m - 1):                   # crd_outer0 is the level just above crd_inner
        inputs[f"crd_outer{j}"] = sub[m - 2 - j]
        params["dim_outer" if j == 0 else f"dim_outer{j}"] = dims[m - 2 - j]
    acc = Cell("spacc", inputs, "spacc_permute", **params)
    levels = [(f"l{lv}", scans[lv]["crd"]) for lv in range(p)]
    levels += [(f"l{p + d}", acc[f"crd_outer{m - 2 - d}"]) for d in range(m - 1)]
    levels += [(f"l{n - 1}", acc["crd_inner"])]
    write_tensor(kb, tp.dst, levels, acc["val"])


def _element_shape(t):
    """A tensor's shape in elements (the blocks pass counts a blocked tensor's shape in blocks)."""
    return [int(n) * (t.block or 1) for n in t.shape]


def _block(t):
    return [t.block] * t.order if t.block else None


def generate_program(ir, plans, name=None, general_transposes=False):
    """The SAMML program of a list of plans (in execution order) and {kernel: fusion table}, before the graph
    passes (the ``codegen`` stage of :data:`fuseflow.compiler.passes.PIPELINE`). ``general_transposes`` builds
    every permuted copy with the general kernel (tests)."""
    prog = Program(name or ir.name, expr=ir.expr_text())
    written = {}
    for p in plans:
        if isinstance(p, KernelPlan):
            written[p.out] = p.mode_order
        else:
            written[p.dst] = p.dst_mode_order
    for t in ir.tensors.values():
        if t.role == "input":
            used = any(l.tensor == t.name for s in ir.stmts for l in s.rhs.leaves())
            if used:
                prog.tensor(t.name, "input", _element_shape(t), list(t.levels), list(t.mode_order),
                            density=t.density, block=_block(t))
    for t in ir.tensors.values():
        if t.role != "input" and t.name in written:
            # outputs: the canonical form; intermediates: the formats .intermediates inferred
            levels = list(t.levels) if t.role == "intermediate" and t.levels else ["compressed"] * t.order
            prog.tensor(t.name, t.role, _element_shape(t), levels, list(written[t.name]), block=_block(t))
    for p in plans:
        if isinstance(p, TransposePlan):
            prog.tensor(p.dst, "intermediate", list(p.shape), ["compressed"] * len(p.shape),
                        list(p.dst_mode_order))
    tables = {}
    for p in plans:
        if isinstance(p, KernelPlan):
            tables[p.name] = gen_kernel(prog, p)
        else:
            gen_transpose(prog, p, general_transposes)
    return prog, tables
