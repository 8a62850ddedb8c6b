"""The kernel top with an AXI4 master port to off-chip memory (``python -m fuseflow.hw build ... --interface
axi-master``): a tiled program's data lives off chip, and one Verilog build serves every input with the declared
shapes.

Ports: ``m_axi_`` an AXI4 (full) master (``word_bytes * 8`` data bits, 32-bit byte addresses, INCR bursts, id 0)
through which the DMA (:mod:`fuseflow.hw.dma`) loads each tile's input arrays into the tensor memories and stores
its outputs back, walking the tile table (:mod:`fuseflow.hw.sequencer`); ``s_axil_`` an AXI4-Lite slave for
control (32-bit data); ``irq`` (high from the end of a run until the next start). Control registers (byte
offsets, :data:`CONTROL_REGISTERS`)::

    0x00 control/status  write bit 0 = 1: start; read: bit 0 busy, bit 1 done
    0x04 cycles          cycles of the last run, start to done (fuseflow.samml.offchip.tiled_cycles)
    0x08 kernel_cycles   kernel cycles of the last run, summed over its tiles (the simulator's per tile)
    0x0c table           byte address of the tile table (read/write)
    0x10 tiles           number of tiles in the table (read/write)
    0x14 tiles_done      tiles finished in the last (or current) run

The AXI4-Lite protocol is :class:`fuseflow.hw.axi_lite.AxiLiteSlave`'s, as for ``--interface axi`` (AW and W
together, B in the next cycle), with the register read in the AR handshake's cycle (R in the next).
``kernel_done`` and ``kernel_cycles`` show the kernel top's ``done`` and ``cycles`` (for test benches and
debugging).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..errors import HardwareError
from ..samml.offchip import OffchipContract, entries_per_beat, record_stride, record_words
from ..samml.tileplan import banked_inputs
from .axi_lite import AxiLiteSlave, axi_lite_members
from .dma import AXI_ADDR_WIDTH, DmaReader, DmaWriter, read_members, write_members
from .sequencer import SEQ_WIDTH, TileSequencer

if TYPE_CHECKING:
    from .elaborate import Build
    from .offchip_image import OffchipImage
    from .top import ProgramTop

#: control registers of the AXI4-Lite slave, in address order (4 bytes each)
CONTROL_REGISTERS = ("control", "cycles", "kernel_cycles", "table", "tiles", "tiles_done")
CONTROL_ADDR_WIDTH = 8


def control_members() -> dict[str, Any]:
    """The AXI4-Lite slave members of the control port (flow as seen from the slave)."""
    return axi_lite_members(CONTROL_ADDR_WIDTH)


class ControlSlave(wiring.Component):
    """The AXI4-Lite control registers (:data:`CONTROL_REGISTERS`) of the master top, behind an
    :class:`fuseflow.hw.axi_lite.AxiLiteSlave` that reads in the AR handshake's cycle (``read_latency`` 0)."""

    def __init__(self) -> None:
        super().__init__(control_members() | {
            "start": Out(1), "table": Out(AXI_ADDR_WIDTH), "tiles": Out(SEQ_WIDTH),
            "busy": In(1), "done": In(1), "cycles": In(SEQ_WIDTH), "kernel_cycles": In(SEQ_WIDTH),
            "tiles_done": In(SEQ_WIDTH),
        })

    def elaborate(self, platform: Any) -> Module:
        m = Module()
        m.submodules.bus = bus = AxiLiteSlave(CONTROL_ADDR_WIDTH)
        bus.forward(m, self)
        values = [self.busy | (self.done << 1), self.cycles, self.kernel_cycles, self.table, self.tiles,
                  self.tiles_done]
        with m.If(bus.w_stb):
            with m.Switch(bus.w_addr[2:]):
                with m.Case(0):
                    m.d.comb += self.start.eq(bus.w_data[0] & ~self.busy)
                with m.Case(3):
                    m.d.sync += self.table.eq(bus.w_data)
                with m.Case(4):
                    m.d.sync += self.tiles.eq(bus.w_data)
        with m.Switch(bus.r_addr[2:]):
            for i, v in enumerate(values):
                with m.Case(i):
                    m.d.comb += bus.r_data.eq(v)
        return m


