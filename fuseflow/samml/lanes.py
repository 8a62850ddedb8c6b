"""The parallel-lanes pass: run the sub-tree below a kernel's outermost index on n lanes.

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

Refused (one-line :class:`~fuseflow.errors.ProgramError`): a reduction over the parallelized index (a lane
stream at level < 0, or a spacc whose reduced levels include level 0: lanes would need a merge tree), and an
output whose outermost level has no writer (the serializer needs its coordinates as keys).

Memories: every lane's copy of a level_scan or array reads the tensor through its own read port; the hardware
builds one combinational read port per op (``fuseflow.hw.top``), which synthesis implements as one copy of the
memory per port (replication), and the simulator gives every node its own view of the arrays, so neither has
port conflicts and the correlation stays exact.
"""

from __future__ import annotations

from ..errors import ProgramError
from .blocks import apply_blocks
from .graph import Kernel, PortRef, Program
from .locate import unique_node_id

__all__ = ["parallel_kernel", "stream_levels", "lanes_pass"]

WRITERS = ("level_write", "value_write")
#: depth of every channel into a serializer: how far (in tokens) a lane may run ahead of the one the serializer
#: waits for, since rows of different lengths let the lanes drift apart (benchmarks/parallel_bench.py)
LANE_SLACK = 16


def lanes_pass(program: Program, options: dict | None = None) -> dict:
    """The pass: ``options["parallel"]`` maps kernel names to lane counts, or to ``{"lanes": n, "dim": size of
    the outermost index}`` (the compiler resolves ``parallel i N`` to the kernels whose outermost index is i).
    Returns {kernel: lanes made} (an empty dict: nothing)."""
    wanted = (options or {}).get("parallel") or {}
    done = {}
    for kernel in program.kernels:
        want = wanted.get(kernel.name, 1)
        n, dim = (want["lanes"], want.get("dim")) if isinstance(want, dict) else (want, None)
        if n > 1:
            done[kernel.name] = parallel_kernel(program, kernel, n, dim)
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


def _split(kernel, levels):
    """(head, region, writers): node ids of the serial head, the lane region and the writers."""
    import networkx as nx
    head, region, writers = set(), set(), set()
    for nid in nx.topological_sort(kernel.graph()):
        node = kernel.nodes[nid]
        if node.op in WRITERS:
            writers.add(nid)
            continue
        ins = [kernel.driver(nid, port) for port, _ in node.spec.input_ports(node.params)]
        ins = [s for s in ins if s is not None]
        outs = [kernel.output_stream(nid, port) for port, _ in node.spec.output_ports(node.params)]
        outs = [s for s in outs if s is not None]
        if (all(s.src.node in head and levels[s.id] <= 0 for s in ins)
                and all(levels[s.id] <= 0 for s in outs)):
            head.add(nid)
        else:
            region.add(nid)
    return head, region, writers


def parallel_kernel(program: Program, kernel: Kernel, lanes: int, dim: int | None = None) -> int:
    """Rewrite ``kernel`` to run the sub-tree below its outermost index on ``lanes`` lanes; returns the number
    of lanes made (1 when there is no work below the outermost index: the kernel is left alone). ``dim``: the
    size of the outermost index, given to the parallelizers (their lane channels' depth floor)."""
    levels = stream_levels(kernel)
    head, region, writers = _split(kernel, levels)
    if not region:
        return 1
    where = f"parallel: kernel {kernel.name}"
    for nid in sorted(region):
        node = kernel.nodes[nid]
        low = [levels[s.id] for s in kernel.streams.values() if s.src.node == nid and levels[s.id] < 0]
        if low or (node.op == "spacc" and _spacc_top(kernel, node, levels) < 1):
            raise ProgramError(where, f"{node.op} node {nid} reduces over the parallelized (outermost) index: "
                                      f"lanes would need a merge tree, which is not implemented yet")
    anchors = _Anchors(kernel, levels, head)
    new = Kernel(kernel.name)
    copies = {nid: [f"{nid}_l{l}" for l in range(lanes)] for nid in region}
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
        if levels[stream.id] < 0:
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
                # a lane stream into a writer: merge the lanes on the outermost coordinates its units hang under
                key = anchors.key(s)
                if key is None:
                    raise ProgramError(where, f"no outermost coordinate stream is aligned with {s.id} (the "
                                              f"serializer's keys)")
                sid = unique_node_id(new, f"ser_{d.node}")
                new.add("serialize", id=sid, lanes=lanes, depth=levels[s.id])
                for lane in range(lanes):
                    new.connect(lane_source(key, lane), sid, f"key{lane}", kind="crd")
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
        if node.op == "serialize":
            for port, _ in node.spec.input_ports(node.params):
                s = new.driver(nid, port)
                s.depth = max(s.depth or 0, LANE_SLACK)
    kernel.nodes, kernel.streams = new.nodes, new.streams
    kernel._reindex()
    return lanes


