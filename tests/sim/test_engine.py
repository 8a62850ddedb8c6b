"""Timing and backpressure of the engine on chains whose cycle counts are derived by hand, and deadlocks."""

import numpy as np
import pytest

from fuseflow.errors import DeadlockError, TensorError
from fuseflow.samml import Program
from fuseflow.sim import run


def chain(d, depth):
    """root -> dense scan (d) -> array -> value_write."""
    p = Program("chain", config={"fifo_depth": depth})
    p.tensor("v", "input", [d], ["dense"])
    p.tensor("o", "output", [d], ["dense"])
    k = p.kernel()
    r = k.add("root")
    s = k.add("level_scan", {"ref": r["ref"]}, tensor="v", level=0, format="dense")
    a = k.add("array", {"ref": s["ref"]}, tensor="v")
    k.add("value_write", {"val": a["val"]}, tensor="o")
    return p


@pytest.mark.parametrize("d", [1, 5, 20])
def test_depth2_chain_runs_at_one_token_per_cycle(d):
    # root: 0 @0; scan: coordinates @1..d, S0 @d+1, D @d+2; the array (a memory reader, latency 2) pushes two
    # cycles after each, the writer takes each one cycle after that
    res = run(chain(d, 2), {"v": np.arange(1.0, d + 1)})
    assert res.cycles == d + 6
    np.testing.assert_array_equal(res.outputs["o"], np.arange(1.0, d + 1))


@pytest.mark.parametrize("d", [1, 5, 20])
def test_depth1_fifos_halve_the_rate(d):
    # a slot freed at t refills at t+1, so each stream carries a token every other cycle: D leaves the
    # scanner at 2d+3, the array pushes it two cycles after taking it and the writer takes it at 2d+6
    res = run(chain(d, 1), {"v": np.arange(1.0, d + 1)})
    assert res.cycles == 2 * d + 7


def reconvergent(depth):
    """A fibre's values reach an alu directly and through a reduce: with small FIFOs the direct path fills up."""
    p = Program("reconvergent", config={"fifo_depth": depth})
    p.tensor("v", "input", [8], ["dense"])
    p.tensor("o", "output", [8], ["dense"])
    k = p.kernel()
    r = k.add("root")
    s = k.add("level_scan", {"ref": r["ref"]}, id="scan", tensor="v", level=0, format="dense")
    a1 = k.add("array", {"ref": s["ref"]}, id="direct", tensor="v")
    a2 = k.add("array", {"ref": s["ref"]}, id="viasum", tensor="v")
    red = k.add("reduce", {"val": a2["val"]}, id="sum")
    alu = k.add("alu", {"a": a1["val"], "b": red["val"]}, id="mul", op="mul")
    k.add("value_write", {"val": alu["out"]}, id="w", tensor="o")
    return p


def test_deadlock_is_reported_with_the_stuck_streams():
    with pytest.raises(DeadlockError) as info:
        run(reconvergent(2), {"v": np.ones(8)})
    msg = info.value.why
    assert "scan waits to write 'scan.ref'" in msg
    assert "full: scan.ref -> direct.ref" in msg
    assert "sum" in msg


def test_shape_mismatch_is_a_tensor_error():
    with pytest.raises(TensorError, match=r"shape \(3,\) but the program declares \(5,\)"):
        run(chain(5, 2), {"v": np.ones(3)})


def test_missing_input_is_a_tensor_error():
    with pytest.raises(TensorError, match="no data given"):
        run(chain(5, 2), {})


def test_fixed_value_out_of_range_is_rejected():
    with pytest.raises(TensorError):
        run(chain(2, 2), {"v": np.array([1.0, 1e9])}, mode="fixed")


def test_counters():
    res = run(chain(4, 2), {"v": np.arange(1.0, 5)})
    ks = res.stats["kernels"][0]
    assert ks["streams"] == {"root0.ref": 2, "level_scan0.ref": 6, "array0.val": 6}
    assert res.stats["mem_read_bytes"] == 4 * 8          # four float64 values
    assert res.stats["mem_write_bytes"] == 4 * 8
    assert ks["nodes"]["array0"]["busy"] == 6


def test_lower_bounds():
    res = run(chain(4, 2), {"v": np.arange(1.0, 5)})
    ks = res.stats["kernels"][0]
    assert ks["stream_bound"] == 6                       # 4 references, S0, D
    assert ks["op_bound"] == 6
    assert res.cycles >= max(ks["stream_bound"], ks["op_bound"])


def test_trace_records_every_push():
    # chain of depth 2 runs at one token per cycle: the scanner pushes at 1..d+2, the array (latency 2) two
    # cycles later
    res = run(chain(3, 2), {"v": np.arange(1.0, 4)}, trace=True)
    (t,) = res.trace
    assert t["root0.ref"] == [0, 1]
    assert t["level_scan0.ref"] == [1, 2, 3, 4, 5]
    assert t["array0.val"] == [3, 4, 5, 6, 7]
    (sent,) = res.trace_tokens
    assert sent["level_scan0.ref"] == [0, 1, 2, "S0", "D"]
    assert sent["array0.val"][:3] == [1.0, 2.0, 3.0]
    untraced = run(chain(3, 2), {"v": np.arange(1.0, 4)})
    assert untraced.trace is None and untraced.trace_tokens is None
