"""Test helpers: drive one op module in the Amaranth simulator from SAM-style token lists.

``stream_put`` / ``stream_get`` (Glasgow style) move one payload over a stream from a testbench;
:func:`run_hw_op` wraps one op with its tensor memories (initialised from ``params``: ``seg``/``crd``
for a compressed level_scan, ``vals`` for array), feeds every input port from a token list (optionally
with random valid stalls), drains every output port (optionally with random ready stalls) and returns
``({port: tokens}, {"cycles": n})`` like ``fuseflow.sim.run_op(..., mode="fixed", stats=True)``.
:func:`check_op` runs both and compares them.

An op with a look-ahead rule (intersect) gets it when its inputs can show two tokens as ``run_op``'s
unbounded sources do: without FIFOs the sources also drive the ``i_<p>_next`` views, with ``fifo_depth``
the FIFOs' ``r_next`` do when the depth is at least the op's ``lookahead_depth``. The next-head views of
ops with synchronous memory reads (``i_<p>_behind``/``i_<p>_stay``) come from the FIFOs' ``r_behind``/``r_stay``,
or without FIFOs from the token the source offers after the head (``follow``) and the head.

Cycle convention (the simulator's): the first active clock edge is cycle 0; ``cycles`` = 1 + the cycle
of the op's last firing (the last edge at which any of its ports transferred). Without stalls and
without FIFOs every input token is visible from cycle 0 on (the next token is presented in the cycle
after the previous one was taken), and outputs are always ready: that is ``run_op``'s setting.
"""

import math
import random

import numpy as np

from amaranth.hdl import ClockDomain, Elaboratable, Module, Mux, Signal, Value
from amaranth.sim import Simulator

from ..errors import HardwareError
from ..samml.registry import get_op, memory_role
from ..tensors.fixed import FixedFormat
from .memory import TensorMemory, attach_read, first_words
from .stream import PeekFIFO, StreamFIFO
from .token import decode, decode_value, encode, encode_value, pack_block, token_layout, unpack_block

__all__ = ["stream_put", "stream_get", "Stalls", "OpHarness", "run_hw_op", "check_op", "check_block_op",
           "lane_reference", "encode_port", "decode_port", "make_op",
           "harness_lookahead", "lookahead_input_depth", "peek_source", "HarnessTimeout"]


class HarnessTimeout(HardwareError):
    default_what = "rtl harness"


async def stream_put(ctx, stream, raw):
    """Offer ``raw`` (a flat payload word) on ``stream`` until it is taken (one transfer)."""
    ctx.set(stream.valid, 1)
    ctx.set(Value.cast(stream.payload), raw)
    await ctx.tick().until(stream.ready)
    ctx.set(stream.valid, 0)


async def stream_get(ctx, stream):
    """Accept one transfer on ``stream``; returns the flat payload word."""
    ctx.set(stream.ready, 1)
    raw, = await ctx.tick().sample(Value.cast(stream.payload)).until(stream.valid)
    ctx.set(stream.ready, 0)
    return raw


class Stalls:
    """Random stall pattern: before each token, with probability ``p`` wait 1..``max_len`` cycles."""

    def __init__(self, p=0.0, max_len=3, seed=0):
        self.p = p
        self.max_len = max_len
        self.rng = random.Random(seed)

    def next(self):
        if self.p and self.rng.random() < self.p:
            return self.rng.randint(1, self.max_len)
        return 0


def make_op(op, params=None, *, crd_width=16, fixed=None, any_kind="ref", connected=None, lookahead=False,
            blocks=None):
    """The op module of ``op``; ``blocks`` (``{"i_<p>"/"o_<p>": shape}``): its val ports that carry blocks (the
    element-wise block form of alu/reduce/spacc is :class:`~fuseflow.hw.ops.lanes.BlockLanes`)."""
    from .ops import MODULES
    from .ops.lanes import LANE_OPS, BlockLanes
    kw = dict(crd_width=crd_width, fixed=fixed, any_kind=any_kind, connected=connected, lookahead=lookahead)
    if blocks and any(blocks.values()) and op in LANE_OPS:
        return BlockLanes(MODULES[op], params, blocks=blocks, **kw)
    return MODULES[op](params, blocks=blocks, **kw)


