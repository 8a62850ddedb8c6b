"""Fusion tables (Algorithm 2, Figure 20): rows are index variables in fused order plus a value row, columns
are tensor views and intermediate results, cells are primitive cells or references to other cells.

A cell is *deferred*: planning a kernel creates :class:`Cell` objects that only name the op, its parameters
and the cells it reads (which may not exist yet when the cell is placed); nothing is built until code
generation asks the output's cells for their streams, and every cell builds its node once (memoized).
Planning is therefore cheap enough to run for every candidate dataflow order, which is how
:mod:`.fusion` decides which orders are *valid*: an order the planner cannot lower raises
:class:`NotRealizable`.

Lowering produces **factored iteration** (Figure 5b, Figure 11 right). The fused expression is a tree whose
reductions are *scopes*: each ``sum``/``max`` node iterates its own sub-space (the indices free in its body,
in the global order), nested inside the loops it shares with its consumer, and its result (coordinates from
a scalar reducer plus crd_drop, or from a sparse accumulator) flows into the consumer's co-iteration like
any other operand. Per index (row) and scope, the steps of Algorithm 2 are:

1. level scanners for every view that has the index next (values are loaded in the value row);
2. repeats for operands that lack the index (repeat signal from the row's coordinates);
3. compute pipelines (ALUs) in the value row;
4. higher-order reductions: a scalar ``reduce`` when the reduced index is innermost, otherwise a
   sparse accumulator of order 1, 2 or 3 over the inner free indices;
5. stream merging: ``intersect`` for products, ``union`` for sums (a union with a dense iterator where a
   sum, ``exp`` or a division must visit every coordinate of a dimension).

See ``docs/compiler.md`` for the full rules and the list of what is not supported.
"""

from __future__ import annotations

from ..samml.registry import OPS, SPACC_ORDERS
from .blocks import block_axes, block_product, reduced_indices
from .ir import ON_STORED, ON_STORED_BIN, Bin, Fn, Leaf, Lit, Red, ZERO_PRESERVING, is_mask, mask_pattern


class NotRealizable(Exception):
    """The planner cannot lower the kernel with this dataflow order (the reason is the message).

    ``red`` names the reduction (a nested scope) that caused it, when there is one: materialising that
    sub-expression in its own kernel removes the obstacle."""

    def __init__(self, why, red=None):
        super().__init__(why)
        self.red = red


# ---- deferred cells ------------------------------------------------------------------------------

class CellPort:
    __slots__ = ("cell", "port")

    def __init__(self, cell, port):
        self.cell, self.port = cell, port

    def build(self, kb):
        return kb.portref(self.cell.build(kb), self.port)

    def key(self):
        return (id(self.cell), self.port)

    def __repr__(self):
        return f"<{self.cell.name}.{self.port}>"


class Cell:
    """A deferred SAMML node: op, parameters and input cell ports; built once on demand."""
    __slots__ = ("op", "inputs", "params", "name", "node")

    def __init__(self, opname, inputs, name, /, **params):
        self.op, self.inputs, self.name = opname, dict(inputs), name
        self.params = {k: v for k, v in params.items() if v is not None}
        self.node = None

    def __getitem__(self, port):
        return CellPort(self, port)

    def build(self, kb):
        if self.node is None:
            ins = {port: cp.build(kb) for port, cp in self.inputs.items()}
            self.node = kb.add(self.op, ins, self.name, self.params)
        return self.node


