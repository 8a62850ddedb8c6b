"""Formats of intermediates (fuseflow/compiler/intermediates.py) and unions that are only their dense operands
(fuseflow/compiler/passes/locate.py): two-layer models cost tokens in the nonzeros, not in n squared (issue 45).

Results are checked against NumPy; token counts against the node count."""

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.compiler import compile_text
from fuseflow.sim import compiled, run

#: both engines where the compiled one is built (a machine without g++ runs the Python engine only)
ENGINES = ["python"] + (["compiled"] if compiled.available() else [])


def adjacency(n, deg, seed, empty=()):
    """n x n, ``deg`` distinct random neighbours per row (values in [0.5, 1.5)); rows ``empty`` have none."""
    rng = np.random.default_rng(seed)
    rows = [i for i in range(n) if i not in set(empty)]
    r = np.repeat(rows, deg)
    c = np.concatenate([rng.choice(n, deg, replace=False) for _ in rows]) if rows else np.zeros(0, int)
    return sp.csr_array((rng.uniform(0.5, 1.5, len(r)), (r, c)), shape=(n, n))


def gcn2(n, f, bias=True, a_format="csr"):
    """Two GCN layers (each one region); with ``bias`` each layer adds a bias before its relu."""
    b1, b2 = (" + b1(h)", " + b2(h)") if bias else ("", "")
    return (f"tensor A({n},{n}) : {a_format}\ntensor X({n},{f}) : dense\ntensor W1({f},{f}) : dense\n"
            f"tensor W2({f},{f}) : dense\ntensor b1({f}) : dense\ntensor b2({f}) : dense\n"
            f"fuse {{\n  T1(i,j) = A(i,k) * X(k,j)\n  H1(i,h) = relu(T1(i,j) * W1(j,h){b1})\n}}\n"
            f"fuse {{\n  T2(i,j) = A(i,k) * H1(k,j)\n  H2(i,h) = relu(T2(i,j) * W2(j,h){b2})\n}}\n")


def gcn2_data(n, f, seed=0, empty=(), bias=True):
    rng = np.random.default_rng(seed)
    d = {"A": adjacency(n, 3, seed, empty), "X": rng.uniform(-1, 1, (n, f)), "W1": rng.uniform(-1, 1, (f, f)),
         "W2": rng.uniform(-1, 1, (f, f)), "b1": rng.uniform(-1, 1, f), "b2": rng.uniform(-1, 1, f)}
    if not bias:
        del d["b1"], d["b2"]
    return d


def gcn2_numpy(d, bias=True):
    h1 = np.maximum(d["A"] @ d["X"] @ d["W1"] + (d["b1"] if bias else 0), 0)
    return np.maximum(d["A"] @ h1 @ d["W2"] + (d["b2"] if bias else 0), 0)


def levels(program, name):
    return tuple(program.tensors[name].levels)


def nodes(program, op, tensor=None):
    return [(k.name, nd) for k in program.kernels for nd in k.nodes.values()
            if nd.op == op and (tensor is None or nd.params.get("tensor") == tensor)]


@pytest.mark.parametrize("bias, want", [(True, ("dense", "dense")), (False, ("dense", "compressed"))])
def test_intermediate_levels_follow_what_the_writer_covers(bias, want):
    """H1's rows are A's dense row level (every row is written), its columns every coordinate only with the
    bias (without it a row holds what the reduction over j produced). Rows 2 and 5 of A are empty: without the
    bias H1 has empty fibres there, which a dense row level keeps."""
    n, f = 8, 3
    d = gcn2_data(n, f, empty=(0, 2, 5), bias=bias)
    res = compile_text(gcn2(n, f, bias), fuse="regions")
    assert levels(res.program, "H1") == want
    assert levels(res.program, "H2") == ("compressed", "compressed")       # user-visible: canonical
    # layer 2 locates A's neighbours in H1's row level instead of scanning it
    assert ("H2", 0) in [(k, nd.params.get("level")) for k, nd in nodes(res.program, "locate", "H1")]
    assert not [nd for k, nd in nodes(res.program, "level_scan", "H1") if nd.params.get("level") == 0]
    # a dense level has no writer
    assert [nd.params["level"] for k, nd in nodes(res.program, "level_write", "H1")] == \
        [lv for lv, fmt in enumerate(want) if fmt == "compressed"]
    for engine in ENGINES:
        got = run(res.program, d, engine=engine)
        np.testing.assert_allclose(got.outputs["H2"], gcn2_numpy(d, bias), rtol=1e-12, atol=1e-12)


