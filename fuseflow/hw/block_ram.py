"""ECP5 DP16KD block RAM with its output register, instantiated directly.

Yosys maps a synchronous read to a DP16KD without the block's output register (``REGMODE = "NOREG"``) and will
not absorb a fabric register after the read into it, so the block's 5.6-5.8 ns clock-to-output would start
the next path. Here the blocks are instances with ``REGMODE_A = "OUTREG"``: the address register and the
output register are both inside the block, two cycles from address to data (``registry.MEMORY_READ_LATENCY``)
and the data leaves from a register. Used for the alu's function tables (:func:`fuseflow.hw.ops._pipe.rom_outreg`)
and for the tensor memories in block RAM (:class:`fuseflow.hw.memory.TensorMemory`). level_scan's seg and first arrays
in block RAM are read the same way with the port's clock enable (``CEA``): the address is taken only when the op
loads its next head's entries, and the output register follows every edge (``bounds_latency`` 2,
:mod:`fuseflow.samml.storage`). A read of latency 1 with a clock enable uses the blocks without the output register
(``REGMODE_A = "NOREG"``): its data leaves from the block's 5.6-5.8 ns clock-to-output.

Geometry: every block in 1024 x 18 mode, blocks side by side for wider words (bits ``18c .. 18c + 17`` in
column ``c``) and stacked for deeper memories (entries ``1024r ..`` in row ``r``); with several rows the row's
output is chosen after the output registers by the address's high bits registered twice (one AND-OR level).
Reads use port A, writes port B (``ADB0``/``ADB1`` are the byte enables in 18-bit mode; both set).

Read during write on the same address in the same cycle (read on A, write on B): Lattice gives no defined read
data for a collision between the ports (Yosys' ``brams_16kd.txt`` declares no transparency between them). The
generic model (an Amaranth ``Memory`` read port) returns the old entry; the kernel top never relies on either
(no kernel both writes and reads a block memory, :class:`fuseflow.hw.top.ProgramTop` checks it).

:class:`DP16KDModel` is the block's behaviour for the subset used here, driven by the same parameters and
pins as the instance (``impl="dp16kd-model"``), so the Amaranth simulator checks the wiring, the INITVAL
packing and the row selection against the generic memory.
"""

from math import ceil

from amaranth.hdl import Cat, ClockSignal, Const, Elaboratable, Instance, Module, Signal, Value
from amaranth.lib.memory import Memory

from ..errors import HardwareError

#: entries and bits of one DP16KD in 18-bit mode
BLOCK_DEPTH, BLOCK_WIDTH = 1024, 18


def dp16kd_blocks(depth: int, width: int) -> int:
    """DP16KD blocks of a ``depth`` x ``width`` memory in this module's geometry (1024 x 18 each)."""
    return ceil(depth / BLOCK_DEPTH) * ceil(width / BLOCK_WIDTH)


def initvals(words: list[int]) -> dict[str, Const]:
    """``INITVAL_00`` .. ``INITVAL_3F`` parameters of one block holding ``words`` (at most 1024 of 18 bits):
    row ``j`` holds words ``16j .. 16j + 15``, each in a 20-bit slot (Yosys' ``brams_map_16kd.v``)."""
    if len(words) > BLOCK_DEPTH:
        raise HardwareError("DP16KD", f"{len(words)} words do not fit one block of {BLOCK_DEPTH}")
    part = [w & 0x3FFFF for w in words] + [0] * (BLOCK_DEPTH - len(words))
    out = {}
    for j in range(64):
        v = 0
        for i in range(16):
            v |= part[16 * j + i] << (20 * i)
        out[f"p_INITVAL_{j:02X}"] = Const(v, 320)
    return out


def initval_words(params: dict) -> list[int]:
    """The 1024 words of a block from its ``p_INITVAL_xx`` parameters (the inverse of :func:`initvals`)."""
    words = []
    for j in range(64):
        v = params[f"p_INITVAL_{j:02X}"].value
        words += [(v >> (20 * i)) & 0x3FFFF for i in range(16)]
    return words


def _addr_pins(side, addr, byte_enables):
    """``ADx13 .. ADx0`` of one side in 18-bit mode: the entry on bits 13..4; bits 1..0 are the write byte
    enables (1 for a writing side), bits 3..2 unused."""
    pins = {f"i_AD{side}{i}": (addr[i - 4] if 0 <= i - 4 < len(addr) else 0) for i in range(4, 14)}
    pins.update({f"i_AD{side}{i}": byte_enables for i in range(2)})
    pins.update({f"i_AD{side}{i}": 0 for i in range(2, 4)})
    return pins


def dp16kd(m, name: str, words: list[int], raddr, rdata, waddr=None, wdata=None, wen=None, *, model=False,
           outreg=True, ren=None):
    """One DP16KD: read on port A at ``raddr`` into ``rdata`` (18 bits, two cycles: address register, then
    the output register; ``outreg=False``: one cycle, the data from the address register's read, held while
    ``ren``, the port's clock enable, is clear), written on port B when ``wen`` (None: a ROM), initial
    contents ``words``. ``model``: :class:`DP16KDModel` on the same parameters and pins instead of the
    instance."""
    write = wen is not None
    params = dict(p_DATA_WIDTH_A=18, p_DATA_WIDTH_B=18, p_REGMODE_A="OUTREG" if outreg else "NOREG",
                  p_REGMODE_B="NOREG",
                  p_RESETMODE="SYNC", p_CSDECODE_A="0b000", p_CSDECODE_B="0b000", p_WRITEMODE_A="NORMAL",
                  p_WRITEMODE_B="NORMAL", p_GSR="DISABLED", **initvals(words))
    clk = ClockSignal("sync")
    pins = _addr_pins("A", raddr, 0)
    pins.update(_addr_pins("B", waddr if write else Const(0, 1), 1 if write else 0))
    pins.update({f"i_DIA{i}": 0 for i in range(18)})
    wdata = Value.cast(wdata) if write else Const(0, 1)
    pins.update({f"i_DIB{i}": (wdata[i] if i < len(wdata) else 0) for i in range(18)})
    pins.update({f"o_DOA{i}": rdata[i] for i in range(min(18, len(rdata)))})
    pins.update(i_CLKA=clk, i_CEA=1 if ren is None else ren, i_OCEA=1, i_WEA=0, i_RSTA=0, i_CSA0=0, i_CSA1=0,
                i_CSA2=0,
                i_CLKB=clk if write else 0, i_CEB=1 if write else 0, i_OCEB=0, i_WEB=wen if write else 0,
                i_RSTB=0, i_CSB0=0, i_CSB1=0, i_CSB2=0)
    m.submodules[name] = DP16KDModel(params, pins) if model else Instance("DP16KD", **params, **pins)