def lookahead_input_depth(op, params=None):
    """The channel depth the op's look-ahead needs at these (unresolved) parameters, or None where it has none
    (the registry's ``input_depth_for``: intersect at arity 2)."""
    spec = get_op(op)
    return spec.input_depth_for(spec.resolve_params(dict(params or {}), f"op {op}"))


def harness_lookahead(op, fifo_depth=None, params=None):
    """Whether ``run_hw_op`` turns the op's look-ahead on: it has one at these parameters
    (:func:`lookahead_input_depth`), and its inputs are the harness's unbounded sources (no FIFOs) or FIFOs of at
    least that depth."""
    need = lookahead_input_depth(op, params)
    return need is not None and (not fifo_depth or fifo_depth >= need)


class OpHarness(Elaboratable):
    """One op with its memories (the op's read ports, comb or sync; sync write ports) and optional FIFOs on
    its streams.

    ``mem_init``: {array: [ints]}; ``mem_depth``: {array: depth} (at least len(init)).
    With ``fifo_depth`` every input and output goes through a :class:`StreamFIFO`; the testbench
    streams are then ``self.ins[p]`` / ``self.outs[p]`` (FIFO sides) instead of the op's ports. The op's
    look-ahead views (``dut.peek_ports()``) are then driven by the FIFOs' ``r_next``; without FIFOs,
    ``self.peeks[p] = (payload, valid)`` are the op's view inputs, for the testbench to drive, and
    ``self.follows[p]`` (for ``dut.after_ports()``) the token offered after the current one on port p.
    """

    def __init__(self, dut, mem_init=None, mem_depth=None, fifo_depth=None, clock_domain=True):
        self.dut = dut
        self.clock_domain = clock_domain
        self.mem_init = dict(mem_init or {})
        self.mem_depth = dict(mem_depth or {})
        self.fifo_depth = fifo_depth
        self.mems = {}
        self.tmems = {}
        for array, mp in dut.memories.items():
            init = [int(x) & ((1 << mp.width) - 1) for x in self.mem_init.get(array, [])]
            depth = max(len(init), self.mem_depth.get(array, 0), 1)
            # the kernel top's memory (generic: an Amaranth Memory, which ``mems`` gives for inspection)
            self.tmems[array] = TensorMemory(depth, mp.width, init, name=array, impl="generic")
            self.mems[array] = self.tmems[array].storage
        self.fifos_in, self.fifos_out = {}, {}
        self.ins, self.outs = {}, {}
        self.peeks = {}
        self.thirds = {}
        self.pop2s = {}
        self.follows = {}
        if dut.peek_ports() and fifo_depth and fifo_depth < dut.lookahead_depth:
            raise HardwareError(f"op {dut.op_name}", f"look-ahead needs FIFOs of depth >= {dut.lookahead_depth}")
        if not fifo_depth:
            self.peeks = {p: (getattr(dut, f"i_{p}_next"), getattr(dut, f"i_{p}_next_valid"))
                          for p in dut.peek_ports()}
            self.thirds = {p: (getattr(dut, f"i_{p}_third"), getattr(dut, f"i_{p}_third_valid"))
                           for p in dut.third_ports()}
            self.pop2s = {p: getattr(dut, f"pop2_{p}") for p in dut.pop2_ports()}
            self.follows = {p: Signal(token_layout(dut.port_info[f"i_{p}"][1]), name=f"follow_{p}")
                            for p in dut.after_ports()}
        for p in dut.inputs():
            port = getattr(dut, f"i_{p}")
            if fifo_depth:
                fifo = PeekFIFO if p in dut.pop2_ports() else StreamFIFO
                f = self.fifos_in[p] = fifo(dut.port_info[f"i_{p}"][1], fifo_depth)
                self.ins[p] = f.w
            else:
                self.ins[p] = port
        for p in dut.outputs():
            port = getattr(dut, f"o_{p}")
            if fifo_depth:
                f = self.fifos_out[p] = StreamFIFO(dut.port_info[f"o_{p}"][1], fifo_depth)
                self.outs[p] = f.r
            else:
                self.outs[p] = port

    def elaborate(self, platform):
        from amaranth.lib import wiring
        m = Module()
        if self.clock_domain:           # False: the sync domain comes from an enclosing design (several harnesses)
            m.domains.sync = ClockDomain("sync")
        dut = self.dut
        m.submodules.dut = dut
        for array, mp in dut.memories.items():
            mem = m.submodules[f"mem_{array}"] = self.tmems[array]
            for prefix in mp.reads:
                attach_read(m, mem, dut, prefix, mp)
            for prefix in mp.writes:
                wp = mem.write_port()
                m.d.comb += [wp.addr.eq(getattr(dut, f"{prefix}_waddr")),
                             wp.data.eq(getattr(dut, f"{prefix}_wdata")),
                             wp.en.eq(getattr(dut, f"{prefix}_wen"))]
        for p, f in self.fifos_in.items():
            m.submodules[f"fifo_in_{p}"] = f
            wiring.connect(m, f.r, getattr(dut, f"i_{p}"))
            if p in dut.peek_ports():
                m.d.comb += [getattr(dut, f"i_{p}_next").eq(f.r_next),
                             getattr(dut, f"i_{p}_next_valid").eq(f.r_next_valid)]
            if p in dut.third_ports():
                m.d.comb += [getattr(dut, f"i_{p}_third").eq(f.r_third),
                             getattr(dut, f"i_{p}_third_valid").eq(f.r_third_valid)]
            if p in dut.pop2_ports():
                m.d.comb += f.r_pop2.eq(getattr(dut, f"pop2_{p}"))
            if p in dut.after_ports():
                m.d.comb += [getattr(dut, f"i_{p}_behind").eq(f.r_behind), getattr(dut, f"i_{p}_stay").eq(f.r_stay)]
        for p, follow in self.follows.items():
            port = getattr(dut, f"i_{p}")
            m.d.comb += [getattr(dut, f"i_{p}_behind").eq(Value.cast(follow)),
                         getattr(dut, f"i_{p}_stay").eq(Value.cast(port.payload))]
        for p, f in self.fifos_out.items():
            m.submodules[f"fifo_out_{p}"] = f
            wiring.connect(m, getattr(dut, f"o_{p}"), f.w)
        return m


