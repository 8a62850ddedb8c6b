"""Cross-expression fusion (Algorithm 1) and schedules.

For every kernel the compiler

1. gives the reduction indices of every statement instance fresh names (the original name when it is
   still free, else ``k2``, ``k3`` ...);
2. inlines producers into consumers (statements of the same fusion group whose results are read later
   in the group), substituting the producer's left-hand indices by the consumer's;
3. gives every use of a tensor a *view* (tensor + index map, with the mode order of its storage) and merges
   equal views (same tensor, same index map: same mode-order sequence);
4. builds the partial-order graph (a networkx DiGraph over index variables) from the views' storage orders,
   the statements' ``order`` lines (through the renaming) and the command line's ``--order``;
5. breaks cycles: a cycle through an inlined producer's order un-inlines (materialises) that producer;
   a storage-order conflict between views gets a permuted copy of an order-2 or order-3 tensor (a
   transpose kernel, any target mode order) for one view; a cycle through the user's orders and an
   input's storage order is an unsatisfiable order;
6. enumerates the topological sorts deterministically (index rank: output indices, then first use),
   keeps those the fusion-table planner can lower (:func:`.tables.check_order`), caps the enumeration,
   and selects the first valid order (or the only one the user's constraints allow).

Schedules (fusion granularity) decide the groups: ``none`` (every statement its own kernel), ``regions``
(the program's ``fuse { }`` regions; other statements alone) and ``full`` (all statements one group).
A group yields one kernel per *sink* (a statement whose result is an output or is read after the group).

The plans are then checked against the program: :func:`check_block_plans` refuses a permuted copy of a blocked
tensor, and :func:`resolve_parallel` finds the kernels (and their levels) that the ``parallel`` schedule names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import networkx as nx

from ..errors import ProgramError
from ..samml.registry import SPACC_ORDERS
from .ir import MAX_TENSOR_ORDER, Bin, Fn, Leaf, Lit, ProgramIR, Red, Stmt, TensorInfo, push_masks, rename, to_text
from .intermediates import infer_levels
from .lower_sugar import lower_sugar
from .tables import check_order

SCHEDULES = ("none", "regions", "full")
DEFAULT_MAX_ORDERS = 1000
#: a permuted copy re-sorts at most this many innermost levels of its tensor (one sparse accumulator of that
#: order, per coordinate of the levels above); the levels above stay in place
PERMUTED_LEVELS = max(SPACC_ORDERS)
SCAN_LIMIT = 20000          # sorts examined when listing the valid orders (--list-orders)
# sorts examined when looking for the first valid order before a fallback (materialisation) is taken: over
# 400 random programs (tests/compiler/compiler_randprog.py) x 3 granularities, 3617 kernels with a valid order,
# it was the first sort for all but one (the 17th), and the first sort in every example program; a kernel
# without one costs about 1.7 ms per sort (decoder.ff at full: 3.5 s with 2000 sorts, 0.35 s with 200)
FIRST_SCAN_LIMIT = 200


@dataclass
class View:
    """One view of a tensor: the tensor (or its permuted copy) read with an index map."""
    key: tuple
    tensor: str
    idx: tuple
    source: str
    levels: tuple
    mode_order: tuple
    permuted: bool = False

    @property
    def level_idx(self):
        """The index variable at each storage level (outer to inner)."""
        return tuple(self.idx[d] for d in self.mode_order)

    @property
    def label(self):
        name = self.source if self.permuted else self.tensor
        return f"{name}({','.join(self.idx)})"


@dataclass
class KernelPlan:
    """A fused kernel: the sink statement with its producers inlined, views, POG and chosen order."""
    name: str
    stmt: object
    out: str
    out_idx: tuple
    expr: object
    views: dict
    leaf_view: dict
    sizes: dict
    pog: nx.DiGraph
    rank: dict
    inlined: list
    instances: list
    order: tuple = None
    mode_order: tuple = None
    notes: list = field(default_factory=list)
    kind: str = "expr"

    def indices(self):
        return list(self.pog.nodes)

    def orders(self, limit=DEFAULT_MAX_ORDERS):
        """(valid orders, capped?) in the deterministic enumeration order."""
        return valid_orders(self, limit)

    def describe(self):
        parts = [f"{self.out}({','.join(self.out_idx)}) = {_text(self.expr)}"]
        return parts[0]


@dataclass
class TransposePlan:
    """A permuted copy of a tensor (a transpose kernel): stored with ``dst_mode_order`` (a permutation that
    keeps all but at most :data:`PERMUTED_LEVELS` innermost levels in place: :func:`is_realizable_permutation`;
    ``cheap`` when it swaps the two innermost levels)."""
    name: str
    src: str
    dst: str
    shape: tuple
    src_levels: tuple
    src_mode_order: tuple
    dst_mode_order: tuple
    kind: str = "transpose"
    notes: list = field(default_factory=list)

    @property
    def cheap(self):
        return is_cheap_permutation(self.src_mode_order, self.dst_mode_order)


def _text(node):
    return to_text(node)


# ---- schedules ------------------------------------------------------------------------------------

def schedule_groups(ir, fuse):
    """Fusion groups (lists of statement ids) for a schedule."""
    if fuse not in SCHEDULES:
        raise ProgramError("--fuse", f"unknown schedule {fuse!r} (expected {', '.join(SCHEDULES)})")
    ids = [s.id for s in ir.stmts]
    if fuse == "none":
        return [[i] for i in ids]
    if fuse == "full":
        # everything between barriers (a barrier is never inside a region, so regions keep to one segment)
        by_segment = {}
        for s in ir.stmts:
            by_segment.setdefault(s.segment, []).append(s.id)
        return [by_segment[k] for k in sorted(by_segment)]
    groups, seen = [], set()
    region_of = {sid: n for n, r in enumerate(ir.regions) for sid in r}
    for sid in ids:
        if sid in seen:
            continue
        if sid in region_of:
            g = list(ir.regions[region_of[sid]])
        else:
            g = [sid]
        seen.update(g)
        groups.append(g)
    return groups


# ---- inlining --------------------------------------------------------------------------------------

def _fresh(name, used):
    if name not in used:
        return name
    n = 2
    while f"{name}{n}" in used:
        n += 1
    return f"{name}{n}"


def _uniquify(stmt):
    """The statement's rhs with every reduction index unique within the statement (sum[k]()+sum[k]())."""
    used = set(stmt.idx)
    mapping_first = {}

    def walk(node, env):
        if isinstance(node, Leaf):
            return Leaf(node.tensor, tuple(env.get(i, i) for i in node.idx), stmt.id)
        if isinstance(node, Lit):
            return Lit(node.value)
        if isinstance(node, Bin):
            return Bin(node.op, walk(node.a, env), walk(node.b, env))
        if isinstance(node, Fn):
            return Fn(node.fn, walk(node.a, env))
        if isinstance(node, Red):
            env2 = dict(env)
            new = []
            for r in node.idx:
                f = _fresh(r, used)
                used.add(f)
                mapping_first.setdefault(r, f)
                env2[r] = f
                new.append(f)
            return Red(node.op, tuple(new), walk(node.body, env2))
        raise TypeError(node)
    return walk(stmt.rhs, {}), mapping_first


