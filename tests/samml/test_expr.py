"""The index-notation parser and the dense evaluator (checked against hand-written NumPy)."""

import numpy as np
import pytest

from fuseflow.errors import ProgramError
from fuseflow.samml.expr import Reduce, evaluate, parse_statement, parse_statements, tensors_used

rng = np.random.default_rng(3)


def test_implicit_sum_goes_to_smallest_subexpression():
    st = parse_statement("H(i,h) = relu(T(i,j) * W(j,h))")
    assert str(st) == "H(i,h) = relu(sum[j]((T(i,j) * W(j,h))))"
    st = parse_statement("y(i) = b(i) - A(i,j) * x(j)")
    assert isinstance(st.rhs.rhs, Reduce) and st.rhs.rhs.indices == ("j",)


def test_evaluate_matches_numpy():
    A, X, W = rng.random((4, 5)), rng.random((5, 3)), rng.random((3, 2))
    b, x = rng.random(4), rng.random(5)
    got = evaluate("T(i,j) = A(i,l) * X(l,m) * W(m,j)", {"A": A, "X": X, "W": W})["T"]
    np.testing.assert_allclose(got, A @ X @ W)
    got = evaluate("y(i) = b(i) - A(i,j) * x(j)", {"A": A, "b": b, "x": x})["y"]
    np.testing.assert_allclose(got, b - A @ x)
    got = evaluate("G(i,h) = relu(A(i,j) * X(j,h)) + 2", {"A": A, "X": X})["G"]
    np.testing.assert_allclose(got, np.maximum(A @ X, 0) + 2)
    M = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(evaluate("m(i) = max[j](M(i,j))", {"M": M})["m"], [-1.0, 0.0])


def test_chained_statements_and_uses():
    sts = parse_statements("T(i,j) = A(i,k) * B(k,j)\nU(i,j) = T(i,j) + C(i,j)  # add\n")
    assert tensors_used(sts) == ["A", "B", "C"]
    A, B, C = rng.random((2, 3)), rng.random((3, 2)), rng.random((2, 2))
    np.testing.assert_allclose(evaluate(sts, {"A": A, "B": B, "C": C})["U"], A @ B + C)


@pytest.mark.parametrize("text, where, why", [
    ("x(i) = A(i,j) *", "line 1, column 16", "expression ends too early"),
    ("x(i) = A(i,j) $ 2", "line 1, column 15", "unexpected character"),
    ("x(i) = A(i,i)", "line 1, column 8", "uses an index twice"),
    ("x(i) = A", "line 1, column 8", "needs an index list"),
])
def test_syntax_errors_have_line_and_column(text, where, why):
    with pytest.raises(ProgramError) as info:
        parse_statement(text)
    assert info.value.what == where and why in info.value.why


def test_shape_mismatch():
    with pytest.raises(ProgramError, match="index j has size"):
        evaluate("x(i) = A(i,j) * c(j)", {"A": np.ones((2, 3)), "c": np.ones(4)})


def test_index_names_are_local_to_each_statement():
    A, W1, W2 = rng.random((4, 6)), rng.random((6, 5)), rng.random((5, 3))
    got = evaluate("H(i,j) = A(i,k) * W1(k,j)\nY(i,j) = H(i,k) * W2(k,j)", {"A": A, "W1": W1, "W2": W2})
    np.testing.assert_allclose(got["Y"], A @ W1 @ W2)
