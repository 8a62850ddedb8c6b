"""Block tokens on the compiled engine: every op that computes on blocks, driven by the same test sources on
both engines (``run_op(engine=...)``), and whole blocked programs, give bit-identical values, cycles and
counters (docs/samml.md, "Blocks"; fuseflow/sim/csrc)."""

import numpy as np
import pytest

from fuseflow.errors import FuseFlowError
from fuseflow.samml.registry import UNARY_ALU_OPS
from fuseflow.sim import compiled
from fuseflow.sim.engine import run, run_op
from fuseflow.tensors import FixedFormat

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")

FX = FixedFormat(32, 16)
BINARY = ("add", "sub", "mul", "div", "max", "min")


def block(rng, shape, mode, scale=2.0):
    x = rng.uniform(-scale, scale, shape)
    x[rng.random(shape) < 0.15] = 0.0
    return FX.encode(x) if mode == "fixed" else x


def scalar(rng, mode):
    x = float(rng.uniform(-2, 2))
    return FX.encode(x) if mode == "fixed" else x


def same_tokens(a, b):
    assert len(a) == len(b), (a, b)
    for x, y in zip(a, b):
        if isinstance(x, str) or isinstance(y, str):
            assert x == y
        elif np.ndim(x) or np.ndim(y):
            x, y = np.asarray(x), np.asarray(y)
            assert x.shape == y.shape and x.dtype == y.dtype, (x, y)
            assert x.tobytes() == y.tobytes(), (x, y)
        else:
            assert type(x) is type(y) and (x == y or x != x and y != y), (x, y)


def both(op, params, inputs, mode="float"):
    """run_op on both engines: the same outputs (bit for bit), cycles and busy cycles."""
    got = {}
    for engine in ("python", "compiled"):
        try:
            got[engine] = run_op(op, params, inputs, mode=mode, stats=True, engine=engine)
        except FuseFlowError as exc:
            got[engine] = (type(exc).__name__, str(exc))
    py, cc = got["python"], got["compiled"]
    if isinstance(py[0], str) or isinstance(cc[0], str):
        assert py == cc
        return py
    assert py[1] == cc[1]
    assert py[0].keys() == cc[0].keys()
    for port in py[0]:
        if isinstance(py[0][port], dict):
            for k in py[0][port]:
                same_tokens(py[0][port][k], cc[0][port][k])
        else:
            same_tokens(py[0][port], cc[0][port])
    return py


def stream(rng, shape, mode, n=6, nones=True):
    """A value stream of blocks over two fibres, with N where ``nones``."""
    toks = []
    for k in range(n):
        toks.append("N" if nones and k % 4 == 3 else block(rng, shape, mode))
        if k == 2:
            toks.append("S0")
    return toks + ["S1", "D"]


MODES = ("float", "fixed")
SHAPES = ((2, 2), (4,), (3, 3))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", BINARY)
def test_alu_binary_on_blocks(op, mode):
    rng = np.random.default_rng(BINARY.index(op) + 10 * MODES.index(mode))
    for shape in SHAPES:
        a = stream(rng, shape, mode)
        b = [t if isinstance(t, str) else block(rng, shape, mode) for t in a]
        b[1] = "N"
        both("alu", {"op": op}, {"a": a, "b": b}, mode)
    # broadcasts: a scalar token, a constant, a B-vector over a B x B block's rows (either side)
    a = stream(rng, (3, 3), mode, nones=False)
    s = [t if isinstance(t, str) else scalar(rng, mode) for t in a]
    v = [t if isinstance(t, str) else block(rng, (3,), mode) for t in a]
    both("alu", {"op": op}, {"a": a, "b": s}, mode)
    both("alu", {"op": op}, {"a": s, "b": a}, mode)
    both("alu", {"op": op}, {"a": a, "b": v}, mode)
    both("alu", {"op": op}, {"a": v, "b": a}, mode)
    both("alu", {"op": op, "const": -0.75}, {"a": a}, mode)
    both("alu", {"op": op, "const": 0.0}, {"a": a}, mode)