def instantiate(ir, stmt, target_idx, used, inline_ids):
    """The statement's rhs in the consumer's namespace: lhs indices -> ``target_idx``, reductions fresh,
    producers in ``inline_ids`` inlined recursively. Returns (expr, instances) where each instance is
    (stmt id, {local index: fused index})."""
    rhs, first = _uniquify(stmt)
    mapping = dict(zip(stmt.idx, target_idx))
    for r in _reduced_in_order(rhs):
        mapping[r] = _fresh(r, used)
        used.add(mapping[r])
    expr = rename(rhs, mapping, stmt.id)
    local = dict(zip(stmt.idx, target_idx))
    for r, f in first.items():
        local[r] = mapping[f]
    instances = [(stmt.id, local)]

    def sub(node):
        if isinstance(node, Leaf):
            prod = ir.producer(node.tensor)
            if prod is not None and prod.id in inline_ids:
                e, inst = instantiate(ir, prod, node.idx, used, inline_ids)
                instances.extend(inst)
                return e
            return node
        if isinstance(node, Lit):
            return node
        if isinstance(node, Bin):
            return Bin(node.op, sub(node.a), sub(node.b))
        if isinstance(node, Fn):
            return Fn(node.fn, sub(node.a))
        if isinstance(node, Red):
            return Red(node.op, node.idx, sub(node.body))
        raise TypeError(node)
    return sub(expr), instances


def _reduced_in_order(node):
    out = []
    for n in node.walk():
        if isinstance(n, Red):
            out += [i for i in n.idx if i not in out]
    return out


def _replace_hoisted(node, hoisted):
    if isinstance(node, Red):
        hit = hoisted.get(_text(node))
        if hit is not None:
            return Leaf(hit[0], hit[1], node.body.leaves()[0].stmt if node.body.leaves() else None)
        return Red(node.op, node.idx, _replace_hoisted(node.body, hoisted))
    if isinstance(node, Bin):
        return Bin(node.op, _replace_hoisted(node.a, hoisted), _replace_hoisted(node.b, hoisted))
    if isinstance(node, Fn):
        return Fn(node.fn, _replace_hoisted(node.a, hoisted))
    return node


