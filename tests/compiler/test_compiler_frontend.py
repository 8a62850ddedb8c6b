"""Front end: the .ff text format and the Python API give the same IR; bad programs give one-line errors
with line and column."""

import pytest

from fuseflow.compiler import EinsumProgram, compile_program, compile_text
from fuseflow.compiler.ir import Red
from fuseflow.errors import ProgramError

from compiler_harness import run_and_check

GCN = """
# a comment
program gcn
tensor A(6, 6) : csr
tensor X(6, 4)            # dense by default
tensor W(4, 3) : dense
fuse {
  T(i,j) = A(i,k) * X(k,j)
  order i -> k -> j
  H(i,h) = relu(T(i,j) * W(j,h))
}
"""


def test_text_and_api_agree():
    a = EinsumProgram.parse(GCN).to_ir()
    p = EinsumProgram("gcn")
    p.tensor("A", (6, 6), "csr")
    p.tensor("X", (6, 4))
    p.tensor("W", (4, 3), "dense")
    with p.fuse():
        p.statement("T(i,j) = A(i,k) * X(k,j)", order="i,k,j")
        p.statement("H(i,h) = relu(T(i,j) * W(j,h))")
    b = p.to_ir()
    assert a.name == b.name == "gcn"
    assert a.expr_text() == b.expr_text()
    assert a.regions == b.regions == [[0, 1]]
    assert [s.orders for s in a.stmts] == [s.orders for s in b.stmts] == [[("i", "k", "j")], []]
    for name in "AXW":
        assert (a.tensors[name].levels, a.tensors[name].mode_order) == \
               (b.tensors[name].levels, b.tensors[name].mode_order)
    assert a.tensors["A"].levels == ("dense", "compressed")
    assert a.tensors["T"].role == "intermediate" and a.tensors["H"].role == "output"


def test_implicit_and_explicit_reductions():
    ir = EinsumProgram.parse("""
        tensor A(3,4) : dcsr
        tensor B(3,4) : dcsr
        y(i) = max[j](A(i,j)) + A(i,k) * B(i,k)
    """).to_ir()
    rhs = ir.stmts[0].rhs
    reds = [n for n in rhs.walk() if isinstance(n, Red)]
    assert sorted((r.op, r.idx) for r in reds) == [("max", ("j",)), ("sum", ("k",))]


def test_outputs_default_and_explicit():
    ir = EinsumProgram.parse("""
        tensor A(3,3) : dcsr
        T(i,j) = A(i,j) * 2
        U(i,j) = T(i,j) + A(i,j)
        output T
    """).to_ir()
    assert ir.tensors["T"].role == "output" and ir.tensors["U"].role == "output"


def test_order_formats():
    ir = EinsumProgram.parse("""
        tensor A(3,4) : dc:1,0
        tensor B(3,4,5) : ccd:2,0,1
        tensor v(4) : sv
        tensor s() : scalar
        x(i) = A(i,j) * v(j) * s()
        y(i) = B(i,j,k) * v(j)
    """).to_ir()
    assert ir.tensors["A"].mode_order == (1, 0)
    assert ir.tensors["B"].levels == ("compressed", "compressed", "dense")
    assert ir.tensors["B"].mode_order == (2, 0, 1)
    assert ir.tensors["s"].shape == ()


