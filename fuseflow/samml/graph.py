"""SAMML programs as data: tensors, kernels of nodes and streams, config; a builder; validation.

A :class:`Program` is what ``graph.json`` holds: program-level tensor declarations and an ordered list
of :class:`Kernel` s (one for a fused program; several when intermediates are materialised between
kernels). A kernel is a DAG of :class:`Node` s (ops of the registry) joined by :class:`Stream` s, each
with one producer port and one or more consumer ports.

Example
-------
>>> p = Program("spmv")
>>> _ = p.tensor("c", "input", [4], ["compressed"])
>>> k = p.kernel("main")
>>> root = k.add("root")
>>> ci = k.add("level_scan", {"ref": root["ref"]}, tensor="c", level=0)
>>> p.validate()
"""

import math
from dataclasses import dataclass, field

import networkx as nx

from .. import limits
from ..errors import FuseFlowError, GraphError
from .blocks import check_blocks, check_tensor_block
from .widths import INDEX_KINDS, check_fits, check_stream_widths
from .registry import OPS, POLY_KINDS, get_op, port_kind

SAMML_VERSION = 1
ROLES = ("input", "output", "intermediate")
LEVEL_FORMATS = ("dense", "compressed")
DEFAULT_CONFIG = {
    "fifo_depth": 2,
    "crd_width": 16,
    "value": {"format": "fixed", "width": 32, "frac": 16},
}


@dataclass(frozen=True)
class PortRef:
    """One port of one node: ``node.port``."""
    node: str
    port: str

    def __str__(self):
        return f"{self.node}.{self.port}"

    @classmethod
    def parse(cls, text, where):
        if not isinstance(text, str) or text.count(".") != 1:
            raise GraphError(where, f"expected 'node.port', got {text!r}")
        node, port = text.split(".")
        return cls(node, port)


@dataclass
class TensorDecl:
    """A tensor of the program: name, role, shape, per-level formats, mode order, capacities."""
    name: str
    role: str
    shape: list
    levels: list
    mode_order: list = None
    capacity: list = None        # max entries per level, then max values; None = unknown
    dtype: str = "float"
    density: float | None = None  # expected fraction of nonzeros (inputs): capacities and synthetic data
    block: list | None = None     # [B, B] (or [B]): levels over block coordinates, one dense block per value

    def __post_init__(self):
        if self.mode_order is None:
            self.mode_order = list(range(len(self.shape)))

    @property
    def order(self):
        return len(self.shape)

    def level_dim(self, level):
        """Size of the dimension stored at storage level ``level`` (in blocks for a blocked tensor)."""
        mode = self.mode_order[level]
        return self.shape[mode] // self.block[mode] if self.block else self.shape[mode]

    def worst_case_capacity(self):
        """The capacity of a fully dense tensor of this shape: entries per level (the positions of every level
        above and this one), then values. Any data of this shape fits."""
        caps, n = [], 1
        for level in range(self.order):
            n *= int(self.level_dim(level))
            caps.append(n)
        return caps + [n]

    def to_json(self):
        d = {"name": self.name, "role": self.role, "shape": list(self.shape),
             "format": {"levels": list(self.levels), "mode_order": list(self.mode_order)},
             "dtype": self.dtype}
        if self.capacity is not None:
            d["capacity"] = list(self.capacity)
        if self.density is not None:
            d["density"] = self.density
        if self.block:
            d["block"] = list(self.block)
        return d

    @classmethod
    def from_json(cls, d):
        return cls(d["name"], d["role"], list(d["shape"]), list(d["format"]["levels"]),
                   list(d["format"].get("mode_order", range(len(d["shape"])))),
                   d.get("capacity"), d.get("dtype", "float"), d.get("density"), d.get("block"))


@dataclass
class Node:
    id: str
    op: str
    params: dict = field(default_factory=dict)

    @property
    def spec(self):
        return OPS[self.op]


