"""StreamFIFO and FanOut: the simulator's channel timing (written at t readable at t+1; a slot freed at t
is writable at t+1) and all-at-once fan-out."""

import random
import pytest

from amaranth.hdl import Module, Value
from amaranth.lib import wiring
from amaranth.sim import Simulator
from hypothesis import given, strategies as st

from fuseflow.hw.stream import FanOut, PeekFIFO, StreamFIFO
from fuseflow.hw.testing import hw_settings


def _model(n_tokens, depth, ready):
    """Per-cycle (write, read) transfers of the sim's channel with an always-valid producer."""
    level, written, trace = 0, 0, []
    for r in ready:
        can_w = level < depth and written < n_tokens
        do_r = level > 0 and r
        trace.append((can_w, do_r))
        level += can_w - do_r
        written += can_w
    return trace


@hw_settings(25)
@given(st.integers(1, 4), st.integers(0, 12), st.lists(st.booleans(), min_size=40, max_size=40))
def test_fifo_timing_matches_channel_model(depth, n, ready):
    dut = StreamFIFO(16, depth)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    trace, got = [], []

    async def tb(ctx):
        k = 0
        for cyc, r in enumerate(ready):
            ctx.set(dut.w.valid, k < n)
            ctx.set(Value.cast(dut.w.payload), 100 + k)
            ctx.set(dut.r.ready, r)
            wv, wr, rv, rr, data = ctx.get(dut.w.valid), ctx.get(dut.w.ready), ctx.get(dut.r.valid), \
                ctx.get(dut.r.ready), ctx.get(Value.cast(dut.r.payload))
            trace.append((bool(wv and wr), bool(rv and rr)))
            if rv and rr:
                got.append(data)
            if wv and wr:
                k += 1
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    assert trace == _model(n, depth, ready)
    assert got == list(range(100, 100 + len(got)))


def test_fifo_latency_one():
    dut = StreamFIFO(16, 2)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def tb(ctx):
        ctx.set(dut.w.valid, 1)
        ctx.set(Value.cast(dut.w.payload), 7)
        assert ctx.get(dut.r.valid) == 0
        await ctx.tick()
        ctx.set(dut.w.valid, 0)
        assert ctx.get(dut.r.valid) == 1 and ctx.get(Value.cast(dut.r.payload)) == 7
    sim.add_testbench(tb)
    sim.run()


class _FanTop(wiring.Component):
    def __init__(self, n, depth):
        self.n, self.depth = n, depth
        self.fan = FanOut(16, n)
        self.fifos = [StreamFIFO(16, depth) for _ in range(n)]
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fan = self.fan
        for k, f in enumerate(self.fifos):
            m.submodules[f"f{k}"] = f
            wiring.connect(m, self.fan.o[k], f.w)
        return m


@hw_settings(20)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(0, 10), st.integers(0, 1 << 20))
def test_fanout_all_at_once(n, depth, ntok, seed):
    top = _FanTop(n, depth)
    rng = random.Random(seed)
    sim = Simulator(top)
    sim.add_clock(1e-6)
    got = [[] for _ in range(n)]
    levels_ok = []

    async def tb(ctx):
        k = 0
        for cyc in range(6 * ntok + 20):
            ctx.set(top.fan.i.valid, k < ntok)
            ctx.set(Value.cast(top.fan.i.payload), k)
            for j, f in enumerate(top.fifos):
                ctx.set(f.r.ready, rng.random() < 0.6)
            i_fire = ctx.get(top.fan.i.valid) and ctx.get(top.fan.i.ready)
            o_fire = [ctx.get(top.fan.o[j].valid) and ctx.get(top.fan.o[j].ready) for j in range(n)]
            levels_ok.append(all(o == i_fire for o in o_fire))
            for j, f in enumerate(top.fifos):
                if ctx.get(f.r.valid) and ctx.get(f.r.ready):
                    got[j].append(ctx.get(Value.cast(f.r.payload)))
            k += bool(i_fire)
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    assert all(levels_ok)
    for g in got:
        assert g == list(range(len(g)))


@hw_settings(25)
@given(st.integers(1, 5), st.integers(0, 12), st.lists(st.tuples(st.booleans(), st.booleans()), min_size=40,
                                                      max_size=40))
def test_fifo_next_shows_the_second_entry(depth, n, pattern):
    """``r_next``/``r_next_valid``: the entry behind the head, valid exactly when the channel model holds two
    tokens (a token written in cycle t counts from t+1), for random producer valid and consumer ready."""
    dut = StreamFIFO(16, depth)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    seen, expect = [], []

    async def tb(ctx):
        k = read = level = 0
        for wv, r in pattern:
            ctx.set(dut.w.valid, wv and k < n)
            ctx.set(Value.cast(dut.w.payload), 100 + k)
            ctx.set(dut.r.ready, r)
            nv = ctx.get(dut.r_next_valid)
            seen.append((ctx.get(dut.level), nv, ctx.get(Value.cast(dut.r_next)) if nv else None))
            expect.append((level, int(level >= 2), 100 + read + 1 if level >= 2 else None))
            do_w = wv and k < n and level < depth
            do_r = r and level > 0
            k += do_w
            read += do_r
            level += do_w - do_r
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    assert seen == expect


