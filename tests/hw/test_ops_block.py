"""Block ops in RTL (issue #15): block_matmul against the simulator's op model and FixedFormat.matmul_array, and
the element-wise block forms (alu, reduce, spacc lanes; blocked array and value_write) against the scalar
simulator per element, token by token and bit for bit, at B = 2 and 4, under random valid/ready stalls."""

import math
import random

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed
from amaranth.sim import Simulator

from fuseflow.errors import HardwareError
from fuseflow.hw.ops.block_matmul import block_matmul_dsps, block_row_stages, block_rows
from fuseflow.hw.testing import check_block_op, check_op, make_op, run_hw_op, stream
from fuseflow.hw.token import decode_value, encode_value, pack_block, unpack_block
from fuseflow.samml.registry import op_latency
from fuseflow.tensors.fixed import FixedFormat

FX = FixedFormat()


def _value(rng, fx=FX):
    lo, hi, one = fx.min_raw, fx.max_raw, fx.one
    return rng.choice([lo, hi, 0, 1, -1, one, -one, rng.randint(lo, hi), rng.randint(-8 * one, 8 * one),
                       rng.randint(-one, one)])


def _block(rng, shape, fx=FX):
    return np.asarray([_value(rng, fx) for _ in range(math.prod(shape))], dtype=np.int64).reshape(shape)


def _tree(rng, depth, leaf, max_len=3):
    if depth == 0:
        return leaf()
    return [_tree(rng, depth - 1, leaf, max_len) for _ in range(rng.randint(1 if depth > 1 else 0, max_len))]


def _pair_streams(rng, shape_a, shape_b, depth=2, n_prob=0.15, max_len=4):
    """Two aligned streams (same stops) of blocks of ``shape_a`` / ``shape_b`` (N sometimes on either)."""
    tree = _tree(rng, depth, max_len=max_len, leaf=lambda: (
        "N" if rng.random() < n_prob else _block(rng, shape_a),
        "N" if rng.random() < n_prob else (_block(rng, shape_b) if shape_b else _value(rng))))
    ta = stream(_map(tree, depth, lambda p: p[0]), depth)
    tb = stream(_map(tree, depth, lambda p: p[1]), depth)
    return ta, tb


def _map(tree, depth, fn):
    return fn(tree) if depth == 0 else [_map(c, depth - 1, fn) for c in tree]


# ---- tokens ------------------------------------------------------------------------------------------

def test_block_token_layout():
    # element (r, c) at bits [(r*B + c)*W +: W], two's complement, element 0 at the LSBs
    blk = np.array([[1, -1], [2, -32768]])
    word = encode_value(blk, 16, (2, 2))
    assert word == 1 | (0xFFFF << 16) | (2 << 32) | (0x8000 << 48)
    assert decode_value(word, 16, (2, 2)).tolist() == blk.tolist()
    assert decode_value(encode_value("S1", 16, (2, 2)), 16, (2, 2)) == "S1"
    assert unpack_block(pack_block([3, -4, 5], 8), (3,), 8).tolist() == [3, -4, 5]
    with pytest.raises(Exception):
        encode_value(np.zeros((2,), np.int64), 16, (2, 2))


def _unused(*ops):
    for op in ops:
        op._MustUse__silence = True          # built to look at its ports, never elaborated


def test_port_widths():
    mm = make_op("block_matmul", {"block": 4})
    assert [mm.port_info[p][1] for p in ("i_a", "i_b", "o_out")] == [16 * 32] * 3
    mv = make_op("block_matmul", {"block": 4, "rhs": "vector"})
    assert [mv.port_info[p][1] for p in ("i_a", "i_b", "o_out")] == [16 * 32, 4 * 32, 4 * 32]
    arr = make_op("array", {}, blocks={"o_val": (2, 2)})
    assert arr.port_info["o_val"][1] == 128 and arr.memories["vals"].width == 128
    _unused(mm, mv, arr)
    with pytest.raises(HardwareError):
        make_op("intersect", {}, blocks={"i_crd0": (2, 2)})
    with pytest.raises(HardwareError):
        make_op("block_matmul", {"block": 2}, blocks={"i_b": (2,)})


# ---- block_matmul -----------------------------------------------------------------------------------

def _model_rows(fx, n, vector, cases):
    rows = []
    for a, b in cases:
        want = fx.matmul_array(a, b)
        for r in range(n):
            rows.append((a[r], b, [int(want[r])] if vector else [int(x) for x in want[r]]))
    return rows


