"""The op registry: every SAMML op's ports, stream kinds and parameters, declared once.

The compiler builds graphs from it, :mod:`fuseflow.samml.graph` validates against it, the simulator
(``fuseflow/sim/ops/<op>.py``) and the hardware (``fuseflow/hw/ops/<op>.py``) implement it, and
``docs/samml.md`` documents it.

Stream kinds
------------
``crd``     coordinates of one fibertree level
``ref``     positions that address the next level or the value array
``val``     values (float in float mode, raw fixed-point integers in fixed mode)
``repsig``  repeat signals (``R`` per coordinate, ``S`` per stop, ``D``)
``any``     a ``ref`` or ``val`` stream; an op's ``any`` output has the kind of its ``any`` input
``token``   a ``crd``, ``ref`` or ``val`` stream (the lane ops); the op's ``token`` outputs have the kind of its
            ``token`` inputs

Variadic ports are written with ``{i}`` in their name and expanded by the parameter named in
``Port.count`` (``crd{i}`` with ``arity=2`` gives ``crd0, crd1``).
"""

import math
from dataclasses import dataclass, field

from .. import limits
from ..errors import FuseFlowError, GraphError, UnknownOpError
from ..tensors.formats import can_locate

STREAM_KINDS = ("crd", "ref", "val", "repsig")
#: port kinds that stand for several stream kinds: the stream's kind decides (outputs follow the inputs)
POLY_KINDS = {"any": ("ref", "val"), "token": ("crd", "ref", "val")}
REQUIRED = object()

