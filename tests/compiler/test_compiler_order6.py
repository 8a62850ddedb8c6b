"""Tensors of order 4 to 6 (issue 42): programs compiled unfused and fused, simulated on both engines
(bit-identical and cycle-equal: fuseflow.sim.differential) and checked against np.einsum; the limits (order 7,
permuted copies that would re-sort more than the 3 innermost levels) refused with one line."""

import json
from importlib import resources

import numpy as np
import pytest

from fuseflow.compiler import EinsumProgram, compile_program
from fuseflow.compiler.ir import MAX_TENSOR_ORDER
from fuseflow.errors import ProgramError
from fuseflow.sim import compiled, differential, run


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _attention(I):
    s = np.einsum("bhid,bhjd->bhij", I["Q"], I["K"])
    return {"S": s, "O": np.einsum("bhij,bhje->bhie", _softmax(s, 3), I["V"])}


# name: (program, NumPy golden of every output)
PROGRAMS = {
    "attention4": ("""
tensor Q(2, 2, 4, 3) : dense
tensor K(2, 2, 5, 3) : dense
tensor V(2, 2, 5, 3) : dense
S(b,h,i,j) = Q(b,h,i,d) * K(b,h,j,d)
P(b,h,i,j) = softmax[j](S(b,h,i,j))
O(b,h,i,e) = P(b,h,i,j) * V(b,h,j,e)
output S, O
""", _attention),
    "elementwise4": ("""
tensor A(3, 2, 4, 5) : cdcc
tensor B(3, 2, 4, 5) : dcdc
C(a,b,c,d) = A(a,b,c,d) * B(a,b,c,d) + A(a,b,c,d)
""", lambda I: {"C": I["A"] * I["B"] + I["A"]}),
    "contract4": ("""
tensor A(3, 4, 2, 3) : cccc
tensor B(3, 4, 2, 3) : dcdc
x(a) = A(a,b,c,d) * B(a,b,c,d)
""", lambda I: {"x": np.einsum("abcd,abcd->a", I["A"], I["B"])}),
    "matmul4": ("""
tensor A(2, 3, 4, 5) : dcdc
tensor B(2, 3, 5, 2) : ccdc
C(b,h,i,j) = A(b,h,i,k) * B(b,h,k,j)
""", lambda I: {"C": np.einsum("bhik,bhkj->bhij", I["A"], I["B"])}),
    # storage orders that conflict: a permuted copy re-sorts the 3 innermost levels of A (one order-3
    # accumulator per coordinate of a), the 2 innermost of B (the cheap swap), the 3 innermost of an order 6
    "permuted4": ("""
tensor A(3, 4, 2, 3) : cccc
tensor B(2, 3, 4, 5) : dcdc
C(a,e) = A(a,b,c,d) * B(c,d,b,e)
""", lambda I: {"C": np.einsum("abcd,cdbe->ae", I["A"], I["B"])}),
    "swapped4": ("""
tensor A(3, 4, 2, 3) : cdcc
tensor B(3, 4, 3, 2) : ccdc
C(a,b,c,d) = A(a,b,c,d) * B(a,b,d,c)
""", lambda I: {"C": I["A"] * I["B"].transpose(0, 1, 3, 2)}),
    "permuted6": ("""
tensor A(2, 2, 3, 2, 2, 3) : ccdcdc
tensor B(2, 2, 3, 3, 2, 2) : cccccc
C(a,b,c,d,e,f) = A(a,b,c,d,e,f) + B(a,b,c,f,d,e)
""", lambda I: {"C": I["A"] + I["B"].transpose(0, 1, 2, 4, 5, 3)}),
    "outer4": ("""
tensor E(2, 3) : dcsr
tensor B(3, 2, 3) : csf
Y(h,i,j,k) = E(h,l) * B(l,i,j) * B(l,k,j)
""", lambda I: {"Y": np.einsum("hl,lij,lkj->hijk", I["E"], I["B"], I["B"])}),
    # the same reduction with the reduced index stored further in: an accumulator of order 1
    "stored_in5": ("""
tensor A(2, 3, 4, 5, 2) : ccccc:1,2,3,0,4
x(b,c,d,e) = A(a,b,c,d,e)
""", lambda I: {"x": I["A"].sum(axis=0)}),
    "sum5": ("""
tensor A(2, 3, 2, 3, 2) : cdcdc
tensor B(2, 3, 2, 3, 2) : dense
C(a,b,c,d,e) = A(a,b,c,d,e) + B(a,b,c,d,e)
y(a,c) = sum[b,d,e](C(a,b,c,d,e))
output C, y
""", lambda I: {"C": I["A"] + I["B"], "y": (I["A"] + I["B"]).sum(axis=(1, 3, 4))}),
    "contract6": ("""
tensor A(2, 2, 3, 2, 2, 3) : ccdcdc
tensor x(3) : sv
C(a,b,c,d,e) = A(a,b,c,d,e,f) * x(f)
""", lambda I: {"C": np.einsum("abcdef,f->abcde", I["A"], I["x"])}),
    "elementwise6": ("""
tensor A(2, 2, 3, 2, 2, 3) : cccccc
tensor B(2, 2, 3, 2, 2, 3) : cccccc
C(a,b,c,d,e,f) = relu(A(a,b,c,d,e,f) * B(a,b,c,d,e,f))
""", lambda I: {"C": np.maximum(I["A"] * I["B"], 0)}),
}


