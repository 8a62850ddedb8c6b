"""Profile-guided FIFO sizing: the sized graph computes the same outputs, never runs longer on the data it was
sized on, and shortens the kernels whose producers stall on full channels."""

import numpy as np

from fuseflow.samml import kernels
from fuseflow.sim import run
from fuseflow.sim.fifo_sizing import size_fifos


def _case(name, n=12, seed=1):
    # depth 2 everywhere (the builders' depths pass overridden): what the sizer starts from here
    p = kernels.build(name, n, passes={"fifo_depth": 2})
    return p, kernels.random_inputs(p, density=0.4, seed=seed)


def test_sized_graphs_compute_the_same_and_are_never_slower():
    gains = {}
    for name in ("sddmm", "spmspm_gustavson", "spmspm_outer", "residual"):
        p, inputs = _case(name)
        before = run(p, inputs, mode="fixed")
        sized, rep = size_fifos(p, inputs)
        after = run(sized, inputs, mode="fixed")
        assert rep["cycles_before"] == before.cycles and rep["cycles_after"] == after.cycles
        assert after.cycles <= before.cycles
        for t in before.outputs:
            np.testing.assert_array_equal(after.outputs[t], before.outputs[t])
        # only depths change, and only upwards, as reported
        k0, k1 = p.kernels[0], sized.kernels[0]
        assert set(k0.streams) == set(k1.streams)
        for sid, s in k1.streams.items():
            old = k0.streams[sid].depth or p.config["fifo_depth"]
            new = s.depth or sized.config["fifo_depth"]
            assert new >= old
            assert (new != old) == (sid in rep["depths"].get(k1.name, {}))
        gains[name] = 1 - after.cycles / before.cycles
    # at least one of these reconvergent kernels stalls on depth-2 channels today
    assert max(gains.values()) >= 0.01, gains


def test_max_depth_is_respected():
    p, inputs = _case("spmspm_gustavson")
    sized, rep = size_fifos(p, inputs, max_depth=4)
    # the sizer deepens nothing past 4 (the spacc's deadlock floors, dim + 2, were there before it ran)
    changed = rep["depths"].get("main", {})
    assert changed and all(d <= 4 for d in changed.values())
    for sid, s in sized.kernels[0].streams.items():
        if sid not in changed:
            assert s.depth == p.kernels[0].streams[sid].depth
    assert rep["cycles_after"] <= rep["cycles_before"]
