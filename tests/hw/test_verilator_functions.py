"""Compiled programs using every new function (sigmoid tanh gelu sqrt rsqrt log abs square) and min (reduce
and spacc) on Verilator: outputs bit-identical and kernel cycles equal to the fixed-mode simulator. Slow
(a Verilator build per program)."""


import pytest

from fuseflow.hw.elaborate import build, reference_run
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels

verilator = pytest.importorskip("fuseflow.hw.verilator")

PROGRAMS = {
    "fn_gelu_rmsnorm": """
        tensor A(8,8) : dcsr
        tensor W(8,6) : dense
        tensor c(6) : dense
        fuse {
          G(i,j) = gelu(A(i,k) * W(k,j) + c(j))
          m(i) = sum[j](square(G(i,j))) / 6
          Y(i,j) = G(i,j) * rsqrt(m(i) + 0.01)
        }
    """,
    "fn_rows_min": """
        tensor A(8,8) : dcsr
        tensor B(8,8) : dcsr
        fuse {
          s(i) = sum[j](abs(A(i,j)))
          N(i,j) = tanh(A(i,j)) / (s(i) + 1) + sigmoid(B(i,j))
        }
        y(i) = min[j](A(i,j) * B(i,j))
        z(j) = min[i](log(abs(A(i,j)) + 1))
        r(i) = sqrt(s(i)) - 1
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_functions_program_on_verilator(name, cache):
    try:
        verilator.ensure_verilator()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"verilator unavailable: {exc}")
    from fuseflow.compiler import compile_text
    p = compile_text(PROGRAMS[name], fuse="regions", name=name).program
    inputs = kernels.random_inputs(p, density=0.4, seed=0)
    ref = reference_run(p, inputs)
    b = build(p, inputs, reference=ref)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    res = verilator.run_verilator(bdir, b.name, b.manifest(), b.images, 20 * ref.cycles + 1000)
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(ref.kernel_cycles)
