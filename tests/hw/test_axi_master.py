"""The AXI4 master port (issue 41, item 4): DMA, tile sequencer and off-chip image, on Verilator under cocotb.

One Verilator build of an SpMV row tile (4 rows x 16 columns, capacities declared for any density) serves every
run here: a 32 x 16 CSR matrix split into 8 row tiles, each packed with the project's tensor packing and simulated
by the reference simulator for the golden outputs and kernel cycles. Behind cocotbext-axi's AxiRam with random
back-pressure the stored outputs are bit-identical to the simulator's; behind the contract memory the run's
cycles are ``tiled_cycles`` of the contract exactly and every tile's kernel cycles are the simulator's; three
inputs of different sparsity run on the same executable.
"""

import os

import numpy as np
import pytest
import scipy.sparse as sp

from fuseflow.errors import HardwareError
from fuseflow.hw.axi_master import axim_build, run_axim
from fuseflow.hw.elaborate import build, reference_run
from fuseflow.hw.offchip_image import build_image, read_outputs, tile_loads
from fuseflow.hw.top import compare_tensors
from fuseflow.hw.verilator import build_verilator
from fuseflow.samml import kernels
from fuseflow.samml.offchip import OffchipContract, read_cycles, record_cycles, write_cycles

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

ROWS, COLS, TILE_ROWS = 32, 16, 4
CONTRACT = OffchipContract(word_bytes=4, latency=12, burst=8, outstanding=2)
STORES = ["x.0.seg", "x.0.crd", "x.vals"]


def make_design(root, contract):
    """(program, Build, manifest, Verilator build directory, Verilog, cache root) of the SpMV tile behind the
    master port for ``contract``."""
    program = kernels.spmv(m=TILE_ROWS, n=COLS, fmt="csr")
    b = build(program, probes=False)
    text, man = axim_build(b, contract)
    bdir = build_verilator(text, man["module"], root=root)
    return program, b, man, bdir, text, root


@pytest.fixture(scope="module")
def design(tmp_path_factory):
    return make_design(tmp_path_factory.mktemp("verilator"), CONTRACT)