def encode_port(dut, port, tok):
    """A SAM token -> the flat raw word of op module ``dut``'s stream ``port`` ("i_<p>"/"o_<p>"; values
    signed, blocks packed: :func:`~fuseflow.hw.token.encode_value`)."""
    kind, w, s = dut.port_info[port]
    if kind == "val":
        return encode_value(tok, dut.fixed.width, dut.blocks.get(port, ()))
    return encode(tok, w, s)


def decode_port(dut, port, raw):
    """The inverse of :func:`encode_port`."""
    kind, w, s = dut.port_info[port]
    if kind == "val":
        return decode_value(raw, dut.fixed.width, dut.blocks.get(port, ()))
    return decode(raw, w, s, repsig=(kind == "repsig"))


def _mem_params(op, params, fixed, block=()):
    """Memory contents and depths for an op run from run_op-style params (``block``: the array's values are
    blocks of that shape, one per word)."""
    init, depth = {}, {}
    if memory_role(op) == ("read", "level") and params.get("format", "compressed") == "compressed":
        init["seg"] = list(params.get("seg") or [])
        init["crd"] = list(params.get("crd") or [])
        init["first"] = first_words(init["seg"], init["crd"])
    elif memory_role(op) == ("read", "vals"):
        vals = params.get("vals")
        vals = [] if vals is None else list(vals)
        init["vals"] = [pack_block(v, fixed.width) for v in vals] if block else [int(v) for v in vals]
    return init, depth


