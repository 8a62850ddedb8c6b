"""Cross-expression fusion: views and their merging, the partial-order graph, cycles (un-inlining, permuted
copies), order enumeration (deterministic, capped), hoisting of reductions the lowering cannot fuse."""

import numpy as np
import pytest

from fuseflow.compiler import EinsumProgram, compile_program, compile_text
from fuseflow.compiler.fusion import Compiler, KernelPlan, TransposePlan, topological_sorts, valid_orders
from fuseflow.errors import ProgramError

from compiler_harness import run_and_check


def plans(text, fuse="full", order=None):
    ir = EinsumProgram.parse(text).to_ir()
    c = Compiler(ir, fuse, order)
    return c.run()


def test_inlining_renames_reductions_and_maps_orders():
    (kp,) = plans("""
        tensor A(4,4) : dcsr
        tensor X(4,3) : dense
        tensor W(3,2) : dense
        fuse {
          T(i,k) = A(i,j) * X(j,k)
          order i,j,k
          H(i,h) = T(i,k) * W(k,h)
        }
    """)
    assert kp.inlined == [0]
    assert sorted(kp.pog.nodes) == ["h", "i", "j", "k"]
    labels = {(u, v): d["labels"] for u, v, d in kp.pog.edges(data=True)}
    assert ("order", 0) in labels[("i", "j")] and ("order", 0) in labels[("j", "k")]
    assert ("view", ("A", ("i", "j"))) in labels[("i", "j")]
    # T's reduction index j is free in H, so it keeps its name; a clash gets a fresh one
    (kp2,) = plans("""
        tensor A(4,4) : dcsr
        tensor X(4,4) : dense
        fuse {
          T(i,k) = A(i,j) * X(j,k)
          H(i,j) = T(i,k) * X(k,j)
        }
    """)
    assert set(kp2.pog.nodes) == {"i", "j", "k", "j2"}


def test_equal_views_are_merged():
    res = compile_text("""
        tensor A(5,5) : dcsr
        tensor B(5,5) : dcsr
        T(i,j) = A(i,j) * A(i,j) * B(i,j)
    """)
    scans = [n for n in res.program.kernels[0].nodes.values()
             if n.op == "level_scan" and n.params.get("tensor") == "A"]
    assert len(scans) == 2                       # one scanner per level, shared by both uses
    assert [c for c in res.tables["T"].columns if c.startswith("A")] == ["A"]
    run_and_check("""
        tensor A(5,5) : dcsr
        tensor B(5,5) : dcsr
        T(i,j) = A(i,j) * A(i,j) * B(i,j) + A(i,j)
    """)


def test_enumeration_is_deterministic_and_capped():
    (kp,) = plans("""
        tensor A(2,2) : dd
        tensor B(2,2) : dd
        tensor C(2,2) : dd
        T(i,j,k,l,m,n) = A(i,j) * B(k,l) * C(m,n)
    """)
    all_sorts = list(topological_sorts(kp.pog, kp.rank))
    assert len(all_sorts) == 90                  # 6! / 2^3
    assert all_sorts == list(topological_sorts(kp.pog, kp.rank))
    assert all_sorts[0] == ("i", "j", "k", "l", "m", "n")
    orders, capped = valid_orders(kp, limit=10)
    assert capped and len(orders) == 10 and orders[0] == all_sorts[0]


def test_user_order_selects_and_constrains():
    text = """
        tensor A(5,6) : dcsr
        tensor X(6,4) : dcsc
        T(i,j) = A(i,k) * X(k,j)
    """
    (kp,) = plans(text)
    assert kp.order == ("i", "j", "k")
    (kp,) = plans(text, order=("j", "i"))
    assert kp.order == ("j", "i", "k")
    orders, _ = valid_orders(kp)
    assert orders == [("j", "i", "k")]


def test_multiuse_uninlines_then_permutes():
    ps = plans("""
        tensor B(5,5) : dcsr
        tensor C(5,5) : dcsc
        fuse {
          A(i,j) = B(i,k) * C(k,j)
          order i,j,k
          E(i,j) = B(i,k) * A(k,j)
          order i,j,k
        }
    """)
    kinds = [(p.kind, p.name) for p in ps]
    assert kinds == [("expr", "A"), ("transpose", "transpose_A"), ("expr", "E")]
    e = ps[-1]
    assert any(n.startswith("materialised A") for n in e.notes)
    assert any(n.startswith("permuted copy of A") for n in e.notes)
    assert e.views[("A", ("k", "j"))].source == "A_T"


def test_two_views_of_one_input_get_a_transpose():
    res, _ = run_and_check("""
        tensor A(5,5) : dcsr
        T(i,j) = A(i,j) * A(j,i)
    """)
    assert [p.kind for p in res.plans] == ["transpose", "expr"]
    assert res.program.tensors["A_T"].mode_order == [1, 0]


def test_order3_inner_swap_copy():
    src = """
        tensor B(3,4,5) : ccc
        tensor C(3,5,4) : ccc
        T(i,j,k) = B(i,j,k) * C(i,k,j)
    """
    res, _ = run_and_check(src)
    tps = [p for p in res.plans if isinstance(p, TransposePlan)]
    assert len(tps) == 1 and tps[0].dst_mode_order in ((0, 2, 1),)
    run_and_check(src, fuse="none", rng=np.random.default_rng(5))


def test_outer_swap_of_order3_is_rejected():
    with pytest.raises(ProgramError) as info:
        compile_text("""
            tensor B(3,4,5) : ccc
            tensor C(4,3,5) : ccc
            T(i,j,k) = B(i,j,k) * C(j,i,k)
        """)
    assert "permuted copy" in info.value.why and "\n" not in info.value.why


def test_unlowerable_reduction_is_materialised():
    # sum_i C(i,j,k) has i outside j, k: its result cannot join T0 at j inside one kernel
    src = """
        tensor C(3,3,3) : ccc
        tensor T0(3,3,3) : 
        tensor D(3,3,3) : ccc
        T1(l,k) = C(i,j,k) * D(j,k,l)
    """
    res, _ = run_and_check(src)
    names = [p.name for p in res.plans]
    assert names == ["T1_t1", "T1"]
    assert any("materialised sum[i]" in n for n in res.kernels[-1].notes)
    assert res.program.tensors["T1_t1"].role == "intermediate"


def test_global_iteration_needs_sum_of_products():
    with pytest.raises(ProgramError):
        compile_program(EinsumProgram.parse("tensor A(3,3) : dcsr\nT(i) = relu(A(i,j))\n"), iteration="global")
