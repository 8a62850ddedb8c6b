"""array: loads values. A reference r gives vals[r], N gives 0, stops and D pass through; one firing per
token. A blocked value array (``blocks={"o_val": shape}``) holds one block per word and reads it in one beat
(N gives the zero block).

Memory interface: ``vals_addr`` (Out, crd_width bits) / ``vals_data`` (In, value width, raw bits), a read of
latency ``registry.MEMORY_READ_LATENCY`` (2: the address, then the registered data;
:class:`fuseflow.hw.memory.TensorMemory`) addressed from the next head (``after("ref")``), so ``vals_data``
holds vals[head] one cycle after the head fires, from a register (on ECP5 the block RAM's output register).
The value leaves through an :class:`OutputPipeline` of latency ``registry.op_latency("array")`` (2)
(docs/samml.md, "Latency"; docs/hardware.md, "Memories").
"""

from amaranth.hdl import Module, Mux, Signal

from ...samml.registry import MEMORY_READ_LATENCY, op_latency
from ..token import is_empty
from ._common import OpComponent
from ._pipe import OutputPipeline


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
        inp = self.i_ref.payload
        out = self.o_val
        latency = op_latency(self.op_name, self.params)
        pipe = OutputPipeline(m, [out], latency, self.i_ref.valid)
        m.d.comb += [self.i_ref.ready.eq(pipe.fire), self.vals_addr.eq(self.after("ref").data[:self.crd_width])]
        DW = len(out.payload.data)
        value = self.vals_data                # vals[head] at the last stage (a read of MEMORY_READ_LATENCY)
        for i in range(MEMORY_READ_LATENCY, latency):   # none unless the op's latency grows beyond the read's
            r = Signal.like(value, name=f"vals_data_p{i}")
            m.d.sync += r.eq(value)
            value = r
        ctrl = pipe.beside(inp.ctrl & ~is_empty(inp), "ctrl")
        cdata = pipe.beside(inp.data[0:10], "cdata")
        empty = pipe.beside(is_empty(inp), "empty")
        last = Signal(DW + 1)                 # {ctrl, data} of the last stage's token
        m.d.comb += [last[:DW].eq(Mux(ctrl, cdata, Mux(empty, 0, value.as_signed()))), last[DW].eq(ctrl)]
        pipe.connect([last])
        return m
