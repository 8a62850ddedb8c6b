"""The Einsum IR: tensors, statements, fusion regions, expression trees with identity.

The front end (:mod:`.frontend`) produces a :class:`ProgramIR`: every tensor with its shape, per-level
formats and mode order (inputs) or its role (outputs and intermediates, whose formats the compiler chooses),
every statement in program order with its expression tree and its dataflow-order constraints (``order``
lines), and the user's fusion regions. Cross-expression fusion (:mod:`.fusion`) builds fused expression trees
out of these statements; the trees use the node classes below.

Expression nodes have identity (two ``A(i,j)`` leaves are different nodes) so that the fusion table can
give every use of a tensor its own column. ``free`` is the tuple of free (unreduced) indices in first-use
order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ProgramError
from ..samml import expr as ast
from ..tensors.fixed import FLOAT_UNARY_OPS
from ..tensors.fixedfn import ZERO_PRESERVING_FUNCTIONS

UNARY = ast.UNARY_FUNCS
REDUCERS = ast.REDUCTIONS
#: f(0) == 0: iterating only the stored entries is exact. Any other unary function (exp, sigmoid, rsqrt,
#: log) is computed over every coordinate of its argument's dimensions.
ZERO_PRESERVING = ("neg", "relu") + ZERO_PRESERVING_FUNCTIONS
#: Operations of the sugar lowering (:mod:`.lower_sugar`) that iterate like a product: only where every
#: operand that has the index stores a coordinate (softmax's ``exp(S - max)`` and ``E / sum`` over the stored
#: entries of ``S``; absent entries stay absent). Not part of the language; the ALU op is the name
#: without the ``@``.
ON_STORED = "@"
ON_STORED_BIN = ("-@", "/@")
#: the largest tensor order that graph.json (its schema), the simulator's tensor files and the hardware's
#: level memories carry; the compiler refuses larger tensors (the frontend's declarations, the fusion's
#: temporaries) instead of writing a graph nothing can load
MAX_TENSOR_ORDER = 6


class Node:
    """Base of expression nodes."""
    free: tuple = ()

    def children(self):
        return ()

    def walk(self):
        """Pre-order traversal."""
        yield self
        for c in self.children():
            yield from c.walk()

    def leaves(self):
        return [n for n in self.walk() if isinstance(n, Leaf)]

    def all_indices(self):
        """Every index used in the subtree (free and reduced), first-use order."""
        out = []
        for n in self.walk():
            idx = n.idx if isinstance(n, (Leaf, Red, Sugar)) else ()
            for i in idx:
                if i not in out:
                    out.append(i)
        return out


class Leaf(Node):
    """A use of a tensor: ``A(i,k)``; ``idx[d]`` indexes tensor dimension ``d``."""

    def __init__(self, tensor, idx, stmt=None):
        self.tensor = tensor
        self.idx = tuple(idx)
        self.free = tuple(self.idx)
        self.stmt = stmt          # the statement instance this use comes from (for error messages)

    def __repr__(self):
        return f"{self.tensor}({','.join(self.idx)})"


#: a coordinate mask is a leaf whose "tensor" is ``mask[<canonical pattern>]`` (``#n`` appended when the same
#: pattern is used over spaces of different sizes): it has a :class:`TensorInfo` of role ``mask`` (shape from
#: the statement's other operands, a dense outer level and a pattern inner level), no data, and is read by a
#: ``mask_scan`` (see docs/language.md, "Coordinate masks")
MASK_PREFIX = "mask["


def is_mask(name):
    """Is ``name`` a coordinate mask's pseudo-tensor?"""
    return name.startswith(MASK_PREFIX)


def mask_pattern(name):
    """The canonical pattern text of a mask pseudo-tensor ``mask[<pattern>]#n``."""
    return name[len(MASK_PREFIX):name.rindex("]")]


class Lit(Node):
    """A numeric constant."""

    def __init__(self, value):
        self.value = float(value)
        self.free = ()

    def __repr__(self):
        v = self.value
        return repr(int(v)) if v == int(v) and abs(v) < 1e15 else repr(v)


class Bin(Node):
    """A binary operation: ``+ - * /``."""

    def __init__(self, op, a, b):
        self.op, self.a, self.b = op, a, b
        self.free = _merge(a.free, b.free)

    def children(self):
        return (self.a, self.b)

    def __repr__(self):
        return f"({self.a!r} {self.op} {self.b!r})"


