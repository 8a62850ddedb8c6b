"""Index-notation statements: parser and dense NumPy evaluator.

A graph carries the expression it computes (``"expr"`` in graph.json) so that its results can be
checked against NumPy without the compiler. The compiler's front end parses statements with the same
:func:`parse_statements`.

Grammar (one statement per line or separated by ``;``; ``#`` starts a comment)::

    statement := access '=' expr
    access    := NAME '(' [INDEX {',' INDEX}] ')'          # order-0 tensors: x()
    expr      := term {('+' | '-') term}
    term      := unary {('*' | '/') unary}
    unary     := '-' unary | atom
    atom      := NUMBER | access | FUNC '(' expr ')' | RED '[' INDEX {',' INDEX} ']' '(' expr ')'
               | SUGAR '[' INDEX {',' INDEX} {',' NAME '=' NUMBER} ']' '(' expr {',' expr} ')'
               | 'mask' '[' PATTERN ']' '(' INDEX ',' INDEX ')' | '(' expr ')'
    FUNC      := neg | relu | exp | sigmoid | tanh | gelu | sqrt | rsqrt | log | abs | square
    RED       := sum | max | min
    SUGAR     := softmax | layernorm | mean       # lowered by the compiler (fuseflow.compiler.lower_sugar)

Indices used on the right but absent on the left are summed (implicit ``sum``) at the smallest
subexpression that holds every use of the index (TACO's rule). ``max[j](...)`` reduces by maximum over
the nonzero entries of its fibre; an all-empty fibre gives 0. ``mask[PATTERN](i,j)`` is a coordinate mask
(:mod:`fuseflow.samml.masks`): 1 where the pattern keeps ``(i, j)``, else 0, with no tensor behind it; its
index sizes come from the other operands of the statement. (The simulator takes the maximum over the *stored*
entries it visits; the two differ only where a fibre stores explicit zeros and all its other entries are
negative, which dense evaluation cannot see.) ``min[j](...)`` is the same with the minimum.

Functions are evaluated in float64 as :data:`fuseflow.tensors.fixed.FLOAT_UNARY_ARRAY_OPS` defines them
(``gelu`` is the erf form ``x * Phi(x)``). A name followed by ``(`` that is neither a function nor a
tensor access (an index list) is an error: ``unknown function 'foo'``.

Sugar (``docs/language.md``): ``softmax[j](e)`` normalises ``exp`` over the *stored* coordinates of each
fibre of ``e`` along ``j`` (absent entries count as minus infinity; here: the nonzero entries, as for
``max``); a fibre with no entry stays empty (0). ``layernorm[j](e [, gain [, bias]])`` (``eps=1e-5`` by
default, ``layernorm[j, eps=0.001](...)``) normalises each fibre along ``j`` to mean 0 and variance 1 over
the whole dimension (absent entries count as 0, the result is dense), then multiplies by ``gain`` and adds
``bias``. ``mean[j](e)`` is ``sum[j](e)`` divided by the size of ``j``.
"""

import math
import re
from dataclasses import dataclass

import numpy as np

from .. import limits
from ..errors import ProgramError
from ..tensors.fixed import FLOAT_UNARY_ARRAY_OPS

