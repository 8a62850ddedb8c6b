"""The classic kernel suite, built with the graph builder (the reference graphs of the SAM paper's kernels).

Every function returns a one-kernel :class:`~fuseflow.samml.Program` whose ``expr`` says what it computes,
so ``python -m fuseflow.sim run graph.json --check`` can compare it with NumPy. ``SUITE`` maps names to
(builder, input-generator) pairs; ``python -m fuseflow.samml kernels -o examples/kernels`` writes them all.

Conventions: inputs in the formats named per kernel; outputs are written canonically (all levels compressed,
no empty fibres below the top level: crd_drop removes them, see docs/samml.md, "the empty-fibre rule").
Every builder is written with scanners and intersections only and ends with the compiler's graph passes
(:mod:`fuseflow.compiler.passes`: locate, drop_empty, capacities, coordinate width, channel depths), so dense operands of
intersections (SDDMM's factors, the residual's x) are located, not scanned, as in compiled graphs. Each
takes ``density=`` (the expected density of its sparse inputs, declared on them)
and ``passes=`` (options of the passes, e.g. ``{"fifo_depth": 2}``).
"""

import functools

import numpy as np
import scipy.sparse as sp

from ..compiler.options import CompileOptions
from ..compiler.passes import run_passes
from ..tensors.random_data import random_sparse
from .graph import Program

CSR = ["dense", "compressed"]
DCSR = ["compressed", "compressed"]
DENSE2 = ["dense", "dense"]


class Builder:
    """Thin helpers over :class:`~fuseflow.samml.Kernel` for the common SAM idioms."""

    def __init__(self, program):
        self.p = program
        self.k = program.kernel("main")

    def root(self, tensor):
        return self.k.add("root", id=f"root_{tensor}")["ref"]

    def scan(self, tensor, level, ref):
        fmt = self.p.tensors[tensor].levels[level]
        h = self.k.add("level_scan", {"ref": ref}, id=f"scan_{tensor}{level}", tensor=tensor, level=level,
                       format=fmt)
        return h["crd"], h["ref"]

    def repeat(self, what, crd, name):
        sig = self.k.add("repeat_sig", {"in": crd}, id=f"repsig_{name}")
        return self.k.add("repeat", {"in": what, "repsig": sig["repsig"]}, id=f"repeat_{name}")["out"]

    def join(self, op, pairs, name):
        inputs = {}
        for i, (c, r) in enumerate(pairs):
            inputs[f"crd{i}"] = c
            inputs[f"ref{i}"] = r
        h = self.k.add(op, inputs, id=f"{op}_{name}", arity=len(pairs))
        return h["crd"], [h[f"ref{i}"] for i in range(len(pairs))]

    def vals(self, tensor, ref, name=None):
        return self.k.add("array", {"ref": ref}, id=f"vals_{name or tensor}", tensor=tensor)["val"]

    def alu(self, op, a, b=None, name=None, const=None):
        inputs = {"a": a} if b is None else {"a": a, "b": b}
        return self.k.add("alu", inputs, id=name or f"alu_{op}", op=op, const=const)["out"]

    def reduce(self, val, name, crd=None, op="sum"):
        inputs = {"val": val} if crd is None else {"val": val, "crd": crd}
        return self.k.add("reduce", inputs, id=f"reduce_{name}", op=op)["val"]

    def drop(self, outer, inner, name):
        h = self.k.add("crd_drop", {"outer": outer, "inner": inner}, id=f"drop_{name}")
        return h["outer"], h["inner"]

    def write(self, tensor, crds, val):
        for level, c in enumerate(crds):
            self.k.add("level_write", {"crd": c}, id=f"write_{tensor}{level}", tensor=tensor, level=level,
                       format="compressed")
        self.k.add("value_write", {"val": val}, id=f"write_{tensor}_vals", tensor=tensor)


def finished(builder):
    """Decorate a kernel builder: declare ``density`` on its inputs with a compressed level, then run the graph
    passes with the options ``passes``."""
    @functools.wraps(builder)
    def build_finished(*args, density=None, passes=None, **kw):
        p = builder(*args, **kw)
        if density is not None:
            for t in p.inputs:
                if "compressed" in t.levels:
                    t.density = float(density)
        p.reports = run_passes(p, CompileOptions.from_kwargs(passes=passes))
        return p
    return build_finished


