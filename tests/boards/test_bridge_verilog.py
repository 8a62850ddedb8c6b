"""The board top's Verilog (kernel top + UART bridge) on Verilator, its host side cocotbext-uart's UartSource and
UartSink speaking the bridge protocol (issue 17, item 3): identify, load, start, poll, read back. Results must be
bit-identical to the fixed-mode reference simulator and the cycle counter equal to its cycles, as the Amaranth
round trips of test_roundtrip.py (hand-written bit-level UART) require."""

import numpy as np
import pytest

from fuseflow.boards.verilog_board import simulate_verilog
from fuseflow.samml import kernels

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)


def check(summary, n_kernels):
    assert summary["ok"], summary["mismatches"]
    assert summary["rtl_cycles"] == summary["sim_cycles"]
    assert summary["rtl_kernel_cycles"] == summary["sim_kernel_cycles"]
    assert len(summary["rtl_kernel_cycles"]) == n_kernels
    # every byte crossed the UART: at least 10 bit times (4 clocks each) per byte
    assert summary["uart_cycles"] >= 40 * (summary["bytes_sent"] + summary["bytes_received"])


@requires_verilator
def test_spmv_over_cocotbext_uart():
    program = kernels.build("spmv_csr", 6)
    inputs = kernels.random_inputs(program, density=0.4, seed=3)
    s = simulate_verilog(program, inputs)
    check(s, 1)
    x = s["result"]["tensors"]["x"]
    dense = np.zeros(6)
    seg, crd = x["levels"][0]["seg"], x["levels"][0]["crd"]
    for i, v in zip(crd[:seg[1]], x["vals"]):
        dense[i] = v / 2 ** 16
    assert np.allclose(dense, inputs["B"] @ inputs["c"], atol=1e-3)


@requires_verilator
@pytest.mark.slow
def test_gustavson_over_cocotbext_uart():
    program = kernels.build("spmspm_gustavson", 5)
    inputs = kernels.random_inputs(program, density=0.4, seed=4)
    check(simulate_verilog(program, inputs), 1)
