"""The parallel-lanes pass: run the sub-tree below one of a kernel's indices on n lanes (nested: once per index,
outermost first).

Described here for the outermost index (level 0); for an index at level L read "level L" for "level 0" and
"fibres of level L" for "rows". A second index runs the pass again on the rewritten kernel: the first one's
parallelizers and lane copies at levels <= L are its head, the first one's serializers its tail, and the lane
copies below L are copied again (``<node>_l<i>_l<j>``); its serializers' keys have one fibre per outer
coordinate.

``parallel_kernel(program, kernel, lanes)`` rewrites one kernel (in place): the nodes that work *below* the
outermost index (the lane region) are copied ``lanes`` times; every stream of the outermost level that enters
the region is split by a ``parallelize`` node (round-robin by coordinate: lane l runs the rows l, l+n, ...);
streams above it (the root's reference) are fanned out to every lane; every stream that leaves the region for a
writer is merged back by a ``serialize`` node keyed on that tensor's outermost coordinates, so the writers see
exactly the single-lane streams and the written tensors are identical, bit for bit::

    root -> scan_B_i -+-> parallelize -> [scan_B_j -> ... -> reduce]_lane0 -+-> serialize -> write_x_vals
                      |              `-> [scan_B_j -> ... -> reduce]_lane1 -'
                      `-> ...

Which node is where follows from the *level* of every stream (:func:`stream_levels`: -1 for the root's
reference, 0 for the outermost index, one more per level below; reductions move up). The head (serial) part
is every node whose inputs and outputs are all at level <= 0 and whose producers are all in the head: the
outermost scans, their co-iteration, the repeats of other operands' roots. Writers stay single. Everything
else is the lane region.

A reduction over the parallelized index (a reduce whose output is above level 0, a spacc whose reduced levels
include level 0) stays single, with everything it feeds (the *tail*, like the writers): the lanes' terms reach it
through serializers in the single lane's order, so it adds them in the same order and the sums are identical,
bit for bit, in float and in (saturating) fixed point. Refused (one-line :class:`~fuseflow.errors.ProgramError`):
a tail stream that feeds the lanes again. A lane stream into the tail whose keys no stream carries (a reduce of
reduces without crd) moves its producer into the tail.

Memories: every lane's copy of a level_scan or array reads the tensor through its own read port; the hardware
builds one combinational read port per op (``fuseflow.hw.top``), which synthesis implements as one copy of the
memory per port (replication), and the simulator gives every node its own view of the arrays, so neither has
port conflicts and the correlation stays exact.
"""

from __future__ import annotations

import dataclasses
import re

from ...errors import ProgramError
from ...samml.blocks import apply_blocks
from ...samml.graph import Kernel, PortRef, Program
from .locate import unique_node_id

__all__ = ["parallel_kernel", "stream_levels", "lanes_pass", "lane_copy_id", "lane_zero"]

WRITERS = ("level_write", "value_write")
#: depth of every channel into a serializer: how far (in tokens) a lane may run ahead of the one the serializer
#: waits for, since rows of different lengths let the lanes drift apart (benchmarks/parallel_bench.py)
LANE_SLACK = 16
#: a payload of depth >= 1 (a fibre per key coordinate) gets room for one fibre of the largest dimension below
#: the index (+ 2), up to this: while the serializer copies one lane's fibre the others fill theirs (BigBird
#: attention at i = 4: 63,938 cycles at 16, 31,298 at 64, 25,876 at 130)
LANE_UNIT_MAX = 64


def lane_copy_id(node_id: str, lane: int) -> str:
    """The id of lane ``lane``'s copy of ``node_id`` (nested lanes append once per index: ``n_l1_l0``)."""
    return f"{node_id}_l{lane}"


_LANE_SUFFIX = re.compile(r"(?:_l\d+)+$")


