"""Every dataflow order ``--list-orders`` prints compiles when it is given back with ``--order KERNEL=...``, and the
program then matches NumPy (issue 42, item 1): the residual GCN of the issue, the filter that leaves out an order
the rest of the program cannot follow, and random programs (hypothesis)."""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from fuseflow.compiler import EinsumProgram, compile_program, list_orders
from fuseflow.compiler import __main__ as cli
from fuseflow.compiler.fusion import KernelPlan, replayable_orders
from fuseflow.errors import ProgramError

from compiler_harness import random_tensor, run_and_check
from compiler_randprog import random_programs

# H = relu(A X W) + X with A stored by columns: the aggregation T reduces k outermost, so T is its own kernel at
# every granularity and lists two orders, k,i,j (T stored by rows) and k,j,i (by columns)
RESIDUAL_GCN = """program residual_gcn
tensor A(6, 6) : csc
tensor X(6, 4) : dense
tensor W(4, 4) : dense
fuse {
  T(i,j) = A(i,k) * X(k,j)
  H(i,j) = relu(T(i,k) * W(k,j)) + X(i,j)
}
"""


def _listed(capsys, path, fuse):
    """{kernel: [orders]} as ``fuseflow compile --list-orders`` prints them."""
    assert cli.main(["compile", str(path), "--fuse", fuse, "--list-orders"]) == 0
    out, kernel = {}, None
    for line in capsys.readouterr().out.splitlines():
        m = re.match(r"kernel (\S+): ", line)
        if m:
            kernel = m.group(1)
            out[kernel] = []
        elif line.startswith("    ") and kernel is not None:
            out[kernel].append(tuple(line.split()[0].split(",")))
    return out


@pytest.mark.parametrize("fuse", ["none", "regions", "full"])
def test_residual_gcn_every_listed_order_compiles_and_matches_numpy(fuse, tmp_path, capsys):
    path = tmp_path / "residual_gcn.ff"
    path.write_text(RESIDUAL_GCN)
    listed = _listed(capsys, path, fuse)
    assert listed["T"] == [("k", "i", "j"), ("k", "j", "i")]       # the orders of the report
    ir = EinsumProgram.parse(RESIDUAL_GCN).to_ir()
    rng = np.random.default_rng(1)
    inputs = {"A": random_tensor((6, 6), 0.4, rng), "X": random_tensor((6, 4), 1.0, rng),
              "W": random_tensor((4, 4), 1.0, rng)}
    for kernel, orders in listed.items():
        for order in orders:
            res, _ = run_and_check(ir, inputs, fuse=fuse, order={kernel: order})
            assert [p.order for p in res.plans if isinstance(p, KernelPlan) and p.out == kernel] == [order]
    # and on the command line, checked against NumPy there
    assert cli.main(["compile", str(path), "--fuse", fuse, "--order", "T=k,j,i", "--check", "--mode", "float"]) == 0
    assert "check: matches NumPy" in capsys.readouterr().out


def test_an_order_the_rest_cannot_follow_is_left_out_and_named():
    """replayable_orders compiles the program once per layout of the kernel's output and drops the orders of a
    layout the program refuses, saying why (here a stand-in compiler refuses T stored by columns)."""
    ir = EinsumProgram.parse(RESIDUAL_GCN).to_ir()
    res = compile_program(ir, fuse="regions")
    t = next(p for p in res.plans if isinstance(p, KernelPlan) and p.out == "T")
    calls = []

    def compile_with(order):
        calls.append(order)
        if order == ("k", "j", "i"):
            raise ProgramError("line 7", "stand-in refusal")
        return compile_program(ir, fuse="regions", order={"T": order})
    kept, left_out = replayable_orders(t, t.orders()[0], compile_with)
    assert kept == [("k", "i", "j")] and calls == [("k", "j", "i")]     # the selected layout is not recompiled
    assert left_out == [((1, 0), 1, "line 7: stand-in refusal")]
    # the real compiler accepts both
    kept, left_out = replayable_orders(t, t.orders()[0],
                                       lambda o: compile_program(ir, fuse="regions", order={"T": o}))
    assert kept == [("k", "i", "j"), ("k", "j", "i")] and left_out == []


def _inputs(rp, ir):
    rng = np.random.default_rng(7)
    return {t.name: random_tensor(t.shape, rp.densities[t.name], rng)
            for t in ir.tensors.values() if t.role == "input"}


def _check_listed(rp, fuse, per_kernel, tally):
    ir = EinsumProgram.parse(rp.text).to_ir()
    try:
        res = compile_program(ir, fuse=fuse)
    except ProgramError as exc:                 # rare (tests/compiler/test_compiler_random.py bounds it)
        assert "\n" not in str(exc)
        return
    inputs = _inputs(rp, ir)
    for p, orders, _, _ in list_orders(ir, res, 50, fuse):
        if orders is None:
            continue
        others = [o for o in orders if tuple(o) != tuple(p.order)][:per_kernel]
        for order in others:
            # a listed order must compile (a ProgramError fails the test) and match NumPy
            r, _ = run_and_check(ir, inputs, fuse=fuse, order={p.out: order})
            assert [q.order for q in r.plans if isinstance(q, KernelPlan) and q.out == p.out] == [tuple(order)]
            tally["orders"] += 1


# the default run does not shrink (a failure prints the whole program; shrinking re-simulates a lot)
FAST = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True,
            phases=[Phase.explicit, Phase.generate])


def test_listed_orders_of_random_programs_compile_and_match_numpy():
    tally = {"orders": 0}

    @settings(max_examples=40, **FAST)
    @given(random_programs(max_stmts=3, sizes=(2, 3)), st.sampled_from(["none", "regions", "full"]))
    def run(rp, fuse):
        _check_listed(rp, fuse, 2, tally)
    run()
    assert tally["orders"] >= 10                # the programs do have other orders to give back


@pytest.mark.slow
def test_listed_orders_of_random_programs_long():
    tally = {"orders": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(random_programs(), st.sampled_from(["none", "regions", "full"]))
    def run(rp, fuse):
        _check_listed(rp, fuse, 4, tally)
    run()
