"""The fixed-point element-wise functions (fuseflow/tensors/fixedfn.py): tables, domain rules, accuracy
within the documented 1 LSB of float64 (golden values from the math module), and docs/numbers.md's
accuracy table equal to benchmarks/results/functions.json."""

import importlib.util
import json
import math
import pathlib

import numpy as np
import pytest

from fuseflow.tensors.fixed import FLOAT_UNARY_OPS, FixedFormat
from fuseflow.tensors.fixedfn import (FIXED_FUNCTIONS, FUNCTIONS, accuracy_inputs, gelu_table, input_range,
                                      log2_table, tanh_table)

ROOT = pathlib.Path(__file__).resolve().parents[2]
F32 = FixedFormat(32, 16)
F16 = FixedFormat(16, 8)

#: golden float64 definitions written independently of the code under test (math module)
GOLDEN = {
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)) if x > -700 else 0.0,
    "tanh": math.tanh,
    "gelu": lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))),
    "sqrt": math.sqrt,
    "rsqrt": lambda x: 1.0 / math.sqrt(x),
    "log": math.log,
    "abs": abs,
    "square": lambda x: x * x,
}


def test_tables_are_the_documented_tables():
    for fmt in (F32, F16):
        p = fmt.frac + 8
        k, t = tanh_table(fmt)
        assert k == min((fmt.frac + 1) // 2 + 2, 10) and len(t) == 2 ** k + 1
        assert t == tuple(round(math.tanh(8 * i / 2 ** k) * 2 ** p) for i in range(2 ** k + 1))
        k, g = gelu_table(fmt)
        assert g[0] == 0 and g == tuple(round(-u * 0.5 * math.erfc(u / math.sqrt(2)) * 2 ** p)
                                        for u in (8 * i / 2 ** k for i in range(2 ** k + 1)))
        k, lt = log2_table(fmt)
        assert lt[0] == 0 and lt[-1] == 2 ** p
    assert len(tanh_table(F32)[1]) == 1025 and len(tanh_table(F16)[1]) == 65


def test_domain_rules():
    for fmt in (F32, F16, FixedFormat(12, 2)):
        assert fmt.sqrt(0) == 0 and fmt.sqrt(-5) == 0 and fmt.sqrt(fmt.min_raw) == 0
        assert fmt.rsqrt(0) == fmt.max_raw and fmt.rsqrt(-1) == fmt.max_raw
        assert fmt.log(0) == fmt.min_raw and fmt.log(-7) == fmt.min_raw
        assert fmt.abs(fmt.min_raw) == fmt.max_raw
        assert fmt.square(fmt.max_raw) == fmt.max_raw and fmt.square(fmt.min_raw) == fmt.max_raw
        assert fmt.sigmoid(0) == fmt.one // 2
        assert fmt.tanh(0) == fmt.gelu(0) == fmt.sqrt(0) == fmt.square(0) == fmt.abs(0) == 0
        assert fmt.log(fmt.one) == 0 and fmt.sqrt(fmt.one) == fmt.one and fmt.rsqrt(fmt.one) == fmt.one
        assert fmt.tanh(fmt.max_raw) == fmt.one and fmt.tanh(fmt.min_raw) == -fmt.one
        assert fmt.sigmoid(fmt.max_raw) == fmt.one and fmt.sigmoid(fmt.min_raw) == 0
        assert fmt.gelu(fmt.max_raw) == fmt.max_raw and fmt.gelu(fmt.min_raw) == 0


def test_symmetry_and_monotonicity_16bit():
    xs = range(F16.min_raw + 1, F16.max_raw + 1)
    for x in xs:
        assert F16.tanh(-x) == -F16.tanh(x)
    for name in ("sigmoid", "tanh", "sqrt", "log"):
        ys = [FIXED_FUNCTIONS[name](F16, x) for x in range(F16.min_raw, F16.max_raw + 1)]
        assert all(a <= b for a, b in zip(ys, ys[1:])), name


@pytest.mark.parametrize("fmt, samples", [(F16, 70000), (F32, 20000)], ids=["fixed16.8", "fixed32.16"])
@pytest.mark.parametrize("name", FUNCTIONS)
def test_within_one_lsb_of_float64(name, fmt, samples):
    """Documented tolerance (docs/numbers.md): 1 LSB over the documented input range (16-bit: every input)."""
    raws = accuracy_inputs(name, fmt, samples, seed=3)
    lo, hi = input_range(name, fmt)
    if fmt is F16:
        assert len(raws) == hi - lo + 1
    worst = 0.0
    for r in raws.tolist():
        x = r / fmt.one
        err = abs(FIXED_FUNCTIONS[name](fmt, r) / fmt.one - GOLDEN[name](x))
        worst = max(worst, err)
    assert worst <= fmt.lsb, (name, worst / fmt.lsb)


def test_float_semantics_follow_the_math_module():
    for name in FUNCTIONS:
        for x in (-3.5, -0.25, 0.5, 1.0, 2.75, 40.0):
            if name in ("sqrt", "rsqrt", "log") and x <= 0:
                continue
            assert FLOAT_UNARY_OPS[name](x) == pytest.approx(GOLDEN[name](x), rel=1e-14, abs=1e-300), name
    assert math.isnan(FLOAT_UNARY_OPS["sqrt"](-1.0)) and math.isnan(FLOAT_UNARY_OPS["log"](-1.0))
    assert FLOAT_UNARY_OPS["log"](0.0) == -math.inf and FLOAT_UNARY_OPS["rsqrt"](0.0) == math.inf
    assert FLOAT_UNARY_OPS["sigmoid"](-1000.0) == 0.0 and FLOAT_UNARY_OPS["sigmoid"](1000.0) == 1.0


def _bench():
    spec = importlib.util.spec_from_file_location("function_accuracy", ROOT / "benchmarks" / "function_accuracy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_docs_table_is_the_benchmark_json():
    bench = _bench()
    doc = json.loads((ROOT / "benchmarks" / "results" / "functions.json").read_text())
    text = (ROOT / "docs" / "numbers.md").read_text()
    block = text.split(bench.BEGIN, 1)[1].split(bench.END, 1)[0]
    assert block.strip() == bench.markdown(doc["results"]).strip()
    assert {(r["function"], r["format"]) for r in doc["results"]} == \
        {(n, f) for n in FUNCTIONS for f in ("fixed32.16", "fixed16.8")}
    assert all(r["max_lsb"] <= 1.0 for r in doc["results"])


def test_benchmark_16bit_rows_reproduce():
    """The 16-bit rows are exhaustive, hence deterministic: recomputing them gives the JSON's numbers."""
    from fuseflow.tensors.fixedfn import accuracy
    doc = json.loads((ROOT / "benchmarks" / "results" / "functions.json").read_text())
    for r in doc["results"]:
        if r["format"] == "fixed16.8" and r["function"] in ("tanh", "log"):
            mx, mean = accuracy(r["function"], F16, accuracy_inputs(r["function"], F16))
            assert (mx, mean) == pytest.approx((r["max_abs"], r["mean_abs"]), rel=1e-12)