class Fn(Node):
    """A unary function (:data:`UNARY`): ``neg relu exp sigmoid tanh gelu sqrt rsqrt log abs square``."""

    def __init__(self, fn, a):
        self.fn, self.a = fn, a
        self.free = a.free

    def children(self):
        return (self.a,)

    def __repr__(self):
        return f"{self.fn}({self.a!r})"


class Red(Node):
    """A reduction ``sum[k](body)``, ``max[k](body)`` or ``min[k](body)`` over one or more indices."""

    def __init__(self, op, idx, body):
        self.op, self.idx, self.body = op, tuple(idx), body
        self.free = tuple(i for i in body.free if i not in self.idx)

    def children(self):
        return (self.body,)

    def __repr__(self):
        return f"{self.op}[{','.join(self.idx)}]({self.body!r})"


class Sugar(Node):
    """``softmax[j](e)``, ``layernorm[j](e, gain, bias)``, ``mean[j](e)`` before :mod:`.lower_sugar`
    replaces them with primitive statements. ``params``: dict (``eps``)."""

    def __init__(self, op, idx, args, params=None):
        self.op, self.idx, self.args, self.params = op, tuple(idx), tuple(args), dict(params or {})
        free = args[0].free
        if op == "mean":
            free = tuple(i for i in free if i not in self.idx)
        for a in args[1:]:
            free = _merge(free, a.free)
        self.free = free

    def children(self):
        return self.args

    def __repr__(self):
        return to_text(self)


def _merge(a, b):
    return tuple(a) + tuple(i for i in b if i not in a)


def from_ast(node, stmt=None):
    """Convert a parsed :mod:`fuseflow.samml.expr` tree into IR nodes (constants folded)."""
    if isinstance(node, ast.Access):
        return Leaf(node.name, node.indices, stmt)
    if isinstance(node, ast.Mask):
        return Leaf(f"{MASK_PREFIX}{node.spec}]", node.indices, stmt)
    if isinstance(node, ast.Const):
        return Lit(node.value)
    if isinstance(node, ast.Call):
        a = from_ast(node.arg, stmt)
        if isinstance(a, Lit) and node.fn in UNARY:
            return Lit(FLOAT_UNARY_OPS[node.fn](a.value))
        if isinstance(a, Lit):
            raise ProgramError(f"line {getattr(node, 'line', 0) or '?'}", f"{node.fn}() of a constant is not supported")
        return Fn(node.fn, a)
    if isinstance(node, ast.Reduce):
        return Red(node.op, node.indices, from_ast(node.body, stmt))
    if isinstance(node, ast.Sugar):
        return Sugar(node.op, node.indices, [from_ast(a, stmt) for a in node.args], dict(node.params))
    if isinstance(node, ast.BinOp):
        a, b = from_ast(node.lhs, stmt), from_ast(node.rhs, stmt)
        if isinstance(a, Lit) and isinstance(b, Lit):
            x, y = a.value, b.value
            if node.op == "/" and y == 0:
                return Bin(node.op, a, b)
            return Lit({"+": x + y, "-": x - y, "*": x * y, "/": (x / y) if y else 0.0}[node.op])
        return Bin(node.op, a, b)
    raise TypeError(f"unknown expression node {node!r}")


def to_text(node):
    """The node as index-notation text that :func:`fuseflow.samml.expr.parse_statement` reads back."""
    if isinstance(node, Leaf):
        name = node.tensor.split("#")[0] if is_mask(node.tensor) else node.tensor
        return f"{name}({','.join(node.idx)})"
    if isinstance(node, Lit):
        return repr(node)
    if isinstance(node, Bin):
        return f"({to_text(node.a)} {node.op} {to_text(node.b)})"
    if isinstance(node, Fn):
        return f"{node.fn}({to_text(node.a)})"
    if isinstance(node, Red):
        return f"{node.op}[{','.join(node.idx)}]({to_text(node.body)})"
    if isinstance(node, Sugar):
        extra = "".join(f", {k}={v!r}" for k, v in node.params.items() if v != ast.SUGAR[node.op][k])
        return f"{node.op}[{','.join(node.idx)}{extra}]({', '.join(to_text(a) for a in node.args)})"
    raise TypeError(node)