def lane_zero(kernel: Kernel, node_id: str) -> str | None:
    """The id of lane 0's copy (lane 0 at every nesting level) of the lane copy ``node_id``, or None when
    ``node_id`` is not a lane copy of another lane (no parallelizer in the kernel, lane 0's own copy, or no
    node of the same op under lane 0's name)."""
    m = _LANE_SUFFIX.search(node_id)
    if m is None or not any(n.op == "parallelize" for n in kernel.nodes.values()):
        return None
    rep = node_id[:m.start()] + "_l0" * m.group(0).count("_l")
    if rep == node_id or rep not in kernel.nodes or kernel.nodes[rep].op != kernel.nodes[node_id].op:
        return None
    return rep


def lanes_pass(program: Program, options) -> dict:
    """The pass: ``options.lanes`` (:class:`~fuseflow.compiler.options.CompileOptions`) maps kernel names to a
    lane count, to ``{"lanes": n, "dim": size of the
    index, "level": the index's place in the kernel's order (0: outermost)}``, or to a list of those (nested
    lanes: applied outermost first, the inner index's lanes inside every outer lane). The compiler resolves
    ``parallel i N`` to the kernels that have i. Returns {kernel: lanes made (their product when nested)}."""
    wanted = options.lanes
    done = {}
    for kernel in program.kernels:
        want = wanted.get(kernel.name, 1)
        specs = want if isinstance(want, list) else [want if isinstance(want, dict) else {"lanes": want}]
        made = 1
        for spec in sorted(specs, key=lambda w: w.get("level", 0)):
            if spec["lanes"] > 1:
                made *= parallel_kernel(program, kernel, spec["lanes"], spec.get("dim"), spec.get("level", 0),
                                        spec.get("unit"))
        if made > 1:
            done[kernel.name] = made
    if done:
        apply_blocks(program)                # the lanes' copies carry the blocks of the streams they copy
        program.validate()
    return done


def stream_levels(kernel: Kernel) -> dict:
    """{stream id: level}: -1 for the root's reference, 0 for the kernel's outermost index, one more per level
    below (a level_scan's outputs are one below its input; a reduction's output one above its values)."""
    import networkx as nx
    level = {}

    def lv(nid, port):
        s = kernel.driver(nid, port)
        return None if s is None else level.get(s.id)

    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        op, p = node.op, node.params
        if op == "root":
            outs = {"ref": -1}
        elif op in ("level_scan", "mask_scan"):
            outs = {"crd": lv(nid, "ref") + 1, "ref": lv(nid, "ref") + 1}
        elif op == "reduce":
            outs = {"val": lv(nid, "crd") if kernel.driver(nid, "crd") else lv(nid, "val") - 1}
        elif op == "spacc":
            order, shift = p.get("order", 1), -p.get("group", 1)
            outs = {"crd_inner": lv(nid, "crd_inner") + shift, "val": lv(nid, "val") + shift,
                    **{f"crd_outer{m}": lv(nid, f"crd_outer{m}") + shift for m in range(order - 1)}}
        elif op == "crd_drop":
            inner = lv(nid, "inner")
            outs = {"outer": lv(nid, "outer"), "inner": inner,
                    **{f"ref{i}": inner for i in range(p.get("arity") or 0)}}
        elif op in ("crd_hold",):
            outs = {"outer": lv(nid, "inner")}
        elif op in WRITERS:
            outs = {}
        else:
            # every other op keeps the level of its (aligned) inputs
            ins = [lv(nid, port) for port, _ in node.spec.input_ports(p) if kernel.driver(nid, port)]
            ins = [x for x in ins if x is not None]
            base = max(ins) if ins else 0
            outs = {port: base for port, _ in node.spec.output_ports(p)}
        for port, value in outs.items():
            s = kernel.output_stream(nid, port)
            if s is not None:
                level[s.id] = value
    return level


def _spacc_top(kernel, node, levels):
    """The level a spacc's merged sub-tree lands on: its top input's level minus ``group`` (the reduced levels
    are the ``group`` levels above it; one of them is level 0 when this is below 1)."""
    order = node.params.get("order", 1)
    top = kernel.driver(node.id, f"crd_outer{order - 2}" if order >= 2 else "crd_inner")
    return levels[top.id] - node.params.get("group", 1)


