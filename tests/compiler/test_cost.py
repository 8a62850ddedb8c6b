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
