# amaranth: UnusedElaboratable=no
"""spacc RTL vs run_op (fixed mode): orders 1, 2 and 3, group 1-3, sum, max and min, with stalls."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.errors import GraphError, HardwareError
from fuseflow.hw.ops.spacc import Spacc
from fuseflow.hw.testing import (check_op, hw_settings, run_hw_op, spacc_streams, st_sorted_crds, st_spacc_tree,
                                 st_tree, st_value, stream, tree_map)
from fuseflow.samml.registry import REDUCE_OPS


def test_order1_example(stalls):
    got, _, _ = check_op("spacc", {"dim": 8}, {"crd_inner": [3, 1, "S0", 1, 5, "S1", "D"],
                                               "val": [10, 20, "S0", 30, 40, "S1", "D"]}, stalls=stalls, seed=1)
    assert got == {"crd_inner": [1, 3, 5, "S0", "D"], "val": [50, 10, 40, "S0", "D"]}


def test_order1_min_example(stalls):
    got, _, _ = check_op("spacc", {"dim": 8, "op": "min"}, {"crd_inner": [3, 1, "S0", 1, 5, 3, "S1", "D"],
                                                            "val": [10, 20, "S0", 30, -40, -5, "S1", "D"]},
                         stalls=stalls, seed=7)
    assert got == {"crd_inner": [1, 3, 5, "S0", "D"], "val": [min(20, 30), min(10, -5), -40, "S0", "D"]}


def test_order2_min_example(stalls):
    # k fibres: {2: [3: 10, 1: 20], 0: [5: 30]} and {2: [3: -4], 1: [1: 7]} -> row 2, column 3 is min(10, -4)
    inputs = {"crd_outer0": [2, 0, "S0", 2, 1, "S1", "D"],
              "crd_inner": [3, 1, "S0", 5, "S1", 3, "S0", 1, "S2", "D"],
              "val": [10, 20, "S0", 30, "S1", -4, "S0", 7, "S2", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "dim": 8, "dim_outer": 4, "op": "min"}, inputs, stalls=stalls, seed=8)
    assert got == {"crd_outer0": [0, 1, 2, "S0", "D"], "crd_inner": [5, "S0", 1, "S0", 1, 3, "S1", "D"],
                   "val": [30, "S0", 7, "S0", 20, min(10, -4), "S1", "D"]}


def test_double_buffer_example(stalls):
    # three groups: the second is taken while the first leaves, the third waits for the first one's bank
    # (docs/samml.md: 11 cycles by the timing rule)
    got, sim_cycles, rtl_cycles = check_op("spacc", {"dim": 4}, {"crd_inner": [2, 0, "S1", 1, "S1", 3, "S2", "D"],
                                                                 "val": [10, 20, "S1", 30, "S1", 40, "S2", "D"]},
                                           stalls=stalls, seed=5)
    assert got == {"crd_inner": [0, 2, "S0", 1, "S0", 3, "S1", "D"], "val": [20, 10, "S0", 30, "S0", 40, "S1", "D"]}
    if not stalls:
        assert sim_cycles == rtl_cycles == 11


def test_order2_banks_alternate(stalls):
    # four groups of one (i, j) entry each and an empty one: every bank is used twice or more
    inputs = {"crd_outer0": [1, "S1", 0, "S1", "S1", 2, "S1", 1, "S2", "D"],
              "crd_inner": [3, "S2", 0, "S2", "S2", 1, "S2", 2, "S3", "D"],
              "val": [1, "S2", 2, "S2", "S2", 3, "S2", 4, "S3", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "dim": 4, "dim_outer": 3}, inputs, stalls=stalls, seed=6)
    assert got == {"crd_outer0": [1, "S0", 0, "S0", "S0", 2, "S0", 1, "S1", "D"],
                   "crd_inner": [3, "S1", 0, "S1", "S1", 1, "S1", 2, "S2", "D"],
                   "val": [1, "S1", 2, "S1", "S1", 3, "S1", 4, "S2", "D"]}


def test_order2_example(stalls):
    # k fibres: {2: [3, 1], 0: [5]} and {0: [], 1: [1]} -> rows 0: [5], 1: [1], 2: [1, 3]
    inputs = {"crd_outer0": [2, 0, "S0", 0, 1, "S1", "D"],
              "crd_inner": [3, 1, "S0", 5, "S1", "S0", 1, "S2", "D"],
              "val": [10, 20, "S0", 30, "S1", "S0", 7, "S2", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "dim": 8, "dim_outer": 4}, inputs, stalls=stalls, seed=2)
    assert got == {"crd_outer0": [0, 1, 2, "S0", "D"], "crd_inner": [5, "S0", 1, "S0", 1, 3, "S1", "D"],
                   "val": [30, "S0", 7, "S0", 20, 10, "S1", "D"]}


def test_overflow_flag():
    # coordinates beyond dim are not accumulated and raise the sticky overflow flag
    out, _ = run_hw_op("spacc", {"dim": 4}, {"crd_inner": [1, 6, "S1", "D"], "val": [1, 2, "S1", "D"]})
    assert out == {"crd_inner": [1, "S0", "D"], "val": [1, "S0", "D"]}


def test_order3_example(stalls):
    # k0: a=1 {2: {3: 10}}, a=0 {0: {1: 20}, 1: {0: 30, 2: 40}}; k1: a=1 {0: {1: 50}}
    inputs = {"crd_outer1": [1, 0, "S0", 1, "S1", "D"], "crd_outer0": [2, "S0", 0, 1, "S1", 0, "S2", "D"],
              "crd_inner": [3, "S1", 1, "S0", 0, 2, "S2", 1, "S3", "D"],
              "val": [10, "S1", 20, "S0", 30, 40, "S2", 50, "S3", "D"]}
    got, _, _ = check_op("spacc", {"order": 3, "dim": 4, "dim_outer": 3, "dim_outer1": 2}, inputs, stalls=stalls,
                         seed=3)
    assert got == {"crd_outer1": [0, 1, "S0", "D"], "crd_outer0": [0, 1, "S0", 0, 2, "S1", "D"],
                   "crd_inner": [1, "S0", 0, 2, "S1", 1, "S0", 3, "S2", "D"],
                   "val": [20, "S0", 30, 40, "S1", 50, "S0", 10, "S2", "D"]}


def test_transpose_group2(stalls):
    # a 2x3 matrix {(0,1): 1, (0,2): 2, (1,0): 3} as one-coordinate fibres, re-sorted by (col, row)
    inputs = {"crd_outer0": [1, "S0", 2, "S1", 0, "S2", "D"], "crd_inner": [0, "S1", 0, "S2", 1, "S3", "D"],
              "val": [1, "S1", 2, "S2", 3, "S3", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "group": 2, "dim": 2, "dim_outer": 3}, inputs, stalls=stalls, seed=4)
    assert got == {"crd_outer0": [0, 1, 2, "S0", "D"], "crd_inner": [1, "S0", 0, "S0", 0, "S1", "D"],
                   "val": [3, "S0", 1, "S0", 2, "S1", "D"]}


def test_order3_overflow_flag():
    # (a, b, j) = (0, 2, 0) is beyond dim_outer 2: dropped
    out, _ = run_hw_op("spacc", {"order": 3, "dim": 2, "dim_outer": 2, "dim_outer1": 1},
                       {"crd_outer1": [0, "S1", "D"], "crd_outer0": [1, 2, "S2", "D"],
                        "crd_inner": [1, "S0", 0, "S3", "D"], "val": [5, "S0", 6, "S3", "D"]})
    assert out == {"crd_outer1": [0, "S0", "D"], "crd_outer0": [1, "S1", "D"], "crd_inner": [1, "S2", "D"],
                   "val": [5, "S2", "D"]}


def test_params_are_checked():
    with pytest.raises(HardwareError, match="order 3 needs 'dim_outer1'"):
        Spacc({"order": 3, "dim": 4, "dim_outer": 4})
    with pytest.raises(HardwareError, match="needs 'dim'"):
        Spacc({"order": 1})
    with pytest.raises(GraphError, match="group must be an integer >= 1"):
        Spacc({"order": 2, "group": 0, "dim": 4, "dim_outer": 4})


def _crds(dim, sorted_):
    if sorted_:
        return st_sorted_crds(dim)
    return st.lists(st.integers(0, dim - 1), max_size=4)


@st.composite
def order1(draw):
    dim = draw(st.integers(1, 10))
    e = draw(st.integers(0, 1))
    srt = draw(st.booleans())
    val = st.one_of(st_value(), st.just("N"))
    jfib = _crds(dim, srt).flatmap(lambda js: st.lists(val, min_size=len(js), max_size=len(js)).map(
        lambda vs: list(zip(js, vs))))
    tree = draw(st_tree(e + 1, jfib))             # depth e+1 of j-fibres -> crd depth e+2
    d = e + 2
    crd = stream(tree_map(tree, e + 1, lambda f: [j for j, _ in f]), d)
    vals = stream(tree_map(tree, e + 1, lambda f: [v for _, v in f]), d)
    return {"dim": dim, "op": draw(st.sampled_from(REDUCE_OPS))}, {"crd_inner": crd, "val": vals}


@st.composite
def order2(draw):
    dim = draw(st.integers(1, 6))
    dout = draw(st.integers(1, 4))
    e = draw(st.integers(0, 1))
    srt = draw(st.booleans())
    val = st.one_of(st_value(), st.just("N"))
    jfib = _crds(dim, srt).flatmap(lambda js: st.lists(val, min_size=len(js), max_size=len(js)).map(
        lambda vs: list(zip(js, vs))))
    ifib = _crds(dout, True).flatmap(lambda is_: st.lists(jfib, min_size=len(is_), max_size=len(is_)).map(
        lambda fs: list(zip(is_, fs))))
    tree = draw(st_tree(e + 1, ifib))             # depth e+1 of i-fibres -> outer depth e+2
    d = e + 2
    outer = stream(tree_map(tree, e + 1, lambda f: [i for i, _ in f]), d)
    inner = stream(tree_map(tree, e + 1, lambda f: [[j for j, _ in jf] for _, jf in f]), d + 1)
    vals = stream(tree_map(tree, e + 1, lambda f: [[v for _, v in jf] for _, jf in f]), d + 1)
    return ({"order": 2, "dim": dim, "dim_outer": dout, "op": draw(st.sampled_from(REDUCE_OPS))},
            {"crd_outer0": outer, "crd_inner": inner, "val": vals})


DIMS = {1: (5,), 2: (3, 4), 3: (2, 3, 3)}


@st.composite
def grouped(draw, order, group, max_len=3):
    """Any order and group: unsorted, repeated coordinates at every sub-tree level."""
    dims = tuple(draw(st.integers(1, d)) for d in DIMS[order])
    val = st.one_of(st_value(), st.just("N"))
    tree, kept, g = draw(st_spacc_tree(order, dims, val, group=group, max_len=max_len))
    params = {"order": order, "group": g, "op": draw(st.sampled_from(REDUCE_OPS)), "dim": dims[-1]}
    if order >= 2:
        params["dim_outer"] = dims[-2]
    if order == 3:
        params["dim_outer1"] = dims[0]
    return params, spacc_streams(tree, kept + g, order)


@hw_settings(20)
@given(order1(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order1_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@hw_settings(20)
@given(order2(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order2_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@hw_settings(20)
@given(grouped(3, (1, 1)), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order3_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@hw_settings(20)
@given(st.sampled_from([1, 2, 3]).flatmap(lambda o: grouped(o, (2, 3), max_len=3 if o < 3 else 2)),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_group_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


def test_repeated_coordinate_reads_the_write_of_the_cycle_before(stalls):
    """crd 2 twice in a row: the second firing's synchronous read must see the first one's write."""
    got, _, _ = check_op("spacc", {"order": 1, "dim": 4}, {"crd_inner": [2, 2, 2, 1, "S1", "D"],
                                                           "val": [1, 2, 4, 8, "S1", "D"]}, stalls=stalls, seed=3)
    assert got == {"crd_inner": [1, 2, "S0", "D"], "val": [8, 7, "S0", "D"]}


@hw_settings(15)
@given(st.sampled_from([1, 2, 3]).flatmap(lambda o: grouped(o, (1, 2), max_len=3 if o < 3 else 2)),
       st.integers(0, 1 << 16))
def test_random_fifos(c, seed):
    """Behind FIFOs the accumulator's synchronous read is addressed from crd_inner's next head (r_after);
    repeated coordinates read back the write of the cycle before (a transparent port)."""
    check_op("spacc", *c, stalls=0.3, seed=seed, fifo_depth=2)


@pytest.mark.slow
@hw_settings(400)
@given(order1(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(order2(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(300)
@given(st.sampled_from([1, 2, 3]).flatmap(lambda o: st.sampled_from([(1, 1), (2, 3)]).flatmap(
    lambda g: grouped(o, g, max_len=3 if o < 3 else 2))), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_2(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


def _pattern_mismatches(m, bits, n, outputs, want):
    """Drive ``bits`` (n wide) with every one-bit pattern, none, all and 100 random patterns; returns
    ``[(pattern, got, want)]`` where the outputs (the first read as a bool) differ from ``want(pattern)``."""
    import random

    from amaranth.sim import Simulator
    rng = random.Random(n)
    values = [0, (1 << n) - 1] + [1 << i for i in range(n)] + [rng.getrandbits(n) for _ in range(100)]
    bad = []

    async def tb(ctx):
        for v in values:
            ctx.set(bits, v)
            got = (bool(ctx.get(outputs[0])), *[ctx.get(o) for o in outputs[1:]])
            if got != want(v):
                bad.append((v, got, want(v)))
    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    return bad


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 17, 64, 100])
def test_lowest_set_bit_onehot_and_payload(n):
    """spacc's find-first-set on the prefix tree: whether a bit is set, the one-hot mask of the lowest set bit
    and that bit's payload constant (0 for none), against Python's bit trick."""
    from amaranth.hdl import Module, Signal
    from fuseflow.hw.ops.spacc import _lowest
    m = Module()
    bits = Signal(n)
    payloads = [3 * i + 5 for i in range(n)]
    found, onehot, payload = _lowest(m, bits, n, payloads, "low")
    bad = _pattern_mismatches(m, bits, n, [found, onehot, payload],
                              lambda v: (v != 0, v & -v, payloads[(v & -v).bit_length() - 1] if v else 0))
    assert not bad, bad[:5]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 17, 64, 100])
def test_lowest_set_bit_value_payload(n):
    """spacc's find-first-set with a Value per bit (rest's lowest entry, a group's next lowest: chunk payloads
    chosen by the chunk ORs): whether a bit is set, the one-hot mask of the lowest set bit and its payload (0 for
    none), against Python's bit trick."""
    from amaranth.hdl import Const, Module, Signal
    from fuseflow.hw.ops.spacc import _lowest_value
    m = Module()
    bits = Signal(n)
    payloads = [(7 * i + 5) % 256 for i in range(n)]
    found, onehot, payload = _lowest_value(m, bits, n, [Const(p, 8) for p in payloads], "low")
    _, none, payload2 = _lowest_value(m, bits, n, [Const(p, 8) for p in payloads], "low2", onehot=False)
    assert none is None

    def want(v):
        low = payloads[(v & -v).bit_length() - 1] if v else 0
        return (v != 0, v & -v, low, low)
    bad = _pattern_mismatches(m, bits, n, [found, onehot, payload, payload2], want)
    assert not bad, bad[:5]


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("gap", [1, 2, 3, 4])
def test_beyond_capacity_aliasing_an_entry_is_dropped(gap, block, stalls):
    """Coordinates beyond the capacity whose low bits name an accumulated entry (dim + 2, 2 dim + 2: entry 2;
    the read address and the forwarding's compares see the coordinate cut to the capacity's bits), ``gap``
    firings after entry 2 and before its next firing: dropped, they neither change entry 2 nor appear. Also with
    the block-RAM accumulator."""
    dim = 16 if block else 4
    fill = [0, 1, 3][:gap - 1]
    crds = [2] + fill + [dim + 2] + fill + [2] + fill + [2 * dim + 2] + [2]
    vals = [5 * i + 1 for i in range(len(crds))]
    want = _merged([j for j in crds if j < dim], [v for j, v in zip(crds, vals) if j < dim], "sum")
    with pytest.MonkeyPatch.context() as mp:
        if block:
            mp.setattr(Spacc, "memory_impl", "dp16kd-model")
        got, _ = run_hw_op("spacc", {"dim": dim}, {"crd_inner": crds + ["S1", "D"], "val": vals + ["S1", "D"]},
                           stalls=stalls, seed=30 + gap)
    assert got == {"crd_inner": sorted(want) + ["S0", "D"], "val": [want[j] for j in sorted(want)] + ["S0", "D"]}


