"""Lowering a traced PyTorch model to an :class:`~fuseflow.compiler.EinsumProgram`.

One statement per PyTorch operation (so ``fuse="none"`` is the paper's unfused baseline: one kernel per
op), tagged with the module it comes from (fusion regions follow the model's child modules). Views
(transpose, permute, ``.T``, reshapes) produce no statement: they relabel the stored levels of the tensor
they view (see :mod:`.dims`). Weights, biases and masks become input tensors with their data; the model's
inputs become input tensors whose formats come from the example tensors (``to_sparse_csr()`` ...), a
pruned weight, or the ``formats`` argument.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from ...errors import ProgramError
from ...samml import expr as ff_expr
from .dims import DimClasses, reshape_split
from .ops import SUPPORTED, kind_of
from .trace import concrete_values, depends_on_inputs, describe, trace

_INDEX_POOL = list("ijklmnpqrstuvwxyzabcdefgho")
_RESERVED = {"tensor", "output", "order", "fuse", "program", "mask", "softmax", "layernorm"}


def _ident(name):
    name = re.sub(r"\W", "_", str(name))
    if not re.match(r"[A-Za-z_]", name):
        name = "t_" + name
    return name


@dataclass
class Stored:
    """A tensor of the Einsum program: an input (model input or constant) or a statement's result."""
    name: str
    sizes: tuple                     # one size per stored level (atoms)
    role: str                        # "input" | "const" | "stmt"
    format: str = "dense"
    data: object = None              # constants: NumPy array or SciPy matrix in stored layout
    source: str = ""                 # what it came from (a parameter's name, an fx node)


@dataclass
class Val:
    """A PyTorch value: a view of a stored tensor. ``dims[d]``: the stored levels of torch dim ``d``."""
    base: str
    dims: list
    shape: tuple


@dataclass
class Binding:
    """How a model input or output maps to a stored tensor."""
    name: str                        # stored tensor
    shape: tuple                     # torch shape
    dims: list                       # stored levels of each torch dim
    sizes: tuple                     # stored sizes
    format: str = "dense"
    sparse: bool = False


@dataclass
class Lowered:
    """What the lowering produces: the program and how to feed it and read it back."""
    program: object                  # EinsumProgram
    stored: dict                     # name -> Stored
    inputs: list                     # Binding per model input (forward argument order)
    outputs: list                    # Binding per model output
    output_structure: str            # "single" | "tuple" | "list"
    statements: list = field(default_factory=list)   # (text, module path, region key)

    @property
    def constants(self):
        return {n: s.data for n, s in self.stored.items() if s.role == "const"}


