"""Front end: a Python API and the ``.ff`` text format, both producing a :class:`~.ir.ProgramIR`.

Python API::

    from fuseflow.compiler import EinsumProgram, compile_program
    p = EinsumProgram("gcn")
    p.tensor("A", (6, 6), "csr")
    p.tensor("X", (6, 4), "dense")
    p.tensor("W", (4, 3), "dense")
    with p.fuse():
        p.statement("T(i,j) = A(i,k) * X(k,j)", order="i,k,j")
        p.statement("H(i,h) = relu(T(i,j) * W(j,h))")
    result = compile_program(p, fuse="full")

Text format (``docs/language.md`` has the grammar)::

    tensor A(6, 6) : csr
    tensor X(6, 4) : dense
    tensor W(4, 3) : dense
    fuse {
      T(i,j) = A(i,k) * X(k,j)
      order i,k,j
      H(i,h) = relu(T(i,j) * W(j,h))
    }

Statements are parsed by :func:`fuseflow.samml.expr.parse_statement` (the one index-notation parser of the
package); this module adds declarations, ``output`` lines, ``order`` lines, ``fuse { }`` regions and
``barrier`` lines.
"""

from __future__ import annotations

import contextlib
import re

from ..errors import ProgramError, TensorError
from ..samml import expr as ast
from .ir import (MAX_TENSOR_ORDER, ProgramIR, Stmt, TensorInfo, bind_masks, check_index_sizes, from_ast, is_mask,
                 push_masks)

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_DECL = re.compile(rf"tensor\s+(?P<name>{_NAME})\s*\((?P<shape>[^)]*)\)\s*(?::\s*(?P<fmt>.*))?$")
KEYWORDS = ("tensor", "output", "order", "parallel", "tile", "fuse", "barrier", "program")
#: the lines that give one index a number (``parallel i 4``, ``tile i 1024``): what the number is, an example;
#: each is the EinsumProgram method of the same name
_INDEX_LINES = {"parallel": ("FACTOR", "parallel i 4"), "tile": ("SIZE", "tile i 1024")}


class _Decl:
    def __init__(self, name, shape, fmt, line, col, density=None):
        self.name, self.shape, self.fmt, self.line, self.col = name, shape, fmt, line, col
        self.density = density


class _StmtSrc:
    def __init__(self, text, line, col, region, segment=0):
        self.text, self.line, self.col, self.region = text, line, col, region
        self.segment = segment    # barriers before the statement
        self.orders = []          # (chain, line, col)


