"""The shared AXI4-Lite slave (fuseflow.hw.axi_lite): its handshake timing, in Amaranth's simulator.

A write is accepted with AW and W together and answered on B in the next cycle (or in the cycle after ``w_done``
when deferred); a read samples ``r_data`` ``read_latency`` cycles after the AR handshake and answers on R in the
next cycle. The two interfaces that use it (``--interface axi`` and the ``axi-master`` control port) are tested
end to end on Verilator in tests/hw/test_testbench.py and tests/hw/test_axi_master.py.
"""

import pytest
from amaranth.sim import Simulator

from fuseflow.hw.axi_lite import AxiLiteSlave


def _run(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("latency", [0, 3])
def test_read_answers_latency_plus_one_cycles_after_ar(latency):
    dut = AxiLiteSlave(8, read_latency=latency)
    seen = {}

    async def bench(ctx):
        ctx.set(dut.s_axil_araddr, 0x14)
        ctx.set(dut.s_axil_arvalid, 1)
        ctx.set(dut.r_data, 0xabc)
        assert ctx.get(dut.s_axil_arready) and ctx.get(dut.r_stb) and not ctx.get(dut.idle)
        if latency == 0:
            assert ctx.get(dut.r_addr) == 0x14
        await ctx.tick()
        ctx.set(dut.s_axil_arvalid, 0)
        assert ctx.get(dut.r_addr) == 0x14
        for cycle in range(1, 10):
            if ctx.get(dut.s_axil_rvalid):
                seen["cycle"], seen["data"] = cycle, ctx.get(dut.s_axil_rdata)
                break
            await ctx.tick()
        ctx.set(dut.s_axil_rready, 1)
        await ctx.tick()
        assert not ctx.get(dut.s_axil_rvalid) and ctx.get(dut.idle)

    _run(dut, bench)
    assert seen == {"cycle": latency + 1, "data": 0xabc}


@pytest.mark.parametrize("defer", [False, True])
def test_write_answers_in_the_next_cycle_or_after_w_done(defer):
    dut = AxiLiteSlave(8)

    async def bench(ctx):
        ctx.set(dut.s_axil_awaddr, 0x0c)
        ctx.set(dut.s_axil_wdata, 7)
        ctx.set(dut.s_axil_awvalid, 1)
        ctx.set(dut.s_axil_wvalid, 1)
        ctx.set(dut.w_defer, defer)
        assert ctx.get(dut.s_axil_awready) and ctx.get(dut.s_axil_wready) and ctx.get(dut.w_stb)
        assert (ctx.get(dut.w_addr), ctx.get(dut.w_data)) == (0x0c, 7)
        await ctx.tick()
        ctx.set(dut.s_axil_awvalid, 0)
        ctx.set(dut.s_axil_wvalid, 0)
        ctx.set(dut.w_defer, 0)
        if defer:
            for _ in range(3):
                assert ctx.get(dut.w_wait) and not ctx.get(dut.s_axil_bvalid)
                await ctx.tick()
            ctx.set(dut.w_done, 1)
            await ctx.tick()
            ctx.set(dut.w_done, 0)
        assert ctx.get(dut.s_axil_bvalid) and ctx.get(dut.s_axil_bresp) == 0
        ctx.set(dut.s_axil_bready, 1)
        await ctx.tick()
        assert not ctx.get(dut.s_axil_bvalid) and ctx.get(dut.idle)

    _run(dut, bench)
