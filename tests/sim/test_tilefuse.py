"""Tile fusion of a GCN layer's two products (issue 41, seed 003): the wavefront plan's outputs against NumPy (float)
for random graphs and tile sizes, the wavefront split's counts against a direct count, the cost model's choice,
and the plan's one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuseflow.compiler import compile_text
from fuseflow.compiler.tiling import render_tiles
from fuseflow.errors import GraphError, ProgramError
from fuseflow.samml.tileplan import check_tiling
from fuseflow.samml.wavefront import wavefront_split
from fuseflow.sim import engine, tiled

GCN = """program gcn
tensor A({n}, {n}) : csr
tensor X({n}, {f}) : {xfmt}
tensor W({f}, {h}) : dense
fuse {{
T(i,k) = X(i,j) * W(j,k)
G(i,k) = A(i,l) * T(l,k)
}}
H(i,k) = relu(G(i,k))
"""


def _graph(n, f, h, density, seed, dense_x=False):
    rng = np.random.default_rng(seed)
    A = sp.random(n, n, density=density, format="csr", random_state=rng, data_rvs=lambda k: rng.uniform(-1, 1, k))
    A = (A + sp.eye(n, format="csr")).tocsr()
    X = (rng.uniform(-1, 1, (n, f)) if dense_x
         else sp.random(n, f, density=0.2, format="csr", random_state=rng, data_rvs=lambda k: rng.uniform(-1, 1, k)))
    W = rng.uniform(-1, 1, (f, h))
    return {"A": A, "X": X, "W": W}


def _golden(ins):
    return np.maximum(ins["A"] @ (ins["X"] @ ins["W"]), 0)


def _cora_layer(ordering):
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    from fuseflow.datasets import load
    from fuseflow.models.data import _from_torch_csr
    g = load("cora")
    A = g.scipy_adjacency().tocsr()
    X = _from_torch_csr(g.features).tocsr()
    if ordering == "rcm":
        p = reverse_cuthill_mckee(A, symmetric_mode=True)
        A, X = A[p][:, p].tocsr(), X[p].tocsr()
    W = np.random.default_rng(0).uniform(-0.1, 0.1, (X.shape[1], 16))
    return {"A": A, "X": X, "W": W}


def _compile(ins, fusion="wavefront", dense_x=False, **kw):
    n, f = ins["X"].shape
    src = GCN.format(n=n, f=f, h=ins["W"].shape[1], xfmt="dense" if dense_x else "csr")
    return compile_text(src, tile_fusion=fusion, tile_inputs=ins, **kw).program


@pytest.mark.parametrize("tile", [4, 8, 16, 40])
@pytest.mark.parametrize("lag", [0, 1, 3, None])
def test_wavefront_equals_numpy(tile, lag):
    ins = _graph(40, 12, 3, 0.08, seed=tile)
    prog = _compile(ins, tiles={"i": tile})
    if lag is not None:
        prog.tiling["wavefront"]["lag"] = lag
    res = tiled.run(prog, ins)
    np.testing.assert_allclose(res.outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)
    w = res.stats["tiling"]["wavefront"]
    assert w["wavefront1_tiles"] + w["wavefront2_tiles"] > 0
    assert 0 <= w["fused_ratio"] <= 1 and 0 <= w["fused_nnz_ratio"] <= 1


def test_wavefront_gemm_spmm_dense_features():
    ins = _graph(48, 10, 4, 0.05, seed=3, dense_x=True)
    prog = _compile(ins, dense_x=True, tiles={"i": 16})
    res = tiled.run(prog, ins, memory="hbm2")
    np.testing.assert_allclose(res.outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(6, 30), tile_exp=st.integers(1, 3), density=st.floats(0.0, 0.3), seed=st.integers(0, 10 ** 6),
       lag=st.integers(0, 4), fusion=st.sampled_from(["wavefront", "materialise", "recompute"]))
def test_fused_tiled_equals_untiled(n, tile_exp, density, seed, lag, fusion):
    """Property: any strategy, any tile size and lag: the tiled outputs are the untiled graph's (float)."""
    tile = 1 << tile_exp
    ins = _graph(n, 5, 2, density, seed)
    prog = _compile(ins, fusion, tiles={"i": tile})
    un = engine.run(compile_text(GCN.format(n=n, f=5, h=2, xfmt="csr")).program, ins)
    if prog.tiling is None:
        return
    if "wavefront" in prog.tiling:
        prog.tiling["wavefront"]["lag"] = lag
    res = tiled.run(prog, ins)
    np.testing.assert_allclose(res.outputs["H"], un.outputs["H"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)


def test_wavefront_split_counts():
    A = sp.csr_matrix(np.array([[1, 1, 0, 0, 0, 0],
                                [0, 1, 0, 0, 0, 1],
                                [0, 0, 1, 1, 0, 0],
                                [1, 0, 0, 1, 0, 0],
                                [0, 0, 0, 0, 0, 0],
                                [0, 0, 1, 0, 1, 1]], dtype=float))
    first, second, s = wavefront_split(A, 2, 0)
    # row tiles {0,1}, {2,3}, {4,5}; lag 0: row tile m runs blocks w <= m, block m on chip
    assert (s["rows"], s["nnz"]) == (5, 11)
    assert s["fused_rows"] == 2            # rows 0 and 2: every nonzero in their own tile (read on chip)
    assert s["fused_nnz"] == 8             # all but (1,5), (3,0), (5,2)
    assert s["wave1_nnz"] == 10            # all but (1,5): right of its row tile's diagonal block
    assert s["wave1_rows"] == 4            # rows 0, 2, 3, 5
    _, _, s2 = wavefront_split(A, 2, 2)    # lag 2: everything in wavefront 1, the last column tile on chip
    assert (s2["wave1_nnz"], s2["fused_nnz"]) == (11, 3)   # (1,5), (5,4), (5,5) read T's last tile on chip
    assert (first + second - A).nnz == 0 and first.multiply(second).nnz == 0


def test_cost_model_reports_three_and_chooses_cheapest():
    ins = _graph(64, 20, 4, 0.04, seed=5)
    prog = _compile(ins, fusion=None, tiles={"i": 16})
    fu = prog.tiling["fusion"]
    assert set(fu["estimates"]) == {"wavefront", "recompute", "materialise"}
    assert fu["chosen"] == min(fu["estimates"], key=fu["estimates"].get)
    text = render_tiles(prog)
    assert f"fuse region T, G: {fu['chosen']}" in text and "estimated cycles" in text


def test_cost_model_choice_is_near_the_fastest():
    """Simulated: the plan the cost model picks runs within 5 % of the fastest of the three strategies (the
    estimates are approximate, so a near tie may go either way)."""
    ins = _graph(64, 20, 4, 0.06, seed=7)
    chosen = _compile(ins, fusion=None, tiles={"i": 16})
    cycles = {f: tiled.run(_compile(ins, fusion=f, tiles={"i": 16}), ins).cycles
              for f in ("wavefront", "recompute", "materialise")}
    assert cycles[chosen.tiling["fusion"]["chosen"]] <= 1.05 * min(cycles.values()), (chosen.tiling["fusion"], cycles)


def test_bad_tile_fusion_one_line():
    ins = _graph(16, 4, 2, 0.1, seed=1)
    with pytest.raises(ProgramError) as exc:
        _compile(ins, fusion="sideways", tiles={"i": 4})
    assert "--tile-fusion" in str(exc.value) and "\n" not in str(exc.value)
    src = "program p\ntensor A(8, 8) : csr\ntensor x(8) : dense\ny(i) = A(i,j) * x(j)\n"
    with pytest.raises(ProgramError, match="no fuse region of two products"):
        compile_text(src, tiles={"i": 4}, tile_fusion="wavefront")


def test_plan_check_rejects_a_bad_wavefront():
    ins = _graph(32, 6, 2, 0.1, seed=2)
    prog = _compile(ins, tiles={"i": 8})
    wf = prog.tiling["wavefront"]
    check_tiling(prog)
    wf["consumer"] = "nope"
    with pytest.raises(GraphError, match="no kernel 'nope'"):
        check_tiling(prog)
    wf["consumer"], wf["rows"] = "G", wf["window"]
    with pytest.raises(GraphError, match="grid must be its rows and window"):
        check_tiling(prog)


@pytest.mark.parametrize("ordering", ["natural", "rcm"])
def test_wavefront_on_cora_equals_numpy(ordering):
    """Cora's GCN layer (2,708 nodes, 1,433 sparse features, 16 hidden) in wavefronts of 512-row tiles, in Cora's
    order and in reverse Cuthill-McKee order: the outputs are NumPy's (float)."""
    ins = _cora_layer(ordering)
    A = ins["A"]
    prog = _compile(ins, tiles={"i": 512, "j": 512})
    res = tiled.run(prog, ins, memory="hbm2")
    np.testing.assert_allclose(res.outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)
    w = res.stats["tiling"]["wavefront"]
    assert w["nnz"] == A.nnz
    assert (w["wavefront2_tiles"] == 0) == (w["wave1_nnz_ratio"] == 1.0)


def test_cli_list_tiles_and_bad_tile_fusion(tmp_path, capsys):
    from fuseflow.compiler.__main__ import main
    ff = tmp_path / "g.ff"
    ff.write_text(GCN.format(n=48, f=20, h=4, xfmt="csr").replace("tensor A(48, 48) : csr",
                                                                    "tensor A(48, 48) : csr density 0.06"))
    assert main(["compile", str(ff), "-o", str(tmp_path / "o"), "--tile", "i=16", "--list-tiles"]) == 0
    out = capsys.readouterr().out
    assert "fuse region T, G:" in out and "estimated cycles: wavefront" in out and "materialise" in out
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(ff), "-o", str(tmp_path / "o2"),
                          "--tile", "i=16", "--fuse", "none", "--tile-fusion", "wavefront"],
                         capture_output=True, text=True)
    err = run.stderr.strip()
    assert run.returncode == 2 and err.startswith("error: --tile-fusion: ") and "\n" not in err