def _reduces_over_index(kernel, node, levels, level) -> bool:
    """True when ``node`` sums over the parallelized index (at ``level``): an output above it, or a spacc whose
    reduced levels include it."""
    if node.op == "spacc":
        return _spacc_top(kernel, node, levels) <= level
    return any(levels[s.id] < level for s in kernel.streams.values() if s.src.node == node.id)


def _split(kernel, levels, level=0):
    """(head, region, tail): node ids of the serial head, the lane region and the serial tail (the writers, every
    node that reduces over the parallelized index, and everything fed by them)."""
    import networkx as nx
    head, region, tail = set(), set(), set()
    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        ins = [kernel.driver(nid, port) for port, _ in node.spec.input_ports(node.params)]
        ins = [s for s in ins if s is not None]
        outs = [kernel.output_stream(nid, port) for port, _ in node.spec.output_ports(node.params)]
        outs = [s for s in outs if s is not None]
        if node.op in WRITERS or any(s.src.node in tail for s in ins):
            tail.add(nid)
        elif (all(s.src.node in head and levels[s.id] <= level for s in ins)
                and all(levels[s.id] <= level for s in outs)):
            head.add(nid)
        elif node.op == "serialize" or _reduces_over_index(kernel, node, levels, level):
            # (a serializer of an outer index's lanes: its lanes end above this index)
            tail.add(nid)
        else:
            region.add(nid)
    return head, region, tail