def _program(name, expr, inputs, output):
    p = Program(name, expr=expr)
    for tname, shape, levels, *mode in inputs:
        p.tensor(tname, "input", shape, levels, mode[0] if mode else None)
    oname, oshape, omode = output
    p.tensor(oname, "output", oshape, ["compressed"] * len(oshape), omode)
    return p, Builder(p)


@finished
def spmv(m=3, n=4, fmt="dcsr"):
    """x(i) = B(i,j) c(j): B in CSR or DCSR, c a sparse vector; rows whose product is empty are dropped."""
    p, b = _program(f"spmv_{fmt}", "x(i) = B(i,j) * c(j)",
                    [("B", [m, n], DCSR if fmt == "dcsr" else CSR), ("c", [n], ["compressed"])],
                    ("x", [m], None))
    ci, ri = b.scan("B", 0, b.root("B"))
    cj, rj = b.scan("B", 1, ri)
    cc, rc = b.scan("c", 0, b.repeat(b.root("c"), ci, "c_i"))
    cj, (rb, rc) = b.join("intersect", [(cj, rj), (cc, rc)], "j")
    prod = b.alu("mul", b.vals("B", rb), b.vals("c", rc), "mul")
    x = b.reduce(prod, "j")
    xi, _ = b.drop(ci, cj, "i")
    b.write("x", [xi], x)
    return p


@finished
def spmspm_inner(m=4, k=5, n=3):
    """X(i,j) = A(i,k) B(k,j), inner product (order i, j, k): A CSR, B CSC."""
    p, b = _program("spmspm_inner", "X(i,j) = A(i,k) * B(k,j)",
                    [("A", [m, k], CSR), ("B", [k, n], CSR, [1, 0])], ("X", [m, n], None))
    ci, rai = b.scan("A", 0, b.root("A"))
    cj, rbj = b.scan("B", 0, b.repeat(b.root("B"), ci, "B_i"))
    cka, rak = b.scan("A", 1, b.repeat(rai, cj, "A_j"))
    ckb, rbk = b.scan("B", 1, rbj)
    ck, (ra, rb) = b.join("intersect", [(cka, rak), (ckb, rbk)], "k")
    x = b.reduce(b.alu("mul", b.vals("A", ra), b.vals("B", rb), "mul"), "k")
    cj2, _ = b.drop(cj, ck, "j")
    xi, xj = b.drop(ci, cj2, "i")
    b.write("X", [xi, xj], x)
    return p


@finished
def spmspm_gustavson(m=4, k=5, n=3):
    """X(i,j) = A(i,k) B(k,j), Gustavson (order i, k, j): A and B CSR; a sparse accumulator merges over k."""
    p, b = _program("spmspm_gustavson", "X(i,j) = A(i,k) * B(k,j)",
                    [("A", [m, k], CSR), ("B", [k, n], CSR)], ("X", [m, n], None))
    ci, rai = b.scan("A", 0, b.root("A"))
    cka, rak = b.scan("A", 1, rai)
    ckb, rbk = b.scan("B", 0, b.repeat(b.root("B"), ci, "B_i"))
    ck, (ra, rb) = b.join("intersect", [(cka, rak), (ckb, rbk)], "k")
    cj, rbj = b.scan("B", 1, rb)
    av = b.repeat(b.vals("A", ra), cj, "A_j")
    prod = b.alu("mul", av, b.vals("B", rbj), "mul")
    acc = b.k.add("spacc", {"crd_inner": cj, "val": prod}, id="spacc_k", order=1, dim=n)
    xi, xj = b.drop(ci, acc["crd_inner"], "i")
    b.write("X", [xi, xj], acc["val"])
    return p


@finished
def spmspm_outer(m=4, k=5, n=3):
    """X(i,j) = A(i,k) B(k,j), outer product (order k, i, j): A CSC, B CSR; an order-2 accumulator."""
    p, b = _program("spmspm_outer", "X(i,j) = A(i,k) * B(k,j)",
                    [("A", [m, k], DCSR, [1, 0]), ("B", [k, n], DCSR)], ("X", [m, n], None))
    cka, rak = b.scan("A", 0, b.root("A"))
    ckb, rbk = b.scan("B", 0, b.root("B"))
    ck, (ra, rb) = b.join("intersect", [(cka, rak), (ckb, rbk)], "k")
    ci, rai = b.scan("A", 1, ra)
    cj, rbj = b.scan("B", 1, b.repeat(rb, ci, "B_i"))
    av = b.repeat(b.vals("A", rai), cj, "A_j")
    prod = b.alu("mul", av, b.vals("B", rbj), "mul")
    acc = b.k.add("spacc", {"crd_inner": cj, "crd_outer0": ci, "val": prod}, id="spacc_k", order=2, dim=n,
                  dim_outer=m)
    b.write("X", [acc["crd_outer0"], acc["crd_inner"]], acc["val"])
    return p