UNARY_FUNCS = ("neg", "relu", "exp", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square")
REDUCTIONS = ("sum", "max", "min")
#: operators that the compiler lowers to primitive statements; their parameters with defaults
SUGAR = {"softmax": {}, "layernorm": {"eps": 1e-5}, "mean": {}}
#: how many expression arguments each takes (min, max): layernorm's optional gain and bias
SUGAR_ARGS = {"softmax": (1, 1), "layernorm": (1, 3), "mean": (1, 1)}


@dataclass(frozen=True)
class Access:
    name: str
    indices: tuple

    def __str__(self):
        return f"{self.name}({','.join(self.indices)})"


@dataclass(frozen=True)
class Const:
    value: float

    def __str__(self):
        return repr(self.value)


@dataclass(frozen=True)
class BinOp:
    op: str
    lhs: object
    rhs: object

    def __str__(self):
        return f"({self.lhs} {self.op} {self.rhs})"


@dataclass(frozen=True)
class Call:
    fn: str
    arg: object

    def __str__(self):
        return f"{self.fn}({self.arg})"


@dataclass(frozen=True)
class Reduce:
    op: str
    indices: tuple
    body: object

    def __str__(self):
        return f"{self.op}[{','.join(self.indices)}]({self.body})"


@dataclass(frozen=True)
class Sugar:
    """``softmax[j](e)``, ``layernorm[j, eps=...](e, gain, bias)``, ``mean[j](e)``: ``params`` is a tuple of
    (name, value) pairs (defaults filled in)."""
    op: str
    indices: tuple
    args: tuple
    params: tuple = ()

    def __str__(self):
        extra = "".join(f", {k}={v!r}" for k, v in self.params if v != SUGAR[self.op][k])
        return f"{self.op}[{','.join(self.indices)}{extra}]({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Mask:
    """A coordinate mask ``mask[spec](i,j)``; ``spec`` is the pattern's canonical text."""
    spec: str
    indices: tuple

    def __str__(self):
        return f"mask[{self.spec}]({','.join(self.indices)})"


@dataclass(frozen=True)
class Statement:
    lhs: Access
    rhs: object
    line: int = 1

    def __str__(self):
        return f"{self.lhs} = {self.rhs}"


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+\.\d*(?:[eE][-+]?\d+)?|\d*\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>[-+*/=(),\[\]]))")


