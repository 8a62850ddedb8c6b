"""root RTL vs run_op."""

from fuseflow.hw.testing import check_op, run_hw_op


def test_root(stalls):
    out, sim_cycles, hw_cycles = check_op("root", {}, {}, stalls=stalls, seed=1)
    assert out == {"ref": [0, "D"]}
    if not stalls:
        assert sim_cycles == hw_cycles == 2


def test_root_through_fifos():
    out, _ = run_hw_op("root", {}, {}, fifo_depth=2, stalls=0.5, seed=4)
    assert out == {"ref": [0, "D"]}