class _Anchors:
    """Which outermost-level coordinates a stream's units hang under, so a serializer gets aligned keys.

    ``shape(s)`` names a stream's token structure (streams with equal names carry the same stops and as many
    data tokens in the same places: an op's aligned outputs, element-wise ops' inputs and outputs).
    ``anchor(s)`` names the sequence of outermost coordinates whose units ``s`` has: ``("lanes",)`` for the
    coordinates the parallelizers deal (the head's level-0 streams), ``("nonempty", shape)`` for those of them
    whose fibres of ``shape`` are not empty (what a level-0 crd_drop keeps, and what a reduce without crd emits
    values for). Ops that keep their input's structure keep its anchor."""

    def __init__(self, kernel, levels, head):
        self.k, self.levels, self.head = kernel, levels, head
        self._shape, self._anchor = {}, {}

    def _in(self, nid, port):
        return self.k.driver(nid, port)

    def _follow(self, node):
        """The input whose structure an op's outputs keep (None: the op makes a new structure)."""
        op = node.op
        port = {"array": "ref", "alu": "a", "repeat": "repsig", "repeat_sig": "in", "locate": "crd",
                "crd_hold": "inner", "crd_mask": "crd", "parallelize": "in"}.get(op)
        return self._in(node.id, port) if port else None

    def shape(self, s):
        if s.id not in self._shape:
            node = self.k.nodes[s.src.node]
            if s.src.node in self.head and self.levels[s.id] == 0:
                value = ("lanes",)
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
                value = ("lanes",)
            elif node.op == "crd_drop" and lv[self._in(node.id, "outer").id] == 0:
                value = ("nonempty", self.shape(self._in(node.id, "inner")))
            elif node.op == "crd_drop":
                value = self.anchor(self._in(node.id, "outer"))
            elif node.op == "reduce" and self._in(node.id, "crd") is None and lv[s.id] == 0:
                value = ("nonempty", self.shape(self._in(node.id, "val")))
            elif node.op == "reduce":
                value = self.anchor(self._in(node.id, "crd") or self._in(node.id, "val"))
            elif node.op == "spacc":
                value = self.anchor(self._in(node.id, "crd_inner"))     # one sub-tree per group, empty or not
            else:
                src = self._follow(node)
                if src is None:                   # level_scan, intersect, union, mask_scan: their first input
                    first = node.spec.input_ports(node.params)[0][0]
                    src = self._in(node.id, first)
                value = self.anchor(src)
            self._anchor[s.id] = value
        return self._anchor[s.id]

    def key(self, s):
        """An outermost-level crd stream with the anchor of ``s`` (a head stream the parallelizers split, or a
        level-0 crd_drop's outer coordinates in the lanes), or None."""
        want = self.anchor(s)
        found = [t for t in self.k.streams.values()
                 if t.kind == "crd" and self.levels.get(t.id) == 0 and self.anchor(t) == want]

        def rank(t):                    # lane streams first, then head streams the lanes already read
            if t.src.node not in self.head:
                return 0
            return 1 if any(d.node not in self.head for d in t.dsts) else 2
        return min(found, key=rank, default=None)
