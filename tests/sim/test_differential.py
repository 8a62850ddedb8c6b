"""fuseflow.sim.differential: the comparison itself finds every kind of difference between two results (on results
of the Python engine altered by hand, so these run whether or not the compiled engine is built)."""

import copy

import numpy as np
import pytest

from fuseflow.errors import DeadlockError, StreamError
from fuseflow.samml import kernels
from fuseflow.sim import compiled, run
from fuseflow.sim import differential
from fuseflow.sim.differential import Unsupported, _compare_errors, compare_results


@pytest.fixture(scope="module")
def result():
    p = kernels.build("spmv_csr", 8)
    return run(p, kernels.random_inputs(p, density=0.5, seed=1), engine="python", trace=True)


def _altered(res, change):
    other = copy.deepcopy(res)
    change(other)
    return compare_results(res, other)


def test_a_result_matches_itself(result):
    assert compare_results(result, copy.deepcopy(result)) == []


def _flip_output_sign_of_zero(r):
    x = r.outputs["x"]
    x[x == 0] = -0.0


def _other_nan(r):
    r.outputs["x"][0] = np.nan
    r.tensors["x"].vals[0] = np.nan


def _blocked_idle(r):
    node = next(iter(r.stats["kernels"][0]["nodes"].values()))
    node["blocked"] += 1
    node["idle"] -= 1


CHANGES = {
    "outputs['x']": _flip_output_sign_of_zero,
    "outputs['x']: shape": lambda r: r.outputs.__setitem__("x", r.outputs["x"][:-1]),
    "outputs: names": lambda r: r.outputs.__setitem__("y", r.outputs["x"]),
    "cycles": lambda r: setattr(r, "cycles", r.cycles + 1),
    "kernel_cycles": lambda r: r.kernel_cycles.__setitem__(0, r.kernel_cycles[0] + 1),
    "stats['tokens']": lambda r: r.stats.__setitem__("tokens", r.stats["tokens"] + 1),
    "stats['alu_ops']": lambda r: r.stats.__setitem__("alu_ops", r.stats["alu_ops"] - 1),
    "stats['mem_read_bytes']": lambda r: r.stats.__setitem__("mem_read_bytes", 0),
    "stats['mem_write_bytes']": lambda r: r.stats.__setitem__("mem_write_bytes", 0),
    "['streams']": lambda r: r.stats["kernels"][0]["streams"].__setitem__(
        next(iter(r.stats["kernels"][0]["streams"])), -1),
    "['blocked']": _blocked_idle,
    "['stream_bound']": lambda r: r.stats["kernels"][0].__setitem__("stream_bound", 0),
    "['op_bound']": lambda r: r.stats["kernels"][0].__setitem__("op_bound", 0),
    "tensors['x'].levels[0].crd": lambda r: r.tensors["x"].levels[0].crd.__setitem__(0, 7),
    "tensors['x'].vals": lambda r: r.tensors["x"].vals.__setitem__(0, np.nextafter(r.tensors["x"].vals[0], 9)),
    "outputs['x']: 1 of": _other_nan,
    "trace[0]": lambda r: r.trace[0].__setitem__(next(iter(r.trace[0])), []),
    "trace_tokens[0]": lambda r: r.trace_tokens[0][next(iter(r.trace_tokens[0]))].__setitem__(0, 99),
}


@pytest.mark.parametrize("what", list(CHANGES))
def test_every_difference_is_found(result, what):
    found = _altered(result, CHANGES[what])
    assert found and any(what in line for line in found), found


def test_nan_payloads_and_signed_zeros_are_told_apart(result):
    a, b = copy.deepcopy(result), copy.deepcopy(result)
    a.outputs["x"][0] = np.nan
    b.outputs["x"][0] = -np.nan
    found = compare_results(a, b)
    assert any("0x7ff8000000000000" in line and "0xfff8000000000000" in line for line in found), found
    a.outputs["x"][0], b.outputs["x"][0] = 0.0, -0.0
    found = compare_results(a, b)
    assert found and "0x8000000000000000" in found[0]
    a.outputs["x"][0] = b.outputs["x"][0] = np.nan
    assert compare_results(a, b) == []


def test_an_int_token_is_not_a_float_token(result):
    a, b = copy.deepcopy(result), copy.deepcopy(result)
    sid = next(s for s, toks in a.trace_tokens[0].items() if any(isinstance(t, int) for t in toks))
    k = next(i for i, t in enumerate(a.trace_tokens[0][sid]) if isinstance(t, int))
    b.trace_tokens[0][sid][k] = float(a.trace_tokens[0][sid][k])
    assert compare_results(a, b)


def test_errors():
    d1, d2 = DeadlockError("no op can fire: a"), DeadlockError("no op can fire: a")
    assert _compare_errors(d1, d2) == []
    assert _compare_errors(d1, DeadlockError("no op can fire: b"))
    assert _compare_errors(d1, StreamError("no op can fire: a"))
    assert "compiled ran" in _compare_errors(d1, None)[0]
    assert "python ran" in _compare_errors(None, d1)[0]


def test_unsupported_programs_are_not_run(monkeypatch):
    from fuseflow.reports.suites import blocked
    e = blocked("bspmv", 2)
    monkeypatch.setattr(compiled, "BLOCKS_UNCHECKED", frozenset({"array"}))    # as if blocked arrays were not
    assert compiled.unsupported(e.program)
    with pytest.raises(Unsupported) as info:
        differential.compare(e.program, e.inputs)
    assert info.value.why == compiled.unsupported(e.program)


def test_engine_is_not_an_argument():
    p = kernels.build("vector_add", 4)
    with pytest.raises(TypeError):
        differential.compare(p, kernels.random_inputs(p, seed=0), engine="python")
