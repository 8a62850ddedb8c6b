"""Per-stream widths in hardware: each channel FIFO is as wide as its stream (``width`` in graph.json), the ops
keep the program's crd_width inside (outputs truncated into a narrow FIFO, inputs zero-extended from it), and the
RTL stays bit-identical and cycle-equal to the reference simulator (Amaranth simulator)."""

import pytest

from fuseflow.hw.elaborate import build, run_amaranth
from fuseflow.hw.top import compare_tensors
from fuseflow.samml import kernels
from fuseflow.samml.widths import assign_stream_widths

#: a scan, a union, a sparse accumulator and the intersect's look-ahead (its after-ports) between them
NAMES = ["spmv_csr", "elementwise_add", "spmspm_gustavson", "spmspm_outer"]


def mixed_widths(name):
    """Suite kernel ``name`` forced to 24-bit coordinates, its streams narrowed to 16 bits where their data
    allows, then every other index stream widened back to 24: narrow and wide channels meet at every kind
    of op port."""
    p = kernels.build(name)
    p.config["crd_width"] = 24
    assign_stream_widths(p)
    index = [s for k in p.kernels for s in k.streams.values() if s.kind != "val"]
    assert all(s.width == 16 for s in index)
    for s in index[::2]:
        s.width = None
    return p.validate()


@pytest.mark.parametrize("name", NAMES)
def test_narrow_channels_match_the_simulator(name):
    p = mixed_widths(name)
    inputs = kernels.random_inputs(p, density=0.5, seed=5)
    b = build(p, inputs)
    chans = {(c.stream, c.dst): c.width for cs in b.top.channels for c in cs}
    for k in p.kernels:
        for s in k.streams.values():
            want = 33 if s.kind == "val" else (17 if s.width == 16 else 25)
            assert all(chans[s.id, str(d)] == want for d in s.dsts), s.id
    assert {ch["width"] for ch in b.manifest()["channels"]} == {17, 25, 33}
    res = run_amaranth(b, max_cycles=20 * b.reference.cycles + 1000)
    assert res["done"], res
    assert compare_tensors(b.reference.tensors, res["tensors"]) == []
    assert [res["kernel_cycles"][k.name] for k in p.kernels] == list(b.reference.kernel_cycles)
    assert res["overflow"] == 0


def test_narrow_stream_saves_fifo_bits():
    """The manifest's channel bits: a 24-bit program whose streams are all 16 bits wide spends 8 bits less per
    slot on every crd/ref/repsig channel."""
    wide = kernels.build("spmv_csr")
    wide.config["crd_width"] = 24
    narrow = kernels.build("spmv_csr")
    narrow.config["crd_width"] = 24
    assign_stream_widths(narrow)

    def bits(p):
        b = build(p, kernels.random_inputs(p, density=0.5, seed=5))
        return sum(c.width * c.depth for cs in b.top.channels for c in cs), b

    (wide_bits, bw), (narrow_bits, _) = bits(wide), bits(narrow)
    slots = sum(c.depth for cs in bw.top.channels for c in cs if c.kind != "val")
    assert wide_bits - narrow_bits == 8 * slots > 0
