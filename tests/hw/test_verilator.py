"""Whole kernels as Verilog under cocotb + Verilator: outputs bit-identical to the fixed-mode reference simulator,
RTL cycles equal to the simulator's, runs that go free until ``done`` (no per-cycle Python).

Verilator compiles are slow, so each kernel is built once per session (capacities declared to fit every data set
of the test) and every data set runs through the host port of that one build. The default set is small; the rest
of the suite is marked slow (``make slow``).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run
from fuseflow.hw.ops import MODULES
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels

from verilator_probe import requires_verilator, verilator  # noqa: E402

pytestmark = requires_verilator

DEFAULT = ["vector_add", "spmv_csr", "spmspm_gustavson"]
SLOW = ["vector_mul", "spmv_dcsr", "elementwise_add", "elementwise_mul", "residual", "sddmm", "ttv",
        "spmspm_inner", "spmspm_outer"]
SEEDS = (1, 2, 3)
DENSITIES = (0.5, 0.2, 0.9)


def need_ops(program):
    missing = {n.op for k in program.kernels for n in k.nodes.values()} - set(MODULES)
    if missing:
        pytest.skip(f"no RTL yet for {', '.join(sorted(missing))}")


def datasets(program):
    return [kernels.random_inputs(program, density=d, seed=s) for s, d in zip(SEEDS, DENSITIES)]


def declare_capacities(program, refs, inputs_list):
    """Declare per-tensor capacities that hold every data set (so one build serves them all)."""
    from fuseflow.hw.elaborate import packed_inputs
    caps = {}
    for ref, inputs in zip(refs, inputs_list):
        found = {n: p.capacities() for n, p in packed_inputs(program, inputs).items()}
        found.update({n: p.capacities() for n, p in ref.tensors.items()})
        for n, c in found.items():
            caps[n] = [max(a, b) for a, b in zip(caps.get(n, c), c)]
    for n, t in program.tensors.items():
        t.capacity = [max(1, c) for c in caps[n]]


_builds = {}


def kernel_build(name, cache, lookahead=False):
    """(build, build dir, [(inputs, reference)]) for suite kernel ``name``, built once per session. With
    ``lookahead`` the streams into every intersect get depth 3 (its look-ahead is on)."""
    if (name, lookahead) not in _builds:
        p = kernels.build(name)
        if lookahead:
            for k in p.kernels:
                for nid, node in k.nodes.items():
                    if node.op == "intersect":
                        for pname, _ in node.spec.input_ports(node.params):
                            k.driver(nid, pname).depth = 3
        need_ops(p)
        data = datasets(p)
        refs = [reference_run(p, d) for d in data]
        declare_capacities(p, refs, data)
        b = build(p)
        bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
        _builds[name, lookahead] = (b, bdir, list(zip(data, refs)))
    return _builds[name, lookahead]


def run_kernel(name, cache, lookahead=False):
    b, bdir, cases = kernel_build(name, cache, lookahead)
    man = b.manifest()
    for inputs, ref in cases:
        images = check_inputs_fit(b, inputs)
        res = verilator.run_verilator(bdir, b.name, man, images, 20 * ref.cycles + 1000)
        assert res["done"], res
        assert compare_tensors(ref.tensors, res["tensors"]) == []
        assert [res["kernel_cycles"][k.name] for k in b.program.kernels] == list(ref.kernel_cycles)
        assert res["overflow"] == 0
        assert res["sim_cycles_per_second"] and res["sim_cycles_per_second"] > 0


@pytest.mark.parametrize("name", DEFAULT)
def test_kernel_on_verilator(name, cache):
    run_kernel(name, cache)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_kernel_on_verilator_slow(name, cache):
    run_kernel(name, cache)


def test_intersect_lookahead_on_verilator(cache):
    """spmv_csr with depth-3 channels into its intersect: the look-ahead reads the FIFOs' second entries."""
    run_kernel("spmv_csr", cache, lookahead=True)
    b, _, _ = kernel_build("spmv_csr", cache, lookahead=True)
    assert any(op.peek_ports() for ops in b.top.ops for op in ops.values())


def test_finished_build_keeps_only_what_a_run_needs(cache):
    """What stays in a cached build's directory is the simulator executable, the build log and the stamp (the
    other tests run from such builds); a second request for the same design is a cache hit."""
    b, bdir, _ = kernel_build("vector_add", cache)
    assert sorted(p.name for p in bdir.iterdir()) == sorted([b.name, "build.log", "fuseflow-build.ok"])
    assert os.access(bdir / b.name, os.X_OK)
    assert verilator.build_verilator(b.verilog(), b.name, root=cache) == bdir