def test_fifo_next_after_a_read():
    """Depth 3 holding 7, 8, 9: next is 8; after one read the head is 8 and next 9; after another, next is
    invalid (one token left)."""
    dut = StreamFIFO(16, 3)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def tb(ctx):
        for v in (7, 8, 9):
            ctx.set(dut.w.valid, 1)
            ctx.set(Value.cast(dut.w.payload), v)
            await ctx.tick()
        ctx.set(dut.w.valid, 0)
        assert ctx.get(dut.level) == 3 and ctx.get(dut.r_next_valid) == 1
        assert ctx.get(Value.cast(dut.r.payload)) == 7 and ctx.get(Value.cast(dut.r_next)) == 8
        ctx.set(dut.r.ready, 1)
        await ctx.tick()
        assert ctx.get(Value.cast(dut.r.payload)) == 8 and ctx.get(Value.cast(dut.r_next)) == 9
        assert ctx.get(dut.r_next_valid) == 1
        await ctx.tick()
        ctx.set(dut.r.ready, 0)
        assert ctx.get(Value.cast(dut.r.payload)) == 9 and ctx.get(dut.r_next_valid) == 0
        assert ctx.get(dut.level) == 1
    sim.add_testbench(tb)
    sim.run()


def test_fifo_depth1_never_shows_a_next():
    dut = StreamFIFO(16, 1)
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def tb(ctx):
        ctx.set(dut.w.valid, 1)
        ctx.set(Value.cast(dut.w.payload), 5)
        await ctx.tick()
        assert ctx.get(dut.level) == 1 and ctx.get(dut.w.ready) == 0 and ctx.get(dut.r_next_valid) == 0
    sim.add_testbench(tb)
    sim.run()


@hw_settings(25)
@given(st.integers(1, 4), st.integers(0, 12), st.lists(st.booleans(), min_size=40, max_size=40),
       st.lists(st.booleans(), min_size=40, max_size=40))
def test_fifo_r_after_is_the_next_head(depth, n, ready, offer):
    """r_after in cycle t is the payload of the head in cycle t + 1 (whenever there is one), with random
    writes and reads (the address of a synchronous memory read must be that head's); it is r_behind when the
    head is read, else r_stay."""
    dut = StreamFIFO(16, depth)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    checked = []

    async def tb(ctx):
        k, predicted = 0, None
        for r, o in zip(ready, offer):
            ctx.set(dut.w.valid, o and k < n)
            ctx.set(Value.cast(dut.w.payload), 100 + k)
            ctx.set(dut.r.ready, r)
            if ctx.get(dut.r.valid):
                head = ctx.get(Value.cast(dut.r.payload))
                if predicted is not None:
                    assert head == predicted
                    checked.append(head)
            predicted = ctx.get(Value.cast(dut.r_after))
            # its two candidates, which an op chooses by its own read (op.after)
            read = ctx.get(dut.r.valid) and r
            assert predicted == ctx.get(Value.cast(dut.r_behind if read else dut.r_stay))
            if ctx.get(dut.w.valid) and ctx.get(dut.w.ready):
                k += 1
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()


def _peek_model(depth, offers, reads):
    """Per cycle: (written?, [visible entries (up to 3)], popped count) of the simulator's channel
    (fuseflow.sim.channel): a token pushed at t is visible from t + 1, a slot freed at t refillable from t + 1."""
    from collections import deque
    q, credits, k, out = deque(), deque([0] * depth), 0, []
    for cyc, (offer, want) in enumerate(zip(offers, reads)):
        vis = [tok for tok, t in list(q)[:3] if t < cyc]
        popped = min(want, len(vis))
        wrote = bool(offer and credits and credits[0] <= cyc)
        out.append((wrote, vis, popped))
        for _ in range(popped):
            q.popleft()
            credits.append(cyc + 1)
        if wrote:
            credits.popleft()
            q.append((100 + k, cyc))
            k += 1
    return out


@pytest.mark.parametrize("held", [True, False])
@hw_settings(30)
@given(st.integers(1, 6), st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=40, max_size=40))
def test_peek_fifo_matches_the_channel(held, depth, steps):
    """PeekFIFO: its three views, reads of one or two, and the write side's credits, cycle by cycle against the
    simulator's channel (pops of two only when the second entry is visible, as the intersect does); with the
    entries held in registers and (``held=False``) read from the storage at pointer registers."""
    offers = [o for o, _ in steps]
    reads = [r for _, r in steps]
    want = _peek_model(depth, offers, reads)
    dut = PeekFIFO(16, depth, held=held)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    got = []

    async def tb(ctx):
        k = 0
        for cyc, (offer, r) in enumerate(steps):
            ctx.set(dut.w.valid, offer)
            ctx.set(Value.cast(dut.w.payload), 100 + k)
            ctx.set(dut.r.ready, r >= 1)
            ctx.set(dut.r_pop2, r == 2)
            views = [(dut.r.valid, dut.r.payload), (dut.r_next_valid, dut.r_next), (dut.r_third_valid, dut.r_third)]
            vis = [ctx.get(Value.cast(p)) for v, p in views if ctx.get(v)]
            n = len(vis)
            assert [bool(ctx.get(v)) for v, _ in views] == [i < n for i in range(3)]   # a prefix is valid
            wrote = bool(ctx.get(dut.w.valid) and ctx.get(dut.w.ready))
            got.append((wrote, vis, min(r, n)))
            k += wrote
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    assert got == want
