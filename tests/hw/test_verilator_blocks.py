"""Block-sparse programs in RTL (issue #15): SpMV (``bcsr:B`` times ``bdv:B``) and SpMM (``bcsr:B`` times
``bcsr:B``) compiled at block granularity (block_matmul, reduce/spacc lanes on blocks, one block per memory word)
run bit-identical to the fixed-mode reference simulator with equal cycles, and the simulator matches NumPy.

The Amaranth-simulator test at B = 2 runs by default; the Verilator ones at B = 2 and 4 (the ``blocks``
correlation suite's programs and data, so they share its Verilator builds) are slow: one build per program and
block size, about one and a half minutes each on a loaded 2-core machine. BigBird attention blocked at B = 2
(softmax across the blocks of a row: reduce rows, the alu's row broadcast) runs on both simulators too (slow)."""

import numpy as np
import pytest

from fuseflow.hw.elaborate import build, check_inputs_fit, reference_run, run_amaranth
from fuseflow.hw.top import compare_tensors
from fuseflow.reports.suites import (BLOCK_ATTENTION_CASES, BLOCK_DATASETS, BLOCK_PROGRAMS, blocked,
                                    blocked_attention)
from fuseflow.tensors.fixed import FixedFormat


def _numpy_check(entry, ref):
    """The reference's written tensor against NumPy's product (the data are multiples of 1/100: fixed-point
    rounding keeps it within a few LSBs per term)."""
    fx = FixedFormat()
    ins = entry.inputs
    want = ins["B"] @ ins["c"] if entry.meta["kernel"] == "bspmv" else ins["A"] @ ins["B"]
    name = "x" if entry.meta["kernel"] == "bspmv" else "X"
    got = ref.tensors[name].to_dense() * fx.lsb
    assert np.allclose(got, want, atol=64 * fx.lsb * max(want.shape))


@pytest.mark.parametrize("name", sorted(BLOCK_PROGRAMS))
def test_blocked_program_amaranth(name):
    seed, density = BLOCK_DATASETS[0]
    _check_amaranth(blocked(name, 2, density, seed), _numpy_check)


def _check_amaranth(entry, numpy_check):
    """The reference run against NumPy, then the Amaranth simulation of the kernel tops against the reference."""
    ref = reference_run(entry.program, entry.inputs)
    numpy_check(entry, ref)
    b = build(entry.program, entry.inputs, reference=ref)
    _check_rtl_run(entry, ref, run_amaranth(b, max_cycles=20 * ref.cycles + 1000))


def _check_rtl_run(entry, ref, res):
    """An RTL run finished with the reference's tensors bit for bit and its cycles per kernel."""
    assert res["done"], res
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in entry.program.kernels] == list(ref.kernel_cycles)


def test_block_size_beyond_the_multipliers_is_refused(tmp_path, capsys):
    """A block product the ECP5-85F cannot hold (B = 8 at 32 bits: 256 MULT18X18D of 156): one line, exit 2,
    nothing written."""
    from fuseflow.compiler import compile_text
    from fuseflow.hw.__main__ import main
    from fuseflow.samml import io as samml_io
    prog = compile_text(BLOCK_PROGRAMS["bspmm"].format(n=32, b=8), name="bspmm8").program
    graph = tmp_path / "graph.json"
    samml_io.save(prog, graph)
    assert main(["build", str(graph), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: op block_matmul: block 8") and "B <= 6" in err[0]
    assert not (tmp_path / "out").exists()


from verilator_probe import requires_verilator, verilator  # noqa: E402


@pytest.mark.slow
@requires_verilator
@pytest.mark.parametrize("block", [2, 4])
@pytest.mark.parametrize("name", sorted(BLOCK_PROGRAMS))
def test_blocked_program_verilator(name, block, cache):
    entries = [blocked(name, block, d, s) for s, d in BLOCK_DATASETS]
    b = build(entries[0].program)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    for entry in entries:
        ref = reference_run(entry.program, entry.inputs)
        _numpy_check(entry, ref)
        images = check_inputs_fit(b, entry.inputs)
        _check_rtl_run(entry, ref, verilator.run_verilator(bdir, b.name, b.manifest(), images,
                                                           20 * ref.cycles + 1000))


def _attention_numpy_check(entry, ref):
    """The reference's output O against NumPy's masked softmax attention (fixed point: a few LSBs per term)."""
    ins = entry.inputs
    keep = ins["M"] > 0
    s = np.where(keep, ins["Q"] @ ins["KT"], -np.inf)
    e = np.exp(s - s.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)) @ ins["V"]
    got = ref.tensors["O"].to_dense() * FixedFormat().lsb
    assert np.max(np.abs(got - want)) < 2e-3


@pytest.mark.slow
@pytest.mark.parametrize("case", BLOCK_ATTENTION_CASES)
def test_blocked_attention_amaranth(case):
    """BigBird attention blocked (reduce rows, the alu's row broadcast, block products): the Amaranth simulation
    of the kernel tops equals the fixed-mode simulator bit for bit and cycle for cycle."""
    _check_amaranth(blocked_attention(*case), _attention_numpy_check)


@pytest.mark.slow
@requires_verilator
@pytest.mark.parametrize("case", BLOCK_ATTENTION_CASES)
def test_blocked_attention_verilator(case, cache):
    entry = blocked_attention(*case)
    b = build(entry.program)
    bdir = verilator.build_verilator(b.verilog(), b.name, root=cache)
    ref = reference_run(entry.program, entry.inputs)
    _attention_numpy_check(entry, ref)
    images = check_inputs_fit(b, entry.inputs)
    _check_rtl_run(entry, ref, verilator.run_verilator(bdir, b.name, b.manifest(), images, 20 * ref.cycles + 1000))