def test_intermediate_over_a_compressed_row_level_stays_compressed():
    """A in DCSR: the first layer writes only A's non-empty rows, so H1's row level is compressed (and layer 2
    intersects it), with results unchanged."""
    n, f = 8, 3
    d = gcn2_data(n, f, empty=(1,), bias=False)
    res = compile_text(gcn2(n, f, bias=False, a_format="dcsr"), fuse="regions")
    assert levels(res.program, "H1") == ("compressed", "compressed")
    np.testing.assert_allclose(run(res.program, d).outputs["H2"], gcn2_numpy(d, False), rtol=1e-12, atol=1e-12)


def test_dump_table_says_why():
    res = compile_text(gcn2(8, 3, bias=False), fuse="none")
    notes = [n for p in res.kernels for n in p.notes if n.startswith("format of intermediate H1")]
    assert len(notes) == 1
    assert "i dense (every coordinate is written" in notes[0]
    assert "h compressed (only the coordinates some operand holds" in notes[0]


def test_full_fusion_locates_the_inner_adjacency_rows():
    """Fully fused, layer 1 is inlined into layer 2: its bias covers the inner row index with a union of the
    inner A's dense row level and the outer row. That union is only its dense operand, so the intersection with
    the outer row locates the inner rows (no dense scan of A's rows under the outer row)."""
    n, f = 12, 3
    d = gcn2_data(n, f, empty=(0, 7))
    res = compile_text(gcn2(n, f), fuse="full")
    [k] = res.program.kernels
    row_scans = [nd.id for nd in k.nodes.values()
                 if nd.op == "level_scan" and nd.params.get("tensor") == "A" and nd.params.get("level") == 0]
    assert len(row_scans) == 1                         # the outer rows only; the inner ones are located
    assert [nd.params.get("level") for _, nd in nodes(res.program, "locate", "A")] == [0]
    for engine in ENGINES:
        got = run(res.program, d, engine=engine)
        np.testing.assert_allclose(got.outputs["H2"], gcn2_numpy(d), rtol=1e-12, atol=1e-12)
    # without the locate pass the inner rows are scanned for every outer row
    scan = run(compile_text(gcn2(n, f), fuse="full", locate=False).program, d)
    np.testing.assert_allclose(scan.outputs["H2"], gcn2_numpy(d), rtol=1e-12, atol=1e-12)


def tokens_per_node(src, fuse, d, want):
    res = compile_text(src, fuse=fuse)
    got = run(res.program, d)
    np.testing.assert_allclose(got.outputs["H2"], want, rtol=1e-9, atol=1e-9)
    return got.stats["tokens"] / d["A"].shape[0]


@pytest.mark.parametrize("fuse", ["none", "regions", "full"])
@pytest.mark.parametrize("bias", [True, False])
def test_two_layer_tokens_scale_with_nodes(fuse, bias):
    """A fixed number of neighbours per node: tokens per node at n = 1000 within 1.2x of n = 100 (before:
    every row of layer 2 scanned all n rows of the intermediate, or full fusion all n inner rows of A)."""
    f = 4
    per = []
    for n in (100, 1000):
        d = gcn2_data(n, f, seed=n, bias=bias)
        per.append(tokens_per_node(gcn2(n, f, bias), fuse, d, gcn2_numpy(d, bias)))
    assert per[1] <= 1.2 * per[0], per


def test_cost_model_estimates_the_intermediate_densities():
    """The cost model's estimate that --dump-table prints beside the formats: A in DCSR at a declared density of
    0.1 (8 x 8: about 57% of rows non-empty), so H1's row level is estimated sparse, its columns full per row."""
    from fuseflow.compiler.cost import estimate, level_densities
    src = gcn2(8, 3, bias=False, a_format="dcsr").replace(": dcsr", ": dcsr density 0.1", 1)
    prog = compile_text(src, fuse="regions").program
    est = estimate(prog, {"A": 0.1})
    [pos] = [k["written"]["H1"] for k in est.kernels if "H1" in k["written"]]
    dens = level_densities(prog.tensors["H1"], pos)
    assert dens[0] == pytest.approx(1 - 0.9 ** 8)          # a row holds a nonzero
    # X is dense: a non-empty row holds every column (the model's merge of partial results is approximate)
    assert dens[1] == pytest.approx(1.0, abs=0.02)
