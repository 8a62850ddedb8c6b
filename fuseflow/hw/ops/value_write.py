"""value_write: writes the value array of an output tensor; pops one token per firing (no outputs).

A value is written to ``vals[count]`` (N as 0); stops are dropped; D ends. Write interface:
``vals_waddr/vals_wdata/vals_wen`` (raw value bits, synchronous write port), ``count`` (values written),
``done`` (1 from the cycle after the D firing). Blocked values (``blocks={"i_val": shape}``): one block per word.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.wiring import Out

from ..token import is_data_or_empty, is_done, is_empty
from ._common import OpComponent


class ValueWrite(OpComponent):
    op_name = "value_write"

    def _port_blocks(self, blocks):
        return self._accept_blocks(blocks, ("i_val",))

    def _add_members(self, members):
        self._add_write(members, "vals", "vals", self.port_info["i_val"][1], "count", signed=True)
        members["done"] = Out(1)

    def elaborate(self, platform):
        m = Module()
        W = self.port_info["i_val"][1]          # a value, or a block of them (one per word)
        f = self.fire_logic()
        x, xv = self.i_val.payload, self.i_val.valid
        cnt = Signal(self.crd_width + 1)
        finished = Signal()
        m.d.comb += [f.go.eq(xv & ~finished), f.pop["val"].eq(1), self.count.eq(cnt), self.done.eq(finished),
                     self.vals_waddr.eq(cnt), self.vals_wdata.eq(Mux(is_empty(x), 0, x.data[:W]))]
        with m.If(is_data_or_empty(x)):
            m.d.comb += self.vals_wen.eq(f.fire)
            with m.If(f.fire):
                m.d.sync += cnt.eq(cnt + 1)
        with m.Elif(is_done(x)):
            with m.If(f.fire):
                m.d.sync += finished.eq(1)
        f.build(m)
        return m