def parallel_kernel(program: Program, kernel: Kernel, lanes: int, dim: int | None = None, level: int = 0,
                    unit: int | None = None) -> int:
    """Rewrite ``kernel`` to run the sub-tree below its outermost index on ``lanes`` lanes; returns the number
    of lanes made (1 when there is no work below the outermost index: the kernel is left alone). ``dim``: the
    size of the outermost index, given to the parallelizers (their lane channels' depth floor)."""
    levels = stream_levels(kernel)
    head, region, tail = _split(kernel, levels, level)
    if not region:
        return 1
    where = f"parallel: kernel {kernel.name}"
    for s in kernel.streams.values():
        if s.src.node in tail and any(d.node in region for d in s.dsts):
            raise ProgramError(where, f"stream {s.id} feeds the lanes from below a reduction over the "
                                      f"parallelized index")
    anchors = _Anchors(kernel, levels, head, region, level)
    while True:
        # a lane stream into the tail without keys (a reduce of reduces without crd: no stream has the
        # coordinates of its non-empty fibres): its producer and what the producer feeds join the tail
        unkeyed = [s for s in kernel.streams.values() if s.src.node in region
                   and any(d.node in tail for d in s.dsts) and not _keyable(anchors, s)]
        if not unkeyed:
            break
        import networkx as nx
        moved = ({unkeyed[0].src.node} | nx.descendants(kernel.graph(), unkeyed[0].src.node)) & region
        region -= moved
        tail |= moved
        if not region:
            return 1
        anchors = _Anchors(kernel, levels, head, region, level)
    _check_one_dealing(kernel, levels, region, anchors, where)
    new = Kernel(kernel.name)
    copies = {nid: [lane_copy_id(nid, l) for l in range(lanes)] for nid in region}
    taken = set(kernel.nodes)
    for nid, node in kernel.nodes.items():
        if nid in region:
            for cid in copies[nid]:
                if cid in taken:
                    raise ProgramError(where, f"node id {cid} of a lane copy is taken")
                new.add(node.op, id=cid, **dict(node.params))
        else:
            new.add(node.op, id=nid, **dict(node.params))
    splitters = {}                             # head stream id -> parallelize node id

    def lane_source(stream, lane):
        """The PortRef lane ``lane`` reads ``stream`` from."""
        if stream.src.node in region:
            return PortRef(copies[stream.src.node][lane], stream.src.port)
        if levels[stream.id] < level:
            return stream.src                  # above the index (the root's reference): every lane reads it
        pid = splitters.get(stream.id)
        if pid is None:
            pid = unique_node_id(new, f"par_{stream.src.node}_{stream.src.port}")
            new.add("parallelize", id=pid, lanes=lanes, dim=dim)
            new.connect(stream.src, pid, "in", kind=stream.kind)
            splitters[stream.id] = pid
        return PortRef(pid, f"out{lane}")

    for s in kernel.streams.values():
        for d in s.dsts:
            if d.node in region:
                for lane, cid in enumerate(copies[d.node]):
                    new.connect(lane_source(s, lane), cid, d.port, kind=s.kind)
            elif s.src.node not in region:
                new.connect(s.src, d.node, d.port, kind=s.kind)
            else:
                # a lane stream into the tail (a writer, or a reduction over the index): merge the lanes on the
                # coordinates of the parallelized level its units hang under
                if s.kind == "repsig":
                    # a serializer merges coordinates, references and values; a repeat signal's tokens carry no
                    # coordinate to order them by (found by test_random_programs_on_lanes)
                    raise ProgramError(where, f"the lanes would end in the repeat signal {s.id} (into node "
                                              f"{d.node}), which no serializer merges: parallelize another index")
                key = anchors.key(s)
                lane_keys = [lane_source(key, lane) for lane in range(lanes)] if key is not None else \
                    _kept_keys(new, anchors, s, lanes, lane_source)
                if lane_keys is None:
                    raise ProgramError(where, f"no coordinate stream of the parallelized level is aligned with "
                                              f"{s.id} (the serializer's keys)")
                sid = unique_node_id(new, f"ser_{d.node}")
                new.add("serialize", id=sid, lanes=lanes, depth=levels[s.id] - level)
                for lane in range(lanes):
                    new.connect(lane_keys[lane], sid, f"key{lane}", kind="crd")
                    new.connect(lane_source(s, lane), sid, f"in{lane}", kind=s.kind)
                new.connect(PortRef(sid, "out"), d.node, d.port, kind=s.kind)
    for s in kernel.streams.values():         # depths the graph already asks for (intersect look-ahead)
        if s.depth is None:
            continue
        if s.src.node in region:
            for cid in copies[s.src.node]:
                out = new.output_stream(cid, s.src.port)
                if out is not None:
                    out.depth = max(out.depth or 0, s.depth)
        else:
            out = new.output_stream(s.src.node, s.src.port)
            if out is not None:
                out.depth = max(out.depth or 0, s.depth)
    for nid, node in new.nodes.items():        # lanes drift apart (rows differ in length): let them run ahead
        if node.op == "serialize" and nid not in kernel.nodes:
            room = LANE_SLACK
            if node.params["depth"] >= 1 and unit:
                room = max(room, min(unit + 2, LANE_UNIT_MAX))
            for port, _ in node.spec.input_ports(node.params):
                s = new.driver(nid, port)
                s.depth = max(s.depth or 0, room if port.startswith("in") else LANE_SLACK)
    kernel.nodes, kernel.streams = new.nodes, new.streams
    kernel._reindex()
    return lanes


def _check_one_dealing(kernel, levels, region, anchors, where):
    """ProgramError when a lane op merges streams of the parallelized level made by different co-iterations (a
    union of a compressed and a dense scan): the parallelizers deal by position, so the two would give one
    coordinate to different lanes. Dense scans deal alike (position = coordinate)."""
    import networkx as nx

    def dense(nid):
        node = kernel.nodes[nid]
        return node.op == "level_scan" and node.params.get("format") == "dense"
    makers = {}
    for nid in nx.topological_sort(kernel.graph()):
        if nid not in region:
            continue
        mine = set()
        for port, _ in kernel.nodes[nid].spec.input_ports(kernel.nodes[nid].params):
            src = kernel.driver(nid, port)
            if src is None:
                continue
            if src.src.node in region:
                mine |= makers[src.src.node]
            elif levels[src.id] == anchors.level:
                mine.add(anchors.made_by(src))
        makers[nid] = mine
        if len(mine) > 1 and not all(dense(m) for m in mine):
            raise ProgramError(where, f"{kernel.nodes[nid].op} node {nid} merges coordinates of the parallelized "
                                      f"index from {' and '.join(sorted(mine))}, which the lanes would deal "
                                      f"differently (by position); not supported yet")