def run_hw_op(op, params=None, inputs=None, *, crd_width=16, fixed=None, any_kind="ref", stalls=0.0,
              max_stall=3, seed=0, fifo_depth=None, max_cycles=None, vcd=None, check_hold=True, blocks=None):
    """Run one op's RTL on SAM token lists (values as raw fixed-point ints).

    Returns ``({out_port: tokens}, {"cycles": n})``; for level_write ``{"seg": [...], "crd": [...], "first": [...]}`` and
    for value_write ``{"vals": [...]}`` (read back from the written memories), as ``run_op`` does.
    ``stalls``: probability of a random stall (1..max_stall cycles) before each input/output token, per
    port. ``fifo_depth``: put a StreamFIFO of that depth on every port (cycles then include FIFO latency).
    ``check_hold``: fail if an output's payload changes while it is valid and not yet transferred.
    ``blocks``: ``{"i_<p>"/"o_<p>": shape}`` of the val ports that carry blocks (tokens then NumPy blocks).
    """
    fixed = fixed or FixedFormat()
    spec = get_op(op)
    params = dict(params or {})
    inputs = dict(inputs or {})
    dut = make_op(op, params, crd_width=crd_width, fixed=fixed, any_kind=any_kind, connected=set(inputs),
                  lookahead=harness_lookahead(op, fifo_depth, params), blocks=blocks)
    init, depth = _mem_params(op, dut.params | params, fixed, dut.blocks.get("o_val", ()))
    ntok = sum(len(t) for t in inputs.values())
    for array in dut.memories:
        if dut.memories[array].writes:
            depth[array] = ntok + 2
    h = OpHarness(dut, init, depth, fifo_depth)
    unknown = set(inputs) - set(dut.inputs())
    if unknown:
        raise HardwareError(f"op {op}", f"no input port(s) {', '.join(sorted(unknown))}")
    missing = set(dut.inputs()) - set(inputs)
    if missing:
        raise HardwareError(f"op {op}", f"input(s) {', '.join(sorted(missing))} need token lists")
    if max_cycles is None:
        max_cycles = 200 + 4 * (ntok + 1) * (1 + (max_stall if stalls else 0)) * 4 + dut.harness_cycles()
    rng = random.Random(seed)
    results = {}
    state = {"last": -1, "cycle": 0, "error": None}
    # an op with synchronous memory reads addresses them one cycle ahead: cycle 0 of the run (the
    # simulator's, every input already there) is preceded by one warm-up edge with no transfer, in which the
    # next-head views show the first tokens
    warm = bool(dut.after_ports())

    sim = Simulator(h)
    sim.add_clock(1e-6)

    for p in dut.inputs():
        raws = [encode_port(dut, f"i_{p}", t) for t in inputs[p]]
        st = Stalls(stalls, max_stall, rng.randrange(1 << 30))

        def source(raws=raws, stream=h.ins[p], st=st):
            async def tb(ctx):
                if warm:
                    await ctx.tick()
                for raw in raws:
                    n = st.next()
                    if n:
                        await ctx.tick().repeat(n)
                    await stream_put(ctx, stream, raw)
            return tb
        if p in h.peeks or p in h.follows:
            sim.add_testbench(peek_source(raws, h.ins[p], *h.peeks.get(p, (None, None)), st,
                                          follow=h.follows.get(p), warm=warm, third=h.thirds.get(p),
                                          pop2=h.pop2s.get(p)))
        else:
            sim.add_testbench(source())

    for p in dut.outputs():
        st = Stalls(stalls, max_stall, rng.randrange(1 << 30))
        results[p] = []

        def sink(p=p, stream=h.outs[p], st=st):
            async def tb(ctx):
                if warm:
                    await ctx.tick()
                while True:
                    n = st.next()
                    if n:
                        await ctx.tick().repeat(n)
                    tok = decode_port(dut, f"o_{p}", await stream_get(ctx, stream))
                    results[p].append(tok)
                    if isinstance(tok, str) and tok == "D":
                        return
            return tb
        sim.add_testbench(sink())

    writer = any(mp.writes for mp in dut.memories.values())
    if writer:
        async def drain(ctx):
            await ctx.tick().until(dut.done)
            for array, mp in dut.memories.items():
                n = ctx.get(getattr(dut, mp.count))
                mem = h.mems[array]
                vals = [ctx.get(mem.data[i]) for i in range(n)]
                vblock = dut.blocks.get("i_val", ()) if array == "vals" else ()
                if vblock:
                    vals = [unpack_block(v, vblock, dut.fixed.width) for v in vals]
                elif mp.signed:
                    vals = [v - (1 << mp.width) if v >> (mp.width - 1) else v for v in vals]
                results[array] = vals
        sim.add_testbench(drain)

    # monitor: last firing cycle, watchdog, payload hold check (on the op's own ports)
    ports = [getattr(dut, f"i_{p}") for p in dut.inputs()] + [getattr(dut, f"o_{p}") for p in dut.outputs()]
    outs = [getattr(dut, f"o_{p}") for p in dut.outputs()]
    names = [f"i_{p}" for p in dut.inputs()] + [f"o_{p}" for p in dut.outputs()]
    sampled = []
    for s in ports:
        sampled += [s.valid, s.ready]
    for o in outs:
        sampled.append(Value.cast(o.payload))

    async def monitor(ctx):
        k = -1 if warm else 0
        held = [None] * len(outs)
        async for _clk, _rst, *vals in ctx.tick().sample(*sampled):
            if k < 0:               # the warm-up edge
                k = 0
                continue
            hs = vals[:2 * len(ports)]
            if any(hs[2 * i] and hs[2 * i + 1] for i in range(len(ports))):
                state["last"] = k
            if check_hold:
                pay = vals[2 * len(ports):]
                no = len(dut.inputs())
                for j in range(len(outs)):
                    v, r = hs[2 * (no + j)], hs[2 * (no + j) + 1]
                    if v:
                        if held[j] is not None and held[j] != pay[j]:
                            raise HardwareError(f"op {op}", f"output {names[no + j]} changed its payload "
                                                            f"from {held[j]:#x} to {pay[j]:#x} before a transfer "
                                                            f"(cycle {k})")
                        held[j] = None if r else pay[j]
            k += 1
            state["cycle"] = k
            if k > max_cycles:
                stuck = [f"{n} (valid={hs[2 * i]}, ready={hs[2 * i + 1]})" for i, n in enumerate(names)]
                raise HarnessTimeout(f"op {op}", f"no end after {max_cycles} cycles; ports: {', '.join(stuck)}; "
                                                 f"got {results}")
    sim.add_testbench(monitor, background=True)

    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return results, {"cycles": state["last"] + 1}


