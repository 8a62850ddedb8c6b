"""The boards a design can target (name, FPGA, clock, synthesis target), without their Amaranth platforms
(:mod:`fuseflow.boards.platforms` builds for them), and the FIFO budget a board gives the compiler's depths
pass (:func:`fifo_budget_bits`)."""

from dataclasses import dataclass

from ..errors import HardwareError
from .synth import TARGETS

#: share of a target's channel-FIFO memory (``TARGETS[...]["fifo_ram_bits"]``) the depths pass takes by default
#: (the rest holds the tensor memories that stay in the fabric and the logic's own LUTs)
FIFO_SHARE = 0.1


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    platform_name: str
    clock_hz: float
    family: str
    target: str          # fuseflow.boards.synth.TARGETS key
    bitstream: str       # file extension of the bitstream
    leds: int
    pll: bool = False            # the kernel clock comes from the FPGA's PLL (ECP5 EHXPLLL) at --clock
    default_clock_mhz: float | None = None   # --clock default (PLL boards): a frequency the bundled build meets

    def kernel_clock_hz(self, clock_mhz=None):
        """The kernel clock: the oscillator, or the PLL output nearest ``clock_mhz`` (default
        ``default_clock_mhz``)."""
        return self.pll_params(clock_mhz).output_mhz * 1e6 if self.pll else self.clock_hz

    def pll_params(self, clock_mhz=None):
        if not self.pll:
            if clock_mhz is not None:
                raise HardwareError("--clock", f"board {self.name} runs on its {self.clock_hz / 1e6:g} MHz "
                                               f"oscillator (no PLL)")
            return None
        from .pll import ecp5_pll_params
        return ecp5_pll_params(self.clock_hz / 1e6, clock_mhz or self.default_clock_mhz)

    def platform(self):
        if self.platform_name == "ULX3S_85F_Platform":
            from amaranth_boards.ulx3s import ULX3S_85F_Platform
            return ULX3S_85F_Platform()
        if self.platform_name == "ICEBreakerPlatform":
            from amaranth_boards.icebreaker import ICEBreakerPlatform
            return ICEBreakerPlatform()
        raise HardwareError("board", f"unknown platform {self.platform_name}")


#: the ULX3S kernel clock by default: below the Fmax the SpMV board build reaches (docs/boards.md)
DEFAULT_ULX3S_MHZ = 40.0

BOARDS = {
    "ulx3s-85f": Board("ulx3s-85f", "ULX3S (ECP5 LFE5U-85F)", "ULX3S_85F_Platform", 25e6, "ecp5", "ecp5-85f",
                       "bit", 2, pll=True, default_clock_mhz=DEFAULT_ULX3S_MHZ),
    "icebreaker": Board("icebreaker", "iCEBreaker (iCE40UP5K)", "ICEBreakerPlatform", 12e6, "ice40",
                        "ice40-up5k", "bin", 2),
}


def get_board(name):
    if name not in BOARDS:
        raise HardwareError("--board", f"unknown board {name!r} (have: {', '.join(BOARDS)})")
    return BOARDS[name]


def fifo_budget_bits(board: str) -> int:
    """The default FIFO budget of the depths pass (:mod:`fuseflow.compiler.passes.depths`) on ``board``:
    :data:`FIFO_SHARE` of the memory its channel FIFOs map to (ULX3S-85F: 66,912 of the ECP5-85F's 669,120 bits
    of distributed RAM; iCEBreaker: 528 of the UP5K's 5,280 flip-flops). Block RAM does not count: the FIFOs
    are read combinationally."""
    return int(FIFO_SHARE * TARGETS[get_board(board).target]["fifo_ram_bits"])


#: data bits of one block RAM: the ECP5's DP16KD as the kernel top builds it (1024 x 18), the iCE40's SB_RAM40_4K
BLOCK_RAM_BITS = {"ecp5": 1024 * 18, "ice40": 4096}


def onchip_bits(board: str) -> int:
    """The default on-chip budget of the tiling pass (``--onchip-bits``) on ``board``: its block RAM
    (ULX3S-85F: 208 DP16KD, 3,833,856 bits; iCEBreaker: 30 SB_RAM40_4K, 122,880 bits)."""
    b = get_board(board)
    return TARGETS[b.target]["capacity"]["brams"] * BLOCK_RAM_BITS[b.family]
