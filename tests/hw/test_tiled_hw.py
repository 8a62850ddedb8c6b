"""Tiled graphs on the RTL (issue 41): a `.ff` program compiled with a ``tile`` statement, built with ``hw build``
(the AXI4 master port, the contract from the graph's ``tiling`` section) and run on Verilator from the off-chip
image that :func:`fuseflow.hw.tiled.tiled_image` lays out from the tiled simulator's own tile steps.

Golden values: NumPy (the test data are multiples of 1/4, exact in fixed point) and the tiled simulator (fixed
point). Behind the contract memory the RTL's cycle count is the tiled simulator's total exactly and every tile's
kernel cycles are the simulator's; behind cocotbext-axi's AxiRam with random pauses the stored outputs are
bit-identical. One Verilator build of the SpMV serves every SpMV run here (three sparsities, not rebuilt); the GCN
layer needs a second build (slow). With ``buffers`` 2 (the inputs that change between tiles in two banks, the next
tile's loads during the current tile's run) the same holds: an SpMV on a 128-bit port and the GCN layer.
"""

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import compile_text
from fuseflow.errors import FuseFlowError, HardwareError
from fuseflow.hw.axi_master import run_axim
from fuseflow.hw.build import build_design
from fuseflow.hw.tiled import tiled_image, tiled_outputs
from fuseflow.hw.verilator import build_verilator
from fuseflow.sim import tiled

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

ROWS, COLS, TILE = 80, 24, 8
SPMV = f"""program spmv
tensor A({ROWS}, {COLS}) : csr
tensor x({COLS}) : dense
tile i {TILE}
y(i) = A(i,j) * x(j)
"""
DMA = "buffers=1,latency=12,burst=8,outstanding=2"

GCN = """program gcn
tensor A({n}, {n}) : csr
tensor X({n}, {f}) : csr
tensor W({f}, {h}) : dense
tile i {t}
T(l,k) = X(l,j) * W(j,k)
G(i,k) = A(i,l) * T(l,k)
H(i,k) = relu(G(i,k))
"""


def _quarters(rng):
    return lambda n: rng.integers(-8, 9, n) / 4


def build_tiled(src, root, fuse="regions", dma=DMA):
    """(program, BuildFiles, Verilator directory) of ``src`` compiled tiled for the RTL (``--dma``: ``dma``)."""
    prog = compile_text(src, fuse=fuse, dma=dma).program
    files = build_design(prog, str(root / "build"), probes=False)
    text = (root / "build" / f"{files.manifest['module']}.v").read_text()
    bdir = build_verilator(text, files.manifest["module"], root=root / "verilator")
    return prog, files, bdir


@pytest.fixture(scope="module")
def spmv(tmp_path_factory):
    return build_tiled(SPMV, tmp_path_factory.mktemp("tiled_spmv"))


def spmv_inputs(density, seed, empty_rows=None):
    rng = np.random.default_rng(seed)
    A = sp.random(ROWS, COLS, density=density, format="lil", random_state=rng, data_rvs=_quarters(rng))
    if empty_rows is not None:
        A[empty_rows, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    return {"A": A, "x": _quarters(rng)(COLS)}


def check_run(files, run, res, want):
    """The RTL run ``res`` stored the tiled simulator's outputs bit for bit, and they are NumPy's ``want``."""
    assert res["done"] and not res["errors"], res["errors"]
    assert res["registers"]["tiles_done"] == len(run.steps)
    got = tiled_outputs(files.manifest, run, res["memory"])
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], run.sim.outputs[name])
        np.testing.assert_array_equal(got[name], value)


