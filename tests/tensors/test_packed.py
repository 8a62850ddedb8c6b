import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuseflow.errors import TensorError
from fuseflow.tensors import CompressedLevel, DenseLevel, PackedTensor, TensorFormat, pack
from fuseflow.tensors.fixed import FixedFormat
from fuseflow.tensors.formats import COMPRESSED, DENSE

D, C = DENSE, COMPRESSED


# ---- an independent, obviously-correct reference packer (depth-first over the fibre tree) ------
def ref_pack(arr, levels, mode_order):
    """Return (segs, crds, vals): per level, seg list (None for dense) and crd list (None for dense)."""
    la = np.asarray(arr).transpose(mode_order) if len(levels) else np.asarray(arr)
    segs = [[0] if lv == C else None for lv in levels]
    crds = [[] if lv == C else None for lv in levels]
    vals = []

    def visit(sub, k):
        if k == len(levels):
            vals.append(float(sub))
            return
        if levels[k] == D:
            for c in range(sub.shape[0]):
                visit(sub[c], k + 1)
        else:
            for c in range(sub.shape[0]):
                if np.any(sub[c] != 0):
                    crds[k].append(c)
                    visit(sub[c], k + 1)
            segs[k].append(len(crds[k]))

    visit(la, 0)
    return segs, crds, vals


def check_against_ref(arr, p):
    segs, crds, vals = ref_pack(arr, p.format.levels, p.format.mode_order)
    for k, lv in enumerate(p.levels):
        if p.format.levels[k] == D:
            assert isinstance(lv, DenseLevel)
            assert lv.size == arr.shape[p.format.mode_order[k]]
        else:
            assert isinstance(lv, CompressedLevel)
            assert lv.seg.tolist() == segs[k], (k, lv.seg.tolist(), segs[k])
            assert lv.crd.tolist() == crds[k]
            assert lv.seg.dtype == np.int64 and lv.crd.dtype == np.int64
    assert p.vals.tolist() == vals


def all_formats(order):
    for levels in itertools.product((D, C), repeat=order):
        for mo in itertools.permutations(range(order)):
            yield TensorFormat(levels, mo)


def random_tensor(rng, shape, density):
    a = rng.integers(1, 10, size=shape).astype(np.float64)
    a[rng.random(shape) >= density] = 0.0
    return a


# ---- the DESIGN.md example -------------------------------------------------------------------
def design_example():
    b = np.zeros((3, 4))
    b[0, 0], b[0, 2], b[2, 1], b[2, 3] = 1, 2, 3, 4
    return b


def test_design_example_dcsr():
    p = PackedTensor.from_dense(design_example(), "dcsr")
    assert p.levels[0].seg.tolist() == [0, 2] and p.levels[0].crd.tolist() == [0, 2]
    assert p.levels[1].seg.tolist() == [0, 2, 4] and p.levels[1].crd.tolist() == [0, 2, 1, 3]
    assert p.vals.tolist() == [1, 2, 3, 4]
    assert p.capacities() == [2, 4, 4]
    assert p.nnz == 4


def test_design_example_csr():
    p = PackedTensor.from_dense(design_example(), "csr")
    assert isinstance(p.levels[0], DenseLevel) and p.levels[0].size == 3
    assert p.levels[1].seg.tolist() == [0, 2, 2, 4] and p.levels[1].crd.tolist() == [0, 2, 1, 3]
    assert p.capacities() == [3, 4, 4]


def test_design_example_csr_matches_scipy():
    b = design_example()
    p = PackedTensor.from_dense(b, "csr")
    ref = sp.csr_array(b)
    assert p.levels[1].seg.tolist() == ref.indptr.tolist()
    assert p.levels[1].crd.tolist() == ref.indices.tolist()
    q = PackedTensor.from_dense(b, "csc")
    ref = sp.csc_array(b)
    assert q.levels[1].seg.tolist() == ref.indptr.tolist()
    assert q.levels[1].crd.tolist() == ref.indices.tolist()
    assert q.vals.tolist() == ref.data.tolist()