@finished
def elementwise(op="add", m=4, n=5, fmt="dcsr"):
    """X(i,j) = A(i,j) + B(i,j) (union) or A(i,j) * B(i,j) (intersect)."""
    sym = {"add": "+", "mul": "*"}[op]
    levels = DCSR if fmt == "dcsr" else CSR
    p, b = _program(f"elementwise_{op}", f"X(i,j) = A(i,j) {sym} B(i,j)",
                    [("A", [m, n], levels), ("B", [m, n], levels)], ("X", [m, n], None))
    join = "union" if op == "add" else "intersect"
    cia, ria = b.scan("A", 0, b.root("A"))
    cib, rib = b.scan("B", 0, b.root("B"))
    ci, (ra, rb) = b.join(join, [(cia, ria), (cib, rib)], "i")
    cja, rja = b.scan("A", 1, ra)
    cjb, rjb = b.scan("B", 1, rb)
    cj, (ra, rb) = b.join(join, [(cja, rja), (cjb, rjb)], "j")
    x = b.alu(op, b.vals("A", ra), b.vals("B", rb), op)
    xi, xj = b.drop(ci, cj, "i")
    b.write("X", [xi, xj], x)
    return p


@finished
def sddmm(m=4, n=5, k=3):
    """X(i,j) = B(i,j) * C(i,k) D(k,j): B sparse (DCSR), C and D dense (D stored j-major)."""
    p, b = _program("sddmm", "X(i,j) = B(i,j) * C(i,k) * D(k,j)",
                    [("B", [m, n], DCSR), ("C", [m, k], DENSE2), ("D", [k, n], DENSE2, [1, 0])],
                    ("X", [m, n], None))
    cib, rib = b.scan("B", 0, b.root("B"))
    cic, ric = b.scan("C", 0, b.root("C"))
    ci, (rb, rc) = b.join("intersect", [(cib, rib), (cic, ric)], "i")
    cjb, rjb = b.scan("B", 1, rb)
    cjd, rjd = b.scan("D", 0, b.repeat(b.root("D"), ci, "D_i"))
    cj, (rb, rd) = b.join("intersect", [(cjb, rjb), (cjd, rjd)], "j")
    ckc, rkc = b.scan("C", 1, b.repeat(rc, cj, "C_j"))
    ckd, rkd = b.scan("D", 1, rd)
    ck, (rc, rd) = b.join("intersect", [(ckc, rkc), (ckd, rkd)], "k")
    cd = b.reduce(b.alu("mul", b.vals("C", rc), b.vals("D", rd), "mul_cd"), "k", crd=cj)
    x = b.alu("mul", b.vals("B", rb), cd, "mul_b")
    xi, xj = b.drop(ci, cj, "i")
    b.write("X", [xi, xj], x)
    return p


@finished
def residual(m=4, n=5):
    """y(i) = b(i) - A(i,j) x(j): b a sparse vector, A CSR, x dense; every row of A or b appears."""
    p, b = _program("residual", "y(i) = b(i) - A(i,j) * x(j)",
                    [("b", [m], ["compressed"]), ("A", [m, n], DCSR), ("x", [n], ["dense"])], ("y", [m], None))
    cib, rib = b.scan("b", 0, b.root("b"))
    cia, ria = b.scan("A", 0, b.root("A"))
    ci, (rb, ra) = b.join("union", [(cib, rib), (cia, ria)], "i")
    cja, rja = b.scan("A", 1, ra)
    cjx, rjx = b.scan("x", 0, b.repeat(b.root("x"), ci, "x_i"))
    cj, (ra, rx) = b.join("intersect", [(cja, rja), (cjx, rjx)], "j")
    ax = b.reduce(b.alu("mul", b.vals("A", ra), b.vals("x", rx), "mul"), "j", crd=ci)
    y = b.alu("sub", b.vals("b", rb), ax, "sub")
    b.write("y", [ci], y)
    return p


