"""The cost heuristic against the reference simulator's counters and against closed-form counts."""

import math

import numpy as np
import pytest

from fuseflow.compiler import compile_program, parse_file
from fuseflow.compiler.cost import _uniform_levels, estimate
from fuseflow.samml import kernels
from fuseflow.sim import engine
from fuseflow.dse.experiments import example_path


def test_uniform_levels_closed_form():
    prog = compile_program(parse_file(example_path("chain3"))).program
    a = prog.tensors["A"]                    # 8 x 8 dcsr
    p = 0.25
    rows = 8 * (1 - (1 - p) ** 8)            # non-empty rows
    assert _uniform_levels(a, p) == pytest.approx([rows, 64 * p])


@pytest.mark.parametrize("name", ["gcn", "gcn2", "chain3", "sddmm", "autoencoder"])
@pytest.mark.parametrize("fuse", ["none", "full"])
def test_flops_and_bytes_near_the_simulator(name, fuse):
    prog = compile_program(parse_file(example_path(name)), fuse=fuse).program
    inputs = kernels.random_inputs(prog, density=0.3, seed=7)
    sim = engine.run(prog, inputs).stats
    est = estimate(prog, inputs=inputs)
    assert est.alu_ops == pytest.approx(sim["alu_ops"], rel=0.15)
    assert est.bytes == pytest.approx(sim["mem_read_bytes"] + sim["mem_write_bytes"], rel=0.15)


def test_dense_spmm_is_exact():
    # a fully dense operand pair: every count is deterministic, so the estimate must be exact
    prog = compile_program(parse_file(example_path("gcn")), fuse="none").program
    inputs = kernels.random_inputs(prog, density=1.0, seed=1)
    sim = engine.run(prog, inputs).stats
    est = estimate(prog, inputs=inputs)
    assert est.alu_ops == sim["alu_ops"]
    assert est.bytes == sim["mem_read_bytes"] + sim["mem_write_bytes"]


def test_memory_charge_adds_cycles():
    prog = compile_program(parse_file(example_path("gcn")), fuse="none").program
    d = {"A": 0.2}
    assert estimate(prog, densities=d, memory="hbm2").cycles > estimate(prog, densities=d).cycles


def _program(text):
    from fuseflow.compiler.frontend import EinsumProgram
    return compile_program(EinsumProgram.parse(text), fuse="full").program


def test_an_operand_read_twice_is_not_independent():
    # P = A*B + A co-iterates A with itself: the union is exactly A's pattern (1 - (1 - pq)(1 - p) under
    # independence would be ~21 % more), and each of its positions costs one mul and one add
    prog = _program("program t\ntensor A(40, 40) : dcsr\ntensor B(40, 40) : dcsr\n"
                    "P(i,j) = A(i,j) * B(i,j) + A(i,j)\n")
    p, q = 0.3, 0.3
    est = estimate(prog, densities={"A": p, "B": q})
    assert est.alu_ops == pytest.approx(2 * 40 * 40 * p, rel=0.01)
    inputs = kernels.random_inputs(prog, density=p, seed=3)
    sim = engine.run(prog, inputs).stats
    assert sim["alu_ops"] == 2 * np.count_nonzero(inputs["A"])


def test_a_permuted_copy_keeps_every_entry():
    # Y(i,j) = X(i,j) * W(j,i): W is re-sorted into a copy with the other mode order; the copy's kernel writes
    # W's nonzeros (values and coordinates), nothing merges
    prog = _program("program t\ntensor X(20, 30) : dcsr\ntensor W(30, 20) : dcsr\nY(i,j) = X(i,j) * W(j,i)\n")
    inputs = kernels.random_inputs(prog, density=0.2, seed=5)
    est = estimate(prog, inputs=inputs)
    copy = next(k for k in est.kernels if k["name"].startswith("transpose"))
    nnz = np.count_nonzero(inputs["W"])
    rows = np.count_nonzero(np.count_nonzero(inputs["W"].T, axis=1))
    # values at 8 bytes, coordinates at 2 (a root fibre, the rows, the columns, with their segment entries)
    golden = 8 * nnz + 2 * (nnz + rows + 1) + 2 * (rows + 1 + 1)
    assert copy["write"] == pytest.approx(golden, rel=0.05)


