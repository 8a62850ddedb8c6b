"""Blocked formats (bcsr:B, bdcsr:B, bdv:B): packing, bsr_array round trips, SAM files, bad input."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fuseflow.errors import TensorError
from fuseflow.tensors import FixedFormat, PackedTensor, TensorFormat, load_sam_dir, pack, save_sam_dir


@st.composite
def bsr_arrays(draw):
    """A canonical bsr_array: B in 1..5, up to 5 x 5 blocks, random stored blocks (some may hold zeros)."""
    b = draw(st.integers(1, 5))
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    mask = draw(st.lists(st.booleans(), min_size=rows * cols, max_size=rows * cols))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    indptr, indices, data = [0], [], []
    for r in range(rows):
        for c in range(cols):
            if mask[r * cols + c]:
                indices.append(c)
                blk = rng.integers(-3, 4, size=(b, b)).astype(np.float64) * rng.random((b, b)).round(2)
                data.append(blk)
        indptr.append(len(indices))
    data = np.asarray(data, dtype=np.float64).reshape(-1, b, b)
    return sp.bsr_array((data, np.asarray(indices, np.int64), np.asarray(indptr, np.int64)),
                        shape=(rows * b, cols * b), blocksize=(b, b)), b


@settings(max_examples=60, deadline=None)
@given(bsr_arrays(), st.sampled_from(["bcsr", "bdcsr"]))
def test_bsr_round_trip_is_exact(case, name):
    m, b = case
    p = pack(m, f"{name}:{b}")
    assert p.format.block == (b, b)
    back = p.to_bsr()
    assert back.blocksize == (b, b)
    assert np.array_equal(back.indptr, m.indptr)
    assert np.array_equal(back.indices, m.indices)
    assert np.array_equal(back.data, m.data)                     # every stored block, bit for bit
    assert np.array_equal(p.to_dense(), m.toarray())


@pytest.mark.parametrize("b", [1, 2, 4])
def test_levels_are_over_block_coordinates(b):
    rng = np.random.default_rng(b)
    dense = np.kron(rng.random((3, 4)) < 0.4, np.ones((b, b))) * rng.random((3 * b, 4 * b))
    p = pack(dense, f"bcsr:{b}")
    pattern = pack((np.abs(dense).reshape(3, b, 4, b).sum(axis=(1, 3)) != 0).astype(float), "csr")
    assert p.levels[0].size == 3
    assert np.array_equal(p.levels[1].seg, pattern.levels[1].seg)
    assert np.array_equal(p.levels[1].crd, pattern.levels[1].crd)
    assert p.vals.shape == (len(pattern.vals), b, b)
    for k, (i, j) in enumerate(zip(*np.nonzero(pattern.to_dense()))):
        assert np.array_equal(p.vals[k], dense[i * b:(i + 1) * b, j * b:(j + 1) * b])


def test_dense_blocked_vector():
    x = np.arange(8.0)
    p = pack(x, "bdv:4")
    assert p.levels[0].size == 2 and p.vals.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert np.array_equal(p.to_dense(), x)


def test_from_dense_scipy_and_packed_agree():
    rng = np.random.default_rng(0)
    a = np.kron(rng.random((4, 4)) < 0.5, np.ones((2, 2))) * rng.standard_normal((8, 8))
    p1, p2 = pack(a, "bdcsr:2"), pack(sp.csr_array(a), "bdcsr:2")
    assert p1.same_structure(p2) and np.array_equal(p1.vals, p2.vals)
    assert pack(pack(a, "csr"), "bdcsr:2").same_structure(p1)
    assert pack(p1, "csr").allclose(a)


def test_fixed_point_encodes_every_element():
    fx = FixedFormat(32, 16)
    p = pack(np.array([[0.5, 0, 0, 0], [0, 1.25, 0, 0]]), "bcsr:2").encode_fixed(fx)
    assert p.vals.dtype == np.int64 and p.vals.tolist() == [[[fx.encode(0.5), 0], [0, fx.encode(1.25)]]]


def test_sam_files_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    a = np.kron(rng.random((3, 2)) < 0.6, np.ones((4, 4))) * rng.standard_normal((12, 8))
    p = pack(a, "bdcsr:4")
    save_sam_dir(p, tmp_path, "A")
    assert (tmp_path / "tensor_A_mode_format").read_text().strip() == "bdcsr:4"
    assert len((tmp_path / "tensor_A_mode_vals").read_text().split()) == 16 * len(p.vals)
    q = load_sam_dir(tmp_path, "A")
    assert q.format == p.format and q.same_structure(p) and np.array_equal(q.vals, p.vals)


@pytest.mark.parametrize("spec, text", [("bcsr:4", "bcsr:4"), ("BDCSR:8", "bdcsr:8"), ("bdv:2", "bdv:2")])
def test_spellings(spec, text):
    fmt = TensorFormat.parse(spec)
    assert str(fmt) == text and TensorFormat.parse(str(fmt), fmt.order) == fmt
    assert TensorFormat.from_json(fmt.to_json()) == fmt
    assert fmt.unblocked() != fmt


def test_shape_not_divisible_is_one_error():
    with pytest.raises(TensorError, match="dimension 1 of size 6 is not divisible by the block size 4"):
        pack(np.ones((8, 6)), "bcsr:4")


def test_wrong_block_shape_in_vals():
    with pytest.raises(TensorError, match="must hold blocks of shape \\[2, 2\\]"):
        PackedTensor.from_levels((4, 4), "bcsr:2", pack(np.eye(2), "csr").levels, np.zeros((2, 3, 3)))