def test_model_object_takes_tile_fusion():
    """``fuseflow.compile(..., tile_fusion=)`` reaches the compiler: the plan says so and the result is NumPy's."""
    import fuseflow
    ins = _graph(32, 8, 3, 0.1, seed=11)
    src = GCN.format(n=32, f=8, h=3, xfmt="csr")
    for how in ("wavefront", "materialise"):
        m = fuseflow.compile(src, ins, tiles={"i": 8}, tile_fusion=how, mode="float")
        assert m.program.tiling["fusion"]["chosen"] == how
        np.testing.assert_allclose(m.simulate(ins).outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)


def test_wavefront_transfers_pack_beats():
    """With 32-byte beats, packing several entries per beat shortens the wavefront's loads and stores (the two
    wavefronts are timed by the contract's beats, as every tiled kernel), with the same outputs."""
    ins = _graph(64, 16, 4, 0.08, seed=5)
    runs = {pack: tiled.run(_compile(ins, tiles={"i": 16}, dma=f"word_bytes=32,pack={pack}"), ins)
            for pack in (0, 1)}
    for pack in (0, 1):
        assert runs[pack].stats["tiling"]["wavefront"]["wavefront1_tiles"] > 0
        np.testing.assert_allclose(runs[pack].outputs["H"], _golden(ins), rtol=1e-12, atol=1e-12)
    t0, t1 = (runs[p].stats["tiling"] for p in (0, 1))
    # a 32-byte beat holds 8 entries of 32 bits or fewer: far fewer beats (the loads also pay latencies)
    assert t1["bytes_read"] * 4 < t0["bytes_read"]
    assert t1["load_cycles"] < 0.75 * t0["load_cycles"] and t1["store_cycles"] < 0.75 * t0["store_cycles"]