@dataclass
class Stream:
    id: str
    kind: str
    src: PortRef
    dsts: list = field(default_factory=list)
    depth: int | None = None
    block: list | None = None     # [B, B] or [B] on a val stream of blocks (fuseflow.samml.blocks.block_shape)
    width: int | None = None      # data bits of a crd/ref/repsig stream (None: config.crd_width; samml/widths.py)


class NodeHandle:
    """What :meth:`Kernel.add` returns: ``handle["port"]`` names an output port for wiring."""

    def __init__(self, kernel, node_id):
        self.kernel = kernel
        self.id = node_id

    def __getitem__(self, port):
        node = self.kernel.nodes[self.id]
        names = [n for n, _ in node.spec.output_ports(node.params)]
        if port not in names:
            raise GraphError(f"node {self.id}", f"op '{node.op}' has no output port '{port}' "
                                                f"(outputs: {', '.join(names) or 'none'})")
        return PortRef(self.id, port)

    def __repr__(self):
        return f"<node {self.id}>"


class Kernel:
    """One dataflow graph: nodes and streams. Build with :meth:`add` and :meth:`connect`."""

    def __init__(self, name):
        self.name = name
        self.nodes = {}
        self.streams = {}
        self._driver = {}         # PortRef(consumer) -> stream id
        self._by_src = {}         # PortRef(producer) -> stream id

    def add(self, op, inputs=None, /, *, id=None, **params):
        """Add a node of ``op`` with ``params``; ``inputs`` maps input port -> producer PortRef."""
        spec = get_op(op)
        if id is None:
            n = sum(1 for node in self.nodes.values() if node.op == op)
            id = f"{op}{n}"
            while id in self.nodes:
                n += 1
                id = f"{op}{n}"
        if id in self.nodes:
            raise GraphError(f"kernel {self.name}", f"duplicate node id '{id}'")
        params = {k: v for k, v in params.items() if v is not None}
        self.nodes[id] = Node(id, op, spec.resolve_params(params, f"node {id}"))
        for port, src in (inputs or {}).items():
            self.connect(src, id, port)
        return NodeHandle(self, id)

    def connect(self, src, node_id, port, kind=None):
        """Drive input ``port`` of ``node_id`` from producer port ``src`` (fan-out is allowed).

        A stream into an op whose registry entry asks for deeper inputs (``input_depth_for``: the intersect's
        look-ahead at arity 2) gets at least that depth; graphs loaded from JSON keep the depths they state."""
        if isinstance(src, NodeHandle):
            raise GraphError(f"node {node_id}", f"input '{port}' needs a port such as node['ref'], not a node")
        dst = PortRef(node_id, port)
        if dst in self._driver:
            raise GraphError(f"node {node_id}", f"input '{port}' is driven twice")
        sid = self._by_src.get(src)
        if sid is None:
            sid = f"{src.node}.{src.port}"
            self.streams[sid] = Stream(sid, kind or self._src_kind(src), src, [])
            self._by_src[src] = sid
        stream = self.streams[sid]
        stream.dsts.append(dst)
        self._driver[dst] = sid
        node = self.nodes.get(node_id)
        need = node.spec.input_depth_for(node.params) if node is not None else None
        if need and (stream.depth or 0) < need:
            stream.depth = need

    def _src_kind(self, src):
        node = self.nodes.get(src.node)
        if node is None:
            raise GraphError(f"stream from {src}", f"no node '{src.node}'")
        kind = port_kind(node.spec, src.port)
        if kind in POLY_KINDS:
            kind = self._resolve_any(node, src.port)
        return kind

    def _resolve_any(self, node, out_port):
        """An 'any' output takes the kind of the matching 'any' input (repeat: in; joiners: ref{i})."""
        in_port = {"repeat": "in", "parallelize": "in", "serialize": "in0"}.get(node.op, out_port)
        sid = self._driver.get(PortRef(node.id, in_port))
        return self.streams[sid].kind if sid else "ref"

    def driver(self, node_id, port):
        """The stream driving an input port, or None."""
        sid = self._driver.get(PortRef(node_id, port))
        return self.streams[sid] if sid else None

    def output_stream(self, node_id, port):
        sid = self._by_src.get(PortRef(node_id, port))
        return self.streams[sid] if sid else None

    def graph(self):
        """The kernel as a networkx MultiDiGraph (nodes = op nodes, edges = stream consumers)."""
        g = nx.MultiDiGraph()
        for node in self.nodes.values():
            g.add_node(node.id, op=node.op)
        for s in self.streams.values():
            for d in s.dsts:
                g.add_edge(s.src.node, d.node, key=f"{s.id}->{d}", stream=s.id, kind=s.kind,
                           src_port=s.src.port, dst_port=d.port)
        return g

    def _reindex(self):
        self._driver = {d: s.id for s in self.streams.values() for d in s.dsts}
        self._by_src = {s.src: s.id for s in self.streams.values()}


