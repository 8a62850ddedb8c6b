"""Compiled example programs as Verilog on Verilator, through the correlation report's own runner
(:func:`fuseflow.reports.correlation.correlate_family`): outputs bit-identical to the fixed-mode reference
simulator and every kernel's RTL cycles equal to the simulator's.

The ML model examples (``fuseflow/programs/{graphsage2,autoencoder,decoder}.ff``) run on model-scale data
(:mod:`fuseflow.models`), the others on random data, exactly as the ``default`` and ``models`` correlation suites
define them (:func:`fuseflow.reports.suites.compiled`), so a test and ``python -m fuseflow.hw correlate --suite
models`` share their Verilator builds. The default run builds graphsage2 at ``none``; the ``models`` suite's other
entries, the other granularities and the multi-kernel programs run under ``-m slow``."""

import os

import pytest

from fuseflow.hw.ops import MODULES
from fuseflow.reports import suites
from fuseflow.reports.correlation import correlate_family

from verilator_probe import requires_verilator  # noqa: E402

pytestmark = requires_verilator

DEFAULT = {("graphsage2", "none")}
#: the ML model examples at every granularity (the decoder's full fusion is its regions graph, so both share
#: one Verilator build through the cache)
MODELS = [(m, f) for m in ("graphsage2", "autoencoder", "decoder") for f in suites.FUSIONS]
#: programs of several kernels (intermediates through memories) on random data
MULTI = [("elementwise", "none"), ("chain3", "none"), ("reductions", "full"), ("multiuse", "full"),
         ("masked_attention", "full")]
CASES = [pytest.param(m, f, marks=[] if (m, f) in DEFAULT else [pytest.mark.slow]) for m, f in MODELS + MULTI]


def check_entry(entry, cache):
    """Run one suite entry through the report's runner; fail with the record's problems."""
    missing = {n.op for k in entry.program.kernels for n in k.nodes.values()} - set(MODULES)
    if missing:
        pytest.skip(f"no RTL yet for {', '.join(sorted(missing))}")
    [rec] = correlate_family([entry], "verilator", cache, {"trace": False, "max_trace_cycles": 0})
    assert rec["status"] == "ok", rec["problems"]
    assert rec["done"] and rec["cycles_equal"], (rec["rtl_kernel_cycles"], rec["sim_kernel_cycles"])
    assert rec["rtl_kernel_cycles"] == rec["sim_kernel_cycles"] and len(rec["sim_kernel_cycles"]) == len(rec["kernels"])
    return rec


@pytest.mark.parametrize("name,fuse", CASES)
def test_compiled_program_on_verilator(name, fuse, cache):
    entry = suites.compiled(os.path.join(suites.examples_dir(), f"{name}.ff"), fuse)
    rec = check_entry(entry, cache)
    if (name, fuse) in MULTI:
        assert len(rec["kernels"]) > 1

