"""The vendor-cell hook (fuseflow/hw/ops/_cells.py): which cells a platform gets, the generic cells' values in
the Amaranth simulator, and the ECP5 cells' structure (instances the simulator cannot run)."""

import random

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Const, Module, Signal
from amaranth.sim import Simulator

from fuseflow.boards.synth import SynthTarget
from fuseflow.hw.ops._cells import ECP5Cells, GenericCells, get_cells


class _OwnCells(GenericCells):
    pass


class _PlatformWithCells:
    family = "ecp5"              # its own hook wins over the family

    def get_cells(self):
        return _OwnCells()


def test_get_cells_by_platform():
    assert type(get_cells(None)) is GenericCells
    assert type(get_cells(SynthTarget("ecp5"))) is ECP5Cells
    assert type(get_cells(SynthTarget("ice40"))) is GenericCells
    assert type(get_cells(_PlatformWithCells())) is _OwnCells


def _run(m, inputs, outputs, script, clocked=False):
    """Set ``inputs`` per step of ``script`` and read ``outputs`` in that step (before the clock edge that ends
    it when ``clocked``)."""
    sim = Simulator(m)
    seen = []
    if clocked:
        sim.add_clock(1e-8)

    async def bench(ctx):
        for values in script:
            for s, v in zip(inputs, values):
                ctx.set(s, v)
            await ctx.delay(1e-9)
            seen.append(tuple(ctx.get(o) for o in outputs))
            if clocked:
                await ctx.tick()
    sim.add_testbench(bench)
    sim.run()
    return seen


def test_generic_mux8_selects_the_word():
    """``words[sel]`` for every select and random words, against Python indexing."""
    rng = random.Random(3)
    m = Module()
    sel = Signal(3)
    words = [Signal(5, name=f"w{i}") for i in range(8)]
    out = GenericCells().mux8(m, sel, words, 5, "out")
    script = [[s] + [rng.randrange(32) for _ in range(8)] for s in list(range(8)) * 3]
    got = _run(m, [sel] + words, [out], script)
    assert [g[0] for g in got] == [v[1 + v[0]] for v in script]


def test_generic_copy_register_is_a_register():
    """The copy shows its input one cycle later (0 before the first edge)."""
    m = Module()
    d = Signal(4)
    q = GenericCells().copy_register(m, d, "q")
    script = [[v] for v in (3, 9, 0, 15, 7)]
    got = [g[0] for g in _run(m, [d], [q], script, clocked=True)]
    assert got == [0, 3, 9, 0, 15]


def test_generic_cells_have_no_dsp_block():
    from fuseflow.errors import HardwareError
    with pytest.raises(HardwareError, match="no MULT18X18D"):
        GenericCells().mult18x18d(None, "p", Const(0, 18), Const(0, 18), Signal(36))


def _cell_types(m, ports):
    text = rtlil.convert(m, ports=ports, emit_src=False)
    return [line.split()[1] for line in text.splitlines() if line.strip().startswith("cell ")]


def test_ecp5_mux8_is_one_slice_pair_per_bit():
    """Per output bit four LUT4 (2:1 by sel[0]), two PFUMX (by sel[1]), one L6MUX21 (by sel[2])."""
    m = Module()
    sel = Signal(3)
    words = [Signal(3, name=f"w{i}") for i in range(8)]
    out = ECP5Cells().mux8(m, sel, words, 3, "out")
    cells = _cell_types(m, [sel, out, *words])
    assert {t: cells.count(t) for t in ("\\LUT4", "\\PFUMX", "\\L6MUX21")} == {"\\LUT4": 12, "\\PFUMX": 6,
                                                                                "\\L6MUX21": 3}


def test_ecp5_copy_register_is_one_trellis_ff_per_bit():
    m = Module()
    d = Signal(5)
    q = ECP5Cells().copy_register(m, d, "q")
    assert _cell_types(m, [d, q]).count("\\TRELLIS_FF") == 5