class Program:
    """A SAMML program: tensors, kernels in execution order, config, and the expression it computes."""

    def __init__(self, name, expr=None, config=None):
        self.name = name
        self.expr = expr
        self.tensors = {}
        self.kernels = []
        self.config = _merge_config(config)
        self.reports = {}            # graph passes run on this program: name -> report (not saved)
        self.tiling = None           # a tiled program's plan (graph.json "tiling"; fuseflow/samml/tileplan.py)

    def tensor(self, name, role, shape, levels, mode_order=None, capacity=None, dtype="float", density=None,
               block=None):
        if name in self.tensors:
            raise GraphError(f"tensor {name}", "declared twice")
        t = TensorDecl(name, role, list(shape), list(levels), mode_order and list(mode_order), capacity, dtype,
                       density, list(block) if block else None)
        self.tensors[name] = t
        return t

    def kernel(self, name=None):
        k = Kernel(name or f"k{len(self.kernels)}")
        self.kernels.append(k)
        return k

    @property
    def inputs(self):
        return [t for t in self.tensors.values() if t.role == "input"]

    @property
    def outputs(self):
        return [t for t in self.tensors.values() if t.role == "output"]

    def validate(self):
        """Check the program against the registry; raise GraphError naming the JSON path."""
        validate_program(self)
        return self

    def to_json(self):
        return {
            "samml": SAMML_VERSION,
            "name": self.name,
            **({"expr": self.expr} if self.expr else {}),
            "config": self.config,
            "tensors": [t.to_json() for t in self.tensors.values()],
            "kernels": [{
                "name": k.name,
                "nodes": [{"id": n.id, "op": n.op, "params": _json_params(n.params)} for n in k.nodes.values()],
                "streams": [{"id": s.id, "kind": s.kind, "from": str(s.src), "to": [str(d) for d in s.dsts],
                             **({"depth": s.depth} if s.depth is not None else {}),
                             **({"block": list(s.block)} if s.block else {}),
                             **({"width": s.width} if s.width is not None else {})}
                            for s in k.streams.values()],
            } for k in self.kernels],
            **({"tiling": self.tiling} if self.tiling is not None else {}),
        }

    @classmethod
    def from_json(cls, doc):
        p = cls(doc["name"], doc.get("expr"), doc.get("config"))
        for i, t in enumerate(doc["tensors"]):
            if t["name"] in p.tensors:
                raise GraphError(f"$.tensors[{i}].name", f"tensor '{t['name']}' declared twice")
            p.tensors[t["name"]] = TensorDecl.from_json(t)
        for ki, kd in enumerate(doc["kernels"]):
            k = p.kernel(kd.get("name"))
            for ni, nd in enumerate(kd["nodes"]):
                where = f"$.kernels[{ki}].nodes[{ni}]"
                spec = get_op(nd["op"], f"{where}.op")
                if nd["id"] in k.nodes:
                    raise GraphError(f"{where}.id", f"duplicate node id '{nd['id']}'")
                k.nodes[nd["id"]] = Node(nd["id"], nd["op"], spec.resolve_params(nd.get("params", {}),
                                                                                  f"{where}.params"))
            for si, sd in enumerate(kd["streams"]):
                where = f"$.kernels[{ki}].streams[{si}]"
                if sd["id"] in k.streams:
                    raise GraphError(f"{where}.id", f"duplicate stream id '{sd['id']}'")
                k.streams[sd["id"]] = Stream(sd["id"], sd["kind"], PortRef.parse(sd["from"], f"{where}.from"),
                                             [PortRef.parse(d, f"{where}.to[{j}]")
                                              for j, d in enumerate(sd["to"])], sd.get("depth"), sd.get("block"),
                                             sd.get("width"))
            k._reindex()
        p.tiling = doc.get("tiling")
        return p