# ---- both kernels on chip: the two-unit schedule ---------------------------------------------------------------
def _contract(buffers):
    from fuseflow.samml.offchip import OffchipContract
    from fuseflow.samml.registry import DMA
    return OffchipContract(**{**DMA.defaults(), "buffers": buffers})


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 60), st.integers(0, 90), st.integers(0, 40)), max_size=14),
       buffers=st.sampled_from([1, 2]))
def test_one_unit_schedule_is_tiled_cycles(steps, buffers):
    """One unit alone is the one-kernel contract: :func:`tiled_cycles`, for either ``buffers``."""
    from fuseflow.samml.offchip import tiled_cycles
    from fuseflow.samml.wavefront import UnitStep, unit_schedule
    c = _contract(buffers)
    assert unit_schedule([UnitStep(0, *s) for s in steps], c)[0] == tiled_cycles(steps, c)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), buffers=st.sampled_from([1, 2]))
def test_two_unit_schedule_keeps_dependences_and_one_port(data, buffers):
    """Random two-unit sequences with backward dependences: every run starts after the runs it waits for, each
    unit's runs are in order and do not overlap, the total lies between the busier unit's work and the sequential
    total (without loads that wait for stores), and two units without dependences overlap."""
    from fuseflow.samml.offchip import OVERLAP_OVERHEAD, tiled_cycles
    from fuseflow.samml.wavefront import UnitStep, unit_schedule
    c = _contract(buffers)
    n = data.draw(st.integers(1, 12))
    steps = []
    for i in range(n):
        load, run, store = (data.draw(st.integers(0, 50)) for _ in range(3))
        after = tuple(data.draw(st.sets(st.integers(0, i - 1), max_size=2))) if i else ()
        loads = tuple(data.draw(st.sets(st.integers(0, i - 1), max_size=1))) if i else ()
        steps.append(UnitStep(data.draw(st.integers(0, 1)), load, run, store, after, loads))
    total, runs = unit_schedule(steps, c)
    for i, s in enumerate(steps):
        assert all(runs[i][0] >= runs[j][1] for j in s.run_after)
        assert runs[i][1] - runs[i][0] == s.run + (OVERLAP_OVERHEAD[1] if buffers == 2 else 0)
        later = [j for j in range(i + 1, n) if steps[j].unit == s.unit]
        if later:
            assert runs[later[0]][0] >= runs[i][1]
    assert total >= max(sum(s.run for s in steps if s.unit == u) for u in (0, 1))
    if not any(s.load_after for s in steps):      # (in sequence a load never waits for the previous store)
        assert total <= tiled_cycles([(s.load, s.run, s.store) for s in steps], c)
    free = [UnitStep(i % 2, 1, 100, 1) for i in range(6)]
    assert unit_schedule(free, c)[0] < tiled_cycles([(1, 100, 1)] * 6, c)