# ---- round trips for every format ------------------------------------------------------------
@pytest.mark.parametrize("order", [1, 2, 3])
def test_every_format_and_mode_order(order):
    rng = np.random.default_rng(order)
    shapes = {1: [(1,), (5,), (7,)], 2: [(1, 1), (3, 4), (5, 2), (4, 6)],
              3: [(1, 1, 1), (2, 3, 4), (3, 1, 2)]}[order]
    for shape in shapes:
        for density in (0.0, 0.3, 1.0):
            a = random_tensor(rng, shape, density)
            if order == 2 and shape == (4, 6):
                a[1, :] = 0
                a[:, 2] = 0  # an empty row and an empty column
            for fmt in all_formats(order):
                p = PackedTensor.from_dense(a, fmt)
                check_against_ref(a, p)
                out = p.to_dense()
                assert out.shape == a.shape and out.dtype == np.float64
                np.testing.assert_array_equal(out, a)
                assert p.nnz == np.count_nonzero(a)
                if order == 2:
                    s = p.to_scipy()
                    assert isinstance(s, sp.csr_array)
                    np.testing.assert_array_equal(s.toarray(), a)
                    q = PackedTensor.from_scipy(sp.csr_array(a), fmt)
                    assert q.same_structure(p)
                    np.testing.assert_array_equal(q.vals, p.vals)
                again = PackedTensor.from_levels(p.shape, p.format, p.levels, p.vals)
                assert again.same_structure(p)


def test_named_formats_round_trip():
    rng = np.random.default_rng(7)
    a2 = random_tensor(rng, (6, 5), 0.4)
    for name in ("dense", "csr", "csc", "dcsr", "dcsc", "sparse", "csf"):
        p = pack(a2, TensorFormat.named(name, 2))
        np.testing.assert_array_equal(p.to_dense(), a2)
        np.testing.assert_array_equal(p.to_scipy().toarray(), a2)
    a3 = random_tensor(rng, (3, 4, 5), 0.3)
    for name in ("dense", "csf", "sparse"):
        p = pack(a3, TensorFormat.named(name, 3))
        np.testing.assert_array_equal(p.to_dense(), a3)
    a1 = random_tensor(rng, (9,), 0.5)
    for name in ("dv", "sv", "dense", "sparse"):
        p = pack(a1, TensorFormat.named(name, 1))
        np.testing.assert_array_equal(p.to_dense(), a1)


def test_compressed_vector_layout():
    p = pack(np.array([0.0, 5.0, 0.0, 7.0]), "sv")
    assert p.levels[0].seg.tolist() == [0, 2]
    assert p.levels[0].crd.tolist() == [1, 3]
    assert p.vals.tolist() == [5.0, 7.0]


def test_all_zero_tensors_have_one_empty_top_fibre():
    for shape in [(3,), (3, 4), (2, 3, 4)]:
        a = np.zeros(shape)
        for fmt in all_formats(len(shape)):
            p = pack(a, fmt)
            check_against_ref(a, p)
            if fmt.levels[0] == C:
                assert p.levels[0].seg.tolist() == [0, 0]
            np.testing.assert_array_equal(p.to_dense(), a)
            assert p.nnz == 0


def test_dense_below_compressed_and_empty_fibres():
    a = np.zeros((3, 4))
    a[1, 2] = 9.0
    p = pack(a, "cd")
    assert p.levels[0].crd.tolist() == [1]
    assert p.vals.tolist() == [0, 0, 9, 0]
    p = pack(a, "dc")
    assert p.levels[1].seg.tolist() == [0, 0, 1, 1]  # one (possibly empty) fibre per dense position


def test_scalar():
    for x in (0.0, 2.5, np.float64(-1.0), 3):
        p = pack(x, TensorFormat.named("scalar"))
        assert p.shape == () and p.levels == [] and p.vals.shape == (1,)
        assert float(p.to_dense()) == float(x)
        assert p.capacities() == [1]
    p = pack(np.array(4.0), "dense:")
    assert p.vals.tolist() == [4.0]
    with pytest.raises(TensorError):
        p.to_scipy()


def test_integer_values_stay_int64():
    a = np.array([[0, 3], [-2, 0]], dtype=np.int32)
    p = pack(a, "dcsr")
    assert p.vals.dtype == np.int64
    assert p.to_dense().dtype == np.int64
    np.testing.assert_array_equal(p.to_dense(), a)
    b = pack(np.array([[True, False]]), "csr")
    assert b.vals.dtype == np.float64 and b.vals.tolist() == [1.0]


