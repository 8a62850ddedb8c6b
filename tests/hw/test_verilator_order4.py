"""Order-4 programs on Verilator: batched attention scores and softmax (batch x heads x sequence x head
dimension; levels are generic, so the hardware needs nothing order-specific) and a permuted copy of an order-4
tensor (an order-3 spacc of group 3 per coordinate of the kept outer level); outputs bit-identical and kernel
cycles equal to the fixed-mode simulator. Slow (one Verilator build per program)."""

import pytest

from fuseflow.hw.elaborate import build, reference_run
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels

verilator = pytest.importorskip("fuseflow.hw.verilator")

PROGRAMS = {
    "attention4": ("""
        tensor Q(2, 2, 4, 3) : dense
        tensor K(2, 2, 4, 3) : cdcc
        S(b,h,i,j) = Q(b,h,i,d) * K(b,h,j,d)
        P(b,h,i,j) = softmax[j](S(b,h,i,j))
    """, "full"),
    "permuted4": ("""
        tensor A(3, 4, 2, 3) : cccc
        tensor B(2, 3, 4, 5) : dcdc
        C(a,e) = A(a,b,c,d) * B(c,d,b,e)
    """, "none"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_order4_program_on_verilator(name, cache):
    try:
        verilator.ensure_verilator()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"verilator unavailable: {exc}")
    from fuseflow.compiler import compile_text
    text, fuse = PROGRAMS[name]
    p = compile_text(text, fuse=fuse, name=name).program
    assert max(len(t.shape) for t in p.tensors.values()) == 4
    inputs = kernels.random_inputs(p, density=0.6, seed=0)
    ref = reference_run(p, inputs)
    b = build(p, inputs, reference=ref)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    res = verilator.run_verilator(bdir, b.name, b.manifest(), b.images, 20 * ref.cycles + 1000)
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(ref.kernel_cycles)
