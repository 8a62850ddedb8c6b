"""Whole programs through the simulated board: kernel top + UART bridge in Amaranth's simulator, a bit-level
UART on the host side, the host client loading tensors by the manifest, starting, polling and reading back.
Results must be bit-identical to the fixed-mode reference simulator and the cycle counter equal to its cycles."""

import numpy as np

from fuseflow.boards.simboard import simulate
from fuseflow.samml import kernels


def check(summary, n_kernels=None):
    assert summary["ok"], summary["mismatches"]
    assert summary["mismatches"] == []
    assert summary["rtl_cycles"] == summary["sim_cycles"]
    assert summary["rtl_kernel_cycles"] == summary["sim_kernel_cycles"]
    assert summary["framing_errors"] == 0
    if n_kernels is not None:
        assert len(summary["rtl_kernel_cycles"]) == n_kernels


def test_spmv_csr_round_trip():
    program = kernels.build("spmv_csr", 6)
    inputs = kernels.random_inputs(program, density=0.4, seed=1)
    s = simulate(program, inputs)
    check(s, 1)
    # the values really came back through the UART: compare with NumPy too
    x = s["result"]["tensors"]["x"]
    dense = np.zeros(6)
    seg, crd = x["levels"][0]["seg"], x["levels"][0]["crd"]
    for i, v in zip(crd[:seg[1]], x["vals"]):
        dense[i] = v / 2 ** 16
    want = inputs["B"] @ inputs["c"]
    assert np.allclose(dense, want, atol=1e-3)


FUSED = """program chain
tensor A(4, 4) : dcsr
tensor B(4, 4) : dcsr
tensor C(4, 4) : dcsr
fuse {
  E(i,j) = A(i,k) * B(k,j)
  D(i,l) = E(i,j) * C(j,l)
}
"""


def test_compiled_fused_program_round_trip():
    from fuseflow.compiler import compile_text
    result = compile_text(FUSED, fuse="regions")
    program = result.program
    assert [k.name for k in program.kernels] == ["D"]          # both statements fused into one kernel
    inputs = kernels.random_inputs(program, density=0.4, seed=3)
    s = simulate(program, inputs)
    check(s, 1)
    assert s["result"]["tensors"]["D"]["vals"]                  # a non-empty result