def globalize(expr):
    """Global iteration (prior work, Figure 5a): a sum of products with nested sums becomes one sum over
    every reduction index of one product. Returns None when the expression is not a sum of products."""
    leaves, rd = [], []

    def walk(node):
        if isinstance(node, (Leaf, Lit)):
            leaves.append(node)
            return True
        if isinstance(node, Bin) and node.op == "*":
            return walk(node.a) and walk(node.b)
        if isinstance(node, Red) and node.op == "sum":
            rd.extend(i for i in node.idx if i not in rd)
            return walk(node.body)
        return False
    if not walk(expr) or not rd:
        return None
    prod = leaves[0]
    for l in leaves[1:]:
        prod = Bin("*", prod, l)
    return Red("sum", tuple(rd), prod)


# ---- kernels ----------------------------------------------------------------------------------------

class Compiler:
    """Builds the kernel plans of a program for one schedule (see :func:`plan_program`)."""

    def __init__(self, ir, fuse="regions", order=None, iteration="factored"):
        import copy
        ir = copy.copy(ir)                  # hoisting adds temporaries: keep the caller's IR intact
        ir.tensors = {k: copy.copy(v) for k, v in ir.tensors.items()}
        ir.stmts = list(ir.stmts)
        self.ir, self.fuse = ir, fuse
        if isinstance(order, dict):
            self.kernel_orders = {k: tuple(v) for k, v in order.items()}
            self.cli_order = ()
        else:
            self.kernel_orders = {}
            self.cli_order = tuple(order) if order else ()
        self.iteration = iteration
        self.groups = schedule_groups(ir, fuse)
        self.group_of = {sid: n for n, g in enumerate(self.groups) for sid in g}
        self.layouts = {}          # written tensor -> mode order of its storage
        self.hoisted = {}          # text of a materialised reduction -> (temporary, its indices)
        self.copies = {}           # tensor -> name of its transposed copy
        self.plans = []
        self.kernel_names = set()
        if self.cli_order:
            if len(set(self.cli_order)) != len(self.cli_order):
                raise ProgramError("--order", f"repeats an index: {','.join(self.cli_order)}")

    def is_sink(self, stmt):
        if self.ir.tensors[stmt.lhs].role == "output":
            return True
        g = self.group_of[stmt.id]
        return any(self.group_of[r.id] != g for r in self.ir.readers(stmt.lhs))

    def run(self):
        for s in self.ir.stmts:
            if self.is_sink(s) and s.lhs not in self.layouts:
                self.compile_sink(s, set(self.groups[self.group_of[s.id]]))
        if self.cli_order:
            names = set()
            for p in self.plans:
                if isinstance(p, KernelPlan):
                    names |= set(p.pog.nodes)
            unknown = [i for i in self.cli_order if i not in names]
            if unknown:
                raise ProgramError("--order", f"index {unknown[0]} is not an index of any kernel (indices: "
                                              f"{', '.join(sorted(names))})")
        outs = [p.out for p in self.plans if isinstance(p, KernelPlan)]
        unknown = [k for k in self.kernel_orders if k not in outs]
        if unknown:
            raise ProgramError("--order", f"no kernel writes {unknown[0]} (kernels: {', '.join(outs)})")
        return self.plans

    def compile_sink(self, stmt, group, uninline=()):
        uninline = set(uninline)
        permute = {}               # view key -> mode order of the permuted copy it reads
        notes = []
        for _attempt in range(64):
            allowed = {sid for sid in group if sid != stmt.id and sid not in uninline}
            for sid in sorted(uninline):
                lhs = self.ir.stmts[sid].lhs
                if lhs not in self.layouts:
                    self.compile_sink(self.ir.stmts[sid], group)
            kp = self.build(stmt, allowed, permute)
            action = self.resolve_cycles(kp)
            user_cycle = None
            if action is None and kp.cli_edges:
                # the --order constraints come last: the fusion decisions do not depend on them, so every
                # order --list-orders prints can be given back with --order (see below)
                free_pog = kp.pog.copy()
                for a, b in kp.cli_edges:
                    _add_label(kp.pog, a, b, ("cli",))
                try:
                    user_cycle = nx.find_cycle(kp.pog)
                except nx.NetworkXNoCycle:
                    pass
            if action is not None:
                kind, what, why = action
                if kind == "uninline":
                    uninline.add(what)
                    notes.append(f"materialised {self.ir.stmts[what].lhs}: {why}")
                else:
                    key, target = what
                    permute[key] = target
                    notes.append(f"permuted copy of {key[0]} (mode order {','.join(map(str, target))}) for view "
                                 f"{key[0]}({','.join(key[1])}): {why}")
                continue
            if user_cycle is not None:
                first, reason, red = None, None, None
            else:
                first, reason, red = first_valid(kp)
            if first is None and kp.cli_edges:
                # the kernel without the user's order: when it has no valid order either, take the fallback
                # it would take (materialise) so that the user's order meets the same final kernel as
                # --list-orders; when it has one, the user's order is what fails
                cli_pog, kp.pog = kp.pog, free_pog
                free_first, free_reason, free_red = first_valid(kp)
                kp.pog = cli_pog
                if free_first is None:
                    reason, red = free_reason, free_red
                elif user_cycle is not None:
                    self._fail_cycle(kp, kp.pog, user_cycle)
            if first is None:
                inl = sorted(kp.inlined)
                owners = {l.stmt for l in red.leaves()} if red is not None else set()
                if red is not None and red is not kp.expr and not (len(owners) == 1 and owners <= set(inl)):
                    tmp = self.hoist(stmt, red)
                    notes.append(f"materialised {_text(red)} as {tmp}: no dataflow order can lower it inside "
                                 f"{stmt.lhs} ({reason})")
                    continue
                if len(owners) == 1 and owners <= set(inl):
                    inl = sorted(owners)
                if inl:
                    uninline.add(inl[-1])
                    notes.append(f"materialised {self.ir.stmts[inl[-1]].lhs}: no fused dataflow order can be "
                                 f"lowered ({reason})")
                    continue
                raise ProgramError(f"line {stmt.line}", f"no valid dataflow order for {stmt.lhs}: {reason}")
            kp.order = first
            kp.mode_order = tuple(kp.out_idx.index(x) for x in first if x in kp.out_idx)
            kp.notes = notes
            break
        else:
            raise ProgramError(f"line {stmt.line}", f"cannot fuse {stmt.lhs}: too many fusion attempts")
        kp.name = self.kernel_name(stmt.lhs)
        self.add_transposes(kp)
        self.plans.append(kp)
        self.layouts[stmt.lhs] = kp.mode_order
        t = self.ir.tensors[stmt.lhs]
        if t.role == "intermediate" and not any(x.block for x in self.ir.tensors.values()):
            readers = [r.text or r.lhs for r in self.ir.readers(stmt.lhs)]
            t.levels, why = infer_levels(kp, readers)     # this IR copy's: generate_program declares it so
            kp.notes = list(kp.notes) + why
        return kp

    def hoist(self, stmt, red):
        """Materialise the reduction ``red`` (a sub-expression of ``stmt``'s fused tree) as a temporary
        tensor written by its own kernel; later builds of ``stmt`` read the temporary instead."""
        n = 1
        while f"{stmt.lhs}_t{n}" in self.ir.tensors:
            n += 1
        name = f"{stmt.lhs}_t{n}"
        shape = []
        sizes = {}
        for leaf in red.leaves():
            for i, d in zip(leaf.idx, self.ir.tensors[leaf.tensor].shape):
                sizes[i] = d
        shape = tuple(sizes[i] for i in red.free)
        if len(shape) > MAX_TENSOR_ORDER:
            raise ProgramError(f"line {stmt.line}", f"cannot lower {stmt.lhs}: its reduction {_text(red)} would "
                                                    f"need a temporary of order {len(shape)} (at most "
                                                    f"{MAX_TENSOR_ORDER} is supported)")
        self.ir.tensors[name] = TensorInfo(name, shape, "intermediate", line=stmt.line)
        tmp = Stmt(len(self.ir.stmts), name, tuple(red.free), red, stmt.line, f"{name}(...) = {_text(red)}")
        tmp.synthetic, tmp.segment = True, stmt.segment
        self.ir.stmts.append(tmp)
        self.group_of[tmp.id] = self.group_of[stmt.id]
        self.compile_sink(tmp, set())
        self.hoisted[_text(red)] = (name, tuple(red.free))
        return name

    def add_transposes(self, kp):
        for v in kp.views.values():
            if v.permuted and not any(isinstance(p, TransposePlan) and p.dst == v.source for p in self.plans):
                t = self.ir.tensors[v.tensor]
                src_levels, src_mo = self.storage(v.tensor)
                self.plans.append(TransposePlan(self.kernel_name(f"transpose_{v.tensor}"), v.tensor, v.source,
                                                tuple(t.shape), tuple(src_levels), tuple(src_mo),
                                                tuple(v.mode_order)))

    def storage(self, tensor):
        t = self.ir.tensors[tensor]
        if t.role in ("input", "mask"):
            return t.levels, t.mode_order
        if tensor not in self.layouts:
            raise ProgramError(f"line {t.line}", f"{tensor} is read before a kernel writes it")
        if t.role == "intermediate" and t.levels:        # inferred in compile_sink (.intermediates)
            return tuple(t.levels), self.layouts[tensor]
        return ("compressed",) * t.order, self.layouts[tensor]

    def build(self, stmt, allowed, permute):
        used = set(stmt.idx)
        expr, instances = instantiate(self.ir, stmt, stmt.idx, used, allowed)
        if self.hoisted:
            expr = _replace_hoisted(expr, self.hoisted)
        expr = push_masks(expr)              # inlining can put a mask beside a producer's reduction
        if self.iteration == "global":
            g = globalize(expr)
            if g is None:
                raise ProgramError(f"line {stmt.line}", "global iteration needs a sum of products")
            expr = g
        inlined = sorted({sid for sid, _ in instances if sid != stmt.id})
        views, leaf_view, sizes = {}, {}, {}
        for leaf in expr.leaves():
            key = (leaf.tensor, leaf.idx)
            t = self.ir.tensors[leaf.tensor]
            for i, d in zip(leaf.idx, t.shape):
                sizes[i] = d
            if key not in views:
                levels, mo = self.storage(leaf.tensor)
                if key in permute:
                    mo2 = tuple(permute[key])
                    src = self.copy_name(leaf.tensor, mo2)
                    views[key] = View(key, leaf.tensor, leaf.idx, src, ("compressed",) * t.order, mo2, True)
                else:
                    views[key] = View(key, leaf.tensor, leaf.idx, leaf.tensor, tuple(levels), tuple(mo))
            leaf_view[id(leaf)] = key
        g = nx.DiGraph()
        rank = {}
        for i in list(stmt.idx) + expr.all_indices():
            if i not in rank:
                rank[i] = len(rank)
                g.add_node(i)

        def edge(u, v, label):
            if g.has_edge(u, v):
                g[u][v]["labels"].append(label)
            else:
                g.add_edge(u, v, labels=[label])
        for key, v in views.items():
            li = v.level_idx
            for a, b in zip(li, li[1:]):
                edge(a, b, ("view", key))
        for sid, local in instances:
            st = self.ir.stmts[sid]
            for chain in st.orders:
                mapped = [local[i] for i in chain if i in local]
                for a, b in zip(mapped, mapped[1:]):
                    edge(a, b, ("order", sid))
        chain = self.kernel_orders.get(stmt.lhs, self.cli_order)
        if chain:
            unknown = [i for i in chain if i not in rank]
            if stmt.lhs in self.kernel_orders and unknown:
                raise ProgramError("order", f"index {unknown[0]} is not an index of kernel {stmt.lhs} (indices: "
                                            f"{', '.join(rank)})")
            chain = [i for i in chain if i in rank]
        cli_edges = list(zip(chain, chain[1:])) if chain else []
        kp = KernelPlan(stmt.lhs, stmt, stmt.lhs, tuple(stmt.idx), expr, views, leaf_view, sizes, g, rank, inlined,
                        instances)
        kp.cli_edges = cli_edges
        return kp

    def kernel_name(self, base):
        name = base
        n = 2
        while name in self.kernel_names:
            name = f"{base}_{n}"
            n += 1
        self.kernel_names.add(name)
        return name

    def copy_name(self, tensor, mode_order):
        """The permuted copy of ``tensor`` stored with ``mode_order`` (``A_T`` for a transposed matrix)."""
        key = (tensor, tuple(mode_order))
        if key not in self.copies:
            base = f"{tensor}_T" if len(mode_order) == 2 else f"{tensor}_p{''.join(map(str, mode_order))}"
            name = base
            n = 2
            while name in self.ir.tensors or name in self.copies.values():
                name = f"{base}{n}"
                n += 1
            self.copies[key] = name
        return self.copies[key]

    def resolve_cycles(self, kp):
        """None if the POG is acyclic, else an action ('uninline', stmt id, why) or ('permute', key, why);
        raises ProgramError when the cycle cannot be broken."""
        try:
            cycle = nx.find_cycle(kp.pog)
        except nx.NetworkXNoCycle:
            return None
        labels = []
        for u, v in cycle:
            for lab in kp.pog[u][v]["labels"]:
                labels.append((u, v, lab))
        path = " -> ".join([cycle[0][0]] + [v for _, v in cycle])
        prods = sorted({lab[1] for _, _, lab in labels if lab[0] == "order" and lab[1] != kp.stmt.id},
                       reverse=True)
        why = f"the order constraints form a cycle {path}"
        if prods:
            return ("uninline", prods[0], why)
        # storage-order conflicts: keep every constraint that cannot move (user orders, views of tensors
        # that cannot be transposed) and add the movable views one by one in order of use; the first view
        # whose constraints close a cycle reads a permuted copy (the paper's "permuted copy for one of the
        # views"), unless the cycle goes through a user order and the view is an input (then the user's
        # order is what cannot be met)
        movable = [k for k in _keys_in_use_order(kp) if self.permutable(kp, k)]
        hard = nx.DiGraph()
        hard.add_nodes_from(kp.pog.nodes)
        soft = {}
        for u, v, data in kp.pog.edges(data=True):
            for lab in data["labels"]:
                if lab[0] == "view" and lab[1] in movable:
                    soft.setdefault(lab[1], []).append((u, v))
                else:
                    _add_label(hard, u, v, lab)
        try:
            cyc = nx.find_cycle(hard)
        except nx.NetworkXNoCycle:
            cyc = None
        if cyc is not None:
            prods = sorted({lab[1] for a, b in cyc for lab in hard[a][b]["labels"]
                            if lab[0] == "order" and lab[1] != kp.stmt.id}, reverse=True)
            if prods:
                path = " -> ".join([cyc[0][0]] + [b for _, b in cyc])
                return ("uninline", prods[0], f"the order constraints form a cycle {path}")
            self._fail_cycle(kp, hard, cyc)
        accepted = []

        def graph(keys, extra=()):
            g = hard.copy()
            for k in keys:
                for u, v in soft.get(k, []):
                    _add_label(g, u, v, ("view", k))
            for u, v, lab in extra:
                _add_label(g, u, v, lab)
            return g

        for key in movable:
            trial = graph(accepted + [key])
            try:
                cyc = nx.find_cycle(trial)
            except nx.NetworkXNoCycle:
                accepted.append(key)
                continue
            labs = [lab for a, b in cyc for lab in trial[a][b]["labels"]]
            path = " -> ".join([cyc[0][0]] + [b for _, b in cyc])
            user = any(lab[0] in ("order", "cli") for lab in labs)
            in_cycle = [lab[1] for lab in labs if lab[0] == "view" and lab[1] in movable]
            # the conflicting view first, then the views it conflicts with (latest first)
            for cand in [key] + [k for k in reversed(accepted) if k in in_cycle]:
                if user and self.ir.tensors[cand[0]].role == "input":
                    continue
                rest = [k for k in accepted + [key] if k != cand]
                target = choose_permutation(kp.views[cand], graph(rest), kp.rank)
                if target is not None:
                    return ("permute", (cand, target), f"the order constraints form a cycle {path}")
            if user and self.ir.tensors[key[0]].role == "input":
                self._fail_cycle(kp, trial, cyc)
            detail = "; ".join(_describe_label(self.ir, a, b, lab) for a, b in cyc for lab in trial[a][b]["labels"])
            big = sorted({lab[1][0] for lab in labs if lab[0] == "view"
                          and self.ir.tensors[lab[1][0]].order > PERMUTED_LEVELS})
            hint = (f"; a permuted copy re-sorts at most the {PERMUTED_LEVELS} innermost levels of a tensor: "
                    f"declare {' or '.join(big)} in the storage order the other uses need" if big else "")
            raise ProgramError(f"line {kp.stmt.line}", f"the storage orders conflict (cycle {path}) and no "
                                                       f"permuted copy of the views in it breaks it{hint} "
                                                       f"({detail})")
        raise AssertionError("cycle not found again")

    def _fail_cycle(self, kp, g, cyc):
        labels = [(a, b, lab) for a, b in cyc for lab in g[a][b]["labels"]]
        path = " -> ".join([cyc[0][0]] + [b for _, b in cyc])
        detail = "; ".join(_describe_label(self.ir, u, v, lab) for u, v, lab in labels)
        raise ProgramError(f"line {kp.stmt.line}", f"unsatisfiable dataflow order for {kp.out}: the order "
                                                   f"constraints form a cycle {path} ({detail})")

    def permutable(self, kp, key):
        """Can this view read a permuted copy? Tensors of order 2 and more (the copy re-sorts at most
        :data:`PERMUTED_LEVELS` innermost levels), inputs or written by an earlier kernel, when the view does
        not already read one."""
        t = self.ir.tensors[key[0]]
        if t.order < 2 or t.role == "mask":
            return False                     # a coordinate mask has no data to copy: its row index leads
        return key not in {v.key for v in kp.views.values() if v.permuted}


