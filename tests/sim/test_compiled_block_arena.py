"""The compiled engine's block arena reclaims blocks (issue #39, "Memory and scale"): a block that no channel,
output pipeline, op state or writer holds any more is freed at the scheduler's next collection and its slot is
reused, so a blocked run's arena stays bounded by what is live, not by the blocks made
(``SimResult.stats["block_arena"]``, docs/simulator.md "Memory"). Runs that collect as often as the scheduler
polls, with every freed block overwritten, still agree bit for bit with the Python engine."""

import numpy as np
import pytest

from fuseflow.sim import compiled, run
from fuseflow.sim.differential import compare

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")


def bspmv(n, b=4, density=0.5, seed=1):
    """Block-sparse SpMV x = B c (B bcsr:b, a fraction ``density`` of its blocks stored), as sim_bench's case."""
    import scipy.sparse as sp

    from fuseflow.compiler import compile_text
    from fuseflow.reports.suites import BLOCK_PROGRAMS
    prog = compile_text(BLOCK_PROGRAMS["bspmv"].format(n=n, b=b), name="bspmv").program
    rng = np.random.default_rng(seed)
    grid = n // b
    pattern = sp.random(grid, grid, density=density, format="csr", random_state=seed)
    blocks = rng.uniform(-1, 1, (pattern.nnz, b, b))
    B = sp.bsr_matrix((blocks, pattern.indices, pattern.indptr), shape=(n, n)).tocsr()
    return prog, {"B": B, "c": rng.uniform(-1, 1, n)}


def test_blocked_spmv_arena_stays_bounded():
    """Blocked SpMV with 512 block rows: the ops make one block per stored block (and more), the arena holds a
    small fraction of them at once; the result is B @ c."""
    prog, inputs = bspmv(2048)
    res = run(prog, inputs, engine="compiled")
    a = res.stats["block_arena"]
    assert a["collections"] >= 3 and a["freed"] > 0
    assert a["blocks_made"] > 200_000
    assert a["peak_blocks"] * 5 < a["blocks_made"], a
    assert a["live_blocks"] <= a["peak_blocks"]
    # B's blocks (4 x 4 float64 each) are read in place: the arena's own storage is a fraction of theirs
    assert a["bound_blocks"] > 100_000 and a["storage_bytes"] * 4 < a["bound_blocks"] * 16 * 8, a
    np.testing.assert_allclose(res.outputs["x"], inputs["B"] @ inputs["c"], rtol=1e-12, atol=1e-12)


def test_peak_does_not_grow_with_the_run(monkeypatch):
    """Nine times the blocks made, about the same peak (the output's blocks aside): the peak follows what is
    live, not the length of the run."""
    monkeypatch.setattr(compiled, "ARENA_MIN_VALUES", 4096)
    got = {}
    for n in (400, 1200):
        prog, inputs = bspmv(n)
        got[n] = run(prog, inputs, engine="compiled").stats["block_arena"]
    small, large = got[400], got[1200]
    assert large["blocks_made"] > 8 * small["blocks_made"]
    # the output x holds n / 4 B-vectors at the end (200 more in the large run)
    assert large["peak_blocks"] < 1.5 * small["peak_blocks"] + 200, got
    assert large["peak_blocks"] * 20 < large["blocks_made"], got


def _cases():
    from fuseflow.compiler import compile_text
    from fuseflow.reports.suites import BLOCK_ATTENTION, BLOCK_PROGRAMS
    return {
        "bspmv": lambda: compile_text(BLOCK_PROGRAMS["bspmv"].format(n=256, b=2), name="bspmv").program,
        "bspmm": lambda: compile_text(BLOCK_PROGRAMS["bspmm"].format(n=64, b=2), name="bspmm").program,
        "battention": lambda: compile_text(BLOCK_ATTENTION.format(n=64, d=8, b=2), name="battention").program,
        "browsum": lambda: compile_text("program p\ntensor A(256,256) : bcsr:4\nx(i) = sum[j](A(i,j))\n",
                                        name="p").program,
        "bexp": lambda: compile_text("program p\ntensor A(128,128) : bcsr:2\nX(i,j) = exp(A(i,j)) * 2\n",
                                     name="p").program,
        "bspmv_lanes": lambda: compile_text(BLOCK_PROGRAMS["bspmv"].format(n=256, b=2), name="bspmv",
                                            parallel={"i": 2}).program,
    }


def _inputs(prog, seed=3, density=0.5):
    from fuseflow.samml import kernels
    rng = np.random.default_rng(seed)
    out = {}
    for t in prog.inputs:
        v = kernels.random_sparse(rng, tuple(t.shape), 0.9)
        if len(t.shape) == 2 and t.block:
            b = t.block[0]
            v = v * np.kron(rng.random((t.shape[0] // b, t.shape[1] // b)) < density, np.ones((b, b)))
        out[t.name] = v
    return out


@pytest.mark.parametrize("depth", (None, 1))
@pytest.mark.parametrize("name", sorted(_cases()))
def test_collecting_at_every_poll_agrees_with_python(name, depth, monkeypatch):
    """Collections at every poll of the scheduler (every 256 rounds), freed blocks overwritten until reused, at
    the default FIFO depth and at depth 1 (ops wait for room holding a result): outputs, cycles and every
    counter as the Python engine's."""
    monkeypatch.setattr(compiled, "ARENA_MIN_VALUES", 0)
    prog = _cases()[name]()
    inputs = _inputs(prog)
    modes = ("float", "fixed") if name in ("bspmv", "bspmm") else ("float",)
    for mode in modes:
        assert compare(prog, inputs, mode=mode, fifo_depth=depth) == []
    a = run(prog, inputs, engine="compiled", fifo_depth=depth).stats["block_arena"]
    assert a["collections"] > 0 and a["freed"] > 0, a


def test_a_traced_run_collects_nothing(monkeypatch):
    """trace=True keeps every token pushed, so nothing is collected; the traces are the Python engine's."""
    monkeypatch.setattr(compiled, "ARENA_MIN_VALUES", 0)
    prog = _cases()["bspmv"]()
    inputs = _inputs(prog)
    rb = run(prog, inputs, engine="compiled", trace=True)
    assert rb.stats["block_arena"]["collections"] == 0
    assert compare(prog, inputs, trace=True) == []


def test_block_arena_stats_only_for_compiled_blocked_runs():
    from fuseflow.samml import kernels
    prog = _cases()["browsum"]()
    inputs = _inputs(prog)
    assert "block_arena" not in run(prog, inputs, engine="python").stats
    a = run(prog, inputs, engine="compiled").stats["block_arena"]
    assert set(a) == set(compiled.ARENA_COUNTERS)
    assert a["bound_blocks"] > 0 and a["storage_bytes"] > 0
    plain = run(kernels.spmv(8, 8, "csr"), {"B": np.eye(8), "c": np.ones(8)}, engine="compiled")
    assert "block_arena" not in plain.stats


def test_blocks_read_in_place_from_a_read_only_tensor():
    """The arrays' blocks are read where the packed tensor holds them (not copied): a read-only one works, and
    is left as it was."""
    from fuseflow.sim.engine import Env, pack_inputs
    prog, inputs = bspmv(64)
    want = run(prog, inputs, engine="python").outputs["x"]
    store = pack_inputs(prog, inputs, Env("float"))
    before = store["B"].vals.copy()
    store["B"].vals.setflags(write=False)
    got = run(prog, store, engine="compiled")
    assert got.outputs["x"].tobytes() == want.tobytes()
    assert np.array_equal(store["B"].vals, before)
