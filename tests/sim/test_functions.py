"""The element-wise functions and the min reduction in the simulator (run_op), float and fixed mode:
float results equal float64 (math module golden values), fixed ones are within the documented 1 LSB."""

import math

import pytest

from fuseflow.sim import run_op
from fuseflow.tensors.fixed import FixedFormat

FMT = FixedFormat()

GOLDEN = {
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "tanh": math.tanh,
    "gelu": lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "log": math.log,
    "abs": abs,
    "square": lambda x: x * x,
}
POSITIVE = ("sqrt", "rsqrt", "log")


def _inputs(name):
    xs = [-6.5, -2.0, -0.75, -0.125, 0.0, 0.3, 1.0, 1.5, 3.25, 7.0, 12.0]
    return [x for x in xs if x > 0] + [0.02, 150.0] if name in POSITIVE else xs


@pytest.mark.parametrize("name", list(GOLDEN))
def test_function_float_and_fixed(name):
    xs = _inputs(name)
    stream = xs[:3] + ["S0"] + xs[3:] + ["S1", "D"]
    out = run_op("alu", {"op": name}, {"a": stream})["out"]
    vals = [v for v in out if not isinstance(v, str)]
    assert out[3] == "S0" and out[-2:] == ["S1", "D"]
    assert vals == pytest.approx([GOLDEN[name](x) for x in xs], rel=1e-13, abs=1e-300)
    raw = [FMT.encode(x) if not isinstance(x, str) else x for x in stream]
    fout = run_op("alu", {"op": name}, {"a": raw}, mode="fixed")["out"]
    fvals = [v for v in fout if not isinstance(v, str)]
    assert [v for v in fout if isinstance(v, str)] == ["S0", "S1", "D"]
    for r, got in zip([FMT.encode(x) for x in xs], fvals):
        assert abs(got / FMT.one - GOLDEN[name](r / FMT.one)) <= FMT.lsb, (name, r, got)


def test_domain_in_fixed_mode():
    raw = [0, -FMT.one, "S0", "D"]
    assert run_op("alu", {"op": "log"}, {"a": raw}, mode="fixed")["out"] == [FMT.min_raw, FMT.min_raw, "S0", "D"]
    assert run_op("alu", {"op": "rsqrt"}, {"a": raw}, mode="fixed")["out"] == [FMT.max_raw, FMT.max_raw, "S0", "D"]
    assert run_op("alu", {"op": "sqrt"}, {"a": raw}, mode="fixed")["out"] == [0, 0, "S0", "D"]


@pytest.mark.parametrize("mode", ["float", "fixed"])
def test_min_reduce_and_spacc(mode):
    enc = (lambda x: FMT.encode(x)) if mode == "fixed" else float
    vals = [enc(v) for v in (2.5, -1.0, 4.0, 0.5, -3.0)]
    out = run_op("reduce", {"op": "min"}, {"val": vals[:3] + ["S0"] + vals[3:] + ["S1", "D"]}, mode=mode)["val"]
    assert out == [min(vals[:3]), min(vals[3:]), "S0", "D"]
    out = run_op("spacc", {"op": "min"}, {"crd_inner": [4, 1, "S0", 1, 4, "S1", "D"],
                                          "val": vals[:2] + ["S0"] + vals[3:] + ["S1", "D"]}, mode=mode)
    assert out["crd_inner"] == [1, 4, "S0", "D"]
    assert out["val"] == [min(vals[1], vals[3]), min(vals[0], vals[4]), "S0", "D"]
