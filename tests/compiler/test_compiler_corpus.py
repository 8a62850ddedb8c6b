"""The compiler's test corpus: every example program (and a few extra kernels) compiled at fusion none, a
partial region split and full, and at every valid dataflow order of its kernels, simulated in float mode
and compared with NumPy."""

import glob
import os

import numpy as np
import pytest

from fuseflow.compiler import EinsumProgram, compile_program, list_orders, parse_file
from fuseflow.compiler.fusion import Compiler, KernelPlan, valid_orders

from compiler_harness import inputs_for, run_and_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the ML model examples are tested on model-scale data by test_compiler_models.py (the decoder is too large
#: for every order at every granularity here)
MODELS = ("decoder", "autoencoder", "graphsage2")
EXAMPLES = sorted(f for f in glob.glob(os.path.join(ROOT, "fuseflow", "programs", "*.ff"))
                  if os.path.splitext(os.path.basename(f))[0] not in MODELS)
NAMES = [os.path.splitext(os.path.basename(f))[0] for f in EXAMPLES]

EXTRA = {
    "spmm_inner": """
        tensor A(6,7) : dcsr
        tensor X(7,5) : dcsc
        T(i,j) = A(i,k) * X(k,j)
    """,
    "spmm_outer": """
        tensor A(6,7) : dcsc
        tensor X(7,5) : dcsr
        T(i,j) = A(i,k) * X(k,j)
    """,
    "gcn_orders": """
        tensor A(6,6) : dcsr
        tensor X(6,4) : dcsc
        tensor W(4,3) : dcsc
        fuse {
          T(i,j) = A(i,k) * X(k,j)
          H(i,h) = relu(T(i,j) * W(j,h))
        }
    """,
    # the residual GCN of issue 42 (H = relu(A X W) + X, A stored by columns): T is a kernel at every granularity
    # and --list-orders lists k,i,j and k,j,i for it
    "residual_gcn": """
        tensor A(6,6) : csc
        tensor X(6,4) : dense
        tensor W(4,4) : dense
        fuse {
          T(i,j) = A(i,k) * X(k,j)
          H(i,j) = relu(T(i,k) * W(k,j)) + X(i,j)
        }
    """,
    "chain_orders": """
        tensor A(5,6) : dcsc
        tensor B(6,4) : dcsr
        tensor C(4,3) : cc:1,0
        fuse {
          E(i,j) = A(i,k) * B(k,j)
          D(i,l) = E(i,j) * C(j,l)
        }
    """,
    "broadcast_union": """
        tensor A(4,5) : dcsr
        tensor b(5) : sv
        tensor c(4) : sv
        T(i,j) = A(i,j) * b(j) + c(i)
    """,
    "exp_div": """
        tensor A(4,5) : dcsr
        tensor B(4,5) : dense
        T(i,j) = exp(A(i,j)) / 3 + A(i,j) / B(i,j)
    """,
    "scalar_sum": """
        tensor A(4,5) : dcsr
        tensor b(4) : sv
        s() = A(i,j) * b(i)
    """,
    "max_sum_mix": """
        tensor A(5,6) : dcsr
        tensor B(5,6) : dcsr
        fuse {
          y(i) = max[j](A(i,j) * B(i,j) + A(i,j))
          z(i) = y(i) + sum[j](A(i,j))
        }
    """,
    "order3": """
        tensor X(3,4,5) : csf
        tensor v(5) : dv
        tensor W(4,3) : dcsr
        fuse {
          Y(i,j) = X(i,j,k) * v(k)
          Z(i,h) = Y(i,j) * W(j,h)
        }
    """,
    # every non-identity permutation of an order-3 tensor: C(i,j,k) fixes i->j->k, so each view of B reads a
    # permuted copy, (0,2,1) (cheap inner swap), (1,0,2), (1,2,0), (2,0,1), (2,1,0) (general kernel)
    "order3_permutations": """
        tensor C(3,3,3) : ccc
        tensor B(3,3,3) : cdc
        tensor w(3) : dv
        fuse {
          T(i,j,k) = C(i,j,k) * (B(i,k,j) + B(j,i,k) + B(k,i,j) + B(j,k,i) + B(k,j,i))
          y(i,j) = T(i,j,k) * w(k)
        }
        z(i) = y(i,j)
    """,
    # reductions outside three free indices: spacc of order 3 (sum and max; Y: with a second reduced level h
    # above it; tensors of order 4 to 6: test_compiler_order6)
    "order3_reduction": """
        tensor A(3,4) : dcsr
        tensor B(3,2,3) : csf
        tensor E(2,3) : dcsr
        tensor F(3,4) : dcsr
        fuse {
          T(i,j,k) = A(l,i) * B(l,j,k)
          Y(i,j,k) = E(h,l) * F(l,i) * B(l,j,k)
        }
        M(i,j,k) = max[l](relu(A(l,i) * B(l,j,k))) + T(i,j,k)
    """,
    # dense operands met by sparse ones: located, not scanned (docs/compiler.md, "The locate pass")
    "spmv_dense": """
        tensor B(9,11) : csr
        tensor c(11) : dv
        x(i) = B(i,j) * c(j)
    """,
    "gcn_dense_factors": """
        tensor A(7,7) : csr
        tensor X(7,5) : dense
        tensor W(5,3) : dense
        H(i,h) = A(i,k) * X(k,j) * W(j,h)
    """,
    "union_then_located": """
        tensor A(5,6) : dcsr
        tensor B(5,6) : dcsr
        tensor D(5,6) : dense
        tensor b(6) : sv
        T(i,j) = (A(i,j) + B(i,j)) * D(i,j)
        Y(i,j) = (D(i,j) + A(i,j)) * B(i,j) * b(j)
    """,
}

# programs also checked in fixed mode (values within 1e-3 of NumPy) and with the general transpose kernel
FIXED = ["order3_permutations", "order3_reduction", "multiuse", "spmv_dense", "gcn_dense_factors", "graphsage",
         "sddmm"]


def load(name):
    if name in EXTRA:
        return EinsumProgram.parse(EXTRA[name], name=name)
    return parse_file(EXAMPLES[NAMES.index(name)])


def partial_regions(ir):
    """A partial split: the file's regions when they do not cover everything in one region, else the
    statements split in two halves."""
    ids = [s.id for s in ir.stmts]
    if ir.regions and not (len(ir.regions) == 1 and sorted(ir.regions[0]) == ids):
        return ir.regions
    half = max(1, len(ids) // 2)
    return [ids[:half], ids[half:]] if len(ids) > 1 else [ids]


ALL = NAMES + list(EXTRA)


@pytest.mark.parametrize("fuse", ["none", "partial", "full"])
@pytest.mark.parametrize("name", ALL)
def test_program(name, fuse):
    ir = load(name).to_ir()
    if fuse == "partial":
        ir.regions = partial_regions(ir)
        fuse = "regions"
    for seed, density in ((0, 0.4), (1, 0.12)):
        rng = np.random.default_rng(seed)
        run_and_check(ir, inputs_for(ir, rng, density), fuse=fuse)


@pytest.mark.parametrize("fuse", ["none", "partial", "full"])
@pytest.mark.parametrize("name", FIXED)
def test_fixed_mode_and_general_transposes(name, fuse):
    ir = load(name).to_ir()
    if fuse == "partial":
        ir.regions = partial_regions(ir)
        fuse = "regions"
    rng = np.random.default_rng(4)
    inputs = inputs_for(ir, rng, 0.4)
    for general in (False, True):
        run_and_check(ir, inputs, fuse=fuse, mode="fixed", rtol=1e-3, atol=1e-3, general_transposes=general)
    run_and_check(ir, inputs, fuse=fuse, general_transposes=True)


def test_order3_corpus_programs_use_what_they_test():
    res = compile_program(load("order3_permutations"), fuse="full")
    targets = sorted(p.dst_mode_order for p in res.plans if p.kind == "transpose")
    assert targets == [(0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]
    accs = sorted((n.params["order"], n.params.get("group", 1)) for k in res.program.kernels
                  for n in k.nodes.values() if n.op == "spacc")
    assert accs == [(2, 1)] + [(3, 3)] * 4          # the inner swap keeps the cheap order-2 kernel
    res = compile_program(load("order3_reduction"), fuse="none")
    orders = sorted(n.params["order"] for k in res.program.kernels for n in k.nodes.values() if n.op == "spacc")
    assert orders == [1, 3, 3, 3]


def _kernel_orders(ir, fuse, cap=12):
    """What --list-orders prints for kernels of up to five indices: (kernel, order) pairs."""
    out = []
    for p, orders, _, _ in list_orders(ir, compile_program(ir, fuse=fuse), cap, fuse):
        if isinstance(p, KernelPlan) and len(p.pog.nodes) <= 5:
            out += [(p.out, o) for o in orders]
    return out


@pytest.mark.parametrize("fuse", ["none", "full"])
@pytest.mark.parametrize("name", ALL)
def test_every_valid_order(name, fuse):
    ir = load(name).to_ir()
    checked = 0
    for out, order in _kernel_orders(ir, fuse):
        rng = np.random.default_rng(3)
        res, _ = run_and_check(ir, inputs_for(ir, rng, 0.3), fuse=fuse, order={out: order})
        got = [p.order for p in res.plans if isinstance(p, KernelPlan) and p.out == out]
        assert got == [order]
        checked += 1
    assert checked >= 1 or name in ("gcn2",)


def test_orders_are_enumerated_for_free_programs():
    ir = load("gcn_orders").to_ir()
    plans = Compiler(ir, "full").run()
    orders, capped = valid_orders(plans[-1])
    assert not capped
    assert orders == [("i", "h", "j", "k"), ("i", "j", "h", "k"), ("i", "j", "k", "h")] or len(orders) >= 2


def test_graphsage_is_one_factored_kernel():
    res = compile_program(load("graphsage"), fuse="full")
    (k,) = res.program.kernels
    ops = [n.op for n in k.nodes.values()]
    # two higher-order reductions (one per contraction) and no order-2 accumulator: factored iteration
    assert ops.count("spacc") == 2
    assert all(n.params.get("order") == 1 for n in k.nodes.values() if n.op == "spacc")
    assert res.kernels[0].order == ("i", "l", "m", "j")


def test_multiuse_gets_a_permuted_copy():
    res = compile_program(load("multiuse"), fuse="full")
    kinds = [p.kind for p in res.plans]
    assert "transpose" in kinds
    t = res.program.tensors["A_T"]
    assert t.mode_order == [1, 0]
    assert any("permuted copy" in n for p in res.kernels for n in p.notes)


def test_masked_exp_iterates_only_the_mask():
    """exp(0) = 1, so exp(S) alone is dense; under a product with a sparse mask the dense iterator is replaced
    by the mask's coordinates (union(S, M) within M)."""
    src = """
        tensor M(6,7) : dcsr
        tensor S(6,7) : dcsr
        E(i,j) = M(i,j) * exp(S(i,j))
        F(i,j) = exp(S(i,j))
    """
    res, _ = run_and_check(src, fuse="none")
    k = {kk.name: kk for kk in res.program.kernels}
    dense = lambda kern: [n for n in kern.nodes.values() if n.op == "level_scan" and n.params.get("tensor") is None]
    assert dense(k["E"]) == []
    assert len(dense(k["F"])) == 2
