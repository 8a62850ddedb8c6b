"""Shared fixtures of the RTL tests (Amaranth simulator, Verilator)."""

import os
import sys

import pytest

# the Verilator probe (tests/verilator_probe.py) is imported by name: tests/ is on sys.path (tests/conftest.py)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(params=[0.0, 0.4], ids=["nostall", "stall"])
def stalls(request):
    """Stall probability per token and port (0 = run_op's setting, cycles compared)."""
    return request.param