def _rows_mismatches(fx, n, vector, dsp, cases, held_rhs=None):
    """One row per cycle into block_rows; returns the rows whose results differ from the model's,
    ``[(row, got, want)]``. ``held_rhs`` (a random.Random): rhs_en = 1 only with row 0 of each block, junk rhs
    from it with the later rows (and rhs_en toggling while the pipeline drains)."""
    m = Module()
    ra = [Signal(signed(fx.width), name=f"a{k}") for k in range(n)]
    rb = [Signal(signed(fx.width), name=f"b{k}") for k in range(n)] if vector else \
        [[Signal(signed(fx.width), name=f"b{k}_{j}") for j in range(n)] for k in range(n)]
    en = Signal()
    res = block_rows(m, ra, rb, fx, n, vector, dsp, **({} if held_rhs is None else {"rhs_en": en}))
    depth = block_row_stages(n)
    rows = _model_rows(fx, n, vector, cases)
    sim = Simulator(m)
    sim.add_clock(1e-6)
    bad = []

    async def tb(ctx):
        for c in range(len(rows) + depth):
            if c < len(rows):
                arow, b, _ = rows[c]
                first = c % n == 0
                if held_rhs is not None:
                    ctx.set(en, first)
                for k in range(n):
                    ctx.set(ra[k], int(arow[k]))
                    for j in range(1 if vector else n):
                        v = int(b[k] if vector else b[k][j])
                        if held_rhs is not None:
                            junk = _value(held_rhs, fx)
                            v = v if first else junk
                        ctx.set(rb[k] if vector else rb[k][j], v)
            elif held_rhs is not None:
                ctx.set(en, c % 2)
            if c >= depth:
                got = [ctx.get(x) for x in res]
                if got != rows[c - depth][2]:
                    bad.append((c - depth, got, rows[c - depth][2]))
            await ctx.tick()
    sim.add_testbench(tb)
    sim.run()
    return bad


@pytest.mark.parametrize("fx", [FixedFormat(32, 16), FixedFormat(16, 4), FixedFormat(12, 2), FixedFormat(32, 0)],
                         ids=str)
@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("vector", [False, True], ids=["matrix", "vector"])
@pytest.mark.parametrize("dsp", [None, "ecp5-model"])
def test_datapath_matches_matmul_array(fx, n, vector, dsp):
    """One row per cycle into the free-running datapath: row r's results appear block_row_stages(B) cycles
    later, bit-identical to FixedFormat.matmul_array (exact products, exact sum, one rounding, saturation)."""
    rng = random.Random(fx.width * 1000 + fx.frac * 10 + n)
    cases = [(_block(rng, (n, n), fx), _block(rng, (n,) if vector else (n, n), fx)) for _ in range(8)]
    bad = _rows_mismatches(fx, n, vector, dsp, cases)
    assert not bad, bad[:4]


@pytest.mark.parametrize("fx", [FixedFormat(32, 16), FixedFormat(16, 4)], ids=str)
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("vector", [False, True], ids=["matrix", "vector"])
@pytest.mark.parametrize("dsp", [None, "ecp5-model"])
def test_datapath_holds_rhs(fx, n, vector, dsp):
    """``rhs_en`` (block_matmul's idle): the right-hand side is given only with row 0 of a block (rhs_en = 1),
    junk with the later rows (rhs_en = 0); the multipliers' rhs registers keep the block's, so every row's
    results match FixedFormat.matmul_array (the fabric registers and the MULT18X18D's CE1 wiring alike)."""
    rng = random.Random(fx.width * 7 + n * 3 + vector)
    cases = [(_block(rng, (n, n), fx), _block(rng, (n,) if vector else (n, n), fx)) for _ in range(6)]
    bad = _rows_mismatches(fx, n, vector, dsp, cases, held_rhs=rng)
    assert not bad, bad[:4]


def test_rtl_block_sizes_fit_ecp5_85f():
    """B x B 32-bit products take 4 MULT18X18D each: B <= 6 fits the ECP5-85F's 156 (B = 8 needs 256) and is
    refused in one line; a vector rhs (B products) or 16-bit values (1 block per product) fit at B = 8."""
    assert block_matmul_dsps(4, False, FX) == 64 and block_matmul_dsps(8, False, FX) == 256
    with pytest.raises(HardwareError, match="256 MULT18X18D.*B <= 6"):
        make_op("block_matmul", {"block": 8})
    _unused(make_op("block_matmul", {"block": 8, "rhs": "vector"}),
            make_op("block_matmul", {"block": 8}, fixed=FixedFormat(16, 8)),
            make_op("block_matmul", {"block": 6}))


