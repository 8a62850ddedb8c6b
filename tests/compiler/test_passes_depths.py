"""The depths pass (fuseflow.compiler.passes.depths): floors, reconvergent paths, budget, override, report."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fuseflow.compiler import CompileOptions, compile_text
from fuseflow.compiler.passes import PIPELINE, run_passes
from fuseflow.compiler.passes.depths import (BURST_DEPTH, DEFAULT_BUDGET_BITS, assign_depths, channel_bits,
                                             deadlock_floors, fifo_bits, serializer_inputs, structural_depths)
from fuseflow.samml import kernels
from fuseflow.compiler.passes.lanes import LANE_SLACK
from fuseflow.samml.registry import op_latency
from fuseflow.sim import run

PROGRAMS = os.path.join(os.path.dirname(__file__), "..", "..", "fuseflow", "programs")


def test_pipeline_order():
    assert [s.name for s in PIPELINE if s.kind == "graph"] == ["locate", "drop_empty", "lanes", "blocks",
                                                               "capacities", "widths", "depths"]


def test_channel_bits_counts_every_consumer_at_the_token_width():
    p = kernels.spmspm_gustavson(6, 6, 6, passes={"profile": False})
    s = p.kernels[0].streams["scan_B1.crd"]          # crd: 16-bit data + ctrl; two consumers
    assert len(s.dsts) == 2
    assert channel_bits(p, s) == s.depth * 2 * 17
    v = p.kernels[0].streams["mul.out"]              # val: 32-bit data + ctrl
    assert channel_bits(p, v) == (v.depth or 2) * 1 * 33
    assert fifo_bits(p) == sum(channel_bits(p, x) for x in p.kernels[0].streams.values())


def test_structural_depths_follow_the_longest_reconvergent_path():
    # Gustavson: scan_B1.crd feeds repsig_A_j (the next op) and the spacc, which it reaches through
    # repsig_A_j -> repeat_A_j -> mul -> spacc: the spacc arrives 3 ops later, the pipelined mul (latency 6)
    # counting 1 + 5/2 ops, so depth 2 + 2 x (2 + 3.5) = 13
    assert op_latency("alu", {"op": "mul"}) == 6
    p = kernels.spmspm_gustavson(6, 6, 6, passes={"fifo_depth": 2})
    got = structural_depths(p.kernels[0], 2)
    assert got["scan_B1.crd"] == 13
    assert "scan_B1.ref" not in got                  # ref -> vals_B -> mul: the short branch is not on it
    # mul's other input: repsig_A_j -> repeat_A_j is two ops, vals_B (a memory reader, latency 2) counts 1.5:
    # half an op of slack, depth 2 + 1
    assert got["vals_B.val"] == 3


def test_a_branch_beside_a_divider_holds_its_pipeline_beyond_the_op_cap():
    # GraphSAGE's mean: the row's neighbour sum goes through a divider (latency W + 2 = 34) while the other
    # branch waits beside it; the op-count part of the slack is capped, the tokens the divider holds are not
    from fuseflow.compiler.passes.depths import MAX_DEPTH, STRUCTURAL_MAX
    from fuseflow.sim import engine
    text = """
    tensor A(12, 12) : csr
    tensor X(12, 6) : dense
    tensor d(12) : dense
    tensor W(6, 4) : dense
    fuse {
      M(i,j) = A(i,k) * X(k,j)
      D(i,j) = M(i,j) / d(i)
      Y(i,h) = D(i,j) * W(j,h)
    }
    """
    res = compile_text(text, fuse="full")
    depths = [s.depth or 2 for s in res.program.kernels[0].streams.values()]
    assert max(depths) > STRUCTURAL_MAX and max(depths) <= MAX_DEPTH
    rng = np.random.default_rng(0)
    A = (rng.random((12, 12)) < 0.4) * rng.uniform(-1, 1, (12, 12))
    data = {"A": A, "X": rng.uniform(-1, 1, (12, 6)), "d": rng.uniform(1, 4, 12), "W": rng.uniform(-1, 1, (6, 4))}
    got = engine.run(res.program, data, mode="fixed")
    deep = compile_text(text, fuse="full", passes={"fifo_depth": MAX_DEPTH * 2})
    bound = engine.run(deep.program, data, mode="fixed").cycles
    assert got.cycles <= 1.1 * bound, (got.cycles, bound)   # at the cap alone: well over 2x
    want = (A @ data["X"] / data["d"][:, None]) @ data["W"]
    assert np.allclose(engine.run(res.program, data, mode="float").outputs["Y"], want, atol=1e-9)


def test_an_intersection_merged_by_a_union_runs_ahead():
    # A * B + A: the intersection's outputs meet A again at a union; at depth 2 the union waits on the
    # intersection's gaps (reductions.ff at 6x: 1502 cycles, 1335 with these depths)
    p = compile_text("tensor A(24,24) : dcsr\ntensor B(24,24) : dcsr\nP(i,j) = A(i,j) * B(i,j) + A(i,j)\n",
                     passes={"profile": False}).program
    k = p.kernels[0]
    merged = [s for s in k.streams.values() if k.nodes[s.src.node].op == "intersect"
              and any(k.nodes[d.node].op == "union" for d in s.dsts)]
    assert merged and all(s.depth == BURST_DEPTH for s in merged)
    base = compile_text("tensor A(24,24) : dcsr\ntensor B(24,24) : dcsr\nP(i,j) = A(i,j) * B(i,j) + A(i,j)\n",
                        passes={"fifo_depth": 2}).program
    inputs = kernels.random_inputs(p, density=0.3, seed=1)
    fast, slow = run(p, inputs, mode="fixed"), run(base, inputs, mode="fixed")
    np.testing.assert_array_equal(fast.outputs["P"], slow.outputs["P"])
    assert fast.cycles < slow.cycles


def test_deadlock_floors_of_a_sparse_accumulator():
    p = kernels.spmspm_outer(5, 4, 7, passes={"profile": False})
    floors = deadlock_floors(p.kernels[0])
    assert floors == {"spacc_k.crd_inner": 9, "spacc_k.val": 9, "spacc_k.crd_outer0": 7}


def _ratio(p, seed=0, density=0.3):
    res = run(p, kernels.random_inputs(p, density=density, seed=seed), mode="fixed")
    return res.cycles / max(res.stats["kernels"][0]["streams"].values())


def test_default_depths_bring_gustavson_to_its_stream_bound():
    # issue 9: 2.5x the busiest stream at depth 2; the pass's depths (sized on synthetic data) reach <= 1.3
    base = kernels.spmspm_gustavson(40, 40, 40, passes={"fifo_depth": 2})
    sized = kernels.spmspm_gustavson(40, 40, 40)
    assert _ratio(base) > 1.8
    assert _ratio(sized) <= 1.3


def test_budget_trims_extra_depth_but_keeps_floors():
    p = kernels.spmspm_outer(5, 4, 7, passes={"profile": False})
    floors_bits = fifo_bits(p)
    q = kernels.spmspm_outer(5, 4, 7, passes={"profile": False, "budget_bits": 0})
    rep = q.reports["depths"]
    assert rep["over_budget"] and rep["budget_bits"] == 0
    for sid, d in deadlock_floors(q.kernels[0]).items():
        assert q.kernels[0].streams[sid].depth == d
    others = [s for s in q.kernels[0].streams.values() if s.id not in deadlock_floors(q.kernels[0])]
    assert all((s.depth or 2) == 2 for s in others)
    assert rep["total_bits"] == fifo_bits(q) < floors_bits
    # the floors are charged on top of the budget, which bounds the rest: halfway between the other channels at
    # the default depth and at the depths they want, they get some of their depth back and stay within it
    on_top = rep["floor_bits"]
    assert on_top == sum(d * channel_bits(q, q.kernels[0].streams[sid]) // q.kernels[0].streams[sid].depth
                         for sid, d in deadlock_floors(q.kernels[0]).items()) > 0
    budget = (fifo_bits(q) - on_top + floors_bits - on_top) // 2
    r = kernels.spmspm_outer(5, 4, 7, passes={"profile": False, "budget_bits": budget})
    assert fifo_bits(q) < fifo_bits(r) <= budget + on_top and not r.reports["depths"]["over_budget"]
    for sid, d in deadlock_floors(r.kernels[0]).items():
        assert r.kernels[0].streams[sid].depth == d


def test_report_gives_the_bits_the_structure_asks_for():
    # what the channels cost before the budget trimmed them; that budget keeps every depth
    p = kernels.spmspm_outer(5, 4, 7, passes={"profile": False})
    q = kernels.spmspm_outer(5, 4, 7, passes={"profile": False, "budget_bits": 0})
    assert q.reports["depths"]["wanted_bits"] == fifo_bits(p) == p.reports["depths"]["wanted_bits"]
    r = kernels.spmspm_outer(5, 4, 7, passes={"profile": False, "budget_bits": fifo_bits(p)})
    assert [s.depth for s in r.kernels[0].streams.values()] == [s.depth for s in p.kernels[0].streams.values()]


def test_fifo_depth_overrides_every_channel():
    p = kernels.spmspm_gustavson(6, 6, 6, passes={"fifo_depth": 5})
    assert p.config["fifo_depth"] == 5
    assert {s.depth for s in p.kernels[0].streams.values()} <= {5, 8}       # 8: the spacc's floor (6 + 2)
    assert all(r["why"] in ("override", "floor") for r in p.reports["depths"]["channels"])


def test_report_rows_add_up():
    p = kernels.spmv(10, 10, fmt="csr")
    rep = p.reports["depths"]
    assert rep["budget_bits"] == DEFAULT_BUDGET_BITS
    assert rep["total_bits"] == sum(r["bits"] for r in rep["channels"]) == fifo_bits(p)
    assert {r["stream"] for r in rep["channels"]} == set(p.kernels[0].streams)


def test_pass_works_on_a_loaded_graph():
    # graph -> graph: a graph without depths (depth 2 everywhere) gets the same depths as the builder's
    # (without the locate pass, which keeps the depths of the channels it rewires)
    p = kernels.spmspm_gustavson(6, 6, 6, passes={"profile": False, "locate": False})
    doc = p.to_json()
    for k in doc["kernels"]:
        for s in k["streams"]:
            s.pop("depth", None)
    from fuseflow.samml import Program
    q = Program.from_json(doc)
    assign_depths(q, CompileOptions(profile=False))
    assert {s.id: s.depth for s in q.kernels[0].streams.values()} == \
           {s.id: s.depth for s in p.kernels[0].streams.values()}


SPMM = """program spmm
tensor A(20, 20) : csr density 0.2
tensor X(20, 6) : dense
T(i,j) = A(i,k) * X(k,j)
order i,k,j
"""


def test_compiler_declares_density_and_writes_fifos_json(tmp_path):
    r = compile_text(SPMM)
    assert r.program.tensors["A"].density == 0.2
    assert r.reports["depths"]["total_bits"] == fifo_bits(r.program)
    src = tmp_path / "spmm.ff"
    src.write_text(SPMM)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(src), "-o", str(out),
                        "--fifo-budget", "4000"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    fifos = json.loads((out / "fifos.json").read_text())
    graph = json.loads((out / "graph.json").read_text())
    assert fifos["budget_bits"] == 4000 and fifos["total_bits"] <= 4000
    depths = {s["id"]: s.get("depth", graph["config"]["fifo_depth"]) for s in graph["kernels"][0]["streams"]}
    assert {r["stream"]: r["depth"] for r in fifos["channels"]} == depths
    p = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(src), "-o", str(out),
                        "--fifo-depth", "3"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    graph = json.loads((out / "graph.json").read_text())
    assert graph["config"]["fifo_depth"] == 3
    assert all(s.get("depth", 3) in (3, 8) for s in graph["kernels"][0]["streams"])   # 8: spacc floor 6 + 2


@pytest.mark.parametrize("bad, msg", [(["--fifo-depth", "0"], "error: --fifo-depth: must be at least 1"),
                                      (["--fifo-budget", "-1"], "error: --fifo-budget: must be at least 0")])
def test_compiler_cli_bad_depth_options(tmp_path, bad, msg):
    src = tmp_path / "spmm.ff"
    src.write_text(SPMM)
    p = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(src), "-o", str(tmp_path / "o"),
                        *bad], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == msg
    assert not (tmp_path / "o").exists()


def test_density_must_be_a_fraction():
    from fuseflow.errors import ProgramError
    with pytest.raises(ProgramError, match="density of A must be in"):
        compile_text(SPMM.replace("density 0.2", "density 2"))


def test_profile_on_synthetic_inputs_on_request():
    # the kernel at depth 2 everywhere (2.5x its busiest stream at n = 160): the profile runs the sizer on
    # synthetic inputs of the declared shapes and density, and the depths it finds shorten the run
    slow = kernels.spmspm_gustavson(16, 16, 16, density=0.3, passes={"fifo_depth": 2})
    doc = slow.to_json()
    from fuseflow.samml import Program
    from fuseflow.compiler.passes.depths import profile_depths
    depths, rep = profile_depths(Program.from_json(doc))
    assert rep["runs"] > 1 and rep["ratio"] > 1.1
    assert rep["sized_cycles"] < rep["cycles"] and depths["main"]
    p = kernels.spmspm_gustavson(16, 16, 16, density=0.3, passes={"profile": True})
    assert p.reports["depths"]["profile"]["cycles"] > 0


GUSTAVSON_256 = """program spmspm
tensor A(256, 256) : csr
tensor B(256, 256) : csr
C(i,j) = A(i,k) * B(k,j)
order i,k,j
"""


@pytest.mark.parametrize("schedule", [{"i": 4}, {"i": 8}, {"i": 2, "k": 2}])
def test_lanes_are_charged_on_top_of_the_budget(schedule):
    # Gustavson 256 x 256: the one-lane kernel fits the default budget; before lanes were charged on top, four
    # lanes' spacc floors (258 deep each) took the budget and every other channel went back to depth 2
    one = compile_text(GUSTAVSON_256, name="spmspm").reports["depths"]
    assert one["wanted_bits"] <= DEFAULT_BUDGET_BITS and one["lane_bits"] == 0
    got = compile_text(GUSTAVSON_256, name="spmspm", parallel=schedule)
    free = compile_text(GUSTAVSON_256, name="spmspm", parallel=schedule, passes={"budget_bits": 1 << 24})
    depth = {s.id: s.depth for k in got.program.kernels for s in k.streams.values()}
    assert depth == {s.id: s.depth for k in free.program.kernels for s in k.streams.values()}
    rep = got.reports["depths"]
    assert rep["total_bits"] > DEFAULT_BUDGET_BITS and not rep["over_budget"]
    assert rep["total_bits"] <= DEFAULT_BUDGET_BITS + rep["lane_bits"]
    # every lane's channel has the depth of the same channel in lane 0
    k = got.program.kernels[0]
    copies = [s for s in k.streams.values() if s.src.node.endswith(("_l1", "_l3"))]
    assert copies
    for s in copies:
        assert s.depth == k.output_stream(s.src.node[:-3] + "_l0", s.src.port).depth


def test_lanes_still_trim_their_lane_zero_within_the_budget():
    # a budget the one-lane kernel does not fit trims lane 0, and every other lane follows it; the channels into
    # the serializers, which the one-lane kernel does not have, are charged on top and keep their depth
    got = compile_text(GUSTAVSON_256, name="spmspm", parallel={"i": 4}, passes={"budget_bits": 0})
    free = compile_text(GUSTAVSON_256, name="spmspm", parallel={"i": 4}, passes={"budget_bits": 1 << 24})
    k, wide = got.program.kernels[0], free.program.kernels[0]
    floors = deadlock_floors(k)
    merged = {s.id for s in serializer_inputs(got.program)}
    assert len(merged) == 16       # 2 serializers (C's j coordinates, its values) x 4 lanes x key and payload
    for s in k.streams.values():
        if s.id in merged:
            assert s.depth == wide.streams[s.id].depth >= LANE_SLACK, s.id
        else:
            assert (s.depth or 2) == max(2, floors.get(s.id, 0)), s.id


def test_serializer_inputs_do_not_squeeze_the_kernels_without_lanes():
    # the decoder on its heads h: the one-lane design fits the budget; the kernels h does not reach (the layer
    # norms, the feed-forward) keep every depth of the one-lane compile (when the serializers' inputs were
    # fitted to the budget they were trimmed, and F and Out ran 37% slower)
    text = open(os.path.join(PROGRAMS, "decoder.ff")).read()
    one = compile_text(text, name="decoder", fuse="none")
    assert one.reports["depths"]["wanted_bits"] <= DEFAULT_BUDGET_BITS
    got = compile_text(text, name="decoder", fuse="none", parallel={"h": 2})
    laneless = [k for k in got.program.kernels if not any(n.op == "serialize" for n in k.nodes.values())]
    assert {"F", "Out", "Xn", "Y"} <= {k.name for k in laneless}
    before = {k.name: k for k in one.program.kernels}
    for k in laneless:
        assert {s.id: s.depth for s in k.streams.values()} == \
            {s.id: s.depth for s in before[k.name].streams.values()}, k.name


def _shared_union_program(n_terms, extra=(), depth_override=None):
    """y(i) = c(i) * [d(i) *] (b1(i) + ... + bn(i)): one intersect meets c (and d) with the union's coordinates
    once per union input, so n_terms of its inputs share the union's crd stream."""
    names = [f"b{t}" for t in range(1, n_terms + 1)]
    decl = "".join(f"tensor {x}(40) : sparse\n" for x in ["c", *extra, *names])
    factors = " * ".join(f"{x}(i)" for x in ["c", *extra])
    text = decl + f"y(i) = {factors} * ({' + '.join(f'{x}(i)' for x in names)})\n"
    passes = {"profile": False} if depth_override is None else {"fifo_depth": depth_override}
    return compile_text(text, passes=passes).program, ["c", *extra], names