# ---- SciPy input -----------------------------------------------------------------------------
def test_scipy_inputs_of_every_kind_and_explicit_zeros():
    rng = np.random.default_rng(3)
    a = random_tensor(rng, (7, 5), 0.4)
    a[2, :] = 0
    kinds = [sp.csr_array, sp.csc_array, sp.coo_array, sp.lil_array, sp.dok_array, sp.dia_array,
             sp.bsr_array, sp.csr_matrix, sp.csc_matrix, sp.coo_matrix]
    for kind in kinds:
        m = kind(a)
        for fmt in all_formats(2):
            p = PackedTensor.from_scipy(m, fmt)
            check_against_ref(a, p)
    # explicit zeros and duplicates in COO input
    rows = np.array([0, 0, 1, 1, 2, 2])
    cols = np.array([1, 1, 0, 2, 2, 0])
    data = np.array([1.0, 2.0, 0.0, 5.0, -5.0, 4.0])
    m = sp.coo_array((data, (rows, cols)), shape=(3, 3))
    dense = m.toarray()  # scipy sums duplicates: (0,1)=3, (1,0)=0 explicit zero
    for fmt in all_formats(2):
        p = pack(m, fmt)
        check_against_ref(dense, p)
        assert p.nnz == np.count_nonzero(dense)
    csr = sp.csr_array(([0.0, 1.0], [0, 1], [0, 2, 2]), shape=(2, 2))
    p = pack(csr, "csr")
    assert p.levels[1].crd.tolist() == [1] and p.vals.tolist() == [1.0]


def test_scipy_rejects_complex():
    with pytest.raises(TensorError):
        pack(sp.csr_array(np.array([[1j, 0]])), "csr")
    with pytest.raises(TensorError):
        pack(np.array([[1j, 0]]), "csr")


def test_pack_errors():
    with pytest.raises(TensorError):
        pack(np.zeros((2, 2)), TensorFormat.named("csf"))  # order 3 vs order 2
    with pytest.raises(TensorError):
        pack(np.zeros((2, 2, 2)), "csr")
    with pytest.raises(TensorError):
        pack("hello", "csr")
    with pytest.raises(TensorError):
        pack(np.zeros((2, 2)), "nonsense")
    with pytest.raises(TensorError):
        PackedTensor.from_scipy(np.zeros((2, 2)), "csr")


def test_pack_list_and_repack():
    p = pack([[0.0, 1.0], [2.0, 0.0]], "csr")
    q = pack(p, "dcsc")
    np.testing.assert_array_equal(q.to_dense(), [[0.0, 1.0], [2.0, 0.0]])
    assert pack(p, "csr") is p
    assert q.allclose(p)


# ---- from_levels validation ------------------------------------------------------------------
def good_levels():
    return [CompressedLevel([0, 2], [0, 2]), CompressedLevel([0, 2, 4], [0, 2, 1, 3])]


@pytest.mark.parametrize("mutate, needle", [
    (lambda L, v: ([CompressedLevel([0, 2, 2], [0, 2]), L[1]], v), "seg"),     # seg too long
    (lambda L, v: ([CompressedLevel([1, 2], [0, 2]), L[1]], v), "start"),      # seg[0] != 0
    (lambda L, v: ([L[0], CompressedLevel([0, 3, 2], [0, 2, 1])], v), "non-decreasing"),
    (lambda L, v: ([CompressedLevel([0, 2], [0, 3]), L[1]], v), "out of range"),
    (lambda L, v: ([CompressedLevel([0, 2], [-1, 2]), L[1]], v), "out of range"),
    (lambda L, v: ([L[0], CompressedLevel([0, 2, 4], [2, 0, 1, 3])], v), "increasing"),
    (lambda L, v: ([L[0], CompressedLevel([0, 2, 4], [0, 0, 1, 3])], v), "increasing"),
    (lambda L, v: ([L[0], CompressedLevel([0, 2, 4], [0, 2, 1])], v), "entries"),
    (lambda L, v: (L, v[:3]), "vals"),
    (lambda L, v: (L, v.reshape(2, 2)), "1-D"),
    (lambda L, v: ([DenseLevel(3), L[1]], v), "compressed"),
    (lambda L, v: (L[:1], v), "levels"),
    (lambda L, v: ([CompressedLevel([0, 2], [0.5, 2]), L[1]], v), "integers"),
    (lambda L, v: ([CompressedLevel([[0, 2]], [0, 2]), L[1]], v), "1-D"),
    (lambda L, v: (L, np.array(["a", "b", "c", "d"])), "real"),
])
def test_from_levels_errors(mutate, needle):
    levels, vals = mutate(good_levels(), np.array([1.0, 2.0, 3.0, 4.0]))
    with pytest.raises(TensorError) as info:
        PackedTensor.from_levels((3, 4), "dcsr", levels, vals)
    assert needle in str(info.value)