def permuted_order(mode_order):
    """The cheap permuted copy of a storage order: its two innermost levels swapped (order 2: reversed; one
    sparse accumulator of order 2 per coordinate of the levels above). Other permutations are built by the
    general transpose kernel."""
    mo = tuple(mode_order)
    if len(mo) < 2:
        raise ValueError(mo)
    return mo[:-2] + (mo[-1], mo[-2])


def is_cheap_permutation(src_mode_order, dst_mode_order):
    """True when ``dst`` is the cheap permuted copy of ``src`` (its two innermost levels swapped)."""
    return len(src_mode_order) >= 2 and tuple(dst_mode_order) == permuted_order(src_mode_order)


def kept_levels(src_mode_order, dst_mode_order):
    """How many outer levels a permuted copy keeps in place (the common prefix of the two storage orders)."""
    p = 0
    while p < len(src_mode_order) and src_mode_order[p] == dst_mode_order[p]:
        p += 1
    return p


def is_realizable_permutation(src_mode_order, dst_mode_order):
    """Can a transpose kernel build this copy? It re-sorts at most :data:`PERMUTED_LEVELS` innermost levels."""
    return len(src_mode_order) - kept_levels(src_mode_order, dst_mode_order) <= PERMUTED_LEVELS


def permutation_candidates(view, g, rank):
    """Target mode orders for a permuted copy read by ``view``, deterministically: the cheap one (order-2
    transpose, order-3 inner swap), then the view's indices in the first topological order of ``g`` (the
    POG without the view's storage constraints), then every other permutation."""
    import itertools
    n = len(view.mode_order)
    out = [permuted_order(view.mode_order)]
    if nx.is_directed_acyclic_graph(g):
        first = next(topological_sorts(g, rank), None)
        if first is not None:
            pos = {x: p for p, x in enumerate(first)}
            out.append(tuple(sorted(range(n), key=lambda d: pos.get(view.idx[d], len(pos)))))
    out += list(itertools.permutations(range(n)))
    seen, res = {tuple(view.mode_order)}, []
    for t in out:
        if t not in seen and is_realizable_permutation(view.mode_order, t):
            seen.add(t)
            res.append(t)
    return res