def test_order2_beyond_capacity_aliasing_an_entry_is_dropped(stalls):
    """Order 2, capacities 2 x 4 (one group): row 3 (cut to 1 bit: row 1) and column 5 (column 1) between
    firings of entry (1, 1) are dropped: (1, 1) = 10 + 30 + 50 (the simulator's result without them)."""
    inputs = {"crd_outer0": [1, 3, 1, "S0", 1, 3, "S1", "D"],
              "crd_inner": [1, "S0", 1, "S0", 1, "S1", 5, 1, "S0", 1, "S2", "D"],
              "val": [10, "S0", 20, "S0", 30, "S1", 40, 50, "S0", 60, "S2", "D"]}
    got, _ = run_hw_op("spacc", {"order": 2, "dim": 4, "dim_outer": 2}, inputs, stalls=stalls, seed=40)
    assert got == {"crd_outer0": [1, "S0", "D"], "crd_inner": [1, "S1", "D"], "val": [90, "S1", "D"]}


@pytest.mark.parametrize("w", [1, 2, 3, 4, 5, 8, 16])
def test_less_than_constant(w):
    """spacc's comparison with a constant as AND/OR logic (coordinate < capacity, stop level >= group): against
    Python's ``<`` for constants below, inside and beyond the width's range (every value up to 8 bits)."""
    import random
    from amaranth.hdl import Module, Signal
    from amaranth.sim import Simulator
    from fuseflow.hw.ops.spacc import _less_const
    rng = random.Random(w)
    ks = sorted({-1, 0, 1, 2, 3, 5, 7, 8, 9, 100, 255, 256, (1 << w) - 1, 1 << w, (1 << w) + 1}
                | {rng.randrange(1 << w) for _ in range(4)})
    m = Module()
    x = Signal(w)
    outs = [(k, _less_const(x, k)) for k in ks]
    values = range(1 << w) if w <= 8 else [0, 1, (1 << w) - 1] + [rng.getrandbits(w) for _ in range(300)] + \
        [k + d for k in ks for d in (-1, 0, 1) if 0 <= k + d < 1 << w]
    bad = []

    async def tb(ctx):
        for v in values:
            ctx.set(x, v)
            for k, o in outs:
                if ctx.get(o) != (v < k):
                    bad.append((v, k, ctx.get(o)))
    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    assert not bad, bad[:5]


