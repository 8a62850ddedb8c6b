import itertools
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from fuseflow.errors import TensorError
from fuseflow.tensors import (
    TensorFormat,
    load_mtx,
    load_npy,
    load_npz,
    load_sam_dir,
    load_tensor_file,
    pack,
    sam_file_names,
    save_npz,
    save_sam_dir,
)
from fuseflow.tensors.formats import COMPRESSED, DENSE


def design_example():
    b = np.zeros((3, 4))
    b[0, 0], b[0, 2], b[2, 1], b[2, 3] = 1, 2, 3, 4
    return b


def read_lines(path):
    with open(path) as f:
        return f.read().split()


# ---- .npz ------------------------------------------------------------------------------------
def test_npz_round_trip_dense_and_sparse(tmp_path):
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(3, 4))
    vec = np.arange(5, dtype=np.int32)
    scalar = np.array(2.5)
    m = sp.random(6, 7, density=0.3, format="coo", random_state=1)
    csc = sp.csc_matrix(design_example())
    path = tmp_path / "data.npz"
    save_npz(path, {"A": dense, "v": vec, "s": scalar, "M": m, "C": csc})
    assert sorted(os.listdir(tmp_path)) == ["data.npz"]  # nothing half-written left over
    raw = np.load(path)
    assert set(raw.files) >= {"M.__sparse_format__", "M.data", "M.indices", "M.indptr", "M.shape"}
    assert str(raw["M.__sparse_format__"]) == "csr"
    raw.close()
    out = load_npz(path)
    assert set(out) == {"A", "v", "s", "M", "C"}
    np.testing.assert_array_equal(out["A"], dense)
    np.testing.assert_array_equal(out["v"], vec)
    assert out["s"].shape == () and float(out["s"]) == 2.5
    assert isinstance(out["M"], sp.csr_array)
    np.testing.assert_array_equal(out["M"].toarray(), m.toarray())
    np.testing.assert_array_equal(out["C"].toarray(), design_example())


def test_npz_from_scipy_save_npz(tmp_path):
    for kind in ("csr", "csc", "coo"):
        path = tmp_path / f"W_{kind}.npz"
        m = sp.random(5, 8, density=0.4, format=kind, random_state=2)
        sp.save_npz(path, m)
        out = load_npz(path)
        assert list(out) == [f"W_{kind}"]
        assert isinstance(out[f"W_{kind}"], sp.csr_array)
        np.testing.assert_array_equal(out[f"W_{kind}"].toarray(), m.toarray())


def test_plain_np_savez_archive(tmp_path):
    path = tmp_path / "plain.npz"
    np.savez(path, x=np.ones(3), y=np.zeros((2, 2)))
    out = load_npz(path)
    assert sorted(out) == ["x", "y"]