def _golden(inputs, factors, terms):
    return np.prod([inputs[f] for f in factors], axis=0) * np.sum([inputs[t] for t in terms], axis=0)


def test_intersect_inputs_sharing_a_stream_get_their_group_size():
    p, _, _ = _shared_union_program(5)
    k = p.kernels[0]
    (node,) = [n for n in k.nodes.values() if n.op == "intersect"]
    assert node.params["arity"] == 6
    floors = deadlock_floors(k)
    shared = {k.driver(node.id, port).id for i in range(1, 6) for port in (f"crd{i}", f"ref{i}")}
    assert {sid: floors.get(sid) for sid in shared} == dict.fromkeys(shared, 5)
    assert k.driver(node.id, "crd0").id not in floors          # c's scanner has its own stream


@pytest.mark.parametrize("n_terms, extra", [(3, ()), (5, ()), (4, ("d",)), (6, ("d",))])
def test_shared_intersect_inputs_never_deadlock_at_their_floor(n_terms, extra):
    # every other channel at depth 2: only the floors keep the union from blocking on a lagging input while a
    # leading one waits empty (with d, the group's two ring neighbours differ, so one end of it may lead alone)
    p, factors, terms = _shared_union_program(n_terms, extra, depth_override=2)
    for seed in range(12):
        for density in (0.1, 0.5):
            inputs = kernels.random_inputs(p, density=density, seed=seed)
            res = run(p, inputs)
            np.testing.assert_allclose(res.outputs["y"], _golden(inputs, factors, terms), rtol=1e-12)


def test_shared_intersect_inputs_deadlock_below_their_floor():
    from fuseflow.errors import DeadlockError
    p, _, _ = _shared_union_program(5, depth_override=2)
    for s in p.kernels[0].streams.values():
        s.depth = 2
    with pytest.raises(DeadlockError, match="waits"):
        run(p, kernels.random_inputs(p, density=0.5, seed=0))