BAD = [
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j) * * A(i,j)\n", "line 2, column 19"),
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j) * Q(i,j)\n", "line 2, column 19: tensor Q is not declared"),
    ("tensor A(3,4) : csr\ntensor B(3,3) : csr\nT(i,j) = A(i,j) * B(i,j)\n", "index j has size"),
    ("tensor A(3,3) : csr\nT(i) = A(i)\n", "has 1 indices but A has order 2"),
    ("tensor A(3,3) : csr\nT(i,k) = A(i,j)\n", "index k of T(i,k) is not used on the right"),
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j)\nT(i,j) = A(j,i)\n", "tensor T is written twice"),
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j)\norder i,q\n", "order names index q"),
    ("tensor A(3,3) : csc\nx(i) = A(i,j)\norder i,j\n", "unsatisfiable dataflow order"),
    ("tensor A(3,3) : csr\nfuse {\nT(i,j) = A(i,j)\n", "line 2: 'fuse {' is never closed"),
    ("tensor A(3,3) : csr\n}\n", "line 2, column 1: '}' without an open"),
    ("tensor A(3,3) : cxr\nT(i,j) = A(i,j)\n", "line 1, column 1: format of A"),
    ("tensor A(3,3) : csr\ntensor A(3,3) : csr\n", "tensor A is declared twice"),
    ("tensor A(3,x) : csr\n", "expected a positive integer dimension"),
    ("tensor A(3,3) : csr\norder i,j\n", "'order' needs a statement before it"),
    ("tensor A(3,3) : csr\nfoo bar\n", "expected a statement"),
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j)\noutput A\n", "output A is an input"),
    ("tensor A(3,3) : csr\ntensor T(3,3) : csr\nT(i,j) = A(i,j)\n", "declared with a format"),
    ("tensor A(3,3) : csr\nfuse {\nT(i,j) = A(i,j)\nbarrier\n}\n", "line 4, column 1: a barrier cannot be inside"),
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j)\nbarrier now\n", "expected 'barrier' on a line of its own"),
]


@pytest.mark.parametrize("text,want", BAD)
def test_bad_programs(text, want):
    with pytest.raises(ProgramError) as info:
        compile_text(text)
    msg = f"{info.value.what}: {info.value.why}"
    assert want in msg
    assert "\n" not in msg


def test_unsatisfiable_cli_order():
    with pytest.raises(ProgramError) as info:
        compile_text("tensor A(3,3) : csr\ntensor v(3) : dv\nx(i) = A(i,j) * v(j)\n", order="j,i")
    assert "from --order" in info.value.why


def test_order_naming_unknown_index():
    with pytest.raises(ProgramError) as info:
        compile_text("tensor A(3,3) : csr\nT(i,j) = A(i,j)\n", order="i,z")
    assert "index z" in info.value.why


def test_statements_separated_by_semicolons():
    res = compile_text("tensor A(3,3) : csr\nT(i,j) = A(i,j) * 2; U(i) = T(i,j)\n", fuse="full")
    assert [k.name for k in res.program.kernels] == ["U"]
    with pytest.raises(ProgramError) as info:
        compile_text("tensor A(3,3) : csr\nT(i,j) = A(i,j) * 2; U(i) = Q(i,j)\n")
    assert info.value.what == "line 2, column 29"


BARRIER = """
tensor A(6, 6) : csr
tensor X(6, 4) : dense
tensor W(4, 3) : dense
T(i,j) = A(i,k) * X(k,j)
barrier                          # a reshape in the model: never fused across
H(i,h) = relu(T(i,j) * W(j,h))
U(i,h) = H(i,h) * 2
"""


def test_full_fusion_stops_at_barriers():
    res, _ = run_and_check(BARRIER, fuse="full")
    assert [k.name for k in res.program.kernels] == ["T", "U"]          # H fused into U, T alone
    res, _ = run_and_check(BARRIER.replace("barrier ", "# barrier "), fuse="full")
    assert [k.name for k in res.program.kernels] == ["U"]
    # the Python API says the same
    p = EinsumProgram("b")
    p.tensor("A", (6, 6), "csr"); p.tensor("X", (6, 4), "dense"); p.tensor("W", (4, 3), "dense")
    p.statement("T(i,j) = A(i,k) * X(k,j)")
    p.barrier()
    p.statement("H(i,h) = relu(T(i,j) * W(j,h))")
    p.statement("U(i,h) = H(i,h) * 2")
    assert [k.name for k in compile_program(p, fuse="full").program.kernels] == ["T", "U"]
    with p.fuse():
        with pytest.raises(ProgramError, match="barrier cannot be inside a fuse region"):
            p.barrier()


def test_barriers_survive_sugar_lowering():
    text = BARRIER.replace("H(i,h) = relu(T(i,j) * W(j,h))", "H(i,h) = softmax[h](T(i,j) * W(j,h))")
    res, _ = run_and_check(text, fuse="full")
    assert res.program.kernels[0].name == "T" and len(res.program.kernels) >= 2
    assert all(s.segment == 1 for s in res.ir.stmts if s.lhs != "T")