def choose_permutation(view, g, rank):
    """The first candidate target mode order (:func:`permutation_candidates`) whose storage constraints
    keep ``g`` acyclic, or None (``g`` itself has a cycle)."""
    if not nx.is_directed_acyclic_graph(g):
        return None
    for target in permutation_candidates(view, g, rank):
        li = [view.idx[d] for d in target]
        g2 = g.copy()
        for a, b in zip(li, li[1:]):
            _add_label(g2, a, b, ("view", view.key))
        if nx.is_directed_acyclic_graph(g2):
            return tuple(target)
    return None


def _keys_in_use_order(kp):
    out = []
    for leaf in kp.expr.leaves():
        k = kp.leaf_view[id(leaf)]
        if k not in out:
            out.append(k)
    return out


def _add_label(g, u, v, lab):
    if g.has_edge(u, v):
        g[u][v]["labels"].append(lab)
    else:
        g.add_edge(u, v, labels=[lab])


def _describe_label(ir, u, v, lab):
    if lab[0] == "view":
        t = ir.tensors[lab[1][0]]
        fmt = t.format_name if t.role == "input" else ("coordinate mask: row first" if t.role == "mask" else
                                                       "written")
        return f"{u} before {v} from the storage order of {lab[1][0]}({','.join(lab[1][1])}) [{fmt}]"
    if lab[0] == "order":
        st = ir.stmts[lab[1]]
        return f"{u} before {v} from the order of {st.lhs} (line {st.line})"
    return f"{u} before {v} from --order"