def test_a_mask_over_generated_coordinates_counts_their_overlap():
    # masked_attention's B: a band over BigBird's kept coordinates (dense Q, K: every count is deterministic);
    # each kept (i, j) costs 4 muls and 3 adds over d
    from fuseflow.samml.masks import dense_mask, parse_mask
    prog = compile_program(parse_file(example_path("masked_attention")), fuse="full").program
    inputs = kernels.random_inputs(prog, density=0.3, seed=1)
    est = estimate(prog, inputs=inputs)
    bigbird = dense_mask(parse_mask("bigbird:block=4,window=3,global=1,random=1,seed=0"), 32, 32)
    band = dense_mask(parse_mask("band:w=2"), 32, 32)
    b_kernel = next(k for k in est.kernels if k["name"] == "B")
    assert b_kernel["alu_ops"] == pytest.approx(7 * (bigbird & band).sum())


@pytest.mark.parametrize("name, index", [("spmm", "i"), ("gcn", "i"), ("sddmm", "j"), ("spmv", "i")])
def test_lanes_keep_the_work_and_shorten_the_estimate(name, index):
    # lanes split the work, they do not add to it: FLOPs and bytes match the simulator's counters at 1, 2 and
    # 4 lanes, and the estimated cycles fall with the lanes where the simulated ones do
    src = parse_file(example_path(name))
    inputs = kernels.random_inputs(compile_program(src).program, density=1.0, seed=2)
    est, sim = [], []
    for lanes in (1, 2, 4):
        prog = compile_program(src, parallel={index: lanes} if lanes > 1 else None).program
        assert (lanes > 1) == any(n.op == "serialize" for k in prog.kernels for n in k.nodes.values())
        s = engine.run(prog, inputs)
        e = estimate(prog, inputs=inputs)
        assert e.alu_ops == s.stats["alu_ops"]
        assert e.bytes == s.stats["mem_read_bytes"] + s.stats["mem_write_bytes"]
        est.append(e.cycles)
        sim.append(s.cycles)
    assert sim[0] > sim[1] > sim[2] and est[0] > est[1] > est[2]
    for e, s in zip(est, sim):
        assert e == pytest.approx(s, rel=0.5)


def test_lane_bound_is_the_larger_bound_plus_part_of_the_smaller():
    # a laned kernel's compute bound: the busier of lanes and serializer-side plus LANE_OVERLAP of the other
    from fuseflow.compiler.cost import LANE_OVERLAP, _busiest
    prog = compile_program(parse_file(example_path("spmv")), parallel={"i": 2}).program
    k = prog.kernels[0]
    busy = {n: 1.0 for n in k.nodes}
    busy["ser_write_x_vals"], busy["mul_l0"] = 30.0, 50.0
    assert _busiest(k.graph(), k, busy) == 50.0 + LANE_OVERLAP * 30.0
    busy["write_x_vals"] = 70.0                     # fed by a serializer: on the merge side
    assert _busiest(k.graph(), k, busy) == 70.0 + LANE_OVERLAP * 50.0
    unlaned = compile_program(parse_file(example_path("spmv"))).program.kernels[0]
    assert _busiest(unlaned.graph(), unlaned, {n: float(i) for i, n in enumerate(unlaned.nodes)}) == \
        len(unlaned.nodes) - 1


def test_every_op_of_the_registry_has_exactly_one_cost_rule():
    from fuseflow.compiler.cost import COST_RULES
    from fuseflow.samml.registry import OPS
    assert set(COST_RULES) == set(OPS)