def _inputs(ir, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for t in ir.tensors.values():
        if t.role == "input":
            dense = all(lv == "dense" for lv in t.levels)
            v = rng.uniform(0.5, 2.0, size=t.shape) * rng.choice([-1.0, 1.0], size=t.shape)
            out[t.name] = v if dense else np.where(rng.random(t.shape) < 0.5, v, 0.0)
    return out


@pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")
@pytest.mark.parametrize("fuse", ["none", "full"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_order_4_to_6_match_numpy_on_both_engines(name, fuse):
    text, golden = PROGRAMS[name]
    ir = EinsumProgram.parse(f"program {name}\n{text}").to_ir()
    inputs = _inputs(ir, 0)
    prog = compile_program(ir, fuse=fuse).program
    assert max(len(t.shape) for t in prog.tensors.values()) >= 4
    used = {t.name: inputs[t.name] for t in prog.inputs}
    assert differential.compare(prog, used, "float") == []
    out = run(prog, used, mode="float", engine="compiled").outputs
    for k, want in golden(inputs).items():
        np.testing.assert_allclose(out[k], want, rtol=1e-9, atol=1e-9, err_msg=k)


def test_the_schema_holds_the_compilers_largest_order():
    schema = json.loads(resources.files("fuseflow.samml").joinpath("graph.schema.json").read_text())
    shape = schema["properties"]["tensors"]["items"]["properties"]["shape"]
    assert shape["maxItems"] == MAX_TENSOR_ORDER == 6


@pytest.mark.parametrize("text, fragments", [
    ("tensor A(2,2,2,2,2,2,2) : dense\nx(i) = A(i,j,k,l,m,n,o)\n", ["A has order 7", "at most 6"]),
    ("tensor A(2,2,2,2,2,2) : dense\ntensor b(2)\nX(i,j,k,l,m,n,o) = A(i,j,k,l,m,n) * b(o)\n",
     ["X has order 7", "at most 6"]),
    # the storage orders of A and B conflict in their outermost levels: a copy re-sorts at most 3 levels
    ("tensor A(2,3,4,5) : cccc\ntensor B(3,2,4,5) : cccc\nx(a) = A(a,b,c,d) * B(b,a,c,d)\n",
     ["no permuted copy", "at most the 3 innermost levels", "declare A or B in the storage order"]),
    # a reduced index stored above 4 free levels: an accumulator of order 4
    ("tensor A(2,3,4,5,2) : ccccc\nx(b,c,d,e) = A(a,b,c,d,e)\n",
     ["accumulator of order 4 (at most 3 is supported)", "iterate or store a further in"]),
])
def test_limits_are_one_line_errors(text, fragments):
    with pytest.raises(ProgramError) as exc:
        compile_program(EinsumProgram.parse(f"program p\n{text}").to_ir(), fuse="none")
    msg = str(exc.value)
    assert "\n" not in msg
    for f in fragments:
        assert f in msg, msg