@requires_verilator
def test_tiled_spmv_cycle_exact_behind_the_contract_memory(spmv):
    """10 row tiles of 8 (one empty, skipped: 9 run): the RTL's total cycles are the tiled simulator's, each
    tile's kernel cycles the simulator's, the outputs NumPy's and the simulator's."""
    prog, files, bdir = spmv
    assert files.interface == "axi-master" and files.manifest["axi"]["contract"]["latency"] == 12
    data = spmv_inputs(0.3, 1, empty_rows=slice(16, 24))
    run = tiled_image(files.build, files.manifest, data)
    rep = run.sim.stats["tiling"]
    assert (rep["tiles_run"], rep["tiles_skipped"]) == (9, 1)
    assert [s.box["i"] for s in run.steps][:3] == [(0, 8), (8, 16), (24, 32)]
    # the vector is resident: loaded by the first tile only
    assert [sorted({t for t, *_ in s.loads}) for s in run.steps] == [["A", "x"]] + [["A"]] * 8
    res = run_axim(bdir, files.manifest, run.image, memory="contract")
    check_run(files, run, res, {"y": data["A"] @ data["x"]})
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]
    assert res["registers"]["cycles"] == run.sim.cycles
    # the same simulation without the image: the simulator alone predicts the RTL's cycles
    assert tiled.run(prog, data, mode="fixed").cycles == res["registers"]["cycles"]
    print(f"tiled SpMV: {len(run.steps)} tiles, RTL {res['registers']['cycles']} cycles, simulator "
          f"{run.sim.cycles}")


@requires_verilator
def test_tiled_spmv_bit_identical_behind_axiram_with_pauses(spmv):
    prog, files, bdir = spmv
    data = spmv_inputs(0.35, 2)
    run = tiled_image(files.build, files.manifest, data, base=0x3000)
    assert len(run.steps) == ROWS // TILE
    res = run_axim(bdir, files.manifest, run.image, memory="axiram", pause=0.3, seed=5)
    check_run(files, run, res, {"y": data["A"] @ data["x"]})
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]


@requires_verilator
def test_tiled_spmv_three_sparsities_on_one_build(spmv):
    """Three inputs of different sparsity on the same Verilator executable (not rebuilt), each cycle-exact."""
    prog, files, bdir = spmv
    exe = bdir / files.manifest["module"]
    stamp = exe.stat().st_mtime_ns
    cycles = []
    for density, seed in ((0.05, 11), (0.4, 12), (0.95, 13)):
        data = spmv_inputs(density, seed)
        run = tiled_image(files.build, files.manifest, data)
        res = run_axim(bdir, files.manifest, run.image, memory="contract")
        check_run(files, run, res, {"y": data["A"] @ data["x"]})
        assert res["registers"]["cycles"] == run.sim.cycles
        cycles.append(run.sim.cycles)
    assert cycles == sorted(cycles) and len(set(cycles)) == 3
    assert exe.stat().st_mtime_ns == stamp


@requires_verilator
def test_tiled_spmv_packed_beats_on_a_wide_port(tmp_path):
    """A 128-bit port (word_bytes 16): each beat carries 8 entries of the 16-bit seg and crd memories and 4 of the
    32-bit values, which the memories take in one cycle; cycle-exact behind the contract memory (every tile's
    load, run and store), bit-identical behind AxiRam with pauses, and the loads take fewer beats than entries."""
    prog, files, bdir = build_tiled(SPMV, tmp_path, dma=DMA + ",word_bytes=16")
    packs = {m["name"]: m["entries_per_beat"] for m in files.manifest["axi"]["memories"]}
    assert packs["A.1.crd"] == 8 and packs["A.vals"] == 4 and packs["A.1.first"] == 4
    data = spmv_inputs(0.3, 3, empty_rows=slice(40, 48))
    run = tiled_image(files.build, files.manifest, data)
    crd = [x for x in run.image.transfers[0] if x.name == "A.1.crd"][0]
    assert crd.words == -(-crd.entries // 8) and crd.entries > 8
    res = run_axim(bdir, files.manifest, run.image, memory="contract")
    check_run(files, run, res, {"y": data["A"] @ data["x"]})
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]
    assert res["registers"]["cycles"] == run.sim.cycles
    rtl = res["registers"]["cycles"]
    unpacked = tiled.run(compile_text(SPMV, dma=DMA + ",word_bytes=16,pack=0").program, data, mode="fixed")
    assert unpacked.stats["tiling"]["load_cycles"] > run.sim.stats["tiling"]["load_cycles"]
    res = run_axim(bdir, files.manifest, run.image, memory="axiram", pause=0.3, seed=4)
    check_run(files, run, res, {"y": data["A"] @ data["x"]})
    print(f"tiled SpMV, 128-bit packed beats: {len(run.steps)} tiles, RTL {rtl} cycles, "
          f"simulator {run.sim.cycles}; one entry per beat: {unpacked.cycles}")