def _kept_sources(anchors, s):
    """(outer, inner): the streams a crd_drop per lane needs to make the keys of ``s``, a lane stream whose
    units are the non-empty fibres below the parallelized level (a reduce without crd) when no stream carries
    their coordinates; None if there are none."""
    want = anchors.anchor(s)
    if want[0] != "nonempty":
        return None
    inner = [t for t in anchors.k.streams.values()
             if t.kind == "crd" and anchors.levels.get(t.id) == anchors.level + 1 and t.src.node in anchors.region
             and anchors.shape(t) == want[1]]
    if not inner and len(want[1]) == 3 and want[1][1] in anchors.region:
        inner = [s for s in [anchors.unconnected_crd(want[1][1], anchors.level + 1)] if s is not None]
    outer = anchors.key(inner[0]) if inner else None
    return None if outer is None else (outer, inner[0])


def _keyable(anchors, s) -> bool:
    """Whether the serializer of lane stream ``s`` can get keys."""
    return anchors.key(s) is not None or _kept_sources(anchors, s) is not None


def _kept_keys(new, anchors, s, lanes, lane_source):
    """Keys for a lane stream whose units are the non-empty fibres below the parallelized level (a reduce
    without crd) when no stream carries their coordinates: a crd_drop per lane on the lane's dealt coordinates
    and a coordinate stream of the reduced fibres. None if there is none."""
    found = _kept_sources(anchors, s)
    if found is None:
        return None
    outer, inner = found
    keys = []
    for lane in range(lanes):
        did = unique_node_id(new, f"keep_{s.src.node}_l{lane}")
        new.add("crd_drop", id=did)
        new.connect(lane_source(outer, lane), did, "outer", kind="crd")
        new.connect(lane_source(inner, lane), did, "inner", kind="crd")
        keys.append(PortRef(did, "outer"))
    return keys