def rename(node, mapping, stmt=None):
    """A copy of ``node`` with indices renamed by ``mapping`` (indices not in it are kept)."""
    m = mapping.get
    if isinstance(node, Leaf):
        return Leaf(node.tensor, tuple(m(i, i) for i in node.idx), stmt if stmt is not None else node.stmt)
    if isinstance(node, Lit):
        return Lit(node.value)
    if isinstance(node, Bin):
        return Bin(node.op, rename(node.a, mapping, stmt), rename(node.b, mapping, stmt))
    if isinstance(node, Fn):
        return Fn(node.fn, rename(node.a, mapping, stmt))
    if isinstance(node, Red):
        return Red(node.op, tuple(m(i, i) for i in node.idx), rename(node.body, mapping, stmt))
    if isinstance(node, Sugar):
        return Sugar(node.op, tuple(m(i, i) for i in node.idx), [rename(a, mapping, stmt) for a in node.args],
                     node.params)
    raise TypeError(node)


def reduced_indices(node):
    """Every index reduced anywhere in the subtree."""
    out = []
    for n in node.walk():
        if isinstance(n, Red):
            out += [i for i in n.idx if i not in out]
    return out


@dataclass
class TensorInfo:
    """A tensor of the source program.

    Inputs carry their declared ``levels`` and ``mode_order``; outputs and intermediates get theirs from
    the compiler (every level compressed, mode order = the producing kernel's iteration order).
    """
    name: str
    shape: tuple
    role: str                       # "input", "output" or "intermediate"
    levels: tuple = None
    mode_order: tuple = None
    line: int = 0
    density: float = None           # expected fraction of nonzeros (inputs; None: the passes' default)
    block: int = None               # B of a blocked tensor (bcsr:B ...); after the blocks pass shape is in blocks

    @property
    def order(self):
        return len(self.shape)

    @property
    def format_name(self):
        if self.levels is None:
            return "-"
        from ..tensors import TensorFormat
        return TensorFormat(tuple(self.levels), tuple(self.mode_order),
                            (self.block,) * self.order if self.block else ()).name


@dataclass
class Stmt:
    """One statement ``lhs(idx) = rhs`` with its dataflow-order constraints (chains of index names)."""
    id: int
    lhs: str
    idx: tuple
    rhs: Node
    line: int = 0
    text: str = ""
    orders: list = field(default_factory=list)
    synthetic: bool = False         # a sub-expression the compiler materialised (not in the source)
    shown: Node = None              # the source's right side when a pass rewrote it (graph.json's expr)
    segment: int = 0                # barriers before it in the source: kernels never fuse across them

    @property
    def indices(self):
        """Every index of the statement (free and reduced)."""
        out = list(self.idx)
        out += [i for i in self.rhs.all_indices() if i not in out]
        return out

    def __str__(self):
        return f"{self.lhs}({','.join(self.idx)}) = {to_text(self.rhs)}"


@dataclass
class ProgramIR:
    """A whole source program: tensors, statements in order, fusion regions (lists of statement ids)."""
    name: str
    tensors: dict
    stmts: list
    regions: list = field(default_factory=list)

    @property
    def outputs(self):
        return [t.name for t in self.tensors.values() if t.role == "output"]

    @property
    def inputs(self):
        return [t.name for t in self.tensors.values() if t.role == "input"]

    def __str__(self):
        """The IR as text (``--dump-after`` of an IR stage): tensors with format and role, statements, regions."""
        lines = [f"program {self.name}"]
        for t in self.tensors.values():
            density = f" density {t.density}" if t.density is not None else ""
            block = f" block {t.block}" if t.block else ""
            levels = ",".join(t.levels) if t.levels else "-"
            mode = f" mode order {','.join(map(str, t.mode_order))}" if t.mode_order and \
                list(t.mode_order) != sorted(t.mode_order) else ""
            lines.append(f"tensor {t.name}({', '.join(map(str, t.shape))}) : {levels}  "
                         f"# {t.role}{mode}{density}{block}")
        lhs = {s.id: s.lhs for s in self.stmts}
        for s in self.stmts:
            lines.append(str(s) + ("  # synthetic" if s.synthetic else ""))
        for r in self.regions:
            lines.append("fuse { " + ", ".join(lhs.get(i, str(i)) for i in r) + " }")
        return "\n".join(lines)

    def producer(self, name):
        for s in self.stmts:
            if s.lhs == name:
                return s
        return None

    def readers(self, name):
        return [s for s in self.stmts if any(l.tensor == name for l in s.rhs.leaves())]

    def expr_text(self):
        """All statements as text (what graph.json's ``expr`` holds; the NumPy evaluator reads it).

        Index names are local to a statement, but :func:`fuseflow.samml.expr.evaluate` binds index sizes
        across the statements it evaluates together; an index whose size differs from an earlier
        statement's is renamed (``j`` -> ``j_3``) so that the text evaluates as the program does."""
        seen, parts = {}, []
        for s in self.stmts:
            if s.synthetic:
                continue
            sizes = {}
            for leaf in (s.shown if s.shown is not None else s.rhs).leaves():
                t = self.tensors.get(leaf.tensor)
                if t is not None:
                    for i, d in zip(leaf.idx, t.shape):
                        sizes.setdefault(i, d)
            mapping = {}
            for i, d in sizes.items():
                if seen.get(i, d) != d:
                    n = s.id
                    new = f"{i}_{n}"
                    while new in seen or new in sizes:
                        n += 1
                        new = f"{i}_{n}"
                    mapping[i] = new
            for i, d in sizes.items():
                seen[mapping.get(i, i)] = d
            idx = [mapping.get(i, i) for i in s.idx]
            shown = s.shown if s.shown is not None else s.rhs
            parts.append(f"{s.lhs}({','.join(idx)}) = {to_text(rename(shown, mapping))}")
        return "; ".join(parts)