class AxiMasterTop(wiring.Component):
    """The kernel top ``top`` (:class:`fuseflow.hw.top.ProgramTop`) with an AXI4 master port (``m_axi_``), the
    DMA reader and writer, the tile sequencer, and the AXI4-Lite control slave (``s_axil_``)."""

    def __init__(self, top: ProgramTop, contract: OffchipContract) -> None:
        plan = top.plan
        self.top = top
        self.contract = contract
        dw = contract.word_bytes * 8
        if plan.data_width > dw:
            raise HardwareError("--interface axi-master", f"memory words of {plan.data_width} bits do not fit a "
                                                          f"{dw}-bit beat: use a larger word_bytes")
        if contract.pack:                # the DMA moves rows of entries, one beat per cycle (samml.offchip)
            top.pack_host(dw, {mm.name: entries_per_beat(mm.width, contract) for mm in plan.memories})
        if contract.buffers == 2:        # the inputs that change between tiles: two banks (fuseflow.hw.sequencer)
            tiling = getattr(top.program, "tiling", None)
            if tiling is None:
                self._MustUse__silence = top._MustUse__silence = True      # refused: never elaborated
                raise HardwareError("--interface axi-master", "buffers 2 needs a tiled graph (its plan names the "
                                                              "inputs that change between tiles): use buffers=1")
            banked = banked_inputs(tiling["kernels"], 2)
            top.double_buffer([mm.name for mm in plan.memories if mm.tensor in banked])
        master = {f"m_axi_{k}": v for k, v in (read_members(dw) | write_members(dw)).items()}
        super().__init__(master | control_members() | {"irq": Out(1), "kernel_done": Out(1),
                                                         "kernel_cycles": Out(SEQ_WIDTH)})

    def elaborate(self, platform: Any) -> Module:
        m = Module()
        top, plan, c = self.top, self.top.plan, self.contract
        m.submodules.kernel = top
        m.submodules.control = ctl = ControlSlave()
        m.submodules.reader = rd = DmaReader(c)
        rh = top.row_host
        hw = plan.data_width if rh is None else rh.bits           # what the host port moves per cycle
        m.submodules.writer = wr = DmaWriter(c, hw)
        m.submodules.sequencer = seq = TileSequencer(c, len(plan.memories), plan.sel_width, plan.addr_width, hw)
        for name, member in control_members().items():
            if member.flow == In:
                m.d.comb += getattr(ctl, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(ctl, name))
        for eng, members in ((rd, read_members(1)), (wr, write_members(1))):
            for name, member in members.items():
                if member.flow == Out:
                    m.d.comb += getattr(self, f"m_axi_{name}").eq(getattr(eng.axi, name))
                else:
                    m.d.comb += getattr(eng.axi, name).eq(getattr(self, f"m_axi_{name}"))
        wiring.connect(m, seq.rd, rd.cmd)
        wiring.connect(m, rd.beat, seq.beat)
        wiring.connect(m, seq.wr, wr.cmd)
        wiring.connect(m, wr.onchip, seq.onchip)
        if rh is not None:
            m.d.comb += rh.wdata.eq(seq.host.wdata)
        if top.banks is not None:
            m.d.comb += [top.banks.run.eq(seq.bank_run), top.banks.host.eq(seq.bank_host)]
        m.d.comb += [
            seq.start.eq(ctl.start), seq.table.eq(ctl.table), seq.tiles.eq(ctl.tiles),
            ctl.busy.eq(seq.busy), ctl.done.eq(seq.done), ctl.cycles.eq(seq.cycles),
            ctl.kernel_cycles.eq(seq.kernel_cycles), ctl.tiles_done.eq(seq.tiles_done), self.irq.eq(seq.done),
            top.start.eq(seq.kernel.start), seq.kernel.done.eq(top.done), seq.kernel.cycles.eq(top.cycles),
            top.host_sel.eq(seq.host.sel), top.host_addr.eq(seq.host.addr), top.host_wdata.eq(seq.host.wdata),
            top.host_we.eq(seq.host.we), seq.host.rdata.eq(top.host_rdata if rh is None else rh.rdata),
            self.kernel_done.eq(top.done), self.kernel_cycles.eq(top.cycles),
        ]
        return m


