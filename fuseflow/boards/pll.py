"""The ECP5 PLL (``EHXPLLL``) as the kernel clock: divider search and the Amaranth instance.

The search follows Project Trellis' ``ecppll``: with feedback from CLKOP, ``f_pfd = f_in / CLKI_DIV``,
``f_out = f_pfd * CLKFB_DIV`` and ``f_vco = f_out * CLKOP_DIV``; every divider combination inside the limits
below is tried and the output closest to the request wins (ties: the lowest VCO divider, i.e. the first found).
"""

from dataclasses import asdict, dataclass

from amaranth.hdl import ClockDomain, Instance, Module, Signal
from amaranth.lib.cdc import ResetSynchronizer

from ..errors import HardwareError

#: ECP5 EHXPLLL limits in MHz and divider ranges (as ecppll: FPGA Libraries Reference Guide, ECP5 data sheet)
INPUT_MHZ = (8.0, 400.0)
OUTPUT_MHZ = (10.0, 400.0)
PFD_MHZ = (3.125, 400.0)
VCO_MHZ = (400.0, 800.0)
CLKI_DIV = range(1, 129)
CLKFB_DIV = range(1, 81)
CLKOP_DIV = range(1, 129)


@dataclass(frozen=True)
class PLLParams:
    """One EHXPLLL configuration (frequencies in MHz)."""
    input_mhz: float
    requested_mhz: float
    clki_div: int
    clkfb_div: int
    clkop_div: int
    clkop_cphase: int
    pfd_mhz: float
    vco_mhz: float
    output_mhz: float

    def to_json(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def ecp5_pll_params(input_mhz: float, output_mhz: float) -> PLLParams:
    """Dividers of an EHXPLLL making ``output_mhz`` from ``input_mhz`` (the reachable frequency closest to the
    request). HardwareError when the request or the input is outside the PLL's range."""
    if not INPUT_MHZ[0] <= input_mhz <= INPUT_MHZ[1]:
        raise HardwareError("--clock", f"the ECP5 PLL input must be {INPUT_MHZ[0]:g}-{INPUT_MHZ[1]:g} MHz, "
                                       f"got {input_mhz:g}")
    if not OUTPUT_MHZ[0] <= output_mhz <= OUTPUT_MHZ[1]:
        raise HardwareError("--clock", f"the ECP5 PLL makes {OUTPUT_MHZ[0]:g}-{OUTPUT_MHZ[1]:g} MHz, "
                                       f"got {output_mhz:g}")
    best = None
    for i in CLKI_DIV:
        pfd = input_mhz / i
        if not PFD_MHZ[0] <= pfd <= PFD_MHZ[1]:
            continue
        for fb in CLKFB_DIV:
            out = pfd * fb
            if not OUTPUT_MHZ[0] <= out <= OUTPUT_MHZ[1]:
                continue
            for op in CLKOP_DIV:
                vco = out * op
                if not VCO_MHZ[0] <= vco <= VCO_MHZ[1]:
                    continue
                if best is None or abs(out - output_mhz) < abs(best[0] - output_mhz):
                    best = (out, i, fb, op, pfd, vco)
                break            # any VCO divider in range gives the same output: keep the first
    out, i, fb, op, pfd, vco = best
    # ecppll's phase setting for 0 degrees with CLKOP feedback
    return PLLParams(input_mhz, output_mhz, i, fb, op, (op - 1) // 2, pfd, vco, out)


class ECP5PLLDomain:
    """Elaboration helper: drive clock domain ``sync`` from an EHXPLLL fed by ``clk_in`` (the board
    oscillator), held in reset until the PLL locks (synchronised release)."""

    def __init__(self, params: PLLParams):
        self.params = params

    def add_to(self, m: Module, clk_in, platform=None) -> ClockDomain:
        p = self.params
        m.domains.sync = cd = ClockDomain("sync")
        locked = Signal()
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{p.input_mhz:g}", a_FREQUENCY_PIN_CLKOP=f"{p.output_mhz:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1", a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=p.clki_div, p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=p.clkop_div,
            p_CLKOP_CPHASE=p.clkop_cphase, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP", p_CLKFB_DIV=p.clkfb_div,
            i_RST=0, i_STDBY=0, i_CLKI=clk_in, o_CLKOP=cd.clk, i_CLKFB=cd.clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked)
        m.submodules.pll_reset = ResetSynchronizer(~locked, domain="sync")
        if platform is not None:
            platform.add_clock_constraint(cd.clk, p.output_mhz * 1e6)
        return cd
