"""The depths pass: give every channel of a graph a depth at compile time, within a budget of FIFO bits.

A channel of depth 2 sustains one token per cycle only when its producer and consumer run in step. Where
paths meet again after different numbers of ops (a coordinate stream beside the value pipeline it steers, an
outer coordinate beside the inner fibre it closes), the early branch must run ahead, or the producer that
feeds both stalls and the whole kernel slows (measured: 2.5-3.5x its busiest stream). The pass works on any
graph (the compiler's, the kernel builders', a hand-written one) in four steps:

1. **Floors** (deadlock freedom, :func:`deadlock_floors`): every stream out of a sparse accumulator holds one
   emitted fibre (``dim + 2``; ``crd_outer0``/``crd_outer1`` their outer dimension + 2); the registry's
   ``input_depth_for`` (the intersect's look-ahead at arity 2) for the inputs of the ops that ask for it; the
   inputs of an intersect that share a coordinate stream (from arity 4) their group's size.
2. **Structure** (:func:`structural_depths`): the arrival of a node is the longest path (in ops, a pipelined
   op of latency L counting ``1 + (L - 1) / 2``: ``fuseflow.samml.registry.op_latency``) from a source; a
   stream whose consumer arrives ``slack`` ops after its producer could deliver gets
   ``default + 2 x slack`` (two tokens per op of the longer branch: a token in flight and a stop), the op
   count capped at :data:`STRUCTURAL_MAX` and the tokens pipelines hold added in full (up to
   :data:`MAX_DEPTH`); an intersection's outputs that a union merges with another branch get
   :data:`BURST_DEPTH` (the intersection emits in bursts, one output per match).
3. **Profile** (:func:`profile_depths`, on request: ``profile=True``, ``--profile``): the reference
   simulator (cycle-exact with the RTL) runs the graph on synthetic inputs drawn from the declared shapes (capped at :data:`PROFILE_DIM` per dimension, so the pass
   stays fast) and densities (``TensorDecl.density``, else :data:`DEFAULT_DENSITY` for tensors with a
   compressed level); when it takes more than :data:`PROFILE_TARGET` x its busiest stream, the profile-guided
   sizer (:func:`fuseflow.sim.fifo_sizing.size_fifos`) deepens the channels that still stall. The bound is
   the larger of the busiest stream's tokens and the busiest op's firings (:func:`run_bound`): a kernel that
   waits for an op (an intersection stepping over both operands, a sparse accumulator emitting its group)
   is not sped up by deeper channels, so it is not profiled further. Off by default: over the example
   programs and the suite (``benchmarks/depth_bench.py``) steps 1-2 alone reach the target, and the profile
   at capped shapes found no further gain while costing 7-12 simulations per compile (0.4-6 s instead of
   30-200 ms); it is there for graphs whose structure does not show where they stall.
4. **Budget** (:func:`fit_budget`): when the channels cost more than ``budget_bits``, every channel the pass
   deepened goes back to its deadlock floor (or the default depth), and the budget's bits are given back one
   slot at a time to the channel whose next slot is estimated to save the most cycles per bit. The estimate
   (:func:`stall_cycles`): a channel of depth d that wants w > d (the depth the structure, the look-ahead or
   the profile asked for) passes its tokens at d / w of a token per cycle, so it costs ``T x w / d`` cycles,
   T its expected tokens from the cost model at the declared densities (:func:`expected_tokens`,
   :mod:`fuseflow.compiler.cost`; 1 per channel where the cost model has no rule); the gain is concave in d,
   so the greedy fills the channels with many tokens, a long reconvergent path and a narrow token first. The
   slots up to an intersect's look-ahead depth save up to a cycle per token between them.
   The deadlock floors are not a choice, so the bits of the channels whose floor is above the default depth
   are charged on top of the budget (``floor_bits`` in the report), as the lanes' are: a program whose floors
   alone take the budget (a sparse accumulator of dimension 2,500 holds 125,100 bits) keeps the few hundred
   bits its other channels ask for instead of going back to depth 2 everywhere (SpMV ``x(i) = B(i,j) c(j)``
   with B in CSC at n = 2,500: 5.3x the cycles at depth 2). The budget sizes the one-lane design: with
   parallel lanes, the lanes' input channels at their floors, the channels into serializers and every channel
   of lanes 1..N-1 (which then take lane 0's depths, :func:`lane_mirrors`) are charged on top (``lane_bits`` in
   the report), so N lanes cost about N times the lane region's FIFOs and do not squeeze the rest of the
   program (the serializers' inputs, 16-64 deep, once did: the decoder at h = 2 ran 134,986 cycles against
   107,895 on one lane, its kernels without lanes trimmed; 102,240 since).

``fifo_depth`` (``--fifo-depth``) overrides all of it: every channel gets that depth (deadlock floors kept).

Cost of a channel: ``depth x consumers x (field width + 1)`` bits, the field width being the token's data field
(``max(W, 10)``, W the stream's width: :func:`fuseflow.samml.widths.stream_width`). The default budget,
:data:`DEFAULT_BUDGET_BITS` = 64 Kibit, is about a tenth of the ECP5-85F's 669 Kibit of distributed (LUT)
RAM, where the channel FIFOs are mapped (they are read combinationally; tensor memories take the rest of the
LUT RAM and the 3.7 Mibit of block RAM stays free for wider memories), or about 3,000 of its 83,640 LUTs.
With a target board (``board``, ``--board``) the default is that share of the board's own memory for
channel FIFOs (:func:`fuseflow.boards.catalog.fifo_budget_bits`).
"""

