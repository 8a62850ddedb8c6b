"""Tiled programs (issue 41): results against NumPy/SciPy, cycles of one tile against the untiled graph, empty
tiles, and the off-chip contract's cycle counts against a cycle-by-cycle model written here."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import compile_text
from fuseflow.errors import FuseFlowError, ProgramError
from fuseflow.samml.offchip import (OVERLAP_OVERHEAD, RUN_OVERHEAD, STORE_SETUP, TILE_OVERHEAD, OffchipContract,
                                    beats, bursts, entries_per_beat, pack_beats, read_cycles, tiled_cycles,
                                    unpack_beats, write_cycles)
from fuseflow.sim import engine, tiled

SPMV = """program spmv
tensor A({n}, {m}) : csr
tensor x({m}) : dense
y(i) = A(i,j) * x(j)
"""

SPMM = """program spmm
tensor A({n}, {m}) : csr
tensor B({m}, {k}) : dense
C(i,k) = A(i,j) * B(j,k)
"""

GCN = """program gcn
tensor A({n}, {n}) : csr
tensor X({n}, {f}) : csr
tensor W({f}, {h}) : dense
T(i,k) = X(i,j) * W(j,k)
G(i,k) = A(i,l) * T(l,k)
H(i,k) = relu(G(i,k))
"""


def _sparse(n, m, density, seed):
    return sp.random(n, m, density=density, format="csr", random_state=seed)


@pytest.mark.parametrize("tiles", [{"i": 32, "j": 40}, {"i": 7, "j": 13}, {"j": 64}, {"i": 100}])
def test_tiled_spmv_equals_scipy(tiles):
    A = _sparse(100, 90, 0.1, 1)
    x = np.random.default_rng(0).standard_normal(90)
    prog = compile_text(SPMV.format(n=100, m=90), tiles=tiles).program
    assert prog.tiling is not None
    res = tiled.run(prog, {"A": A, "x": x})
    np.testing.assert_allclose(res.outputs["y"], A @ x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("tiles", [{"i": 16, "j": 24}, {"i": 50, "k": 3}, {"j": 11, "k": 4}])
def test_tiled_spmm_equals_scipy(tiles):
    A = _sparse(50, 60, 0.08, 2)
    B = np.random.default_rng(1).standard_normal((60, 7))
    prog = compile_text(SPMM.format(n=50, m=60, k=7), tiles=tiles).program
    res = tiled.run(prog, {"A": A, "B": B}, mode="fixed")
    np.testing.assert_allclose(res.outputs["C"], A @ B, rtol=1e-3, atol=2 ** -8)


FUSED_GCN = GCN.replace("T(i,k) =", "fuse {{\nT(i,k) =").replace("H(i,k)", "}}\nH(i,k)")


@pytest.mark.parametrize("src, fuse", [(GCN, "none"), (FUSED_GCN, "regions")])
def test_tiled_gcn_layer_equals_numpy(src, fuse):
    n, f, h = 60, 40, 5
    A = _sparse(n, n, 0.08, 3)
    X = _sparse(n, f, 0.2, 4)
    W = np.random.default_rng(2).standard_normal((f, h))
    prog = compile_text(src.format(n=n, f=f, h=h), fuse=fuse, tiles={"i": 16, "l": 16, "j": 24},
                        tile_fusion="recompute" if fuse == "regions" else None).program
    # fused (recompute: the region's one kernel; tests/sim/test_tilefuse.py has the wavefront), X W's sum over j
    # runs inside A (X W)'s kernel: a product by A, linear, so its tiles merge too
    assert len(prog.kernels) == (3 if fuse == "none" else 2)
    res = tiled.run(prog, {"A": A, "X": X, "W": W})
    np.testing.assert_allclose(res.outputs["H"], np.maximum(A @ (X @ W), 0), rtol=1e-10, atol=1e-10)


def test_one_tile_reproduces_the_untiled_cycles():
    A = _sparse(100, 90, 0.1, 5)
    x = np.random.default_rng(3).standard_normal(90)
    untiled = compile_text(SPMV.format(n=100, m=90)).program
    one = compile_text(SPMV.format(n=100, m=90), tiles={"i": 100, "j": 90}, dma="buffers=1").program
    doc = one.to_json()
    plan = doc.pop("tiling")
    assert json.dumps(doc) == json.dumps(untiled.to_json())      # the same kernel graph
    assert [d["tiles"] for d in plan["dims"].values()] == [1, 1]
    want = engine.run(untiled, {"A": A, "x": x})
    res = tiled.run(one, {"A": A, "x": x})
    rep = res.stats["tiling"]
    assert rep["tiles_run"] == 1 and rep["run_cycles"] == want.cycles
    # buffers 1 (what the RTL runs): load, run, store in turn, plus the tile sequencer's cycles
    assert res.cycles == rep["load_cycles"] + want.cycles + rep["store_cycles"] + TILE_OVERHEAD + RUN_OVERHEAD
    np.testing.assert_array_equal(res.outputs["y"], want.outputs["y"])


def test_empty_tiles_are_skipped_and_cost_nothing():
    A = _sparse(64, 64, 0.2, 6).tolil()
    A[0:32, 32:64] = 0                       # block (0, 1) empty
    A[32:64, :] = 0                          # row partition 1 empty
    A = A.tocsr()
    A.eliminate_zeros()
    x = np.arange(64, dtype=float)
    prog = compile_text(SPMV.format(n=64, m=64), tiles={"i": 32, "j": 32}).program
    steps = []
    res = tiled.run_tiled(prog, {"A": A, "x": x}, on_step=steps.append)
    assert res.stats["tiling"]["tiles_skipped"] == 3 and res.stats["tiling"]["tiles_run"] == 1
    assert [s.box for s in steps] == [{"i": (0, 32), "j": (0, 32)}]
    # the run is the one tile's: the same as the 32 x 32 block alone on the kernel graph
    alone = engine.run(prog_block(), {"A": A[0:32, 0:32], "x": x[:32], "y_acc": np.zeros(32)})
    assert res.stats["tiling"]["run_cycles"] == alone.cycles
    np.testing.assert_allclose(res.outputs["y"], A @ x)


def prog_block():
    from fuseflow.samml.graph import Program
    p = compile_text(SPMV.format(n=64, m=64), tiles={"i": 32, "j": 32}).program
    q = Program(p.name, None, p.config)
    for t in p.tensors.values():
        q.tensors[t.name] = t
    q.kernels = p.kernels
    return q


def test_ragged_last_tile_and_hbm2_contract():
    A = _sparse(70, 70, 0.1, 7)
    x = np.random.default_rng(4).standard_normal(70)
    prog = compile_text(SPMV.format(n=70, m=70), tiles={"i": 32}).program
    res = tiled.run(prog, {"A": A, "x": x}, memory="hbm2")
    c = res.stats["tiling"]["contract"]
    assert (c["word_bytes"], c["latency"]) == (32, 100)
    ddr = tiled.contract_for(prog.tiling, "ddr4")
    assert (ddr.word_bytes, ddr.latency) == (16, 80)
    assert tiled.retime(res.stats["steps"], tiled.contract_for(prog.tiling, "hbm2")) == res.cycles
    assert tiled.retime(res.stats["steps"], ddr) == tiled.run(prog, {"A": A, "x": x}, memory="ddr4").cycles
    np.testing.assert_allclose(res.outputs["y"], A @ x, rtol=1e-12, atol=1e-12)


def test_auto_tiling_respects_the_budget():
    A = _sparse(400, 400, 0.03, 8)
    x = np.random.default_rng(5).standard_normal(400)
    budget = 40_000
    prog = compile_text(SPMV.format(n=400, m=400), onchip_bits=budget, tile_inputs={"A": A, "x": x}).program
    assert prog.tiling["chosen"] == "auto" and prog.tiling["tile_bits"] <= budget
    res = tiled.run(prog, {"A": A, "x": x})
    assert res.stats["tiling"]["tiles_split"] == 0           # capacities from the data's largest tile
    np.testing.assert_allclose(res.outputs["y"], A @ x, rtol=1e-12, atol=1e-12)
    with pytest.raises(ProgramError, match="hold no tile"):
        compile_text(SPMV.format(n=400, m=400), onchip_bits=100)


@pytest.mark.parametrize("word_bytes, width, k", [(4, 32, 1), (4, 16, 2), (4, 13, 2), (4, 5, 4), (32, 32, 8),
                                                  (32, 20, 8), (32, 13, 16), (64, 3, 128)])
def test_entries_per_beat_is_the_largest_power_of_two_that_fits(word_bytes, width, k):
    c = OffchipContract(word_bytes=word_bytes)
    assert entries_per_beat(width, c) == k and k * width <= word_bytes * 8 < 2 * k * width
    assert entries_per_beat(width, OffchipContract(word_bytes=word_bytes, pack=0)) == 1
    rng = np.random.default_rng(width)
    raw = [int(v) for v in rng.integers(0, 1 << width, 3 * k + 1)]
    words = pack_beats(raw, width, c)
    assert len(words) == beats(len(raw), width, c) == 4 and all(0 <= w < 1 << (8 * word_bytes) for w in words)
    assert unpack_beats(words, len(raw), width, c) == raw
    with pytest.raises(FuseFlowError, match="do not fit a 32-bit beat"):
        entries_per_beat(40, OffchipContract(word_bytes=4))


def test_packed_beats_move_fewer_beats_than_entries():
    """HBM2's 32-byte beats carry 8 values and 16 coordinates of a 256 x 256 SpMV: the loads take about 1/8 of the
    beats of one entry per beat, the runs are the same, and the bytes moved are the beats."""
    A = _sparse(256, 256, 0.06, 12)
    x = np.random.default_rng(6).standard_normal(256)
    packed = compile_text(SPMV.format(n=256, m=256), tiles={"i": 64}).program
    single = compile_text(SPMV.format(n=256, m=256), tiles={"i": 64}, dma="pack=0").program
    a = tiled.run(packed, {"A": A, "x": x}, memory="hbm2")
    b = tiled.run(single, {"A": A, "x": x}, memory="hbm2")
    ta, tb = a.stats["tiling"], b.stats["tiling"]
    assert ta["run_cycles"] == tb["run_cycles"] and a.cycles < b.cycles
    assert 6 * ta["bytes_read"] < tb["bytes_read"] < 12 * ta["bytes_read"]
    step = a.stats["steps"][0]
    assert step.widths["A.vals"] == 32 and step.beats(tiled.contract_for(packed.tiling, "hbm2"))[-1] > 0
    np.testing.assert_allclose(a.outputs["y"], A @ x, rtol=1e-12, atol=1e-12)


def test_min_tiles_streams_a_program_that_fits():
    A = _sparse(1024, 1024, 0.01, 13)
    x = np.random.default_rng(7).standard_normal(1024)
    src = SPMV.format(n=1024, m=1024)
    assert compile_text(src, onchip_bits=1 << 24, tile_inputs={"A": A, "x": x}).program.tiling is None
    res = compile_text(src, onchip_bits=1 << 24, tile_inputs={"A": A, "x": x}, min_tiles=8)
    t = res.program.tiling
    assert res.reports["tiling"].fits and t["dims"]["i"]["size"] == 128 and t["dims"]["i"]["tiles"] == 8
    assert "j" not in t["dims"] and t["kernels"][0]["resident"] == ["x"]
    np.testing.assert_allclose(tiled.run(res.program, {"A": A, "x": x}).outputs["y"], A @ x, rtol=1e-12, atol=1e-12)
    # rows are not split below 64
    small = compile_text(SPMV.format(n=100, m=100), onchip_bits=1 << 24, min_tiles=8).program
    assert small.tiling["dims"]["i"]["size"] == 64


def test_untiled_compile_is_unchanged():
    src = SPMV.format(n=100, m=90)
    assert compile_text(src).program.tiling is None
    assert json.dumps(compile_text(src).program.to_json()) == json.dumps(
        compile_text(src, tiles=None, onchip_bits=None).program.to_json())


def test_over_capacity_tiles_split_recursively():
    A = _sparse(64, 64, 0.05, 9).tolil()
    A[3, :] = 1.0                            # one skewed row: its tile holds far more than the others
    A = A.tocsr()
    x = np.ones(64)
    prog = compile_text(SPMV.format(n=64, m=64), tiles={"i": 16, "j": 32}).program
    prog.tensors["A"].capacity = [16, 20, 20]      # what a budget sized for the typical tile would declare
    res = tiled.run(prog, {"A": A, "x": x})
    assert res.stats["tiling"]["tiles_split"] >= 1
    np.testing.assert_allclose(res.outputs["y"], A @ x)
    prog.tensors["A"].capacity = [16, 0, 0]        # no tile, however small, holds an entry
    with pytest.raises(FuseFlowError, match="cannot be split further"):
        tiled.run(prog, {"A": A, "x": x})


# ---- the contract against a cycle-by-cycle model ---------------------------------------------------------------
def brute_read(address, beats, c):
    """Cycle by cycle: ARs one per cycle while fewer than ``outstanding`` bursts are in flight, beats in order."""
    if beats <= 0:
        return 0
    todo = bursts(address, beats, c)
    issued = []                      # AR cycle of each burst
    done_at = {}                     # burst -> cycle its last beat arrived
    beat_burst, beat_left = 0, todo[0]
    cycle = 0
    while len(done_at) < len(todo):
        in_flight = [b for b in range(len(issued)) if b not in done_at or done_at[b] >= cycle]
        in_flight = [b for b in range(len(issued)) if b not in done_at]
        if len(issued) < len(todo) and len(in_flight) < c.outstanding and \
                (not issued or issued[-1] < cycle):
            issued.append(cycle)
        # one beat per cycle, of the oldest unfinished burst, once its latency has passed
        if beat_burst < len(issued) and cycle >= issued[beat_burst] + c.latency:
            beat_left -= 1
            if beat_left == 0:
                done_at[beat_burst] = cycle
                beat_burst += 1
                if beat_burst < len(todo):
                    beat_left = todo[beat_burst]
        cycle += 1
        # a burst whose last beat arrived in cycle t frees its slot for an AR in t + 1 (checked next cycle)
    return max(done_at.values()) + 1


def brute_write(address, beats, c):
    if beats <= 0:
        return 0
    todo = bursts(address, beats, c)
    b_at = []                         # cycle of each burst's B
    cycle = STORE_SETUP               # the on-chip reads before the first AW/W
    for i, n in enumerate(todo):
        while sum(1 for t in b_at if t >= cycle) >= c.outstanding:     # wait for a B (slot free the cycle after)
            cycle += 1
        cycle += n                    # n W beats, one per cycle
        b_at.append(cycle - 1 + c.latency)
    return max(b_at) + 1


def brute_tiled(steps, c):
    """Double buffering by events on one port, cycle by cycle: loads of tile t+1 once tile t runs, tile t's store
    once it ran, tile t+1's run once its loads and tile t's store are done."""
    if c.buffers == 1:                # plus the sequencer's cycles per tile and per run
        return sum(a + b + s + TILE_OVERHEAD for a, b, s in steps) + RUN_OVERHEAD
    if not steps:
        return RUN_OVERHEAD
    steps = [tuple(x + d for x, d in zip(step, OVERLAP_OVERHEAD)) for step in steps]   # the sequencer's cycles
    n = len(steps)
    port_jobs = [("load", 0)]
    for i in range(1, n):
        port_jobs += [("load", i), ("store", i - 1)]
    port_jobs.append(("store", n - 1))
    load_end, run_start, run_end, store_end = {}, {}, {}, {}
    cycle, job, left = 0, 0, None
    while job < len(port_jobs) or len(run_end) < n:
        # runs: start when loads and the previous store are done
        for i in range(n):
            if i not in run_start and i in load_end and (i == 0 or (i - 1) in store_end) and \
                    (i == 0 or (i - 1) in run_end):
                run_start[i] = cycle
            if i in run_start and i not in run_end and cycle - run_start[i] >= steps[i][1]:
                run_end[i] = cycle
        if job < len(port_jobs):
            kind, i = port_jobs[job]
            ready = (i == 0 or (i - 1) in run_start) if kind == "load" else i in run_end
            if ready:
                if left is None:
                    left = steps[i][0] if kind == "load" else steps[i][2]
                if left == 0:
                    (load_end if kind == "load" else store_end)[i] = cycle
                    job, left = job + 1, None
                    continue
                left -= 1
        cycle += 1
        if cycle > 10 ** 6:
            raise AssertionError("no progress")
    return max(max(store_end.values()), max(run_end.values())) + RUN_OVERHEAD


CONTRACTS = [OffchipContract(), OffchipContract(word_bytes=32, latency=100, burst=64, outstanding=4),
             OffchipContract(latency=1, burst=1, outstanding=1), OffchipContract(latency=7, burst=3, outstanding=2),
             OffchipContract(word_bytes=64, latency=3, burst=256, outstanding=8)]


@pytest.mark.parametrize("c", CONTRACTS, ids=lambda c: f"w{c.word_bytes}l{c.latency}b{c.burst}o{c.outstanding}")
@pytest.mark.parametrize("address, beats", [(0, 0), (0, 1), (0, 64), (0, 65), (4092, 3), (4000, 200), (0, 1000),
                                            (12, 777)])
def test_read_write_cycles_match_a_cycle_by_cycle_model(c, address, beats):
    assert read_cycles(address, beats, c) == brute_read(address, beats, c)
    assert write_cycles(address, beats, c) == brute_write(address, beats, c)


@pytest.mark.parametrize("steps", [[], [(5, 10, 3)], [(0, 0, 0), (0, 0, 0)], [(10, 3, 2), (10, 3, 2), (1, 50, 9)],
                                   [(4, 40, 4)] * 5, [(30, 5, 7), (0, 12, 0), (8, 0, 3), (2, 2, 2)]])
@pytest.mark.parametrize("buffers", [1, 2])
def test_tiled_cycles_match_a_cycle_by_cycle_model(steps, buffers):
    c = OffchipContract(buffers=buffers)
    assert tiled_cycles(steps, c) == brute_tiled(steps, c)


def test_double_buffered_tiled_cycles_by_hand():
    """buffers 2 on three tiles (load, run, store) = (10, 20, 5), (30, 8, 4), (6, 6, 2), worked by hand with the
    sequencer's (2, 4, 2) per tile: (12, 24, 7), (32, 12, 6), (8, 10, 4). Tile 0 loads 0-12 and runs 12-36; tile
    1 loads 12-44 (during tile 0's run), tile 0 stores 44-51 (its run ended at 36, the port was busy until 44);
    tile 1 runs 51-63, tile 2 loads 51-59, tile 1 stores 63-69, tile 2 runs 69-79 and stores 79-83; + 1."""
    c = OffchipContract(buffers=2)
    assert OVERLAP_OVERHEAD == (2, 4, 2) and sum(OVERLAP_OVERHEAD) == TILE_OVERHEAD
    assert tiled_cycles([(10, 20, 5), (30, 8, 4), (6, 6, 2)], c) == 84
    assert tiled_cycles([(10, 20, 5)], c) == tiled_cycles([(10, 20, 5)], OffchipContract(buffers=1)) == 44
    assert tiled_cycles([], c) == RUN_OVERHEAD


def test_an_untiled_program_is_refused_in_one_line():
    prog = compile_text("program p\ntensor a(4) : dense\ntensor b(4) : dense\nc(i) = a(i) * b(i)\n").program
    with pytest.raises(FuseFlowError, match="has no tiling section"):
        tiled.run_tiled(prog, {"a": np.ones(4), "b": np.ones(4)})


@pytest.mark.slow
@pytest.mark.parametrize("case", ["spmv-2e6", "gcn-cora"])
def test_issue41_programs_compile_tiled_at_one_mbit_and_simulate_to_numpy(tmp_path, case):
    """Issue 41's first Done-means line, by the command line: SpMV with 2 x 10^6 nonzeros and Cora's GCN layer
    compile with ``--onchip-bits 1048576`` (and ``--inputs``: sizes fitted to the data) into tiled graphs and
    simulate with ``--memory hbm2`` to NumPy's result (``--check``, and the written outputs against SciPy/NumPy)."""
    import subprocess
    import sys
    if case == "spmv-2e6":
        n = 2_000_000 // 15                      # 15 nonzeros per row, as benchmarks/tiling_bench.py
        A = sp.random(n, n, density=2e6 / n / n, format="csr", random_state=np.random.default_rng(0))
        x = np.random.default_rng(1).uniform(-1, 1, n)
        src, ins, out, golden = SPMV.format(n=n, m=n), {"A": A, "x": x}, "y", A @ x
    else:
        from fuseflow.datasets import load
        from fuseflow.models.data import _from_torch_csr
        g = load("cora")
        A, X = g.scipy_adjacency().tocsr(), _from_torch_csr(g.features).tocsr()
        W = np.random.default_rng(0).uniform(-0.1, 0.1, (X.shape[1], 16))
        n, f = X.shape
        src, ins, out = GCN.format(n=n, f=f, h=16), {"A": A, "X": X, "W": W}, "H"
        golden = np.maximum(A @ (X @ W), 0)
    from fuseflow.tensors import save_npz
    (tmp_path / "p.ff").write_text(src)
    save_npz(tmp_path / "data.npz", ins)
    files = [str(tmp_path / "data.npz")]
    run = [sys.executable, "-m", "fuseflow.compiler", "compile", str(tmp_path / "p.ff"), "-o", str(tmp_path / "out"),
           "--onchip-bits", "1048576", "--fuse", "none", "--inputs", *files]   # sizes fitted to the data
    subprocess.run(run, check=True, capture_output=True)
    graph = json.loads((tmp_path / "out" / "graph.json").read_text())
    assert graph["tiling"]["tile_bits"] <= 1048576 and sum(d["tiles"] for d in graph["tiling"]["dims"].values()) > 2
    res = subprocess.run([sys.executable, "-m", "fuseflow.sim", "run", str(tmp_path / "out" / "graph.json"),
                          "--inputs", *files, "--memory", "hbm2", "--check", "--outputs", str(tmp_path / "o.npz")],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    np.testing.assert_allclose(np.load(tmp_path / "o.npz")[out], golden, rtol=1e-9, atol=1e-9)