# ---- orders -------------------------------------------------------------------------------------------

def topological_sorts(g, rank):
    """Every topological sort of ``g``, deterministically (smallest rank first at every step)."""
    nodes = sorted(g.nodes, key=rank.get)
    indeg = {n: g.in_degree(n) for n in nodes}
    seq, used = [], set()
    total = len(nodes)

    def rec():
        if len(seq) == total:
            yield tuple(seq)
            return
        for v in [n for n in nodes if indeg[n] == 0 and n not in used]:
            used.add(v)
            seq.append(v)
            for w in g.successors(v):
                indeg[w] -= 1
            yield from rec()
            for w in g.successors(v):
                indeg[w] += 1
            seq.pop()
            used.discard(v)
    return rec()


def _check(kp, order):
    return check_order(kp.expr, kp.out_idx, order, kp.views, kp.leaf_view, kp.sizes)


def first_valid(kp, scan_limit=FIRST_SCAN_LIMIT):
    """(first valid order, None, None) or (None, reason of the first rejection, the reduction to blame)."""
    reason, red = None, None
    for n, order in enumerate(topological_sorts(kp.pog, kp.rank)):
        if n >= scan_limit:
            return None, (reason or "") + f" (gave up after {scan_limit} orders)", red
        exc = _check(kp, order)
        if exc is None:
            return order, None, None
        if reason is None:
            reason = f"order {','.join(order)}: {exc}"
            red = exc.red
    return None, reason or "the constraints leave no order", red