class _Parser:
    def __init__(self, text, line, col0=1):
        self.text, self.line, self.col0 = text, line, col0
        self.toks = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                self.error(pos + len(text[pos:]) - len(text[pos:].lstrip()), f"unexpected character "
                           f"{text[pos:].lstrip()[0]!r}")
            kind = m.lastgroup
            self.toks.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
            if kind == "name" and m.group(kind) == "mask":
                # a mask pattern (``bigbird:block=4,...``) is one token: its text is not index notation
                mm = re.compile(r"\s*\[([^\]]*)\]").match(text, pos)
                if mm:
                    self.toks.append(("pattern", mm.group(1), mm.start(1)))
                    pos = mm.end()
        self.i = 0
        self.depth = 0
        self.max_depth = limits.EXPR_DEPTH.value

    def nest(self, pos):
        """One level deeper (parentheses, unary minus, a call): refuse pathological nesting before Python's
        recursion limit does."""
        self.depth += 1
        if self.depth > self.max_depth:
            self.error(pos, f"expression nested deeper than {self.max_depth} levels (set "
                            f"{limits.EXPR_DEPTH.env} to raise the limit)")

    def error(self, pos, why):
        raise ProgramError(f"line {self.line}, column {pos + self.col0}", why)

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "", len(self.text))

    def take(self, value=None, kind=None):
        tok = self.peek()
        if (value is not None and tok[1] != value) or (kind is not None and tok[0] != kind):
            want = repr(value) if value else kind
            got = "end of statement" if tok[0] == "end" else repr(tok[1])
            self.error(tok[2], f"expected {want}, got {got}")
        self.i += 1
        return tok

    def statement(self):
        lhs = self.access(self.take(kind="name"))
        self.take("=")
        rhs = self.expr()
        if self.peek()[0] != "end":
            self.error(self.peek()[2], f"unexpected {self.peek()[1]!r}")
        return Statement(lhs, rhs, self.line)

    def index_list(self, close):
        """Comma-separated index names up to ``close`` (which is consumed)."""
        idx = []
        if self.peek()[1] != close:
            idx.append(self.take(kind="name")[1])
            while self.peek()[1] == ",":
                self.take(",")
                idx.append(self.take(kind="name")[1])
        self.take(close)
        return idx

    def is_index_list(self):
        """At ``(``: is what follows an index list ``(i, j)`` (a tensor access) rather than an expression?"""
        toks = self.toks[self.i + 1:]
        if toks and toks[0][1] == ")":
            return True
        # ``x(j`` at the end of the statement is an access whose ')' is missing (index_list says so)
        if len(toks) == 1 and toks[0][0] == "name":
            return True
        return len(toks) >= 2 and toks[0][0] == "name" and toks[1][1] in (",", ")")

    def access(self, name_tok):
        self.take("(")
        idx = self.index_list(")")
        if len(set(idx)) != len(idx):
            self.error(name_tok[2], f"tensor {name_tok[1]} uses an index twice: ({','.join(idx)})")
        return Access(name_tok[1], tuple(idx))

    def expr(self):
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            node = BinOp(op, node, self.term())
        return node

    def term(self):
        node = self.unary()
        while self.peek()[1] in ("*", "/"):
            op = self.take()[1]
            node = BinOp(op, node, self.unary())
        return node

    def unary(self):
        if self.peek()[1] == "-":
            self.nest(self.peek()[2])
            self.take("-")
            node = Call("neg", self.unary())
            self.depth -= 1
            return node
        return self.atom()

    def atom(self):
        kind, value, pos = self.peek()
        if kind == "num":
            self.take()
            number = float(value)
            if not math.isfinite(number):
                self.error(pos, f"number {value} is too large")
            return Const(number)
        if value in ("(", "[") or (kind == "name" and self.i + 1 < len(self.toks)
                                   and self.toks[self.i + 1][1] in ("(", "[")):
            self.nest(pos)
            node = self._nested_atom(kind, value, pos)
            self.depth -= 1
            return node
        return self._nested_atom(kind, value, pos)

    def _nested_atom(self, kind, value, pos):
        if value == "(":
            self.take("(")
            node = self.expr()
            self.take(")")
            return node
        if kind == "name":
            self.take()
            nxt = self.peek()[1]
            if value in REDUCTIONS and nxt == "[":
                self.take("[")
                idx = self.index_list("]")
                if not idx:
                    self.error(pos, f"{value}[...] needs at least one index")
                self.take("(")
                body = self.expr()
                self.take(")")
                return Reduce(value, tuple(idx), body)
            if value in SUGAR and nxt == "[":
                return self.sugar(value, pos)
            if value == "mask" and self.peek()[0] == "pattern":
                return self.mask(pos)
            if value in UNARY_FUNCS and nxt == "(":
                self.take("(")
                arg = self.expr()
                self.take(")")
                return Call(value, arg)
            if nxt == "[":
                self.error(pos, f"unknown reduction {value!r} (known: {', '.join(REDUCTIONS + tuple(SUGAR))})")
            if nxt == "(":
                if not self.is_index_list():
                    self.error(pos, f"unknown function {value!r} (known: {', '.join(UNARY_FUNCS)}; a tensor is "
                                    f"indexed by index names only, e.g. {value}(i,j))")
                return self.access((kind, value, pos))
            self.error(pos, f"{value!r} needs an index list, e.g. {value}(i,j)")
        self.error(pos, "expected a tensor, number, function or '('" if kind != "end" else
                   "expression ends too early")

    def sugar(self, op, pos):
        self.take("[")
        idx, params, named = [], dict(SUGAR[op]), False
        while True:
            tok = self.take(kind="name")
            if self.peek()[1] == "=":
                self.take("=")
                if tok[1] not in params:
                    self.error(tok[2], f"{op}[...] has no parameter {tok[1]!r}"
                               + (f" (it has: {', '.join(params)})" if params else ""))
                sign = -1.0 if self.peek()[1] == "-" and self.take("-") else 1.0
                params[tok[1]] = sign * float(self.take(kind="num")[1])
                named = True
            elif named:
                self.error(tok[2], f"indices of {op}[...] come before its parameters")
            else:
                idx.append(tok[1])
            if self.peek()[1] != ",":
                break
            self.take(",")
        self.take("]")
        if not idx:
            self.error(pos, f"{op}[...] needs at least one index")
        if len(set(idx)) != len(idx):
            self.error(pos, f"{op}[{','.join(idx)}] names an index twice")
        if op == "layernorm" and params["eps"] <= 0:
            self.error(pos, f"layernorm: eps must be positive, got {params['eps']!r}")
        self.take("(")
        args = [self.expr()]
        while self.peek()[1] == ",":
            self.take(",")
            args.append(self.expr())
        lo, hi = SUGAR_ARGS[op]
        if not lo <= len(args) <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            self.error(pos, f"{op}[...] takes {want} argument{'s' if hi > 1 else ''}, got {len(args)}")
        self.take(")")
        free = free_indices(args[0])
        for i in idx:
            if i not in free:
                self.error(pos, f"{op}[{','.join(idx)}]: index {i} is not an index of its argument "
                                f"{args[0]} (its indices: {', '.join(free) or 'none'})")
        for a in args[1:]:
            extra = [i for i in free_indices(a) if i not in free]
            if extra:
                self.error(pos, f"{op}: gain/bias {a} uses {', '.join(extra)}, which {args[0]} does not have")
        return Sugar(op, tuple(idx), tuple(args), tuple(params.items()))


    def mask(self, pos):
        from .masks import parse_mask
        _, text, ppos = self.take(kind="pattern")
        try:
            spec = parse_mask(text, f"line {self.line}, column {ppos + self.col0}")
        except ProgramError:
            raise
        self.take("(")
        idx = self.index_list(")")
        if len(idx) != 2 or idx[0] == idx[1]:
            self.error(pos, f"mask[{spec.text}] takes two different indices (row, column), got "
                            f"({','.join(idx)})")
        return Mask(spec.text, tuple(idx))


