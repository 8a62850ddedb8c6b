"""The tensor memories' host images: the per-fibre ``first`` array level_scan reads beside seg."""

import numpy as np
import scipy.sparse as sp

from fuseflow.hw.elaborate import packed_inputs
from fuseflow.hw.memory import first_words, plan_memories, tensor_images
from fuseflow.samml import kernels
from fuseflow.tensors import PackedTensor, TensorFormat


def test_first_words_by_hand():
    # fibres [0, 2], [], [1, 3, 5]: first coordinates 0 and 1, the middle one empty
    assert first_words([0, 2, 2, 5], [0, 2, 1, 3, 5]) == [0 << 2, 1, 1 << 2]
    # fibres [4], [], [0, 2], [7]: the first and the last hold one coordinate (bit 1)
    assert first_words([0, 1, 1, 3, 4], [4, 0, 2, 7]) == [4 << 2 | 2, 1, 0, 7 << 2 | 2]
    assert first_words([0, 0], []) == [1]
    assert first_words([0], []) == []


def test_first_words_of_a_csr_matrix_are_each_rows_first_column():
    rng = np.random.default_rng(3)
    a = sp.random_array((12, 9), density=0.15, random_state=rng, format="csr")
    a.sort_indices()
    nnz = np.diff(a.indptr)
    want = [int(a.indices[a.indptr[r]]) << 2 | int(nnz[r] == 1) << 1 if nnz[r] else 1 for r in range(12)]
    assert 0 < sum(nnz == 1) < sum(nnz > 0)         # some single-coordinate rows, not all
    assert first_words(list(a.indptr), list(a.indices)) == want


def test_tensor_images_hold_the_first_array_of_each_compressed_level():
    program = kernels.build("spmv_csr", 8)
    inputs = kernels.random_inputs(program, density=0.3, seed=1)
    packed = packed_inputs(program, inputs)
    assert set(packed) == {"B", "c"}
    plan = plan_memories(program, {n: p.capacities() for n, p in packed.items()})
    checked = 0
    for name, p in packed.items():
        images = tensor_images(plan, name, p)
        for lv, level in enumerate(p.levels):
            if getattr(level, "kind", None) != "compressed":
                assert f"{name}.{lv}.first" not in images
                continue
            seg, crd = [int(x) for x in level.seg], [int(x) for x in level.crd]
            first = images[f"{name}.{lv}.first"]
            assert len(first) == len(seg) - 1
            for r, word in enumerate(first):
                assert word == (crd[seg[r]] << 2 | (seg[r + 1] - seg[r] == 1) << 1 if seg[r] < seg[r + 1] else 1)
            spec = plan.memory(name, lv, "first")
            assert spec.width == plan.memory(name, lv, "crd").width + 2 and spec.storage == "lut"
            checked += 1
    assert checked == 2          # B's column level and c's only level


def test_a_csr_tensor_gets_first_arrays_only_for_compressed_levels():
    p = PackedTensor.from_dense(np.array([[0, 3], [0, 0]], dtype=float), TensorFormat.named("csr", 2))
    assert [type(lv).__name__ for lv in p.levels] == ["DenseLevel", "CompressedLevel"]
    assert first_words([int(x) for x in p.levels[1].seg], [int(x) for x in p.levels[1].crd]) == [1 << 2 | 2, 1]