def test_from_levels_accepts_lists_and_new_fibre_restarts():
    # coordinates may decrease across a fibre boundary (second fibre restarts at 1)
    p = PackedTensor.from_levels((3, 4), "dcsr", good_levels(), [1, 2, 3, 4])
    assert p.vals.dtype == np.int64
    np.testing.assert_array_equal(p.to_dense(), design_example().astype(np.int64))
    q = PackedTensor.from_levels([3, 4], TensorFormat.named("csr"),
                                 [DenseLevel(3), CompressedLevel([0, 2, 2, 4], [0, 2, 1, 3])],
                                 np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(q.to_dense(), design_example())
    # empty fibres in the middle, explicit zero values: structurally fine
    r = PackedTensor.from_levels((3, 4), "dcsr",
                                 [CompressedLevel([0, 3], [0, 1, 2]), CompressedLevel([0, 1, 1, 2], [3, 0])],
                                 [0.0, 5.0])
    assert r.nnz == 1 and r.capacities() == [3, 2, 2]


@pytest.mark.parametrize("shape, fmt, levels", [
    ((3, 4), "csr", [DenseLevel(4), CompressedLevel([0, 0, 0, 0, 0], [])]),  # dense size mismatch
    ((3,), "csr", [DenseLevel(3), CompressedLevel([0, 0, 0, 0], [])]),      # shape/format order
    ((3, -1), "csr", [DenseLevel(3), CompressedLevel([0, 0, 0, 0], [])]),   # negative dim
    ((3, 1.5), "csr", [DenseLevel(3), CompressedLevel([0, 0, 0, 0], [])]),  # non-int dim
])
def test_from_levels_shape_errors(shape, fmt, levels):
    with pytest.raises(TensorError):
        PackedTensor.from_levels(shape, fmt, levels, [])


def test_constructor_validates():
    with pytest.raises(TensorError):
        PackedTensor((3, 4), "dcsr", good_levels(), [1.0])
    p = PackedTensor((3, 4), "dcsr", good_levels(), [1.0, 2, 3, 4])
    assert p.format == TensorFormat.named("dcsr")


# ---- from_coo, with_vals, fixed point, allclose ----------------------------------------------
def test_from_coo():
    coords = np.array([[2, 0, 2, 0], [3, 2, 1, 0]])
    vals = np.array([4.0, 2.0, 3.0, 1.0])
    for fmt in all_formats(2):
        p = PackedTensor.from_coo((3, 4), coords, vals, fmt)
        check_against_ref(design_example(), p)
    c, v = PackedTensor.from_coo((3, 4), coords, vals, "csc").to_coo()
    assert c.shape == (2, 4)
    got = np.zeros((3, 4))
    got[c[0], c[1]] = v
    np.testing.assert_array_equal(got, design_example())
    with pytest.raises(TensorError):
        PackedTensor.from_coo((3, 4), [[0, 0], [1, 1]], [1.0, 2.0], "csr")
    p = PackedTensor.from_coo((3, 4), [[0, 0], [1, 1]], [1.0, 2.0], "csr", sum_duplicates=True)
    assert p.vals.tolist() == [3.0]
    with pytest.raises(TensorError):
        PackedTensor.from_coo((3, 4), [[0, 3], [1, 1]], [1.0, 2.0], "csr")
    with pytest.raises(TensorError):
        PackedTensor.from_coo((3, 4), [[0, 1]], [1.0, 2.0], "csr")
    e = PackedTensor.from_coo((3, 4), np.zeros((2, 0)), [], "dcsr")
    assert e.levels[0].seg.tolist() == [0, 0]


def test_with_vals_and_fixed_point():
    p = pack(design_example(), "dcsr")
    q = p.with_vals([5, 6, 7, 8])
    assert q.vals.dtype == np.int64 and q.levels is p.levels
    with pytest.raises(TensorError):
        p.with_vals([1.0, 2.0])
    fx = FixedFormat(16, 8)
    r = p.encode_fixed(fx)
    assert r.vals.tolist() == [256, 512, 768, 1024]
    assert r.decode_fixed(fx).allclose(p)
    with pytest.raises(TensorError):
        r.encode_fixed(fx)
    with pytest.raises(TensorError):
        p.decode_fixed(fx)
    with pytest.raises(TensorError):
        pack(np.array([[1000.0]]), "csr").encode_fixed(fx, checked=True)


def test_allclose():
    a = design_example()
    p = pack(a, "dcsr")
    assert p.allclose(pack(a, "csc"))
    assert p.allclose(a) and p.allclose(sp.csr_array(a))
    assert not p.allclose(pack(a * 2, "csr"))
    b = a.copy()
    b[1, 1] = 1e-3
    assert not p.allclose(pack(b, "csr"))
    assert p.allclose(pack(b, "csr"), atol=1e-2)
    assert not p.allclose(np.zeros((4, 3)))
    assert not p.allclose(pack(np.zeros((4, 3)), "csr"))
    assert pack(2.0, "scalar").allclose(pack(2.0, "scalar"))


# ---- property tests --------------------------------------------------------------------------
@st.composite
def tensors_and_formats(draw):
    order = draw(st.integers(0, 3))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=order, max_size=order)))
    density = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    seed = draw(st.integers(0, 2 ** 31))
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape)
    a[rng.random(shape) >= density] = 0.0
    levels = tuple(draw(st.lists(st.sampled_from([D, C]), min_size=order, max_size=order)))
    mo = tuple(draw(st.permutations(range(order))))
    return np.asarray(a, dtype=np.float64), TensorFormat(levels, mo)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tensors_and_formats())