def valid_orders(kp, limit=DEFAULT_MAX_ORDERS, scan_limit=SCAN_LIMIT):
    """(list of valid orders, capped) — at most ``limit`` orders; capped when more may exist."""
    out = []
    for n, order in enumerate(topological_sorts(kp.pog, kp.rank)):
        if n >= scan_limit or len(out) >= limit:
            return out, True
        if _check(kp, order) is None:
            out.append(order)
    return out, False


def replayable_orders(kp, orders, compile_with):
    """The orders of kernel ``kp`` (valid for the kernel alone, :func:`valid_orders`) that the whole program
    compiles with, and the ones it does not: ``(kept, [(output mode order, orders left out, why)])``.

    ``compile_with(order)`` compiles the program with ``{kp.out: order}`` (the command line's ``--order
    KERNEL=...``) and raises :class:`~fuseflow.errors.ProgramError` when it cannot. An order changes the rest of
    the program only through the tensor the kernel writes (its mode order and, for an intermediate, its level
    formats), so the program is compiled once per distinct (mode order, formats), not once per order; the
    selected order's is the program already compiled. Every order ``--list-orders`` prints is one the compiler
    accepts back."""
    import copy
    from .intermediates import infer_levels

    def written(order):
        mode_order = tuple(kp.out_idx.index(x) for x in order if x in kp.out_idx)
        probe = copy.copy(kp)
        probe.order = tuple(order)
        return mode_order, infer_levels(probe)[0]
    outcome = {written(kp.order): None} if kp.order else {}
    kept, refused = [], {}
    for order in orders:
        key = written(order)
        if key not in outcome:
            try:
                compile_with(tuple(order))
                outcome[key] = None
            except ProgramError as exc:
                outcome[key] = str(exc)
        if outcome[key] is None:
            kept.append(order)
        else:
            refused.setdefault(key[0], [0, outcome[key]])[0] += 1
    return kept, [(mo, n, why) for mo, (n, why) in refused.items()]