class EinsumProgram:
    """A source program built from Python: tensors, statements, fusion regions, outputs."""

    def __init__(self, name="program"):
        self.name = name
        self._decls = {}
        self._stmts = []
        self._outputs = []        # (name, line, col)
        self._region = None
        self._nregions = 0
        self._line = 0
        self._parallel = {}       # index -> (factor, line, col)
        self._tiles = {}          # index -> (tile size, line, col)
        self._segment = 0         # barriers so far

    # ---- building ------------------------------------------------------------------------------
    def tensor(self, name, shape, format=None, mode_order=None, *, density=None, line=None, col=1):
        """Declare a tensor. ``format``: a name (``csr``, ``dense``, ``dcsr``...), level letters (``dc``,
        ``cc:1,0``) or a list of level formats; ``mode_order`` optional. Inputs without a format are dense;
        written tensors must not be given one (the compiler chooses it). ``density``: the expected fraction
        of nonzeros of an input (sizes capacities of large tensors and the synthetic inputs the channel
        depths are profiled on; ``.ff``: ``tensor A(n, n) : csr density 0.05``). Returns the name."""
        line = self._next_line(line)
        if not re.fullmatch(_NAME, str(name)) or name in KEYWORDS:
            raise ProgramError(f"line {line}, column {col}", f"bad tensor name {name!r}")
        if name in self._decls:
            raise ProgramError(f"line {line}, column {col}", f"tensor {name} is declared twice "
                                                             f"(first on line {self._decls[name].line})")
        try:
            shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise ProgramError(f"line {line}, column {col}", f"shape of {name} must be integers, got {shape!r}") \
                from None
        if any(d < 1 for d in shape):
            raise ProgramError(f"line {line}, column {col}", f"dimensions of {name} must be positive, got {shape}")
        if density is not None:
            try:
                density = float(density)
            except (TypeError, ValueError):
                density = -1.0
            if not 0 < density <= 1:
                raise ProgramError(f"line {line}, column {col}", f"density of {name} must be in (0, 1]")
        _check_order(name, len(shape), f"line {line}, column {col}")
        if format is not None and not isinstance(format, str):
            fmt = (tuple(format), tuple(mode_order) if mode_order is not None else None)
        else:
            fmt = format if mode_order is None else (format or "dense", tuple(mode_order))
        self._decls[name] = _Decl(name, shape, fmt, line, col, density)
        return name

    def statement(self, text, order=None, *, line=None, col=1):
        """Add a statement in index notation; ``order`` (``"i,k,j"`` or a list) constrains its dataflow
        order (outer to inner). Returns the statement's position."""
        line = self._next_line(line)
        st = _StmtSrc(text, line, col, self._region, self._segment)
        self._stmts.append(st)
        if order is not None:
            self.order(order, line=line)
        return len(self._stmts) - 1

    def order(self, chain, *, line=None, col=1):
        """Constrain the dataflow order of the last statement (outer to inner)."""
        line = self._next_line(line)
        if not self._stmts:
            raise ProgramError(f"line {line}, column {col}", "'order' needs a statement before it")
        if isinstance(chain, str):
            chain = _split_chain(chain, line, col)
        chain = tuple(chain)
        if not chain:
            raise ProgramError(f"line {line}, column {col}", "'order' needs at least one index")
        self._stmts[-1].orders.append((chain, line, col))

    def output(self, *names, line=None, col=1):
        """Mark written tensors as outputs (by default every written tensor that no later statement reads
        is an output)."""
        line = self._next_line(line)
        for n in names:
            self._outputs.append((n, line, col))

    @contextlib.contextmanager
    def fuse(self):
        """Statements added inside ``with p.fuse():`` form one fusion region."""
        if self._region is not None:
            raise ProgramError(f"line {self._line}", "fuse regions cannot be nested")
        self._region = self._nregions
        self._nregions += 1
        try:
            yield self
        finally:
            self._region = None

    def barrier(self, *, line=None, col=1):
        """A fusion barrier: no kernel fuses a statement before it with one after it, at any granularity
        (FuseFlow's reshapes; docs/language.md, "Barriers"). Not allowed inside a fusion region."""
        line = self._next_line(line)
        if self._region is not None:
            raise ProgramError(f"line {line}, column {col}", "a barrier cannot be inside a fuse region (close "
                                                             "the region with '}' first)")
        self._segment += 1
        return self

    def _next_line(self, line):
        if line is None:
            self._line += 1
            return self._line
        self._line = line
        return line

    def parallel(self, index, factor, *, line=None, col=1):
        """Run the sub-tree below ``index`` on ``factor`` lanes (``parallel i 4``; see docs/compiler.md,
        "Parallel lanes"): every kernel that has ``index`` is parallelized at its place in the kernel's order."""
        from .lanes import check_factor
        return self._per_index(self._parallel, "parallel", index, factor, check_factor, line, col)

    def tile(self, index, size, *, line=None, col=1):
        """Split ``index`` into tiles of ``size`` (``tile i 1024``; docs/tiling.md): the program runs once per
        non-empty tile, its tensors loaded from and stored to off-chip memory."""
        from .tiling import check_size
        return self._per_index(self._tiles, "tile", index, size, check_size, line, col)

    def _per_index(self, table, keyword, index, value, check, line, col):
        """A ``KEYWORD INDEX VALUE`` line: ``check(index, value, where)`` into ``table`` (once per index)."""
        line = self._next_line(line)
        where = f"line {line}, column {col}"
        if index in table:
            raise ProgramError(where, f"{keyword} {index} is given twice (first on line {table[index][1]})")
        table[index] = (check(index, value, where), line, col)
        return self

    @property
    def tile_sizes(self):
        """{index: size} of the program's ``tile`` lines."""
        return {i: s for i, (s, _, _) in getattr(self, "_tiles", {}).items()}

    @property
    def parallel_factors(self):
        """{index: factor} of the program's ``parallel`` lines."""
        return {i: f for i, (f, _, _) in self._parallel.items()}

    # ---- text format ---------------------------------------------------------------------------
    @classmethod
    def parse(cls, text, name=None):
        """Parse the ``.ff`` text format (see ``docs/language.md``)."""
        p = cls(name or "program")
        open_line = None
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].rstrip()
            stripped = line.strip()
            if not stripped:
                continue
            col = len(line) - len(line.lstrip()) + 1
            word = re.match(_NAME, stripped)
            word = word.group(0) if word else ""
            if word == "fuse" and re.fullmatch(r"fuse\s*\{", stripped):
                if open_line is not None:
                    raise ProgramError(f"line {lineno}, column {col}", f"fuse regions cannot be nested (the "
                                                                       f"region of line {open_line} is still open)")
                open_line = lineno
                p._region = p._nregions
                p._nregions += 1
                continue
            if stripped == "}":
                if open_line is None:
                    raise ProgramError(f"line {lineno}, column {col}", "'}' without an open 'fuse {'")
                open_line = None
                p._region = None
                continue
            if word == "fuse":
                raise ProgramError(f"line {lineno}, column {col}", "expected 'fuse {' on a line of its own")
            if word == "barrier" and "=" not in stripped:
                if stripped != "barrier":
                    raise ProgramError(f"line {lineno}, column {col}", f"expected 'barrier' on a line of its own, "
                                                                       f"got {stripped!r}")
                if open_line is not None:
                    raise ProgramError(f"line {lineno}, column {col}", f"a barrier cannot be inside a fuse region "
                                                                       f"(the region of line {open_line} is open)")
                p.barrier(line=lineno, col=col)
                continue
            if word == "program" and "=" not in stripped:
                rest = stripped[len("program"):].strip()
                if not re.fullmatch(_NAME, rest):
                    raise ProgramError(f"line {lineno}, column {col + 8}", f"expected a program name, got {rest!r}")
                p.name = rest
                continue
            if word == "tensor" and "=" not in stripped:
                _parse_decl(p, stripped, lineno, col)
                continue
            if word == "output" and "=" not in stripped:
                rest = stripped[len("output"):]
                names = [n.strip() for n in rest.split(",")]
                pos = col + len("output")
                for n in names:
                    if not re.fullmatch(_NAME, n):
                        raise ProgramError(f"line {lineno}, column {pos + 1}", f"expected a tensor name, got {n!r}")
                p.output(*names, line=lineno, col=col)
                continue
            if word in _INDEX_LINES and "=" not in stripped:
                what, example = _INDEX_LINES[word]
                rest = stripped[len(word):].split()
                if len(rest) != 2 or not re.fullmatch(_NAME, rest[0]):
                    raise ProgramError(f"line {lineno}, column {col}", f"expected '{word} INDEX {what}' (e.g. "
                                                                       f"'{example}'), got {stripped!r}")
                getattr(p, word)(rest[0], rest[1], line=lineno, col=col)
                continue
            if word == "order" and "=" not in stripped:
                p.order(_split_chain(stripped[len("order"):], lineno, col + len("order")), line=lineno, col=col)
                continue
            if "=" not in stripped:
                raise ProgramError(f"line {lineno}, column {col}", f"expected a statement, 'tensor', 'output', "
                                                                   f"'order', 'barrier' or 'fuse {{', got {stripped!r}")
            col = 1
            for part in line.split(";"):            # several statements on a line: a; b
                if part.strip():
                    p.statement(part, line=lineno, col=col)
                col += len(part) + 1
        if open_line is not None:
            raise ProgramError(f"line {open_line}", "'fuse {' is never closed with '}'")
        return p

    # ---- lowering to the IR --------------------------------------------------------------------
    def to_ir(self):
        """Check the program and return its :class:`~.ir.ProgramIR`; raises ProgramError."""
        tensors = {}
        for d in self._decls.values():
            tensors[d.name] = TensorInfo(d.name, d.shape, "input", line=d.line, density=d.density)
        stmts, written, regions = [], {}, {}
        for n, src in enumerate(self._stmts):
            st = ast.parse_statement(src.text, src.line, src.col)
            where = f"line {src.line}"
            lhs = st.lhs.name
            rhs = from_ast(st.rhs)
            stmt = Stmt(n, lhs, tuple(st.lhs.indices), rhs, src.line, src.text.strip(), segment=src.segment)
            for leaf in rhs.leaves():
                leaf.stmt = n
                if leaf.tensor not in tensors and not is_mask(leaf.tensor):
                    raise ProgramError(_at(src, leaf.tensor), f"tensor {leaf.tensor} is not declared"
                                       + (" (it is written later)" if any(_lhs_name(s) == leaf.tensor
                                                                          for s in self._stmts[n + 1:]) else ""))
            if lhs in written:
                raise ProgramError(_at(src, lhs), f"tensor {lhs} is written twice (first on line {written[lhs]})")
            decl = self._decls.get(lhs)
            if decl is not None and decl.fmt is not None:
                raise ProgramError(_at(src, lhs), f"{lhs} is declared with a format on line {decl.line} but is "
                                                  f"written here (written tensors get their format from the "
                                                  f"compiler: declare only the shape)")
            sizes = check_index_sizes(stmt, tensors)
            bind_masks(stmt, tensors, sizes, where)
            stmt.rhs = push_masks(stmt.rhs)
            for i in stmt.idx:
                if i not in rhs.free:
                    raise ProgramError(_at(src, lhs), f"index {i} of {lhs}({','.join(stmt.idx)}) is not used on "
                                                      f"the right side")
            shape = tuple(sizes[i] for i in stmt.idx)
            _check_order(lhs, len(shape), _at(src, lhs))
            if decl is not None and tuple(decl.shape) != shape:
                raise ProgramError(_at(src, lhs), f"{lhs} is declared with shape {tuple(decl.shape)} but the "
                                                  f"statement gives {shape}")
            tensors[lhs] = TensorInfo(lhs, shape, "intermediate", line=src.line)
            written[lhs] = src.line
            for chain, oline, ocol in src.orders:
                known = stmt.indices
                for i in chain:
                    if i not in known:
                        raise ProgramError(f"line {oline}, column {ocol}",
                                           f"order names index {i}, which statement {lhs} (line {src.line}) does "
                                           f"not use (its indices: {', '.join(known)})")
                if len(set(chain)) != len(chain):
                    raise ProgramError(f"line {oline}, column {ocol}", f"order repeats an index: {','.join(chain)}")
                stmt.orders.append(tuple(chain))
            stmts.append(stmt)
            if src.region is not None:
                regions.setdefault(src.region, []).append(n)
        if not stmts:
            raise ProgramError("program", "has no statements")
        # inputs: declared and never written; check their formats
        for d in self._decls.values():
            if d.name in written:
                continue
            t = tensors[d.name]
            t.levels, t.mode_order, t.block = _parse_format(d, len(d.shape))
        # outputs: written tensors nobody reads later, plus explicit ones
        explicit = set()
        for name, line, col in self._outputs:
            if name not in written:
                what = "an input" if name in tensors else "not declared"
                raise ProgramError(f"line {line}, column {col}", f"output {name} is {what}; only written tensors "
                                                                 f"can be outputs")
            explicit.add(name)
        for s in stmts:
            later = any(l.tensor == s.lhs for t in stmts[s.id + 1:] for l in t.rhs.leaves())
            if not later or s.lhs in explicit:
                tensors[s.lhs].role = "output"
        ordered = [regions[k] for k in sorted(regions)]
        return ProgramIR(self.name, tensors, stmts, ordered)