def _json_params(params):
    out = {}
    for k, v in params.items():
        if hasattr(v, "tolist"):
            v = v.tolist()
        out[k] = v
    return out


def _merge_config(config):
    cfg = {"fifo_depth": DEFAULT_CONFIG["fifo_depth"], "crd_width": DEFAULT_CONFIG["crd_width"],
           "value": dict(DEFAULT_CONFIG["value"])}
    for k, v in (config or {}).items():
        if k == "value":
            cfg["value"].update(v)
        else:
            cfg[k] = v
    return cfg


def validate_program(p):
    """Semantic validation (the JSON Schema has already checked the shape of the document).

    This is the one definition of a valid program: ``samml validate``, the compiler (before it writes),
    the simulator and the hardware build all call it, so they reject the same graphs with the same message.
    Resource limits (:mod:`fuseflow.limits`) are checked here too, before any command starts work."""
    _check_counts(p)
    crd_width = _validate_config(p.config)
    for ti, t in enumerate(p.tensors.values()):
        where = f"$.tensors[{ti}]"
        if t.role not in ROLES:
            raise GraphError(f"{where}.role", f"must be one of {', '.join(ROLES)}, got {t.role!r}")
        if len(t.levels) != len(t.shape):
            raise GraphError(f"{where}.format.levels", f"{len(t.levels)} levels for a tensor of order {len(t.shape)}")
        if sorted(t.mode_order) != list(range(len(t.shape))):
            raise GraphError(f"{where}.format.mode_order", f"{t.mode_order} is not a permutation of "
                                                           f"0..{len(t.shape) - 1}")
        for lv in t.levels:
            if lv not in LEVEL_FORMATS:
                raise GraphError(f"{where}.format.levels", f"unknown level format {lv!r}")
        if any((not isinstance(d, int)) or isinstance(d, bool) or d < 1 for d in t.shape):
            raise GraphError(f"{where}.shape", f"dimensions must be positive integers, got {t.shape}")
        if t.density is not None and not 0 < t.density <= 1:
            raise GraphError(f"{where}.density", f"must be in (0, 1], got {t.density}")
        check_tensor_block(t, where)
        _check_tensor_sizes(t, where, crd_width)
    if not p.kernels:
        raise GraphError("$.kernels", "a program needs at least one kernel")
    for ki, k in enumerate(p.kernels):
        _validate_kernel(p, k, f"$.kernels[{ki}]")
    check_stream_widths(p)        # the declared widths hold what the declared shapes and capacities allow
    if getattr(p, "tiling", None) is not None:
        from .tileplan import check_tiling
        check_tiling(p)


CRD_WIDTHS = (2, 64)


def _check_counts(p):
    nodes = sum(len(k.nodes) for k in p.kernels)
    streams = sum(len(k.streams) for k in p.kernels)
    _limit(limits.NODES, nodes, "$.kernels")
    _limit(limits.STREAMS, streams, "$.kernels")


def _limit(limit, value, where):
    try:
        limit.check(value, where)
    except FuseFlowError as exc:
        raise GraphError(exc.what, exc.why) from None