DMA2 = DMA.replace("buffers=1", "buffers=2")


def banks(files):
    return {m["name"]: m["banks"] for m in files.manifest["axi"]["memories"]}


@requires_verilator
def test_double_buffered_spmv_cycle_exact_and_bit_identical(tmp_path):
    """buffers 2 on a 128-bit port: A's memories have two banks (x resident and y stored: one), 9 of 10 row tiles
    run (one empty, skipped), the next tile's loads during the current tile's run. Dense rows on top and sparse
    ones below, so the schedule waits for the run in some tiles and for the loads in others. Behind the contract
    memory the RTL's cycles are the tiled simulator's (tiled_cycles with buffers 2) and fewer than with buffers
    1; behind AxiRam with pauses the outputs are the simulator's bit for bit."""
    prog, files, bdir = build_tiled(SPMV, tmp_path, dma=DMA2 + ",word_bytes=16")
    assert banks(files) == {"A.1.seg": 2, "A.1.crd": 2, "A.1.first": 2, "A.vals": 2, "x.vals": 1, "y.0.seg": 1,
                            "y.0.crd": 1, "y.0.first": 1, "y.vals": 1}
    rng = np.random.default_rng(21)
    A = sp.vstack([sp.random(ROWS // 2, COLS, density=0.95, random_state=rng, data_rvs=_quarters(rng)),
                   sp.random(ROWS // 2, COLS, density=0.1, random_state=rng, data_rvs=_quarters(rng))]).tolil()
    A[48:56, :] = 0
    A = A.tocsr()
    A.eliminate_zeros()
    data = {"A": A, "x": _quarters(rng)(COLS)}
    run = tiled_image(files.build, files.manifest, data)
    assert run.sim.stats["tiling"]["contract"]["buffers"] == 2 and len(run.steps) == 9
    assert [sorted({t for t, *_ in s.loads}) for s in run.steps] == [["A", "x"]] + [["A"]] * 8
    steps = [(s.load_cycles, s.run_cycles) for s in run.steps]
    waits = {steps[t + 1][0] + 2 > steps[t][1] + 4 for t in range(len(steps) - 1)}   # OVERLAP_OVERHEAD's
    assert waits == {True, False}            # the loads last longer than the run in some tiles, shorter in others
    res = run_axim(bdir, files.manifest, run.image, memory="contract")
    check_run(files, run, res, {"y": A @ data["x"]})
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]
    assert res["registers"]["cycles"] == run.sim.cycles
    single = tiled.run(compile_text(SPMV, dma=DMA + ",word_bytes=16").program, data, mode="fixed")
    assert res["registers"]["cycles"] < single.cycles
    rtl = res["registers"]["cycles"]
    res = run_axim(bdir, files.manifest, run.image, memory="axiram", pause=0.3, seed=6)
    check_run(files, run, res, {"y": A @ data["x"]})
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]
    print(f"tiled SpMV, buffers 2: {len(run.steps)} tiles, RTL {rtl} cycles, simulator {run.sim.cycles}; "
          f"buffers 1: {single.cycles}")


@requires_verilator
@pytest.mark.slow
@pytest.mark.parametrize("buffers", [1, 2])
def test_tiled_gcn_layer_on_the_rtl(tmp_path, buffers):
    """A fused GCN layer relu(A (X W)) on 48 nodes in 6 row tiles of 8 (X and W resident, loaded once; X W
    recomputed per tile): cycle-exact behind the contract memory, bit-identical behind AxiRam with pauses; with
    ``buffers`` 2 A's memories have two banks."""
    n, f, h = 48, 16, 4
    dma = DMA.replace("buffers=1", f"buffers={buffers}")
    prog, files, bdir = build_tiled(GCN.format(n=n, f=f, h=h, t=8), tmp_path, fuse="full", dma=dma)
    assert len(prog.kernels) == 1 and prog.tiling["kernels"][0]["resident"] == ["X", "W"]
    assert {name.split(".")[0] for name, b in banks(files).items() if b == 2} == ({"A"} if buffers == 2 else set())
    rng = np.random.default_rng(7)
    A = sp.random(n, n, density=0.1, format="csr", random_state=rng, data_rvs=_quarters(rng))
    X = sp.random(n, f, density=0.2, format="csr", random_state=rng, data_rvs=_quarters(rng))
    W = _quarters(rng)((f, h))
    data = {"A": A, "X": X, "W": W}
    want = {"H": np.maximum(A @ (X @ W), 0)}
    run = tiled_image(files.build, files.manifest, data)
    assert len(run.steps) >= 4
    res = run_axim(bdir, files.manifest, run.image, memory="contract")
    check_run(files, run, res, want)
    assert res["kernel_cycles"] == [s.run_cycles for s in run.steps]
    assert res["registers"]["cycles"] == run.sim.cycles
    res = run_axim(bdir, files.manifest, run.image, memory="axiram", pause=0.3, seed=9)
    check_run(files, run, res, want)
    print(f"tiled GCN layer, buffers {buffers}: {len(run.steps)} tiles, {run.sim.cycles} cycles on the RTL and the "
          f"simulator")


# ---- refusals (no Verilator) ----------------------------------------------------------------------------------

def _graph(tmp_path, src, **kw):
    from fuseflow.samml import io as samml_io
    prog = compile_text(src, **kw).program
    path = tmp_path / "graph.json"
    samml_io.save(prog, str(path))
    return str(path)


@pytest.mark.parametrize("src, kw, args, message", [
    (SPMV, {"dma": DMA}, ["--offchip", "latency=20"],
     "error: --offchip: differs from the tiled graph's contract (latency 20 != 12): leave --offchip out, the build "
     "takes the graph's"),
    (SPMV, {"dma": DMA}, ["--interface", "axi"],
     "error: --interface: a tiled graph runs its tiles from off-chip memory: --interface axi-master (the default "
     "for it), not axi"),
    (SPMV.replace("tile i 8", "tile j 8"), {"dma": DMA}, [],
     "error: tiling: a split sum (j: partial outputs y merged across tiles) is not in the RTL yet: tile only the "
     "output's indices"),
])
def test_hw_build_of_a_tiled_graph_refuses_in_one_line(tmp_path, capsys, src, kw, args, message):
    from fuseflow.hw.__main__ import main as hw_main
    graph = _graph(tmp_path, src, **kw)
    out = tmp_path / "build"
    assert hw_main(["build", graph, "-o", str(out), *args]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not out.exists()


def test_an_untiled_double_buffered_build_is_refused_in_one_line(tmp_path, capsys):
    from fuseflow.hw.__main__ import main as hw_main
    graph = _graph(tmp_path, SPMV.replace("tile i 8\n", ""))
    out = tmp_path / "build"
    assert hw_main(["build", graph, "-o", str(out), "--interface", "axi-master", "--offchip",
                    "word_bytes=4,latency=3,burst=4,outstanding=1,buffers=2"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: --interface axi-master: buffers 2 needs a tiled graph (its plan names the inputs that change between "
        "tiles): use buffers=1"]
    assert not out.exists()


def test_compile_dma_option_is_checked():
    with pytest.raises(FuseFlowError, match="--dma: 'buffer=1' is not key=value"):
        compile_text(SPMV, dma="buffer=1")
    with pytest.raises(FuseFlowError, match="buffers 3 must be 1 or 2"):
        compile_text(SPMV, dma="buffers=3")
    assert compile_text(SPMV, dma={"latency": 7}).program.tiling["contract"]["latency"] == 7


def test_tiled_image_refuses_an_untiled_build(tmp_path):
    from fuseflow.samml import kernels
    b = build_design(kernels.spmv(m=4, n=4, fmt="csr"), str(tmp_path), interface="axi-master",
                     offchip="word_bytes=4,latency=3,burst=4,outstanding=1", probes=False)
    with pytest.raises(HardwareError, match="has no tiling section"):
        tiled_image(b.build, b.manifest, {})


def test_plan_checks_refuse_an_untiled_program():
    from fuseflow.hw.tiled import check_plan, plan_contract
    from fuseflow.samml import kernels
    prog = kernels.spmv(m=4, n=4, fmt="csr")
    for check in (check_plan, plan_contract):
        with pytest.raises(HardwareError, match="has no tiling section"):
            check(prog)