# ---- the pipelined merge (hw/ops/spacc.py): a firing's merge and write follow one cycle later, so a repeated
# entry takes the merged value of a firing 1 or 2 cycles before from the pipeline registers (its read was
# addressed before those writes), and a bank's first emissions may follow its last writes directly

def _merged(crds, vals, op):
    """Python golden of one order-1 group: {j: the values of j merged with op, in arrival order}."""
    f = {"sum": lambda a, b: a + b, "max": max, "min": min}[op]
    out = {}
    for j, v in zip(crds, vals):
        out[j] = f(out[j], v) if j in out else v
    return out


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("gap", [1, 2, 3, 4])
def test_repeated_entry_gap(gap, op, stalls):
    """Entry 2 three times, ``gap`` firings apart (other entries between): with no stalls the repeats are
    exactly 1, 2, 3, 4 cycles apart (forwarded from the merge register, from the one before it, from the
    memory's read of an entry written at the edge that latched the read's address, from the memory)."""
    fill = [0, 1, 3][:gap - 1]
    crds = [2] + fill + [2] + fill + [2]
    vals = [(-1) ** i * (7 * i + 3) for i in range(len(crds))]
    want = _merged(crds, vals, op)
    got, sim_cycles, rtl_cycles = check_op("spacc", {"dim": 4, "op": op}, {"crd_inner": crds + ["S1", "D"],
                                                                          "val": vals + ["S1", "D"]},
                                           stalls=stalls, seed=10 + gap)
    assert got == {"crd_inner": sorted(want) + ["S0", "D"], "val": [want[j] for j in sorted(want)] + ["S0", "D"]}


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("gap", [1, 2, 3, 4, 5])
def test_repeated_entry_saturates(gap, block, stalls):
    """A sum that saturates, on an entry repeated ``gap`` firings apart (forwarded from the merge, from s2, s3,
    or read from the memory): the merge keeps a wrapped sum and an overflow flag, and every use (forwarding, the
    memory write, the emitted value) must see the saturated value: max + max, then - 1, is max - 1, not the
    wrapped -3; min + min, then + 1, is min + 1. Also with the block-RAM accumulator (two merges side by side)."""
    from fuseflow.tensors.fixed import FixedFormat
    fx = FixedFormat()
    lo, hi = fx.min_raw, fx.max_raw
    fill = [0, 1, 3, 5][:gap - 1]
    crds = [2] + fill + [2] + fill + [2] + fill + [6] + fill + [6] + fill + [6]
    per = [hi, hi, -1, lo, lo, 1]
    vals, it = [], iter(per)
    for j in crds:
        vals.append(next(it) if j in (2, 6) else 7)
    want = {}
    for j, v in zip(crds, vals):
        want[j] = max(lo, min(hi, want[j] + v)) if j in want else v
    assert want[2] == hi - 1 and want[6] == lo + 1
    dim = 16 if block else 8           # 2 x 16 x 32 bits: block RAM (the DP16KD model); 2 x 8 x 32: LUT RAM
    with pytest.MonkeyPatch.context() as mp:
        if block:
            mp.setattr(Spacc, "memory_impl", "dp16kd-model")
        got, _, _ = check_op("spacc", {"dim": dim}, {"crd_inner": crds + ["S1", "D"], "val": vals + ["S1", "D"]},
                             stalls=stalls, seed=20 + gap)
    assert got == {"crd_inner": sorted(want) + ["S0", "D"], "val": [want[j] for j in sorted(want)] + ["S0", "D"]}