def check_index_sizes(stmt, tensors):
    """Bind index sizes for one statement; raise ProgramError on mismatches. Returns {index: size}."""
    sizes = {}
    for leaf in stmt.rhs.leaves():
        if is_mask(leaf.tensor):
            continue                     # a mask takes its sizes from the other operands
        t = tensors.get(leaf.tensor)
        if t is None:
            raise ProgramError(f"line {stmt.line}", f"tensor {leaf.tensor} is not declared")
        if len(leaf.idx) != t.order:
            raise ProgramError(f"line {stmt.line}", f"{leaf!r} has {len(leaf.idx)} indices but {t.name} has "
                                                    f"order {t.order}")
        for i, d in zip(leaf.idx, t.shape):
            if sizes.setdefault(i, d) != d:
                raise ProgramError(f"line {stmt.line}", f"index {i} has size {sizes[i]} elsewhere but {d} in "
                                                        f"{leaf!r}")
    return sizes


def push_masks(node):
    """``mask(i,j) * sum[d](body)`` -> ``sum[d](mask(i,j) * body)`` when the mask's indices are free in the
    reduction and not reduced by it (the same value, since the mask is 0 or 1 and does not depend on ``d``;
    likewise ``max``). Inside the reduction's scope the mask selects the coordinates *before* the reduced loop
    runs, so masked attention scores over dense Q and K do their ``d`` loop once per kept (i, j), not n^2
    times."""
    if isinstance(node, Bin):
        a, b = push_masks(node.a), push_masks(node.b)
        if node.op == "*":
            for m, other in ((a, b), (b, a)):
                if (isinstance(m, Leaf) and is_mask(m.tensor) and isinstance(other, Red)
                        and other.op in ("sum", "max") and not set(m.idx) & set(other.idx)
                        and set(m.idx) <= set(other.free)):
                    return Red(other.op, other.idx, push_masks(Bin("*", m, other.body)))
        return Bin(node.op, a, b)
    if isinstance(node, Fn):
        return Fn(node.fn, push_masks(node.a))
    if isinstance(node, Red):
        return Red(node.op, node.idx, push_masks(node.body))
    return node


def bind_masks(stmt, tensors, sizes, where):
    """Give every coordinate mask of ``stmt`` a pseudo-tensor of role ``mask`` (shape from ``sizes``) and
    check that it is a factor of a product; raises ProgramError (``where``) otherwise."""
    from ..samml.masks import check_shape, parse_mask

    def walk(node, parent):
        if isinstance(node, Leaf) and is_mask(node.tensor):
            text = f"mask[{mask_pattern(node.tensor)}]({','.join(node.idx)})"
            if not (isinstance(parent, Bin) and parent.op == "*"):
                raise ProgramError(where, f"{text} must multiply an expression (mask[...](i,j) * ...): a mask "
                                          f"selects coordinates, it has no values of its own")
            missing = [i for i in node.idx if i not in sizes]
            if missing:
                raise ProgramError(where, f"{text}: index {missing[0]} has no size (a mask takes its sizes from "
                                          f"the other operands of the statement)")
            shape = (sizes[node.idx[0]], sizes[node.idx[1]])
            spec = parse_mask(mask_pattern(node.tensor), where)
            check_shape(spec, *shape, where)
            base, n = node.tensor.split("#")[0], 1
            name = base
            while name in tensors and tuple(tensors[name].shape) != shape:
                n += 1
                name = f"{base}#{n}"
            node.tensor = name
            if name not in tensors:
                tensors[name] = TensorInfo(name, shape, "mask", ("dense", "mask"), (0, 1), stmt.line)
        for c in node.children():
            walk(c, node)
    walk(stmt.rhs, None)