@pytest.mark.parametrize("mode", MODES)
def test_alu_binary_edge_values(mode):
    """Division by zero, NaN and infinities (float), saturation (fixed), signed zeros."""
    if mode == "float":
        x = np.array([[1.0, -1.0, 0.0, np.nan], [np.inf, -0.0, 3.0, -np.inf], [0.0, 2.0, -0.0, 1e308],
                      [-2.5, 0.0, np.nan, 7.0]])
        y = np.array([[0.0, 0.0, 0.0, 1.0], [np.inf, 0.0, -0.0, 2.0], [-0.0, np.nan, 0.0, 1e308],
                      [-0.0, -0.0, 0.0, -np.inf]])
    else:
        x = np.array([[FX.max_raw, FX.min_raw, 0, 5], [FX.min_raw, -1, 1 << 20, -(1 << 20)],
                      [FX.max_raw, 3, 0, -7], [1, -1, FX.max_raw, FX.min_raw]])
        y = np.array([[FX.max_raw, FX.min_raw, 0, 0], [-1, FX.min_raw, 1 << 20, 1 << 18],
                      [0, -2, 0, 0], [FX.max_raw, FX.max_raw, 1, -1]])
    for op in BINARY:
        both("alu", {"op": op}, {"a": [x, y, "S0", "D"], "b": [y, x, "S0", "D"]}, mode)
    for op in ("neg", "relu", "abs", "square"):
        both("alu", {"op": op}, {"a": [x, y, "S0", "D"]}, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", UNARY_ALU_OPS)
def test_alu_unary_on_blocks(op, mode):
    rng = np.random.default_rng(UNARY_ALU_OPS.index(op) + 100 * MODES.index(mode))
    for shape in SHAPES:
        both("alu", {"op": op}, {"a": stream(rng, shape, mode)}, mode)
    # scalars still take the scalar op in a blocked run (N: the node's zero block)
    both("alu", {"op": op}, {"a": [block(rng, (2, 2), mode), scalar(rng, mode), "N", "S0", "D"]}, mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ("sum", "max", "min"))
def test_reduce_rows(op, mode):
    rng = np.random.default_rng(7 + MODES.index(mode))
    for n in (1, 2, 4):
        val = [block(rng, (n, n), mode, 1e4 if mode == "fixed" else 2.0), block(rng, (n, n), mode), "S0", "S0",
               "N", block(rng, (n, n), mode), "S1", "S0", block(rng, (n, n), mode), "S1", "D"]
        both("reduce", {"op": op, "rows": True}, {"val": val}, mode)
        # with crd: one value per coordinate (the zero B-vector for an empty fibre)
        crd = [0, 1, 2, "S0", 3, "S0", "D"]
        val = [block(rng, (n, n), mode), "S0", "S0", block(rng, (n, n), mode), "N", "S1", "N", "S1", "D"]
        both("reduce", {"op": op, "rows": True}, {"val": val, "crd": crd}, mode)
        # without rows: blocks merged element-wise
        val = [block(rng, (n,), mode), block(rng, (n,), mode), "S0", "N", "S1", "D"]
        both("reduce", {"op": op}, {"val": val}, mode)
    # a value that is not a B x B block: the same error on both engines
    both("reduce", {"op": op, "rows": True}, {"val": [block(rng, (2,), mode), "S0", "D"]}, mode)


def test_reduce_rows_saturates_once_in_fixed_point():
    big = np.full((4, 4), FX.max_raw // 2, dtype=np.int64)
    big[1] = FX.min_raw // 3
    both("reduce", {"op": "sum", "rows": True}, {"val": [big, big, "S0", "D"]}, "fixed")


@pytest.mark.parametrize("mode", MODES)
def test_array_loads_blocks(mode):
    rng = np.random.default_rng(3)
    for shape in ((2, 2), (4,), (4, 4)):
        vals = np.stack([block(rng, shape, mode) for _ in range(5)])
        both("array", {"vals": list(vals)}, {"ref": [0, 3, "N", "S0", 4, 1, "S1", "D"]}, mode)
        both("array", {"vals": vals}, {"ref": [2, "S0", 7, "D"]}, mode)           # a reference out of range


@pytest.mark.parametrize("mode", MODES)
def test_value_write_collects_blocks(mode):
    rng = np.random.default_rng(4)
    both("value_write", {}, {"val": [block(rng, (2, 2), mode), "S0", "N", block(rng, (2, 2), mode), "S1", "D"]},
         mode)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("rhs", ("matrix", "vector"))
@pytest.mark.parametrize("n", (1, 2, 3, 4))
def test_block_matmul(n, rhs, mode):
    rng = np.random.default_rng(n * 10 + (rhs == "vector") + 2 * MODES.index(mode))
    bshape = (n, n) if rhs == "matrix" else (n,)
    scale = 200.0 if mode == "fixed" else 2.0          # fixed: products and sums that saturate
    a = [block(rng, (n, n), mode, scale), "N", block(rng, (n, n), mode), "S0", block(rng, (n, n), mode),
         block(rng, (n, n), mode), "S1", "D"]
    b = [block(rng, bshape, mode, scale), block(rng, bshape, mode), "N", "S0", "N", block(rng, bshape, mode),
         "S1", "D"]
    both("block_matmul", {"block": n, "rhs": rhs}, {"a": a, "b": b}, mode)
    # errors: operands out of step, a block that does not fit
    both("block_matmul", {"block": n, "rhs": rhs}, {"a": a[:3] + ["S1", "D"], "b": b[:2] + ["S0", "S1", "D"]},
         mode)
    wrong = (n + 1, n + 1) if rhs == "matrix" else (n + 1,)
    both("block_matmul", {"block": n, "rhs": rhs}, {"a": a[:1] + ["S0", "D"],
                                                    "b": [block(rng, wrong, mode), "S0", "D"]}, mode)


def test_block_matmul_fixed_sum_is_exact_before_rounding():
    """matmul_array: the products summed exactly (wide), rounded and saturated once (here: beyond int64)."""
    n = 4
    a = np.full((n, n), FX.min_raw, dtype=np.int64)
    b = np.full((n, n), FX.min_raw, dtype=np.int64)
    c = np.array([[FX.max_raw, FX.min_raw, 3, -3]] * n, dtype=np.int64)
    out = both("block_matmul", {"block": n}, {"a": [a, a, c, "S0", "D"], "b": [b, c, c.T.copy(), "S0", "D"]},
               "fixed")
    assert out[0]["out"][0].tolist() == FX.matmul_array(a, b).tolist()


# ---- whole programs ------------------------------------------------------------------------------------

PROGRAMS = {
    "badd": "program p\ntensor c(8) : bdv:2\ntensor d(8) : bdv:2\nx(i) = c(i) + d(i)\n",
    "bdiv": "program p\ntensor c(8) : bdv:4\ntensor d(8) : bdv:4\nx(i) = c(i) / (d(i) + 3)\n",
    "bmadd": "program p\ntensor A(8,8) : bcsr:2\ntensor B(8,8) : bcsr:2\nX(i,j) = A(i,j) + B(i,j)\n",
    "brelu": "program p\ntensor A(8,8) : bcsr:2\nX(i,j) = relu(A(i,j))\n",
    "bexp": "program p\ntensor A(8,8) : bcsr:2\nX(i,j) = exp(A(i,j)) * 2\n",
    "browsum": "program p\ntensor A(8,8) : bcsr:2\nx(i) = sum[j](A(i,j))\n",
    "browmax": "program p\ntensor A(8,8) : bcsr:4\nx(i) = max[j](A(i,j))\n",
}


def same_run(ra, rb):
    assert ra.cycles == rb.cycles and ra.kernel_cycles == rb.kernel_cycles
    for k in ("tokens", "alu_ops", "mem_read_bytes", "mem_write_bytes"):
        assert ra.stats[k] == rb.stats[k], k
    for ka, kb in zip(ra.stats["kernels"], rb.stats["kernels"]):
        assert ka["streams"] == kb["streams"] and ka["nodes"] == kb["nodes"]
    for name in ra.outputs:
        assert ra.outputs[name].tobytes() == rb.outputs[name].tobytes(), name
    assert ra.tensors.keys() == rb.tensors.keys()
    for name, t in ra.tensors.items():
        u = rb.tensors[name]
        assert t.vals.dtype == u.vals.dtype and t.vals.shape == u.vals.shape
        assert t.vals.tobytes() == u.vals.tobytes(), name


def compare(prog, inputs):
    why = compiled.unsupported(prog)
    if why is not None:
        pytest.skip(why)
    for mode in MODES:
        same_run(run(prog, inputs, mode=mode, engine="python"), run(prog, inputs, mode=mode, engine="compiled"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_blocked_programs(name):
    from fuseflow.compiler import compile_text
    from fuseflow.samml import kernels
    prog = compile_text(PROGRAMS[name], name="p").program
    rng = np.random.default_rng(5)
    inputs = {}
    for t in prog.inputs:
        v = kernels.random_sparse(rng, tuple(t.shape), 0.8)
        if len(t.shape) == 2:
            b = t.block[0]
            v = v * np.kron(rng.random((8 // b, 8 // b)) < 0.5, np.ones((b, b)))
        inputs[t.name] = v
    compare(prog, inputs)


def _suite_entries():
    from fuseflow.reports import suites
    return suites.blocks().entries


@pytest.mark.parametrize("entry", _suite_entries(), ids=lambda e: e.name)
def test_blocks_suite(entry):
    compare(entry.program, entry.inputs)


@pytest.mark.parametrize("b", (2, 4))
def test_block_matmul_in_a_program(b):
    """block_matmul inside a kernel, under back-pressure (FIFO depths 1 and 3) and in a narrow fixed format
    that saturates: blockwise products X(i,j) = A(i,j) @ B(i,j) over the union of A's and B's blocks (the
    graph of A + B with its alu made a block_matmul; an absent block is N, a zero block)."""
    import copy

    from fuseflow.compiler import compile_text
    from fuseflow.samml import kernels
    prog = compile_text(PROGRAMS["bmadd"].replace("bcsr:2", f"bcsr:{b}"), name="p").program
    (node,) = [n for n in prog.kernels[0].nodes.values() if n.op == "alu"]
    node.op, node.params = "block_matmul", {"block": b}
    prog.validate()
    rng = np.random.default_rng(b)
    inputs = {t.name: kernels.random_sparse(rng, (8, 8), 0.8) * np.kron(rng.random((8 // b, 8 // b)) < 0.7,
                                                                         np.ones((b, b)))
              for t in prog.inputs}
    if compiled.unsupported(prog):
        pytest.skip(compiled.unsupported(prog))
    for depth in (None, 1, 3):
        for mode in MODES:
            ra = run(prog, inputs, mode=mode, engine="python", fifo_depth=depth)
            same_run(ra, run(prog, inputs, mode=mode, engine="compiled", fifo_depth=depth))
    assert np.abs(ra.outputs["X"]).max() > 0
    narrow = copy.deepcopy(prog)
    narrow.config["value"] = {"width": 12, "frac": 4}
    big = {k: np.round(v * 60) for k, v in inputs.items()}
    ra = run(narrow, big, mode="fixed", engine="python")
    same_run(ra, run(narrow, big, mode="fixed", engine="compiled"))
    assert ra.outputs["X"].max() == 2 ** 7 - 2 ** -4 and ra.outputs["X"].min() == -2 ** 7     # saturated


def test_traced_block_tokens():
    """trace=True: the same push cycles and the same tokens (blocks as Block arrays) on every stream."""
    from fuseflow.compiler import compile_text
    from fuseflow.samml import kernels
    prog = compile_text(PROGRAMS["browsum"], name="p").program
    inputs = {"A": kernels.random_sparse(np.random.default_rng(1), (8, 8), 0.8)}
    ra = run(prog, inputs, engine="python", trace=True)
    rb = run(prog, inputs, engine="compiled", trace=True)
    assert rb.stats["engine"] == "compiled" and ra.trace == rb.trace
    for ka, kb in zip(ra.trace_tokens, rb.trace_tokens):
        assert ka.keys() == kb.keys()
        for sid in ka:
            same_tokens(ka[sid], kb[sid])


def test_blocks_through_unchecked_ops_are_refused_precisely(monkeypatch):
    """Blocked programs run compiled unless an op whose model is not checked on blocks carries them (every op
    is checked today: the refusal is shown with spacc marked unchecked)."""
    entries = {e.meta["kernel"]: e for e in _suite_entries()}
    assert compiled.unsupported(entries["bspmm"].program) is None
    monkeypatch.setattr(compiled, "BLOCKS_UNCHECKED", frozenset({"spacc"}))
    assert compiled.unsupported(entries["bspmv"].program) is None
    assert compiled.unsupported(entries["bspmm"].program) == \
        "blocked tensors through op spacc run on the Python engine only"


@pytest.mark.parametrize("rhs", ("matrix", "vector"))
@pytest.mark.parametrize("n", (8, 16, 17, 32))
def test_block_matmul_float_large_blocks(n, rhs):
    """Float block products at larger B (the Python model's two ways of summing in k order: few NumPy calls up
    to B = 16, one k at a time above) are bit-identical on both engines."""
    rng = np.random.default_rng(n + (rhs == "vector"))
    bshape = (n, n) if rhs == "matrix" else (n,)
    a = [block(rng, (n, n), "float", 1e3), block(rng, (n, n), "float"), "S0", "D"]
    b = [block(rng, bshape, "float"), block(rng, bshape, "float", 1e-3), "S0", "D"]
    both("block_matmul", {"block": n, "rhs": rhs}, {"a": a, "b": b})


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e16, -1e16, 1e308, -1e308])


@pytest.mark.parametrize("rhs", ("matrix", "vector"))
def test_block_matmul_float_special_values(rhs):
    """Infinities, NaN, signed zeros and overflow meet in block products: the same bits on both engines."""
    rng = np.random.default_rng(99)
    n = 4
    bshape = (n, n) if rhs == "matrix" else (n,)
    a = [rng.choice(SPECIAL, (n, n)) for _ in range(6)]
    b = [rng.choice(SPECIAL, bshape) for _ in range(6)]
    both("block_matmul", {"block": n, "rhs": rhs}, {"a": a + ["S0", "D"], "b": b + ["S0", "D"]})


@pytest.mark.parametrize("op", ("sum", "max", "min"))
def test_reduce_rows_float_special_values(op):
    """One block per fibre: the row reductions alone (merging two NaN vectors element-wise keeps whichever NaN
    the add's compiled loop keeps, the known limit of element-wise ops on NaNs of two kinds)."""
    rng = np.random.default_rng(5)
    val = [t for _ in range(8) for t in (rng.choice(SPECIAL, (4, 4)), "S0")]
    both("reduce", {"op": op, "rows": True}, {"val": val + ["S1", "D"]})


@pytest.mark.parametrize("engine", ("python", "compiled"))
def test_float_block_sums_run_left_to_right(engine):
    """Float mode sums a block product's k terms and a row's elements in a defined order, left to right, each
    product and sum rounded on its own (docs/samml.md, block_matmul): (1e16 + 1) - 1e16 is 0, where an exact or
    reordered sum gives 1."""
    a = np.array([[1e16, 1.0, -1e16], [1.0, 1e16, -1e16], [1.0, 2.0, 3.0]])
    ones = np.ones(3)
    out = run_op("block_matmul", {"block": 3, "rhs": "vector"}, {"a": [a, "S0", "D"], "b": [ones, "S0", "D"]},
                 engine=engine)
    assert out["out"][0].tolist() == [0.0, 0.0, 6.0]
    out = run_op("reduce", {"op": "sum", "rows": True}, {"val": [a, "S0", "D"]}, engine=engine)
    assert out["val"][0].tolist() == [0.0, 0.0, 6.0]