@pytest.mark.parametrize("crds", [[1, 0, 1, 0], [3, 2, 0, 1, 0, 1], [0, 1, 2, 3, 3, 2], [3, 2, 1, 0, 2, 3, 3],
                                  [0, 3, 3, 3]])
def test_bank_closed_right_after_writes(crds, stalls):
    """The group's last firings write the entries emitted first (head, second) or the next ones (read from
    rest), and the bank is closed in the next cycle; the following group is taken at once."""
    vals = [5 * i - 9 for i in range(len(crds))]
    want = _merged(crds, vals, "sum")
    inputs = {"crd_inner": crds + ["S1", 1, 1, "S1", "D"], "val": vals + ["S1", 4, 6, "S1", "D"]}
    got, _, _ = check_op("spacc", {"dim": 4}, inputs, stalls=stalls, seed=len(crds))
    assert got == {"crd_inner": sorted(want) + ["S0", 1, "S0", "D"],
                   "val": [want[j] for j in sorted(want)] + ["S0", 10, "S0", "D"]}


def test_order2_bank_closed_right_after_writes(stalls):
    """Order 2: the last two firings merge into the first row's entries; the bank closes in the next cycle."""
    inputs = {"crd_outer0": [1, 0, 1, "S1", 0, "S1", "D"],
              "crd_inner": [2, 0, "S0", 1, "S0", 0, 2, "S2", 3, "S2", "D"],
              "val": [1, 2, "S0", 4, "S0", 8, 16, "S2", 32, "S2", "D"]}
    got, _, _ = check_op("spacc", {"order": 2, "dim": 4, "dim_outer": 2}, inputs, stalls=stalls, seed=4)
    assert got == {"crd_outer0": [0, 1, "S0", 0, "S0", "D"],
                   "crd_inner": [1, "S0", 0, 2, "S1", 3, "S1", "D"],
                   "val": [4, "S0", 2 + 8, 1 + 16, "S1", 32, "S1", "D"]}