class ConstVal:
    """A constant in the value row (folded into an ALU's ``const`` parameter)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


# ---- the planner ---------------------------------------------------------------------------------

class Operand:
    """A column of the table: a tensor view (one or more merged uses), an intermediate result, or the
    broadcast root of a scope (used to drive dense iterators)."""

    def __init__(self, kind, name, view=None):
        self.kind, self.name, self.view = kind, name, view
        self.handle = None        # current ref (views, bcast) or val (results) cell port
        self.depth = 0            # levels scanned (views)
        self.last_row = "root"
        self.scope = None         # the scope a result column belongs to

    def __repr__(self):
        return f"<operand {self.name}>"


class Scope:
    """A reduction node (or the statement's root) and its iteration sub-space."""

    def __init__(self, red, body, parent, free, name):
        self.red, self.body, self.parent, self.name = red, body, parent, name
        self.free = tuple(free)
        self.rd = tuple(red.idx) if red is not None else ()
        self.op = red.op if red is not None else "sum"
        self.children = []
        self.O = []               # the order restricted to free(body)
        self.L = []               # levels of the parent shared with (or recomputed around) this scope
        self.start = 0            # own levels are O[start:]
        self.ctx_done = 0
        self.triggered = False
        self.force_dense = False
        self.bcast = None
        self.ctx_bcast = None
        self.row_crd = {}
        self.result = None        # [(index, crd cell port)] of the free own levels
        self.val = None
        self.consumed = 0
        self.operand = None

    @property
    def own(self):
        return self.O[self.start:]


class _Dense:
    """A dense iterator not built yet (a product may replace it by its other factors' coordinates)."""
    __slots__ = ("x", "ref")

    def __init__(self, x, ref):
        self.x, self.ref = x, ref

    def key(self):
        return ("dense", id(self))


class JoinRes:
    """A co-iteration result at one level: (operand, crd, ref) pairs, possibly not yet merged."""
    __slots__ = ("kind", "pairs", "crd", "refs")

    def __init__(self, kind, pairs):
        self.kind, self.pairs = kind, pairs
        self.crd = None
        self.refs = None


class Table:
    """The fusion table of one kernel: rows (fused order + ``val``), columns, labelled cells."""

    def __init__(self, order):
        self.rows = list(order) + ["val"]
        self.columns = []
        self.cells = {}
        self.header = {}

    def column(self, name):
        if name not in self.columns:
            self.columns.append(name)

    def put(self, row, col, label):
        self.column(col)
        key = (row, col)
        if key in self.cells and label not in self.cells[key]:
            self.cells[key] = self.cells[key] + " " + label
        else:
            self.cells[key] = label

    def render(self, title=None, width=40):
        """The table as a text grid like Figure 20 (rows: indices and val; columns: views/results)."""
        cols = self.columns
        heads = [self.header.get(c, c) for c in cols]
        filled = dict(self.cells)
        for c in cols:                      # reference cells: pass the column's last stream through
            rows_with = [n for n, r in enumerate(self.rows) if (r, c) in self.cells]
            if not rows_with:
                continue
            last = None
            for n, r in enumerate(self.rows):
                if (r, c) in self.cells:
                    last = r
                elif last is not None and n < rows_with[-1]:
                    filled[(r, c)] = f"<{c}_{last}>"

        w0 = max([len(r) for r in self.rows] + [3]) + 1
        widths = []
        for c, h in zip(cols, heads):
            cells = [filled.get((r, c), "") for r in self.rows]
            widths.append(min(max([len(h)] + [len(x) for x in cells]) + 1, max(width, len(h) + 1)))

        def fit(text, w):
            return text if len(text) <= w else text[:w - 2] + ".."

        lines = []
        if title:
            lines.append(title)
        sep = "+" + "-" * (w0 + 1) + "+" + "+".join("-" * (w + 1) for w in widths) + "+"
        lines.append(sep)
        lines.append("| " + " " * w0 + "|" + "|".join(" " + fit(h, w).ljust(w) for h, w in zip(heads, widths)) + "|")
        lines.append(sep)
        for r in self.rows:
            cells = [filled.get((r, c), "") for c in cols]
            lines.append("| " + r.ljust(w0) + "|" + "|".join(" " + fit(x, w).ljust(w)
                                                            for x, w in zip(cells, widths)) + "|")
        lines.append(sep)
        return "\n".join(lines)


class Planner:
    """Plans one kernel: ``expr`` (fused tree, free indices ``out_idx``), ``order`` (every index of the
    tree), ``views`` (view key -> view), ``sizes`` (index -> size).

    ``plan()`` fills the table and returns the output: the free levels (index, crd cell port) in iteration
    order and the value cell port (or ConstVal)."""

    def __init__(self, expr, out_idx, order, views, leaf_view, sizes, out_name="out", block=None):
        self.expr, self.out_idx, self.order = expr, tuple(out_idx), list(order)
        self.block = block                   # B when the values are blocks (.blocks: which * is a block_matmul)
        self.views, self.leaf_view, self.sizes = views, leaf_view, sizes
        self.pos = {x: n for n, x in enumerate(self.order)}
        self.out_name = out_name
        self.table = Table(self.order)
        self.root_cell = Cell("root", {}, "root")
        self._repsig = {}
        self._array = {}
        self._scan = {}
        missing = [i for i in expr.all_indices() if i not in self.pos]
        if missing:
            raise NotRealizable(f"the order does not place {', '.join(missing)}")

    # -- helpers --
    def repsig(self, crd):
        key = crd.key()
        if key not in self._repsig:
            self._repsig[key] = Cell("repeat_sig", {"in": crd}, f"repsig_{crd.cell.name}")["repsig"]
        return self._repsig[key]

    def repeat(self, what, crd, label):
        return Cell("repeat", {"in": what, "repsig": self.repsig(crd)}, f"rep_{label}")["out"]

    # -- scope tree --
    def build_scopes(self):
        counter = [0]
        self.operands = []
        self.scopes = []

        def make(red, body, parent, free):
            name = "out" if red is None else f"T{counter[0]}"
            if red is not None:
                counter[0] += 1
            s = Scope(red, body, parent, free, name)
            self.scopes.append(s)
            s.O = [x for x in self.order if x in body.free]
            if red is not None:
                s.operand = Operand("result", name)
                s.operand.scope = s
                self.operands.append(s.operand)
            collect(body, s, None, {})
            return s

        def collect(node, scope, group, merged):
            if isinstance(node, Leaf):
                key = self.leaf_view[id(node)]
                mkey = (group, key) if group is not None else None
                if mkey is not None and mkey in merged:
                    self.leaf_op[id(node)] = merged[mkey]
                    return
                view = self.views[key]
                same = sum(1 for o in self.operands if o.kind == "view" and o.view.source == view.source)
                op = Operand("view", view.source + ("'" * same), view)
                self.table.header[op.name] = view.label + ("'" * same)
                self.operands.append(op)
                self.leaf_op[id(node)] = op
                if mkey is not None:
                    merged[mkey] = op
            elif isinstance(node, Red):
                child = make(node, node.body, scope, node.free)
                scope.children.append(child)
                self.scope_of[id(node)] = child
            elif isinstance(node, Bin):
                # leaves that are factors of one flattened product (or terms of one flattened sum) and
                # use the same view share one column: their co-iteration is identical
                kind = _kind(node)
                g = None
                if kind is not None:
                    g = group if (group is not None and group[1] == kind) else (id(node), kind)
                for c in (node.a, node.b):
                    same = isinstance(c, Leaf) or (isinstance(c, Bin) and kind is not None and _kind(c) == kind)
                    collect(c, scope, g if same else None, merged)
            elif isinstance(node, Fn):
                collect(node.a, scope, None, merged)

        self.leaf_op = {}
        self.scope_of = {}
        self.parent_of = {id(c): n for n in self.expr.walk() for c in n.children()}
        self.hoisted = {}
        self._complete = set()      # ids of scanner cells that emit every coordinate of their dimension
        self.root = make(None, self.expr, None, self.out_idx)
        self.root.O = [x for x in self.order if x in self.out_idx]
        if set(self.root.O) != set(self.expr.free):
            raise NotRealizable("the output indices do not match the expression")

    def place_scopes(self):
        """Choose each scope's context L (the longest valid prefix of its parent's level sequence: the
        parent's own context followed by its own levels) and check the consumer conditions."""
        for s in self.scopes:                    # parents come before their children
            if s.parent is None:
                s.Q = list(s.O)
                continue
            P = s.parent
            Q = P.Q
            F = set(s.free)
            if not F:
                s.L, s.start, s.force_dense = [], 0, True
                s.Q = list(s.O)
                continue
            last_free = max(F, key=self.pos.get)
            best = []
            for n in range(1, len(Q) + 1):
                L = Q[:n]
                if last_free in L:
                    break
                Lf = [x for x in L if x in F]
                if s.O[:len(Lf)] != Lf:
                    break
                best = L
            s.L = best
            Lf = [x for x in best if x in F]
            s.start = len(Lf)
            s.Q = list(best) + s.O[s.start:]
            own_free = [x for x in s.O[s.start:] if x in F]
            last_own = max((self.pos[x] for x in own_free), default=-1)
            for x in Q[len(best):]:
                if x not in F and self.pos[x] < last_own:
                    raise NotRealizable(f"the result of {s.name} ({_fmt_red(s.red)}) would have to be repeated "
                                        f"over {x} with its sub-tree over "
                                        f"{', '.join(y for y in own_free if self.pos[y] > self.pos[x])}", s.red)

    # -- planning --
    def plan(self):
        self.build_scopes()
        self.place_scopes()
        root_b = Operand("bcast", "bcast")
        root_b.handle = self.root_cell["ref"]
        self.root.bcast = root_b
        for op in self.operands:
            if op.kind == "view":
                op.handle = self.root_cell["ref"]
                self.table.column(op.name)
        for s in self.scopes:
            if s.parent is not None:
                s.ctx_bcast = root_b.handle
        self.root.triggered = True
        self.running = [self.root]
        self.trigger_ready()
        self.running = []
        self.run_scope(self.root)
        for s in self.scopes:
            if not s.triggered:
                raise NotRealizable(f"{s.name} is never computed")
        return self.root.result, self.root.val

    def trigger_ready(self):
        cur = self.running[-1]
        for s in reversed(self.scopes):          # children before parents (post-order by creation)
            if s.parent is not None and not s.triggered and s.ctx_done == len(s.L) and _inside(s, cur):
                s.triggered = True
                s.bcast = Operand("bcast", f"bcast_{s.name}")
                s.bcast.handle = s.ctx_bcast
                self.run_scope(s)

    def run_scope(self, s):
        self.running.append(s)
        for x in s.own:
            self.process_level(s, x)
            self.trigger_ready()
        self.finish_scope(s)
        self.running.pop()

    def process_level(self, owner, x):
        self._ctx_touched = []
        self._row = x
        J = self.join(owner.body, x, owner)
        if J is None:
            raise NotRealizable(f"nothing iterates {x} in {owner.name}")
        if owner.force_dense:
            # a reduction to a scalar visits every coordinate so that it always yields exactly one value
            J = self.cover(J, x, owner)
        self.finalize(J)
        crd = J.crd
        touched = set()
        for op, _crd, ref in J.pairs:
            if op is not None:
                touched.add(id(op))
        for op, ref in J.refs.items():
            op.handle = ref
        drive = J.pairs[0][0]
        drive_name = f"<{drive.name}_{x}>" if drive is not None else f"Dense_{x}"
        active = self.active(owner.body, x)
        for op in active:
            if id(op) in touched:
                continue
            if op.kind == "result" and op.scope.consumed < len(op.scope.result):
                left = [y for y, _ in op.scope.result[op.scope.consumed:]]
                raise NotRealizable(f"the result of {op.scope.name} would have to be repeated over {x} with its "
                                    f"sub-tree over {', '.join(left)}", op.scope.red)
            if op.handle is None:
                raise NotRealizable(f"{op.name} has no stream at {x}")
            prev = op.last_row
            op.handle = self.repeat(op.handle, crd, f"{op.name}_{x}")
            self.table.put(x, op.name, f"Rep(<{op.name}_{prev}>, {drive_name})")
            op.last_row = x
        owner.bcast.handle = self.repeat(owner.bcast.handle, crd, f"bcast_{x}")
        owner.row_crd[x] = crd
        for sc in self._ctx_touched:
            sc.ctx_done += 1
            sc.ctx_bcast = owner.bcast.handle

    def active(self, node, x):
        """Operands that live in ``node``'s sub-space at level ``x`` (prefix scopes are entered)."""
        out = []

        def walk(n):
            if isinstance(n, Leaf):
                op = self.leaf_op[id(n)]
                if op not in out:
                    out.append(op)
            elif isinstance(n, Red):
                sc = self.scope_of[id(n)]
                if sc.ctx_done < len(sc.L) and sc.L[sc.ctx_done] == x:
                    if sc not in self._ctx_touched:
                        self._ctx_touched.append(sc)
                    walk(n.body)
                else:
                    if not sc.triggered:
                        raise NotRealizable(f"{sc.name} is needed at {x} before it is computed")
                    if sc.operand not in out:
                        out.append(sc.operand)
            else:
                for c in n.children():
                    walk(c)
        walk(node)
        return out

    # -- co-iteration --
    def join(self, node, x, owner):
        if isinstance(node, Leaf):
            if x not in node.idx:
                return None
            op = self.leaf_op[id(node)]
            key = (id(op), x)
            if key in self._scan:
                return self._scan[key]
            view = op.view
            if op.depth >= len(view.level_idx) or view.level_idx[op.depth] != x:
                have = view.level_idx[op.depth] if op.depth < len(view.level_idx) else "nothing"
                raise NotRealizable(f"{view.label} is stored {'->'.join(view.level_idx)} but would be read at "
                                    f"{x} before {have} (discordant)")
            lvl = op.depth
            if is_mask(view.source):
                cell = self.mask_level(op, lvl, x)
            else:
                cell = Cell("level_scan", {"ref": op.handle}, f"scan_{op.name}_{x}".replace("'", "p"),
                            tensor=view.source, level=lvl, format=view.levels[lvl])
                if all(f == "dense" for f in view.levels[:lvl + 1]):
                    self._complete.add(id(cell))
                self.table.put(x, op.name, f"LS(<{op.name}_{op.last_row}>)")
            op.last_row = x
            op.depth += 1
            res = JoinRes("scan", [(op, cell["crd"], cell["ref"])])
            self._scan[key] = res
            return res
        if isinstance(node, Lit):
            return None
        if isinstance(node, Fn):
            j = self.join(node.a, x, owner)
            if j is not None and node.fn not in ZERO_PRESERVING and not node.fn.endswith(ON_STORED):
                j = self.cover(j, x, owner)
            return j
        if isinstance(node, Bin):
            if node.op == "*" and (_is_mask_leaf(node.a) or _is_mask_leaf(node.b)):
                j = self.join_masked(node, x, owner)
                if j is not False:
                    return j
            ja = self.join(node.a, x, owner)
            jb = self.join(node.b, x, owner)
            if node.op == "*" or node.op in ON_STORED_BIN:
                return self.combine("intersect", [ja, jb], x)
            if node.op == "/":
                if isinstance(node.b, Lit) and node.b.value != 0:
                    return ja
                j = self.combine("union", [ja, jb], x)
                return self.cover(j, x, owner) if j is not None else None
            if ja is not None and jb is not None:
                return self.combine("union", [ja, jb], x)
            if ja is not None or jb is not None:
                return self.cover(ja or jb, x, owner)
            return None
        if isinstance(node, Red):
            sc = self.scope_of[id(node)]
            if sc.ctx_done < len(sc.L) and sc.L[sc.ctx_done] == x:
                j = self.join(sc.body, x, owner)
                return j
            if not sc.triggered:
                if x in node.free:
                    raise NotRealizable(f"{sc.name} is needed at {x} before it is computed")
                return None
            if sc.consumed < len(sc.result) and sc.result[sc.consumed][0] == x:
                crd = sc.result[sc.consumed][1]
                sc.consumed += 1
                col = sc.operand.name
                prev = sc.operand.last_row
                self.table.put(x, col, f"<{col}_{prev}>")
                sc.operand.last_row = x
                if sc.consumed == len(sc.result):
                    return JoinRes("scan", [(sc.operand, crd, sc.val)])
                return JoinRes("solo", [(sc.operand, crd, None)])
            if x in node.free:
                raise NotRealizable(f"{sc.name} delivers its levels in another order than {x}")
            return None
        raise TypeError(node)

    def join_masked(self, node, x, owner):
        """``mask(i,j) * e`` at the mask's column level ``x``: when ``e``'s coordinates at ``x`` are sparse, a
        ``crd_mask`` filters them (and their references) by the pattern, so the work is e's entries; otherwise
        (dense operands) the mask's ``mask_scan`` generates the kept columns and the product intersects them.
        Returns False when ``x`` is not the mask's column level (the ordinary join applies)."""
        mask, other = (node.a, node.b) if _is_mask_leaf(node.a) else (node.b, node.a)
        op = self.leaf_op[id(mask)]
        if op.depth != 1 or op.view.level_idx[1] != x or (id(op), x) in self._scan:
            return False
        jo = self.join(other, x, owner)
        if jo is None or not self._sparse(jo):
            return self.combine("intersect", [self.join(mask, x, owner), jo], x)
        self.finalize(jo)
        refs = list(jo.refs.items())
        rows, cols = (int(self.sizes[i]) for i in op.view.idx)
        inputs = {"outer": op.handle, "crd": jo.crd}
        for n, (_, ref) in enumerate(refs):
            inputs[f"ref{n}"] = ref
        cell = Cell("crd_mask", inputs, f"mask_{x}", mask=mask_pattern(op.view.source), rows=rows, dim=cols,
                    arity=len(refs))
        self.table.put(x, op.name, f"MaskFilter(<{op.name}_{op.last_row}>)")
        op.last_row = x
        op.depth += 1
        res = JoinRes("intersect", [(o, cell["crd"], cell[f"ref{n}"]) for n, (o, _) in enumerate(refs)])
        res.crd = cell["crd"]
        res.refs = {o: cell[f"ref{n}"] for n, (o, _) in enumerate(refs)}
        self._scan[(id(op), x)] = res
        return res

    def _sparse(self, j):
        """Are the coordinates of ``j`` those of sparse operands (compressed levels or results), so that
        filtering them beats generating the mask's?"""
        if j.kind == "solo" or not j.pairs:
            return False
        flags = []
        for op, crd, _ in j.pairs:
            if isinstance(crd, _Dense) or op is None:
                flags.append(False)
            elif op.kind == "view":
                flags.append(op.view.levels[op.depth - 1] in ("compressed", "mask"))
            else:
                flags.append(op.kind == "result")
        return all(flags) if j.kind == "union" else any(flags)

    def mask_level(self, op, lvl, x):
        """The scanner of a coordinate mask's level: its row level is a dense scan (whose references are the
        row coordinates), its column level a ``mask_scan`` that emits the columns the pattern keeps."""
        rows, cols = (int(self.sizes[i]) for i in op.view.idx)
        if lvl == 0:
            self.table.put(x, op.name, f"LS_dense({rows})")
            return Cell("level_scan", {"ref": op.handle}, f"mask_rows_{x}", format="dense", dim=rows)
        self.table.put(x, op.name, f"MaskScan(<{op.name}_{op.last_row}>)")
        return Cell("mask_scan", {"ref": op.handle}, f"mask_{x}", mask=mask_pattern(op.view.source),
                    rows=rows, dim=cols)

    def cover(self, j, x, owner):
        """Union ``j`` with a dense iterator over ``x`` (visit every coordinate of the dimension)."""
        if j.kind == "solo":
            raise NotRealizable(f"a dense iteration over {x} would need the sub-tree of an intermediate",
                                j.pairs[0][0].scope.red)
        mark = _Dense(x, owner.bcast.handle)
        return self.combine("union", [j, JoinRes("scan", [(None, mark, None)])], x)

    def combine(self, kind, parts, x):
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        if len(parts) == 1:
            return parts[0]
        solo = [p for p in parts if p.kind == "solo"]
        if solo:
            raise NotRealizable(f"an intermediate's outer level {x} would be merged with another stream (its "
                                f"inner levels cannot follow)", solo[0].pairs[0][0].scope.red)
        if kind == "intersect":
            # a dense iterator merged into a product only needs the coordinates of the other factors:
            # M(i,j) * exp(S(i,j)) iterates union(S, M) within M, not every j
            marked = [p for p in parts if p.crd is None and p.kind == "union"
                      and any(isinstance(q[1], _Dense) for q in p.pairs)]
            plain = [p for p in parts if p not in marked]
            if marked and plain:
                sib = [(None, c, r) for p in plain for _, c, r in p.pairs]
                parts = plain + [JoinRes("union", [q for q in p.pairs if not isinstance(q[1], _Dense)] + sib)
                                 for p in marked]
        pairs = []
        for p in parts:
            if p.kind == kind or (p.kind == "scan" and len(p.pairs) == 1):
                new = p.pairs
            else:
                self.finalize(p)
                new = [(op, p.crd, ref) for op, ref in p.refs.items()]
            for pr in new:
                if not any(q[0] is pr[0] and pr[0] is not None and q[1].key() == pr[1].key() for q in pairs):
                    pairs.append(pr)
        if len(pairs) == 1:
            return JoinRes("scan", pairs)
        return JoinRes(kind, pairs)

    def finalize(self, j):
        if j.crd is not None:
            return j
        for n, (op, crd, ref) in enumerate(j.pairs):
            if isinstance(crd, _Dense):
                d = Cell("level_scan", {"ref": crd.ref}, f"dense_{crd.x}", format="dense",
                         dim=int(self.sizes[crd.x]))
                self._complete.add(id(d))
                self.table.put(crd.x, f"Dense({crd.x})", f"LS_dense({self.sizes[crd.x]})")
                j.pairs[n] = (None, d["crd"], d["ref"])
        if j.kind in ("scan", "solo") or len(j.pairs) == 1:
            op, crd, ref = j.pairs[0]
            j.crd = crd
            j.refs = {op: ref} if (op is not None and ref is not None) else {}
            return j
        inputs = {}
        for n, (op, crd, ref) in enumerate(j.pairs):
            inputs[f"crd{n}"] = crd
            inputs[f"ref{n}"] = ref
        cell = Cell(j.kind, inputs, f"{j.kind}", arity=len(j.pairs))
        j.crd = cell["crd"]
        j.refs = {}
        for n, (op, crd, ref) in enumerate(j.pairs):
            if op is not None and op not in j.refs:
                j.refs[op] = cell[f"ref{n}"]
        label = j.kind.capitalize()             # Intersect or Union
        row = self._row
        for op, _, _ in j.pairs:
            if op is not None:
                self.table.put(row, op.name, f"{label}_{row}")
        return j

    # -- values and reductions --
    def hoist_top(self, red):
        """The largest expression above reduction ``red`` that depends on nothing but ``red`` and constants
        (``rsqrt(sum[m](...) / 16 + 1e-05)`` in a layer norm), or None. It has one value per point of the
        reduction's context, so it is computed there, once, before the result is repeated over the consumer's
        inner levels (loop-invariant code motion): the per-element pipeline keeps only the ops that need
        per-element operands, and the long latencies (rsqrt, div) run at the outer rate."""
        top, node = None, red
        while True:
            up = self.parent_of.get(id(node))
            if isinstance(up, Fn) and not up.fn.endswith(ON_STORED):
                top = node = up
            elif (isinstance(up, Bin) and not up.op.endswith(ON_STORED) and len(up.op) == 1
                  and isinstance(up.b if up.a is node else up.a, Lit)):
                top = node = up
            else:
                return top

    def covers(self, crd):
        """Does coordinate stream ``crd`` hold every coordinate of its dimension in every fibre (a scan of a
        dense level under dense levels, a dense iterator, or a merge of such)?"""
        cell = crd.cell
        if id(cell) in self._complete:
            return True
        ins = [cp for port, cp in cell.inputs.items() if port.startswith("crd")]
        merge = OPS[cell.op].coiterate
        if merge == "any":
            return any(self.covers(c) for c in ins)
        if merge == "all":
            return all(self.covers(c) for c in ins)
        return False

    def value(self, node):
        if id(node) in self.hoisted:
            return self.hoisted[id(node)].operand.handle
        if isinstance(node, Bin) and node.op == "*":
            # a coordinate mask selects coordinates in the co-iteration and contributes no value
            if _is_mask_leaf(node.a):
                return self.value(node.b)
            if _is_mask_leaf(node.b):
                return self.value(node.a)
        if isinstance(node, Leaf):
            if is_mask(node.tensor):
                raise NotRealizable("a coordinate mask has no values (it must multiply an expression)")
            op = self.leaf_op[id(node)]
            key = (op.handle.key(), op.view.source)
            if key not in self._array:
                self._array[key] = Cell("array", {"ref": op.handle}, f"vals_{op.name}".replace("'", "p"),
                                        tensor=op.view.source)["val"]
                self.table.put("val", op.name, f"Val(<{op.name}_{op.last_row}>)")
                op.last_row = "val"
            return self._array[key]
        if isinstance(node, Lit):
            return ConstVal(node.value)
        if isinstance(node, Red):
            sc = self.scope_of[id(node)]
            return sc.operand.handle
        if isinstance(node, Fn):
            a = self.value(node.a)
            if isinstance(a, ConstVal):
                raise NotRealizable("a function of a constant has no stream")
            fn = node.fn.removesuffix(ON_STORED)
            return Cell("alu", {"a": a}, fn, op=fn)["out"]
        if isinstance(node, Bin) and node.op == "*" and self.block:
            product = block_product(node, reduced_indices(self.expr))
            if product is not None:
                x, y, rhs = product
                return Cell("block_matmul", {"a": self.value(x), "b": self.value(y)}, "bmm", block=self.block,
                            rhs=rhs)["out"]
        if isinstance(node, Bin):
            a, b = self.value(node.a), self.value(node.b)
            op = {"+": "add", "-": "sub", "*": "mul", "/": "div"}[node.op.removesuffix(ON_STORED)]
            if isinstance(a, ConstVal) and isinstance(b, ConstVal):
                raise NotRealizable("constant expression without a stream")
            if isinstance(b, ConstVal):
                return Cell("alu", {"a": a}, op, op=op, const=b.value)["out"]
            if isinstance(a, ConstVal):
                if node.op in "+*":
                    return Cell("alu", {"a": b}, op, op=op, const=a.value)["out"]
                if node.op.startswith("-"):
                    nb = Cell("alu", {"a": b}, "neg", op="neg")["out"]
                    return Cell("alu", {"a": nb}, "add", op="add", const=a.value)["out"]
                zero = Cell("alu", {"a": b}, "mul", op="mul", const=0.0)["out"]
                ca = Cell("alu", {"a": zero}, "add", op="add", const=a.value)["out"]
                return Cell("alu", {"a": ca, "b": b}, "div", op="div")["out"]
            return Cell("alu", {"a": a, "b": b}, op, op=op)["out"]
        raise TypeError(node)

    def block_axes(self, node):
        """The indices of the block dimensions of ``node``'s values (:func:`.blocks.block_axes`; () unblocked)."""
        if not self.block:
            return ()
        return block_axes(node, reduced_indices(self.expr))

    def value_text(self, node):
        """The value row's computation of a scope in terms of its columns (for the table)."""
        if isinstance(node, Bin) and node.op == "*" and (_is_mask_leaf(node.a) or _is_mask_leaf(node.b)):
            return self.value_text(node.b if _is_mask_leaf(node.a) else node.a)
        if isinstance(node, Leaf):
            return f"<{self.leaf_op[id(node)].name}_val>"
        if isinstance(node, Lit):
            return repr(node)
        if isinstance(node, Red):
            return f"<{self.scope_of[id(node)].operand.name}_val>"
        if isinstance(node, Fn):
            return f"{node.fn}({self.value_text(node.a)})"
        prec = {"+": 1, "-": 1, "*": 2, "/": 2, "-@": 1, "/@": 2}

        def side(child, right):
            text = self.value_text(child)
            if isinstance(child, Bin) and (prec[child.op] < prec[node.op] or
                                           (right and prec[child.op] == prec[node.op] and node.op[0] in "-/")):
                return f"({text})"
            return text
        return f"{side(node.a, False)} {node.op} {side(node.b, True)}"

    def finish_scope(self, s):
        val = self.value(s.body)
        if isinstance(val, ConstVal):
            raise NotRealizable("a constant statement has no stream")
        levels = [(x, s.row_crd[x]) for x in s.own]
        red = set(s.rd)
        col = s.operand.name if s.operand is not None else self.out_name
        axes = self.block_axes(s.body) if red else ()
        while any(x in red for x, _ in levels):
            removed = []
            while levels and levels[-1][0] in red:
                removed.append(levels.pop())
                rows = {}
                if len(axes) == 2 and removed[-1][0] == axes[1]:
                    rows, axes = {"rows": True}, axes[:1]         # over block columns: each block's rows too
                val = Cell("reduce", {"val": val}, f"reduce_{removed[-1][0]}", op=s.op, **rows)["val"]
                self.table.put(removed[-1][0], col, f"Red_{removed[-1][0]}")
            if removed and levels:
                inner = removed[0][1]
                for x, c in removed[1:]:
                    inner = Cell("crd_drop", {"outer": c, "inner": inner}, f"drop_{x}")["outer"]
                x, c = levels[-1]
                levels[-1] = (x, Cell("crd_drop", {"outer": c, "inner": inner}, f"drop_{x}")["outer"])
                self.table.put(x, col, f"Drop_{x}")
            if not any(x in red for x, _ in levels):
                break
            p = max(n for n, (x, _) in enumerate(levels) if x in red)
            inner_free = levels[p + 1:]
            r = levels[p][0]
            if len(axes) == 2 and r == axes[1]:
                raise NotRealizable(f"reducing {r}, a block's column index, outside "
                                    f"{', '.join(x for x, _ in inner_free)} reduces block rows in a sparse "
                                    f"accumulator (not supported): iterate {r} innermost",
                                    s.red if s.parent is not None else None)
            if len(inner_free) > max(SPACC_ORDERS):
                raise NotRealizable(f"reducing {r} outside {', '.join(x for x, _ in inner_free)} needs a sparse "
                                    f"accumulator of order {len(inner_free)} (at most {max(SPACC_ORDERS)} is "
                                    f"supported): iterate or store {r} further in",
                                    s.red if s.parent is not None else None)
            order = len(inner_free)
            # sub-tree streams outermost first: crd_outer{order-2} .. crd_outer0, crd_inner
            ports = [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]
            caps = {"crd_inner": "dim", "crd_outer0": "dim_outer", "crd_outer1": "dim_outer1"}
            inputs = {"val": val}
            params = {"order": order, "op": s.op}
            for port, (y, c) in reversed(list(zip(ports, inner_free))):     # dim, dim_outer, dim_outer1
                inputs[port] = c
                params[caps[port]] = int(self.sizes[y])
            cell = Cell("spacc", inputs, f"spacc_{r}", **params)
            val = cell["val"]
            new = [(y, cell[port]) for port, (y, _) in zip(ports, inner_free)]
            for k2, (y, _) in enumerate(new):
                self.table.put(y, col, f"Red{order}_{r}" + (f"[crd{order - 1 - k2}]" if order >= 2 else ""))
            levels = levels[:p] + new
        s.result = levels
        s.val = val
        self.table.put("val", col, _val_label(s, self.value_text(s.body)))
        if s.operand is not None:
            s.operand.handle = val if not levels else None
            s.operand.last_row = levels[-1][0] if levels else "val"
            # a result with levels is hoisted only where no coordinate can be absent: the consumer loads an
            # absent one as 0, where the expression above it may not be 0 (rsqrt(0 / 16 + 1e-05))
            complete = not levels or all(self.covers(s.row_crd[x]) for x in s.own)
            top = self.hoist_top(s.red) if complete else None
            if top is not None:
                s.operand.handle = val                  # what value(red) reads while the chain is built
                hoisted = self.value(top)
                if levels:                              # the values ride the consumer's co-iteration
                    s.val, s.operand.handle = hoisted, None
                else:
                    s.operand.handle = hoisted
                self.hoisted[id(top)] = s


def _is_mask_leaf(node):
    return isinstance(node, Leaf) and is_mask(node.tensor)


def _val_label(s, text):
    if not s.rd:
        return text
    return f"{s.op}_{','.join(s.rd)}({text})"


def _inside(s, anc):
    while s is not None:
        if s is anc:
            return True
        s = s.parent
    return False


def _fmt_red(red):
    return f"{red.op}[{','.join(red.idx)}]" if red is not None else "output"


def plan_kernel(expr, out_idx, order, views, leaf_view, sizes, out_name="out"):
    """Plan one kernel; returns (planner, levels, val). Raises NotRealizable."""
    p = Planner(expr, out_idx, order, views, leaf_view, sizes, out_name)
    levels, val = p.plan()
    return p, levels, val


def check_order(expr, out_idx, order, views, leaf_view, sizes):
    """None if ``order`` can be lowered, else the :class:`NotRealizable` exception."""
    try:
        plan_kernel(expr, out_idx, order, views, leaf_view, sizes)
    except NotRealizable as exc:
        return exc
    return None




def _kind(node):
    if node.op == "*":
        return "*"
    if node.op in "+-":
        return "+"
    return None