def test_latency_is_the_datapath():
    for n in (1, 2, 4, 8):
        assert op_latency("block_matmul", {"block": n}) == n + block_row_stages(n)


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("rhs", ["matrix", "vector"])
@pytest.mark.parametrize("seed", range(3))
def test_block_matmul_vs_sim(n, rhs, seed, stalls):
    rng = random.Random(seed * 10 + n)
    ta, tb = _pair_streams(rng, (n, n), (n, n) if rhs == "matrix" else (n,))
    out, _, _ = check_op("block_matmul", {"block": n, "rhs": rhs}, {"a": ta, "b": tb}, stalls=stalls,
                         seed=seed, max_stall=2 * n)
    assert len(out["out"]) == len(ta)


@pytest.mark.parametrize("n", [2, 4])
def test_block_matmul_cycles_back_to_back(n):
    """A long fibre: one firing every B cycles, the first result after op_latency cycles: cycles equal the
    simulator's (check_op) and are k*B + L + ... for k blocks."""
    rng = random.Random(n)
    k = 6
    ta = [_block(rng, (n, n)) for _ in range(k)] + ["S0", "D"]
    tb = [_block(rng, (n, n)) for _ in range(k)] + ["S0", "D"]
    out, sim_cycles, rtl_cycles = check_op("block_matmul", {"block": n}, {"a": ta, "b": tb})
    want = [FX.matmul_array(a, b).tolist() for a, b in zip(ta[:k], tb[:k])]
    assert out["out"][:k] == want
    # the D fires at k*B + 1 (after the stop at k*B), and leaves L - 1 cycles later
    assert rtl_cycles == k * n + 1 + op_latency("block_matmul", {"block": n})


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("seed", range(2))
def test_block_matmul_refused_output(n, seed):
    """Heavy ready stalls and FIFOs: the skid FIFO holds what the free-running stages deliver."""
    rng = random.Random(100 + seed)
    ta, tb = _pair_streams(rng, (n, n), (n, n), depth=1, n_prob=0.0)
    check_op("block_matmul", {"block": n}, {"a": ta, "b": tb}, stalls=0.8, max_stall=3 * n, seed=seed)
    check_op("block_matmul", {"block": n}, {"a": ta, "b": tb}, stalls=0.3, seed=seed, fifo_depth=2)


# ---- element-wise block forms -------------------------------------------------------------------------

def _direct(inputs):
    """Whether the simulator's own block model (``run_op`` on block tokens) can be a second reference: run_op
    loads its node's zero block for N, the shape taken from a block token of its inputs, so not when no input
    holds one (then N would be a scalar 0); the per-element reference covers N either way."""
    return any(not isinstance(t, str) and np.ndim(t) for toks in inputs.values() for t in toks)


ALU_CASES = [("add", None), ("sub", None), ("mul", None), ("max", None), ("relu", None), ("exp", None),
             ("neg", None), ("mul", 0.75), ("div", None)]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("op, const", ALU_CASES, ids=[f"{o}{'_c' if c else ''}" for o, c in ALU_CASES])
def test_alu_lanes(n, op, const, stalls):
    rng = random.Random(n * 1000 + sum(map(ord, op)) + (7 if const else 0))
    shape = (n, n)
    ta, tb = _pair_streams(rng, shape, shape, n_prob=0.0 if stalls else 0.15)
    params = {"op": op} | ({"const": const} if const is not None else {})
    unary = op in ("relu", "exp", "neg")
    inputs = {"a": ta} if unary or const is not None else {"a": ta, "b": tb}
    blocks = {"i_a": shape, "o_out": shape} | ({"i_b": shape} if "b" in inputs else {})
    check_block_op("alu", params, inputs, blocks=blocks, stalls=stalls, seed=n, direct=_direct(inputs))


@pytest.mark.parametrize("n", [2, 4])
def test_alu_lanes_broadcast_scalar(n, stalls):
    """A block and a scalar: the scalar reaches every lane."""
    rng = random.Random(7 * n)
    ta, tb = _pair_streams(rng, (n, n), ())
    check_block_op("alu", {"op": "mul"}, {"a": ta, "b": tb}, blocks={"i_a": (n, n), "o_out": (n, n)},
                   stalls=stalls, seed=n, direct=_direct({"a": ta, "b": tb}))


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("op", ["sum", "max"])
def test_reduce_lanes(n, op, stalls):
    rng = random.Random(n * 3 + len(op))
    shape = (n, n)
    ta, _ = _pair_streams(rng, shape, shape, depth=3)
    check_block_op("reduce", {"op": op}, {"val": ta}, blocks={"i_val": shape, "o_val": shape}, stalls=stalls,
                   seed=n, direct=_direct({"val": ta}))