def _colliding_model():
    """A DP16KD model whose read of an entry written at the same clock edge returns that entry inverted (the
    real block's read data is undefined there; the plain model gives the old entry, as the generic memory)."""
    from amaranth.hdl import Cat, Const, Module, Signal, Value
    from amaranth.lib.memory import Memory
    from fuseflow.hw import block_ram

    class Colliding(block_ram.DP16KDModel):
        def elaborate(self, platform):
            m = Module()

            def pin(name):
                v = self.pins[f"i_{name}"]
                return Const(v, 1) if isinstance(v, int) else Value.cast(v)[0]
            mem = m.submodules.array = Memory(shape=18, depth=block_ram.BLOCK_DEPTH,
                                              init=block_ram.initval_words(self.params))
            rp = mem.read_port(domain="sync")
            raddr = Cat(*[pin(f"ADA{i}") for i in range(4, 14)])
            waddr = Cat(*[pin(f"ADB{i}") for i in range(4, 14)])
            wen = pin("WEB") & pin("CEB") & pin("ADB0")
            m.d.comb += rp.addr.eq(raddr)
            hit = Signal()
            m.d.sync += hit.eq(wen & (waddr == raddr))
            data = Signal(18)
            m.d.comb += data.eq(rp.data ^ hit.replicate(18))
            if self.params["p_REGMODE_A"] == "OUTREG":
                reg = Signal(18)
                m.d.sync += reg.eq(data)
                data = reg
            for i in range(18):
                if f"o_DOA{i}" in self.pins:
                    m.d.comb += self.pins[f"o_DOA{i}"].eq(data[i])
            wp = mem.write_port()
            m.d.comb += [wp.addr.eq(waddr), wp.data.eq(Cat(*[pin(f"DIB{i}") for i in range(18)])), wp.en.eq(wen)]
            return m
    return Colliding


