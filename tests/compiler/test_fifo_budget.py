"""The depths pass over its budget (issue 45): deadlock floors on top, the rest given where it saves cycles."""

import json
import subprocess
import sys

import numpy as np
import pytest

from fuseflow.compiler import CompileOptions, compile_text
from fuseflow.compiler.__main__ import render_depths
from fuseflow.compiler.passes.depths import (DEFAULT_BUDGET_BITS, assign_depths, deadlock_floors, fifo_bits,
                                             fit_budget, slot_bits)
from fuseflow.samml import kernels
from fuseflow.sim import run
from fuseflow.sim.check import compare, golden, tolerance
from fuseflow.tensors.random_data import random_sparse

#: B in CSC puts j outside i: x is summed by a sparse accumulator over i, whose floors hold all of x
SPMV_CSC = """program spmv
tensor B(200, 200) : csc density 0.05
tensor c(200) : sv density 0.05
x(i) = B(i,j) * c(j)
"""

GCN = """program gcn
tensor A(30, 30) : csr
tensor X(30, 18) : dense
tensor W(18, 12) : dense
fuse {
  T(i,j) = A(i,k) * X(k,j)
  H(i,h) = relu(T(i,j) * W(j,h))
}
"""


def _depths(program):
    return {(k.name, s.id): s.depth for k in program.kernels for s in k.streams.values()}


def _floors(program):
    return {(k.name, sid): d for k in program.kernels for sid, d in deadlock_floors(k).items()}


def _simulate(program, inputs):
    """Cycles of a run whose outputs agree with NumPy."""
    res = run(program, inputs)
    assert not compare(res.outputs, golden(program, inputs), *tolerance("float"))
    return res.cycles


def _spmv_inputs():
    rng = np.random.default_rng(7)
    return {"B": random_sparse(rng, (200, 200), 0.05), "c": random_sparse(rng, (200,), 0.3)}


def test_floors_over_the_budget_leave_the_other_channels_their_depths():
    # the spacc's floors (202 deep) alone take more than this budget; before, every other channel went back to
    # depth 2 (the --fifo-depth 2 graph) and the kernel ran several times slower
    free = compile_text(SPMV_CSC, name="spmv", passes={"budget_bits": 1 << 30})
    rep = free.reports["depths"]
    floor_bits = sum(d * slot_bits(free.program, free.program.kernels[0].streams[sid])
                     for (_, sid), d in _floors(free.program).items())
    budget = floor_bits // 2
    assert rep["wanted_bits"] - floor_bits <= budget < floor_bits
    got = compile_text(SPMV_CSC, name="spmv", passes={"budget_bits": budget})
    rep = got.reports["depths"]
    assert rep["floor_bits"] == floor_bits and not rep["over_budget"] and rep["trimmed"] == 0
    assert rep["total_bits"] == fifo_bits(got.program) <= budget + floor_bits
    assert _depths(got.program) == _depths(free.program)
    fallback = compile_text(SPMV_CSC, name="spmv", passes={"fifo_depth": 2})
    for key, d in _floors(got.program).items():
        assert got.program.kernels[0].streams[key[1]].depth == d
    inputs = _spmv_inputs()
    cycles, old = _simulate(got.program, inputs), _simulate(fallback.program, inputs)
    assert cycles == _simulate(free.program, inputs)
    assert cycles * 2 < old


@pytest.fixture(scope="module")
def gcn():
    """The fused GCN layer at its wanted depths, at depth 2 (floors kept), and its inputs."""
    free = compile_text(GCN, name="gcn", passes={"budget_bits": 1 << 30}).program
    floor_only = compile_text(GCN, name="gcn", passes={"budget_bits": 0})
    return free, floor_only, kernels.random_inputs(free, density=0.3, seed=1)


