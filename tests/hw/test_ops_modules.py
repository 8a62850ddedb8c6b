"""Every registry op has an RTL module with registry-named ports; each converts to Verilog; each runs
through channel FIFOs (depths 1..3) with stalls and matches run_op."""

import pytest
from amaranth.back import verilog
from amaranth.hdl import Fragment

from fuseflow.hw.ops import MODULES
from fuseflow.hw.testing import check_op
from fuseflow.samml.registry import OPS
from fuseflow.tensors.fixed import FixedFormat

EXAMPLES = {
    "root": ({}, {}),
    "level_scan": ({"seg": [0, 2, 2, 4], "crd": [0, 2, 1, 3]}, {"ref": [0, 1, 2, "S0", "D"]}),
    "array": ({"vals": [5, -7, 9]}, {"ref": [0, "N", 2, "S0", 1, "S1", "D"]}),
    "repeat_sig": ({}, {"in": [0, "N", 2, "S0", 1, "S1", "D"]}),
    "repeat": ({}, {"in": [7, "S0", 8, "S1", "D"], "repsig": ["R", "S", "R", "R", "S", "D"]}),
    "alu": ({"op": "mul"}, {"a": [1 << 16, 3 << 15, "S0", "N", "S1", "D"], "b": [-5, 1 << 17, "S0", 9, "S1", "D"]}),
    "reduce": ({}, {"val": [1, "N", "S0", "S0", 4, "S2", "D"]}),
    "intersect": ({}, {"crd0": [0, 2, 3, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
                       "crd1": [2, 3, 4, "S0", "S1", "D"], "ref1": [20, 21, 22, "S0", "S1", "D"]}),
    "union": ({}, {"crd0": [0, 2, 3, "S0", 1, "S1", "D"], "ref0": [10, 11, 12, "S0", 13, "S1", "D"],
                   "crd1": [2, 3, 4, "S0", "S1", "D"], "ref1": [20, 21, 22, "S0", "S1", "D"]}),
    "crd_drop": ({}, {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"]}),
    "crd_hold": ({}, {"outer": [0, 1, 2, "S0", "D"], "inner": [5, "S0", "S0", 6, 7, "S1", "D"]}),
    "level_write": ({"level": 1}, {"crd": [1, "S0", "S0", 2, "S1", "D"]}),
    "value_write": ({}, {"val": [5, -2, "S0", "N", 7, "S1", "D"]}),
    "mask_scan": ({"mask": "bigbird:block=2,window=1,global=1,random=1,seed=3", "rows": 8, "dim": 8},
                  {"ref": [0, 3, "S0", "N", 6, "S1", "D"]}),
    "crd_mask": ({"mask": "band:w=1", "rows": 4, "dim": 6, "arity": 2},
                 {"outer": [0, 3, "S0", "D"], "crd": [0, 2, 5, "S0", 1, "S1", "D"],
                  "ref0": [10, 11, 12, "S0", 13, "S1", "D"], "ref1": [20, 21, 22, "S0", 23, "S1", "D"]}),
    "locate": ({"dim": 5}, {"ref": [2, "N", "S0", 3, "S1", "D"], "crd": [1, 4, "S0", "S1", 0, "S2", "D"]}),
    "spacc": ({"order": 2, "dim": 8, "dim_outer": 4},
              {"crd_outer0": [2, 0, "S0", 0, 1, "S1", "D"], "crd_inner": [3, 1, "S0", 5, "S1", "S0", 1, "S2", "D"],
               "val": [10, 20, "S0", 30, "S1", "S0", 7, "S2", "D"]}),
    "parallelize": ({"lanes": 3}, {"in": [4, "N", 6, 8, "S0", "D"]}),
    "block_matmul": ({"block": 2}, {"a": [[[1 << 16, 2], [-3, 1 << 15]], "S0", "N", "S1", "D"],
                                    "b": [[[5, 1 << 16], [1 << 17, -1]], "S0", [[1, 2], [3, 4]], "S1", "D"]}),
    "serialize": ({"lanes": 2, "depth": 1}, {"key0": [0, 3, "S0", "D"], "key1": [2, "S0", "D"],
                                             "in0": [1, 4, "S0", 6, "S1", "D"], "in1": [8, "S1", "D"]}),
}


def test_every_op_has_a_module():
    assert set(MODULES) == set(OPS)
    assert set(EXAMPLES) == set(OPS)


@pytest.mark.parametrize("op", sorted(OPS))
def test_ports_follow_registry(op):
    params, inputs = EXAMPLES[op]
    dut = MODULES[op](params, connected=set(inputs))
    spec = OPS[op]
    p = spec.resolve_params(dict(params))
    assert set(dut.inputs()) == set(inputs)
    assert set(dut.outputs()) == {n for n, _ in spec.output_ports(p)}
    members = dict(dut.signature.members)
    for name in dut.port_info:
        assert name in members
    Fragment.get(dut, None)          # elaborates (and marks the module used)


@pytest.mark.parametrize("op", sorted(OPS))
def test_converts_to_verilog(op):
    params, inputs = EXAMPLES[op]
    dut = MODULES[op](params, connected=set(inputs), fixed=FixedFormat(16, 8))
    text = verilog.convert(dut, name=f"ff_{op}")
    assert f"module ff_{op}" in text


@pytest.mark.parametrize("depth", [1, 3])
@pytest.mark.parametrize("op", sorted(OPS))
def test_through_fifos(op, depth):
    params, inputs = EXAMPLES[op]
    for seed in range(2):
        check_op(op, params, inputs, fifo_depth=depth, stalls=0.4 * seed, seed=seed)


@pytest.mark.parametrize("op", sorted(OPS))
def test_valid_does_not_depend_on_own_ready(op):
    """Stream rule: at every cycle of a run, each output's valid (and payload) is the same whether its own
    ready is 0 or 1 (other outputs' readies fixed)."""
    import random

    from amaranth.hdl import Value
    from amaranth.sim import Simulator

    from fuseflow.hw.testing import OpHarness, _mem_params, encode_port

    params, inputs = EXAMPLES[op]
    dut = MODULES[op](params, connected=set(inputs))
    init, depth = _mem_params(op, dut.params, None)
    for array, mp in dut.memories.items():
        if mp.writes:
            depth[array] = 64
    h = OpHarness(dut, init, depth)
    sim = Simulator(h)
    sim.add_clock(1e-6)
    rng = random.Random(1)
    ins = {p: [encode_port(dut, f"i_{p}", t) for t in inputs[p]] for p in dut.inputs()}
    outs = [getattr(dut, f"o_{p}") for p in dut.outputs()]
    bad = []

    async def tb(ctx):
        pos = {p: 0 for p in ins}
        for cyc in range(60):
            for p, toks in ins.items():
                s = getattr(dut, f"i_{p}")
                ok = pos[p] < len(toks) and rng.random() < 0.8
                ctx.set(s.valid, ok)
                if pos[p] < len(toks):
                    ctx.set(Value.cast(s.payload), toks[pos[p]])
            readies = [rng.random() < 0.7 for _ in outs]
            for o, r in zip(outs, readies):
                ctx.set(o.ready, r)
            for k, o in enumerate(outs):
                seen = []
                for r in (0, 1):
                    ctx.set(o.ready, r)
                    seen.append((ctx.get(o.valid), ctx.get(Value.cast(o.payload)) if ctx.get(o.valid) else None))
                if seen[0] != seen[1]:
                    bad.append((cyc, k, seen))
                ctx.set(o.ready, readies[k])
            taken = {p: ctx.get(getattr(dut, f"i_{p}").valid) and ctx.get(getattr(dut, f"i_{p}").ready) for p in ins}
            await ctx.tick()
            for p in ins:
                pos[p] += bool(taken[p])
    sim.add_testbench(tb)
    sim.run()
    assert not bad, bad[:5]
