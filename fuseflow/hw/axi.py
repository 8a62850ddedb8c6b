"""An AXI4-Lite slave around the kernel top (``python -m fuseflow.hw build ... --interface axi``).

One AXI4-Lite port (32-bit data, prefix ``s_axil_``) carries control, status and data: the kernel top's host port
becomes a memory-mapped window, so an SoC interconnect (or any AXI master) loads input tensors, starts the
program, polls ``done`` and reads the outputs without knowing the project's host port. Address map (byte
addresses; ``I`` = the host port's address width, each region holds ``2**I`` 32-bit words)::

    region 0            control:  0x0 CONTROL/STATUS (write bit 0 = 1: start; read: bit 0 busy, bit 1 done)
                                  0x4 CYCLES (kernel cycles of the last run, the simulator's count)
    region s + 1        memory ``sel = s`` of the manifest: entry e at base + 4 e (reads and writes)
    region reg_sel + 1  the register file (read-only): register i at base + 4 i

Region r starts at ``r << (I + 2)``; :func:`axi_map` lists every base (the manifest's ``axi`` section).

Protocol: :class:`fuseflow.hw.axi_lite.AxiLiteSlave`'s, one transaction at a time. A write needs AW and W together
(both accepted in the same cycle; ``wstrb`` is ignored: whole words only), performs the host-port write (or the
start pulse) in that cycle, and answers OKAY on B in the next. A memory write while the kernel runs is ignored, like
the host port's. A read is accepted on AR, addresses the host port from the next cycle, takes ``host_rdata``
``HOST_READ_LATENCY`` (2) cycles later and answers on R (OKAY) in the cycle after: the read latency is 4 cycles from
the AR handshake to ``rvalid``. ``irq`` is the
``done`` flag (level: high from the end of a run until the next start).

With ``streams`` (``--interface axis``) the wrapper also has two AXI4-Stream ports (32-bit ``tdata``, ``tlast``,
``tdest`` = a memory's ``sel``) for bulk data beside the AXI4-Lite control:

- ``s_axis_`` (in): each packet is one memory image: word k of a packet goes to entry k of memory ``tdest``; ``tlast``
  ends the image (the next packet starts at entry 0 again). One word per cycle while the kernel is idle and no
  AXI4-Lite transaction is being accepted; ``tready`` is low while the kernel runs (nothing is dropped).
- ``m_axis_`` (out): writing STREAM_COUNT (``0xc``) = n streams entries 0..n-1 of memory STREAM_SEL (``0x8``, written
  before) as one packet (``tdest`` = sel, ``tlast`` on the last word), one word every 3 cycles (the host read's
  latency and the handshake); the write's B response comes once the packet has been sent. n = 0 sends nothing.

Timing: the start write's handshake is the host port's start pulse, so the kernel's ``cycles`` are exactly the
simulator's and ``wall_cycles`` (start to done) those of the host-port top; what AXI adds is the transfer cost
outside the run: 2 cycles per word written (handshake, response) and 5 per word read, plus the master's own
latency (measured in tests/hw/test_testbench.py).
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..errors import HardwareError
from .axi_lite import AXI_LITE_DATA_WIDTH, AxiLiteSlave, axi_lite_members
from .memory import HOST_READ_LATENCY

AXI_DATA_WIDTH = AXI_LITE_DATA_WIDTH
#: the control region's words (index -> name)
CONTROL_REGISTERS = ("control", "cycles")
#: the control region of the AXI4-Stream variant: the output stream's memory and length
STREAM_REGISTERS = CONTROL_REGISTERS + ("stream_sel", "stream_count")


def _bits(n):
    return max(1, (n - 1).bit_length())


class AxiLiteTop(wiring.Component):
    """The kernel top ``top`` (:class:`fuseflow.hw.top.ProgramTop`) behind one AXI4-Lite slave port; with
    ``streams``, also an AXI4-Stream slave (``s_axis_``, memory images in) and master (``m_axis_``, memory
    contents out)."""

    def __init__(self, top, streams: bool = False):
        plan = top.plan
        if plan.data_width != AXI_DATA_WIDTH:
            raise HardwareError("--interface axi", f"needs 32-bit memory words, this program's host port is "
                                                   f"{plan.data_width} bits wide")
        self.top = top
        self.streams = streams
        self.index_bits = plan.addr_width
        self.region_bits = _bits(plan.reg_sel + 2)
        self.addr_width = self.region_bits + self.index_bits + 2
        aw, dw = self.addr_width, AXI_DATA_WIDTH
        self.dest_width = len(top.host_sel)
        members = {}
        if streams:
            sw = self.dest_width
            members = {
                "s_axis_tdata": In(dw), "s_axis_tvalid": In(1), "s_axis_tready": Out(1), "s_axis_tlast": In(1),
                "s_axis_tdest": In(sw),
                "m_axis_tdata": Out(dw), "m_axis_tvalid": Out(1), "m_axis_tready": In(1), "m_axis_tlast": Out(1),
                "m_axis_tdest": Out(sw),
            }
        super().__init__(members | axi_lite_members(aw) | {"irq": Out(1)})

    def _decode(self, addr):
        """(region, index) of a byte address."""
        ib = self.index_bits
        return addr[ib + 2:], addr[2:ib + 2]

    def elaborate(self, platform):
        m = Module()
        m.submodules.kernel = top = self.top
        # the read takes the host port's latency after one cycle of addressing; R answers in the cycle after
        m.submodules.bus = bus = AxiLiteSlave(self.addr_width, read_latency=HOST_READ_LATENCY + 1)
        bus.forward(m, self)
        ib = self.index_bits
        aw_region, aw_index = self._decode(bus.w_addr)
        rd_region, rd_index = self._decode(bus.r_addr)
        m.d.comb += self.irq.eq(top.done)
        # the host port follows the read address, except in a write's accept cycle and the streams' cycles
        m.d.comb += [top.host_sel.eq(rd_region - 1), top.host_addr.eq(rd_index), top.host_wdata.eq(bus.w_data)]
        control = [top.busy | (top.done << 1), top.cycles]
        if self.streams:
            out_sel, out_count, out_index = Signal(self.dest_width), Signal(ib + 1), Signal(ib + 1)
            out_wait = Signal(range(HOST_READ_LATENCY + 1))  # 0: host_rdata shows entry out_index
            in_index = Signal(ib)
            control += [out_sel, out_count]
            m.d.comb += [self.m_axis_tdata.eq(top.host_rdata), self.m_axis_tdest.eq(out_sel),
                         self.m_axis_tlast.eq(out_index + 1 == out_count)]
        with m.If(bus.w_stb):
            m.d.comb += [top.host_sel.eq(aw_region - 1), top.host_addr.eq(aw_index)]
            with m.If(aw_region == 0):
                m.d.comb += top.start.eq((aw_index == 0) & bus.w_data[0])
            with m.Else():
                m.d.comb += top.host_we.eq(1)
            if self.streams:
                with m.If((aw_region == 0) & (aw_index == 2)):
                    m.d.sync += out_sel.eq(bus.w_data)
                with m.If((aw_region == 0) & (aw_index == 3) & (bus.w_data != 0)):
                    # stream the packet out; B answers after its last word
                    m.d.comb += bus.w_defer.eq(1)
                    m.d.sync += [out_count.eq(bus.w_data), out_index.eq(0), out_wait.eq(HOST_READ_LATENCY)]
        if self.streams:
            with m.If(bus.idle & self.s_axis_tvalid & ~top.busy):
                # one image word per cycle at the host port (a write while busy would be ignored)
                m.d.comb += [self.s_axis_tready.eq(1), top.host_sel.eq(self.s_axis_tdest),
                             top.host_addr.eq(in_index), top.host_wdata.eq(self.s_axis_tdata), top.host_we.eq(1)]
                m.d.sync += in_index.eq(Mux(self.s_axis_tlast, 0, in_index + 1))
            with m.If(bus.w_wait):
                m.d.comb += [top.host_sel.eq(out_sel), top.host_addr.eq(out_index),
                             self.m_axis_tvalid.eq(out_wait == 0)]
                with m.If(out_wait != 0):
                    m.d.sync += out_wait.eq(out_wait - 1)
                with m.If((out_wait == 0) & self.m_axis_tready):
                    m.d.sync += [out_index.eq(out_index + 1), out_wait.eq(HOST_READ_LATENCY)]
                    m.d.comb += bus.w_done.eq(self.m_axis_tlast)
        with m.If(rd_region == 0):
            with m.Switch(rd_index):
                for i, value in enumerate(control):
                    with m.Case(i):
                        m.d.comb += bus.r_data.eq(value)
        with m.Else():
            m.d.comb += bus.r_data.eq(top.host_rdata)
        return m


def axi_map(wrapper: AxiLiteTop) -> dict:
    """The AXI address map of ``wrapper`` (JSON-able, byte addresses): the manifest's ``axi`` section."""
    plan = wrapper.top.plan
    span = 1 << (wrapper.index_bits + 2)
    out = {
        "protocol": "AXI4-Lite", "prefix": "s_axil_", "addr_width": wrapper.addr_width,
        "data_width": AXI_DATA_WIDTH, "region_bytes": span,
        "control": {name: 4 * i for i, name in enumerate(STREAM_REGISTERS if wrapper.streams
                                                         else CONTROL_REGISTERS)},
        "control_bits": {"start": 0, "busy": 0, "done": 1},
        "memories": [{"name": mm.name, "sel": mm.sel, "base": (mm.sel + 1) * span, "depth": mm.depth,
                      "width": mm.width, "signed": mm.signed, "role": mm.role} for mm in plan.memories],
        "register_file": {"base": (plan.reg_sel + 1) * span,
                          "registers": {r.name: (plan.reg_sel + 1) * span + 4 * r.index for r in plan.registers}},
        "read_latency": 2 + HOST_READ_LATENCY,
    }
    if wrapper.streams:
        out["streams"] = {
            "in": {"protocol": "AXI4-Stream", "prefix": "s_axis_", "data_width": AXI_DATA_WIDTH,
                   "dest_width": wrapper.dest_width, "signals": ["tdata", "tvalid", "tready", "tlast", "tdest"],
                   "packet": "one memory image: word k to entry k of memory sel = tdest; tlast ends it",
                   "words_per_cycle": 1, "ready_while_busy": False},
            "out": {"protocol": "AXI4-Stream", "prefix": "m_axis_", "data_width": AXI_DATA_WIDTH,
                    "dest_width": wrapper.dest_width, "signals": ["tdata", "tvalid", "tready", "tlast", "tdest"],
                    "packet": "entries 0..n-1 of memory stream_sel, started by writing n to stream_count "
                              "(B answers after the last word); tdest = sel, tlast on the last word",
                    "cycles_per_word": 1 + HOST_READ_LATENCY, "first_word_after_write": 1 + HOST_READ_LATENCY},
        }
    return out


def axi_build(b, streams: bool = False):
    """``(verilog text, manifest)`` of build ``b`` behind the AXI4-Lite wrapper (top module ``<name>_axi``); with
    ``streams`` also the AXI4-Stream data ports (top module ``<name>_axis``)."""
    from amaranth.back import verilog

    from .elaborate import wrapper_manifest
    wrapper = AxiLiteTop(b.top, streams)
    module = f"{b.name}_axis" if streams else f"{b.name}_axi"
    text = verilog.convert(wrapper, name=module, emit_src=False)
    man = wrapper_manifest(b, wrapper, module, "axis" if streams else "axi")
    man["axi"] = axi_map(wrapper)
    return text, man


__all__ = ["AxiLiteTop", "axi_map", "axi_build", "AXI_DATA_WIDTH", "STREAM_REGISTERS"]