def test_npz_errors(tmp_path):
    with pytest.raises(TensorError) as info:
        load_npz(tmp_path / "missing.npz")
    assert "missing.npz" in info.value.what
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"this is not a zip file")
    with pytest.raises(TensorError):
        load_npz(bad)
    trunc = tmp_path / "trunc.npz"
    np.savez(trunc, x=np.ones(100))
    trunc.write_bytes(trunc.read_bytes()[:60])
    with pytest.raises(TensorError):
        load_npz(trunc)
    with pytest.raises(TensorError):
        load_npz(tmp_path)  # a directory
    # an incomplete sparse encoding
    part = tmp_path / "part.npz"
    np.savez(part, **{"M.__sparse_format__": np.array("csr"), "M.data": np.ones(1), "M.shape": np.array([2, 2])})
    with pytest.raises(TensorError) as info:
        load_npz(part)
    assert "M" in info.value.what
    # inconsistent arrays
    incons = tmp_path / "incons.npz"
    np.savez(incons, **{"M.__sparse_format__": np.array("csr"), "M.data": np.ones(2),
                        "M.indices": np.array([0, 5]), "M.indptr": np.array([0, 1, 2]),
                        "M.shape": np.array([2, 2])})
    with pytest.raises(TensorError):
        load_npz(incons)
    unknown = tmp_path / "unknown.npz"
    np.savez(unknown, **{"M.__sparse_format__": np.array("bsr"), "M.data": np.ones(1),
                         "M.indices": np.array([0]), "M.indptr": np.array([0, 1]), "M.shape": np.array([1, 1])})
    with pytest.raises(TensorError):
        load_npz(unknown)
    objs = tmp_path / "objs.npz"
    np.savez(objs, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(TensorError):
        load_npz(objs)


def test_save_npz_errors_leave_no_file(tmp_path):
    path = tmp_path / "out.npz"
    with pytest.raises(TensorError):
        save_npz(path, {"A": np.array(["a", "b"])})
    with pytest.raises(TensorError):
        save_npz(path, {"": np.ones(1)})
    with pytest.raises(TensorError):
        save_npz(path, {"M": sp.csr_array(np.eye(2)), "M.data": np.ones(1)})
    with pytest.raises(TensorError):
        save_npz(path, [np.ones(1)])
    assert os.listdir(tmp_path) == []


# ---- .mtx / .npy / dispatch ------------------------------------------------------------------
def test_mtx(tmp_path):
    m = sp.random(6, 4, density=0.5, format="coo", random_state=3)
    path = tmp_path / "m.mtx"
    scipy.io.mmwrite(path, m)
    out = load_mtx(path)
    assert isinstance(out, sp.csr_array)
    np.testing.assert_allclose(out.toarray(), m.toarray())
    dense_path = tmp_path / "d.mtx"
    scipy.io.mmwrite(dense_path, np.arange(6.0).reshape(2, 3))
    d = load_mtx(dense_path)
    assert isinstance(d, np.ndarray) and d.shape == (2, 3)
    assert load_tensor_file(path)["m"].shape == (6, 4)
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n5 5 1.0\n")
    with pytest.raises(TensorError):
        load_mtx(bad)
    with pytest.raises(TensorError):
        load_mtx(tmp_path / "nope.mtx")


def test_npy_and_dispatch(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.arange(4.0))
    out = load_tensor_file(path)
    assert list(out) == ["x"]
    np.testing.assert_array_equal(out["x"], np.arange(4.0))
    np.testing.assert_array_equal(load_npy(path), np.arange(4.0))
    npz = tmp_path / "y.npz"
    save_npz(npz, {"y": np.ones(2)})
    assert list(load_tensor_file(npz)) == ["y"]
    with pytest.raises(TensorError):
        load_npy(npz)
    with pytest.raises(TensorError):
        load_tensor_file(tmp_path / "z.txt")
    with pytest.raises(TensorError):
        load_tensor_file(tmp_path / "missing.npy")


# ---- SAM directories -------------------------------------------------------------------------
def test_sam_files_for_design_example(tmp_path):
    p = pack(design_example(), "dcsr")
    save_sam_dir(p, tmp_path, "B")
    assert sorted(os.listdir(tmp_path)) == sorted(sam_file_names("B", p.format))
    assert read_lines(tmp_path / "tensor_B_mode_shape") == ["3", "4"]
    assert read_lines(tmp_path / "tensor_B_mode_0_seg") == ["0", "2"]
    assert read_lines(tmp_path / "tensor_B_mode_0_crd") == ["0", "2"]
    assert read_lines(tmp_path / "tensor_B_mode_1_seg") == ["0", "2", "4"]
    assert read_lines(tmp_path / "tensor_B_mode_1_crd") == ["0", "2", "1", "3"]
    assert [float(x) for x in read_lines(tmp_path / "tensor_B_mode_vals")] == [1, 2, 3, 4]
    q = load_sam_dir(tmp_path, "B")
    assert q.format == p.format and q.same_structure(p)
    np.testing.assert_array_equal(q.vals, p.vals)


def test_sam_csc_names_files_by_tensor_dimension(tmp_path):
    p = pack(design_example(), "csc")
    save_sam_dir(p, tmp_path, "B")
    # the compressed level stores dimension 0 (rows); the dense level (columns) writes no files
    assert read_lines(tmp_path / "tensor_B_mode_0_seg") == ["0", "1", "2", "3", "4"]
    assert read_lines(tmp_path / "tensor_B_mode_0_crd") == ["0", "2", "0", "2"]
    assert not (tmp_path / "tensor_B_mode_1_seg").exists()
    assert read_lines(tmp_path / "tensor_B_mode_shape") == ["3", "4"]
    ref = sp.csc_array(design_example())
    assert read_lines(tmp_path / "tensor_B_mode_0_seg") == [str(x) for x in ref.indptr]
    q = load_sam_dir(tmp_path, "B")
    assert q.format == TensorFormat.named("csc")
    np.testing.assert_array_equal(q.to_dense(), design_example())


@pytest.mark.parametrize("order", [0, 1, 2, 3])
def test_sam_round_trip_every_format(tmp_path, order):
    rng = np.random.default_rng(order)
    shape = (3, 2, 4)[:order]
    a = rng.normal(size=shape)
    a[rng.random(shape) < 0.5] = 0.0
    for i, levels in enumerate(itertools.product((DENSE, COMPRESSED), repeat=order)):
        for j, mo in enumerate(itertools.permutations(range(order))):
            fmt = TensorFormat(levels, mo)
            p = pack(a, fmt)
            d = tmp_path / f"f{i}_{j}"
            save_sam_dir(p, d, "T")
            q = load_sam_dir(d, "T")
            assert q.format == fmt and q.same_structure(p)
            np.testing.assert_array_equal(q.vals, p.vals)  # repr() round-trips float64 exactly
            r = load_sam_dir(d, "T", fmt=fmt)
            assert r.same_structure(p)


def test_sam_without_format_file_infers_levels(tmp_path):
    p = pack(design_example(), "csr")
    save_sam_dir(p, tmp_path, "B")
    os.remove(tmp_path / "tensor_B_mode_format")
    q = load_sam_dir(tmp_path, "B")
    assert q.format == TensorFormat.named("csr")
    # Onyx-style dense level files (seg = [0, dim], no crd) are read as dense
    (tmp_path / "tensor_B_mode_0_seg").write_text("0\n3\n")
    assert load_sam_dir(tmp_path, "B").format == TensorFormat.named("csr")
    # a non-identity mode order needs the format file or an explicit format
    c = pack(design_example(), "dcsc")
    save_sam_dir(c, tmp_path / "c", "C")
    os.remove(tmp_path / "c" / "tensor_C_mode_format")
    got = load_sam_dir(tmp_path / "c", "C", fmt="dcsc")
    np.testing.assert_array_equal(got.to_dense(), design_example())


def test_sam_raw_fixed_values(tmp_path):
    p = pack(design_example(), "dcsr").with_vals(np.array([65536, -3, 7, 2 ** 31 - 1]))
    save_sam_dir(p, tmp_path, "X")
    assert read_lines(tmp_path / "tensor_X_mode_vals") == ["65536", "-3", "7", "2147483647"]
    q = load_sam_dir(tmp_path, "X", raw=True)
    assert q.vals.dtype == np.int64 and q.vals.tolist() == [65536, -3, 7, 2 ** 31 - 1]


def test_sam_empty_and_scalar(tmp_path):
    z = pack(np.zeros((2, 3)), "dcsr")
    save_sam_dir(z, tmp_path, "Z")
    assert read_lines(tmp_path / "tensor_Z_mode_0_seg") == ["0", "0"]
    assert read_lines(tmp_path / "tensor_Z_mode_0_crd") == []
    q = load_sam_dir(tmp_path, "Z")
    assert q.same_structure(z)
    s = pack(3.5, "scalar")
    save_sam_dir(s, tmp_path, "s")
    assert read_lines(tmp_path / "tensor_s_mode_shape") == []
    assert load_sam_dir(tmp_path, "s").vals.tolist() == [3.5]


def test_sam_errors(tmp_path):
    p = pack(design_example(), "dcsr")
    save_sam_dir(p, tmp_path, "B")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "Q")                      # no such tensor
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path / "nowhere", "B")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B", fmt=TensorFormat.named("csf"))  # order 3 vs 2
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B", fmt="csr")           # dense level: seg/crd files do not fit
    (tmp_path / "tensor_B_mode_1_crd").write_text("0\n2\n1\n7\n")
    with pytest.raises(TensorError) as info:
        load_sam_dir(tmp_path, "B")
    assert "out of range" in info.value.why
    (tmp_path / "tensor_B_mode_1_crd").write_text("0\nx\n1\n3\n")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B")
    (tmp_path / "tensor_B_mode_1_crd").write_text("0\n2\n1\n3\n")
    (tmp_path / "tensor_B_mode_vals").write_text("1\n2\n")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B")
    (tmp_path / "tensor_B_mode_vals").write_text("1\n2\n3\nfour\n")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B")
    (tmp_path / "tensor_B_mode_vals").write_text("1.5\n2\n3\n4\n")
    with pytest.raises(TensorError):
        load_sam_dir(tmp_path, "B", raw=True)
    with pytest.raises(TensorError):
        save_sam_dir(design_example(), tmp_path, "B")   # not packed
    with pytest.raises(TensorError):
        save_sam_dir(p, tmp_path, "a/b")


def test_load_npz_on_npy_file(tmp_path):
    path = tmp_path / "x.npz"
    with open(path, "wb") as f:
        np.save(f, np.arange(3))
    with pytest.raises(TensorError) as info:
        load_npz(path)
    assert "npy" in info.value.why