def block_memory(m, prefix: str, depth: int, width: int, words: list[int], raddr, rdata, waddr=None,
                 wdata=None, wen=None, *, model=False, latency=2, ren=None):
    """A ``depth`` x ``width`` memory of DP16KD blocks (module doc: geometry) read at ``raddr`` into ``rdata``
    two cycles later, written at ``waddr`` when ``wen`` (None: a ROM). ``ren``: the address is taken only at an
    edge ending a cycle with it set (the blocks' clock enable). ``latency=1``: the blocks without their output
    register, ``rdata`` the entry named at the last clock edge with ``ren`` set."""
    if latency not in (1, 2):
        raise HardwareError("DP16KD", f"no read of latency {latency}")
    rows, cols = ceil(depth / BLOCK_DEPTH), ceil(width / BLOCK_WIDTH)
    write = wen is not None
    outs = []
    for r in range(rows):
        out = Signal(BLOCK_WIDTH * cols, name=f"{prefix}_row{r}")
        row_words = words[BLOCK_DEPTH * r:BLOCK_DEPTH * (r + 1)]
        # a write lands in the row its high bits name
        row_wen = (wen & (waddr[10:] == r) if rows > 1 else wen) if write else None
        for c in range(cols):
            part = [(w >> (BLOCK_WIDTH * c)) & 0x3FFFF for w in row_words]
            dp16kd(m, f"{prefix}_r{r}c{c}", part, raddr[:10], out[BLOCK_WIDTH * c:BLOCK_WIDTH * (c + 1)],
                   waddr[:10] if write else None, Value.cast(wdata)[BLOCK_WIDTH * c:] if write else None,
                   row_wen, model=model, outreg=latency == 2, ren=ren)
        outs.append(out)
    if rows == 1:
        m.d.comb += rdata.eq(outs[0][:width])
        return
    # the row of the address read (two cycles ago; latency 1: at the last enabled edge), one-hot, then one
    # AND-OR level after the blocks' outputs
    picked = []
    for r, out in enumerate(outs):
        hot = Signal(name=f"{prefix}_row{r}_hot")
        if ren is None:
            m.d.sync += hot.eq(raddr[10:] == r)
        else:
            with m.If(ren):                         # as the blocks' address registers
                m.d.sync += hot.eq(raddr[10:] == r)
        if latency == 2:
            hot_q = Signal(name=f"{prefix}_row{r}_hot_q")
            m.d.sync += hot_q.eq(hot)
        else:
            hot_q = hot
        picked.append(out[:width] & hot_q.replicate(width))
    value = picked[0]
    for p in picked[1:]:
        value = value | p
    m.d.comb += rdata.eq(value)


class DP16KDModel(Elaboratable):
    """A DP16KD's behaviour for the subset :func:`dp16kd` uses (18-bit ports, read on A with OUTREG or NOREG and
    its clock enable, write on B with both byte enables, chip selects 0, no resets), from the instance's own
    parameters and pins: a check of the wiring in the Amaranth simulator. Read during write of one entry gives the
    old entry (the block's is undefined)."""

    def __init__(self, params: dict, pins: dict):
        for key, want in (("p_DATA_WIDTH_A", 18), ("p_DATA_WIDTH_B", 18), ("p_REGMODE_B", "NOREG")):
            if params[key] != want:
                raise HardwareError("DP16KD model", f"{key[2:]} = {params[key]!r} is not modelled")
        self.params, self.pins = params, pins

    def elaborate(self, platform):
        m = Module()
        def pin(name):                      # one bit of an input pin (a constant pin is a Python int)
            v = self.pins[f"i_{name}"]
            return Const(v, 1) if isinstance(v, int) else Value.cast(v)[0]
        mem = m.submodules.array = Memory(shape=18, depth=BLOCK_DEPTH, init=initval_words(self.params))
        rp = mem.read_port(domain="sync")
        m.d.comb += [rp.addr.eq(Cat(*[pin(f"ADA{i}") for i in range(4, 14)])), rp.en.eq(pin("CEA"))]
        data = rp.data
        if self.params["p_REGMODE_A"] == "OUTREG":
            data = Signal(18, name="doa_reg")
            m.d.sync += data.eq(rp.data)
        for i in range(18):
            if f"o_DOA{i}" in self.pins:
                m.d.comb += self.pins[f"o_DOA{i}"].eq(data[i])
        wp = mem.write_port(granularity=9)
        m.d.comb += [wp.addr.eq(Cat(*[pin(f"ADB{i}") for i in range(4, 14)])),
                     wp.data.eq(Cat(*[pin(f"DIB{i}") for i in range(18)])),
                     wp.en.eq(Cat(pin("ADB0"), pin("ADB1")) & (pin("WEB") & pin("CEB")).replicate(2))]
        return m