def test_cli_sim_verilator(tmp_path, cache):
    """The command line: load through the host port, compare, print cycles side by side. The graph declares the
    capacities of the session's vector_add build, so the CLI reuses that Verilator build."""
    b, _, cases = kernel_build("vector_add", cache)
    from fuseflow.samml import save
    from fuseflow.tensors.io import save_npz
    graph = tmp_path / "graph.json"
    save(b.program, graph)
    save_npz(tmp_path / "in.npz", cases[0][0])
    env = dict(os.environ, FUSEFLOW_HW_CACHE=cache)
    out = subprocess.run([sys.executable, "-m", "fuseflow.hw", "sim", str(graph), "--inputs",
                          str(tmp_path / "in.npz"), "--json", str(tmp_path / "r.json")],
                         capture_output=True, text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bit-identical" in out.stdout
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["ok"] and r["rtl_kernel_cycles"] == r["sim_kernel_cycles"]


# compiled programs of several kernels: tests/hw/test_compiled_models.py (through the correlation runner)


@pytest.mark.slow
def test_stuck_run_ends_on_the_watchdog(cache):
    """A design whose value writer never takes a token: Verilator runs until the watchdog timer, then the
    probes (read through the host port) say where it stopped."""
    from amaranth.hdl import Module

    from fuseflow.hw.ops._common import OpComponent
    from fuseflow.hw.top import default_factory, op_params, stuck_report
    from fuseflow.tensors.fixed import FixedFormat

    class NeverTakes(OpComponent):
        op_name = "value_write"

        def _add_members(self, members):
            self._add_write(members, "vals", "vals", self.fixed.width, "count", signed=True)

        def elaborate(self, platform):
            m = Module()
            m.d.comb += self.i_val.ready.eq(0)
            return m

    def factory(program, kernel, node):
        if node.op == "value_write":
            v = program.config["value"]
            return NeverTakes(op_params(program, node), fixed=FixedFormat(v["width"], v["frac"]))
        return default_factory(program, kernel, node)

    p = kernels.build("vector_add")
    need_ops(p)
    b = build(p, kernels.random_inputs(p, seed=1), op_factory=factory)
    res = verilator.run_build(b, max_cycles=5000, root=cache)
    assert not res["done"]
    msg = stuck_report(b.manifest(), res, 5000)
    assert "done never rose within 5000 cycles" in msg
    assert "add.out -> write_x_vals.val holds 2 token(s)" in msg


@pytest.mark.slow
def test_compiled_spmv_scales_with_nonzeros_on_verilator(cache):
    """Issue 9's SpMV: ``x(i) = B(i,j) * c(j)``, B 1000 x 1000 CSR at 1 %, c dense. The compiler locates into c,
    so the RTL walks the nonzeros: cycles <= 1.2 x (nonzeros + rows), equal to the simulator's, bit-identical."""
    import scipy.sparse as sp
    from fuseflow.compiler import compile_text
    n = 1000
    rng = np.random.default_rng(9)
    B = sp.random(n, n, density=0.01, random_state=rng, format="csr", data_rvs=lambda k: rng.integers(-64, 64, k) / 64)
    c = rng.integers(-64, 64, n) / 64
    prog = compile_text(f"tensor B({n},{n}) : csr\ntensor c({n}) : dense\nx(i) = B(i,j) * c(j)\n", name="spmv1000").program
    assert any(nd.op == "locate" for k in prog.kernels for nd in k.nodes.values())
    inputs = {"B": B, "c": c}
    ref = reference_run(prog, inputs)
    np.testing.assert_allclose(ref.outputs["x"], B @ c, atol=1e-3)
    assert ref.cycles <= 1.2 * (B.nnz + n), (ref.cycles, B.nnz + n)
    b = build(prog, inputs, reference=ref)
    images = check_inputs_fit(b, inputs)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    res = verilator.run_verilator(bdir, b.name, b.manifest(), images, 20 * ref.cycles + 1000)
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in b.program.kernels] == list(ref.kernel_cycles)
    print(f"spmv 1000x1000 1%: {B.nnz} nonzeros, RTL {res['cycles']} = simulator {ref.cycles} cycles, "
          f"{ref.cycles / (B.nnz + n):.3f} x (nonzeros + rows)")
