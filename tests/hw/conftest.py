"""Shared fixtures of the RTL tests (Amaranth simulator, Verilator)."""

import pytest


@pytest.fixture(params=[0.0, 0.4], ids=["nostall", "stall"])
def stalls(request):
    """Stall probability per token and port (0 = run_op's setting, cycles compared)."""
    return request.param


