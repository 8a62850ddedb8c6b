"""The element-wise functions (sigmoid tanh gelu sqrt rsqrt log abs square) and the min reduction, compiled
at every granularity (none, the program's regions, full) with broadcasts and constants, simulated in float
mode (against NumPy, 1e-9) and in fixed mode (within the documented tolerance, docs/numbers.md)."""

import subprocess
import sys

import numpy as np
import pytest

from fuseflow.compiler import EinsumProgram

from compiler_harness import inputs_for, run_and_check

#: fixed32.16 programs: each function is within 1 LSB (1.5e-5) of float64 on its own; a few chained
#: roundings (mul, div by a row sum, the function) stay well inside this bound for values of order 1
FIXED_ATOL = 1e-3

PROGRAMS = {
    # bias add (a broadcast over i) and a scalar constant around sigmoid
    "sigmoid_bias": """
        tensor A(6,7) : dcsr
        tensor X(7,5) : dense
        tensor b(5) : dense
        fuse {
          T(i,j) = A(i,k) * X(k,j)
          H(i,j) = sigmoid(T(i,j) * 0.5 + b(j))
        }
    """,
    # division by row sums (a broadcast over j) of abs values, tanh of a sparse matrix (zero-preserving)
    "tanh_rowsum": """
        tensor A(6,7) : dcsr
        fuse {
          s(i) = sum[j](abs(A(i,j)))
          N(i,j) = tanh(A(i,j) * 2) / (s(i) + 1)
        }
    """,
    # GELU MLP layer: matmul, bias, gelu, then a second matmul
    "gelu_mlp": """
        tensor A(6,7) : dcsr
        tensor W(7,5) : dense
        tensor c(5) : dense
        tensor V(5,3) : dense
        fuse {
          G(i,j) = gelu(A(i,k) * W(k,j) + c(j))
        }
        Y(i,h) = G(i,j) * V(j,h) - 0.25
    """,
    # RMS norm: square, a mean, rsqrt with an epsilon, broadcast back over j; and sqrt of the mean
    "rms_norm": """
        tensor X(6,8) : dense
        tensor g(8) : dense
        fuse {
          m(i) = sum[j](square(X(i,j))) / 8
          Y(i,j) = X(i,j) * rsqrt(m(i) + 0.001) * g(j)
        }
        r(i) = sqrt(m(i)) * 2 + 1
    """,
    # log over a covered dimension (log is not zero-preserving), abs, constants
    "log_abs": """
        tensor A(6,7) : dcsr
        tensor b(7) : dense
        fuse {
          L(i,j) = log(abs(A(i,j)) + 1) - 0.5
          M(i,j) = L(i,j) * b(j)
        }
    """,
    # min: innermost (reduce), over an outer index (spacc), with a function inside and a broadcast after
    "min_reductions": """
        tensor A(6,7) : dcsr
        tensor B(6,7) : dcsr
        tensor c(6) : dense
        fuse {
          y(i) = min[j](A(i,j) * B(i,j)) + c(i)
          z(j) = min[i](tanh(A(i,j)))
        }
        w(i) = min[j](square(A(i,j))) * 3
    """,
    # sqrt of a sparse matrix (zero-preserving) and sigmoid of a sparse one (not: every coordinate)
    "sqrt_sigmoid_sparse": """
        tensor A(5,6) : dcsr
        tensor B(5,6) : dcsr
        S(i,j) = sqrt(abs(A(i,j))) + B(i,j)
        P(i,j) = sigmoid(A(i,j)) - 0.5
    """,
}


def _ir(name):
    return EinsumProgram.parse(PROGRAMS[name], name=name).to_ir()


@pytest.mark.parametrize("mode", ["float", "fixed"])
@pytest.mark.parametrize("fuse", ["none", "regions", "full"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_functions_match_numpy(name, fuse, mode):
    ir = _ir(name)
    tol = 1e-9 if mode == "float" else FIXED_ATOL
    for seed, density in ((0, 0.4), (1, 0.15)):
        rng = np.random.default_rng(seed)
        run_and_check(ir, inputs_for(ir, rng, density), fuse=fuse, mode=mode, rtol=1e-9, atol=tol)


def test_functions_cover_every_new_function():
    text = "\n".join(PROGRAMS.values())
    for fn in ("sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square", "min["):
        assert fn in text, fn


def test_zero_preserving_and_constant_folding():
    from fuseflow.compiler.ir import ZERO_PRESERVING, Lit, from_ast
    from fuseflow.samml.expr import parse_statement
    assert {"tanh", "gelu", "sqrt", "abs", "square"} <= set(ZERO_PRESERVING)
    assert not {"exp", "sigmoid", "rsqrt", "log"} & set(ZERO_PRESERVING)
    folded = from_ast(parse_statement("y(i) = A(i) * (sigmoid(0) + sqrt(4) + log(1) + gelu(1))").rhs)
    lit = folded.b
    assert isinstance(lit, Lit) and lit.value == pytest.approx(0.5 + 2 + 0 + 0.8413447460685429, abs=1e-12)


@pytest.mark.parametrize("src, want", [
    ("tensor A(4,4) : dcsr\nB(i,j) = foo(A(i,j))\n", "unknown function 'foo'"),
    ("tensor A(4,4) : dcsr\nB(i,j) = tanh(2 * A(i,j)) + bar(A(i,j) * 2)\n", "unknown function 'bar'"),
    ("tensor A(4,4) : dcsr\nb(i) = prod[j](A(i,j))\n", "unknown reduction 'prod'"),
])
def test_unknown_function_cli(tmp_path, src, want):
    prog = tmp_path / "bad.ff"
    prog.write_text(src)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "fuseflow.compiler", "compile", str(prog), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0], r.stderr
    assert not out.exists()
