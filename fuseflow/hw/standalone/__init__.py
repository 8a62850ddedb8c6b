"""Files that ``python -m fuseflow.hw build ... --testbench`` copies verbatim into a build directory.

``kernel_test.py`` (written as ``test_<module>.py``: the cocotb test) and ``run_tb.py`` (cocotb's Python runner)
must run with only cocotb and a simulator installed: they never import ``fuseflow``. See
:mod:`fuseflow.hw.testbench` and docs/hardware.md, "Taking a build into another flow".
"""
