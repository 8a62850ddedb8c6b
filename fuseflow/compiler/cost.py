"""Cost heuristic: FLOPs, bytes moved and cycles of a compiled program, estimated without simulating.

FuseFlow prunes schedules with a FLOPs/bytes heuristic (paper Section 8); this is ours. It walks each kernel's
graph once, in topological order, and carries on every stream the *expected* number of tokens at each level
of the stream's fibre tree (``counts[0]`` is the root's one reference, ``counts[-1]`` the stream's own data
tokens, ``counts[-2]`` its fibres) under one assumption: nonzeros are independent and uniform, so

- a compressed level's fibres hold ``stored(level) / stored(level above)`` coordinates on average;
- k co-iterated fibres of a dimension d with densities p_1..p_k intersect in ``d * prod(p)`` coordinates and
  unite in ``d * (1 - prod(1 - p))`` (the intersection rate) when they are independent; when they are not (the
  same fibre read twice, ``A*B + A``, one stream fed to several inputs, references that are ``N`` where a
  union's other operands hold), every stream carries its support as a formula over per-fibre atoms and the
  rate is the formula's exact probability, conditioned on the parent position existing;
- a permuted copy (a spacc over held coordinates) re-sorts its entries without merging any; a mask over
  coordinates another mask generated keeps the positions both keep;
- K partial results of density q merged by a sparse accumulator are nonzero with ``1 - (1 - q)^K``.

Inputs are described by their densities (``densities={name: p}``, dense tensors 1.0) or their data
(``inputs=``: only the nonzero count per tensor is used). Intermediates take the level sizes their writers
were estimated to write. Counters match the simulator's definitions (docs/samml.md): ALU ops, bytes read and
written (coordinates at ``crd_width``, values at 8 bytes in float mode or ``value width`` in fixed mode);
cycles are the busiest stream's or op's token count per kernel, plus the fill of its pipelined ops (registry
``op_latency``, :func:`pipeline_fill`), plus the memory charge of
:mod:`fuseflow.sim.memory`. The error against the simulator is measured by ``benchmarks/cost_bench.py``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import networkx as nx

from ..errors import FuseFlowError
from ..samml.blocks import block_shape
from ..samml.registry import op_interval


@dataclass
class Estimate:
    """What :func:`estimate` returns (the simulator's counter names)."""
    alu_ops: float
    mem_read_bytes: float
    mem_write_bytes: float
    cycles: float
    kernels: list = field(default_factory=list)

    @property
    def bytes(self) -> float:
        return self.mem_read_bytes + self.mem_write_bytes


@dataclass
class _S:
    """A stream's expected tokens per level (root first), the dimension of each level, and the fraction of
    its data tokens that are real (not a union's N placeholder: N reads no memory).

    Co-iterated operands are often not independent (``A*B + A``, ``P + C - 2A`` with ``P = A*B``, the same
    stream fed to several inputs), so coordinate streams also carry their *support*: a formula over atoms
    (one atom per fibre of a stored level: tensor, level, and the identity of the parent reference) with each
    atom's probability, and reference streams the identity of what they point at (``key``)."""
    counts: tuple
    dims: tuple
    real: float = 1.0
    held: bool = False          # carries an outer level's coordinate at every position (crd_hold's output)
    support: object = None      # where its tokens are real: a formula of the kernel's _Logic; None: unknown
    pos: object = None          # reference streams: where its tokens are (real or N); None: as support
    ctx: object = True          # the positions one level up whose fibres these are
    key: object = None          # reference streams: what the references point at
    cv: int = -1                # coordinate streams: the coordinate variable (unified by co-iteration)
    pattern: object = None      # (row, column) positions a masked stream can hold (NumPy bool), if known

    @property
    def n(self):
        return self.counts[-1]

    @property
    def fibres(self):
        return self.counts[-2] if len(self.counts) > 1 else 1.0

    def child(self, n, dim):
        return _S(self.counts + (n,), self.dims + (dim,))

    def with_n(self, n, real=1.0):
        return _S(self.counts[:-1] + (n,), self.dims, real)


#: above this many distinct atoms a co-iteration falls back to independent operands (2^atoms evaluations)
MAX_ATOMS = 12


class _Logic:
    """A kernel's supports: formulas over atoms, hash-consed into a DAG (a formula is ``True`` or a node id;
    children are created before parents), and the coordinate variables the atoms' names refer to."""

    def __init__(self):
        self.coords = _Coords()
        self.nodes = []             # id -> ("a", atom name) or ("&" | "|", child ids)
        self.index = {}
        self.p = {}                 # atom name -> probability (given its parent position)

    def _intern(self, node) -> int:
        i = self.index.get(node)
        if i is None:
            i = self.index[node] = len(self.nodes)
            self.nodes.append(node)
        return i

    def atom(self, name, p: float) -> int:
        self.p.setdefault(name, min(1.0, max(0.0, p)))
        return self._intern(("a", name))

    def op(self, kind: str, forms) -> object:
        kids = []
        for f in forms:
            if f is True:
                if kind == "|":
                    return True
                continue
            if f not in kids:
                kids.append(f)
        if not kids:
            return True
        return kids[0] if len(kids) == 1 else self._intern((kind, tuple(sorted(kids))))

    def both(self, a, b):
        """``a and b`` (None, an unknown support, counts as True)."""
        return self.op("&", [True if a is None else a, True if b is None else b])

    def probability(self, form):
        """P(form) for independent atoms (exact, over the truth table of the atoms it uses); None with more
        than :data:`MAX_ATOMS` of them."""
        import numpy as np
        if form is True:
            return 1.0
        reach, stack = set(), [form]
        while stack:
            f = stack.pop()
            if f in reach:
                continue
            reach.add(f)
            node = self.nodes[f]
            if node[0] != "a":
                stack.extend(node[1])
        canon = {f: self.coords.canon(self.nodes[f][1]) for f in reach if self.nodes[f][0] == "a"}
        names = sorted(set(canon.values()), key=repr)
        if len(names) > MAX_ATOMS:
            return None
        p = {}
        for f, name in canon.items():
            p.setdefault(name, self.p[self.nodes[f][1]])
        table = (np.arange(1 << len(names))[:, None] >> np.arange(len(names))) & 1 == 1
        column = {name: table[:, i] for i, name in enumerate(names)}
        ps = np.array([p[n] for n in names])
        weight = np.prod(np.where(table, ps, 1.0 - ps), axis=1)
        truth = {}
        for f in sorted(reach):             # children first
            node = self.nodes[f]
            if node[0] == "a":
                truth[f] = column[canon[f]]
            else:
                vals = [truth[k] for k in node[1]]
                truth[f] = np.logical_and.reduce(vals) if node[0] == "&" else np.logical_or.reduce(vals)
        return float(weight[truth[form]].sum())


def _uniform_levels(decl, density: float) -> list:
    """Stored positions per level of a tensor with uniform random nonzeros of ``density``."""
    dims = [decl.level_dim(lv) for lv in range(decl.order)]
    stored, above = [], 1.0
    for lv, fmt in enumerate(decl.levels):
        prefix = math.prod(dims[:lv + 1])
        if fmt == "dense":
            s = above * dims[lv]
        else:
            rest = math.prod(dims[lv + 1:])
            s = prefix * (1.0 - (1.0 - density) ** rest)
        stored.append(s)
        above = s
    return stored


def _densities_from_inputs(prog, inputs) -> dict:
    import numpy as np
    out = {}
    for t in prog.inputs:
        data = inputs[t.name]
        nnz = data.nnz if hasattr(data, "nnz") else int(np.count_nonzero(np.asarray(data)))
        out[t.name] = nnz / max(1, math.prod(t.shape))
    return out


def estimate(program, densities: dict | None = None, inputs: dict | None = None, mode: str = "float",
             memory=None) -> Estimate:
    """Estimate ALU ops, bytes and cycles of ``program`` (a :class:`~fuseflow.samml.Program`).

    ``densities``: {input tensor: fraction of nonzeros} (missing sparse tensors: 1.0); or ``inputs``, the data
    (only nonzero counts are read). ``memory``: as for :func:`fuseflow.sim.run`.
    """
    from ..sim.memory import memory_system
    mem = memory_system(memory)
    if densities is None:
        densities = _densities_from_inputs(program, inputs) if inputs is not None else {}
    cfg = program.config
    crd_b = math.ceil(cfg.get("crd_width", 16) / 8)
    val_b = math.ceil(cfg["value"].get("width", 32) / 8) if mode == "fixed" else 8
    levels = {t.name: _uniform_levels(t, densities.get(t.name, 1.0)) for t in program.inputs}
    total = Estimate(0.0, 0.0, 0.0, 0.0)
    for k in program.kernels:
        ke = _kernel(program, k, levels, crd_b, val_b)
        timing = mem.kernel_cycles(math.ceil(ke["compute"]), ke["read"] + ke["write"], ke["stages"])
        ke["cycles"] = timing["cycles"]
        total.alu_ops += ke["alu_ops"]
        total.mem_read_bytes += ke["read"]
        total.mem_write_bytes += ke["write"]
        total.cycles += ke["cycles"]
        total.kernels.append(ke)
    return total


def _numbers(kernel, nid, port) -> int:
    """Numbers in one token of a node's output ``port``: B*B (or B) for blocks, else 1."""
    s = kernel.output_stream(nid, port)
    return math.prod(block_shape(s)) if s is not None else 1


class _KernelCost:
    """What the cost rules of one kernel share: the estimate of every stream so far (``inp``/``out`` by node and
    port), the ALU ops and bytes, each node's expected firings, the memory ops that moved bytes, the levels
    written, and the kernel's support logic."""

    def __init__(self, prog, k, levels, crd_b, val_b):
        self.prog, self.k, self.levels, self.crd_b, self.val_b = prog, k, levels, crd_b, val_b
        self.into = {(d.node, d.port): s.id for s in k.streams.values() for d in s.dsts}
        self.by_port = {(s.src.node, s.src.port): s.id for s in k.streams.values()}
        self.est = {}                             # stream id -> _S
        self.alu = self.read = self.write = 0.0
        self.busy = {}                            # node -> expected firings
        self.moved = set()
        self.written = {}
        self.logic = _Logic()

    def inp(self, node, port):
        sid = self.into.get((node, port))
        return self.est.get(sid) if sid is not None else None

    def out(self, node, port, s):
        sid = self.by_port.get((node, port))
        if sid is not None:
            self.est[sid] = s


def _kernel(prog, k, levels, crd_b, val_b) -> dict:
    g = k.graph()
    kc = _KernelCost(prog, k, levels, crd_b, val_b)
    for nid in nx.lexicographical_topological_sort(g, key=lambda n: n):
        node = k.nodes[nid]
        rule = COST_RULES.get(node.op)
        if rule is None:
            raise FuseFlowError(f"node {nid}", f"the cost model has no rule for op '{node.op}'")
        rule(kc, nid, node.params, node.op)
    for name, parts in kc.written.items():
        decl = prog.tensors[name]
        st, above = [], 1.0
        for lv, fmt in enumerate(decl.levels):
            s = above * decl.level_dim(lv) if fmt == "dense" else parts.get(lv, above)
            st.append(s)
            above = s
        levels[name] = st
    from ..sim.memory import memory_stages
    compute = _busiest(g, k, kc.busy) + 1 + pipeline_fill(prog, k)
    return {"name": k.name, "alu_ops": kc.alu, "read": kc.read, "write": kc.write, "compute": compute,
            "stages": memory_stages(k, kc.moved) if kc.moved else 0,
            "streams": {sid: s.n for sid, s in kc.est.items()},
            "written": {name: levels[name] for name in kc.written}}


def _cost_root(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    kc.out(nid, "ref", _S((1.0,), (1,), key="root", support=True))
    kc.busy[nid] = 2


def _cost_level_scan(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    r = kc.inp(nid, "ref")
    name, lv = p.get("tensor"), p.get("level", 0)
    decl = kc.prog.tensors.get(name) if name else None
    dim = p.get("dim") or (decl.level_dim(lv) if decl is not None else 1)
    fibre = (name, lv, kc.logic.coords.canon(r.key)) if name and r.key is not None else ("node", nid)
    if p["format"] == "dense":
        n = r.n * r.real * dim
    else:
        st = kc.levels.get(name)
        if st is None:
            raise FuseFlowError(f"node {nid}", f"reads tensor '{name}' before any kernel writes it")
        above = st[lv - 1] if lv > 0 else 1.0
        n = r.n * r.real * (st[lv] / above if above else 0.0)
        kc.read += (2 * r.n * r.real + n) * kc.crd_b
        kc.moved.add(nid)
    s = r.child(n, dim)
    s.cv = kc.logic.coords.fresh()
    # a fibre's coordinates exist where its parent reference is real and the fibre holds them
    s.ctx = r.pos if r.pos is not None else r.support
    if p["format"] == "dense":
        s.support = kc.logic.both(r.support, True)
    else:
        known = r.support is not None
        q = n / (r.n * (r.real if known else 1.0) * dim) if r.n * r.real * dim else 0.0
        s.support = kc.logic.both(r.support, kc.logic.atom(fibre, q))
    s.key = ("ref", fibre, ("cv", s.cv))
    kc.out(nid, "crd", s)
    kc.out(nid, "ref", s)
    kc.busy[nid] = n + r.n


def _cost_mask_scan(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    from ..samml.masks import dense_mask, parse_mask
    r = kc.inp(nid, "ref")
    pattern = dense_mask(parse_mask(p["mask"]), p["rows"], p["dim"])
    s = r.child(r.n * pattern.sum() / max(1, p["rows"]), p["dim"])
    s.pattern = pattern
    mask_atom = kc.logic.atom(("mask", nid), pattern.sum() / max(1, pattern.size))
    s.support, s.ctx = kc.logic.both(r.support, mask_atom), (r.pos if r.pos is not None else r.support)
    kc.out(nid, "crd", s)
    kc.out(nid, "ref", s)
    kc.busy[nid] = s.n + r.n


def _cost_crd_mask(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    from ..samml.masks import dense_mask, parse_mask
    c = kc.inp(nid, "crd")
    m = dense_mask(parse_mask(p["mask"]), p["rows"], p["dim"])
    if c.pattern is not None and c.pattern.shape == m.shape and c.pattern.any():
        # coordinates a mask generated: the positions both masks keep (masks overlap, e.g. a band
        # inside BigBird's window)
        keep = (c.pattern & m).sum() / c.pattern.sum()
        pattern = c.pattern & m
    else:                              # uniform coordinates: the fraction of positions kept
        keep, pattern = m.sum() / max(1, m.size), m
    kept = c.with_n(c.n * keep)
    kept.cv, kept.pattern = c.cv, pattern
    mask_atom = kc.logic.atom(("mask", nid), keep)
    kept.support, kept.ctx = kc.logic.both(c.support, mask_atom), c.ctx
    kc.out(nid, "crd", kept)
    for i in range(p.get("arity", 1)):
        r = kc.inp(nid, f"ref{i}")
        if r is not None:
            rk = _S(kept.counts, kept.dims, r.real, key=r.key, support=kc.logic.both(r.support, mask_atom),
                    pos=kept.support, ctx=c.ctx)
            kc.out(nid, f"ref{i}", rk)
    kc.busy[nid] = c.n + c.fibres


def _cost_locate(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    c, r = kc.inp(nid, "crd"), kc.inp(nid, "ref")
    located = _S(c.counts, c.dims, c.real, support=kc.logic.both(c.support, r.support if r is not None else True),
                 pos=c.support, ctx=c.ctx)
    parent = kc.logic.coords.canon(r.key) if r is not None and r.key is not None else ("node", nid)
    located.key = ("ref", (p.get("tensor"), p.get("level"), parent), ("cv", c.cv))
    kc.out(nid, "ref", located)
    kc.busy[nid] = c.n + c.fibres


def _cost_merge(kc: "_KernelCost", nid, p: dict, op: str, meet: bool) -> None:
    """intersect (``meet``: the coordinates all operands hold) and union (those any operand holds)."""
    ar = p.get("arity", 2)
    cs = [kc.inp(nid, f"crd{i}") for i in range(ar)]
    refs = [kc.inp(nid, f"ref{i}") for i in range(ar)]
    base = cs[0]
    cap = base.fibres * base.dims[-1]
    ctx = base.ctx if base.ctx is not None else True
    forms = []
    for i, c in enumerate(cs):
        kc.logic.coords.unify(c.cv, base.cv)
        if c.support is None:          # unknown support: an atom of its own (per stream)
            forms.append(kc.logic.atom(("stream", kc.into[(nid, f"crd{i}")]), c.n / cap if cap else 0.0))
        else:
            forms.append(c.support)
    # where each operand's reference is real (not N): its own support if known, else its coordinates'
    rsups = [ri.support if ri is not None and ri.support is not None else forms[i]
             for i, ri in enumerate(refs)]
    form = kc.logic.op("&" if meet else "|", forms)
    # P(position in the output | its parent position exists), exactly over the atoms
    pctx = kc.logic.probability(ctx)
    pform = kc.logic.probability(kc.logic.both(form, ctx)) if pctx is not None else None
    exact = pform is not None
    if exact:
        n = cap * pform / pctx if pctx else 0.0
    else:                              # too many atoms: independent operands
        ps = [min(1.0, c.n / cap) if cap else 0.0 for c in cs]
        n = cap * (math.prod(ps) if meet else 1.0 - math.prod(1.0 - q for q in ps))
    if meet:
        kc.busy[nid] = sum(c.n for c in cs) - (ar - 1) * n + base.fibres
    else:
        kc.busy[nid] = n + base.fibres
    crd = base.with_n(n)
    crd.support, crd.cv, crd.ctx = form, base.cv, ctx
    kc.out(nid, "crd", crd)
    for i in range(ar):
        rsup = kc.logic.both(form, rsups[i])
        preal = kc.logic.probability(kc.logic.both(rsup, ctx)) if exact else None
        if preal is not None:
            real = min(1.0, preal / pform) if pform else 1.0
        else:
            rsup = None
            real = refs[i].real if meet and refs[i] is not None else \
                (1.0 if meet or not n else min(1.0, cs[i].n / n))
        r = base.with_n(n, real)
        r.key = refs[i].key if refs[i] is not None else None
        r.support, r.pos, r.ctx = rsup, form, ctx
        kc.out(nid, f"ref{i}", r)


def _cost_repeat_sig(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    c = kc.inp(nid, "in")
    kc.out(nid, "repsig", c)
    kc.busy[nid] = c.n + c.fibres


def _cost_repeat(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    rs = kc.inp(nid, "repsig")
    held = kc.inp(nid, "in")
    if held is None:
        kc.out(nid, "out", _S(rs.counts, rs.dims))
    else:
        kc.out(nid, "out", _S(rs.counts, rs.dims, held.real, key=held.key,
                           support=kc.logic.both(rs.support, held.support) if held.support is not None else None,
                           pos=rs.support, ctx=rs.ctx))
    kc.busy[nid] = rs.n + rs.fibres


def _cost_array(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    r = kc.inp(nid, "ref")
    kc.read += r.n * r.real * kc.val_b * _numbers(kc.k, nid, "val")
    kc.moved.add(nid)
    kc.out(nid, "val", _S(r.counts, r.dims))
    kc.busy[nid] = r.n + r.fibres


def _cost_alu(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    a = kc.inp(nid, "a")
    kc.alu += a.n
    kc.out(nid, "out", a)
    kc.busy[nid] = a.n + a.fibres


def _cost_block_matmul(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    """block_matmul: a block product holds the op for op_interval cycles."""
    a = kc.inp(nid, "a")
    kc.alu += a.n
    kc.out(nid, "out", a)
    kc.busy[nid] = a.n * op_interval(op, p) + a.fibres


def _cost_reduce(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    v = kc.inp(nid, "val")
    c = kc.inp(nid, "crd")
    up = _S(v.counts[:-1], v.dims[:-1])
    nonempty = v.fibres * (1.0 - _empty(v))
    kc.alu += v.n - nonempty
    kc.out(nid, "val", c if c is not None else up.with_n(nonempty))
    kc.busy[nid] = v.n + v.fibres


def _cost_spacc(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    order, group = p.get("order", 1), p.get("group", 1)
    c = kc.inp(nid, "crd_inner")
    v = kc.inp(nid, "val")
    kc.alu += v.n
    L = len(c.counts) - 1
    base, top = L - order, L - order - group
    # K ~ Binomial(D, K_mean / D) partial results per group (D: the reduced levels' positions), so an
    # output entry is nonzero with 1 - E[(1-q)^K] = 1 - (1 - q K_mean / D)^D (empty groups give none)
    D = max(1, math.prod(c.dims[top + 1:base + 1]))
    K = c.counts[base] / c.counts[top] if c.counts[top] else 0.0
    newc, newd = list(c.counts[:top + 1]), list(c.dims[:top + 1])
    if c.held:
        # a permuted copy: every entry arrives as its own one-coordinate fibres carrying its target
        # coordinates, so nothing merges and the group is the source's entries re-sorted: a uniform
        # tensor of the target dims with the same number of entries
        tdims = [p.get("dim_outer1", 1), p.get("dim_outer", 1), p.get("dim", 1)][3 - order:]
        per = v.n / c.counts[top] if c.counts[top] else 0.0
        rho = min(1.0, per / max(1, math.prod(tdims)))
        for j in range(order):
            rest = math.prod(tdims[j + 1:])
            newc.append(c.counts[top] * math.prod(tdims[:j + 1]) * (1.0 - (1.0 - rho) ** rest))
            newd.append(tdims[j])
    for j in range(1, order + 1 if not c.held else 1):
        span = math.prod(c.dims[base + 1:base + j + 1])
        q = c.counts[base + j] / (c.counts[base] * span) if c.counts[base] else 0.0
        newc.append(c.counts[top] * span * (1.0 - (1.0 - min(q, 1.0) * min(K / D, 1.0)) ** D))
        newd.append(c.dims[base + j])
    merged = _S(tuple(newc), tuple(newd))
    kc.out(nid, "crd_inner", merged)
    kc.out(nid, "val", merged)
    for i in range(order - 1):
        kc.out(nid, f"crd_outer{i}", _S(merged.counts[:len(merged.counts) - 1 - i],
                                    merged.dims[:len(merged.dims) - 1 - i]))
    kc.busy[nid] = v.n + v.fibres + merged.n          # accumulate side, then the emit side


def _cost_parallelize(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    # round-robin by fibre: every lane gets 1/lanes of each fibre's positions (and of everything below
    # them), every stop; so a lane's fibre is one of dim/lanes positions at the same density
    s, lanes = kc.inp(nid, "in"), p["lanes"]
    for i in range(lanes):
        kc.out(nid, f"out{i}", dataclasses.replace(s, counts=s.counts[:-1] + (s.n / lanes,),
                                                dims=s.dims[:-1] + (s.dims[-1] / lanes,)))
    kc.busy[nid] = s.n + s.fibres


def _cost_serialize(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    # the lanes' shares merged back: the payload's levels from the keys' level down hold lanes times a
    # lane's tokens; one cycle per payload token, plus (depth >= 1) one per key to select its lane
    lanes, depth = p["lanes"], p.get("depth", 0)
    key, pay = kc.inp(nid, "key0"), kc.inp(nid, "in0")
    top = len(pay.counts) - 1 - depth
    merged = dataclasses.replace(
        pay, counts=pay.counts[:top] + tuple(c * lanes for c in pay.counts[top:]),
        dims=pay.dims[:top] + (pay.dims[top] * lanes,) + pay.dims[top + 1:])
    kc.out(nid, "out", merged)
    kc.busy[nid] = merged.n + merged.fibres + (key.n * lanes if depth else 0)


def _cost_crd_drop(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    o, i = kc.inp(nid, "outer"), kc.inp(nid, "inner")
    keep = 1.0 - _empty(i)
    kc.out(nid, "outer", o.with_n(o.n * keep))
    kc.out(nid, "inner", i)
    for a in range(p.get("arity") or 0):          # aligned with inner: empty fibres carry no data
        r = kc.inp(nid, f"ref{a}")
        if r is not None:
            kc.out(nid, f"ref{a}", r)
    # a step per inner token and stop, and a kept fibre after another in the same parent holds its S0 a
    # cycle (registry timing): every kept outer coordinate but the first of each outer fibre
    kc.busy[nid] = i.n + i.fibres + max(0.0, o.n * keep - o.fibres)


def _cost_crd_hold(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    i = kc.inp(nid, "inner")
    kc.out(nid, "outer", _S(i.counts, i.dims, i.real, held=True))
    kc.busy[nid] = i.n + i.fibres


def _cost_level_write(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    c = kc.inp(nid, "crd")
    if p.get("format") != "dense":
        kc.write += (c.n + c.fibres + 1) * kc.crd_b
        kc.moved.add(nid)
    kc.written.setdefault(p.get("tensor"), {})[p.get("level", 0)] = c.n
    kc.busy[nid] = c.n + c.fibres


def _cost_value_write(kc: "_KernelCost", nid, p: dict, op: str) -> None:
    v = kc.inp(nid, "val")
    kc.write += v.n * kc.val_b * math.prod(block_shape(kc.k.driver(nid, "val")))
    kc.moved.add(nid)
    kc.written.setdefault(p.get("tensor"), {})["vals"] = v.n
    kc.busy[nid] = v.n + v.fibres


#: the cost rule of each op: ``rule(kernel cost, node id, params, op)`` adds the op's traffic, ALU ops and firings
COST_RULES = {
    "root": _cost_root,
    "level_scan": _cost_level_scan,
    "mask_scan": _cost_mask_scan,
    "crd_mask": _cost_crd_mask,
    "locate": _cost_locate,
    "intersect": functools.partial(_cost_merge, meet=True),
    "union": functools.partial(_cost_merge, meet=False),
    "repeat_sig": _cost_repeat_sig,
    "repeat": _cost_repeat,
    "array": _cost_array,
    "alu": _cost_alu,
    "block_matmul": _cost_block_matmul,
    "reduce": _cost_reduce,
    "spacc": _cost_spacc,
    "parallelize": _cost_parallelize,
    "serialize": _cost_serialize,
    "crd_drop": _cost_crd_drop,
    "crd_hold": _cost_crd_hold,
    "level_write": _cost_level_write,
    "value_write": _cost_value_write,
}


def level_densities(decl, positions) -> list:
    """Per level of tensor ``decl``, the fraction of its positions stored: ``positions`` (stored entries per
    level, as an estimate's ``written``) over the positions above times the level's dimension."""
    out, above = [], 1.0
    for lv, p in enumerate(positions):
        out.append(p / max(above * decl.level_dim(lv), 1e-300))
        above = p
    return out


#: share of the smaller of a laned kernel's two bounds (lanes, serializers) added to the larger: fitted to the
#: simulator over the example programs at 2 and 4 lanes (benchmarks/cost_bench.py reports the error)
LANE_OVERLAP = 0.5


def _busiest(g, k, busy: dict) -> float:
    """A kernel's compute bound: its busiest op's firings. With parallel lanes, the kernel has two bounds: the
    lanes (every lane copy does its share; the head's scans the whole outer level) and the serializers with
    what they feed (the merged streams, a token per cycle, plus a cycle per key at depth >= 1). They do not
    overlap fully: a serializer merges in the single lane's order, so it waits for the lane that holds the
    next fibre while the others, their channels full, wait for it; the kernel takes the larger bound plus
    :data:`LANE_OVERLAP` of the smaller."""
    if not busy:
        return 0
    sers = [n for n in busy if k.nodes[n].spec.lane_role == "merge"]
    if not sers:
        return max(busy.values())
    tail = set(sers)
    for n in sers:
        tail |= nx.descendants(g, n)
    merge = max(busy[n] for n in tail)
    lanes = max((v for n, v in busy.items() if n not in tail), default=0)
    return max(merge, lanes) + LANE_OVERLAP * min(merge, lanes)


class _Coords:
    """Coordinate variables of a kernel: co-iterated coordinate streams are one variable (union-find)."""

    def __init__(self):
        self.parent = []

    def fresh(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, v: int) -> int:
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def unify(self, a: int, b: int) -> None:
        if a >= 0 and b >= 0:
            self.parent[self.find(a)] = self.find(b)

    def canon(self, x):
        """``x`` (a nested tuple naming fibres and references) with every ("cv", v) at its representative."""
        if isinstance(x, tuple):
            if len(x) == 2 and x[0] == "cv":
                return ("cv", self.find(x[1])) if x[1] >= 0 else x
            return tuple(self.canon(y) for y in x)
        return x


def pipeline_fill(prog, k) -> int:
    """Cycles a kernel's pipelined ops add to its run: the largest sum of ``op_latency - 1`` along a path."""
    from ..samml.registry import op_latency
    from ..tensors.fixed import FixedFormat
    v = prog.config.get("value", {})
    fixed = FixedFormat(v.get("width", 32), v.get("frac", 16))
    g = k.graph()
    fill = {}
    for n in nx.topological_sort(g):
        node = k.nodes[n]
        fill[n] = max((fill[u] for u in g.predecessors(n)), default=0) + op_latency(node.op, node.params, fixed) - 1
    return max(fill.values(), default=0)


def _empty(s: _S) -> float:
    """Probability that a fibre of stream ``s`` is empty (uniform nonzeros)."""
    d = s.dims[-1] or 1
    p = min(1.0, s.n / (s.fibres * d)) if s.fibres else 0.0
    return (1.0 - p) ** d
