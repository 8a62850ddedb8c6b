"""array: loads values. A reference r gives vals[r] (in the cycle r is the head), N gives 0, stops and D pass
through; one firing per token. A blocked value array (``blocks={"o_val": shape}``) holds one block per word and
reads it in one beat (N gives the zero block).

Memory interface: ``vals_addr`` (Out, crd_width bits) / ``vals_data`` (In, value width, raw bits), a
synchronous read (block RAM): the address is the next head's (``after("ref")``), so ``vals_data`` holds
vals[head] in the cycle the head is there, as a combinational read of the head would.
"""

from amaranth.hdl import Module

from ..token import is_empty
from ._common import OpComponent, copy_ctrl, set_data


class Array(OpComponent):
    op_name = "array"

    def _port_blocks(self, blocks):
        return self._accept_blocks(blocks, ("o_val",))

    def _add_members(self, members):
        self._add_read(members, "vals", "vals", self.port_info["o_val"][1], signed=True, sync=True)
        self._add_after(members, "ref")

    def after_ports(self):
        return ["ref"]

    def elaborate(self, platform):
        m = Module()
        f = self.fire_logic()
        inp = self.i_ref.payload
        out = self.o_val
        m.d.comb += [f.go.eq(self.i_ref.valid), f.push["val"].eq(1), f.pop["ref"].eq(1),
                     self.vals_addr.eq(self.after("ref").data[:self.crd_width])]
        with m.If(inp.ctrl):
            with m.If(is_empty(inp)):
                set_data(m, out, 0)
            with m.Else():
                copy_ctrl(m, out, inp)
        with m.Else():
            set_data(m, out, self.vals_data.as_signed())
        f.build(m)
        return m
