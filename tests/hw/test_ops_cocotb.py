"""Every op on its emitted Verilog, under cocotb on Verilator, against ``run_op`` (issue 17, item 3).

One Verilator build holds every case below (each op, and each parameter that changes its RTL: every alu and reduce
op, the alu's constant operand, both level_scan formats, spacc's orders and group, the joiners' and crd_drop's
arities, the lane counts, ...), behind FIFOs on every port (:mod:`fuseflow.hw.op_bench`). Each seed is one cocotb run
of all cases at once, with random valid/ready stalls on every port and (seed > 0) redrawn value tokens; every output
token and every written word is compared with ``run_op``'s fixed-mode answer on the same tokens. Default run: two
seeds; ``-m slow``: 30 more. These complement the Amaranth-simulator tests of ``test_ops_*.py`` (which also check
cycles): here it is the Verilog that ships, through Yosys and Verilator.
"""

import pytest

from fuseflow.hw.op_bench import OpCase, build_op_bank, expected, run_op_bank
from fuseflow.samml.registry import BINARY_ALU_OPS, OPS, REDUCE_OPS, UNARY_ALU_OPS

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

ONE = 1 << 16
JOINER = {"crd0": [0, 2, 3, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
          "crd1": [2, 3, 4, "S0", "S1", "D"], "ref1": [20, 21, 22, "S0", "S1", "D"]}
JOINER3 = dict(JOINER, crd2=[0, 3, 4, "S0", 1, 5, "S1", "D"], ref2=[30, 31, 32, "S0", 33, 34, "S1", "D"])
VALS = [ONE, -3 * ONE, "N", "S0", 2 ** 31 - 1, 5, 7 * ONE, "S1", "S0", 9, "S2", "D"]
VALS_B = [2 * ONE, 5, 7, "S0", 2 ** 31 - 1, "N", -ONE, "S1", "S0", ONE // 2, "S2", "D"]


def _cases():
    c = [
        OpCase("root", "root", {}, {}),
        OpCase("level_scan-compressed", "level_scan", {"seg": [0, 2, 2, 4, 7], "crd": [0, 2, 1, 3, 0, 4, 6]},
               {"ref": [0, 1, 2, "S0", 3, "N", "S1", "D"]}),
        OpCase("level_scan-dense", "level_scan", {"format": "dense", "dim": 3}, {"ref": [0, "N", 1, "S0", "S1", "D"]}),
        OpCase("locate", "locate", {"dim": 5}, {"ref": [2, "N", "S0", 3, "S1", "D"],
                                                "crd": [1, 4, "S0", "S1", 0, "S2", "D"]}),
        OpCase("array", "array", {"vals": [5, -7, 9, ONE, -ONE]}, {"ref": [0, "N", 2, "S0", 1, 4, "S1", 3, "S2", "D"]}),
        OpCase("repeat_sig", "repeat_sig", {}, {"in": [0, "N", 2, "S0", 1, "S1", "D"]}),
        OpCase("repeat", "repeat", {}, {"in": [7, "S0", 8, "S1", "D"], "repsig": ["R", "S", "R", "R", "S", "D"]}),
        OpCase("intersect-2", "intersect", {}, JOINER),
        OpCase("intersect-3", "intersect", {"arity": 3}, JOINER3),
        OpCase("union-2", "union", {}, JOINER),
        OpCase("union-3", "union", {"arity": 3}, JOINER3),
        OpCase("crd_drop", "crd_drop", {}, {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"]}),
        OpCase("crd_drop-arity2", "crd_drop", {"arity": 2},
               {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"],
                "ref0": [50, "S0", "S0", 60, 70, "S1", "D"], "ref1": [5, "S0", "S0", 6, 7, "S1", "D"]}),
        OpCase("crd_hold", "crd_hold", {}, {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"]}),
        OpCase("level_write", "level_write", {"level": 1}, {"crd": [1, "S0", "S0", 2, 4, "S1", "D"]}),
        OpCase("value_write", "value_write", {}, {"val": [5, -2, "S0", "N", 7, "S1", "D"]}),
        OpCase("mask_scan", "mask_scan", {"mask": "bigbird:block=2,window=1,global=1,random=1,seed=3", "rows": 8,
                                          "dim": 8}, {"ref": [0, 3, "S0", "N", 6, "S1", "D"]}),
        OpCase("crd_mask", "crd_mask", {"mask": "band:w=1", "rows": 4, "dim": 6, "arity": 2},
               {"outer": [0, 3, "S0", "D"], "crd": [0, 2, 5, "S0", 1, "S1", "D"],
                "ref0": [10, 11, 12, "S0", 13, "S1", "D"], "ref1": [20, 21, 22, "S0", 23, "S1", "D"]}),
        OpCase("spacc-1", "spacc", {"dim": 8}, {"crd_inner": [3, 1, "S0", 1, 5, "S1", "D"],
                                                "val": [ONE, 2 * ONE, "S0", -ONE, 7, "S1", "D"]}),
        OpCase("spacc-2", "spacc", {"order": 2, "dim": 8, "dim_outer": 4},
               {"crd_outer0": [2, 0, "S0", 0, 1, "S1", "D"], "crd_inner": [3, 1, "S0", 5, "S1", "S0", 1, "S2", "D"],
                "val": [10, 20, "S0", 30, "S1", "S0", 7, "S2", "D"]}),
        OpCase("spacc-2-group2", "spacc", {"order": 2, "group": 2, "dim": 2, "dim_outer": 3},
               {"crd_outer0": [1, "S0", 2, "S1", 0, "S2", "D"], "crd_inner": [0, "S1", 0, "S2", 1, "S3", "D"],
                "val": [1, "S1", 2, "S2", 3, "S3", "D"]}),
        OpCase("spacc-3", "spacc", {"order": 3, "dim": 4, "dim_outer": 3, "dim_outer1": 2},
               {"crd_outer1": [1, 0, "S0", 1, "S1", "D"], "crd_outer0": [2, "S0", 0, 1, "S1", 0, "S2", "D"],
                "crd_inner": [3, "S1", 1, "S0", 0, 2, "S2", 1, "S3", "D"],
                "val": [10, "S1", 20, "S0", 30, 40, "S2", 50, "S3", "D"]}),
        OpCase("parallelize-3", "parallelize", {"lanes": 3}, {"in": [4, "N", 6, 8, "S0", "D"]}),
        OpCase("serialize-2", "serialize", {"lanes": 2, "depth": 1},
               {"key0": [0, 3, "S0", "D"], "key1": [2, "S0", "D"], "in0": [1, 4, "S0", 6, "S1", "D"],
                "in1": [8, "S1", "D"]}),
    ]
    # polymorphic ports carrying values (32-bit payloads instead of 16-bit references)
    big = {f"ref{i}": [v * ONE + 3 if isinstance(v, int) else v for v in JOINER[f"ref{i}"]] for i in (0, 1)}
    for op in ("intersect", "union"):
        c.append(OpCase(f"{op}-2-val", op, {}, dict(JOINER, **big), any_kind="val"))
    c += [
        OpCase("repeat-val", "repeat", {}, {"in": [-7 * ONE, "S0", 2 ** 31 - 1, "S1", "D"],
                                            "repsig": ["R", "S", "R", "R", "S", "D"]}, any_kind="val"),
        OpCase("crd_drop-val", "crd_drop", {"arity": 1},
               {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"],
                "ref0": [-ONE, "S0", "S0", 60 * ONE, 7, "S1", "D"]}, any_kind="val"),
        OpCase("parallelize-2-val", "parallelize", {"lanes": 2}, {"in": [4 * ONE, "N", -6, 8, "S0", "D"]},
               any_kind="val"),
    ]
    # block products (issue #15): one 2 x 2 block (or 2-vector) per beat on a 128- (64-) bit bus
    blk = [[ONE, -2 * ONE], [3, 2 ** 20]]
    blk2 = [[-ONE // 2, 7 * ONE], [2 ** 31 - 1, -5]]
    c += [OpCase("block_matmul-2", "block_matmul", {"block": 2},
                 {"a": [blk, blk2, "S0", blk2, "S1", "D"], "b": [blk2, blk, "S0", blk2, "S1", "D"]}),
          OpCase("block_matmul-2-vector", "block_matmul", {"block": 2, "rhs": "vector"},
                 {"a": [blk, "S0", blk2, blk, "S1", "D"], "b": [[ONE, -3], "S0", [2 ** 31 - 1, 4 * ONE], [0, 1], "S1", "D"]})]
    for op in REDUCE_OPS:
        c.append(OpCase(f"reduce-{op}", "reduce", {"op": op}, {"val": [ONE, "N", 5 * ONE, "S0", "S0", -4, "S2", "D"]}))
    for op in BINARY_ALU_OPS + UNARY_ALU_OPS:
        inputs = {"a": VALS}
        if op in BINARY_ALU_OPS:
            inputs["b"] = VALS_B
        c.append(OpCase(f"alu-{op}", "alu", {"op": op}, inputs))
    for op in BINARY_ALU_OPS:
        c.append(OpCase(f"alu-{op}-const", "alu", {"op": op, "const": -1.5}, {"a": VALS}))
    return c


CASES = _cases()
NAMES = [c.name for c in CASES]
DEFAULT_SEEDS = (0, 1)
SLOW_SEEDS = tuple(range(2, 32))
_RUNS = {}


def _bank_run(seed):
    """One cocotb run of every case at ``seed`` (cached: the op tests of one seed share it) on the one build."""
    if "build" not in _RUNS:
        _RUNS["build"] = build_op_bank(CASES)
    if seed not in _RUNS:
        _RUNS[seed] = run_op_bank(CASES, seed, built=_RUNS["build"])
    return _RUNS[seed]


def test_every_op_is_covered():
    assert {c.op for c in CASES} == set(OPS)
    assert {c.params["op"] for c in CASES if c.op == "alu"} == set(BINARY_ALU_OPS + UNARY_ALU_OPS)
    assert {c.params["op"] for c in CASES if c.op == "reduce"} == set(REDUCE_OPS)
    assert {c.params.get("format", "compressed") for c in CASES if c.op == "level_scan"} == {"dense", "compressed"}
    assert {c.params.get("order", 1) for c in CASES if c.op == "spacc"} == {1, 2, 3}
    assert {c.op for c in CASES if c.any_kind == "val"} == {"intersect", "union", "repeat", "crd_drop", "parallelize"}


def _check(name, seed):
    got, inputs = _bank_run(seed)
    case = CASES[NAMES.index(name)]
    want = expected(case, inputs[name])
    assert got[name] == want, f"{name} seed {seed}: inputs {inputs[name]}\n  run_op:   {want}\n  verilog: {got[name]}"


@requires_verilator
@pytest.mark.parametrize("seed", DEFAULT_SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_op_verilog_matches_run_op(name, seed):
    _check(name, seed)


@requires_verilator
@pytest.mark.slow
@pytest.mark.parametrize("seed", SLOW_SEEDS)
@pytest.mark.parametrize("name", NAMES)
def test_op_verilog_matches_run_op_many_seeds(name, seed):
    _check(name, seed)


@requires_verilator
def test_a_wrong_token_is_caught():
    """The comparison can fail: a case whose expected tokens are altered by one value does not match."""
    got, inputs = _bank_run(0)
    case = CASES[NAMES.index("alu-add")]
    want = expected(case, inputs["alu-add"])
    assert got["alu-add"] == want
    want["out"][0] += 1
    assert got["alu-add"] != want