def _validate_config(cfg):
    """Check the config block; return the coordinate width."""
    from ..tensors.fixed import FixedFormat
    depth = cfg.get("fifo_depth", 2)
    if not _is_int(depth) or depth < 1:
        raise GraphError("$.config.fifo_depth", f"must be an integer >= 1, got {depth!r}")
    _limit(limits.FIFO_DEPTH, depth, "$.config.fifo_depth")
    w = cfg.get("crd_width", 16)
    if not _is_int(w) or not CRD_WIDTHS[0] <= w <= CRD_WIDTHS[1]:
        raise GraphError("$.config.crd_width", f"must be an integer in {CRD_WIDTHS[0]}..{CRD_WIDTHS[1]}, got {w!r}")
    value = cfg.get("value", {})
    if not isinstance(value, dict):
        raise GraphError("$.config.value", f"must be an object, got {value!r}")
    if value.get("format", "fixed") not in ("fixed", "float"):
        raise GraphError("$.config.value.format", f"must be fixed or float, got {value.get('format')!r}")
    try:                                   # the simulator and the hardware both build this format
        FixedFormat(value.get("width", 32), value.get("frac", 16))
    except FuseFlowError as exc:
        raise GraphError("$.config.value", exc.why) from None
    return w


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_tensor_sizes(t, where, crd_width):
    named = f"tensor {t.name} ({where}.shape)"
    for d in t.shape:
        _limit(limits.DIMENSION, d, named)
    dense = 1                                # the leading dense levels are allocated whatever the data
    for lv in range(t.order):
        if t.levels[lv] != "dense":
            break
        dense *= t.level_dim(lv)
    limit = limits.DENSE_ENTRIES.value
    if dense > limit:
        raise GraphError(named, f"its dense levels hold {dense} entries, more than the limit of {limit} "
                                           f"{limits.DENSE_ENTRIES.name}: give it a sparse format (e.g. csr, which "
                                           f"stores only nonzeros) or set {limits.DENSE_ENTRIES.env} to raise the "
                                           f"limit (docs/errors.md)")
    if t.capacity is not None:
        if len(t.capacity) != t.order + 1:
            raise GraphError(f"{where}.capacity", f"{len(t.capacity)} entries for a tensor of order {t.order} "
                                                  f"(expected {t.order + 1}: one per level, then values)")
        for c in t.capacity:
            _limit(limits.DENSE_ENTRIES, c, f"tensor {t.name} ({where}.capacity)")
    check_fits(t.name, t.shape, t.capacity, crd_width, GraphError)     # the simulator's and hw build's rule


def dense_entries(shape) -> int:
    """Entries of a dense array of ``shape`` (an exact integer, however large)."""
    return math.prod(int(d) for d in shape)


