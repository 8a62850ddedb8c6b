"""alu RTL: the fixed-point datapath bit-identical to fuseflow/tensors/fixed.py, and the op vs run_op."""

import random

import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator
from hypothesis import given, strategies as st

from fuseflow.hw.ops.alu import Pipe, fixed_op
from fuseflow.hw.testing import check_op, hw_settings, st_tree, st_value, stream, tree_map
from fuseflow.samml.registry import BINARY_ALU_OPS, UNARY_ALU_OPS, op_latency
from fuseflow.tensors.fixed import FixedFormat

OPS = BINARY_ALU_OPS + UNARY_ALU_OPS
FORMATS = [FixedFormat(32, 16), FixedFormat(16, 4), FixedFormat(24, 12), FixedFormat(12, 2),
           FixedFormat(32, 0), FixedFormat(16, 8), FixedFormat(32, 30)]


def _operands(fx, n, seed):
    rng = random.Random(seed)
    lo, hi, one = fx.min_raw, fx.max_raw, fx.one
    edge = [max(lo, min(hi, v)) for v in (lo, lo + 1, hi, hi - 1, 0, 1, -1, one, -one, one // 2, 2 * one)]
    vals = edge[:]
    for _ in range(n):
        vals.append(rng.choice([rng.randint(lo, hi), rng.randint(-16 * one, 16 * one),
                                rng.randint(-one, one)]))
        vals[-1] = max(lo, min(hi, vals[-1]))
    pairs = [(a, b) for a in edge for b in edge]
    pairs += [(rng.choice(vals), rng.choice(vals)) for _ in range(n)]
    return pairs


def _run_datapath(fx, ops, pairs, dsp=None):
    """Each op's datapath, pipelined as in the RTL, fed one operand pair per cycle: the result of pair j must
    appear ``op_latency - 1`` cycles later (the stages are free running), bit-identical to fixed.py.
    ``dsp``: the Pipe's multiplier mode (``"ecp5-model"``: the MULT18X18D wiring around a model of it)."""
    m = Module()
    a = Signal(signed(fx.width))
    b = Signal(signed(fx.width))
    tick = Signal()
    m.d.sync += tick.eq(~tick)              # a sync domain even when every op is combinational
    res = {}
    for op in ops:
        r = Signal(signed(fx.width), name=f"r_{op}")
        pipe = Pipe(m, op, dsp=dsp)
        m.d.comb += r.eq(fixed_op(m, op, a, b, fx, prefix=op, pipe=pipe))
        assert pipe.stages == op_latency("alu", {"op": op}, fx) - 1
        res[op] = (r, pipe.stages)
    sim = Simulator(m)
    sim.add_clock(1e-6)
    bad = []
    depth = max(n for _, n in res.values())

    async def tb(ctx):
        for k in range(len(pairs) + depth):
            if k < len(pairs):
                ctx.set(a, pairs[k][0])
                ctx.set(b, pairs[k][1])
            for op, (r, n) in res.items():
                if 0 <= k - n < len(pairs):
                    x, y = pairs[k - n]
                    want = fx.binary(op)(x, y) if op in BINARY_ALU_OPS else fx.unary(op)(x)
                    got = ctx.get(r)
                    if got != want:
                        bad.append((op, x, y, got, want))
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    assert not bad, bad[:10]


@pytest.mark.parametrize("fx", FORMATS, ids=str)
def test_datapath_bit_identical(fx):
    ops = list(OPS)
    _run_datapath(fx, ops, _operands(fx, 300, fx.width * 100 + fx.frac))


MULTIPLYING = ("mul", "square", "exp", "log", "tanh", "sigmoid", "gelu")   # DSPs and tables


@pytest.mark.parametrize("fx", FORMATS, ids=str)
def test_datapath_dsp_wiring(fx):
    """The ECP5 multiplies (MULT18X18D blocks whose input and output registers are pipeline stages 1-2) with
    a behavioural model of the block in place of the primitive: same results, same stage count."""
    _run_datapath(fx, MULTIPLYING, _operands(fx, 150, fx.width * 7 + fx.frac), dsp="ecp5-model")


def test_ecp5_mul_instantiates_registered_dsps():
    """Elaborated for ECP5 synthesis, a 32-bit multiply is four MULT18X18D blocks with input and output
    registers (Yosys would map ``*`` to blocks without them); elsewhere there is no vendor primitive."""
    from amaranth.back import rtlil
    from fuseflow.boards.synth import SynthTarget
    from fuseflow.hw.ops import MODULES
    text = rtlil.convert(MODULES["alu"]({"op": "mul"}), platform=SynthTarget("ecp5"))
    cells = text.split("cell \\MULT18X18D")[1:]
    assert len(cells) == 4
    for c in cells:
        body = c.split("end")[0]
        for reg in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK"):
            assert f'parameter \\{reg} "CLK0"' in body
    assert "MULT18X18D" not in rtlil.convert(MODULES["alu"]({"op": "mul"}))
    assert "MULT18X18D" not in rtlil.convert(MODULES["alu"]({"op": "mul"}), platform=SynthTarget("ice40"))


FUNCTIONS = ("sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs", "square")


@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_wide_sweep_16bit(op):
    """Every 16th input of fixed16.8 (and both ends) bit-identical to the shared Python function."""
    fx = FixedFormat(16, 8)
    xs = list(range(fx.min_raw, fx.max_raw + 1, 16)) + [fx.max_raw, -1, 1, 0]
    _run_datapath(fx, [op], [(x, 0) for x in xs])


@pytest.mark.slow
@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_exhaustive_16bit(op):
    """Every input of fixed16.8 bit-identical to the shared Python function."""
    fx = FixedFormat(16, 8)
    _run_datapath(fx, [op], [(x, 0) for x in range(fx.min_raw, fx.max_raw + 1)])


@pytest.mark.parametrize("op", FUNCTIONS)
def test_function_sampled_32bit(op):
    """fixed32.16: a dense sweep of [-20, 20] plus random inputs over the whole range."""
    fx = FixedFormat(32, 16)
    rng = random.Random(op)
    xs = list(range(-20 * fx.one, 20 * fx.one, 1531)) + [rng.randint(fx.min_raw, fx.max_raw) for _ in range(300)]
    xs += [fx.min_raw, fx.max_raw, 0, 1, -1, fx.one]
    _run_datapath(fx, [op], [(x, 0) for x in xs])


def test_exp_dense_sweep():
    """exp over a dense sweep of the input range that matters (and the saturating ends)."""
    fx = FixedFormat(32, 16)
    xs = list(range(-30 * fx.one, 22 * fx.one, 997)) + [fx.min_raw, fx.max_raw, 0, -1, 1]
    _run_datapath(fx, ["exp"], [(x, 0) for x in xs])


@pytest.mark.slow
@pytest.mark.parametrize("fx", FORMATS, ids=str)
def test_datapath_bit_identical_long(fx):
    ops = list(OPS)
    _run_datapath(fx, ops, _operands(fx, 20000, 7 + fx.width))


@pytest.mark.parametrize("op", OPS)
def test_op_examples(op, stalls):
    one = 1 << 16
    inp = {"a": [one, -3 * one, "N", "S0", 2 ** 31 - 1, 5, "S1", "D"]}
    if op in BINARY_ALU_OPS:
        inp["b"] = [2 * one, 5, 7, "S0", 2 ** 31 - 1, "N", "S1", "D"]
    check_op("alu", {"op": op}, inp, stalls=stalls, seed=3)


@pytest.mark.parametrize("op", BINARY_ALU_OPS)
def test_op_const(op):
    check_op("alu", {"op": op, "const": -1.5}, {"a": [1 << 16, "N", "S0", -7, "S1", "D"]})


@st.composite
def case(draw):
    op = draw(st.sampled_from(OPS))
    depth = draw(st.integers(0, 2))
    leaf = st.one_of(st_value(), st.just("N"))
    tree = draw(st_tree(depth, st.tuples(leaf, leaf)))
    inp = {"a": stream(tree_map(tree, depth, lambda p: p[0]), depth)}
    params = {"op": op}
    if op in BINARY_ALU_OPS:
        if draw(st.booleans()):
            inp["b"] = stream(tree_map(tree, depth, lambda p: p[1]), depth)
        else:
            params["const"] = draw(st.floats(-100, 100, allow_nan=False))
    return params, inp


@hw_settings(20)
@given(case(), st.sampled_from([0.0, 0.4]), st.integers(0, 1 << 16))
def test_op_random(c, stalls, seed):
    check_op("alu", *c, stalls=stalls, seed=seed)


@pytest.mark.slow
@hw_settings(400)
@given(case(), st.sampled_from([0.0, 0.2, 0.6]), st.integers(0, 1 << 16))
def test_sweep_0(c, stalls, seed):
    check_op("alu", *c, stalls=stalls, seed=seed)


PIPELINED = [op for op in OPS if op_latency("alu", {"op": op}) > 1]


def test_pipelined_ops_declared():
    """The ops the registry pipelines (and only they) are the ones docs/samml.md lists with a latency."""
    assert set(PIPELINED) == {"mul", "square", "div", "exp", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log"}
    assert all(op_latency("alu", {"op": op}) == 1 for op in ("add", "sub", "max", "min", "neg", "relu", "abs"))


@pytest.mark.parametrize("op", PIPELINED)
@pytest.mark.parametrize("seed", [1, 2])
def test_pipelined_heavy_stalls(op, seed):
    """A pipelined op under heavy random stalls on every input and on the output (up to 6 cycles before
    most tokens): the pipeline must hold what it has in flight, lose and reorder nothing."""
    fx = FixedFormat()
    rng = random.Random(seed)
    n = 2 * op_latency("alu", {"op": op}, fx) + 6
    a = [rng.randint(fx.min_raw, fx.max_raw) if rng.random() < 0.8 else rng.choice(["N", "S0"])
         for _ in range(n)] + ["S1", "D"]
    inp = {"a": a}
    if op in BINARY_ALU_OPS:
        inp["b"] = [x if x == "S0" else rng.choice([rng.randint(fx.min_raw, fx.max_raw), "N"]) for x in a[:-2]]
        inp["b"] += ["S1", "D"]
    check_op("alu", {"op": op}, inp, stalls=0.8, max_stall=6, seed=seed)


@pytest.mark.parametrize("op", ["mul", "div", "exp"])
def test_pipelined_fifo_ports(op):
    """With FIFOs of depth 2 on every port and stalls: the skid FIFO's ready/valid obeys the stream rules."""
    one = 1 << 16
    inp = {"a": [one, -3 * one, "N", "S0", 2 ** 31 - 1, 5, 7 * one, "S1", "D"]}
    if op in BINARY_ALU_OPS:
        inp["b"] = [2 * one, 5, 7, "S0", 2 ** 31 - 1, "N", -one, "S1", "D"]
    check_op("alu", {"op": op}, inp, stalls=0.5, seed=5, fifo_depth=2)


@pytest.mark.slow
def test_ecp5_table_rom_matches_yosys_mapping(tmp_path):
    """The DP16KD table's init packing and address pins are Yosys' own: a 1024 x 18 ROM read through a
    register, which Yosys maps to one DP16KD, gets the same INITVAL_00..3F and the same address bits as the
    instance ``rom_outreg`` builds for those words (the blocks have no simulation model to run)."""
    import json
    import subprocess

    from amaranth.back import rtlil
    from amaranth.lib.memory import Memory

    from fuseflow.boards.synth import tool_path
    from fuseflow.hw.ops._pipe import rom_outreg
    rng = random.Random(5)
    words = [rng.getrandbits(18) for _ in range(1024)]

    def cells(m, addr, out, name):
        (tmp_path / f"{name}.il").write_text(rtlil.convert(m, ports={"addr": (addr, None), "out": (out, None)},
                                                            name="top"))
        (tmp_path / f"{name}.ys").write_text(f"read_rtlil {name}.il\nsynth_ecp5 -top top\n"
                                             f"write_json {name}.json\n")
        subprocess.run([tool_path("yosys"), "-q", f"{name}.ys"], cwd=tmp_path, check=True, capture_output=True)
        mod = json.loads((tmp_path / f"{name}.json").read_text())["modules"]["top"]
        addr_bits = mod["ports"]["addr"]["bits"]
        found = [c for c in mod["cells"].values() if c["type"] == "DP16KD"]
        assert len(found) == 1
        c = found[0]
        pins = {f"ADA{i}": (addr_bits.index(c["connections"][f"ADA{i}"][0])
                            if c["connections"][f"ADA{i}"][0] in addr_bits else None) for i in range(14)}
        inits = {k: int(v, 2) for k, v in c["parameters"].items() if k.startswith("INITVAL_")}
        return pins, inits

    m = Module()
    addr, out = Signal(10), Signal(18)
    m.d.comb += out.eq(rom_outreg(m, Pipe(m, "t", dsp="ecp5"), words, 18, addr, "t"))
    mine = cells(m, addr, out, "mine")
    m = Module()
    addr, out = Signal(10), Signal(18)
    m.submodules.rom = rom = Memory(shape=18, depth=1024, init=words)
    rp = rom.read_port(domain="sync")
    m.d.comb += [rp.addr.eq(addr), out.eq(rp.data)]
    theirs = cells(m, addr, out, "yosys")
    assert sorted(v for v in mine[0].values() if v is not None) == list(range(10))
    assert len(mine[1]) == 64 and any(mine[1].values())
    assert mine == theirs