@st.composite
def block_order1(draw):
    """Order 1 with an accumulator of block RAM size (2 * dim * 32 >= 1024 bits), few distinct coordinates
    (repeats 1-4 firings apart), several groups."""
    dim = draw(st.integers(16, 20))
    js = st.integers(0, 3).map(lambda i: [0, 1, dim - 1, dim // 2][i])
    groups = draw(st.lists(st.lists(st.tuples(js, st.one_of(st_value(), st.just("N"))), max_size=8),
                           min_size=1, max_size=3))
    crd, val = [], []
    for g in groups:
        crd += [j for j, _ in g] + ["S1"]
        val += [v for _, v in g] + ["S1"]
    return {"dim": dim, "op": draw(st.sampled_from(REDUCE_OPS))}, {"crd_inner": crd + ["D"], "val": val + ["D"]}


@pytest.mark.parametrize("impl", ["dp16kd-model", "colliding"])
@hw_settings(15)
@given(c=block_order1(), stalls=st.sampled_from([0.0, 0.4]), seed=st.integers(0, 1 << 16))
def test_block_accumulator_models(impl, c, stalls, seed):
    """The accumulator as DP16KD blocks (the ECP5 wiring, output register) in the Amaranth simulator, and
    with a block whose colliding read returns wrong data: the results never depend on such a read."""
    from fuseflow.hw import block_ram
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Spacc, "memory_impl", "dp16kd-model")
        if impl == "colliding":
            mp.setattr(block_ram, "DP16KDModel", _colliding_model())
        check_op("spacc", *c, stalls=stalls, seed=seed)


def test_bank_reused_after_rest_was_emitted(stalls):
    """Bank 0 emits a group whose entries went through rest (3 .. 7), bank 1 one entry, then bank 0 again
    holds 0, 1, 2 and 4 in rest: rest's emitted bits (5 .. 7 of the same group as 4) must not come back."""
    groups = [[7, 6, 5, 4, 3, 2, 1, 0], [1], [4, 0, 1, 2], [9, 8, 3, 15, 12, 5, 0], [6]]
    crds, vals, want = [], [], []
    for i, g in enumerate(groups):
        gv = [11 * i + 3 * e - 20 for e in range(len(g))]
        crds += g + ["S1"]
        vals += gv + ["S1"]
        merged = _merged(g, gv, "sum")
        want.append(merged)
    got, _, _ = check_op("spacc", {"dim": 16}, {"crd_inner": crds[:-1] + ["S2", "D"], "val": vals[:-1] + ["S2", "D"]},
                         stalls=stalls, seed=21)
    exp_c, exp_v = [], []
    for merged in want:
        exp_c += sorted(merged) + ["S0"]
        exp_v += [merged[j] for j in sorted(merged)] + ["S0"]
    exp_c[-1] = exp_v[-1] = "S1"
    assert got == {"crd_inner": exp_c + ["D"], "val": exp_v + ["D"]}


@st.composite
def order1_long(draw, dims=(4, 20)):
    """Order 1, several groups of up to 12 entries (unsorted, repeated): rest holds several entries per group
    and the banks are reused. Large dims draw the coordinates from a few values, so they repeat."""
    dim = draw(st.integers(*dims))
    crd = st.integers(0, dim - 1)
    if dim > 20:
        crd = st.sampled_from(sorted(draw(st.sets(crd, min_size=1, max_size=6))))
    groups = draw(st.lists(st.lists(crd, max_size=12), min_size=2, max_size=5))
    crds, vals = [], []
    for g in groups:
        crds += g + ["S1"]
        vals += [draw(st_value()) for _ in g] + ["S1"]
    crds[-1] = vals[-1] = "S2"
    return {"dim": dim, "op": draw(st.sampled_from(REDUCE_OPS))}, {"crd_inner": crds + ["D"], "val": vals + ["D"]}


@hw_settings(20)
@given(order1_long(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order1_long_groups_random(c, stalls, seed):
    check_op("spacc", *c, stalls=stalls, seed=seed)


@hw_settings(10)
@given(order1_long(dims=(129, 200)), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order1_large_bitmap_random(c, stalls, seed):
    """More than 256 bitmap bits (both banks): the occupancy lookup in two steps (4 bits, then s1's address)."""
    check_op("spacc", *c, stalls=stalls, seed=seed)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("gap", [1, 2, 3, 4, 5])
def test_large_bitmap_repeated_entry_gap(gap, op, stalls):
    """As test_repeated_entry_gap with dim 150 (the two-step occupancy lookup), entries 133 and 131 between
    (max/min: the read's data registered in the fabric, the occupancy bits registered with read_addr's and the
    hits)."""
    fill = [133, 131, 7, 149][:gap - 1]
    crds = [132] + fill + [132] + fill + [132, 149, 0, 131]
    vals = [(-1) ** i * (7 * i + 3) for i in range(len(crds))]
    want = _merged(crds, vals, op)
    got, _, _ = check_op("spacc", {"dim": 150, "op": op}, {"crd_inner": crds + ["S1", 132, "S1", "D"],
                                                 "val": vals + ["S1", 5, "S1", "D"]}, stalls=stalls, seed=30 + gap)
    assert got == {"crd_inner": sorted(want) + ["S0", 132, "S0", "D"],
                   "val": [want[j] for j in sorted(want)] + ["S0", 5, "S0", "D"]}


# each group of rest (16 entries at dim 256, 8 at dim 64) holds its lowest entry (a register) and its other
# entries as bits; these patterns fill a group's bits and pop them one after another: entries arriving below the
# group's lowest (its old lowest goes to the bits), the lowest and a bit's entry arriving again (must not be
# emitted twice), runs of consecutive entries (the next lowest one above the last), gaps across groups
_REST_PATTERNS = {
    "descending": list(range(40, -1, -1)),
    "ascending_twice": list(range(0, 40)) + list(range(0, 40)),
    "repeats": [0, 1, 2, 9, 5, 12, 5, 9, 7, 12, 3, 4, 3, 13, 14, 15, 11, 8, 6, 10, 6, 31, 17, 16, 17, 30, 18],
    "sparse": [63, 3, 5, 62, 7, 48, 6, 4, 20, 21, 20, 0, 1, 2, 47, 33, 19, 18, 17, 16, 34, 32, 49, 50, 61],
}


@pytest.mark.parametrize("dim", [64, 256])
@pytest.mark.parametrize("pattern", sorted(_REST_PATTERNS))
def test_rest_groups_pop_in_order(pattern, dim, stalls):
    """The rest patterns (above) in one group, then the banks reused by a second group (rest emptied by the
    pops): sorted, each entry once, its values summed (Python golden)."""
    crds = [c % dim for c in _REST_PATTERNS[pattern]]
    second = [c for c in (9, 3, 2, 1, 0, 5, 4, 12, 11) if c < dim]
    vals = [(-1) ** i * (5 * i + 1) for i in range(len(crds))]
    vals2 = [7 * i - 11 for i in range(len(second))]
    got, _, _ = check_op("spacc", {"dim": dim}, {"crd_inner": crds + ["S1"] + second + ["S2", "D"],
                                                 "val": vals + ["S1"] + vals2 + ["S2", "D"]}, stalls=stalls, seed=dim)
    want, want2 = _merged(crds, vals, "sum"), _merged(second, vals2, "sum")
    assert got == {"crd_inner": sorted(want) + ["S0"] + sorted(want2) + ["S1", "D"],
                   "val": [want[j] for j in sorted(want)] + ["S0"] + [want2[j] for j in sorted(want2)] + ["S1", "D"]}


@hw_settings(15)
@given(st.sampled_from([(8, 8), (4, 16), (16, 16)]).flatmap(
           lambda dims: st.tuples(st.just(dims), st_spacc_tree(2, dims, st.one_of(st_value(), st.just("N")),
                                                               max_len=4),
                                  st.sampled_from(REDUCE_OPS))),
       st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_order2_bitmap_rows_random(c, stalls, seed):
    """Order 2 with 64 and more entries per bank (the occupancy bitmap in LUT RAM rows of 16 bits, cleared
    row by row as the bank emits): several groups, so the banks are reused; repeated entries."""
    dims, (tree, kept, g), op = c
    params = {"order": 2, "group": g, "op": op, "dim": dims[1], "dim_outer": dims[0]}
    check_op("spacc", params, spacc_streams(tree, kept + g, 2), stalls=stalls, seed=seed)


@pytest.mark.parametrize("op", REDUCE_OPS)
def test_order2_bitmap_rows_bank_reused(op, stalls):
    """Order 2, 8 x 8: the entries of a bank's earlier groups (rows 1 and 6) are not occupied when the bank
    accumulates again (its rows cleared while it emitted), nor entries of the other bank."""
    groups = [{1: [2, 3, 2], 6: [7]}, {1: [5, 3]}, {1: [3, 4, 3], 6: [0, 7]}, {6: [7, 7]}, {1: [2]}]
    outer, inner, val, v = [], [], [], 1
    for i, rows in enumerate(groups):
        for r, js in rows.items():
            outer.append(r)
            inner += js + ["S0"]
            val += [v + 3 * e for e in range(len(js))] + ["S0"]
            v += 5
        inner[-1] = val[-1] = "S2"
        outer.append("S1")
    check_op("spacc", {"order": 2, "dim": 8, "dim_outer": 8, "op": op},
             {"crd_outer0": outer + ["D"], "crd_inner": inner + ["D"], "val": val + ["D"]}, stalls=stalls, seed=9)


@st.composite
def _walker_groups(draw):
    """Order 2 groups that exercise the row walker: empty groups, rows of one entry, full rows (every j, in a
    random order), repeated entries; several groups back to back, so both banks are reused."""
    dout, dim = draw(st.sampled_from([(1, 1), (2, 3), (4, 4), (3, 5)]))
    groups = []
    for _ in range(draw(st.integers(1, 5))):
        rows = {}
        for r in draw(st.lists(st.integers(0, dout - 1), max_size=dout, unique=True)):
            kind = draw(st.sampled_from(["one", "full", "any"]))
            if kind == "one":
                js = [draw(st.integers(0, dim - 1))]
            elif kind == "full":
                js = draw(st.permutations(list(range(dim))))
            else:
                js = draw(st.lists(st.integers(0, dim - 1), min_size=1, max_size=2 * dim))
            rows[r] = js
        groups.append(rows)
    return dout, dim, groups


@hw_settings(25)
@given(_walker_groups(), st.sampled_from(REDUCE_OPS), st.sampled_from([0.0, 0.3, 0.7]), st.integers(0, 1 << 16))
def test_order2_walker_random(c, op, stalls, seed):
    """Orders 2's row walker against the simulator (tokens and cycles, check_op), random output stalls."""
    dout, dim, groups = c
    outer, inner, val, v = [], [], [], 1
    for rows in groups:
        if not rows:                   # an empty group: the bare stop of the kept level on every stream
            outer.append("S1")
            inner.append("S2")
            val.append("S2")
            continue
        for r, js in rows.items():
            outer.append(r)
            inner += js + ["S0"]
            val += [v + e for e in range(len(js))] + ["S0"]
            v += 3
        inner[-1] = val[-1] = "S2"
        outer.append("S1")
    check_op("spacc", {"order": 2, "dim": dim, "dim_outer": dout, "op": op},
             {"crd_outer0": outer + ["D"], "crd_inner": inner + ["D"], "val": val + ["D"]}, stalls=stalls,
             seed=seed)