BINARY_ALU_OPS = ("add", "sub", "mul", "div", "max", "min")
UNARY_ALU_OPS = ("neg", "relu", "exp", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square")
REDUCE_OPS = ("sum", "max", "min")
#: the binary alu op that merges two partial results of each reduction (reduce and spacc)
REDUCE_MERGE = {"sum": "add", "max": "max", "min": "min"}
#: orders of the sub-tree a spacc accumulates (simulator and RTL): reductions outside more inner levels, and
#: permuted copies that reorder more levels, are refused by the compiler
SPACC_ORDERS = (1, 2, 3)


@dataclass(frozen=True)
class Port:
    """One stream port of an op."""
    name: str
    kind: str
    doc: str = ""
    count: str | None = None          # parameter that expands a variadic ``{i}`` port
    count_offset: int = 0             # the number of ports is params[count] + count_offset
    optional: bool = False            # may be left undriven (inputs only)
    #: outputs: the input ports whose data tokens this output passes on (``{i}``: the same i for a variadic
    #: output, every i otherwise), so its largest data token is theirs (fuseflow.samml.widths)
    carries: tuple = ()
    #: outputs that make new data: ``"zero"`` (only 0), ``"dim"`` (coordinates below the op's dimension) or
    #: ``"positions"`` (positions of the op's level); neither this nor ``carries``: the program's crd_width
    bound: str | None = None

    def expand(self, params):
        if self.count is None:
            return [self.name]
        n = int(params.get(self.count) or 0) + self.count_offset      # an omitted count (default None): 0
        return [self.name.format(i=i) for i in range(n)]


@dataclass(frozen=True)
class Param:
    """One parameter of an op."""
    name: str
    type: str                          # "int", "float", "str", "bool", "ints", "numbers"
    default: object = REQUIRED
    choices: tuple = ()
    doc: str = ""
    minimum: int | None = None         # smallest allowed value (numbers)
    limit: object = None               # a fuseflow.limits.Limit on the value, checked before ports expand
    #: smallest value in a graph (validate_program); ``minimum`` and run_op allow less (a dense level of size 0)
    graph_minimum: int | None = None

    @property
    def required(self):
        return self.default is REQUIRED


@dataclass(frozen=True)
class OpSpec:
    """An op: its name, one-line doc, ports and parameters."""
    name: str
    doc: str
    inputs: tuple = ()
    outputs: tuple = ()
    params: tuple = ()
    memory: str | None = None          # "read" or "write" when the op is backed by a tensor memory
    #: which arrays of the tensor that memory is: ``"level"`` (one level's seg, crd and first) or ``"vals"``
    memory_array: str | None = None
    timing: str = ""
    #: channel depth every input needs for the op's full rate (the intersect's look-ahead), else None
    input_depth: int | None = None
    #: the largest ``arity`` that asks for ``input_depth`` (None: every arity); see :meth:`input_depth_for`
    input_depth_arity: int | None = None
    #: ``sim_facts(params, where) -> {name: value}``: facts the simulator's model of this op reads that follow
    #: from its (resolved) parameters, which it checks first (GraphError at ``where``); the compiled engine binds
    #: them as node parameters (fuseflow/sim/compiled.py), so no fact is written twice. None: no such facts
    sim_facts: object = None
    #: ``check(params, where)``: validation of parameter combinations beyond each parameter's own type and range
    #: (GraphError at ``where``), run by graph validation; None: nothing more to check
    check: object = None
    #: ``validate(program, kernel, node, where)``: checks that need the node's streams or the program's tensors
    #: (GraphError at ``where``), run by graph validation after ``check``; None: nothing more to check
    validate: object = None
    #: ``output_block(params, port, blocks_in, label, where)``: the block shape of a val output from its inputs'
    #: (``{input port: block}``; fuseflow.samml.blocks), or None where it forwards an input's; None: it always does
    output_block: object = None
    #: ``input_blocks(params) -> {input port: block}``: blocks the inputs take whatever the streams carry (a stream
    #: of only N and stops has none to look at); None: the streams' blocks
    input_blocks: object = None
    #: how a merge co-iterates its inputs: ``"all"`` (a coordinate present in every input) or ``"any"`` (in any)
    coiterate: str | None = None
    #: the op's part in parallel lanes: ``"split"`` (one stream to lanes) or ``"merge"`` (lanes to one stream)
    lane_role: str | None = None

    def has_param(self, name) -> bool:
        """Whether the op takes a parameter called ``name``."""
        return any(p.name == name for p in self.params)

    def input_depth_for(self, params):
        """``input_depth`` at these (resolved) parameters, or None: the intersect looks ahead at arity 2 only
        (wider, it costs more clock than it saves cycles: docs/hardware.md, "intersect look-ahead")."""
        if self.input_depth_arity is not None and params.get("arity", 2) > self.input_depth_arity:
            return None
        return self.input_depth

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def resolve_params(self, given, where="params"):
        """Return ``given`` completed with defaults; raise GraphError on unknown or bad values."""
        names = {p.name for p in self.params}
        for key in given:
            if key not in names:
                raise GraphError(where, f"op '{self.name}' has no parameter '{key}' "
                                        f"(known: {', '.join(sorted(names)) or 'none'})")
        out = {}
        for p in self.params:
            if p.name in given:
                value = given[p.name]
                _check_type(p, value, where)
                out[p.name] = value
            elif p.required:
                raise GraphError(where, f"op '{self.name}' needs parameter '{p.name}' ({p.doc})")
            elif p.default is not None:
                out[p.name] = p.default
        return out

    def input_ports(self, params):
        """Expanded ``[(port_name, Port)]`` of the inputs for these (resolved) parameters."""
        return [(n, p) for p in self.inputs for n in p.expand(params)]

    def output_ports(self, params):
        return [(n, p) for p in self.outputs for n in p.expand(params)]

    def required_inputs(self, params):
        """Input ports that must be driven for these parameters."""
        names = []
        for name, port in self.input_ports(params):
            if port.optional:
                continue
            names.append(name)
        if self.name == "alu" and params.get("op") not in UNARY_ALU_OPS and params.get("const") is None:
            names.append("b")                # a binary op needs its second operand: port b or const
        return names


def _check_type(p, value, where):
    ok = {
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "bool": lambda v: isinstance(v, bool),
        "ints": lambda v: isinstance(v, (list, tuple)) or hasattr(v, "dtype"),
        "numbers": lambda v: isinstance(v, (list, tuple)) or hasattr(v, "dtype"),
    }[p.type]
    if value is None and not p.required:
        return
    if not ok(value):
        raise GraphError(where, f"parameter '{p.name}' must be {p.type}, got {value!r}")
    if p.choices and value not in p.choices:
        raise GraphError(where, f"parameter '{p.name}' must be one of {', '.join(map(str, p.choices))}, "
                                f"got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise GraphError(where, f"parameter '{p.name}' must be a finite number, got {value!r}")
    if p.minimum is not None and value < p.minimum:
        raise GraphError(where, f"parameter '{p.name}' must be at least {p.minimum}, got {value!r}")
    if p.limit is not None:
        try:
            p.limit.check(value, where)
        except FuseFlowError as exc:
            raise GraphError(exc.what, f"parameter '{p.name}': {exc.why}") from None


_TENSOR = Param("tensor", "str", None, doc="name of the tensor in the program's tensor list")
_LEVEL = Param("level", "int", 0, doc="storage level of the tensor (0 = outermost)")
_FORMAT = Param("format", "str", "compressed", ("dense", "compressed"), "level format")

OPS = {}


def _op(spec):
    OPS[spec.name] = spec
    return spec


# ---- what single ops check in a graph (OpSpec.validate) and how they shape blocks (OpSpec.output_block) ------
# Duck-typed on fuseflow.samml.graph's Program, Kernel and Node (that module imports this one).

def validate_alu(program, kernel, node, where):
    """A binary alu takes its second operand from port b or from const, not both."""
    if node.params["op"] not in UNARY_ALU_OPS and node.params.get("const") is not None \
            and kernel.driver(node.id, "b") is not None:
        raise GraphError(where, f"node '{node.id}' has both a const and a driven input 'b'")


def validate_repeat(program, kernel, node, where):
    """A repeat's output has its input's kind (``any``: ref or val)."""
    s_in, s_out = kernel.driver(node.id, "in"), kernel.output_stream(node.id, "out")
    if s_in and s_out and s_in.kind != s_out.kind:
        raise GraphError(where, f"repeat '{node.id}' turns a {s_in.kind} stream into {s_out.kind}")


def validate_locate(program, kernel, node, where):
    """A locate node that names its tensor must locate a level that can locate, of size ``dim``."""
    dim = node.params["dim"]
    if dim < 1:
        raise GraphError(f"{where}.params.dim", f"node '{node.id}' locates in a level of size {dim}")
    name = node.params.get("tensor")
    if name is None:
        return
    t = program.tensors.get(name)
    if t is None:
        raise GraphError(f"{where}.params.tensor", f"node '{node.id}' names undeclared tensor '{name}'")
    lv = node.params.get("level")
    if lv is None or not 0 <= lv < t.order:
        raise GraphError(f"{where}.params.level", f"node '{node.id}' locates tensor '{name}' but gives no valid "
                                                  f"level (it has {t.order})")
    if not can_locate(t.levels[lv]):
        raise GraphError(f"{where}.params.tensor", f"node '{node.id}' locates level {lv} of '{name}', which is "
                                                   f"{t.levels[lv]}: only dense levels can locate")
    if dim != t.level_dim(lv):
        raise GraphError(f"{where}.params.dim", f"node '{node.id}' has dim {dim} but level {lv} of '{name}' has "
                                                f"size {t.level_dim(lv)}")


def shared_intersect_inputs(kernel, node):
    """[(input indices, stream id)]: the groups of two or more inputs of an intersect of arity >= 4 whose
    coordinates come from one stream (a union's ``crd`` met with each of its references, say).

    From arity 4 an input pops when below a ring neighbour (docs/samml.md, intersect), so inputs with equal
    heads may pop at different firings. Two members of a group next to each other on the ring stay within one
    token of each other, so m adjacent members drift apart by at most m - 1 tokens, and channels of depth m
    from their producer keep it from blocking on the lagging ones while a leading one waits empty (the depths
    pass's :func:`~fuseflow.compiler.passes.depths.deadlock_floors`). Members that are not adjacent can drift
    apart without bound; :func:`validate_intersect` refuses them."""
    n = node.params.get("arity", 2)
    if node.op != "intersect" or n < 4:
        return []
    by_stream = {}
    for i in range(n):
        s = kernel.driver(node.id, f"crd{i}")
        if s is not None:
            by_stream.setdefault(s.id, []).append(i)
    return [(group, sid) for sid, group in by_stream.items() if len(group) > 1]


def _ring_arc(group, n) -> bool:
    """Whether the input indices ``group`` are consecutive on a ring of ``n``."""
    members = set(group)
    return len(members) == n or sum((i + 1) % n not in members for i in members) == 1


def validate_intersect(program, kernel, node, where):
    """Inputs of an intersect that share a stream sit next to each other on the ring
    (:func:`shared_intersect_inputs`)."""
    for group, sid in shared_intersect_inputs(kernel, node):
        if not _ring_arc(group, node.params["arity"]):
            raise GraphError(where, f"intersect '{node.id}': inputs {', '.join(f'crd{i}' for i in group)} share "
                                    f"stream '{sid}' but are not next to each other on the ring, so one could run "
                                    f"ahead of another without bound and deadlock their producer (drive them "
                                    f"from adjacent inputs)")


def alu_block(params, port, blocks_in, label, where):
    """Element-wise: blocks of one shape, a block and a scalar (broadcast), or a B x B block and a B-vector
    (broadcast over the block's rows)."""
    a, b = blocks_in.get("a", ()), blocks_in.get("b", ())
    if a and b and a != b:
        square, vector = (a, b) if len(a) == 2 else (b, a)
        if not (len(square) == 2 and vector == square[:1]):
            raise GraphError(where, f"{label} combines blocks of shapes {list(a)} and {list(b)} (a B-vector "
                                    f"meets a B x B block of the same B, or blocks of one shape)")
        return square
    return a or b


def reduce_block(params, port, blocks_in, label, where):
    """With ``rows``: B x B blocks in, B-vectors out; else the values pass (None)."""
    if not params.get("rows"):
        return None
    got = blocks_in.get("val", ())
    if len(got) != 2:
        raise GraphError(where, f"{label} with rows reduces the rows of B x B blocks, but its input carries "
                                f"{list(got) or 'scalars'}")
    return got[:1]


def matmul_input_blocks(params: dict) -> dict:
    """``{"a": (B, B), "b": (B, B) or (B,)}``: the blocks a ``block_matmul`` with ``params`` takes."""
    n = params.get("block")
    return {"a": (n, n), "b": (n, n) if params.get("rhs", "matrix") == "matrix" else (n,)}


def matmul_block(params, port, blocks_in, label, where):
    """``a`` is B x B, ``b`` B x B (``rhs="matrix"``) or a B-vector (``rhs="vector"``); ``out`` has b's shape."""
    a, b = blocks_in.get("a", ()), blocks_in.get("b", ())
    n, rhs = params.get("block"), params.get("rhs", "matrix")
    want_b = matmul_input_blocks(params)["b"]
    if a != (n, n):
        raise GraphError(where, f"{label} input a carries {list(a) or 'scalars'}, expected [{n}, {n}] blocks")
    if b != want_b:
        raise GraphError(where, f"{label} input b carries {list(b) or 'scalars'}, expected {list(want_b)} "
                                f"(rhs {rhs})")
    return want_b


_op(OpSpec(
    "root", "Starts a tensor's iteration: emits reference 0, then D.",
    outputs=(Port("ref", "ref", "the root reference 0", bound="zero"),),
    timing="2 cycles: 0 at cycle 0, D at cycle 1 (subject to backpressure).",
))
_op(OpSpec(
    "level_scan", "Scans one level of a tensor: for each input reference emits that fibre's coordinates "
                  "and child references, with stop promotion.",
    inputs=(Port("ref", "ref", "references into this level (one fibre each)"),),
    outputs=(Port("crd", "crd", "coordinates", bound="dim"),
             Port("ref", "ref", "child references / value positions", bound="positions")),
    params=(_FORMAT, _TENSOR, _LEVEL,
            Param("dim", "int", None, doc="size of a dense level (taken from the tensor if omitted)",
                  limit=limits.DIMENSION, graph_minimum=1),
            Param("seg", "ints", None, doc="segment array of a compressed level (run_op; else from tensor)"),
            Param("crd", "ints", None, doc="coordinate array of a compressed level (run_op; else from tensor)"),
            Param("bounds_latency", "int", None, (1, 2),
                  "cycles from a reference reaching the input's head to its fibre's seg and first entries being "
                  "read (compressed; absent: 2 when the level's seg or first array is in block RAM, else 1: "
                  "fuseflow.samml.storage.bounds_latency)")),
    memory="read",
    memory_array="level",
    timing="A fibre of L coordinates takes L+1 cycles: the first coordinate leaves in the cycle the "
           "reference is taken, the closing stop one cycle after the last coordinate; a bare stop, N or D "
           "takes 1 cycle; an empty fibre 2. Compressed: every output token is visible MEMORY_READ_LATENCY "
           "(2) cycles after its firing (op_latency), as a pipelined op's. With bounds_latency 2 a reference "
           "is taken no earlier than 2 cycles after it was pushed and 2 cycles after the op's previous pop of "
           "its input.",
))
_op(OpSpec(
    "locate", "Locates coordinates in a dense level (TACO's locate capability): for each coordinate c of a fibre "
              "emits the reference r*dim + c, where r is the fibre's parent reference; the output has the "
              "coordinate stream's structure. Replaces a dense level_scan merged into an intersection.",
    inputs=(Port("ref", "ref", "parent references into the dense level, one per fibre of crd"),
            Port("crd", "crd", "coordinates to locate (one level below ref)")),
    outputs=(Port("ref", "ref", "references r*dim + c (N for an N parent), aligned with crd", bound="positions"),),
    params=(Param("dim", "int", REQUIRED, doc="size of the dense level"),
            Param("tensor", "str", None, doc="the located tensor (documentation; dim must match its level)"),
            Param("level", "int", None, doc="the located storage level of tensor")),
    timing="1 cycle per coordinate-stream token; a parent reference whose fibre is empty costs 1 more. A "
           "stop S_n (n >= 1) closing a fibre also pops the parent's S_(n-1) in the same cycle.",
    validate=validate_locate,
))
for _name, _doc in (("intersect", "Co-iterates fibres and emits the coordinates present in every input."),
                    ("union", "Co-iterates fibres and emits the coordinates present in any input; a missing "
                              "side's reference is N.")):
    _op(OpSpec(
        _name, _doc,
        inputs=(Port("crd{i}", "crd", "coordinates of input i", count="arity"),
                Port("ref{i}", "any", "references of input i", count="arity")),
        outputs=(Port("crd", "crd", "merged coordinates", carries=("crd{i}",)),
                 Port("ref{i}", "any", "references of input i, aligned with crd", count="arity",
                      carries=("ref{i}",))),
        input_depth=3 if _name == "intersect" else None,
        input_depth_arity=2 if _name == "intersect" else None,
        coiterate="all" if _name == "intersect" else "any",
        validate=validate_intersect if _name == "intersect" else None,
        params=(Param("arity", "int", 2, doc="number of inputs (>= 2)", minimum=2, limit=limits.ARITY),),
        timing="1 cycle per step; a step needs every input's head. "
               + ("Intersect pops every input whose head coordinate is below a ring neighbour's (inputs i-1 and "
                  "i+1 mod arity; at arities 2 and 3, below the largest head), or all inputs on a match. "
                  "Look-ahead (arity 2, every input channel of depth >= 3, and run_op): a step that pops the inputs below "
                  "the largest head also needs their second coordinates; an input whose second coordinate is "
                  "below the largest head too pops it as well when its second reference is visible, and the "
                  "inputs at the largest head pop too when some lower input's next token (behind what it pops, "
                  "once visible) is above it or a stop. Inputs holding data while another is at a stop pop "
                  "their second coordinate too when it and its reference are visible."
                  if _name == "intersect" else "Union pops every input holding the smallest head coordinate."),
    ))
_op(OpSpec(
    "mask_scan", "Scans the column level of a coordinate mask (no memory): for each row coordinate r emits the "
                 "columns c the pattern keeps, ascending, with references r*dim + c, and stop promotion as "
                 "level_scan.",
    inputs=(Port("ref", "ref", "row coordinates (the references of the mask's dense row level), one fibre each"),),
    outputs=(Port("crd", "crd", "kept column coordinates", bound="dim"),
             Port("ref", "ref", "r*dim + c: the position of (r, c) in a dense row-major level pair",
                  bound="positions")),
    params=(Param("mask", "str", REQUIRED, doc="the pattern: causal, band:w=W or "
                                               "bigbird:block=B,window=W,global=G,random=R,seed=S"),
            Param("rows", "int", REQUIRED, doc="number of rows (BigBird: row blocks; hardware: ref width)"),
            Param("dim", "int", REQUIRED, doc="number of columns")),
    timing="As a dense level_scan whose fibre holds only the kept columns: a fibre of L kept coordinates takes "
           "L+1 cycles (the first coordinate leaves in the cycle the reference is taken, the closing stop one "
           "cycle after the last); a bare stop, N or D takes 1 cycle; an empty fibre 2. One firing per cycle.",
    check=lambda params, where: check_mask_scan(params, where),
))
_op(OpSpec(
    "crd_mask", "Filters a coordinate stream by a coordinate mask: within the fibre of row r (one outer token "
                "per inner fibre) drops the coordinates c that the pattern does not keep, with their aligned "
                "references; stops pass through (a fibre may come out empty).",
    inputs=(Port("outer", "ref", "row coordinates (the references of the mask's dense row level), one per inner "
                                 "fibre"),
            Port("crd", "crd", "coordinates to filter"),
            Port("ref{i}", "any", "references (or values) aligned with crd", count="arity")),
    outputs=(Port("crd", "crd", "kept coordinates", carries=("crd",)),
             Port("ref{i}", "any", "references aligned with the kept coordinates", count="arity",
                  carries=("ref{i}",))),
    params=(Param("mask", "str", REQUIRED, doc="the pattern (as mask_scan)"),
            Param("rows", "int", REQUIRED, doc="number of rows"),
            Param("dim", "int", REQUIRED, doc="number of columns"),
            Param("arity", "int", 1, doc="number of aligned reference streams (>= 0)", minimum=0,
                  limit=limits.ARITY)),
    timing="1 cycle per inner token, kept or dropped (as crd_hold), plus 1 per outer stop that closes a fibre "
           "(the partner of an inner S_n, n >= 1). One firing per cycle.",
    check=lambda params, where: check_mask_scan(params, where),
))
_op(OpSpec(
    "repeat_sig", "Turns a coordinate stream into repeat signals: R per coordinate, S per stop, D.",
    inputs=(Port("in", "crd", "coordinates whose count drives the repeat"),),
    outputs=(Port("repsig", "repsig", "repeat signals", bound="zero"),),
    timing="1 cycle per token.",
))
_op(OpSpec(
    "repeat", "Re-emits each held input token once per R; on S closes the fibre (with stop promotion) and "
              "moves to the next held token.",
    inputs=(Port("in", "any", "tokens to repeat (references or values), one level above repsig"),
            Port("repsig", "repsig", "repeat signals")),
    outputs=(Port("out", "any", "repeated tokens", carries=("in",)),),
    timing="1 cycle per repeat signal; a held token whose fibre is empty (S straight away) costs 1 more.",
    validate=validate_repeat,
))
_op(OpSpec(
    "array", "Loads values: each reference r gives vals[r], N gives 0; stops and D pass through.",
    inputs=(Port("ref", "ref", "value positions"),),
    outputs=(Port("val", "val", "values"),),
    params=(_TENSOR, Param("vals", "numbers", None, doc="value array (run_op; else from the tensor)")),
    memory="read",
    memory_array="vals",
    timing="1 cycle per token; a value is visible MEMORY_READ_LATENCY (2) cycles after its firing (op_latency), "
           "as a pipelined op's.",
))
_op(OpSpec(
    "alu", "Element-wise arithmetic on aligned value streams (binary: add sub mul div max min; unary: neg "
           "relu exp sigmoid tanh gelu sqrt rsqrt log abs square); stops must match and pass through. On "
           "blocks: a scalar operand is broadcast over the block, a B-vector over each B x B block's rows.",
    inputs=(Port("a", "val", "first operand"),
            Port("b", "val", "second operand (absent for unary ops or with const)", optional=True)),
    outputs=(Port("out", "val", "result"),),
    params=(Param("op", "str", REQUIRED, BINARY_ALU_OPS + UNARY_ALU_OPS, "operation"),
            Param("const", "float", None, doc="constant second operand (replaces port b)")),
    timing="1 firing per cycle. Pipelined: a result is visible op_latency cycles after its firing (1 = the "
           "next cycle, as every other op).",
    validate=validate_alu,
    output_block=alu_block,
))
_op(OpSpec(
    "reduce", "Reduces each innermost fibre to one value (sum, max or min). Without crd an empty fibre gives no "
              "value, S0 closes a fibre and S_n (n >= 1) closes it and emits S_(n-1); with crd the output is "
              "crd's stream with each coordinate replaced by its fibre's value (0 when empty).",
    inputs=(Port("val", "val", "values, one fibre per reduced group"),
            Port("crd", "crd", "outer coordinates; when driven, every coordinate gets a value (0 for an empty "
                               "fibre) and the output has this stream's structure", optional=True)),
    outputs=(Port("val", "val", "one value per non-empty fibre (per coordinate of crd when driven)"),),
    params=(Param("op", "str", "sum", REDUCE_OPS, "reduction"),
            Param("rows", "bool", None, doc="blocks: also reduce each B x B block's rows, so every value is a "
                                            "B-vector (element r: row r of the fibre's blocks; softmax across "
                                            "the blocks of a row)")),
    timing="Without crd: 1 cycle per input token, plus 1 for each S_n (n >= 1) that closes a non-empty fibre. "
           "With crd: 1 cycle per value, 1 per fibre end, 1 per outer stop that closes a fibre.",
    output_block=reduce_block,
))
_op(OpSpec(
    "spacc", "Sparse accumulator (higher-order reducer): merges every entry of a group (the fibres of the "
             "`group` reduced levels directly above the sub-tree) into one sorted sub-tree of order 1 "
             "(crd_inner), 2 (crd_outer0, crd_inner) or 3 (crd_outer1, crd_outer0, crd_inner); coordinates may "
             "arrive unsorted and repeat.",
    inputs=(Port("crd_inner", "crd", "innermost coordinates"),
            Port("crd_outer{i}", "crd", "outer coordinates (order >= 2; crd_outer0 is the one above crd_inner)",
                 count="order", count_offset=-1),
            Port("val", "val", "values aligned with crd_inner")),
    outputs=(Port("crd_inner", "crd", "merged innermost coordinates, sorted", carries=("crd_inner",)),
             Port("crd_outer{i}", "crd", "merged outer coordinates, sorted", count="order", count_offset=-1,
                  carries=("crd_outer{i}",)),
             Port("val", "val", "accumulated values")),
    params=(Param("order", "int", 1, SPACC_ORDERS, "order of the accumulated sub-tree"),
            Param("group", "int", 1, doc="number of reduced levels directly above the sub-tree (>= 1): a group "
                                         "ends with a stop of level >= group on the outermost sub-tree stream"),
            Param("op", "str", "sum", REDUCE_OPS, "reduction"),
            Param("dim", "int", None, doc="size of the innermost dimension (hardware capacity)",
                  limit=limits.DIMENSION, graph_minimum=1),
            Param("dim_outer", "int", None, doc="size of crd_outer0's dimension (order >= 2, hardware capacity)",
                  limit=limits.DIMENSION, graph_minimum=1),
            Param("dim_outer1", "int", None, doc="size of crd_outer1's dimension (order 3, hardware capacity)",
                  limit=limits.DIMENSION, graph_minimum=1)),
    timing="Double-buffered (two banks, a FIFO of depth 2 between two sides that may fire in the same cycle). "
           "Accumulate side: 1 cycle per input step, no output; a group's steps need a free bank, the step "
           "taking the group-closing stop (cycle t) hands it over. Emit side, groups in order: from t+1+E (after "
           "the previous group's last firing; E = SPACC_EMIT_DELAY: 0 for order 1, 7 for orders 2 and 3), 1 "
           "cycle per entry (sorted) and 1 per fibre end; the last (cycle t', the closing stops) frees the bank "
           "from t'+1. D: taken without a bank, emitted after the last group (no delay E).",
    sim_facts=lambda params, where: spacc_sim_facts(params, where),
    check=lambda params, where: check_spacc(params, where),
))

#: pipeline stages of the alu ops that are pipelined, as functions of the value format (a FixedFormat):
#: the RTL (fuseflow/hw/ops/alu.py) registers its datapath this many times, the simulator delays the result
#: the same number of cycles. Every other alu op has latency 1 (other ops: :func:`op_latency`).
def _alu_stages(fixed):
    w, f = fixed.width, fixed.frac
    return {
        "mul": 5, "square": 5,                      # operands, 18x18 partial products (DSPs), cross sum, sum, saturation
        "exp": 11,                                  # x*log2(e) (4), split, table, product operands, product,
                                                    # value, shift, saturate
        "tanh": 6, "sigmoid": 6, "gelu": 6,         # |x|, table (value and slope), product operands, product,
                                                    # value, result
        "log": 13,                                  # leading one, normalise, table address, table (4), log2,
                                                    # *ln 2 (4), result
        "div": w + 1,                               # operands, overflow test, W-1 quotient bits
        "sqrt": (w + f) // 2 + 2,                   # one root bit (two radicand bits) per stage, rounding, result
        "rsqrt": 3 * f + 1 + (3 * f + 2) // 2 + 2,  # 2**(3F) // x (a bit per stage), then sqrt as above
    }


#: pipeline stages of one block_matmul multiplier (as the alu's mul: operands, partial products, cross sum,
#: sum, saturation)
BLOCK_MUL_STAGES = 5


def block_matmul_latency(block: int) -> int:
    """Cycles from a block_matmul firing to its output block being visible: the firing registers the operands
    (1), output row r (r = 0..B-1) enters the multipliers at the firing's cycle + r, passes the
    BLOCK_MUL_STAGES multiplier stages and ceil(log2 B) adder-tree stages; the block is complete when its last
    row (r = B-1) leaves. B = 1 gives the scalar mul's latency."""
    return 1 + BLOCK_MUL_STAGES + math.ceil(math.log2(block)) + (block - 1)


#: latency of the ops that read a tensor memory (array's values, a compressed level_scan's coordinates): the
#: memory's synchronous read, addressed from the next head as before, is registered once more, so a block
#: RAM's clock-to-output ends at a flip-flop instead of running on through the op and its output channel
#: (docs/hardware.md, "Memories")
MEMORY_READ_LATENCY = 2


def memory_read_latency(op: str, params: dict | None = None) -> int:
    """:data:`MEMORY_READ_LATENCY` for ``array`` and a compressed ``level_scan``, else 1."""
    if op == "array":
        return MEMORY_READ_LATENCY
    if op == "level_scan" and (params or {}).get("format", "compressed") == "compressed":
        return MEMORY_READ_LATENCY
    return 1


def op_interval(op: str, params: dict | None = None) -> int:
    """Cycles between two firings of an op that computes (its initiation interval): B for ``block_matmul``
    (one output row per cycle), 1 for every other op. A block_matmul firing that passes a stop or D costs 1."""
    if op == "block_matmul" and params:
        return int(params.get("block") or 1)
    return 1


def op_latency(op: str, params: dict | None = None, fixed=None) -> int:
    """Cycles from an op's firing to its output token being visible downstream, when nothing stalls.

    1 for every op but the pipelined alu operations (``mul``, ``square``, ``div``, ``exp`` and the function
    units), ``block_matmul`` and the memory readers (``array``, a compressed ``level_scan``:
    :data:`MEMORY_READ_LATENCY`); ``fixed`` is the value format (a :class:`fuseflow.tensors.fixed.FixedFormat`, default 32/16), of
    which the divider's and the square root's depths depend. One definition, read by the simulator, the RTL,
    the depths pass and the docs. A pipelined op still fires once per cycle; while its output is refused it
    keeps at most ``op_latency`` tokens in flight (docs/samml.md, "Latency").
    """
    if op == "block_matmul" and params:
        return block_matmul_latency(int(params.get("block") or 1))
    if op in ("array", "level_scan"):
        return memory_read_latency(op, params)
    if op != "alu" or not params:
        return 1
    if fixed is None:
        from ..tensors.fixed import FixedFormat
        fixed = FixedFormat()
    return 1 + _alu_stages(fixed).get(params.get("op"), 0)


_op(OpSpec(
    "block_matmul", "Block matrix product of aligned value streams of blocks: out = a @ b per token (a B x B "
                    "block times a B x B block, or times a B-vector); N gives a zero block; stops must match and "
                    "pass through.",
    inputs=(Port("a", "val", "B x B blocks"),
            Port("b", "val", "B x B blocks (rhs matrix) or B-vectors (rhs vector)")),
    outputs=(Port("out", "val", "a @ b: B x B blocks or B-vectors, as b"),),
    params=(Param("block", "int", REQUIRED, doc="block size B", minimum=1, limit=limits.DIMENSION),
            Param("rhs", "str", "matrix", ("matrix", "vector"), "shape of b's blocks: B x B or B")),
    timing="Initiation interval B (op_interval): a firing on data (or N) takes the op for B cycles, one output "
           "row per cycle; a stop or D fires in 1 cycle. Pipelined: a result is visible op_latency cycles after "
           "its firing (block_matmul_latency: 1 + 5 multiplier stages + ceil(log2 B) adder stages + B - 1 rows).",
    output_block=matmul_block,
    input_blocks=matmul_input_blocks,
))
#: spacc's emit start delay E per order: the emit side's first firing of a bank handed over in cycle t is at
#: the earliest t + 1 + E. Order 1: 0. Orders 2 and 3: the RTL walks the bank's rows (row-nonempty bits, a
#: fetch of the next nonempty row, the current row's lowest bit) and reads each entry's value from the
#: accumulator memory (latency 2) into a queue of firing descriptors ahead of the outputs: 7 cycles from the
#: handover to the queue's head (docs/hardware.md, "spacc capacity and banks")
SPACC_EMIT_DELAY = {1: 0, 2: 7, 3: 7}


def spacc_emit_delay(order):
    """The emit start delay E of spacc at ``order`` (:data:`SPACC_EMIT_DELAY`)."""
    return SPACC_EMIT_DELAY[int(order)]


def check_spacc(params, where="op spacc"):
    """Raise GraphError (one line) for a spacc ``order`` or ``group`` out of range."""
    order, group = params.get("order", 1), params.get("group", 1)
    if order not in SPACC_ORDERS:
        raise GraphError(where, f"spacc order must be 1, 2 or 3, got {order!r}")
    if not isinstance(group, int) or isinstance(group, bool) or group < 1:
        raise GraphError(where, f"spacc group must be an integer >= 1 (the number of reduced levels), got {group!r}")


def spacc_sim_facts(params, where="op spacc"):
    """spacc's :attr:`OpSpec.sim_facts`: the parameters checked (:func:`check_spacc`) and the emit start delay
    E as ``_emit_delay`` (:func:`spacc_emit_delay`)."""
    check_spacc(params, where)
    return {"_emit_delay": spacc_emit_delay(params.get("order", 1))}


_op(OpSpec(
    "crd_drop", "Drops outer coordinates whose inner fibre is empty, and the empty inner fibres with them "
                "(and with them the aligned reference fibres, when arity > 0).",
    inputs=(Port("outer", "crd", "outer coordinates"), Port("inner", "crd", "inner coordinates"),
            Port("ref{i}", "any", "references (or values) aligned with inner", count="arity")),
    outputs=(Port("outer", "crd", "kept outer coordinates", carries=("outer",)),
             Port("inner", "crd", "inner coordinates", carries=("inner",)),
             Port("ref{i}", "any", "references aligned with the kept inner coordinates", count="arity",
                  carries=("ref{i}",))),
    params=(Param("arity", "int", None, doc="number of reference streams aligned with inner (default 0)", minimum=0,
                  limit=limits.ARITY),),
    timing="1 cycle per step; a kept fibre that follows another in the same parent costs 1 extra cycle "
           "(its held S0). The aligned references move with inner: a step that reads inner needs their heads "
           "too.",
))
_op(OpSpec(
    "crd_hold", "Repeats each outer coordinate once per coordinate of its inner fibre (the outer coordinate "
                "stream at the inner stream's structure).",
    inputs=(Port("outer", "crd", "outer coordinates"), Port("inner", "crd", "inner coordinates")),
    outputs=(Port("outer", "crd", "outer coordinates, one per inner coordinate", carries=("outer",)),),
    timing="1 cycle per inner token, plus 1 per outer stop that closes a fibre.",
))
_op(OpSpec(
    "level_write", "Writes one level of an output tensor from its coordinate stream (seg and crd arrays).",
    inputs=(Port("crd", "crd", "coordinates in canonical form (no empty fibres below the top level), or with "
                             "dense_above one fibre per coordinate of the levels above"),),
    params=(_FORMAT, _TENSOR, _LEVEL,
            Param("dim", "int", None, doc="size of a dense level", limit=limits.DIMENSION, graph_minimum=1),
            Param("dense_above", "bool", False, doc="the levels above are dense (an intermediate's, written with "
                                                   "every coordinate): every stop ends one fibre, an empty one "
                                                   "included, as at the top level")),
    memory="write",
    memory_array="level",
    timing="1 cycle per token.",
))
_op(OpSpec(
    "value_write", "Writes the value array of an output tensor; stops are dropped.",
    inputs=(Port("val", "val", "values aligned with the last level's coordinates"),),
    params=(_TENSOR,),
    memory="write",
    memory_array="vals",
    timing="1 cycle per token.",
))

_LANES = Param("lanes", "int", REQUIRED, doc="number of lanes (>= 2)", minimum=2, limit=limits.LANES)
_op(OpSpec(
    "parallelize", "Splits a stream across lanes, round-robin by fibre: the k-th data (or N) token of every fibre "
                   "goes to lane k mod lanes (on the outermost level: the k-th coordinate and the whole sub-tree "
                   "below it); every stop and D goes to every lane.",
    inputs=(Port("in", "token", "the stream to split (crd, ref or val)"),),
    outputs=(Port("out{i}", "token", "lane i's share of the stream", count="lanes", carries=("in",)),),
    params=(_LANES, Param("dim", "int", None, doc="size of the split dimension (data tokens per fibre): the depths "
                                                  "pass gives every lane's channel ceil(dim / lanes) + 2, so a "
                                                  "lane can run ahead of the others by all its rows",
                          limit=limits.DIMENSION)),
    timing="1 cycle per token: a data token or N writes its lane only; a stop or D writes every lane (so it "
           "waits for room in all of them).",
    lane_role="split",
))
_op(OpSpec(
    "serialize", "Merges lanes back into one stream in the original order: the lanes' coordinates of the "
                 "parallelized level (key i: fibres of ascending coordinates, the same stops on every lane) are "
                 "merged fibre by fibre by smallest coordinate, and for each one the lane's unit of the payload "
                 "(one token at depth 0; at depth d >= 1 the fibre below the key, closed by a stop of level >= "
                 "d-1) is copied, closing stops renumbered (S_(d+m) for a key fibre's last unit, m its key stop).",
    inputs=(Port("key{i}", "crd", "lane i's coordinates of the parallelized level (ascending per fibre; stops, "
                              "D)", count="lanes"),
            Port("in{i}", "token", "lane i's payload, aligned with key i at the given depth", count="lanes")),
    outputs=(Port("out", "token", "the merged payload", carries=("in{i}",)),),
    params=(_LANES, Param("depth", "int", 0, doc="levels of the payload below the keys' level (0: one token per "
                                                  "key coordinate)", minimum=0)),
    timing="Depth 0: 1 cycle per key coordinate (needs every key's head and the chosen lane's payload head), "
           "1 for the closing S0 (every key at S0), 1 for D. Depth d >= 1: per key coordinate 1 cycle to select "
           "the lane (pops its key, no output), then 1 per payload token of its unit; the closing stop also "
           "needs every key's head (S_(d+m) when every key is at a stop S_m, else S_(d-1)); then 1 cycle per key "
           "fibre when every key is at its stop S_m (emits S_(d+m) only if no unit of the fibre was copied) and "
           "1 for D.",
    lane_role="merge",
))


def check_mask_scan(params, where="op mask_scan"):
    """Raise GraphError (one line) for a mask_scan or crd_mask whose pattern is bad or does not fit
    rows x dim."""
    from .masks import check_shape, parse_mask
    from ..errors import ProgramError
    rows, dim = params.get("rows"), params.get("dim")
    for key, v in (("rows", rows), ("dim", dim)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise GraphError(where, f"mask_scan {key} must be an integer >= 1, got {v!r}")
    try:
        check_shape(parse_mask(params.get("mask", ""), where), rows, dim, where)
    except ProgramError as exc:
        raise GraphError(exc.what, exc.why) from None


def memory_role(op: str) -> tuple:
    """``(memory, memory_array)`` of ``op``: ``("read" | "write" | None, "level" | "vals" | None)``."""
    spec = OPS.get(op)
    return (spec.memory, spec.memory_array) if spec is not None else (None, None)


def get_op(name, where="op"):
    """The :class:`OpSpec` called ``name``; raises UnknownOpError naming the known ops."""
    try:
        return OPS[name]
    except KeyError:
        raise UnknownOpError(where, f"unknown op '{name}' (known: {', '.join(sorted(OPS))})") from None


def port_kind(spec, port):
    """The declared kind of an expanded port name (``crd1`` -> the kind of ``crd{i}``)."""
    for p in spec.inputs + spec.outputs:
        if p.name == port or (p.count and _matches(p.name, port)):
            return p.kind
    raise KeyError(port)


def _matches(template, name):
    prefix = template.split("{")[0]
    return name.startswith(prefix) and name[len(prefix):].isdigit()


# ---- the off-chip tile transfer (DMA) ------------------------------------------------------------------------
# Not a stream op: a tiled program (graph.json "tiling", fuseflow/samml/tileplan.py) loads each tile's input
# arrays from off-chip memory before the kernel runs and stores its outputs after. Its timing is
# fuseflow/samml/offchip.py's contract; its parameters are declared here once (OffchipContract's defaults).


@dataclass(frozen=True)
class TransferSpec:
    """The off-chip tile transfer: its one-line doc, parameters and timing (rendered into the op reference)."""
    name: str
    doc: str
    params: tuple
    timing: str = ""

    def param(self, name):
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def defaults(self) -> dict:
        """{parameter: default}."""
        return {p.name: p.default for p in self.params}


DMA = TransferSpec(
    "dma",
    "Tile load/store between off-chip memory and a kernel's tensor memories, through one AXI4 memory-mapped "
    "master port: before a tile runs, its tile record and the arrays of its input tensors that change are read "
    "(one transfer per tensor memory: a compressed level's seg, crd and first, then the values; a beat carries "
    "as many of a memory's entries as fit, a power of two, with pack 1); after it, every memory of its outputs is written whole (its capacity).",
    (
        Param("word_bytes", "int", 4, (4, 8, 16, 32, 64), "bytes per AXI beat (the port's data width / 8)"),
        Param("latency", "int", 20, doc="cycles from a read burst's AR to its first beat (and from a write "
                                        "burst's last W beat to its B)", minimum=1),
        Param("burst", "int", 64, doc="most beats per burst (AXI4 INCR: 1..256; bursts never cross 4 KiB)",
              minimum=1),
        Param("outstanding", "int", 4, doc="most bursts in flight", minimum=1),
        Param("buffers", "int", 1, (1, 2), "1: load, run, store in turn; 2: the next tile's loads overlap "
                                           "the current tile's run (the changing inputs have two banks)"),
        Param("pack", "int", 1, (0, 1), "1: a beat carries the largest power of two of a memory's entries that "
                                        "fits it (each in a slot of word_bytes * 8 / that many bits), and the "
                                        "memory takes them in one cycle; 0: one entry per beat"),
    ),
    "record_cycles per tile, read_cycles(address, beats) / write_cycles(address, beats) per array (beats: "
    "entries / entries_per_beat, rounded up) at the "
    "addresses of layout (every array on a 64-byte boundary), and tiled_cycles over the tile sequence "
    "(fuseflow/samml/offchip.py; the RTL's AXI4 master meets them cycle for cycle).",
)
