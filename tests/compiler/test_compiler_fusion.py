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
        T(i,k,m) = A(i,j) * B(k,l) * C(m,n)
    """)
    all_sorts = list(topological_sorts(kp.pog, kp.rank))
    assert len(all_sorts) == 90                  # 6! / 2^3
    assert all_sorts == list(topological_sorts(kp.pog, kp.rank))
    assert all_sorts[0] == ("i", "k", "m", "j", "l", "n")      # rank: output indices first
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


def test_outer_swap_of_order3_gets_a_general_copy():
    """Swapping the outer two levels of an order-3 tensor (not an inner swap): the general transpose kernel
    (one order-3 spacc, group 3) builds the copy."""
    src = """
        tensor B(3,4,5) : ccc
        tensor C(4,3,5) : ccc
        T(i,j,k) = B(i,j,k) * C(j,i,k)
    """
    for fuse in ("none", "full"):
        res, _ = run_and_check(src, fuse=fuse)
        (tp,) = [p for p in res.plans if isinstance(p, TransposePlan)]
        assert (tp.src, tp.dst_mode_order, tp.cheap) == ("C", (1, 0, 2), False)
        assert res.program.tensors[tp.dst].mode_order == [1, 0, 2]
        (acc,) = [n for n in res.program.kernels[0].nodes.values() if n.op == "spacc"]
        assert (acc.params["order"], acc.params["group"]) == (3, 3)
        assert any(n.startswith("permuted copy of C (mode order 1,0,2)") for n in res.kernels[0].notes)


@pytest.mark.parametrize("target", [(0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])
def test_each_order3_permutation_is_chosen(target):
    """A view of B whose indices are listed so that only B stored with ``target`` meets C(i,j,k)'s order:
    the fusion pass picks exactly that permutation (the inner swap with the cheap kernel)."""
    idx = [None] * 3
    for lv, d in enumerate(target):
        idx[d] = "ijk"[lv]
    (tp, kp) = plans(f"""
        tensor C(2,3,4) : ccc
        tensor B({','.join(str({'i': 2, 'j': 3, 'k': 4}[x]) for x in idx)}) : cdc
        T(i,j,k) = C(i,j,k) + B({','.join(idx)})
    """)
    assert isinstance(tp, TransposePlan) and tp.dst_mode_order == target
    assert tp.cheap == (target == (0, 2, 1))
    assert kp.order == ("i", "j", "k")


def test_permutation_follows_the_pog_without_the_view():
    """The copy's mode order is the view's indices in a topological order of the other constraints: with
    A(k,i) and B(i,j) fixed (k->i->j), the conflicting view C(j,k,i) needs C stored k,i,j = (1,2,0)."""
    ps = plans("""
        tensor A(3,3) : dcsr
        tensor B(3,3) : dcsr
        tensor C(3,3,3) : ccc
        T(k,i,j) = A(k,i) * B(i,j) * C(j,k,i)
    """)
    (tp,) = [p for p in ps if isinstance(p, TransposePlan)]
    assert tp.src == "C" and tp.dst_mode_order == (1, 2, 0)


def test_transpose_kernel_structure():
    """The general kernel: one scan per source level, one dim-1 dense scan per target level, every target
    coordinate held down to its unit level (crd_hold chains), values through the last unit's references,
    one spacc of order n and group n sized by the target dimensions; its output FIFOs hold a whole fibre."""
    ir = EinsumProgram.parse("""
        tensor B(2,3,4) : ccc
        tensor C(3,2,4) : ccc
        T(i,j,k) = B(i,j,k) * C(j,i,k)
    """).to_ir()
    prog = compile_program(ir, fuse="full").program
    k = prog.kernels[0]
    ops = [n.op for n in k.nodes.values()]
    units = [n for n in k.nodes.values() if n.op == "level_scan" and n.params.get("tensor") is None]
    assert len(units) == 3 and all(n.params["format"] == "dense" and n.params["dim"] == 1 for n in units)
    assert ops.count("level_scan") == 6
    # C stored (j,i,k) is copied to (i,j,k) = mode order (1,0,2): i is held from source level 1 down to unit 0
    # (2 holds), j from level 0 down to unit 1 (4), k from level 2 down to unit 2 (3)
    assert ops.count("crd_hold") == 2 + 4 + 3
    (acc,) = [n for n in k.nodes.values() if n.op == "spacc"]
    assert acc.params == {**acc.params, "order": 3, "group": 3, "dim": 4, "dim_outer": 3, "dim_outer1": 2}
    (arr,) = [n for n in k.nodes.values() if n.op == "array"]
    assert k.driver(arr.id, "ref").src.node == units[-1].id
    for port, depth in (("crd_inner", 6), ("val", 6), ("crd_outer0", 5), ("crd_outer1", 4)):
        assert k.output_stream(acc.id, port).depth == depth
    # the cheap kernels build every order-2 / inner-swap copy unless told otherwise
    prog2 = compile_program(ir, fuse="full", general_transposes=True).program
    assert [n.op for n in prog2.kernels[0].nodes.values()] == ops


def test_order2_and_inner_swap_through_the_general_kernel():
    for src in ("""
        tensor A(4,3) : dcsr
        T(i,j) = A(i,j) * A(j,i)
    """.replace("A(4,3)", "A(4,4)"), """
        tensor B(3,4,5) : ccc
        tensor C(3,5,4) : ccc
        T(i,j,k) = B(i,j,k) * C(i,k,j)
    """):
        for fuse in ("none", "full"):
            res, _ = run_and_check(src, fuse=fuse, general_transposes=True)
            tps = [p for p in res.plans if isinstance(p, TransposePlan)]
            assert len(tps) == 1 and tps[0].cheap
            accs = [n for n in res.program.kernels[0].nodes.values() if n.op == "spacc"]
            assert [a.params["group"] for a in accs] == [len(tps[0].shape)]


def test_order3_reduction_uses_an_order3_accumulator():
    """sum over l with i, j, k inside it (A(l,i), B(l,j,k) store l outermost): one spacc of order 3."""
    src = """
        tensor A(3,4) : dcsr
        tensor B(3,2,3) : csf
        T(i,j,k) = A(l,i) * B(l,j,k)
    """
    res, _ = run_and_check(src)
    (kp,) = res.kernels
    assert kp.order == ("l", "i", "j", "k")
    (acc,) = [n for n in res.program.kernels[0].nodes.values() if n.op == "spacc"]
    assert acc.params["order"] == 3 and acc.params.get("group", 1) == 1
    assert (acc.params["dim_outer1"], acc.params["dim_outer"], acc.params["dim"]) == (4, 2, 3)
    table = res.tables["T"]
    assert [table.cells[(x, "T0")].split()[0] for x in "ijk"] == ["Red3_l[crd2]", "Red3_l[crd1]", "Red3_l[crd0]"]


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


def test_listed_orders_can_be_given_back_after_fallbacks():
    """T2's kernel is only found after materialising T1 and then copying A (mode order 2,1,0); every valid
    order of that final kernel, given back as the kernel's order, compiles to the same kernel (the user's order
    must not fail on an earlier attempt whose constraints differ) and matches NumPy."""
    src = """
        tensor A(3,3,3) : cdc
        tensor C(3,3) : dc
        T1(l,i,j) = A(k,j,l) * C(j,i)
        T2(l) = max[j](relu(T1(k,j,i) * A(j,k,l)))
    """
    res = compile_text(src, fuse="full")
    kp = [p for p in res.kernels if p.out == "T2"][0]
    orders, _ = valid_orders(kp)
    assert len(orders) >= 2 and kp.order == orders[0]
    for o in orders:
        got, _ = run_and_check(src, fuse="full", order={"T2": o})
        assert [p.order for p in got.kernels if p.out == "T2"] == [o]


@pytest.mark.parametrize("src", [
    # a temporary of a reduction no order can lower inside the kernel (T1_t1), under a fused consumer
    """
        tensor C(3,3,3) : ccc
        tensor D(3,3,3) : ccc
        tensor E(3,3) : dcsr
        fuse {
          T1(l,k) = C(i,j,k) * D(j,k,l)
          H(l,m) = T1(l,k) * E(k,m)
        }
    """,
    # a temporary of a sum over two indices outside the output (H_t1), order-3 operands
    """
        tensor X(4,5)
        tensor Att(2,4,3)
        tensor WO(2,3,5)
        H(i,m) = X(i,m) + Att(h,i,e) * WO(h,e,m)
    """,
])
def test_orders_of_compiler_made_kernels_can_be_given_back(src):
    """docs/compiler.md: every order --list-orders prints, for any kernel, including the temporaries and
    materialised producers the compiler creates, can be given back: as that kernel's order (Python API) and as
    the command line's --order chain (each kernel takes the indices it has)."""
    for fuse in ("none", "regions", "full"):
        res = compile_text(src, fuse=fuse)
        made = [p for p in res.kernels if p.name not in ("H",)]
        assert made, "the program must make the compiler create a kernel"
        for p in res.kernels:
            for o in valid_orders(p)[0]:
                got, _ = run_and_check(src, fuse=fuse, order={p.out: o})
                assert [q.order for q in got.kernels if q.out == p.out] == [o]
                chain = compile_text(src, fuse=fuse, order=o)
                assert [q.order for q in chain.kernels if q.out == p.out] == [o]