@pytest.mark.parametrize("n", [2, 4])
def test_reduce_lanes_with_crd(n, stalls):
    shape = (n,)
    rng = random.Random(n)
    blk = [_block(rng, shape) for _ in range(3)]
    inputs = {"crd": [0, 2, 3, "S0", "D"], "val": [blk[0], blk[1], "S0", "S0", blk[2], "S1", "D"]}
    # the empty fibre's 0 is its node's zero block (run_op: the shape of the val stream's blocks)
    ref, _, _ = check_block_op("reduce", {}, inputs, blocks={"i_val": shape, "o_val": shape}, stalls=stalls,
                               seed=n)
    assert ref["val"][1] == [0] * n and ref["val"][2] == blk[2].tolist()


@pytest.mark.parametrize("n", [2, 4])
def test_spacc_lanes(n, stalls):
    shape = (n, n)
    rng = random.Random(5 * n)
    blk = [_block(rng, shape, FixedFormat()) for _ in range(6)]
    inputs = {"crd_inner": [3, 1, "S0", 1, 5, "S1", 2, "S0", 0, 2, "S1", "D"],
              "val": [blk[0], blk[1], "S0", blk[2], blk[3], "S1", blk[4], "S0", "N", blk[5], "S1", "D"]}
    check_block_op("spacc", {"dim": 8}, inputs, blocks={"i_val": shape, "o_val": shape}, stalls=stalls, seed=n,
                   direct=_direct(inputs))
    inputs["val"] = [blk[0] if isinstance(t, str) and t == "N" else t for t in inputs["val"]]
    check_block_op("spacc", {"dim": 8}, inputs, blocks={"i_val": shape, "o_val": shape}, stalls=stalls, seed=n)


@pytest.mark.parametrize("n", [2, 4])
def test_array_and_value_write_blocked(n, stalls):
    shape = (n, n)
    rng = random.Random(11 * n)
    vals = [_block(rng, shape) for _ in range(5)]
    ref, _, _ = check_block_op("array", {"vals": vals}, {"ref": [4, 0, "N", "S0", 2, "S1", "D"]},
                               blocks={"o_val": shape}, stalls=stalls, seed=n)
    assert ref["val"][0] == vals[4].tolist() and ref["val"][2] == [[0] * n] * n
    check_block_op("array", {"vals": vals}, {"ref": [4, 0, "S0", 2, 3, "S1", "D"]}, blocks={"o_val": shape},
                   stalls=stalls, seed=n)
    written, _, _ = check_block_op("value_write", {}, {"val": [vals[1], "S0", "N", vals[3], "S1", "D"]},
                                   blocks={"i_val": shape}, stalls=stalls, seed=n)
    assert written["vals"] == [vals[1].tolist(), [[0] * n] * n, vals[3].tolist()]
    check_block_op("value_write", {}, {"val": [vals[1], "S0", vals[0], vals[3], "S1", "D"]}, blocks={"i_val": shape},
                   stalls=stalls, seed=n)