def contract_json(contract: OffchipContract) -> dict:
    return contract.to_json()


def axim_map(wrapper: AxiMasterTop) -> dict:
    """The manifest's ``axi`` section of a master build (JSON-able)."""
    plan, c = wrapper.top.plan, wrapper.contract
    n = len(plan.memories)
    return {
        "protocol": "AXI4", "prefix": "m_axi_", "addr_width": AXI_ADDR_WIDTH, "data_width": c.word_bytes * 8,
        "contract": contract_json(c),
        "record_words": record_words(n), "record_stride": record_stride(n, c),
        "memories": [{"name": mm.name, "sel": mm.sel, "depth": mm.depth, "capacity": mm.capacity,
                      "width": mm.width, "signed": mm.signed, "role": mm.role,
                      "entries_per_beat": entries_per_beat(mm.width, c),
                      "banks": 2 if wrapper.top.banks is not None and mm.name in wrapper.top.banks.names else 1}
                     for mm in plan.memories],
        "control": {"protocol": "AXI4-Lite", "prefix": "s_axil_", "addr_width": CONTROL_ADDR_WIDTH,
                    "data_width": 32, "registers": {name: 4 * i for i, name in enumerate(CONTROL_REGISTERS)},
                    "control_bits": {"start": 0, "busy": 0, "done": 1}},
    }


def axim_build(b: Build, contract: OffchipContract) -> tuple[str, dict]:
    """``(verilog text, manifest)`` of build ``b`` with the AXI4 master port (top module ``<name>_axim``)."""
    from amaranth.back import verilog

    from .elaborate import wrapper_manifest
    if b.baked:
        raise HardwareError("--interface axi-master", "the tensor data comes from off-chip memory: build without "
                                                      "baked inputs (--no-bake)")
    wrapper = AxiMasterTop(b.top, contract)
    module = f"{b.name}_axim"
    text = verilog.convert(wrapper, name=module, emit_src=False)
    man = wrapper_manifest(b, wrapper, module, "axi-master")
    man["axi"] = axim_map(wrapper)
    return text, man


__all__ = ["AxiMasterTop", "ControlSlave", "axim_build", "axim_map", "CONTROL_REGISTERS"]


def run_axim(bdir: str | Path, manifest: dict, image: OffchipImage, *, memory: str = "axiram", pause: float = 0.0,
             seed: int = 0, max_cycles: int = 1_000_000, memory_bytes: int | None = None) -> dict:
    """Run a Verilator build (``bdir``, :func:`fuseflow.hw.verilator.build_verilator` of an ``axi-master``
    build) once on ``image`` (:class:`fuseflow.hw.offchip_image.OffchipImage`) behind ``memory``: ``"axiram"``
    (cocotbext-axi's AxiRam; ``pause``: the probability of a pause cycle on each of its channels) or
    ``"contract"`` (the memory the off-chip contract describes). Returns ``{"done", "registers",
    "kernel_cycles" (per tile), "memory" (the image's bytes after the run), "errors"}``."""
    import base64

    from .verilator import CLOCK_PERIOD_NS, run_cocotb_job
    c = image.contract
    size = memory_bytes or 1 << max(12, (image.base + len(image.data) - 1).bit_length())
    job = {"image": base64.b64encode(image.data).decode(), "base": image.base, "size": size,
           "table": image.table, "tiles": image.tiles, "memory": memory, "pause": pause, "seed": seed,
           "latency": c.latency, "word_bytes": c.word_bytes, "max_cycles": int(max_cycles),
           "clock_period_ns": CLOCK_PERIOD_NS}
    res = run_cocotb_job(bdir, manifest["module"], "fuseflow.hw.axim_bench", "FUSEFLOW_AXIM_JOB", job,
                         what="AXI master bench")
    res["memory"] = base64.b64decode(res["memory"])
    return res


__all__ += ["run_axim"]