class _Anchors:
    """Which outermost-level coordinates a stream's units hang under, so a serializer gets aligned keys.

    ``shape(s)`` names a stream's token structure (streams with equal names carry the same stops and as many
    data tokens in the same places: an op's aligned outputs, element-wise ops' inputs and outputs).
    ``anchor(s)`` names the sequence of outermost coordinates whose units ``s`` has: ``("lanes",)`` for the
    coordinates the parallelizers deal (the head's level-0 streams), ``("nonempty", shape)`` for those of them
    whose fibres of ``shape`` are not empty (what a level-0 crd_drop keeps, and what a reduce without crd emits
    values for). Ops that keep their input's structure keep its anchor."""

    def __init__(self, kernel, levels, head, region, level=0):
        self.k, self.levels, self.head, self.region, self.level = kernel, levels, head, region, level
        self._shape, self._anchor = {}, {}

    def _in(self, nid, port):
        return self.k.driver(nid, port)

    def _follow(self, node):
        """The input whose structure an op's outputs keep (None: the op makes a new structure)."""
        op = node.op
        port = {"array": "ref", "alu": "a", "repeat": "repsig", "repeat_sig": "in", "locate": "crd",
                "crd_hold": "inner", "crd_mask": "crd", "parallelize": "in"}.get(op)
        return self._in(node.id, port) if port else None

    def above(self, s):
        """Which fibres above the index a head stream has: the id of the nearest crd_drop on the way back to the
        root (it removed the empty ones; an inner index's lanes may read streams from before and after it), or
        "" for all of them."""
        node = self.k.nodes[s.src.node]
        if node.op == "crd_drop":
            return node.id
        src = self._follow(node)
        if src is None:
            ports = node.spec.input_ports(node.params)
            src = self._in(node.id, ports[0][0]) if ports else None
        return self.above(src) if src is not None else ""

    def shape(self, s):
        if s.id not in self._shape:
            node = self.k.nodes[s.src.node]
            if s.src.node in self.head and self.levels[s.id] == self.level:
                value = ("lanes", self.above(s))
            elif node.op == "reduce" and self._in(node.id, "crd") is not None:
                value = self.shape(self._in(node.id, "crd"))
            else:
                src = self._follow(node)
                value = self.shape(src) if src is not None else (node.op, node.id,
                                                                 "outer" if s.src.port == "outer" else "")
            self._shape[s.id] = value
        return self._shape[s.id]

    def anchor(self, s):
        if s.id not in self._anchor:
            node, lv = self.k.nodes[s.src.node], self.levels
            if s.src.node in self.head:
                value = ("lanes", self.above(s), self.made_by(s) if lv[s.id] == self.level else "")
            elif node.op == "crd_drop" and lv[self._in(node.id, "outer").id] == self.level:
                value = ("nonempty", self.shape(self._in(node.id, "inner")))
            elif node.op == "crd_drop":
                value = self.anchor(self._in(node.id, "outer"))
            elif node.op == "reduce" and self._in(node.id, "crd") is None and lv[s.id] == self.level:
                value = ("nonempty", self.shape(self._in(node.id, "val")))
            elif node.op == "reduce":
                value = self.anchor(self._in(node.id, "crd") or self._in(node.id, "val"))
            elif node.op == "spacc":
                value = self.anchor(self._in(node.id, "crd_inner"))     # one sub-tree per group, empty or not
            elif node.op in ("union", "intersect") and lv[s.id] == self.level:
                value = ("made", node.id)         # a co-iteration in the lanes makes the level's coordinates anew
            else:
                src = self._follow(node)
                if src is None:                   # level_scan, intersect, union, mask_scan: their first input
                    first = node.spec.input_ports(node.params)[0][0]
                    src = self._in(node.id, first)
                value = self.anchor(src)
            self._anchor[s.id] = value
        return self._anchor[s.id]

    def key(self, s):
        """A crd stream of the parallelized level with the anchor of ``s`` (a head stream the parallelizers split,
        or a crd_drop's outer coordinates in the lanes), or None. When the co-iteration that made the level's
        coordinates has its ``crd`` output unconnected (a reduced index), a stand-in for that port."""
        want = self.anchor(s)
        found = [t for t in self.k.streams.values()
                 if t.kind == "crd" and self.levels.get(t.id) == self.level and t.src.node in self.head | self.region
                 and self.anchor(t) == want]

        def rank(t):                    # lane streams first, then head streams the lanes already read
            if t.src.node not in self.head:
                return 0
            return 1 if any(d.node not in self.head for d in t.dsts) else 2
        best = min(found, key=rank, default=None)
        made = want[2] if want[0] == "lanes" and len(want) > 2 else want[1] if want[0] == "made" else None
        if best is None and made:
            best = self.unconnected_crd(made, self.level)
        return best

    def unconnected_crd(self, nid, level):
        """A stand-in for the stream node ``nid``'s unconnected ``crd`` output would carry (at ``level``), or
        None."""
        node = self.k.nodes[nid]
        if self.k.output_stream(nid, "crd") is not None or \
                "crd" not in [port for port, _ in node.spec.output_ports(node.params)]:
            return None
        stand_in = _Unconnected(f"{nid}.crd", PortRef(nid, "crd"), "crd", [])
        self.levels[stand_in.id] = level
        return stand_in

    def made_by(self, s):
        """The node that made the coordinates of a head stream at the parallelized level (its scan, co-iteration
        or drop), following the ops that keep their input's structure."""
        node = self.k.nodes[s.src.node]
        if node.op in ("level_scan", "mask_scan", "intersect", "union", "crd_drop"):
            return node.id
        src = self._follow(node)
        if src is None or self.levels.get(src.id) != self.levels.get(s.id):
            return node.id
        return self.made_by(src)


@dataclasses.dataclass
class _Unconnected:
    """A stand-in for the stream an unconnected ``crd`` port would carry (a serializer's keys)."""
    id: str
    src: PortRef
    kind: str
    dsts: list