def parse_statement(text, line=1, col0=1):
    """Parse one statement; implicit reductions are made explicit (see module doc)."""
    parser = _Parser(text, line, col0)
    st = parser.statement()
    if _depth(st.rhs) > parser.max_depth:      # long operator chains: a deep tree without parentheses
        parser.error(0, f"expression nested deeper than {parser.max_depth} levels (set {limits.EXPR_DEPTH.env} "
                        f"to raise the limit)")
    return Statement(st.lhs, make_reductions_explicit(st.rhs, set(st.lhs.indices)), line)


def _depth(node):
    """Depth of an expression tree (iteratively: the tree may be too deep for recursion)."""
    best, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        best = max(best, d)
        for child in (getattr(n, "lhs", None), getattr(n, "rhs", None), getattr(n, "arg", None),
                      getattr(n, "body", None)):
            if child is not None and not isinstance(child, str):
                stack.append((child, d + 1))
    return best


def parse_statements(text):
    """Parse statements separated by newlines or ';' (comments start with '#')."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0]
        col = 1
        for part in line.split(";"):
            if part.strip():
                out.append(parse_statement(part, lineno, col))
            col += len(part) + 1
    return out


def free_indices(node):
    """Indices used (and not reduced) in ``node``, in first-use order."""
    if isinstance(node, (Access, Mask)):
        return list(node.indices)
    if isinstance(node, Const):
        return []
    if isinstance(node, Call):
        return free_indices(node.arg)
    if isinstance(node, Reduce):
        return [i for i in free_indices(node.body) if i not in node.indices]
    if isinstance(node, Sugar):
        out = list(free_indices(node.args[0]))
        if node.op == "mean":
            out = [i for i in out if i not in node.indices]
        for a in node.args[1:]:
            out += [i for i in free_indices(a) if i not in out]
        return out
    out = free_indices(node.lhs)
    out += [i for i in free_indices(node.rhs) if i not in out]
    return out


def make_reductions_explicit(node, keep):
    """Wrap each index not in ``keep`` in a sum at the smallest subexpression using all its occurrences."""
    for idx in [i for i in free_indices(node) if i not in keep]:
        node = _wrap(node, idx)
    return node


def _uses(node, idx):
    return idx in free_indices(node)


def _wrap(node, idx):
    if isinstance(node, BinOp):
        l, r = _uses(node.lhs, idx), _uses(node.rhs, idx)
        if l and not r:
            return BinOp(node.op, _wrap(node.lhs, idx), node.rhs)
        if r and not l:
            return BinOp(node.op, node.lhs, _wrap(node.rhs, idx))
    if isinstance(node, Call):
        return Call(node.fn, _wrap(node.arg, idx))
    if isinstance(node, Reduce) and node.op == "sum":
        return Reduce("sum", node.indices + (idx,), node.body)
    if isinstance(node, Sugar) and idx not in node.indices:
        users = [k for k, a in enumerate(node.args) if _uses(a, idx)]
        if len(users) == 1:            # softmax[j](Q(i,d) * K(j,d)): the sum over d is inside
            args = list(node.args)
            args[users[0]] = _wrap(args[users[0]], idx)
            return Sugar(node.op, node.indices, tuple(args), node.params)
    return Reduce("sum", (idx,), node)


def tensors_used(statements):
    """Names of tensors read before they are written, in first-use order."""
    written, used = set(), []

    def visit(node):
        if isinstance(node, Access):
            if node.name not in written and node.name not in used:
                used.append(node.name)
        elif isinstance(node, BinOp):
            visit(node.lhs)
            visit(node.rhs)
        elif isinstance(node, Call):
            visit(node.arg)
        elif isinstance(node, Reduce):
            visit(node.body)
        elif isinstance(node, Sugar):
            for a in node.args:
                visit(a)

    for st in statements:
        visit(st.rhs)
        written.add(st.lhs.name)
    return used


# --- dense evaluation -------------------------------------------------------------------------

_FLOAT_UNARY = FLOAT_UNARY_ARRAY_OPS


#: a SciPy sparse input with more entries than this stays sparse while it is only read in sums of products
SPARSE_KEEP_ENTRIES = 1 << 24


class _SparseInput:
    """A large 2-D SciPy sparse input, kept as COO triplets: :func:`_einsum` reads its entries, anything else
    densifies it (as small inputs are)."""

    def __init__(self, m):
        coo = m.tocoo()
        coo.sum_duplicates()
        self.shape = coo.shape
        self.row, self.col = coo.row.astype(np.int64), coo.col.astype(np.int64)
        self.vals = coo.data.astype(np.float64)

    def dense(self):
        out = np.zeros(self.shape)
        out[self.row, self.col] = self.vals
        return out


def evaluate(statements, tensors):
    """Evaluate statements; ``tensors`` maps names to arrays (dense, or SciPy sparse: a large 2-D one stays sparse
    where a sum of products reads it, :data:`SPARSE_KEEP_ENTRIES`). Returns every written tensor, dense."""
    if isinstance(statements, str):
        statements = parse_statements(statements)
    env = {k: (_SparseInput(v) if hasattr(v, "tocoo") and len(v.shape) == 2
               and v.shape[0] * v.shape[1] > SPARSE_KEEP_ENTRIES
               else np.asarray(_dense(v), dtype=np.float64)) for k, v in tensors.items()}
    results = {}
    for st in statements:
        sizes = {}                       # index names are local to their statement
        _bind_sizes(st.rhs, env, sizes, st.line)
        arr, idx = _eval(st.rhs, env, sizes)
        for i in st.lhs.indices:
            if i not in sizes:
                raise ProgramError(f"line {st.line}", f"index {i} of {st.lhs} is not used on the right")
        out_idx = st.lhs.indices
        arr = _broadcast_to(arr, idx, out_idx, sizes)
        env[st.lhs.name] = arr
        results[st.lhs.name] = arr
    return results


def _dense(v):
    return v.toarray() if hasattr(v, "toarray") else v


def _bind_sizes(node, env, sizes, line):
    if isinstance(node, Access):
        if node.name not in env:
            raise ProgramError(f"line {line}", f"tensor {node.name} has no value")
        shape = env[node.name].shape
        if len(shape) != len(node.indices):
            raise ProgramError(f"line {line}", f"{node} has {len(node.indices)} indices but {node.name} has "
                                               f"order {len(shape)}")
        for i, d in zip(node.indices, shape):
            if sizes.setdefault(i, d) != d:
                raise ProgramError(f"line {line}", f"index {i} has size {sizes[i]} elsewhere but {d} in {node}")
    elif isinstance(node, Mask):
        pass                                  # sizes come from the other operands (checked in _eval)
    elif isinstance(node, BinOp):
        _bind_sizes(node.lhs, env, sizes, line)
        _bind_sizes(node.rhs, env, sizes, line)
    elif isinstance(node, Call):
        _bind_sizes(node.arg, env, sizes, line)
    elif isinstance(node, Reduce):
        _bind_sizes(node.body, env, sizes, line)
    elif isinstance(node, Sugar):
        for a in node.args:
            _bind_sizes(a, env, sizes, line)


def _broadcast_to(arr, idx, out_idx, sizes):
    """Transpose/broadcast ``arr`` (over ``idx``) to the index order ``out_idx``."""
    extra = [i for i in idx if i not in out_idx]
    if extra:
        raise ProgramError("expression", f"indices {extra} are neither reduced nor on the left side")
    full = list(idx) + [i for i in out_idx if i not in idx]
    arr = arr.reshape(arr.shape + (1,) * (len(full) - len(idx)))
    arr = np.transpose(arr, [full.index(i) for i in out_idx]) if out_idx else arr
    return np.broadcast_to(arr, tuple(sizes[i] for i in out_idx)).copy()


def _product_factors(node):
    if isinstance(node, BinOp) and node.op == "*":
        a, b = _product_factors(node.lhs), _product_factors(node.rhs)
        return a + b if a is not None and b is not None else None
    if isinstance(node, (Access, Const, Mask)):
        return [node]
    return None


def _mask_array(node, sizes):
    from .masks import check_shape, dense_mask, parse_mask
    missing = [i for i in node.indices if i not in sizes]
    if missing:
        raise ProgramError("expression", f"{node}: index {missing[0]} has no size (a mask takes its sizes from "
                                         f"the other operands)")
    spec = parse_mask(node.spec)
    rows, cols = sizes[node.indices[0]], sizes[node.indices[1]]
    check_shape(spec, rows, cols, str(node))
    return dense_mask(spec, rows, cols).astype(np.float64)


def _eval(node, env, sizes):
    if isinstance(node, Access):
        v = env[node.name]
        if isinstance(v, _SparseInput):
            v = env[node.name] = v.dense()      # read outside a sum of products
        return v, tuple(node.indices)
    if isinstance(node, Mask):
        return _mask_array(node, sizes), tuple(node.indices)
    if isinstance(node, Const):
        return np.asarray(node.value), ()
    if isinstance(node, Call):
        a, idx = _eval(node.arg, env, sizes)
        return _FLOAT_UNARY[node.fn](a), idx
    if isinstance(node, Reduce):
        factors = _product_factors(node.body) if node.op == "sum" else None
        if factors:
            return _einsum(factors, node.indices, env, sizes)
        a, idx = _eval(node.body, env, sizes)
        axes = tuple(idx.index(i) for i in node.indices if i in idx)
        if node.op == "sum":
            r = a.sum(axis=axes)
        else:
            r = _sparse_extreme(a, axes, node.op)
        return r, tuple(i for i in idx if i not in node.indices)
    if isinstance(node, Sugar):
        return _eval_sugar(node, env, sizes)
    a, ia = _eval(node.lhs, env, sizes)
    b, ib = _eval(node.rhs, env, sizes)
    idx = tuple(ia) + tuple(i for i in ib if i not in ia)
    a = _broadcast_to(a, ia, idx, sizes) if ia != idx else a
    b = _broadcast_to(b, ib, idx, sizes)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[node.op](a, b), idx


def _eval_sugar(node, env, sizes):
    a, idx = _eval(node.args[0], env, sizes)
    axes = tuple(idx.index(i) for i in node.indices)
    if node.op == "mean":
        n = float(np.prod([sizes[i] for i in node.indices]))
        return a.sum(axis=axes) / n, tuple(i for i in idx if i not in node.indices)
    if node.op == "softmax":
        stored = a != 0                          # absent (zero) entries are minus infinity
        m = np.where(stored, a, -np.inf).max(axis=axes, keepdims=True) if a.size else a
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.where(stored, np.exp(np.where(stored, a - m, 0.0)), 0.0)
        z = e.sum(axis=axes, keepdims=True)
        return np.divide(e, z, out=np.zeros_like(e), where=z > 0), idx
    eps = dict(node.params)["eps"]
    mu = a.mean(axis=axes, keepdims=True)
    var = ((a - mu) ** 2).mean(axis=axes, keepdims=True)
    y = (a - mu) / np.sqrt(var + eps)
    for k, extra in enumerate(node.args[1:]):
        b, ib = _eval(extra, env, sizes)
        b = _broadcast_to(b, ib, idx, sizes)
        y = y * b if k == 0 else y + b
    return y, idx


def _sparse_extreme(a, axes, op):
    """Max (or min) over the nonzero entries (the sparse semantics); 0 where a fibre has none."""
    if not a.size:
        return np.zeros([d for k, d in enumerate(a.shape) if k not in axes])
    if op == "max":
        r = np.where(a != 0, a, -np.inf).max(axis=axes)
        return np.where(np.isneginf(r), 0.0, r)
    r = np.where(a != 0, a, np.inf).min(axis=axes)
    return np.where(np.isposinf(r), 0.0, r)


def _einsum(factors, reduced, env, sizes):
    letters = {}

    def letter(i):
        if i not in letters:
            letters[i] = chr(ord("a") + len(letters))
        return letters[i]

    operands, specs, idx_out = [], [], []
    for f in factors:
        if isinstance(f, Const):
            operands.append(np.asarray(f.value))
            specs.append("")
        elif isinstance(f, Mask):
            operands.append(_mask_array(f, sizes))
            specs.append("".join(letter(i) for i in f.indices))
            idx_out += [i for i in f.indices if i not in reduced and i not in idx_out]
        else:
            operands.append(env[f.name])
            specs.append("".join(letter(i) for i in f.indices))
            idx_out += [i for i in f.indices if i not in reduced and i not in idx_out]
    sparse = [k for k, o in enumerate(operands) if isinstance(o, _SparseInput)]
    if len(sparse) == 1:
        return _einsum_one_sparse(sparse[0], operands, specs, idx_out, sizes, letter), tuple(idx_out)
    operands = [o.dense() if isinstance(o, _SparseInput) else o for o in operands]
    spec = ",".join(specs) + "->" + "".join(letter(i) for i in idx_out)
    return np.einsum(spec, *operands, optimize=True), tuple(idx_out)


def _einsum_one_sparse(k, operands, specs, idx_out, sizes, letter):
    """A sum of products with one large sparse factor ``operands[k]`` (a :class:`_SparseInput`), by its entries:
    every other factor is read at the entries' coordinates along an entry axis, the product summed over the
    reduced indices by ``np.einsum``, and the entries scattered into the output; the sparse factor is never
    densified."""
    a = operands[k]
    p, q = specs[k]
    coords, vals = {p: a.row, q: a.col}, a.vals
    used = set("".join(specs))
    e = next(c for c in "zyxwvutsrqponmlkjihgfedcba" if c not in used)     # the entry axis
    ops, subs = [vals], [e]
    for j, (o, spec) in enumerate(zip(operands, specs)):
        if j == k:
            continue
        kept = "".join(c for c in spec if c not in coords)
        first = [c for c in spec if c in coords]
        if first:
            # index with the entries' coordinates, the entry axis first (NumPy's rule for separated index arrays)
            perm = [spec.index(c) for c in first] + [spec.index(c) for c in kept]
            ops.append(np.transpose(np.asarray(o), perm)[tuple(coords[c] for c in first)])
            subs.append(e + kept)
        else:
            ops.append(o)
            subs.append(spec)
    size_of = {letter(i): sizes[i] for i in idx_out}
    out_letters = "".join(size_of)
    at = [c for c in out_letters if c in coords]          # output dimensions the entries scatter into
    rest = [c for c in out_letters if c not in coords]
    per_entry = np.einsum(",".join(subs) + "->" + (e if at else "") + "".join(rest), *ops, optimize=True)
    if not at:
        return per_entry
    out = np.zeros([size_of[c] for c in at + rest])
    np.add.at(out, tuple(coords[c] for c in at), per_entry)
    return np.transpose(out, [(at + rest).index(c) for c in out_letters])