@pytest.mark.parametrize("share", [0.25, 0.5, 0.75])
def test_a_tight_budget_is_respected_and_spent_where_it_saves_cycles(gcn, share):
    free, floor_only, inputs = gcn
    rep0 = floor_only.reports["depths"]
    base = rep0["total_bits"] - rep0["floor_bits"]          # every other channel at depth 2
    budget = base + int(share * (rep0["wanted_bits"] - rep0["floor_bits"] - base))
    got = compile_text(GCN, name="gcn", passes={"budget_bits": budget})
    rep = got.reports["depths"]
    assert rep["total_bits"] == fifo_bits(got.program) <= budget + rep["floor_bits"] and not rep["over_budget"]
    wanted, floors = _depths(free), _floors(got.program)
    for key, d in _depths(got.program).items():
        assert max(2, floors.get(key, 0)) <= (d or 2) <= (wanted[key] or 2), key
    rows = {(r["kernel"], r["stream"]): r for r in rep["channels"]}
    assert rep["trimmed"] == sum(r["depth"] < r["wanted"] for r in rows.values()) > 0
    assert all(rows[key]["wanted"] == (d or 2) for key, d in wanted.items())
    cycles, old, best = (_simulate(p, inputs) for p in (got.program, floor_only.program, free))
    assert best <= cycles < old
    # the table marks the channels that got less than they wanted
    table = render_depths(rep)
    assert f"{rep['trimmed']} channel(s) got less than they asked for" in table
    assert table.count("  < ") == rep["trimmed"]



def test_the_full_budget_is_the_smallest_that_keeps_every_depth(gcn):
    free, floor_only, _ = gcn
    full = floor_only.reports["depths"]["full_budget_bits"]
    kept = compile_text(GCN, name="gcn", passes={"budget_bits": full})
    assert kept.reports["depths"]["trimmed"] == 0 and _depths(kept.program) == _depths(free)
    short = compile_text(GCN, name="gcn", passes={"budget_bits": full - 1}).reports["depths"]
    assert short["trimmed"] > 0 and short["full_budget_bits"] == full


def test_the_greedy_fills_the_busiest_channel_first():
    p = compile_text(GCN, name="gcn", passes={"budget_bits": 1 << 30}).program
    k = p.kernels[0]
    deep = [s for s in k.streams.values() if (s.depth or 2) > 4 and not deadlock_floors(k).get(s.id)]
    busy, idle = deep[0], deep[1]
    want = busy.depth
    for s in k.streams.values():                 # every channel at depth 2, but the two
        if s is not busy and s is not idle:
            s.depth = None
    idle.depth = want
    start = fifo_bits(p) - (want - 2) * (slot_bits(p, busy) + slot_bits(p, idle))
    # room for the busy channel's extra slots only: the estimate sends them all there
    budget = start + (want - 2) * slot_bits(p, busy)
    tokens = {(k.name, busy.id): 1000.0, (k.name, idle.id): 1.0}
    assert fit_budget(p, {}, budget, tokens=tokens) <= budget
    assert busy.depth == want and (idle.depth or 2) < want


def test_a_board_sets_the_default_budget():
    p = kernels.spmv(6, 6, fmt="csr")
    assert assign_depths(p, CompileOptions())["budget_bits"] == DEFAULT_BUDGET_BITS
    assert assign_depths(p, CompileOptions(board="ulx3s-85f"))["budget_bits"] == 83640 * 8 // 10
    assert assign_depths(p, CompileOptions(board="icebreaker"))["budget_bits"] == 528
    assert assign_depths(p, CompileOptions(board="icebreaker", budget_bits=1000))["budget_bits"] == 1000


def test_compiler_cli_board_budget(tmp_path):
    src = tmp_path / "spmv.ff"
    src.write_text(SPMV_CSC)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "fuseflow.compiler", "compile", str(src), "-o", str(out)]
    p = subprocess.run(cmd + ["--board", "ulx3s-85f"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "fifos.json").read_text())["budget_bits"] == 66912
    p = subprocess.run(cmd + ["--board", "nope"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].startswith("error: --board: unknown board")