@finished
def ttv(m=3, n=4, k=5):
    """X(i,j) = B(i,j,k) c(k): B CSF, c a sparse vector (an order-3 kernel)."""
    p, b = _program("ttv", "X(i,j) = B(i,j,k) * c(k)",
                    [("B", [m, n, k], ["compressed"] * 3), ("c", [k], ["compressed"])], ("X", [m, n], None))
    ci, ri = b.scan("B", 0, b.root("B"))
    cj, rj = b.scan("B", 1, ri)
    ckb, rkb = b.scan("B", 2, rj)
    rc = b.repeat(b.repeat(b.root("c"), ci, "c_i"), cj, "c_j")
    ckc, rkc = b.scan("c", 0, rc)
    ck, (rb, rc) = b.join("intersect", [(ckb, rkb), (ckc, rkc)], "k")
    x = b.reduce(b.alu("mul", b.vals("B", rb), b.vals("c", rc), "mul"), "k")
    cj2, _ = b.drop(cj, ck, "j")
    xi, xj = b.drop(ci, cj2, "i")
    b.write("X", [xi, xj], x)
    return p


@finished
def vector(op="add", n=6):
    """x(i) = a(i) + b(i) (union) or a(i) * b(i) (intersect) on sparse vectors."""
    sym = {"add": "+", "mul": "*"}[op]
    p, b = _program(f"vector_{op}", f"x(i) = a(i) {sym} b(i)",
                    [("a", [n], ["compressed"]), ("b", [n], ["compressed"])], ("x", [n], None))
    ca, ra = b.scan("a", 0, b.root("a"))
    cb, rb = b.scan("b", 0, b.root("b"))
    ci, (ra, rb) = b.join("union" if op == "add" else "intersect", [(ca, ra), (cb, rb)], "i")
    b.write("x", [ci], b.alu(op, b.vals("a", ra), b.vals("b", rb), op))
    return p


# --- inputs --------------------------------------------------------------------------------------

def random_inputs(program, density=0.4, seed=0):
    """Random dense inputs for every input tensor of ``program`` (fixed seed)."""
    rng = np.random.default_rng(seed)
    out = {}
    for t in program.inputs:
        dens = 1.0 if all(lv == "dense" for lv in t.levels) else density
        out[t.name] = random_sparse(rng, tuple(t.shape), dens)
    return out


SUITE = {
    "spmv_csr": lambda **kw: spmv(fmt="csr", **kw),
    "spmv_dcsr": lambda **kw: spmv(fmt="dcsr", **kw),
    "spmspm_inner": spmspm_inner,
    "spmspm_gustavson": spmspm_gustavson,
    "spmspm_outer": spmspm_outer,
    "elementwise_add": lambda **kw: elementwise("add", **kw),
    "elementwise_mul": lambda **kw: elementwise("mul", **kw),
    "sddmm": sddmm,
    "residual": residual,
    "ttv": ttv,
    "vector_add": lambda **kw: vector("add", **kw),
    "vector_mul": lambda **kw: vector("mul", **kw),
}

#: keyword sizes per kernel for a given scale n (roughly n x n matrices)
SIZES = {
    "spmv_csr": lambda n: {"m": n, "n": n},
    "spmv_dcsr": lambda n: {"m": n, "n": n},
    "spmspm_inner": lambda n: {"m": n, "k": n, "n": n},
    "spmspm_gustavson": lambda n: {"m": n, "k": n, "n": n},
    "spmspm_outer": lambda n: {"m": n, "k": n, "n": n},
    "elementwise_add": lambda n: {"m": n, "n": n},
    "elementwise_mul": lambda n: {"m": n, "n": n},
    "sddmm": lambda n: {"m": n, "n": n, "k": max(1, n // 2)},
    "residual": lambda n: {"m": n, "n": n},
    "ttv": lambda n: {"m": max(1, n // 2), "n": max(1, n // 2), "k": n},
    "vector_add": lambda n: {"n": n},
    "vector_mul": lambda n: {"n": n},
}


def build(name, n=None, **options):
    """Build suite kernel ``name`` at scale ``n`` (default sizes if None); ``options``: ``density``,
    ``passes`` (see :func:`finished`)."""
    return SUITE[name](**(SIZES[name](n) if n else {}), **options)


def dcsr_example():
    """The DESIGN.md example: SpMV with B 3x4 DCSR rows {0: [0, 2], 2: [1, 3]}, values 1..4; c = {0: 10, 1: 20}."""
    B = sp.csr_array((np.array([1.0, 2, 3, 4]), np.array([0, 2, 1, 3]), np.array([0, 2, 2, 4])), shape=(3, 4))
    c = np.array([10.0, 20, 0, 0])
    return spmv(3, 4, "dcsr"), {"B": B, "c": c}