from __future__ import annotations

import math

import networkx as nx

from ...samml.blocks import block_shape
from .lanes import lane_zero
from ...samml.registry import op_latency, shared_intersect_inputs
from ...samml.widths import stream_width
from ...tensors.fixed import FixedFormat
from ...tensors.random_data import random_sparse

__all__ = ["DEFAULT_BUDGET_BITS", "assign_depths", "deadlock_floors", "structural_depths", "profile_depths",
           "fit_budget", "fifo_bits", "channel_bits", "slot_bits", "floors_on_top", "expected_tokens",
           "stall_cycles", "depth_table", "lane_mirrors", "serializer_inputs"]

#: default budget of FIFO bits (ULX3S-85F: a tenth of the ECP5-85F's distributed RAM, see the module doc)
DEFAULT_BUDGET_BITS = 64 * 1024
#: no channel gets deeper than this from the structural or profile steps
MAX_DEPTH = 64
#: the structural step's cap
STRUCTURAL_MAX = 16
#: the structural step's depth for an intersection's outputs merged by a union (A * B + A: measured on
#: fuseflow/programs/reductions.ff at 6x, 1502 cycles at depth 2, 1335 at 8, no gain beyond)
BURST_DEPTH = 8
#: synthetic profiling: dimensions capped here, expected density of sparse tensors without a declared one
PROFILE_DIM = 16
DEFAULT_DENSITY = 0.1
#: profile-guided sizing runs when the synthetic run takes more than this x its busiest stream
PROFILE_TARGET = 1.1
PROFILE_SEED = 12345


def _value_format(program):
    v = program.config.get("value", {})
    return FixedFormat(v.get("width", 32), v.get("frac", 16))


def _default(program):
    return int(program.config.get("fifo_depth", 2))


def slot_bits(program, stream) -> int:
    """FIFO bits of one slot of a stream's channels: its consumers x the token width (data field + ctrl bit); a
    block token's data field is one value width per element (docs/samml.md, "Blocks")."""
    return len(stream.dsts) * (max(stream_width(program, stream), 10) + 1)


def channel_bits(program, stream) -> int:
    """FIFO bits of one stream: its depth x :func:`slot_bits`."""
    return (stream.depth or _default(program)) * slot_bits(program, stream)


def fifo_bits(program) -> int:
    """Total FIFO bits of every channel of every kernel of ``program``."""
    return sum(channel_bits(program, s) for k in program.kernels for s in k.streams.values())