def test_property_pack_unpack(case):
    a, fmt = case
    p = pack(a, fmt)
    check_against_ref(a, p)
    np.testing.assert_array_equal(p.to_dense(), a)
    again = PackedTensor.from_levels(p.shape, p.format, p.levels, p.vals)
    assert again.same_structure(p)
    c, v = p.to_coo()
    assert c.shape == (a.ndim, np.count_nonzero(a))
    if a.ndim:
        np.testing.assert_array_equal(a[tuple(c)], v)
    if a.ndim == 2:
        np.testing.assert_array_equal(p.to_scipy().toarray(), a)
        assert pack(sp.coo_array(a), fmt).same_structure(p)


def test_pack_million_nonzeros():
    """Structure of a 1e6-nonzero matrix (packing speed is measured in benchmarks/sim_bench.py, not here)."""
    rng = np.random.default_rng(0)
    n = 1_000_000
    rows = rng.integers(0, 20_000, size=n)
    cols = rng.integers(0, 20_000, size=n)
    m = sp.csr_array((np.ones(n), (rows, cols)), shape=(20_000, 20_000))
    m.sum_duplicates()
    assert m.nnz > 900_000
    p = pack(m, "csr")
    q = pack(m, "dcsc")
    assert p.levels[1].seg.tolist() == m.indptr.tolist()
    assert np.array_equal(p.levels[1].crd, m.indices)
    csc = m.tocsc()
    csc.sort_indices()
    nonempty = np.flatnonzero(np.diff(csc.indptr))
    assert np.array_equal(q.levels[0].crd, nonempty)
    assert np.array_equal(q.levels[1].crd, csc.indices)


def test_zero_size_dimensions():
    for shape in [(0,), (0, 3), (3, 0), (2, 0, 2)]:
        a = np.zeros(shape)
        for fmt in all_formats(len(shape)):
            p = pack(a, fmt)
            assert p.to_dense().shape == shape
            assert PackedTensor.from_levels(p.shape, p.format, p.levels, p.vals).same_structure(p)
            if len(shape) == 2:
                assert p.to_scipy().shape == shape