def test_wavefront_order_dependences_point_back():
    """Every dependence of :func:`wavefront_order` names an earlier visit: an on-chip block the producer's last tile
    of its row tile; a block loading ``T``'s window the visit that stored it; the order is the tiled simulator's."""
    from fuseflow.samml.wavefront import wavefront_order
    producer = {0: ["a", "b"], 1: ["c"], 2: [], 3: ["d"]}
    wave1 = {0: [0, 1], 1: [0, 1, 2], 2: [2], 3: [1, 3]}
    wave2 = {0: [3]}
    order = wavefront_order(4, 1, producer, wave1, wave2)
    for i, v in enumerate(order):
        assert all(j < i for j in v.run_after + v.load_after)
        if v.onchip:
            p = order[v.run_after[0]]
            assert (p.unit, p.row, v.item) == (0, v.item, v.item)
        for j in v.load_after:
            assert order[j].store
    assert [(v.unit, v.row, v.item) for v in order][:6] == [(0, 0, "a"), (0, 0, "b"), (0, 1, "c"), (1, 0, 0),
                                                             (1, 0, 1), (1, 1, 0)]
    assert order[-1].wave == 2 and order[-1].rmw           # G's row tile 0 read back for its block (0, 3)


def test_side_by_side_beats_one_at_a_time_on_cora():
    """Cora's layer in RCM order at 256-row tiles: both kernels side by side take fewer cycles than the same plan run
    one kernel at a time (same outputs), and no fewer than the busier kernel's runs."""
    ins = _cora_layer("rcm")
    prog = _compile(ins, tiles={"i": 256, "j": 256})
    prog.tiling["wavefront"]["lag"] = 4
    both = tiled.run(prog, ins, memory="hbm2")
    prog.tiling["wavefront"]["units"] = 1
    one = tiled.run(prog, ins, memory="hbm2")
    np.testing.assert_array_equal(both.outputs["H"], one.outputs["H"])
    w = both.stats["tiling"]["wavefront"]
    fused = sum(k["cycles"] for k in both.stats["kernels"] if k["name"] != "H")
    assert max(w["producer_busy"], w["consumer_busy"]) <= fused
    assert both.cycles < 0.9 * one.cycles


@pytest.mark.parametrize("seed", [1, 2])
def test_cost_model_within_15_percent_of_the_simulator(seed):
    """The cost model's estimates of the wavefront (both kernels on chip) and of materialise, at the plan's own
    contract, lie within 15 % of the simulated cycles of the region's kernels on random graphs it was not fitted
    to."""
    ins = _graph(600, 300, 16, 0.01, seed=seed)
    for fusion in ("wavefront", "materialise"):
        prog = _compile(ins, fusion, tiles={"i": 128, "j": 128})
        est = prog.tiling["fusion"]["estimates"][fusion]
        res = tiled.run(prog, ins)
        sim = sum(k["cycles"] for k in res.stats["kernels"] if k["name"] != "H")
        assert abs(est / sim - 1) < 0.15, (fusion, est, sim)