def peek_source(raws, stream, nxt, nxt_valid, stalls, follow=None, warm=False, third=None, pop2=None):
    """Testbench feeding ``stream`` and its look-ahead view (``nxt``, ``nxt_valid``; None: none) from an
    unbounded source: token k arrives ``stalls.next()`` cycles after token k-1 (all at cycle 0 without
    stalls, as in ``run_op``); the head is valid once it has arrived, the view once the token behind it has.
    ``third``: (payload, valid) of the view two behind the head (None: none); ``pop2``: the op's request to
    take the token behind the head too (with ready, when that token has arrived), as a PeekFIFO reads it.
    An invalid view carries an all-ones word (a control token), so an op that used it would go wrong.
    ``follow`` (optional) gets the token behind the head whether or not it has arrived, or the head itself while
    the head has not arrived (as a channel's ``r_behind``, which is the token being written when the channel holds
    none: the next head either way); the harness makes the op's next-head view from it. ``warm``: one warm-up edge
    first, with nothing valid and the first token on the payload (cycle 0 is the cycle after it)."""
    junk = (1 << len(Value.cast(stream.payload))) - 1

    async def tb(ctx):
        arrive, a = [], 0
        for _ in raws:
            a += stalls.next()
            arrive.append(a)
        if warm and raws:
            ctx.set(stream.valid, 0)
            ctx.set(Value.cast(stream.payload), raws[0])
            if follow is not None:
                ctx.set(Value.cast(follow), raws[0])
            await ctx.tick()
        h = c = 0
        while h < len(raws):
            valid = arrive[h] <= c
            seen = h + 1 < len(raws) and arrive[h + 1] <= c
            ctx.set(stream.valid, valid)
            ctx.set(Value.cast(stream.payload), raws[h])
            if nxt is not None:
                ctx.set(nxt_valid, seen)
                ctx.set(Value.cast(nxt), raws[h + 1] if seen else junk)
            if third is not None:
                seen2 = h + 2 < len(raws) and arrive[h + 2] <= c
                ctx.set(third[1], seen2)
                ctx.set(Value.cast(third[0]), raws[h + 2] if seen2 else junk)
            if follow is not None:      # a channel's r_behind: the next head when the head is read, or absent
                nxt_tok = raws[h] if not valid else raws[h + 1] if h + 1 < len(raws) else junk
                ctx.set(Value.cast(follow), nxt_tok)
            if pop2 is None:
                _, _, ready = await ctx.tick().sample(stream.ready)
                two = False
            else:
                _, _, ready, two = await ctx.tick().sample(stream.ready, pop2)
            h += bool(valid and ready) + bool(valid and ready and two and seen)
            c += 1
        ctx.set(stream.valid, 0)
        if nxt is not None:
            ctx.set(nxt_valid, 0)
        if third is not None:
            ctx.set(third[1], 0)
    return tb