def test_lane_rtl_is_checked_against_an_independent_model():
    """The lane reference is the scalar simulator per element: an RTL lane that saw the wrong element would
    differ (a guard that the comparison is not vacuous)."""
    n = 2
    rng = random.Random(3)
    ta, tb = _pair_streams(rng, (n, n), (n, n), depth=1, n_prob=0.0)
    hw, _ = run_hw_op("alu", {"op": "sub"}, {"a": ta, "b": tb}, blocks={"i_a": (n, n), "i_b": (n, n),
                                                                        "o_out": (n, n)})
    for got, a, b in zip(hw["out"], ta, tb):
        if not isinstance(a, str):
            assert got.tolist() == [[FX.sub(int(x), int(y)) for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


@pytest.mark.parametrize("n", [2, 4])
def test_forwarding_ops_carry_blocks(n, stalls):
    """repeat and intersect pass block payloads on unchanged (their any ports take the block width)."""
    rng = random.Random(13 * n)
    blk = [_block(rng, (n, n)) for _ in range(3)]
    shape = {"i_in": (n, n), "o_out": (n, n)}
    out, _, _ = check_op("repeat", {}, {"in": [blk[0], blk[1], "S0", "D"], "repsig": ["R", "R", "S", "R", "S", "D"]},
                         any_kind="val", blocks=shape, stalls=stalls, seed=n)
    assert out["out"] == [blk[0].tolist(), blk[0].tolist(), "S0", blk[1].tolist(), "S1", "D"]
    inputs = {"crd0": [0, 2, 3, "S0", "D"], "ref0": [blk[0], blk[1], blk[2], "S0", "D"],
              "crd1": [2, 3, "S0", "D"], "ref1": [7, 8, "S0", "D"]}
    out, _, _ = check_op("intersect", {}, inputs, any_kind="val", blocks={"i_ref0": (n, n), "o_ref0": (n, n)},
                         stalls=stalls, seed=n)
    assert out["ref0"] == [blk[1].tolist(), blk[2].tolist(), "S0", "D"]


# ---- softmax across the blocks of a row: reduce rows, the alu's B-vector broadcast ----------------------

def _row_golden(op, blk):
    """A block's rows reduced, from Python integers: a sum exact, then clamped once; max/min exact."""
    f = {"sum": lambda r: min(max(sum(r), FX.min_raw), FX.max_raw), "max": max, "min": min}[op]
    return [f([int(x) for x in row]) for row in blk]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
@pytest.mark.parametrize("with_crd", [False, True], ids=["plain", "crd"])
def test_reduce_rows_vs_sim(n, op, with_crd, stalls):
    """B lanes, lane r on row r of each block reduced (saturating values included): the RTL equals the
    simulator token by token (and cycle for cycle without stalls); a single-block fibre equals the golden."""
    rng = random.Random(n * 100 + len(op) + with_crd)
    ta, _ = _pair_streams(rng, (n, n), (n, n), depth=2)
    inputs = {"val": ta}
    if with_crd:
        crd = []                                       # one coordinate per value fibre, then its outer stop
        for t in ta:
            if isinstance(t, str) and t.startswith("S"):
                crd.append(len(crd))
                if t != "S0":
                    crd.append(f"S{int(t[1:]) - 1}")
        inputs["crd"] = crd + ["D"]
    out, _, _ = check_op("reduce", {"op": op, "rows": True}, inputs,
                         blocks={"i_val": (n, n), "o_val": (n,)}, stalls=stalls, seed=n)
    blk = _block(rng, (n, n))
    one, _, _ = check_op("reduce", {"op": op, "rows": True}, {"val": [blk, "S0", "D"]},
                         blocks={"i_val": (n, n), "o_val": (n,)}, stalls=stalls, seed=n)
    assert one["val"] == [_row_golden(op, blk), "D"]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("op", ["sub", "div", "mul"])
@pytest.mark.parametrize("vector_port", ["b", "a"])
def test_alu_vector_broadcast_over_block_rows_vs_sim(n, op, vector_port, stalls):
    rng = random.Random(n * 7 + len(op) + (vector_port == "a"))
    ta, tb = _pair_streams(rng, (n, n), (n,), n_prob=0.15)
    while all(isinstance(t, str) for t in ta):     # run_op knows the blocks' shape from a block token
        ta, tb = _pair_streams(rng, (n, n), (n,), n_prob=0.15)
    inputs = {"a": ta, "b": tb} if vector_port == "b" else {"a": tb, "b": ta}
    blocks = {"i_a": (n, n), "i_b": (n,)} if vector_port == "b" else {"i_a": (n,), "i_b": (n, n)}
    out, _, _ = check_op("alu", {"op": op}, inputs, blocks=blocks | {"o_out": (n, n)}, stalls=stalls, seed=n,
                         max_stall=2)
    f = {"sub": FX.sub, "div": FX.div, "mul": FX.mul}[op]
    for got, x, v in zip(out["out"], ta, tb):          # golden: element (r, c) meets v[r] (scalar rules)
        if not isinstance(x, str) and not isinstance(v, str):
            want = [[f(int(x[r][c]), int(v[r])) if vector_port == "b" else f(int(v[r]), int(x[r][c]))
                     for c in range(n)] for r in range(n)]
            assert got == want


def test_mixed_block_shapes_outside_the_rules_are_refused():
    with pytest.raises(HardwareError, match="do not fit"):
        make_op("reduce", {"op": "sum"}, blocks={"i_val": (2, 2), "o_val": (2,)})
    with pytest.raises(HardwareError, match="block form"):
        make_op("alu", {"op": "add"}, blocks={"i_a": (2, 2), "i_b": (4,), "o_out": (2, 2)})
