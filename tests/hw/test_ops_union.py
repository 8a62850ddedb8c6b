"""union RTL vs run_op (arity 2 and 3, references or values on the ref ports)."""

import pytest
from hypothesis import given, strategies as st

from fuseflow.hw.testing import check_op, hw_settings, st_joiner_case

A = {"crd0": [0, 2, 3, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
     "crd1": [2, 3, 4, "S0", "S1", "D"], "ref1": [20, 21, 22, "S0", "S1", "D"]}


def test_example(stalls):
    got, _, _ = check_op("union", {}, A, stalls=stalls, seed=4)
    assert got == {"crd": [0, 2, 3, 4, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "N", "S0", 13, "S1", "D"],
                   "ref1": ["N", 20, 21, 22, "S0", "N", "S1", "D"]}


def test_arity3_examples(stalls):
    inp = dict(A, crd2=[3, "S0", 1, "S1", "D"], ref2=[30, "S0", 31, "S1", "D"])
    check_op("union", {"arity": 3}, inp, stalls=stalls, seed=9)


@hw_settings(20)
@given(st_joiner_case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random(c, stalls, seed):
    check_op("union", *c, stalls=stalls, seed=seed)


@hw_settings(10)
@given(st_joiner_case(values=True), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_random_values(c, stalls, seed):
    check_op("union", *c, any_kind="val", stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(st_joiner_case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("union", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(st_joiner_case(values=True, depth=(1, 3), dim=(1, 12)), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_1(c, stalls, seed):
    check_op("union", *c, any_kind="val", stalls=stalls, seed=seed)
