"""Block-RAM capacity: block counts per memory shape, the SpMV memory map and the largest SpMV per board."""

from fuseflow.boards.capacity import (largest_spmv, largest_spmv_overall, memory_blocks, memory_map, spmv_fits,
                                      spmv_plan)


def test_memory_blocks_count_the_instances_or_the_cheapest_aspect_ratio():
    # ECP5: the kernel top's DP16KD instances, 1024 x 18 each; iCE40 SB_RAM40_4K: 256 x 16 .. 2048 x 2
    assert memory_blocks(1024, 16, "ecp5") == 1
    assert memory_blocks(1024, 32, "ecp5") == 2
    assert memory_blocks(32, 32, "ecp5") == 2
    assert memory_blocks(1025, 18, "ecp5") == 2
    assert memory_blocks(16384, 1, "ecp5") == 16
    assert memory_blocks(65535, 16, "ecp5") == 64
    assert memory_blocks(256, 16, "ice40") == 1
    assert memory_blocks(1024, 32, "ice40") == 8


def test_spmv_memory_map_matches_the_synthesised_count():
    # 32 x 32 with 1024 nonzeros: B.1.crd 1 + B.vals 2 + c.vals 2 + x.vals 2 DP16KD (the kernel top elaborated
    # for the ECP5 and synthesised has 7, see tests/hw/test_block_ram.py); seg and the 512-bit crd arrays stay
    # in LUT RAM
    mm = {e["name"]: e for e in memory_map(spmv_plan(32, 1024), "ecp5-85f")}
    assert {n for n, e in mm.items() if e["storage"] == "block"} == {"B.1.crd", "B.vals", "c.vals", "x.vals"}
    assert sum(e["blocks"] for e in mm.values()) == 7
    assert [e["sel"] for e in mm.values()] == list(range(len(mm)))


def test_largest_spmv_on_the_ulx3s():
    best = largest_spmv_overall("ecp5-85f")
    # 16-bit positions: at most 65535 nonzeros; 64 crd + 128 vals blocks leave 16 of 208 for c and x
    assert best["nonzeros"] == 65535 and best["brams"] <= 208
    assert spmv_fits(best["rows"] + 1, best["nonzeros"], "ecp5-85f") is None
    r = largest_spmv("ecp5-85f", 8192)
    assert r["brams"] <= 208 and spmv_fits(8192, r["nonzeros"] + 1, "ecp5-85f") is None


def test_spmv_logic_does_not_fit_the_up5k():
    assert largest_spmv_overall("ice40-up5k") is None


def test_op_read_ports_and_block_copies():
    """A built SpMV's op read ports per memory as block copies (level_scan: seg twice, one of them also as seg + 1,
    first and crd once; array: vals once; the writer's x arrays none), and a block memory counted once per copy in
    the memory map."""
    from fuseflow.boards.capacity import level_scan_block_copies, level_scan_read_ports, op_read_ports
    from fuseflow.hw.elaborate import build
    from fuseflow.samml import kernels
    p = kernels.build("spmv_csr", 8)
    b = build(p, kernels.random_inputs(p, density=0.4, seed=1), probes=False)
    want = {}
    for t in ("B.1", "c.0"):
        want.update({f"{t}.seg": 3, f"{t}.first": 1, f"{t}.crd": 1})
    want.update({"B.vals": 1, "c.vals": 1})
    assert op_read_ports(b.top) == want and level_scan_read_ports() == {"seg": 2, "first": 1, "crd": 1}
    assert level_scan_block_copies() == {"seg": 3, "first": 1, "crd": 1}
    plan = spmv_plan(4096, 1000)
    mm = {e["name"]: e for e in memory_map(plan, "ecp5-85f", {"B.1.seg": 2})}
    one = {e["name"]: e for e in memory_map(plan, "ecp5-85f")}
    # 4097 x 16 bits of seg pass the threshold: five 1024 x 18 blocks per copy
    assert mm["B.1.seg"]["storage"] == "block" and one["B.1.seg"]["blocks"] == 5 and mm["B.1.seg"]["blocks"] == 10