def written_arrays(op: str, out: dict) -> dict:
    """``out`` (a model's outputs) with the arrays a writer's RTL writes beyond them: level_write's ``first``
    (:func:`fuseflow.hw.memory.first_words` of the seg and crd it wrote)."""
    if memory_role(op) != ("write", "level"):
        return out
    return {**out, "first": first_words(list(out["seg"]), list(out["crd"]))}


def check_op(op, params=None, inputs=None, *, crd_width=16, fixed=None, any_kind="ref", stalls=0.0,
             seed=0, fifo_depth=None, check_cycles=None, **kw):
    """Run ``run_op`` (fixed mode) and the RTL on the same tokens; assert equal outputs (and, with no
    stalls and no FIFOs, equal cycles). Returns (sim outputs, sim cycles, rtl cycles)."""
    from ..sim import run_op
    sim_out, sim_info = run_op(op, params, inputs, mode="fixed", stats=True)
    sim_out = written_arrays(op, sim_out)
    hw_out, hw_info = run_hw_op(op, params, inputs, crd_width=crd_width, fixed=fixed, any_kind=any_kind,
                                stalls=stalls, seed=seed, fifo_depth=fifo_depth, **kw)
    sim_norm = {k: [_plain(t) for t in v] for k, v in sim_out.items()}
    hw_out = {k: [_plain(t) for t in v] for k, v in hw_out.items()}
    if sim_norm != hw_out:
        raise AssertionError(f"{op} {params if not _big(params) else ''} inputs={inputs}\n"
                             f"  sim: {sim_norm}\n  rtl: {hw_out}")
    if check_cycles is None:
        check_cycles = not stalls and not fifo_depth
    if check_cycles and sim_info["cycles"] != hw_info["cycles"]:
        raise AssertionError(f"{op} cycles: sim {sim_info['cycles']} rtl {hw_info['cycles']} "
                             f"inputs={inputs} out={sim_norm}")
    return sim_norm, sim_info["cycles"], hw_info["cycles"]


def lane_reference(op, params, inputs, blocks):
    """The reference of an element-wise block op (docs/samml.md, "Blocks": alu, reduce, spacc, array,
    value_write work element-wise on blocks with the scalar op's timing): ``run_op`` (fixed mode) once per
    element, on the streams whose block tokens are replaced by that element (scalar streams, e.g. a broadcast
    operand, unchanged; an array's blocked ``vals`` likewise), the lanes' values gathered into blocks.
    Returns ``(outputs, cycles)``; the lanes must agree on every control token and on the cycle count."""
    from ..sim import run_op
    shape = next(tuple(s) for s in blocks.values() if s)
    n = math.prod(shape)
    runs = []
    for e in range(n):
        def pick(tok, e=e):
            return tok if isinstance(tok, str) else (np.ravel(tok)[e].item() if np.ndim(tok) else tok)
        ins = {p: [pick(t) if blocks.get(f"i_{p}") else t for t in toks] for p, toks in inputs.items()}
        prm = dict(params or {})
        if memory_role(op) == ("read", "vals") and blocks.get("o_val"):
            prm["vals"] = [pick(v) for v in prm["vals"]]
        runs.append(run_op(op, prm, ins, mode="fixed", stats=True))
    cycles = {info["cycles"] for _, info in runs}
    if len(cycles) != 1:
        raise AssertionError(f"{op} lanes disagree on cycles: {sorted(cycles)}")
    out = {}
    for port, toks in runs[0][0].items():
        blocked = blocks.get(f"o_{port}") or (memory_role(op) == ("write", "vals") and blocks.get("i_val"))
        if not blocked:
            out[port] = list(toks)
            continue
        lanes = [list(r[0][port]) for r in runs]
        merged = []
        for k, tok in enumerate(toks):
            if isinstance(tok, str):
                if any(ln[k] != tok for ln in lanes):
                    raise AssertionError(f"{op} lanes disagree on token {k} of {port}")
                merged.append(tok)
            else:
                merged.append(np.asarray([ln[k] for ln in lanes], dtype=np.int64).reshape(shape))
        out[port] = merged
    return out, cycles.pop()


