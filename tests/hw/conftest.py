"""Shared fixtures of the RTL tests (Amaranth simulator, Verilator)."""

import os

import pytest


@pytest.fixture(params=[0.0, 0.4], ids=["nostall", "stall"])
def stalls(request):
    """Stall probability per token and port (0 = run_op's setting, cycles compared)."""
    return request.param


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    """The Verilator build cache of this test run: ``$FUSEFLOW_HW_CACHE`` if set, else one folder per run,
    shared by xdist's workers (builds are locked)."""
    root = os.environ.get("FUSEFLOW_HW_CACHE")
    if root:
        return root
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return str(base / "verilator-cache")
