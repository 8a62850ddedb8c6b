"""Block memories as DP16KD instances under Verilator: the kernel top elaborated with ``block_ram="dp16kd"`` (the
instances the ECP5 gets, through Amaranth's Verilog back end), run with a behavioural Verilog model of the
DP16KD written from Lattice's description of the block (Yosys ships the primitive only as a black box), gives
the reference simulator's results and cycles, baked (INITVAL) and loaded through the host port."""

import re

import pytest

from fuseflow.hw.block_ram import dp16kd_blocks
from fuseflow.hw.elaborate import build
from fuseflow.hw.memory import tensor_images
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels

from verilator_probe import requires_verilator  # noqa: E402

pytestmark = requires_verilator


def dp16kd_verilog_model() -> str:
    """A DP16KD for the subset the instances use: 18-bit ports, port A read with OUTREG or NOREG (address
    register, then the output register), port B written with the byte enables ADB1..0, no chip selects or
    resets; INITVAL_jj holds words 16j .. 16j + 15 in 20-bit slots."""
    side = lambda s: [f"DI{s}{i}" for i in range(18)] + [f"AD{s}{i}" for i in range(14)] + [  # noqa: E731
        f"CE{s}", f"OCE{s}", f"CLK{s}", f"WE{s}", f"RST{s}", f"CS{s}0", f"CS{s}1", f"CS{s}2"]
    ins = side("A") + side("B")
    outs = [f"DO{s}{i}" for s in "AB" for i in range(18)]
    bus = lambda pre, n: "{" + ", ".join(f"{pre}{i}" for i in reversed(range(n))) + "}"  # noqa: E731
    params = "\n".join(f"  parameter [319:0] INITVAL_{j:02X} = 320'h0;" for j in range(64))
    init = "\n".join(f"    for (i = 0; i < 16; i = i + 1) mem[{16 * j} + i] = INITVAL_{j:02X}[i * 20 +: 18];"
                     for j in range(64))
    return f"""
module DP16KD({", ".join(ins + outs)});
  input {", ".join(ins)};
  output {", ".join(outs)};
  parameter DATA_WIDTH_A = 18;
  parameter DATA_WIDTH_B = 18;
  parameter REGMODE_A = "NOREG";
  parameter REGMODE_B = "NOREG";
  parameter RESETMODE = "SYNC";
  parameter CSDECODE_A = "0b000";
  parameter CSDECODE_B = "0b000";
  parameter WRITEMODE_A = "NORMAL";
  parameter WRITEMODE_B = "NORMAL";
  parameter GSR = "ENABLED";
{params}
  reg [17:0] mem [0:1023];
  integer i;
  initial begin
{init}
  end
  wire [13:0] ada = {bus("ADA", 14)};
  wire [13:0] adb = {bus("ADB", 14)};
  wire [17:0] dib = {bus("DIB", 18)};
  reg [17:0] a_read = 18'b0, a_out = 18'b0;
  always @(posedge CLKA) begin
    if (CEA) a_read <= mem[ada[13:4]];
    if (OCEA) a_out <= a_read;
  end
  assign {bus("DOA", 18)} = REGMODE_A == "OUTREG" ? a_out : a_read;
  assign {bus("DOB", 18)} = 18'b0;
  always @(posedge CLKB) if (CEB && WEB) begin
    if (adb[0]) mem[adb[13:4]][8:0] <= dib[8:0];
    if (adb[1]) mem[adb[13:4]][17:9] <= dib[17:9];
  end
endmodule
"""


@pytest.mark.slow
def test_kernel_with_dp16kd_instances_under_verilator():
    from fuseflow.hw.elaborate import packed_inputs, reference_run
    from fuseflow.hw.verilator import build_verilator, run_verilator
    program = kernels.build("spmv_csr", 48)
    inputs = kernels.random_inputs(program, density=0.6, seed=4)
    b = build(program, inputs, probes=False, bake=True)
    block = [m for m in b.plan.memories if m.storage == "block"]
    # B.1.crd and B.vals 2304 deep (three rows of blocks), x.vals written by the kernel's writer
    assert {m.name for m in block} >= {"B.1.crd", "B.vals", "x.vals"} and min(m.depth for m in block[:2]) > 2048
    b.top.block_ram = "dp16kd"
    text = b.verilog()
    assert len(re.findall(r"\bDP16KD\s+#\(", text)) == sum(dp16kd_blocks(m.depth, m.width) for m in block)
    bdir = build_verilator(text + dp16kd_verilog_model(), b.name)
    man = b.manifest()
    res = run_verilator(bdir, b.name, man, {}, 200_000)              # the baked images (INITVAL)
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles
    other = kernels.random_inputs(program, density=0.3, seed=5)      # another data set through the host port
    ref = reference_run(program, other)
    images = {}
    for name, p in packed_inputs(program, other).items():
        images.update(tensor_images(b.plan, name, p))
    res = run_verilator(bdir, b.name, man, images, 200_000)
    assert res["done"]
    assert compare_tensors(ref.tensors, res["tensors"]) == []
    assert res["cycles"] == ref.cycles


@pytest.mark.slow
def test_large_spmv_with_seg_in_dp16kd_under_verilator(monkeypatch):
    """A 320-row SpMV: its seg and first arrays (321 x 24 and 320 x 18 bits) pass BOUNDS_BLOCK_MIN_BITS (lowered to
    4 Kbit here: the rule's 16 Kbit would need some thousand rows) and are DP16KD blocks with the output register,
    read with their clock enable (level_scan's bounds_latency 2; seg[r] also from a copy holding seg + 1), beside
    crd and vals; results and cycles are the reference simulator's, which applies the same rule."""
    import fuseflow.samml.storage as storage
    from fuseflow.hw.verilator import build_verilator, run_verilator
    monkeypatch.setattr(storage, "BOUNDS_BLOCK_MIN_BITS", 4096)
    program = kernels.build("spmv_csr", 320)
    inputs = kernels.random_inputs(program, density=0.02, seed=8)
    b = build(program, inputs, probes=False, bake=True)
    specs = {m.name: m for m in b.plan.memories}
    assert specs["B.1.seg"].storage == "block" and specs["B.1.first"].storage == "block"
    b.top.block_ram = "dp16kd"
    text = b.verilog()
    assert re.search(r'\.REGMODE_A\("OUTREG"\)', text) and not re.search(r'\.REGMODE_A\("NOREG"\)', text)
    bdir = build_verilator(text + dp16kd_verilog_model(), b.name)
    res = run_verilator(bdir, b.name, b.manifest(), {}, 400_000)
    assert res["done"]
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert res["cycles"] == b.reference.cycles