def check_block_op(op, params=None, inputs=None, *, blocks, fixed=None, stalls=0.0, seed=0, fifo_depth=None,
                   direct=True, **kw):
    """:func:`check_op` for an element-wise block op against :func:`lane_reference` (``blocks``: the val ports
    that carry blocks, ``{"i_<p>"/"o_<p>": shape}``) and, with ``direct``, against the simulator's block model
    (``run_op`` on the block tokens; the two references must agree): equal tokens, and equal cycles without
    stalls and FIFOs. Returns (reference outputs, reference cycles, rtl cycles)."""
    if fixed is not None and fixed != FixedFormat():
        raise HardwareError("check_block_op", "the reference runs the simulator's default format")
    ref, ref_cycles = lane_reference(op, params, inputs, blocks)
    if direct:
        from ..sim import run_op
        sim_out, sim_info = run_op(op, params, inputs, mode="fixed", stats=True)
        sim_out = {k: [_plain(t) for t in v] for k, v in sim_out.items()}
        lanes = {k: [_plain(t) for t in v] for k, v in ref.items()}
        if sim_out != lanes or sim_info["cycles"] != ref_cycles:
            raise AssertionError(f"{op}: the simulator's block model and its per-element runs differ\n"
                                 f"  blocks: {sim_out} ({sim_info['cycles']} cycles)\n"
                                 f"  lanes:  {lanes} ({ref_cycles} cycles)")
    hw_out, hw_info = run_hw_op(op, params, inputs, fixed=fixed, stalls=stalls, seed=seed, fifo_depth=fifo_depth,
                                blocks=blocks, **kw)
    ref = {k: [_plain(t) for t in v] for k, v in ref.items()}
    hw_out = {k: [_plain(t) for t in v] for k, v in hw_out.items()}
    if ref != hw_out:
        raise AssertionError(f"{op} {params if not _big(params) else ''} blocks={blocks}\n  ref: {ref}\n"
                             f"  rtl: {hw_out}")
    if not stalls and not fifo_depth and ref_cycles != hw_info["cycles"]:
        raise AssertionError(f"{op} cycles: ref {ref_cycles} rtl {hw_info['cycles']} out={ref}")
    return ref, ref_cycles, hw_info["cycles"]


def _plain(tok):
    """A token as a comparable value (a block as nested lists of ints)."""
    return tok.tolist() if hasattr(tok, "tolist") else tok


def _big(params):
    return params and any(isinstance(v, (list, tuple)) and len(v) > 50 for v in params.values())


# ---- token streams from nested lists (fibertrees) ------------------------------------------------

def ser(tree, depth, extra=0):
    """SAM tokens of a nested list of ``depth`` levels (without the final D).

    ``depth`` 0: ``tree`` is one element. ``depth`` d >= 1: ``tree`` is a fibre (a list of depth d-1
    subtrees); its closing stop ends it and ``extra`` enclosing fibres; an empty fibre is a bare stop.
    ``ser([[0, 2], [], [1, 3]], 2) == [0, 2, 'S0', 'S0', 1, 3, 'S1']``.
    """
    if depth == 0:
        return [tree]
    if depth == 1:
        return list(tree) + [f"S{extra}"]
    if not tree:
        return [f"S{depth - 1 + extra}"]
    out = []
    for k, child in enumerate(tree):
        out += ser(child, depth - 1, extra + 1 if k == len(tree) - 1 else 0)
    return out


def stream(tree, depth):
    """``ser(tree, depth) + ['D']``."""
    return ser(tree, depth) + ["D"]


def tree_map(tree, depth, fn):
    """Apply ``fn`` to every element (depth-0 node) of a nested list."""
    if depth == 0:
        return fn(tree)
    return [tree_map(c, depth - 1, fn) for c in tree]


# ---- hypothesis strategies (hypothesis is imported only when these are called) -------------------

def st_tree(depth, leaf, max_len=3, min_len=0):
    """A nested list of ``depth`` levels whose elements are drawn from ``leaf``."""
    import hypothesis.strategies as st
    if depth == 0:
        return leaf
    return st.lists(st_tree(depth - 1, leaf, max_len, min_len), min_size=min_len, max_size=max_len)


def st_sorted_crds(dim, max_len=4):
    """A sorted list of distinct coordinates below ``dim``."""
    import hypothesis.strategies as st
    return st.lists(st.integers(0, max(dim - 1, 0)), max_size=max_len, unique=True).map(sorted) \
        if dim > 0 else st.just([])


