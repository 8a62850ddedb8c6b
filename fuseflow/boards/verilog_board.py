"""The board top's Verilog (kernel top + UART bridge) on Verilator, with cocotbext-uart as the host's UART.

:func:`simulate_verilog` is :func:`fuseflow.boards.simboard.simulate` on the Verilog a board build synthesises
instead of Amaranth's simulator: the :class:`~fuseflow.boards.bridge.BridgedTop` is converted to Verilog, built
with Verilator (cached) and driven by the cocotb test :mod:`fuseflow.boards.uart_cocotb`, whose host side is
cocotbext-uart's ``UartSource`` (``rx``) and ``UartSink`` (``tx``) speaking the bridge protocol
(:mod:`fuseflow.boards.protocol`) through :func:`fuseflow.hw.top.host_run`, as the host client does on a real
serial port. The hand-written bit-level UART of :class:`~fuseflow.boards.simboard.SimBoard` stays for Amaranth's
simulator (``boards simulate``), which cocotb's libraries cannot drive.
"""


from .bridge import BridgedTop

#: the cocotb test module (not a pytest module)
BENCH_MODULE = "fuseflow.boards.uart_cocotb"
TOP = "board_top"


def bridged_verilog(build, divisor: int = 4) -> tuple:
    """``(verilog text, manifest)`` of ``build``'s kernel top behind a UART bridge of ``divisor`` clocks per bit."""
    from amaranth.back import verilog
    top = BridgedTop(build, divisor)
    text = verilog.convert(top, name=TOP, ports=[top.rx, top.tx, top.busy, top.done])
    return text, top.manifest


def run_bridged_verilog(build, images: dict, divisor: int = 4, max_cycles: int = 1_000_000, root=None) -> dict:
    """Run ``build`` behind its bridge on Verilator: the cocotbext-uart host loads ``images``, starts, polls
    status and reads back. Returns :func:`fuseflow.hw.top.host_run`'s dict plus ``bytes_sent``/``bytes_received``
    and ``uart_cycles`` (clock cycles of the whole session)."""
    from ..hw.verilator import CLOCK_PERIOD_NS, build_verilator, run_cocotb_job
    text, man = bridged_verilog(build, divisor)
    bdir = build_verilator(text, TOP, root=root)
    job = {"manifest": man, "images": images, "max_cycles": int(max_cycles), "divisor": int(divisor),
           "clock_period_ns": CLOCK_PERIOD_NS}
    return run_cocotb_job(bdir, TOP, BENCH_MODULE, "FUSEFLOW_BOARD_JOB", job, what="UART bench")


def simulate_verilog(graph, inputs, divisor: int = 4, max_cycles=None, build=None) -> dict:
    """:func:`fuseflow.boards.simboard.simulate` (same summary dict) on the board top's Verilog under Verilator,
    the host's UART being cocotbext-uart's."""
    from .client import images_for
    from .simboard import prepare_run, run_summary
    program, ref, b = prepare_run(graph, inputs, build)
    images = images_for(program, b.manifest(), inputs)
    res = run_bridged_verilog(b, images, divisor, max_cycles or 4 * ref.cycles + 10_000)
    return run_summary(program, ref, res, bytes_sent=res["bytes_sent"], bytes_received=res["bytes_received"],
                       uart_cycles=res["uart_cycles"])


__all__ = ["bridged_verilog", "run_bridged_verilog", "simulate_verilog"]