def make_tiles(b, density, seed):
    """Tiles of a random ROWS x COLS matrix and vector: their memory loads and stores, inputs and references."""
    rng = np.random.default_rng(seed)
    a = sp.random(ROWS, COLS, density=density, format="csr", random_state=rng,
                  data_rvs=lambda n: rng.integers(-8, 9, n) / 4)
    c = np.where(rng.random(COLS) < 0.7, rng.integers(-8, 9, COLS) / 4, 0.0)
    tiles, refs = [], []
    for t in range(ROWS // TILE_ROWS):
        inputs = {"B": a[t * TILE_ROWS:(t + 1) * TILE_ROWS], "c": c}
        loads = tile_loads(b, inputs)
        if t:                                   # the vector stays in its memories after tile 0
            loads = {k: v for k, v in loads.items() if not k.startswith("c.")}
        tiles.append({"loads": loads, "stores": STORES})
        refs.append(reference_run(b.program, inputs))
    return tiles, refs


def crossing_image(man, tiles):
    """The image of ``tiles`` at the first base (from 4 KiB, in record strides) where a transfer crosses a 4 KiB
    boundary, so the DMA's burst split is exercised."""
    stride, wb = man["axi"]["record_stride"], man["axi"]["contract"]["word_bytes"]
    for base in range(0x1000, 0x3000, stride):
        img = build_image(man, tiles, base=base)
        if any(x.address // 4096 != (x.address + wb * x.words - 1) // 4096 for t in img.transfers for x in t):
            return img
    raise AssertionError("no base puts a transfer across 4 KiB")


def check_outputs(man, img, res, refs):
    assert res["done"] and not res["errors"], res["errors"]
    assert res["registers"]["tiles_done"] == len(refs)
    for t, ref in enumerate(refs):
        got = read_outputs(man, img, res["memory"], t)
        assert compare_tensors(ref.tensors, got) == [], f"tile {t}"


@requires_verilator
def test_spmv_tiles_axiram_backpressure(design):
    """8 row tiles behind AxiRam with random pauses on every channel: bit-identical to the simulator per tile."""
    program, b, man, bdir, _, _ = design
    tiles, refs = make_tiles(b, 0.35, 1)
    img = crossing_image(man, tiles)
    res = run_axim(bdir, man, img, memory="axiram", pause=0.3, seed=5)
    check_outputs(man, img, res, refs)
    assert res["kernel_cycles"] == [r.cycles for r in refs]


@requires_verilator
def test_spmv_tiles_contract_memory_cycle_exact(design):
    """Behind the contract memory: per-tile kernel cycles are the simulator's and the total is tiled_cycles."""
    program, b, man, bdir, _, _ = design
    tiles, refs = make_tiles(b, 0.35, 2)
    img = crossing_image(man, tiles)
    res = run_axim(bdir, man, img, memory="contract")
    check_outputs(man, img, res, refs)
    kernel = [r.cycles for r in refs]
    assert res["kernel_cycles"] == kernel
    assert res["registers"]["kernel_cycles"] == sum(kernel)
    assert res["registers"]["cycles"] == img.total_cycles(kernel)
    print(f"contract memory: {len(kernel)} tiles, kernel cycles {kernel}, total {res['registers']['cycles']} "
          f"cycles (tiled_cycles {img.total_cycles(kernel)})")


@requires_verilator
@pytest.mark.slow
def test_wide_port_single_outstanding(tmp_path):
    """Another port: 64-bit beats, bursts of 4, one burst in flight, latency 3; cycle-exact behind the contract
    memory and bit-identical behind AxiRam with back-pressure (a second Verilator build: slow)."""
    contract = OffchipContract(word_bytes=8, latency=3, burst=4, outstanding=1)
    program, b, man, bdir, _, _ = make_design(tmp_path, contract)
    tiles, refs = make_tiles(b, 0.5, 21)
    img = crossing_image(man, tiles)
    res = run_axim(bdir, man, img, memory="contract")
    check_outputs(man, img, res, refs)
    kernel = [r.cycles for r in refs]
    assert res["kernel_cycles"] == kernel
    assert res["registers"]["cycles"] == img.total_cycles(kernel)
    res = run_axim(bdir, man, img, memory="axiram", pause=0.5, seed=3)
    check_outputs(man, img, res, refs)


@requires_verilator
def test_same_build_three_sparsities(design):
    """Three inputs of different sparsity on one Verilator executable (not rebuilt), each bit-identical."""
    program, b, man, bdir, text, root = design
    exe = bdir / man["module"]
    stamp = exe.stat().st_mtime_ns
    for density, seed in ((0.05, 11), (0.4, 12), (0.9, 13)):
        tiles, refs = make_tiles(b, density, seed)
        img = build_image(man, tiles)
        res = run_axim(bdir, man, img, memory="contract")
        check_outputs(man, img, res, refs)
        assert res["registers"]["cycles"] == img.total_cycles([r.cycles for r in refs])
    assert build_verilator(text, man["module"], root=root) == bdir
    assert exe.stat().st_mtime_ns == stamp
    assert [d.name for d in root.iterdir() if d.is_dir() and not d.name.startswith("_")] == [bdir.name]


def test_contract_cycles_formulas():
    """The contract's formulas on hand-worked cases (the RTL tests above hold the RTL to them)."""
    c = OffchipContract(word_bytes=4, latency=10, burst=4, outstanding=2)
    # 8 words: bursts of 4 at AR 0 and 1; beats 10..13, 14..17
    assert read_cycles(0, 8, c) == 18
    # a third burst waits for the first's last beat (13): AR 14, beats 24..27
    assert read_cycles(0, 12, c) == 28
    # 4 KiB: 2 words before the boundary, then 2
    assert read_cycles(4096 - 8, 4, c) == 10 + 4
    # writes: 3 setup cycles, W 3..6 and 7..10, B at 16 and 20
    assert write_cycles(0, 8, c) == 21
    assert record_cycles(2, c) == read_cycles(0, 7, c)


@requires_verilator
def test_image_refuses_what_does_not_fit(design):
    program, b, man, bdir, _, _ = design
    cap = next(m for m in man["axi"]["memories"] if m["name"] == "B.vals")["capacity"]
    with pytest.raises(HardwareError, match="exceed its capacity"):
        build_image(man, [{"loads": {"B.vals": [0] * (cap + 1)}, "stores": []}])
    with pytest.raises(HardwareError, match="no memory"):
        build_image(man, [{"loads": {}, "stores": ["y.vals"]}])
    with pytest.raises(HardwareError, match="not a raw"):
        build_image(man, [{"loads": {"B.1.crd": [1 << 20]}, "stores": []}])


def test_cli_axi_master_needs_memory_parameters(tmp_path, capsys):
    """``--interface axi-master`` without ``--offchip`` (and no 'offchip' in the graph): a one-line error, exit 2,
    nothing written; with them, the Verilog and a manifest that names the port and the contract."""
    from fuseflow.hw.__main__ import main as hw_main
    spmv = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "kernels", "spmv_csr", "graph.json")
    out = tmp_path / "build"
    assert hw_main(["build", spmv, "-o", str(out), "--interface", "axi-master"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --interface axi-master: needs the off-chip memory parameters: --offchip "
                   "word_bytes=4,latency=20,burst=64,outstanding=4 (or an 'offchip' entry in the graph's config)"]
    assert not out.exists()
    assert hw_main(["build", spmv, "-o", str(out), "--interface", "axi-master", "--offchip", "burst=300"]) == 2
    assert capsys.readouterr().err.strip() == "error: off-chip contract: burst 300 must be 1..256 beats"
    assert not out.exists()
    assert hw_main(["build", spmv, "-o", str(out), "--interface", "axi-master", "--no-probes",
                    "--offchip", "word_bytes=4,latency=20,burst=16,outstanding=2"]) == 0
    import json
    man = json.loads((out / "spmv_csr_axim.json").read_text())
    assert man["interface"] == "axi-master" and man["axi"]["contract"]["burst"] == 16
    ports = {p["name"] for p in man["ports"]}
    assert {"m_axi_araddr", "m_axi_rdata", "m_axi_awlen", "m_axi_wlast", "m_axi_bvalid", "s_axil_awaddr",
            "irq"} <= ports
