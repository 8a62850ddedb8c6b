"""intersect RTL vs run_op (arity 2 to 5, references or values on the ref ports)."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.errors import HardwareError

from fuseflow.hw.testing import check_op, hw_settings, st_joiner_case

A = {"crd0": [0, 2, 3, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
     "crd1": [2, 3, 4, "S0", "S1", "D"], "ref1": [20, 21, 22, "S0", "S1", "D"]}


def test_example(stalls):
    got, _, _ = check_op("intersect", {}, A, stalls=stalls, seed=4)
    assert got == {"crd": [2, 3, "S0", "S1", "D"], "ref0": [11, 12, "S0", "S1", "D"],
                   "ref1": [20, 21, "S0", "S1", "D"]}


def test_arity3_examples(stalls):
    inp = dict(A, crd2=[3, "S0", 1, "S1", "D"], ref2=[30, "S0", 31, "S1", "D"])
    check_op("intersect", {"arity": 3}, inp, stalls=stalls, seed=9)


@hw_settings(20)
@given(st_joiner_case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("intersect", *c, stalls=stalls, seed=seed)


@hw_settings(10)
@given(st_joiner_case(values=True), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_values(c, stalls, seed):
    check_op("intersect", *c, any_kind="val", stalls=stalls, seed=seed)


@pytest.mark.parametrize("arity", [4, 5])
@pytest.mark.parametrize("odd", [0, 1, -1])
@pytest.mark.parametrize("fifo_depth", [2, 3])
def test_wide_one_input_differs(arity, odd, fifo_depth):
    """All heads equal but one (the first, second or last input's): no match until it catches up; the output is the
    coordinates present in every input."""
    odd %= arity
    inp = {}
    for i in range(arity):
        crds = [2, 5] if i == odd else [1, 2, 4, 5]
        inp[f"crd{i}"], inp[f"ref{i}"] = crds + ["S0", "D"], list(range(len(crds))) + ["S0", "D"]
    got, _, _ = check_op("intersect", {"arity": arity}, inp, fifo_depth=fifo_depth, seed=arity)
    assert got["crd"] == [2, 5, "S0", "D"]


@hw_settings(25)
@given(st_joiner_case(arity=(4, 5), dim=(1, 4)), st.sampled_from([2, 3]), st.sampled_from([0.0, 0.4]),
       st.integers(0, 1 << 16))
def test_random_wide(c, fifo_depth, stalls, seed):
    """Arities 4 and 5, which compiled programs use: through depth-2 FIFOs (no look-ahead; from arity 5 all-equal
    is its own equality comparisons) and depth-3 ones (the general look-ahead form)."""
    check_op("intersect", *c, stalls=stalls, seed=seed, fifo_depth=fifo_depth)


@pytest.mark.slow
@hw_settings(400)
@given(st_joiner_case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("intersect", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(st_joiner_case(values=True, depth=(1, 3), dim=(1, 12)), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("intersect", *c, any_kind="val", stalls=stalls, seed=seed)


# --- look-ahead (docs/samml.md, intersect): the harness's unbounded sources and FIFOs of depth >= 3 ----------

LOOKAHEAD = [
    # (params, inputs, outputs, cycles): two-sided pops on data and on a stop (docs examples)
    ({}, {"crd0": [0, 2, 5, 6, "S0", "D"], "ref0": [0, 1, 2, 3, "S0", "D"],
          "crd1": [1, 4, 6, "S0", "D"], "ref1": [0, 1, 2, "S0", "D"]},
     {"crd": [6, "S0", "D"], "ref0": [3, "S0", "D"], "ref1": [2, "S0", "D"]}, 6),
    ({}, {"crd0": [0, "S0", 1, "S1", "D"], "ref0": [0, "S0", 1, "S1", "D"],
          "crd1": [1, "S0", 1, "S1", "D"], "ref1": [0, "S0", 1, "S1", "D"]},
     {"crd": ["S0", 1, "S1", "D"], "ref0": ["S0", 1, "S1", "D"], "ref1": ["S0", 1, "S1", "D"]}, 5),
    # two pops from one input (docs/samml.md): below the largest head, and beside a stop
    ({}, {"crd0": [0, 1, 2, 6, "S0", "D"], "ref0": [0, 1, 2, 3, "S0", "D"], "crd1": [3, 6, "S0", "D"],
          "ref1": [0, 1, "S0", "D"]},
     {"crd": [6, "S0", "D"], "ref0": [3, "S0", "D"], "ref1": [1, "S0", "D"]}, 5),
    ({}, {"crd0": [0, 2, 4, "S0", 1, 3, "S1", "D"], "ref0": [0, 1, 2, "S0", 3, 4, "S1", "D"],
          "crd1": ["S0", 3, "S1", "D"], "ref1": ["S0", 0, "S1", "D"]},
     {"crd": ["S0", 3, "S1", "D"], "ref0": ["S0", 4, "S1", "D"], "ref1": ["S0", 0, "S1", "D"]}, 7),
    # the third data above the largest head: the LOW input pops two and the other skips in the same firing
    ({}, {"crd0": [0, 1, 5, "S0", "D"], "ref0": [0, 1, 2, "S0", "D"], "crd1": [3, 5, "S0", "D"],
          "ref1": [0, 1, "S0", "D"]},
     {"crd": [5, "S0", "D"], "ref0": [2, "S0", "D"], "ref1": [1, "S0", "D"]}, 4),
    ({}, {"crd0": [3, 5, "S0", "D"], "ref0": [0, 1, "S0", "D"], "crd1": [0, 1, 5, "S0", "D"],
          "ref1": [0, 1, 2, "S0", "D"]},
     {"crd": [5, "S0", "D"], "ref0": [1, "S0", "D"], "ref1": [2, "S0", "D"]}, 4),
]


@pytest.mark.parametrize("case", range(len(LOOKAHEAD)))
def test_lookahead_examples(case, stalls):
    params, inputs, outputs, cycles = LOOKAHEAD[case]
    got, sim_cycles, rtl_cycles = check_op("intersect", params, inputs, stalls=stalls, seed=case)
    assert got == outputs
    if not stalls:
        assert sim_cycles == rtl_cycles == cycles


# Arity 3 has no look-ahead (the registry's input_depth_for): the former look-ahead examples, one pop per input
# per firing, so their cycles are the firings of a plain merge, counted by hand (heads -> who pops):
WIDE = [
    # 1,2,4 -> 0,1; 6,6,4 -> 2; 6 matches; S0; D
    ({"arity": 3}, {"crd0": [1, 6, "S0", "D"], "ref0": [0, 1, "S0", "D"], "crd1": [2, 6, "S0", "D"],
                    "ref1": [0, 1, "S0", "D"], "crd2": [4, 6, "S0", "D"], "ref2": [0, 1, "S0", "D"]},
     {"crd": [6, "S0", "D"], "ref0": [1, "S0", "D"], "ref1": [1, "S0", "D"], "ref2": [1, "S0", "D"]}, 5),
    # 0,3,3 -> 0; 1,3,3 -> 0; 5,3,3 -> 1,2; 5 matches; S0; D
    ({"arity": 3}, {"crd0": [0, 1, 5, "S0", "D"], "ref0": [0, 1, 2, "S0", "D"], "crd1": [3, 5, "S0", "D"],
                    "ref1": [0, 1, "S0", "D"], "crd2": [3, 5, "S0", "D"], "ref2": [0, 1, "S0", "D"]},
     {"crd": [5, "S0", "D"], "ref0": [2, "S0", "D"], "ref1": [1, "S0", "D"], "ref2": [1, "S0", "D"]}, 6),
    # 0,5,5 -> 0; 1,5,5 -> 0; S0,5,5 -> 1,2 (the data heads); S0; D
    ({"arity": 3}, {"crd0": [0, 1, "S0", "D"], "ref0": [0, 1, "S0", "D"], "crd1": [5, "S0", "D"],
                    "ref1": [0, "S0", "D"], "crd2": [5, "S0", "D"], "ref2": [0, "S0", "D"]},
     {"crd": ["S0", "D"], "ref0": ["S0", "D"], "ref1": ["S0", "D"], "ref2": ["S0", "D"]}, 5),
    # 0,5,5 -> 0; S0,5,5 -> 1,2; S0; D
    ({"arity": 3}, {"crd0": [0, "S0", "D"], "ref0": [0, "S0", "D"], "crd1": [5, "S0", "D"], "ref1": [0, "S0", "D"],
                    "crd2": [5, "S0", "D"], "ref2": [0, "S0", "D"]},
     {"crd": ["S0", "D"], "ref0": ["S0", "D"], "ref1": ["S0", "D"], "ref2": ["S0", "D"]}, 4),
    # 5,0,2 -> 1,2; 5,1,6 -> 0,1; S0,S0,6 -> 2; S0; D
    ({"arity": 3}, {"crd0": [5, "S0", "D"], "ref0": [0, "S0", "D"], "crd1": [0, 1, "S0", "D"],
                    "ref1": [0, 1, "S0", "D"], "crd2": [2, 6, "S0", "D"], "ref2": [0, 1, "S0", "D"]},
     {"crd": ["S0", "D"], "ref0": ["S0", "D"], "ref1": ["S0", "D"], "ref2": ["S0", "D"]}, 5),
    # 4,0,1 -> 1,2; 4,2,4 -> 1; 4,5,4 -> 0,2; 5 matches; S0; D
    ({"arity": 3}, {"crd0": [4, 5, "S0", "D"], "ref0": [0, 1, "S0", "D"], "crd1": [0, 2, 5, "S0", "D"],
                    "ref1": [0, 1, 2, "S0", "D"], "crd2": [1, 4, 5, "S0", "D"], "ref2": [0, 1, 2, "S0", "D"]},
     {"crd": [5, "S0", "D"], "ref0": [1, "S0", "D"], "ref1": [2, "S0", "D"], "ref2": [2, "S0", "D"]}, 6),
]


@pytest.mark.parametrize("case", range(len(WIDE)))
@pytest.mark.parametrize("fifo_depth", [None, 3])
def test_wide_pops_on_heads_alone(case, fifo_depth):
    """Arity 3 with unbounded sources (the hand-counted firings, RTL and simulator alike) or behind depth-3 FIFOs
    (which turn the look-ahead on at arity 2; the cycles then include the FIFOs' latency)."""
    params, inputs, outputs, cycles = WIDE[case]
    got, sim_cycles, rtl_cycles = check_op("intersect", params, inputs, fifo_depth=fifo_depth, seed=case)
    assert got == outputs
    if fifo_depth is None:
        assert sim_cycles == rtl_cycles == cycles


def test_lookahead_needs_channels_of_depth_3():
    from fuseflow.hw.testing import harness_lookahead, make_op
    assert [harness_lookahead("intersect", d) for d in (None, 1, 2, 3, 8)] == [True, False, False, True, True]
    assert not harness_lookahead("union", None)
    assert not harness_lookahead("intersect", None, {"arity": 3})       # arity 2 only (input_depth_for)
    assert not harness_lookahead("intersect", 3, {"arity": 4})
    on = make_op("intersect", {}, lookahead=True)
    off = make_op("intersect", {}, lookahead=False)
    on._MustUse__silence = off._MustUse__silence = True       # inspected, not elaborated
    assert on.peek_ports() == ["crd0", "crd1", "ref0", "ref1"]
    assert on.third_ports() == ["crd0", "crd1"] and on.pop2_ports() == on.peek_ports()
    assert {"i_crd1_next", "i_crd1_next_valid", "i_ref1_next_valid", "i_crd1_third", "i_crd1_third_valid",
            "pop2_crd1", "pop2_ref1"} <= set(on.signature.members)
    assert off.peek_ports() == off.third_ports() == off.pop2_ports() == []
    assert "i_crd0_next" not in off.signature.members and "pop2_crd0" not in off.signature.members


def test_lookahead_converts_to_verilog():
    from amaranth.back import verilog

    from fuseflow.hw.testing import make_op
    text = verilog.convert(make_op("intersect", {}, lookahead=True), name="ff_intersect_la")
    assert "i_crd1_next_valid" in text
    with pytest.raises(HardwareError, match="no look-ahead rule"):
        make_op("union", {}, lookahead=True)
    with pytest.raises(HardwareError, match="no look-ahead rule at"):
        make_op("intersect", {"arity": 3}, lookahead=True)


@pytest.mark.parametrize("depth", [2, 3])
def test_through_fifos_with_and_without_lookahead(depth, stalls):
    """FIFOs of depth 3 feed the look-ahead from their r_next; depth 2 turns it off: same tokens either way."""
    for params, inputs, outputs, _ in LOOKAHEAD + WIDE:
        got, _, _ = check_op("intersect", params, inputs, fifo_depth=depth, stalls=stalls, seed=depth)
        assert got == outputs


@hw_settings(20)
@given(st_joiner_case(dim=(4, 16)), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_sparse_fibres(c, stalls, seed):
    """Wider coordinate ranges: more inputs skip the other's head (two-sided pops)."""
    check_op("intersect", *c, stalls=stalls, seed=seed)


@hw_settings(10)
@given(st_joiner_case(dim=(4, 16)), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_through_depth3_fifos(c, stalls, seed):
    check_op("intersect", *c, stalls=stalls, seed=seed, fifo_depth=3)


# docs/samml.md, intersect: a LOW input whose second coordinate is below the largest head pops both; the token
# behind them decides the skip only once it is visible
SECOND_POPS = [
    ({}, {"crd0": [0, 1, 3, "S0", "D"], "ref0": [0, 1, 2, "S0", "D"], "crd1": [3, "S0", "D"],
          "ref1": [0, "S0", "D"]},
     {"crd": [3, "S0", "D"], "ref0": [2, "S0", "D"], "ref1": [0, "S0", "D"]}),
    ({}, {"crd0": [0, 1, 4, "S0", "D"], "ref0": [0, 1, 2, "S0", "D"], "crd1": [3, 4, "S0", "D"],
          "ref1": [0, 1, "S0", "D"]},
     {"crd": [4, "S0", "D"], "ref0": [2, "S0", "D"], "ref1": [1, "S0", "D"]}),
    ({}, {"crd0": [0, 1, 2, 5, "S0", "D"], "ref0": [0, 1, 2, 3, "S0", "D"], "crd1": ["S0", "D"],
          "ref1": ["S0", "D"]},
     {"crd": ["S0", "D"], "ref0": ["S0", "D"], "ref1": ["S0", "D"]}),
    ({"arity": 3}, {"crd0": [0, 1, 6, "S0", "D"], "ref0": [0, 1, 2, "S0", "D"], "crd1": [2, 6, "S0", "D"],
                    "ref1": [0, 1, "S0", "D"], "crd2": [6, "S0", "D"], "ref2": [0, "S0", "D"]},
     {"crd": [6, "S0", "D"], "ref0": [2, "S0", "D"], "ref1": [1, "S0", "D"], "ref2": [0, "S0", "D"]}),
]


@pytest.mark.parametrize("case", range(len(SECOND_POPS)))
@pytest.mark.parametrize("fifo_depth", [None, 3, 5])
def test_second_pops_with_late_tokens(case, fifo_depth):
    """Tokens arriving late (so that a third coordinate or a second reference is sometimes not yet visible when
    a LOW input pops two): the RTL against the simulator over many stall patterns, and NumPy's intersection."""
    params, inputs, outputs = SECOND_POPS[case]
    for seed in range(12):
        got, _, _ = check_op("intersect", params, inputs, stalls=0.6, seed=seed, fifo_depth=fifo_depth)
        assert got == outputs
