"""The sugar pass: ``softmax``, ``layernorm`` and ``mean`` become primitive statements before fusion.

``compile_program`` runs :func:`lower_sugar` on the Einsum IR first (``docs/compiler.md``, the pass list);
fusion, fusion tables and code generation never see a :class:`~.ir.Sugar` node. Each sugar node of a
statement ``Y = ... op[J](e, ...) ...`` (innermost first) is replaced as follows, where ``F`` are the free
indices of ``e`` and ``K = F - J``:

``softmax[J](e)`` (numerically stable; over the stored coordinates of each fibre)::

    Y_in(F)  = e                          # only when e is not a plain access
    Y_max(K) = max[J](Y_in(F))
    Y_exp(F) = exp@(Y_in(F) -@ Y_max(K))  # @: iterated like a product, on Y_in's stored coordinates
    Y_sum(K) = sum[J](Y_exp(F))
    ... Y_exp(F) /@ Y_sum(K) ...          # in place of the sugar

``layernorm[J, eps](e, gain, bias)`` (over the whole dimension; absent entries are 0)::

    Y_mean(K) = sum[J](Y_in(F)) / N       # N = product of the sizes of J
    Y_ctr(F)  = Y_in(F) - Y_mean(K)
    Y_rstd(K) = rsqrt(sum[J](Y_ctr(F) * Y_ctr(F)) / N + eps)
    ... Y_ctr(F) * Y_rstd(K) * gain + bias ...

``mean[J](e)`` is ``sum[J](e) / N`` in place.

The new statements are intermediates marked ``synthetic`` (graph.json's ``expr`` keeps the source text, so
``--check`` evaluates the sugar with NumPy); they join the source statement's fusion region, or form one
region with it when it has none (one source statement is one unit at ``--fuse regions``). ``order`` lines of
the source statement constrain every new statement, restricted to the indices it has.
"""

from __future__ import annotations

import copy
import math

from .ir import Bin, Fn, Leaf, Lit, ProgramIR, Red, Stmt, Sugar, TensorInfo, check_index_sizes


def lower_sugar(ir: ProgramIR) -> ProgramIR:
    """A new :class:`ProgramIR` without sugar nodes (``ir`` itself when it has none)."""
    if not any(isinstance(n, Sugar) for s in ir.stmts for n in s.rhs.walk()):
        return ir
    tensors = dict(ir.tensors)
    region_of = {sid: n for n, r in enumerate(ir.regions) for sid in r}
    regions = [[] for _ in ir.regions]
    stmts = []
    for s in ir.stmts:
        s = copy.deepcopy(s)                 # ids, orders and leaves change below: the caller's IR stays as it was
        lowering = _Lowering(s, tensors)
        rhs = lowering.rewrite(s.rhs)
        group = [*lowering.new, s]
        if rhs is not s.rhs:
            final = Stmt(0, s.lhs, s.idx, rhs, s.line, s.text, [], s.synthetic, s.shown or s.rhs, s.segment)
            group[-1] = final
        if s.id in region_of:
            target = regions[region_of[s.id]]
        elif lowering.new:
            regions.append([])
            target = regions[-1]
        else:
            target = None
        for st in group:
            st.id = len(stmts)
            st.segment = s.segment
            st.orders = [c for c in (tuple(i for i in chain if i in st.indices) for chain in s.orders) if c]
            for leaf in st.rhs.leaves():
                leaf.stmt = st.id
            stmts.append(st)
            if target is not None:
                target.append(st.id)
    regions = [r for r in regions if r]
    regions.sort(key=lambda r: r[0])
    return ProgramIR(ir.name, tensors, stmts, regions)


class _Lowering:
    """Rewrites one statement's tree; ``new`` collects the helper statements in dependency order."""

    def __init__(self, stmt: Stmt, tensors: dict):
        self.stmt, self.tensors, self.new = stmt, tensors, []
        self.sizes = check_index_sizes(stmt, tensors)

    def rewrite(self, node):
        if not self.changed(node):
            return node
        if isinstance(node, Bin):
            return Bin(node.op, self.rewrite(node.a), self.rewrite(node.b))
        if isinstance(node, Fn):
            return Fn(node.fn, self.rewrite(node.a))
        if isinstance(node, Red):
            return Red(node.op, node.idx, self.rewrite(node.body))
        if isinstance(node, Sugar):
            args = [self.rewrite(a) for a in node.args]
            return getattr(self, node.op)(node, args)
        return node

    def changed(self, node):
        return any(isinstance(n, Sugar) for n in node.walk())

    # -- helpers --
    def fresh(self, suffix):
        base = f"{self.stmt.lhs}_{suffix}"
        name, n = base, 2
        while name in self.tensors:
            name, n = f"{base}{n}", n + 1
        return name

    def define(self, suffix, idx, rhs):
        """A new statement ``name(idx) = rhs``; returns a leaf reading it."""
        name = self.fresh(suffix)
        self.tensors[name] = TensorInfo(name, tuple(self.sizes[i] for i in idx), "intermediate",
                                        line=self.stmt.line)
        st = Stmt(0, name, tuple(idx), rhs, self.stmt.line, f"{name}({','.join(idx)}) = {rhs!r}")
        st.synthetic = True
        self.new.append(st)
        return self.leaf(name, idx)

    def leaf(self, name, idx):
        return Leaf(name, idx, self.stmt.id)

    def operand(self, e):
        """``e`` as a plain access (a new statement when it is an expression)."""
        if isinstance(e, Leaf):
            return e
        return self.define("in", e.free, e)

    def extent(self, node):
        return math.prod(self.sizes[i] for i in node.idx)

    # -- the sugar --
    def softmax(self, node, args):
        x = self.operand(args[0])
        kept = tuple(i for i in x.free if i not in node.idx)
        m = self.define("max", kept, Red("max", node.idx, x))
        e = self.define("exp", x.free, Fn("exp@", Bin("-@", self.leaf(x.tensor, x.idx), m)))
        z = self.define("sum", kept, Red("sum", node.idx, self.leaf(e.tensor, e.idx)))
        return Bin("/@", self.leaf(e.tensor, e.idx), z)

    def layernorm(self, node, args):
        x = self.operand(args[0])
        kept = tuple(i for i in x.free if i not in node.idx)
        n = float(self.extent(node))
        mu = self.define("mean", kept, Bin("/", Red("sum", node.idx, x), Lit(n)))
        c = self.define("ctr", x.free, Bin("-", self.leaf(x.tensor, x.idx), mu))
        sq = Bin("*", self.leaf(c.tensor, c.idx), self.leaf(c.tensor, c.idx))
        var = Bin("/", Red("sum", node.idx, sq), Lit(n))
        r = self.define("rstd", kept, Fn("rsqrt", Bin("+", var, Lit(node.params["eps"]))))
        out = Bin("*", self.leaf(c.tensor, c.idx), r)
        if len(args) > 1:
            out = Bin("*", out, args[1])
        if len(args) > 2:
            out = Bin("+", out, args[2])
        return out

    def mean(self, node, args):
        return Bin("/", Red("sum", node.idx, args[0]), Lit(float(self.extent(node))))