def _validate_kernel(p, k, where):
    node_where = {nid: f"{where}.nodes[{i}]" for i, nid in enumerate(k.nodes)}
    stream_where = {sid: f"{where}.streams[{i}]" for i, sid in enumerate(k.streams)}
    driven, sources = {}, {}
    for sid, s in k.streams.items():
        sw = stream_where[sid]
        if s.src in sources:
            raise GraphError(f"{sw}.from", f"output {s.src} feeds two streams, '{sources[s.src]}' and '{sid}' (one "
                                           f"stream may have several consumers)")
        sources[s.src] = sid
        if s.kind not in ("crd", "ref", "val", "repsig"):
            raise GraphError(f"{sw}.kind", f"unknown stream kind {s.kind!r}")
        src = k.nodes.get(s.src.node)
        if src is None:
            raise GraphError(f"{sw}.from", f"stream '{sid}' comes from unknown node '{s.src.node}'")
        outs = dict(src.spec.output_ports(src.params))
        if s.src.port not in outs:
            raise GraphError(f"{sw}.from", f"node '{src.id}' ({src.op}) has no output port '{s.src.port}'")
        if not s.dsts:
            raise GraphError(f"{sw}.to", f"stream '{sid}' is dangling: it has no consumer")
        _check_kind(outs[s.src.port].kind, s, f"{sw}.from")
        if s.depth is not None and (not _is_int(s.depth) or s.depth < 1):
            raise GraphError(f"{sw}.depth", f"must be an integer >= 1, got {s.depth!r}")
        if s.depth is not None:
            _limit(limits.FIFO_DEPTH, s.depth, f"{sw}.depth")
        if s.width is not None:
            _check_stream_width(p, s, f"{sw}.width")
        for j, d in enumerate(s.dsts):
            dn = k.nodes.get(d.node)
            if dn is None:
                raise GraphError(f"{sw}.to[{j}]", f"stream '{sid}' goes to unknown node '{d.node}'")
            ins = dict(dn.spec.input_ports(dn.params))
            if d.port not in ins:
                raise GraphError(f"{sw}.to[{j}]", f"node '{dn.id}' ({dn.op}) has no input port '{d.port}'")
            if d in driven:
                raise GraphError(f"{sw}.to[{j}]", f"input {d} is driven twice (streams '{driven[d]}' and '{sid}')")
            driven[d] = sid
            _check_kind(ins[d.port].kind, s, f"{sw}.to[{j}]")
    for nid, node in k.nodes.items():
        nw = node_where[nid]
        for port in node.spec.required_inputs(node.params):
            if PortRef(nid, port) not in driven:
                raise GraphError(nw, f"input '{port}' of node '{nid}' ({node.op}) is not driven")
        for q in node.spec.params:      # run_op may scan a dense level of size 0; a graph not
            v = node.params.get(q.name)
            if q.graph_minimum is not None and v is not None and v < q.graph_minimum:
                raise GraphError(f"{nw}.params", f"parameter '{q.name}' must be at least {q.graph_minimum}, got {v}")
        if node.spec.memory_array == "level" and node.params.get("dim") is not None \
                and node.params.get("tensor") in p.tensors:
            t, lv = p.tensors[node.params["tensor"]], node.params.get("level", 0)
            if 0 <= lv < t.order and node.params["dim"] != t.level_dim(lv):
                raise GraphError(f"{nw}.params.dim", f"node '{nid}' says level {lv} of '{t.name}' has dimension "
                                                     f"{node.params['dim']} but the tensor declares {t.level_dim(lv)}")
        if node.spec.check is not None:
            node.spec.check(node.params, f"{nw}.params")
        if node.spec.memory:
            _validate_memory_node(p, node, nw)
        if node.spec.validate is not None:      # the op's own checks (registry): its streams, the tensors
            node.spec.validate(p, k, node, nw)
    g = k.graph()
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        raise GraphError(where, "streams form a cycle: " + " -> ".join(e[0] for e in cycle))
    check_blocks(p, k, where)


def _check_stream_width(p, s, where):
    crd_width = p.config.get("crd_width", 16)
    if s.kind not in INDEX_KINDS:
        raise GraphError(where, f"stream '{s.id}' is {s.kind}: only {', '.join(INDEX_KINDS)} streams take a width "
                                f"(values are config.value.width bits)")
    if not _is_int(s.width) or not 10 <= s.width <= crd_width:
        raise GraphError(where, f"must be an integer in 10..{crd_width} (config.crd_width), got {s.width!r}")


def _check_kind(port_kind_, s, where):
    if port_kind_ in POLY_KINDS:
        if s.kind not in POLY_KINDS[port_kind_]:
            raise GraphError(where, f"stream '{s.id}' of kind {s.kind} on a port that takes "
                                    f"{' or '.join(POLY_KINDS[port_kind_])}")
    elif port_kind_ != s.kind:
        raise GraphError(where, f"stream '{s.id}' is {s.kind} but the port takes {port_kind_}")


def _validate_memory_node(p, node, where):
    name = node.params.get("tensor")
    if name is None:
        return                               # run_op style: arrays given in params
    t = p.tensors.get(name)
    if t is None:
        raise GraphError(f"{where}.params.tensor", f"node '{node.id}' names undeclared tensor '{name}'")
    if node.spec.memory_array == "level":
        lv = node.params.get("level", 0)
        if not 0 <= lv < t.order:
            raise GraphError(f"{where}.params.level", f"tensor '{name}' has no level {lv}")
        fmt = node.params.get("format", "compressed")
        if fmt != t.levels[lv]:
            raise GraphError(f"{where}.params.format",
                             f"node '{node.id}' reads level {lv} of '{name}' as {fmt} but it is {t.levels[lv]}")
    if node.spec.memory == "write" and t.role == "input":
        raise GraphError(f"{where}.params.tensor", f"node '{node.id}' writes input tensor '{name}'")
