"""A standalone cocotb testbench beside a build's Verilog (``python -m fuseflow.hw build ... --testbench``).

Writes into the build directory, next to ``<module>.v`` and the manifest:

- ``vectors.json``: the test vectors in plain JSON: every input memory image (host ``sel``, raw words), the
  expected raw words of every memory the program writes, and the expected kernel cycles, all from the
  fixed-mode reference simulator; plus the register indices the bench reads and a watchdog;
- ``test_<module>.py``: the cocotb test (a verbatim copy of :mod:`fuseflow.hw.standalone.kernel_test`);
- ``run_tb.py``: cocotb's Python runner for Verilator or Icarus (:mod:`fuseflow.hw.standalone.run_tb`).

With ``--interface axi`` the top is the AXI4-Lite wrapper (:mod:`fuseflow.hw.axi`) and the test is
:mod:`fuseflow.hw.standalone.axi_test` (cocotb and cocotbext-axi), which with ``--interface axis`` (AXI4-Lite control,
AXI4-Stream data) loads and reads the memories through the AXI4-Stream ports.

Neither Python file imports ``fuseflow``: ``python run_tb.py`` in that directory needs cocotb and a simulator only.
The vectors come from the data given with ``--inputs``; without it, a graph that declares every tensor's capacity
gets seeded random inputs (:func:`testbench_inputs`), and one that does not is an error.
"""

import json
import re
from pathlib import Path

import numpy as np

from ..errors import HardwareError
from ..tensors.random_data import random_sparse
from .verilator import CLOCK_PERIOD_NS

VECTORS_VERSION = 2                     # 2: host.read_latency
STANDALONE = Path(__file__).resolve().parent / "standalone"
#: density of the random inputs of a graph without data (a tensor's declared density wins)
RANDOM_DENSITY = 0.3


def testbench_inputs(program, inputs, seed: int = 0) -> dict:
    """The data of the test vectors: ``inputs`` when given; else seeded random data for a graph that declares
    every tensor's capacity (so the Verilog is the one a build without data makes); else HardwareError."""
    if inputs is not None:
        return inputs
    missing = [t.name for t in program.tensors.values() if t.capacity is None]
    if missing:
        raise HardwareError("--testbench", f"needs data for its test vectors: give --inputs (the graph declares "
                                           f"no capacity for {', '.join(missing)}, so random data cannot be sized)")
    rng = np.random.default_rng(seed)
    out = {}
    for t in program.inputs:
        dense = all(lv == "dense" for lv in t.levels)
        out[t.name] = random_sparse(rng, tuple(t.shape), 1.0 if dense else (t.density or RANDOM_DENSITY))
    return out


def testbench_vectors(b) -> dict:
    """The JSON-able test vectors of a :class:`~fuseflow.hw.elaborate.Build` made with data (its reference run)."""
    from .elaborate import check_outputs_fit
    from .memory import tensor_images
    ref = b.reference
    if ref is None:
        raise HardwareError("--testbench", "the build has no reference run (build it with data)")
    check_outputs_fit(b.plan, ref)
    man = b.manifest()
    host = man["host"]
    sel = {m["name"]: m["sel"] for m in host["memories"]}
    inputs = [{"memory": name, "sel": sel[name], "words": [int(w) for w in words]}
              for name, words in b.images.items()]
    expected = []
    for name in sorted(ref.tensors):
        if b.program.tensors[name].role == "input":
            continue
        for mem, words in tensor_images(b.plan, name, ref.tensors[name]).items():
            expected.append({"memory": mem, "tensor": name, "sel": sel[mem],
                             "words": [int(w) & ((1 << b.plan.by_name[mem].width) - 1) for w in words]})
    return {
        "fuseflow_testbench": VECTORS_VERSION,
        "name": b.program.name,
        "module": b.name,
        "clock_period_ns": CLOCK_PERIOD_NS,
        "max_cycles": 4 * int(ref.cycles) + 10_000,
        "host": {"reg_sel": host["reg_sel"], "read_latency": host["read_latency"], "registers": {r["name"]: r["index"] for r in host["registers"]
                                                           if not r["name"].startswith("probe.")}},
        "inputs": inputs,
        "expected": {"cycles": int(ref.cycles),
                     "kernel_cycles": {k.name: int(c) for k, c in zip(b.program.kernels, ref.kernel_cycles)},
                     "memories": expected},
    }


_NUMBER_LIST = re.compile(r"\[\s*(-?\d+(?:,\s*-?\d+)*)\s*\]")


def vectors_json(vec: dict) -> str:
    """``vec`` as indented JSON with each list of words on one line (readable, and a tenth of the size)."""
    text = json.dumps(vec, indent=1)
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(m.group(1).replace(",", " ").split()) + "]", text) + "\n"


def testbench_files(b, axi_manifest: dict | None = None) -> dict:
    """``{file name: text}`` of the testbench of build ``b`` (the Verilog and manifest are written by the caller).

    ``axi_manifest``: the manifest of the AXI4-Lite wrapper (:func:`fuseflow.hw.axi.axi_build`): the bench then
    drives that top with cocotbext-axi's master (:mod:`fuseflow.hw.standalone.axi_test`)."""
    vec = testbench_vectors(b)
    bench = "kernel_test.py"
    if axi_manifest is not None:
        vec["module"] = axi_manifest["module"]
        vec["axi"] = axi_manifest["axi"]
        bench = "axi_test.py"           # with the map's "streams" (--interface axis) it uses the AXI4-Stream ports
    return {
        "vectors.json": vectors_json(vec),
        f"test_{vec['module']}.py": (STANDALONE / bench).read_text(),
        "run_tb.py": (STANDALONE / "run_tb.py").read_text(),
    }


__all__ = ["testbench_inputs", "testbench_vectors", "testbench_files"]
