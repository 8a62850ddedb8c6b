"""The AXI4-Lite slave shared by the ``axi`` and ``axi-master`` interfaces: the protocol, not the register map.

:class:`AxiLiteSlave` takes one transaction at a time. A write needs AW and W together: both are accepted in the
same cycle (``w_stb``), and B answers OKAY in the next cycle (or, when the register side asks with ``w_defer``,
in the cycle after it raises ``w_done``). A read is accepted on AR (``r_stb``); ``r_data`` is sampled
``read_latency`` cycles later and R answers OKAY with it in the cycle after. ``wstrb`` and the ``prot`` signals are
ignored (whole words only). ``bvalid``, ``rvalid`` and ``rdata`` are registers: AXI-friendly, and defined from time
0 in every simulator (Icarus does not evaluate a combinational block that depends on nothing but an unchanged
state register).
"""

from __future__ import annotations

from typing import Any

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

#: the data width of every AXI4-Lite port here (bits)
AXI_LITE_DATA_WIDTH = 32
#: the Verilog name prefix of the AXI4-Lite slave ports
AXI_LITE_PREFIX = "s_axil_"


def axi_lite_members(addr_width: int) -> dict[str, Any]:
    """The AXI4-Lite slave port's members, named as the Verilog ports (flow as seen from the slave).

    Parameters
    ----------
    addr_width : int
        Width of ``awaddr`` and ``araddr`` (byte addresses).
    """
    aw, dw, p = addr_width, AXI_LITE_DATA_WIDTH, AXI_LITE_PREFIX
    return {
        f"{p}awaddr": In(aw), f"{p}awprot": In(3), f"{p}awvalid": In(1), f"{p}awready": Out(1),
        f"{p}wdata": In(dw), f"{p}wstrb": In(dw // 8), f"{p}wvalid": In(1), f"{p}wready": Out(1),
        f"{p}bresp": Out(2), f"{p}bvalid": Out(1), f"{p}bready": In(1),
        f"{p}araddr": In(aw), f"{p}arprot": In(3), f"{p}arvalid": In(1), f"{p}arready": Out(1),
        f"{p}rdata": Out(dw), f"{p}rresp": Out(2), f"{p}rvalid": Out(1), f"{p}rready": In(1),
    }


class AxiLiteSlave(wiring.Component):
    """An AXI4-Lite slave (the ``s_axil_`` members of :func:`axi_lite_members`) in front of a register side.

    Parameters
    ----------
    addr_width : int
        Width of the byte addresses.
    read_latency : int
        Cycles from the AR handshake to the cycle that samples ``r_data`` (0: the handshake cycle itself).

    Attributes
    ----------
    w_stb, w_addr, w_data : Signal
        A write is accepted this cycle, its byte address and data.
    w_defer : Signal
        In: with ``w_stb``, hold the B response until ``w_done``.
    w_wait, w_done : Signal
        Out: a deferred write waits; in: it is done (B answers in the next cycle).
    r_stb : Signal
        A read is accepted this cycle.
    r_addr : Signal
        The read's byte address: ``araddr`` itself with ``read_latency`` 0, else ``araddr`` registered at the
        handshake (held until the next read).
    r_data : Signal
        In: the read's data, sampled ``read_latency`` cycles after the handshake.
    idle : Signal
        No transaction in progress and none accepted this cycle.
    """

    def __init__(self, addr_width: int, read_latency: int = 0) -> None:
        self.addr_width = addr_width
        self.read_latency = read_latency
        dw = AXI_LITE_DATA_WIDTH
        super().__init__(axi_lite_members(addr_width) | {
            "w_stb": Out(1), "w_addr": Out(addr_width), "w_data": Out(dw), "w_defer": In(1), "w_wait": Out(1),
            "w_done": In(1), "r_stb": Out(1), "r_addr": Out(addr_width), "r_data": In(dw), "idle": Out(1),
        })

    def forward(self, m: Module, port: Any) -> None:
        """Connect this slave's AXI4-Lite members to the same-named members of ``port`` (a top's ports)."""
        for name, member in axi_lite_members(self.addr_width).items():
            if member.flow == In:
                m.d.comb += getattr(self, name).eq(getattr(port, name))
            else:
                m.d.comb += getattr(port, name).eq(getattr(self, name))

    def elaborate(self, platform: Any) -> Module:
        m = Module()
        a = {name[len(AXI_LITE_PREFIX):]: getattr(self, name) for name in axi_lite_members(self.addr_width)}
        rdata = Signal(AXI_LITE_DATA_WIDTH)
        m.d.comb += [a["bresp"].eq(0), a["rresp"].eq(0), a["rdata"].eq(rdata), self.w_addr.eq(a["awaddr"]),
                     self.w_data.eq(a["wdata"])]
        latency = self.read_latency
        if latency:
            r_addr = Signal(self.addr_width)
            wait = Signal(range(latency + 1))       # cycles until r_data is sampled
            m.d.comb += self.r_addr.eq(r_addr)
        else:
            m.d.comb += self.r_addr.eq(a["araddr"])
        with m.FSM():
            with m.State("IDLE"):
                with m.If(a["awvalid"] & a["wvalid"]):
                    m.d.comb += [a["awready"].eq(1), a["wready"].eq(1), self.w_stb.eq(1)]
                    with m.If(self.w_defer):
                        m.next = "WRITE_WAIT"
                    with m.Else():
                        m.d.sync += a["bvalid"].eq(1)
                        m.next = "WRITE_RESPONSE"
                with m.Elif(a["arvalid"]):
                    m.d.comb += [a["arready"].eq(1), self.r_stb.eq(1)]
                    if latency:
                        m.d.sync += [r_addr.eq(a["araddr"]), wait.eq(latency - 1)]
                        m.next = "READ_WAIT"
                    else:
                        m.d.sync += [rdata.eq(self.r_data), a["rvalid"].eq(1)]
                        m.next = "READ_RESPONSE"
                with m.Else():
                    m.d.comb += self.idle.eq(1)
            with m.State("WRITE_WAIT"):
                m.d.comb += self.w_wait.eq(1)
                with m.If(self.w_done):
                    m.d.sync += a["bvalid"].eq(1)
                    m.next = "WRITE_RESPONSE"
            with m.State("WRITE_RESPONSE"):
                with m.If(a["bready"]):
                    m.d.sync += a["bvalid"].eq(0)
                    m.next = "IDLE"
            if latency:
                with m.State("READ_WAIT"):
                    with m.If(wait == 0):
                        m.d.sync += [rdata.eq(self.r_data), a["rvalid"].eq(1)]
                        m.next = "READ_RESPONSE"
                    with m.Else():
                        m.d.sync += wait.eq(wait - 1)
            with m.State("READ_RESPONSE"):
                with m.If(a["rready"]):
                    m.d.sync += a["rvalid"].eq(0)
                    m.next = "IDLE"
        return m


__all__ = ["AxiLiteSlave", "axi_lite_members", "AXI_LITE_DATA_WIDTH", "AXI_LITE_PREFIX"]
