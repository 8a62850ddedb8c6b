"""Fixtures shared by every test directory."""

import os
import sys

import pytest

# helpers shared by every test directory (verilator_probe) are imported by name
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


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
