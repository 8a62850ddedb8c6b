"""Vendor cells behind one platform hook, as Amaranth picks ``get_ff_sync`` / ``get_memory`` by platform.

:func:`get_cells` gives the cells of the platform a design is elaborated for: ``platform.get_cells()`` when the
platform has that method, else :class:`ECP5Cells` for an ECP5 (:func:`dsp_family`), else :class:`GenericCells`
(portable Amaranth: simulation, Verilator, iCE40). Each cell keeps a structure that the logic mapper would
otherwise rearrange (a register Yosys must not merge with its copies, a multiplexer slice, a DSP block with its
registers); the generic cells compute the same values with plain Amaranth.
"""

from amaranth.hdl import Cat, ClockSignal, Instance, Signal, Value

from ...errors import HardwareError


def dsp_family(platform) -> str | None:
    """``"ecp5"`` when elaborating for an ECP5 (an Amaranth Lattice platform, or
    :class:`fuseflow.boards.synth.SynthTarget`): multiplies then instantiate MULT18X18D blocks with their
    registers. ``None`` otherwise (simulation, Verilator, iCE40): portable ``*``."""
    return "ecp5" if getattr(platform, "family", None) == "ecp5" else None


def lut4_init(fn) -> int:
    """The ``INIT`` of an ECP5 ``LUT4`` computing ``fn(a, b, c, d)`` (0/1 each): ``Z = INIT[{D, C, B, A}]``."""
    return sum(fn(i & 1, i >> 1 & 1, i >> 2 & 1, i >> 3 & 1) << i for i in range(16))


#: ``a ? b : c`` as a LUT4 (inputs A, B, C; D unused)
MUX_INIT = lut4_init(lambda a, b, c, d: b if a else c)
#: ``a ? b : c & d``
MUX_AND_INIT = lut4_init(lambda a, b, c, d: b if a else c & d)


class GenericCells:
    """Portable cells: plain Amaranth, the same values as the vendor cells."""

    family = None

    def copy_register(self, m, d, name):
        """A reset-less register of ``d`` that synthesis keeps apart from its equal copies (here: a register)."""
        q = Signal(len(d), name=name, reset_less=True)
        m.d.sync += q.eq(d)
        return q

    def mux8(self, m, sel, words, width, name):
        """``words[sel]`` (8 words of ``width`` bits, ``sel`` 3 bits) on a kept wire."""
        out = Signal(width, name=name, attrs={"keep": 1})
        m.d.comb += out.eq(Cat(*words).word_select(sel, width))
        return out

    def mult18x18d(self, m, name, a, b, p, b_en=None):
        """``p = a * b`` two cycles late in a DSP block with input and output registers: none here."""
        raise HardwareError("MULT18X18D", f"{name}: the platform has no MULT18X18D block")


class ECP5Cells(GenericCells):
    """Lattice ECP5 primitives (``TRELLIS_FF``, ``LUT4`` / ``PFUMX`` / ``L6MUX21``, ``MULT18X18D``)."""

    family = "ecp5"

    def copy_register(self, m, d, name):
        """One ``TRELLIS_FF`` instance per bit: Yosys merges equal flip-flops bit by bit, not these."""
        q = Signal(len(d), name=name, reset_less=True)
        for i in range(len(d)):
            m.submodules[f"{name}_ff{i}"] = Instance(
                "TRELLIS_FF", p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR", p_REGSET="RESET",
                p_SRMODE="LSR_OVER_CE", i_CLK=ClockSignal("sync"), i_LSR=0, i_CE=1, i_DI=d[i], o_Q=q[i])
        return q

    def mux8(self, m, sel, words, width, name):
        """Per bit one slice pair: four ``LUT4`` 2:1 multiplexers by ``sel[0]``, two ``PFUMX`` by ``sel[1]``,
        an ``L6MUX21`` by ``sel[2]``, which the logic mapper leaves as they are (it mapped the word select as a
        LUT4 before a LUT4 and PFUMX, with a route between them)."""
        out = Signal(width, name=name, attrs={"keep": 1})
        sel = Value.cast(sel)
        for b in range(width):
            f = [Signal(name=f"{name}_b{b}_f{k}") for k in range(4)]
            g = [Signal(name=f"{name}_b{b}_g{k}") for k in range(2)]
            for k in range(4):
                m.submodules[f"{name}_b{b}_lut{k}"] = Instance(
                    "LUT4", p_INIT=MUX_INIT, i_A=sel[0], i_B=Value.cast(words[2 * k + 1])[b],
                    i_C=Value.cast(words[2 * k])[b], i_D=0, o_Z=f[k])
            for k in range(2):
                m.submodules[f"{name}_b{b}_pfumx{k}"] = Instance(
                    "PFUMX", i_ALUT=f[2 * k + 1], i_BLUT=f[2 * k], i_C0=sel[1], o_Z=g[k])
            m.submodules[f"{name}_b{b}_l6mux"] = Instance("L6MUX21", i_D0=g[0], i_D1=g[1], i_SD=sel[2],
                                                          o_Z=out[b])
        return out

    def mult18x18d(self, m, name, a, b, p, b_en=None):
        """``p = a * b`` (signed 18 x 18 -> 36 bits) with REG_INPUTA/B and REG_OUTPUT on ``sync``; ``b_en``:
        b's input register loads only when it is 1 (its CE1)."""
        ports = {f"i_A{i}": a[i] for i in range(18)}
        ports.update({f"i_B{i}": b[i] for i in range(18)})
        ports.update({f"i_C{i}": 0 for i in range(18)})
        ports.update({f"o_P{i}": p[i] for i in range(36)})
        ports.update({f"i_CLK{i}": ClockSignal("sync") if i == 0 else 0 for i in range(4)})
        ports.update({f"i_CE{i}": 1 for i in range(4)})
        if b_en is not None:                 # b's register on CE1 (the others keep CE0, the default)
            ports.update(i_CE1=b_en, p_REG_INPUTB_CE="CE1")
        ports.update({f"i_RST{i}": 0 for i in range(4)})
        m.submodules[name] = Instance(
            "MULT18X18D", p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_OUTPUT_CLK="CLK0",
            p_REG_INPUTC_CLK="NONE", p_REG_PIPELINE_CLK="NONE", p_GSR="DISABLED",
            i_SIGNEDA=1, i_SIGNEDB=1, i_SOURCEA=0, i_SOURCEB=0, **ports)


#: the cells by :func:`dsp_family`
CELLS = {None: GenericCells(), "ecp5": ECP5Cells()}


def get_cells(platform):
    """The cells for ``platform``: its own ``get_cells()`` if it has one, else by :func:`dsp_family`."""
    hook = getattr(platform, "get_cells", None)
    if hook is not None:
        return hook()
    return CELLS[dsp_family(platform)]