def plan_program(ir, fuse="regions", order=None, iteration="factored"):
    """(kernel plans (KernelPlan / TransposePlan) in execution order, the IR with any temporaries). Sugar is
    lowered first when the caller has not run the pass (a no-op otherwise)."""
    c = Compiler(lower_sugar(ir), fuse, order, iteration)
    return c.run(), c.ir


# ---- plans against the program: blocked tensors, the parallel schedule ------------------------------

def check_block_plans(ir: ProgramIR, plans) -> None:
    """Refuse a plan that reads a blocked tensor through a permuted copy: its blocks would need transposing
    too (one line naming the tensor and what to do)."""
    for p in plans:
        if isinstance(p, TransposePlan):
            t = ir.tensors.get(p.src)
            if t is not None and t.block:
                raise ProgramError(f"line {t.line}", f"the dataflow order reads blocked tensor {p.src} against its "
                                                     f"storage order (a transposed copy of blocks): choose an order "
                                                     f"that follows {p.src}'s mode order, or declare it transposed")


def resolve_parallel(plans, parallel: dict) -> dict:
    """{kernel name: [{"lanes": factor, "dim": size of the index, "level": its place in the kernel's order, "unit":
    the largest dimension below it}]} for
    the kernel plans (several entries: nested lanes); ProgramError for an index no kernel has or a factor larger
    than the index's dimension."""
    out = {}
    kernels = [p for p in plans if isinstance(p, KernelPlan)]
    for index, factor in parallel.items():
        having = [p for p in kernels if index in p.order]
        if not having:
            known = sorted({i for p in kernels for i in p.order})
            raise ProgramError(f"parallel {index}", f"no kernel has index {index} (indices: {', '.join(known)})")
        for p in having:
            size = p.sizes.get(index)
            size = int(size) if size is not None else factor
            if factor > size:
                raise ProgramError(f"parallel {index}", f"factor {factor} is larger than the dimension of {index} "
                                                        f"({size})")
            if factor > 1:
                level = p.order.index(index)
                below = [int(p.sizes[i]) for i in p.order[level + 1:] if p.sizes.get(i) is not None]
                out.setdefault(p.name, []).append({"lanes": factor, "dim": size, "level": level,
                                                   "unit": max(below, default=None)})
    return out