def _check_order(name, order, where):
    if order > MAX_TENSOR_ORDER:
        raise ProgramError(where, f"{name} has order {order}: tensors of order at most {MAX_TENSOR_ORDER} are "
                                  f"supported (graph.json, the simulator and the hardware); merge two "
                                  f"indices into one or split the tensor")


def _lhs_name(src):
    m = re.match(rf"\s*({_NAME})", src.text)
    return m.group(1) if m else None


def _at(src, name):
    """'line L, column C' of the first use of ``name`` in a statement's text."""
    m = re.search(rf"\b{re.escape(name)}\s*\(", src.text)
    col = src.col + (m.start() if m else 0)
    return f"line {src.line}, column {col}"


def _split_chain(text, line, col):
    parts = [p.strip() for p in re.split(r",|->", text)]
    if parts == [""]:
        raise ProgramError(f"line {line}, column {col}", "'order' needs index names, e.g. 'order i,k,j'")
    for p in parts:
        if not re.fullmatch(_NAME, p):
            raise ProgramError(f"line {line}, column {col}", f"expected an index name in 'order', got {p!r}")
    return tuple(parts)


def _parse_decl(p, stripped, lineno, col):
    density = None
    dm = re.search(r"\s+density\s+(\S+)\s*$", stripped)
    if dm:
        try:
            density = float(dm.group(1))
        except ValueError:
            raise ProgramError(f"line {lineno}, column {col + dm.start(1)}", f"expected a number after 'density', "
                                                                        f"got {dm.group(1)!r}") from None
        stripped = stripped[:dm.start()]
    m = _DECL.match(stripped)
    if not m:
        raise ProgramError(f"line {lineno}, column {col}", "expected 'tensor NAME(d1, d2, ...) [: format]'")
    shape_text = m.group("shape").strip()
    shape = []
    if shape_text:
        for part in shape_text.split(","):
            part = part.strip()
            pos = col + stripped.index("(") + 1
            if not (part.isascii() and part.isdigit()):
                raise ProgramError(f"line {lineno}, column {pos}", f"expected a positive integer dimension, "
                                                                   f"got {part!r}")
            if len(part) > 40:                   # int() refuses 4300+ digits; no dimension needs 40
                raise ProgramError(f"line {lineno}, column {pos}", f"dimension of {len(part)} digits is too large")
            shape.append(int(part))
    fmt = m.group("fmt")
    p.tensor(m.group("name"), shape, fmt.strip() if fmt and fmt.strip() else None, density=density, line=lineno,
             col=col)


def _parse_format(d, order):
    from ..tensors import TensorFormat
    spec = d.fmt if d.fmt is not None else "dense"
    try:
        if isinstance(spec, tuple):
            head, mo = spec
            if isinstance(head, tuple):
                fmt = TensorFormat(head, mo)
            else:
                fmt = TensorFormat.named(head, order, mode_order=mo)
        else:
            fmt = TensorFormat.parse(spec, order)
    except TensorError as exc:
        raise ProgramError(f"line {d.line}, column {d.col}", f"format of {d.name}: {exc.why}") from None
    if fmt.order != order:
        raise ProgramError(f"line {d.line}, column {d.col}", f"format {fmt} has {fmt.order} levels but {d.name} "
                                                             f"has order {order}")
    return tuple(fmt.levels), tuple(fmt.mode_order), (fmt.block[0] if fmt.block else None)


def parse_file(path):
    """Read a ``.ff`` file into an :class:`EinsumProgram` (named after the file)."""
    import os

    from ..cli import read_text
    text = read_text(path)
    name = os.path.splitext(os.path.basename(path))[0]
    return EinsumProgram.parse(text, name=re.sub(r"\W", "_", name))