def st_value(fixed=None, small=True):
    """A raw fixed-point value: mostly small, sometimes extreme."""
    import hypothesis.strategies as st
    fixed = fixed or FixedFormat()
    lo, hi = fixed.min_raw, fixed.max_raw
    one = fixed.one
    return st.one_of(st.integers(-8 * one, 8 * one), st.sampled_from([lo, hi, 0, 1, -1, one, -one]),
                     st.integers(lo, hi))


def hw_settings(max_examples=20, **kw):
    """Hypothesis settings for RTL tests: few examples, no deadline (the Amaranth simulator is slow)."""
    from hypothesis import HealthCheck, settings
    return settings(max_examples=max_examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much], **kw)


def st_joiner_case(values=False, arity=(2, 3), depth=(1, 2), dim=(1, 6)):
    """Inputs of intersect/union: ``arity`` (crd_i, ref_i) streams with one fibre structure above the
    innermost level, sorted distinct coordinates per fibre; refs are ints (or values) or N."""
    import hypothesis.strategies as st

    @st.composite
    def case(draw):
        n = draw(st.integers(*arity))
        d = draw(st.integers(*depth))
        dm = draw(st.integers(*dim))
        ref = st.one_of(st_value(), st.just("N")) if values else st.one_of(st.integers(0, 500), st.just("N"))
        slot = st.tuples(*[st_sorted_crds(dm).flatmap(
            lambda cs: st.tuples(st.just(cs), st.lists(ref, min_size=len(cs), max_size=len(cs))))
            for _ in range(n)])
        tree = draw(st_tree(d - 1, slot))
        inputs = {}
        for i in range(n):
            inputs[f"crd{i}"] = stream(tree_map(tree, d - 1, lambda s, i=i: s[i][0]), d)
            inputs[f"ref{i}"] = stream(tree_map(tree, d - 1, lambda s, i=i: s[i][1]), d)
        return {"arity": n}, inputs
    return case()


# ---- spacc cases ---------------------------------------------------------------------------------

def spacc_streams(tree, top, order):
    """spacc's token streams ({port: tokens}) of a nested list of ``top`` levels (kept and reduced levels
    above the sub-tree) whose elements are sub-tree fibres: order 1 ``[(j, v), ...]``, order 2
    ``[(a, [(j, v), ...]), ...]``, order 3 ``[(a, [(b, [(j, v), ...]), ...]), ...]``. Stream d (0 = outermost:
    ``crd_outer{order-2}``, ..., ``crd_inner``) has depth ``top + d + 1``; ``val`` is ``crd_inner``'s."""
    names = [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]

    def proj(fib, d, pick):
        if d == 0:
            return [pick(x) for x in fib]
        return [proj(x[1], d - 1, pick) for x in fib]

    out = {}
    for d, name in enumerate(names):
        out[name] = stream(tree_map(tree, top, lambda f, d=d: proj(f, d, lambda x: x[0])), top + d + 1)
    out["val"] = stream(tree_map(tree, top, lambda f: proj(f, order - 1, lambda x: x[1])), top + order)
    return out


def st_spacc_tree(order, dims, value, kept=(0, 1), group=(1, 1), max_len=3, sorted_=None):
    """A hypothesis strategy for ``(tree, kept, group)``: a nested list of ``kept + group`` levels whose
    elements are order-``order`` sub-tree fibres (as :func:`spacc_streams` takes them) with coordinates below
    ``dims`` (outermost first) and values from ``value``. Coordinates are unsorted and may repeat unless
    ``sorted_`` (None: either)."""
    import hypothesis.strategies as st

    @st.composite
    def case(draw):
        srt = draw(st.booleans()) if sorted_ is None else sorted_

        def crds(dim):
            if srt:
                return st_sorted_crds(dim, max_len)
            return st.lists(st.integers(0, dim - 1), max_size=max_len)

        def fib(d):
            if d == order - 1:
                return crds(dims[d]).flatmap(lambda cs: st.lists(value, min_size=len(cs), max_size=len(cs)).map(
                    lambda vs: list(zip(cs, vs))))
            return crds(dims[d]).flatmap(lambda cs: st.lists(fib(d + 1), min_size=len(cs), max_size=len(cs)).map(
                lambda fs: list(zip(cs, fs))))
        e = draw(st.integers(*kept))
        g = draw(st.integers(*group))
        return draw(st_tree(e + g, fib(0), max_len)), e, g
    return case()
