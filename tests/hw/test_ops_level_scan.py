"""level_scan RTL vs run_op: the DESIGN examples, then random levels and reference streams."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_sorted_crds, st_tree, stream

# DCSR B 3x4 rows {0: [0, 2], 2: [1, 3]}
B_ROW = {"seg": [0, 2], "crd": [0, 2]}
B_COL = {"seg": [0, 2, 4], "crd": [0, 2, 1, 3]}
B_COL_CSR = {"seg": [0, 2, 2, 4], "crd": [0, 2, 1, 3]}


@pytest.mark.parametrize("params, ref, crd", [
    (B_ROW, [0, "D"], [0, 2, "S0", "D"]),
    (B_COL, [0, 1, "S0", "D"], [0, 2, "S0", 1, 3, "S1", "D"]),
    (B_COL_CSR, [0, 1, 2, "S0", "D"], [0, 2, "S0", "S0", 1, 3, "S1", "D"]),
    ({"format": "dense", "dim": 3}, [0, "D"], [0, 1, 2, "S0", "D"]),
    ({"format": "dense", "dim": 2}, [0, "N", 1, "S0", "S1", "D"], [0, 1, "S0", "S0", 0, 1, "S1", "S2", "D"]),
    (B_COL, ["S0", "D"], ["S1", "D"]),
    (B_COL, ["D"], ["D"]),
    (B_COL, ["N", "S0", "D"], ["S1", "D"]),
])
def test_examples(params, ref, crd, stalls):
    out, _, _ = check_op("level_scan", params, {"ref": ref}, stalls=stalls, seed=7)
    assert out["crd"] == crd


@st.composite
def compressed_case(draw):
    dim = draw(st.integers(0, 6))
    fibres = draw(st.lists(st_sorted_crds(dim), min_size=1, max_size=4))
    seg = [0]
    for f in fibres:
        seg.append(seg[-1] + len(f))
    crd = [c for f in fibres for c in f]
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st.integers(0, len(fibres) - 1), st.just("N"))
    tree = draw(st_tree(depth, leaf))
    # bounds_latency 2: seg and first read as from block RAM with its output register (a reference waits a cycle
    # after a pop or its push)
    bounds = draw(st.sampled_from([None, 2]))
    return {"seg": seg, "crd": crd, "bounds_latency": bounds}, {"ref": stream(tree, depth)}


@st.composite
def dense_case(draw):
    dim = draw(st.integers(0, 4))
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st.integers(0, 5), st.just("N"))
    tree = draw(st_tree(depth, leaf))
    return {"format": "dense", "dim": dim}, {"ref": stream(tree, depth)}


@hw_settings(20)
@given(st.one_of(compressed_case(), dense_case()), st.integers(0, 1 << 16))
def test_random_no_stalls(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs)


@hw_settings(20)
@given(st.one_of(compressed_case(), dense_case()), st.integers(0, 1 << 16))
def test_random_stalls(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs, stalls=0.4, seed=seed)


@hw_settings(10)
@given(compressed_case(), st.integers(0, 1 << 16))
def test_random_fifos(case, seed):
    params, inputs = case
    check_op("level_scan", params, inputs, stalls=0.3, seed=seed, fifo_depth=2)


@pytest.mark.slow
@hw_settings(400)
@given(st.one_of(compressed_case(), dense_case()), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("level_scan", *c, stalls=stalls, seed=seed)


@pytest.mark.parametrize("kind", ["mux", "mux_and"])
def test_late_mux_lut4_matches_its_expression(kind):
    """level_scan's late multiplexer (the first array's flag entering last): the ECP5 LUT4's INIT and pins, run
    through a model of the LUT4 (Z = INIT[{D, C, B, A}], Yosys' cells_sim), equal sel ? a : b (and sel ? a : b & d)
    for every input."""
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator

    from fuseflow.hw.ops.level_scan import MUX_AND_INIT, MUX_INIT, late_mux
    m = Module()
    sel, a, b, d = Signal(), Signal(), Signal(), Signal()
    init = MUX_INIT if kind == "mux" else MUX_AND_INIT
    model = late_mux(m, None, sel, a, b, "lut", init, d if kind == "mux_and" else None, model=True)
    plain = late_mux(m, None, sel, a, b, "plain", init, d if kind == "mux_and" else None)
    sim = Simulator(m)
    seen = []

    async def bench(ctx):
        for i in range(16):
            for sig, bit in zip((sel, a, b, d), range(4)):
                ctx.set(sig, i >> bit & 1)
            await ctx.delay(1e-9)
            s_, a_, b_, d_ = (i >> bit & 1 for bit in range(4))
            want = a_ if s_ else (b_ if kind == "mux" else b_ & d_)
            seen.append((ctx.get(model), ctx.get(plain), want))
    sim.add_testbench(bench)
    sim.run()
    assert len(seen) == 16 and all(x == y == w for x, y, w in seen)


@pytest.mark.parametrize("depth,bounds,late", [(64, None, False), (2048, None, True), (2048, 2, False)])
def test_late_mux_lut4_only_with_first_in_block_ram(depth, bounds, late):
    """The LUT4 instances of the late multiplexer are built for ECP5 only when the first array is block RAM (2048
    fibres pass BOUNDS_BLOCK_MIN_BITS; attach_read marks the port) read with latency 1, not with a LUT-RAM first
    array (64) nor with bounds_latency 2 (the flags then leave the blocks' output registers)."""
    from amaranth.back import rtlil

    from fuseflow.boards.synth import RegisteredIO, SynthTarget
    from fuseflow.hw.ops import MODULES
    op = MODULES["level_scan"]({"tensor": "T", "level": 0, "format": "compressed", "bounds_latency": bounds})
    text = rtlil.convert(RegisteredIO(op, depth), name="top", emit_src=False, platform=SynthTarget("ecp5"))
    assert ("cell \\LUT4 " in text) == late
    assert (op.memories["first"].in_block == {"first_b"}) == (depth == 2048)