class _Lowering:
    def __init__(self, model, example_inputs, formats, fuse, name):
        self.model = model
        self.formats = dict(formats or {})
        self.fuse = fuse
        self.name = name or type(model).__name__.lower()
        self.gm = trace(model)
        self.values = concrete_values(self.gm, example_inputs)
        self.dyn = depends_on_inputs(self.gm)
        self.classes = DimClasses()
        self.stored = {}
        self.vals = {}
        self.stmts = []                          # (text, path)
        self.const_cache = {}
        self.used_names = set()

    # ---- helpers -----------------------------------------------------------------------------------
    def where(self, n):
        return describe(n, self.gm)

    def shape(self, n):
        v = self.values[n]
        if not isinstance(v, torch.Tensor):
            raise ProgramError(self.where(n), f"expected a tensor, got {type(v).__name__}")
        return tuple(v.shape)

    def key_atoms(self, n, d):
        if self.shape(n)[d] == 1:
            return []
        return self.classes.atoms_of((n, d))

    def fresh_name(self, base):
        base = _ident(base)
        if base.lower() in _RESERVED or base in ff_expr.UNARY_FUNCS or base in ff_expr.REDUCTIONS \
                or base in _function_names():
            base = base[0].upper() + base[1:]
        name, k = base, 1
        while name in self.used_names:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    def kind(self, n):
        kind, detail = kind_of(n, self.gm)
        if kind is None:
            raise ProgramError(self.where(n), f"not supported by the PyTorch front end (supported: {SUPPORTED})")
        return kind, detail

    def arg(self, n, i, name, default=None):
        if len(n.args) > i:
            return n.args[i]
        return n.kwargs.get(name, default)

    def module(self, n):
        return self.gm.get_submodule(n.target)

    # ---- 1. dimension classes ----------------------------------------------------------------------
    def analyse(self):
        nodes = [n for n in self.gm.graph.nodes if n in self.dyn]
        for n in nodes:
            if n.op != "placeholder":
                self.kind(n)                     # an unknown op is named before anything else
            v = self.values[n]
            if isinstance(v, torch.Tensor):
                for d, s in enumerate(v.shape):
                    if s != 1:
                        self.classes.add((n, d), s)
            elif n.op != "placeholder":
                raise ProgramError(self.where(n), f"produces a {type(v).__name__}, not a tensor")
        reshapes = []
        for n in nodes:
            if n.op == "placeholder":
                continue
            kind, detail = self.kind(n)
            getattr(self, f"_tie_{kind}")(n, detail) if hasattr(self, f"_tie_{kind}") else None
            if kind == "reshape":
                reshapes.append(n)
        changed = True
        while changed:
            changed = False
            for n in reshapes:
                src = n.args[0]
                ins = [(d, self.key_atoms(src, d)) for d in range(len(self.shape(src)))]
                ins = [(d, a) for d, a in ins if a]
                refined_in, refined_out = reshape_split([a for _, a in ins], self.shape(n), self.where(n))
                for (d, _), atoms in zip(ins, refined_in):
                    changed |= self.classes.refine((src, d), atoms, self.where(n))
                outs = [d for d, s in enumerate(self.shape(n)) if s != 1]
                for d, atoms in zip(outs, refined_out):
                    changed |= self.classes.refine((n, d), atoms, self.where(n))

    def _tie(self, a, da, b, db, n):
        if self.shape(a)[da] != 1 and self.shape(b)[db] != 1:
            self.classes.union((a, da), (b, db), self.where(n))

    def _tie_elementwise(self, n, operands):
        out = self.shape(n)
        for x in operands:
            if isinstance(x, torch.fx.Node) and x in self.dyn:
                off = len(out) - len(self.shape(x))
                for d in range(len(self.shape(x))):
                    self._tie(x, d, n, d + off, n)

    def _tie_unary(self, n, _):
        self._tie_elementwise(n, [n.args[0]])

    _tie_identity = _tie_unary
    _tie_pow = _tie_unary

    def _tie_softmax(self, n, _):
        self._tie_elementwise(n, [n.args[0]])

    _tie_layernorm = _tie_softmax
    _tie_masked_fill = _tie_softmax

    def _tie_binary(self, n, _):
        self._tie_elementwise(n, list(n.args[:2]))

    def _tie_permute(self, n, detail):
        src = n.args[0]
        for d, s in enumerate(self._perm(n, detail)):
            self._tie(src, s, n, d, n)

    def _tie_reduce(self, n, _):
        src = n.args[0]
        red, keep = self._reduced_dims(n)
        out = 0
        for d in range(len(self.shape(src))):
            if d in red:
                if keep:
                    out += 1
                continue
            self._tie(src, d, n, out, n)
            out += 1

    def _tie_matmul(self, n, _):
        a, b = n.args[0], n.args[1]
        self._matmul_dims(n, a, b, tie=True)

    def _tie_linear(self, n, _):
        x = n.args[0]
        sx = self.shape(x)
        for d in range(len(sx) - 1):
            self._tie(x, d, n, d, n)
        w = self._linear_weight(n)
        if isinstance(w, torch.fx.Node) and w in self.dyn:
            self._tie(x, len(sx) - 1, w, 1, n)
            self._tie(w, 0, n, len(sx) - 1, n)

    def _tie_reshape(self, n, _):
        pass

    # ---- op details ----------------------------------------------------------------------------------
    def _perm(self, n, detail):
        nd = len(self.shape(n))
        perm = list(range(nd))
        if detail in ("T",):
            perm = perm[::-1]
        elif detail in ("mT", "t") or (detail == "t"):
            if nd >= 2:
                perm[-1], perm[-2] = perm[-2], perm[-1]
        elif detail in ("transpose", "swapaxes"):
            d0 = self.arg(n, 1, "dim0") % nd
            d1 = self.arg(n, 2, "dim1") % nd
            perm[d0], perm[d1] = perm[d1], perm[d0]
        elif detail == "permute":
            dims = n.args[1:] if len(n.args) > 2 or (len(n.args) == 2 and isinstance(n.args[1], int)) \
                else self.arg(n, 1, "dims")
            perm = [int(d) % nd for d in dims]
        return perm

    def _reduced_dims(self, n):
        src = n.args[0]
        nd = len(self.shape(src))
        dim = self.arg(n, 1, "dim", None)
        keep = bool(self.arg(n, 2, "keepdim", False))
        if dim is None:
            return set(range(nd)), keep
        if isinstance(dim, int):
            dim = [dim]
        return {int(d) % nd for d in dim}, keep

    def _matmul_dims(self, n, a, b, tie=False):
        """Pair up the dims of a matrix product: [(a_dim|None, b_dim|None, out_dim|None)]."""
        sa = self.shape(a) if isinstance(a, torch.fx.Node) else tuple(a.shape)
        sb = self.shape(b) if isinstance(b, torch.fx.Node) else tuple(b.shape)
        so = self.shape(n)
        pairs = []
        na, nb, no = len(sa), len(sb), len(so)
        if na == 1 and nb == 1:
            pairs.append((0, 0, None))
        elif na == 1:
            pairs.append((0, nb - 2, None))
            pairs.append((None, nb - 1, no - 1))
            for d in range(nb - 2):
                pairs.append((None, d, d + no - nb + 1))
        elif nb == 1:
            pairs.append((na - 1, 0, None))
            pairs.append((na - 2, None, no - 1))
            for d in range(na - 2):
                pairs.append((d, None, d + no - na + 1))
        else:
            pairs.append((na - 1, nb - 2, None))
            pairs.append((na - 2, None, no - 2))
            pairs.append((None, nb - 1, no - 1))
            for d in range(na - 2):
                pairs.append((d, None, d + (no - 2) - (na - 2)))
            for d in range(nb - 2):
                pairs.append((None, d, d + (no - 2) - (nb - 2)))
        if tie:
            for da, db, do in pairs:
                ends = [(x, d) for x, d in ((a, da), (b, db), (n, do))
                        if d is not None and isinstance(x, torch.fx.Node) and x in self.dyn]
                for (x, dx), (y, dy) in zip(ends, ends[1:]):
                    self._tie(x, dx, y, dy, n)
        return pairs

    def _linear_weight(self, n):
        if n.op == "call_module":
            return self.module(n).weight
        return self.arg(n, 1, "weight")

    def _linear_bias(self, n):
        if n.op == "call_module":
            return self.module(n).bias
        return self.arg(n, 2, "bias")

    # ---- 2. statements -------------------------------------------------------------------------------
    def lower(self):
        self.analyse()
        inputs, outputs, structure = [], [], "single"
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                inputs.append(self._input(n))
            elif n.op == "output":
                res = n.args[0]
                structure = "tuple" if isinstance(res, tuple) else "list" if isinstance(res, list) else "single"
                for r in (res if isinstance(res, (tuple, list)) else [res]):
                    outputs.append(self._output(r))
            elif n in self.dyn:
                kind, detail = self.kind(n)
                self.vals[n] = getattr(self, f"_lower_{kind}")(n, detail)
        return inputs, outputs, structure

    def _input(self, n):
        ex = self.values[n]
        if not isinstance(ex, torch.Tensor):
            raise ProgramError(f"input {n.target}", f"must be a tensor, got {type(ex).__name__}")
        dims, sizes = [], []
        for d in range(ex.dim()):
            atoms = self.key_atoms(n, d)
            dims.append(list(range(len(sizes), len(sizes) + len(atoms))))
            sizes += atoms
        name = self.fresh_name(n.target)
        fmt, sparse = _format_of(ex, self.formats.get(n.target), len(sizes), sizes != [s for s in ex.shape if s != 1],
                                 f"input {n.target}")
        self.stored[name] = Stored(name, tuple(sizes), "input", fmt, source=n.target)
        self.vals[n] = Val(name, dims, tuple(ex.shape))
        return Binding(name, tuple(ex.shape), dims, tuple(sizes), fmt, sparse)

    def _output(self, r):
        if not isinstance(r, torch.fx.Node) or r not in self.dyn:
            raise ProgramError("model output", "every output must be computed from the inputs")
        v = self.vals[r]
        if self.stored[v.base].role != "stmt":
            raise ProgramError("model output", f"{r.name} returns an input unchanged")
        return Binding(v.base, v.shape, v.dims, self.stored[v.base].sizes)

    def names_for(self, atom_lists, taken):
        """Index names for lists of atoms (one list per dim); ``taken`` is updated."""
        out = []
        for atoms in atom_lists:
            names = []
            for _ in atoms:
                k = 0
                while True:
                    cand = _INDEX_POOL[k % len(_INDEX_POOL)] + ("" if k < len(_INDEX_POOL) else str(k // len(_INDEX_POOL)))
                    if cand not in taken:
                        break
                    k += 1
                taken.add(cand)
                names.append(cand)
            out.append(names)
        return out

    def leaf(self, x, names, atoms, n):
        """Render operand ``x`` (a node, a tensor constant or a number) read with ``names`` per dim."""
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return _num(x)
        if isinstance(x, torch.fx.Node) and x in self.dyn:
            v = self.vals[x]
            st = self.stored[v.base]
            idx = [None] * len(st.sizes)
            for slots, nm in zip(v.dims, names):
                if len(slots) != len(nm):
                    raise ProgramError(self.where(n), "internal: operand dims do not line up")
                for p, name in zip(slots, nm):
                    idx[p] = name
            if any(i is None for i in idx):
                raise ProgramError(self.where(n), f"reads a view of {v.base} that does not cover all its levels")
            return f"{v.base}({','.join(idx)})"
        value = self.values[x] if isinstance(x, torch.fx.Node) else x
        if isinstance(value, (int, float)):
            return _num(value)
        if not isinstance(value, torch.Tensor):
            raise ProgramError(self.where(n), f"operand of type {type(value).__name__} is not supported")
        if value.numel() == 1:
            return _num(float(value.reshape(()).item()))
        src = x.target if isinstance(x, torch.fx.Node) and x.op == "get_attr" else \
            getattr(x, "_ff_name", None) or (x.name if isinstance(x, torch.fx.Node) else "c")
        name = self.const(value, atoms, src, getattr(x, "_ff_format", None))
        flat = [nm for nms in names for nm in nms]
        return f"{name}({','.join(flat)})"

    def const(self, value, atoms, source, fmt=None):
        """A constant input tensor holding ``value`` with its size-1 dims dropped and dims split into atoms."""
        sizes = tuple(a for dim in atoms for a in dim)
        key = (source, id(value), sizes)
        if key in self.const_cache:
            return self.const_cache[key][0]
        pruned = fmt == "pruned"
        if value.layout != torch.strided:
            pruned = True
            value = value.to_dense()
        arr = value.detach().to(torch.float64).cpu().numpy().reshape(sizes)
        fmt = self.formats.get(source, "sparse" if pruned else "dense")
        fmt = _named_format(fmt, len(sizes))
        name = self.fresh_name(source.replace(".", "_"))
        data = arr
        if fmt != "dense" and arr.ndim == 2:
            import scipy.sparse as sp
            data = sp.csr_matrix(arr)
        self.stored[name] = Stored(name, sizes, "const", fmt, data, source)
        self.const_cache[key] = (name, value)        # holding value keeps its id unique
        return name

    def statement(self, n, out_names, rhs):
        """Emit ``name(out) = rhs`` for node ``n``; returns the result's Val."""
        so = self.shape(n)
        dims, sizes = [], []
        for d in range(len(so)):
            atoms = self.key_atoms(n, d)
            dims.append(list(range(len(sizes), len(sizes) + len(atoms))))
            sizes += atoms
        base = n.name.lstrip("_") or "t"
        name = self.fresh_name(base[0].upper() + base[1:])
        flat = [nm for nms in out_names for nm in nms]
        self.stored[name] = Stored(name, tuple(sizes), "stmt", source=n.name)
        path = n.target if n.op == "call_module" else n.meta.get("ff_path", "")
        self.stmts.append((f"{name}({','.join(flat)}) = {rhs}", path))
        return Val(name, dims, so)

    def out_atoms(self, n):
        return [self.key_atoms(n, d) for d in range(len(self.shape(n)))]

    def aligned(self, x, n, out_names, out_atoms):
        """Names and atoms of operand ``x`` broadcast (right-aligned) against ``n``'s output."""
        sx = self.shape(x) if isinstance(x, torch.fx.Node) else tuple(getattr(x, "shape", ()))
        off = len(out_names) - len(sx)
        names, atoms = [], []
        for d, s in enumerate(sx):
            if s == 1:
                names.append([])
                atoms.append([])
            else:
                names.append(out_names[d + off])
                atoms.append(out_atoms[d + off])
        return names, atoms

    # ---- lowering per kind ---------------------------------------------------------------------------
    def _elementwise(self, n, operands, combine):
        atoms = self.out_atoms(n)
        names = self.names_for(atoms, set())
        parts = []
        for x in operands:
            if isinstance(x, torch.fx.Node) and x not in self.dyn and isinstance(self.values[x], (int, float)):
                x = self.values[x]              # a number computed from sizes: q.size(-1) ** 0.5
            if isinstance(x, torch.fx.Node) or isinstance(x, torch.Tensor):
                nm, at = self.aligned(x if isinstance(x, torch.fx.Node) else x, n, names, atoms)
                parts.append(self.leaf(x, nm, at, n))
            else:
                parts.append(self.leaf(x, [], [], n))
        return self.statement(n, names, combine(*parts))

    def _lower_identity(self, n, _):
        return self.vals[n.args[0]]

    def _lower_unary(self, n, fn):
        if fn == "gelu":
            approx = self.arg(n, 1, "approximate", None)
            if n.op == "call_module":
                approx = self.module(n).approximate
            fn = _gelu_function(approx or "none", self.where(n))
        _need_function(fn, self.where(n))
        if fn == "neg":
            return self._elementwise(n, [n.args[0]], lambda a: f"(-{a})")
        return self._elementwise(n, [n.args[0]], lambda a: f"{fn}({a})")

    def _lower_pow(self, n, _):
        e = self.arg(n, 1, "exponent")
        if e == 2:
            return self._elementwise(n, [n.args[0], n.args[0]], lambda a, b: f"({a} * {b})")
        if e == 0.5:
            _need_function("sqrt", self.where(n))
            return self._elementwise(n, [n.args[0]], lambda a: f"sqrt({a})")
        raise ProgramError(self.where(n), f"only the exponents 2 and 0.5 are supported, got {e!r}")

    def _lower_binary(self, n, op):
        a, b = n.args[0], n.args[1]
        if n.kwargs.get("alpha", 1) != 1 or (len(n.args) > 2 and n.args[2] != 1):
            raise ProgramError(self.where(n), "alpha != 1 is not supported")
        if op == "r-":
            a, b, op = b, a, "-"
        return self._elementwise(n, [a, b], lambda x, y: f"({x} {op} {y})")

    def _lower_reduce(self, n, op):
        src = n.args[0]
        red, keep = self._reduced_dims(n)
        out_atoms = self.out_atoms(n)
        taken = set()
        out_names = self.names_for(out_atoms, taken)
        src_names, k = [], 0
        for d in range(len(self.shape(src))):
            if d in red:
                src_names.append(None)
                if keep:
                    k += 1
            else:
                src_names.append(out_names[k])
                k += 1
        src_atoms = [self.key_atoms(src, d) for d in range(len(self.shape(src)))]
        for d in red:
            src_names[d] = self.names_for([src_atoms[d]], taken)[0]
        red_names = [nm for d in sorted(red) for nm in src_names[d]]
        body = self.leaf(src, src_names, src_atoms, n)
        count = math.prod(self.shape(src)[d] for d in red)
        fn = {"sum": "sum", "mean": "sum", "max": "max", "min": "min"}[op]
        if fn == "min" and "min" not in ff_expr.REDUCTIONS:
            raise ProgramError(self.where(n), "the min reduction needs the ML operators (issue #10)")
        rhs = f"{fn}[{','.join(red_names)}]({body})" if red_names else body
        if op == "mean":
            rhs = f"({rhs} / {_num(count)})"
        return self.statement(n, out_names, rhs)

    def _lower_matmul(self, n, _):
        a, b = n.args[0], n.args[1]
        pairs = self._matmul_dims(n, a, b)
        out_atoms = self.out_atoms(n)
        taken = set()
        out_names = self.names_for(out_atoms, taken)
        na = len(self.shape(a)) if isinstance(a, torch.fx.Node) else a.dim()
        nb = len(self.shape(b)) if isinstance(b, torch.fx.Node) else b.dim()
        an, aa, bn, ba = [[]] * na, [[]] * na, [[]] * nb, [[]] * nb
        an, aa, bn, ba = list(an), list(aa), list(bn), list(ba)
        for da, db, do in pairs:
            if do is None:                                  # contracted
                dyn = a if isinstance(a, torch.fx.Node) and a in self.dyn else b
                atoms = self.key_atoms(dyn, da if dyn is a else db)
                nm = self.names_for([atoms], taken)[0]
            else:
                atoms, nm = out_atoms[do], out_names[do]
            sa_d = (self.shape(a) if isinstance(a, torch.fx.Node) else tuple(a.shape))[da] if da is not None else 1
            sb_d = (self.shape(b) if isinstance(b, torch.fx.Node) else tuple(b.shape))[db] if db is not None else 1
            if da is not None and sa_d != 1:
                an[da], aa[da] = nm, atoms
            if db is not None and sb_d != 1:
                bn[db], ba[db] = nm, atoms
        rhs = f"{self.leaf(a, an, aa, n)} * {self.leaf(b, bn, ba, n)}"
        return self.statement(n, out_names, rhs)

    def _lower_linear(self, n, _):
        x = n.args[0]
        w, bias = self._linear_weight(n), self._linear_bias(n)
        out_atoms = self.out_atoms(n)
        taken = set()
        out_names = self.names_for(out_atoms, taken)
        sx = self.shape(x)
        k_atoms = self.key_atoms(x, len(sx) - 1)
        k_names = self.names_for([k_atoms], taken)[0]
        xn = out_names[:-1] + [k_names]
        xa = out_atoms[:-1] + [k_atoms]
        prefix = n.target if n.op == "call_module" else None
        if isinstance(w, torch.fx.Node) and w in self.dyn:
            wleaf = self.leaf(w, [out_names[-1], k_names], [out_atoms[-1], k_atoms], n)
        else:
            # a constant weight is stored as W^T (in x out): x @ W^T can then run row by row (Gustavson)
            value = self.values[w] if isinstance(w, torch.fx.Node) else w
            name = w.target if isinstance(w, torch.fx.Node) and w.op == "get_attr" else f"{prefix}.weight"
            wt = _named(value.t(), name, self._pruned(n) or value.layout != torch.strided)
            wleaf = self.leaf(wt, [k_names, out_names[-1]], [k_atoms, out_atoms[-1]], n)
        rhs = f"{self.leaf(x, xn, xa, n)} * {wleaf}"
        if bias is not None:
            bsrc = bias if isinstance(bias, torch.fx.Node) else _named(bias, f"{prefix}.bias")
            rhs = f"({rhs} + {self.leaf(bsrc, [out_names[-1]], [out_atoms[-1]], n)})"
        return self.statement(n, out_names, rhs)

    def _pruned(self, n):
        return n.op == "call_module" and hasattr(self.module(n), "weight_mask")

    def _lower_permute(self, n, detail):
        v = self.vals[n.args[0]]
        perm = self._perm(n, detail)
        return Val(v.base, [v.dims[p] for p in perm], self.shape(n))

    def _lower_reshape(self, n, _):
        v = self.vals[n.args[0]]
        flat = [p for slots in v.dims for p in slots]
        dims, k = [], 0
        for d in range(len(self.shape(n))):
            cnt = len(self.key_atoms(n, d))
            dims.append(flat[k:k + cnt])
            k += cnt
        return Val(v.base, dims, self.shape(n))

    def _lower_softmax(self, n, _):
        x = n.args[0]
        nd = len(self.shape(x))
        dim = self.module(n).dim if n.op == "call_module" else self.arg(n, 1, "dim")
        if dim is None:
            raise ProgramError(self.where(n), "softmax needs dim")
        dim = int(dim) % nd
        atoms = self.out_atoms(n)
        taken = set()
        names = self.names_for(atoms, taken)
        if not atoms[dim]:
            return self._elementwise(n, [x], lambda a: "1")
        if "softmax" in getattr(ff_expr, "SUGAR", ()):
            red = [nm for nm in names[dim]]
            return self.statement(n, names, f"softmax[{','.join(red)}]({self.leaf(x, names, atoms, n)})")
        # primitives (exact for dense rows; masked rows need the softmax of issue #10)
        n1 = list(names)
        n1[dim] = self.names_for([atoms[dim]], taken)[0]
        n2 = list(names)
        n2[dim] = self.names_for([atoms[dim]], taken)[0]
        n3 = list(names)
        n3[dim] = self.names_for([atoms[dim]], taken)[0]
        r1, r2, r3 = (",".join(nm[dim]) for nm in (n1, n2, n3))
        top = f"exp({self.leaf(x, names, atoms, n)} - max[{r1}]({self.leaf(x, n1, atoms, n)}))"
        bottom = f"sum[{r2}](exp({self.leaf(x, n2, atoms, n)} - max[{r3}]({self.leaf(x, n3, atoms, n)})))"
        return self.statement(n, names, f"({top} / {bottom})")

    def _lower_layernorm(self, n, _):
        x = n.args[0]
        if n.op == "call_module":
            mod = self.module(n)
            shape, w, b, eps = mod.normalized_shape, mod.weight, mod.bias, mod.eps
            wsrc = _named(w, f"{n.target}.weight") if w is not None else None
            bsrc = _named(b, f"{n.target}.bias") if b is not None else None
        else:
            shape = self.arg(n, 1, "normalized_shape")
            wsrc, bsrc = self.arg(n, 2, "weight"), self.arg(n, 3, "bias")
            eps = self.arg(n, 4, "eps", 1e-5)
        nd = len(self.shape(x))
        dims = list(range(nd - len(tuple(shape)), nd))
        atoms = self.out_atoms(n)
        taken = set()
        names = self.names_for(atoms, taken)
        red = [nm for d in dims for nm in names[d]]
        body = self.leaf(x, names, atoms, n)
        wn = [names[d] for d in dims]
        wa = [atoms[d] for d in dims]
        if "layernorm" in getattr(ff_expr, "SUGAR", ()):
            args = [body]
            if wsrc is not None or bsrc is not None:
                args.append(self.leaf(wsrc, wn, wa, n) if wsrc is not None else "1")
            if bsrc is not None:
                args.append(self.leaf(bsrc, wn, wa, n))
            rhs = f"layernorm[{','.join(red)}, eps={_num(eps)}]({', '.join(args)})"
            return self.statement(n, names, rhs)
        else:
            _need_function("rsqrt", self.where(n))
            count = math.prod(self.shape(x)[d] for d in dims)

            def renamed():
                nn_ = list(names)
                for d in dims:
                    nn_[d] = self.names_for([atoms[d]], taken)[0]
                return nn_, ",".join(nm for d in dims for nm in nn_[d])
            m1, r1 = renamed()
            mean = f"(sum[{r1}]({self.leaf(x, m1, atoms, n)}) / {_num(count)})"
            m2, r2 = renamed()
            m3, r3 = renamed()
            mean3 = f"(sum[{r3}]({self.leaf(x, m3, atoms, n)}) / {_num(count)})"
            centred2 = f"({self.leaf(x, m2, atoms, n)} - {mean3})"
            var = f"(sum[{r2}]({centred2} * {centred2}) / {_num(count)})"
            rhs = f"(({body} - {mean}) * rsqrt({var} + {_num(eps)}))"
        if wsrc is not None:
            rhs = f"({rhs} * {self.leaf(wsrc, wn, wa, n)})"
        if bsrc is not None:
            rhs = f"({rhs} + {self.leaf(bsrc, wn, wa, n)})"
        return self.statement(n, names, rhs)

    def _lower_masked_fill(self, n, _):
        x, mask, value = n.args[0], self.arg(n, 1, "mask"), self.arg(n, 2, "value")
        if isinstance(mask, torch.fx.Node) and mask in self.dyn:
            raise ProgramError(self.where(n), "the mask must not depend on the inputs (a coordinate mask or a "
                                              "constant boolean tensor)")
        value = float(value.item() if isinstance(value, torch.Tensor) else value)
        if value == 0.0:
            pass
        elif value == float("-inf"):
            for user in n.users:
                kind, _ = kind_of(user, self.gm)
                if kind != "softmax":
                    raise ProgramError(self.where(n), "masked_fill with -inf must feed a softmax (absent entries "
                                                      "are minus infinity only there)")
        else:
            raise ProgramError(self.where(n), f"masked_fill value must be 0 or -inf, got {value}")
        m = self.values[mask] if isinstance(mask, torch.fx.Node) else mask
        keep = ~m.to(torch.bool)
        atoms = self.out_atoms(n)
        names = self.names_for(atoms, set())
        mnames, matoms = self.aligned(keep, n, names, atoms)
        factor = _coordinate_mask(keep, mnames)
        if factor is None:
            keep_t = keep.to(torch.float64)
            keep_t._ff_name = (mask.name if isinstance(mask, torch.fx.Node) else "mask") + "_keep"
            keep_t._ff_format = "pruned"
            factor = self.leaf(keep_t, mnames, matoms, n)
        return self.statement(n, names, f"({factor} * {self.leaf(x, names, atoms, n)})")


#: keep-patterns made by :func:`coordinate_mask`, by (shape, bytes): recognised whatever ops fold them
_KNOWN_MASKS = {}


def coordinate_mask(spec: str, rows: int, cols: int | None = None) -> torch.Tensor:
    """A boolean keep-pattern (True = keep) of a coordinate mask (``causal``, ``band:w=2``,
    ``bigbird:block=4,window=3,global=1,random=1,seed=0``) as a torch tensor for a model's buffer.

    ``scores.masked_fill(~keep, float("-inf"))`` with this buffer lowers to ``mask[spec](i,j)``: no mask
    tensor in memory. The pattern comes from :mod:`fuseflow.samml.masks`, the one definition the simulator
    and the hardware use."""
    from ...samml.masks import dense_mask, parse_mask
    cols = rows if cols is None else cols
    parsed = parse_mask(spec, "coordinate_mask")
    keep = np.asarray(dense_mask(parsed, rows, cols), dtype=bool)
    _KNOWN_MASKS[(keep.shape, keep.tobytes())] = parsed.text
    return torch.from_numpy(keep.copy())


def _coordinate_mask(keep, names):
    """``mask[spec](i,j)`` when the keep-pattern is a coordinate mask, else None (a mask tensor is used)."""
    if not hasattr(ff_expr, "Mask"):
        return None
    k = keep.numpy().astype(bool)
    if k.ndim != 2 or len(names[0]) != 1 or len(names[1]) != 1:
        return None
    spec = _KNOWN_MASKS.get((k.shape, k.tobytes()))
    rows, cols = k.shape
    i, j = np.indices(k.shape)
    if spec is None and np.array_equal(k, j <= i):
        spec = "causal"
    if spec is None and k.any():
        w = int(np.abs(i - j)[k].max())
        if np.array_equal(k, np.abs(i - j) <= w):
            spec = f"band:w={w}"
    if spec is None:
        return None
    return f"mask[{spec}]({names[0][0]},{names[1][0]})"


def _named(tensor, name, pruned=False):
    t = tensor.detach()
    t._ff_name = name
    if pruned:
        t._ff_format = "pruned"
    return t


def _num(x):
    x = float(x)
    if math.isinf(x) or math.isnan(x):
        raise ProgramError("constant", f"{x} cannot be written in index notation")
    text = repr(int(x)) if x == int(x) and abs(x) < 1e15 else repr(x)
    return f"({text})" if x < 0 else text


def _function_names():
    return set(ff_expr.UNARY_FUNCS)


def _need_function(fn, where):
    if fn not in ff_expr.UNARY_FUNCS:
        raise ProgramError(where, f"the function {fn} is not available in this compiler yet (it comes with the ML "
                                  f"operators of issue #10)")


def _gelu_function(approximate, where):
    forms = "none"                  # the ALU's gelu is the erf form (fuseflow.tensors.fixedfn)
    if approximate == forms:
        return "gelu"
    raise ProgramError(where, f"gelu(approximate={approximate!r}) differs from the ALU's gelu ({forms}); use "
                              f"approximate={forms!r}")


def _named_format(fmt, order):
    from ...tensors import TensorFormat
    if fmt == "sparse":
        return {0: "scalar", 1: "sv", 2: "dcsr"}.get(order, "c" * order)
    TensorFormat.parse(fmt, order)
    return fmt


def _format_of(example, annotation, order, reshaped, where):
    """(format name, keep sparse) of a model input from its layout or an annotation."""
    from ...errors import TensorError
    from ...tensors import TensorFormat
    layout = example.layout
    sparse = layout != torch.strided
    if annotation is not None:
        fmt = annotation
    elif layout == torch.sparse_csr:
        fmt = "csr"
    elif layout == torch.sparse_csc:
        fmt = "csc"
    elif layout == torch.sparse_coo:
        fmt = "sparse"
    elif sparse:
        raise ProgramError(where, f"layout {layout} is not supported (csr, csc, coo or dense)")
    else:
        fmt = "dense"
    if order != example.dim() or reshaped:
        if fmt in ("csr", "csc", "dcsr", "dcsc"):
            fmt = "sparse"
    if fmt == "sparse":
        fmt = {0: "scalar", 1: "sv", 2: "dcsr"}.get(order, "c" * order)
    if order == 0:
        fmt = "scalar"
    try:
        TensorFormat.parse(fmt, order)
    except TensorError as exc:
        raise ProgramError(where, exc.why) from None
    return fmt, sparse


def lower(model, example_inputs, *, formats=None, fuse="regions", name=None):
    """Trace ``model`` and lower it; returns a :class:`Lowered` (the EinsumProgram and its bindings)."""
    from ...compiler import EinsumProgram
    low = _Lowering(model, tuple(example_inputs), formats, fuse, name)
    inputs, outputs, structure = low.lower()
    prog = EinsumProgram(_ident(low.name))
    for st in low.stored.values():
        if st.role in ("input", "const"):
            prog.tensor(st.name, st.sizes, st.format)
    keys = [region_key(path, fuse) for _, path in low.stmts]
    if fuse == "regions" or fuse is None:
        keys = flow_regions(low, keys, model)
    i = 0
    records = []
    while i < len(low.stmts):
        j = i
        while j < len(low.stmts) and keys[j] is not None and keys[j] == keys[i]:
            j += 1
        if j > i:
            with prog.fuse():
                for text, path in low.stmts[i:j]:
                    prog.statement(text)
                    records.append((text, path, keys[i]))
            i = j
        else:
            text, path = low.stmts[i]
            prog.statement(text)
            records.append((text, path, None))
            i += 1
    outs = sorted({o.name for o in outputs})
    if outs:
        prog.output(*outs)
    return Lowered(prog, low.stored, inputs, outputs, structure, records)


def flow_regions(low, keys, model) -> list:
    """Region keys with the ops of the model's top-level ``forward()`` grouped by data flow.

    Ops of the top-level ``forward`` (no region), and leaf child modules called from it (``self.lin1(x)``: an
    ``nn.Linear`` is one op, not a layer), are cut into regions so that each aggregation goes with the transforms
    around it: a region ends before a contraction (a statement with a reduced index) that follows an elementwise
    function (the activation that ends a layer), and before a second aggregation (a contraction with a square
    sparse operand: the adjacency). ``A @ lin(x)``, ``relu`` and ``lin(A @ x)``, ``relu`` are one region each.
    Child modules with children of their own keep their region (one per child, as before)."""
    from ...compiler import EinsumProgram
    from ...compiler.ir import Fn
    leaf = {name for name, child in model.named_children() if not list(child.children())}
    flat = [k is None or k in leaf for k in keys]
    if not any(flat):
        return keys
    prog = EinsumProgram("regions")
    for st in low.stored.values():
        if st.role in ("input", "const"):
            prog.tensor(st.name, st.sizes, st.format)
    for text, _ in low.stmts:
        prog.statement(text)
    ir = prog.to_ir()
    out, group, aggregated, activated = list(keys), 0, False, False
    for n, s in enumerate(ir.stmts):
        if not flat[n]:
            aggregated = activated = False
            group += 1
            continue
        reduced = [i for i in s.rhs.all_indices() if i not in s.idx]
        aggregation = bool(reduced) and any(
            low.stored.get(leaf_.tensor) is not None and low.stored[leaf_.tensor].format != "dense"
            and len(set(low.stored[leaf_.tensor].sizes)) == 1 and len(low.stored[leaf_.tensor].sizes) == 2
            for leaf_ in s.rhs.leaves())
        if (reduced and activated) or (aggregation and aggregated):
            group += 1
            aggregated = activated = False
        out[n] = ("flow", group)
        aggregated = aggregated or aggregation
        activated = activated or (any(isinstance(x, Fn) for x in s.rhs.walk()) and not reduced)
    return out


def region_key(path, fuse):
    """The fusion region of a statement from its module path (None: no region)."""
    if fuse in ("none", "full"):
        return None
    if fuse == "regions" or fuse is None:
        return path.split(".")[0] if path else None
    best, key = -1, None
    for k, group in enumerate(fuse):
        for name in ([group] if isinstance(group, str) else group):
            if name == "" or path == name or path.startswith(name + "."):
                if len(name) > best:
                    best, key = len(name), k
    return key
