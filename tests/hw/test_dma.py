"""The DMA reader and writer alone (Amaranth's simulator) against the contract memory: every transfer takes
exactly ``read_cycles`` / ``write_cycles`` of :mod:`fuseflow.samml.offchip`, bursts follow its split (at most
``burst`` beats, never across 4 KiB), at most ``outstanding`` are in flight, and the data arrives intact."""

from collections import deque

import pytest
from amaranth.sim import Simulator

from fuseflow.hw.dma import DmaReader, DmaWriter
from fuseflow.hw.memory import HOST_READ_LATENCY
from fuseflow.samml.offchip import OffchipContract, bursts, read_cycles, write_cycles

CONTRACTS = [OffchipContract(word_bytes=4, latency=5, burst=4, outstanding=2),
             OffchipContract(word_bytes=8, latency=1, burst=16, outstanding=1),
             OffchipContract(word_bytes=4, latency=9, burst=3, outstanding=3)]
#: (start address, words): single beats, bursts, the outstanding limit, across 4 KiB
CASES = [(0, 1), (0, 4), (64, 9), (4096 - 8, 5), (4096 - 4, 1), (8192 - 24, 40), (100 * 8, 33)]


def _word(addr):
    return (addr * 2654435761) & 0xFFFFFFFF


def run_read(c, addr, words):
    """(cycles from the first AR to the cycle after ``done``, burst lengths, beats received)."""
    dut = DmaReader(c)
    out = {}

    async def bench(ctx):
        ctx.set(dut.axi.arready, 1)
        ctx.set(dut.cmd.start, 1)
        ctx.set(dut.cmd.addr, addr)
        ctx.set(dut.cmd.words, words)
        await ctx.tick()
        ctx.set(dut.cmd.start, 0)
        beats, free, lens, got, inflight, peak = deque(), -1, [], [], 0, 0
        for cycle in range(10_000):
            if beats and beats[0][0] == cycle:
                _, a, last = beats.popleft()
                ctx.set(dut.axi.rvalid, 1)
                ctx.set(dut.axi.rdata, _word(a))
                ctx.set(dut.axi.rlast, last)
            else:
                ctx.set(dut.axi.rvalid, 0)
            if ctx.get(dut.beat.valid):
                got.append((ctx.get(dut.beat.index), ctx.get(dut.beat.data)))
                inflight -= bool(ctx.get(dut.axi.rlast))
            if ctx.get(dut.axi.arvalid):
                a, n = ctx.get(dut.axi.araddr), ctx.get(dut.axi.arlen) + 1
                lens.append((a, n))
                start = max(cycle + c.latency, free + 1)
                beats.extend((start + k, a + k * c.word_bytes, k == n - 1) for k in range(n))
                free = start + n - 1
                inflight += 1
                peak = max(peak, inflight)
            if ctx.get(dut.cmd.done):
                out.update(cycles=cycle + 1, lens=lens, got=got, peak=peak)
                return
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def run_write(c, addr, words):
    """(cycles from the start to the cycle after ``done``, bursts, the memory written)."""
    dut = DmaWriter(c, 32)
    out = {}

    async def bench(ctx):
        ctx.set(dut.axi.awready, 1)
        ctx.set(dut.axi.wready, 1)
        ctx.set(dut.cmd.start, 1)
        ctx.set(dut.cmd.addr, addr)
        ctx.set(dut.cmd.words, words)
        await ctx.tick()
        ctx.set(dut.cmd.start, 0)
        reads = deque([None] * HOST_READ_LATENCY)      # the on-chip memory: entry e holds 1000 + e
        pending, responses, mem, lens, waiting, peak = deque(), deque(), {}, [], 0, 0
        for cycle in range(10_000):
            e = reads.popleft()
            ctx.set(dut.onchip.data, 1000 + e if e is not None else 0)
            reads.append(ctx.get(dut.onchip.addr))
            if responses and responses[0] == cycle:
                responses.popleft()
                ctx.set(dut.axi.bvalid, 1)
                waiting -= 1
            else:
                ctx.set(dut.axi.bvalid, 0)
            if ctx.get(dut.axi.awvalid):
                a, n = ctx.get(dut.axi.awaddr), ctx.get(dut.axi.awlen) + 1
                lens.append((a, n))
                pending.append([a, n, 0])
                waiting += 1
                peak = max(peak, waiting)
            if ctx.get(dut.axi.wvalid):
                b = pending[0]
                mem[b[0] + b[2] * c.word_bytes] = ctx.get(dut.axi.wdata)
                b[2] += 1
                assert ctx.get(dut.axi.wlast) == (b[2] == b[1])
                if b[2] == b[1]:
                    pending.popleft()
                    responses.append(cycle + c.latency)
            if ctx.get(dut.cmd.done):
                out.update(cycles=cycle + 1, lens=lens, mem=mem, peak=peak)
                return
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def expected_bursts(c, addr, words):
    out, a = [], addr
    for n in bursts(addr, words, c):
        out.append((a, n))
        a += n * c.word_bytes
    return out


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: f"w{c.word_bytes}l{c.latency}b{c.burst}o{c.outstanding}")
def test_reader_meets_read_cycles(c):
    for addr, words in CASES:
        addr -= addr % c.word_bytes
        r = run_read(c, addr, words)
        assert r["cycles"] == read_cycles(addr, words, c), (addr, words)
        assert r["lens"] == expected_bursts(c, addr, words)
        assert r["got"] == [(i, _word(addr + i * c.word_bytes)) for i in range(words)]
        assert r["peak"] <= c.outstanding


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: f"w{c.word_bytes}l{c.latency}b{c.burst}o{c.outstanding}")
def test_writer_meets_write_cycles(c):
    for addr, words in CASES:
        addr -= addr % c.word_bytes
        w = run_write(c, addr, words)
        assert w["cycles"] == write_cycles(addr, words, c), (addr, words)
        assert w["lens"] == expected_bursts(c, addr, words)
        assert w["mem"] == {addr + i * c.word_bytes: 1000 + i for i in range(words)}
        assert w["peak"] <= c.outstanding