def deadlock_floors(kernel) -> dict:
    """{stream id: minimum depth} that keeps the kernel deadlock-free (docs/compiler.md, channel depths).

    A sparse accumulator emits a whole sorted sub-tree per group; a consumer that merges it with a stream
    whose next token depends on the accumulator's *next* outer coordinate (a scanner's stop look-ahead
    through a repeat driven by ``crd_outer0``) must be able to buffer one complete emitted fibre: every stream
    out of a ``spacc`` gets ``dim + 2`` (the inner dimension plus the closing stop and one token of the next
    fibre); ``crd_outer0`` gets ``dim_outer + 2`` and ``crd_outer1`` (order 3) ``dim_outer1 + 2``. Every lane
    channel out of a ``parallelize`` of ``dim`` gets ``ceil(dim / lanes) + 2`` (docs/compiler.md, "Parallel
    lanes"). From arity 4, the m adjacent inputs of an intersect that share a coordinate stream (fewer than all
    its inputs) may drift m - 1 tokens apart, so their crd and ref streams get m
    (:func:`fuseflow.samml.registry.shared_intersect_inputs`)."""
    floors = {}
    for node in kernel.nodes.values():
        for group, _ in shared_intersect_inputs(kernel, node):
            if len(group) < node.params["arity"]:
                for i in group:
                    for port in (f"crd{i}", f"ref{i}"):
                        s = kernel.driver(node.id, port)
                        if s is not None:
                            floors[s.id] = max(floors.get(s.id, 0), len(group))
        if node.op == "parallelize" and node.params.get("dim"):
            # a lane closes a row only when it sees its next one (stop promotion, an empty-row drop looking past
            # empty rows), which the parallelizer sends after every other lane's rows in between: each lane's
            # channel holds all its rows, so no lane waits for the serializer to drain another
            bound = -(-int(node.params["dim"]) // int(node.params["lanes"])) + 2
            for port, _ in node.spec.output_ports(node.params):
                s = kernel.output_stream(node.id, port)
                if s is not None:
                    floors[s.id] = max(floors.get(s.id, 0), bound)
            continue
        if node.op != "spacc":
            continue
        bounds = (("crd_inner", "dim"), ("val", "dim"), ("crd_outer0", "dim_outer"), ("crd_outer1", "dim_outer1"))
        for port, param in bounds:
            bound = int(node.params.get(param) or 0)
            s = kernel.output_stream(node.id, port)
            if s is not None and bound:
                floors[s.id] = max(floors.get(s.id, 0), bound + 2)
    return floors


def structural_depths(kernel, default=2, fixed=None) -> dict:
    """{stream id: depth} from reconvergent paths: ``default + 2 x slack`` where a stream's consumer arrives
    ``slack`` ops later than the stream could deliver (longest paths from the sources). A pipelined op
    (``registry.op_latency`` L > 1, for values of format ``fixed``) counts as ``1 + (L - 1) / 2`` ops: the
    branch beside it holds the L - 1 extra tokens its pipeline holds."""
    g = kernel.graph()
    order = list(nx.topological_sort(g))
    weight = {n: 1 + (op_latency(node.op, node.params, fixed) - 1) / 2 for n, node in kernel.nodes.items()}

    def slacks(w):
        arrival = {}
        for n in order:
            arrival[n] = max((arrival[u] + w[u] for u in g.predecessors(n)), default=0)
        return {s.id: max((arrival[d.node] - arrival[s.src.node] - w[s.src.node] for d in s.dsts), default=0)
                for s in kernel.streams.values()}                  # unread: none

    timed, counted = slacks(weight), slacks(dict.fromkeys(weight, 1))
    out = {}
    for s in kernel.streams.values():
        slack = timed[s.id]
        if slack > 0:
            # op-count slack is capped (long fused chains would take the budget); the tokens a pipeline holds
            # are not: a branch beside a divider (latency 34) or rsqrt (77) that holds fewer stalls the
            # producer of both once per fibre (GraphSAGE's mean: 2.6x the cycles at the cap alone)
            ops = max(0, min(slack, counted[s.id]))
            held = math.ceil(2 * (slack - ops))
            out[s.id] = min(MAX_DEPTH, min(STRUCTURAL_MAX, default + math.ceil(2 * ops)) + held)
        # an intersection emits in bursts (one output per match, its steps run over both operands): a union
        # that merges its outputs with another branch waits on its gaps unless they can run ahead
        if kernel.nodes[s.src.node].op == "intersect" and any(kernel.nodes[d.node].op == "union" for d in s.dsts):
            out[s.id] = max(out.get(s.id, 0), BURST_DEPTH)
    return out


def _profile_copy(program):
    """A copy of ``program`` with every dimension (and node size) capped at :data:`PROFILE_DIM`."""
    from ...samml import Program
    small = Program.from_json(program.to_json())
    for t in small.tensors.values():              # a blocked tensor keeps PROFILE_DIM blocks per dimension
        t.shape = [min(int(d), PROFILE_DIM * (t.block[m] if t.block else 1)) for m, d in enumerate(t.shape)]
        t.capacity = None
    for k in small.kernels:
        for node in k.nodes.values():
            for key in ("dim", "dim_outer", "dim_outer1"):
                v = node.params.get(key)
                if isinstance(v, int) and v > PROFILE_DIM:
                    node.params[key] = PROFILE_DIM
    return small


def declared_density(decl) -> float:
    """The density the pass assumes for an input: its declared one, else 1 for a dense tensor and
    :data:`DEFAULT_DENSITY` for one with a compressed level."""
    if decl.density is not None:
        return decl.density
    return 1.0 if all(lv == "dense" for lv in decl.levels) else DEFAULT_DENSITY


def synthetic_inputs(program, seed=PROFILE_SEED) -> dict:
    """Random inputs of the declared shapes and densities (dense tensors full)."""
    import numpy as np
    rng = np.random.default_rng(seed)
    return {t.name: random_sparse(rng, tuple(t.shape), declared_density(t)) for t in program.inputs}


def expected_tokens(program) -> dict:
    """{(kernel name, stream id): expected tokens} from the cost model (:func:`fuseflow.compiler.cost.estimate`)
    at the declared densities; empty when the cost model has no rule for one of the graph's ops."""
    from ..cost import estimate
    try:
        est = estimate(program, densities={t.name: declared_density(t) for t in program.inputs})
    except Exception:                 # noqa: BLE001 - a graph the cost model cannot estimate counts 1 per channel
        return {}
    return {(ke["name"], sid): float(n) for ke in est.kernels for sid, n in ke["streams"].items()}


def stall_cycles(tokens, depth, wanted) -> float:
    """Estimated cycles a channel of ``depth`` that wants ``wanted`` takes to pass ``tokens``: a token per cycle
    at its wanted depth, ``depth / wanted`` of one below it (the early branch of a reconvergent path can run
    only ``depth`` tokens ahead of a path ``wanted`` tokens long)."""
    return tokens * max(1.0, wanted / depth)


def run_bound(res) -> int:
    """The lower bound of a simulated run: per kernel, the larger of the busiest stream's tokens and the
    busiest op's firings (a co-iterating op steps over both operands' tokens; a sparse accumulator fires for
    every input step and every emitted entry), summed over the kernels (they run one after another)."""
    return sum(max(max(k["streams"].values(), default=0), max((n["busy"] for n in k["nodes"].values()), default=0))
               for k in res.stats["kernels"])


def profile_depths(program) -> tuple[dict, dict]:
    """Profile-guided depths on synthetic inputs: ({kernel name: {stream id: depth}}, report)."""
    from ...sim.engine import run
    from ...sim.fifo_sizing import size_fifos
    small = _profile_copy(program)
    inputs = synthetic_inputs(small)
    res = run(small, inputs, mode="fixed")
    bound = max(1, run_bound(res))
    report = {"cycles": res.cycles, "bound": bound, "ratio": round(res.cycles / bound, 3), "runs": 1}
    if res.cycles <= PROFILE_TARGET * bound:
        return {}, report
    sized, rep = size_fifos(small, inputs, max_depth=MAX_DEPTH, min_gain=0.01, candidates=4, max_rounds=6)
    report.update(sized_cycles=rep["cycles_after"], sized_ratio=round(rep["cycles_after"] / bound, 3),
                  runs=1 + rep["runs"])
    return rep["depths"], report


def fit_budget(program, floors, budget_bits, keep=frozenset(), tokens=None, look_ahead=None) -> int:
    """Fit the channels to ``budget_bits`` (in place) and return the bits afterwards. ``floors``: {(kernel
    name, stream id): minimum depth}; ``keep``: ids (``id()``) of streams left as they are; ``tokens``:
    {(kernel name, stream id): expected tokens} (:func:`expected_tokens`; a channel without an entry counts 1);
    ``look_ahead``: {(kernel name, stream id): depth} an op asks of its input (the intersect looks ahead only
    from depth 3): the slots below it save up to a cycle per token between them, more than the stall model
    gives a channel that wants 3 (SpMV, fuseflow/programs/spmv.ff at 3x, at 842 bits: 439 cycles by the stall
    model alone, 348 with this rule, 346 at every depth it wants).

    Within the budget nothing changes. Over it, every channel deeper than its floor (or the default depth)
    goes back to it, and the budget's bits are given back a slot at a time, each to the channel whose next
    slot saves the most estimated cycles (:func:`stall_cycles`) per bit, never beyond the depth it wanted.
    Over budget at the floors, nothing is given back (the report says ``over_budget``)."""
    import heapq
    total = fifo_bits(program)
    if total <= budget_bits:
        return total
    default = _default(program)
    tokens, look_ahead = tokens or {}, look_ahead or {}
    trimmed = []                                   # (stream, floor, wanted, expected tokens, look-ahead depth)
    for k in program.kernels:
        for s in k.streams.values():
            wanted = s.depth or default
            floor = max(floors.get((k.name, s.id), 0), default)
            if id(s) not in keep and wanted > floor:
                key = (k.name, s.id)
                trimmed.append((s, floor, wanted, tokens.get(key, 1.0), look_ahead.get(key, 0)))
                s.depth = None if floor == default else floor
    total = fifo_bits(program)
    heap = []

    def offer(i, depth):                           # channel i's next slot, from ``depth`` to ``depth + 1``
        s, floor, wanted, t, ahead = trimmed[i]
        if depth < wanted:
            saved = stall_cycles(t, depth, wanted) - stall_cycles(t, depth + 1, wanted)
            if depth < ahead:                      # the look-ahead saves up to a cycle per token
                saved = max(saved, t / (ahead - floor))
            heapq.heappush(heap, (-saved / slot_bits(program, s), i, depth))

    for i, (_, floor, _, _, _) in enumerate(trimmed):
        offer(i, floor)
    while heap:
        _, i, depth = heapq.heappop(heap)
        s = trimmed[i][0]
        cost = slot_bits(program, s)
        if total + cost > budget_bits:             # its later slots cost the same: this channel stops here
            continue
        s.depth = depth + 1
        total += cost
        offer(i, depth + 1)
    return total


def floors_on_top(program, floors, keep=frozenset()) -> int:
    """FIFO bits of the channels whose deadlock floor is above the default depth, at their floors: charged on
    top of the budget (the pass cannot trade them for anything). The lanes' input channels (out of
    ``parallelize``: :func:`lane_floor_bits`) and the ``keep`` ones are left out: the lanes count them."""
    default = _default(program)
    bits = 0
    for k in program.kernels:
        for s in k.streams.values():
            floor = floors.get((k.name, s.id), 0)
            if floor > default and id(s) not in keep and k.nodes[s.src.node].op != "parallelize":
                bits += floor * slot_bits(program, s)
    return bits


def default_budget(options) -> int:
    """The budget of FIFO bits: ``budget_bits`` if given, else the target board's share
    (:func:`fuseflow.boards.catalog.fifo_budget_bits`) with a ``board``, else :data:`DEFAULT_BUDGET_BITS`."""
    if options.budget_bits is not None:
        return int(options.budget_bits)
    if options.board:
        from ...boards.catalog import fifo_budget_bits
        return fifo_budget_bits(options.board)
    return DEFAULT_BUDGET_BITS


def assign_depths(program, options) -> dict:
    """The depths pass (in place). ``options`` (:class:`~fuseflow.compiler.options.CompileOptions`):
    ``fifo_depth`` (override every channel), ``budget_bits``
    (default: :func:`default_budget`), ``board`` (a target board, :data:`fuseflow.boards.catalog.BOARDS`),
    ``profile`` (step 3; default False, see the module doc).

    Returns the report written next to graph.json as ``fifos.json``: budget, total bits, the profile run,
    and one row per channel (kernel, stream, depth, the depth it wanted, consumers, bits, why)."""
    budget = default_budget(options)
    override = options.fifo_depth
    why = {}
    floors = {}
    for k in program.kernels:
        for sid, d in deadlock_floors(k).items():
            floors[(k.name, sid)] = d
    profile = None
    if override is not None:
        program.config["fifo_depth"] = int(override)
        for k in program.kernels:
            for s in k.streams.values():
                s.depth = max(int(override), floors.get((k.name, s.id), 0))
                why[(k.name, s.id)] = "override" if s.depth == int(override) else "floor"
    else:
        default = _default(program)
        look_ahead = {}
        for k in program.kernels:
            for sid, d in structural_depths(k, default, _value_format(program)).items():
                s = k.streams[sid]
                if d > (s.depth or default):
                    s.depth = d
                    why[(k.name, sid)] = "structure"
            for sid in k.streams:
                f = floors.get((k.name, sid))
                s = k.streams[sid]
                if f and f > (s.depth or default):
                    s.depth = f
                    why[(k.name, sid)] = "floor"
            for node in k.nodes.values():          # the registry's input_depth (the intersect's look-ahead)
                need = node.spec.input_depth_for(node.params)
                for pname, _ in node.spec.input_ports(node.params) if need else ():
                    s = k.driver(node.id, pname)
                    if s is not None:
                        look_ahead[(k.name, s.id)] = max(need, look_ahead.get((k.name, s.id), 0))
                    if s is not None and (s.depth or default) < need:
                        s.depth = need
                        why[(k.name, s.id)] = "look-ahead"
        if options.profile:
            try:
                deeper, profile = profile_depths(program)
            except Exception as exc:          # noqa: BLE001 - a graph the simulator cannot run keeps steps 1-2
                deeper, profile = {}, {"skipped": f"{type(exc).__name__}: {exc}"}
            by_name = {k.name: k for k in program.kernels}
            for kname, depths in deeper.items():
                for sid, d in depths.items():
                    s = by_name[kname].streams[sid]
                    if d > (s.depth or default):
                        s.depth = d
                        why[(kname, sid)] = "profile"
        # parallel lanes are charged on top of the budget, which sizes the one-lane design: the lanes' input
        # channels at their floors, lane 0's channels into serializers (16-64 deep, absent from the one-lane
        # design) and every channel of the lanes other than lane 0, which then take lane 0's depths (so N lanes
        # do not squeeze the rest of the program back to the default depth)
        wanted = fifo_bits(program)
        wanted_depths = {(k.name, s.id): s.depth or default for k in program.kernels for s in k.streams.values()}
        mirrors = lane_mirrors(program)
        mirrored = {id(s) for s, _ in mirrors}
        merged = [s for s in serializer_inputs(program) if id(s) not in mirrored]
        keep = mirrored | {id(s) for s in merged}

        def lane_cost():
            return lane_floor_bits(program, floors) + sum(channel_bits(program, s) for s, _ in mirrors) \
                + sum(channel_bits(program, s) for s in merged)

        on_top = floors_on_top(program, floors, keep)
        limit = budget + lane_cost() + on_top
        fit_budget(program, floors, limit, keep=keep, tokens=expected_tokens(program) if wanted > limit else None,
                   look_ahead=look_ahead)
        for s, lane0 in mirrors:
            s.depth = lane0.depth
        lane_bits = lane_cost()
        full = max(0, wanted - (limit - budget))     # the budget at which fit_budget changes nothing
        return depth_table(program, budget, why, profile, wanted, lane_bits, on_top, wanted_depths, full)
    return depth_table(program, budget, why, profile, lane_bits=0)


def lane_mirrors(program) -> list:
    """[(stream, lane 0's stream)]: every channel out of a lane copy of another lane than 0 (at every nesting
    level), with the same channel of lane 0's copy (:func:`fuseflow.compiler.passes.lanes.lane_zero`); empty without
    parallel lanes."""
    out = []
    for k in program.kernels:
        for s in k.streams.values():
            rep = lane_zero(k, s.src.node)
            lane0 = k.output_stream(rep, s.src.port) if rep is not None else None
            if lane0 is not None:
                out.append((s, lane0))
    return out


def serializer_inputs(program) -> list:
    """Every channel into a ``serialize`` node (lanes' keys and payloads; empty without parallel lanes)."""
    return [s for k in program.kernels for s in k.streams.values()
            if any(k.nodes[d.node].op == "serialize" for d in s.dsts)]


def lane_floor_bits(program, floors) -> int:
    """FIFO bits of the channels out of ``parallelize`` nodes at their floors (0 without parallel lanes)."""
    bits = 0
    for k in program.kernels:
        for node in k.nodes.values():
            if node.op != "parallelize":
                continue
            for port, _ in node.spec.output_ports(node.params):
                s = k.output_stream(node.id, port)
                if s is not None and (k.name, s.id) in floors:
                    bits += slot_bits(program, s) * floors[(k.name, s.id)]
    return bits


def depth_table(program, budget_bits, why=None, profile=None, wanted_bits=None, lane_bits=0, floor_bits=0,
                wanted=None, full_budget_bits=None) -> dict:
    """The report of a program's channel depths and their cost. ``wanted_bits``: what the channels cost before
    the budget trimmed them (a budget that keeps every channel at the depth it asks for); ``lane_bits``: the
    bits parallel lanes cost on top of the budget (the lanes' input channels, every lane but lane 0);
    ``floor_bits``: the bits of the other channels whose deadlock floor is above the default depth, also on
    top; ``wanted``: {(kernel name, stream id): the depth the channel asked for before the budget} (each row's
    ``wanted``; ``trimmed`` counts the channels below it); ``full_budget_bits``: the smallest budget that keeps
    every channel at the depth it asks for (default: ``budget_bits``)."""
    why = why or {}
    wanted = wanted or {}
    default = _default(program)
    rows = []
    for k in program.kernels:
        for s in k.streams.values():
            depth = s.depth or default
            rows.append({"kernel": k.name, "stream": s.id, "kind": s.kind, "width": stream_width(program, s),
                         "depth": depth, "wanted": wanted.get((k.name, s.id), depth),
                         "consumers": len(s.dsts), "bits": channel_bits(program, s),
                         "why": why.get((k.name, s.id), "default" if s.depth in (None, default) else "graph")})
    total = sum(r["bits"] for r in rows)
    return {"default_depth": default, "budget_bits": budget_bits, "total_bits": total,
            "over_budget": total > budget_bits + lane_bits + floor_bits, "lane_bits": lane_bits,
            "floor_bits": floor_bits, "wanted_bits": total if wanted_bits is None else wanted_bits,
            "full_budget_bits": budget_bits if full_budget_bits is None else full_budget_bits,
            "trimmed": sum(r["depth"] < r["wanted"] for r in rows),
            "crd_width": int(program.config.get("crd_width", 16)),
            "profile": profile, "channels": rows}
