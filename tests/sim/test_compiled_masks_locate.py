"""The compiled models of locate, mask_scan and crd_mask against their Python twins: the same outputs, cycles,
busy counts and error messages on random token streams (well-formed and mutated), every mask kind and both
number modes; and whole programs (the shipped residual and sddmm graphs, masked attention and small masked
kernels at every granularity) with the same outputs, cycles, per-kernel counters and tokens per stream."""

import os
import random

import numpy as np
import pytest

from fuseflow.compiler import compile_program, compile_text
from fuseflow.compiler.frontend import parse_file
from fuseflow import programs
from fuseflow.errors import FuseFlowError, GraphError, StreamError
from fuseflow.hw.testing import stream, tree_map
from fuseflow.samml.kernels import random_inputs
from fuseflow.sim import compiled, run
from fuseflow.sim.engine import load_program, run_op

pytestmark = pytest.mark.skipif(not compiled.available(), reason="the compiled engine is not built")

MODES = ("float", "fixed")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def outcome(engine, op, params, inputs, mode):
    """run_op's outputs, cycles and busy on one engine, or the error it raises (class and message)."""
    try:
        out, info = run_op(op, params, inputs, mode=mode, stats=True, engine=engine)
    except FuseFlowError as exc:
        return "error", type(exc).__name__, str(exc)
    # repr: floats compared bit for bit (as far as repr tells them apart), ints and floats told apart
    return "ok", repr(out), info["cycles"], info["busy"]


def both(op, params, inputs, mode):
    """The outcome on both engines, asserted identical."""
    want = outcome("python", op, params, inputs, mode)
    assert outcome("compiled", op, params, inputs, mode) == want, (op, params, inputs)
    return want


# ---- random streams --------------------------------------------------------------------------------------

def rand_tree(rng, depth, leaf, max_len=3):
    if depth == 0:
        return leaf()
    return [rand_tree(rng, depth - 1, leaf, max_len) for _ in range(rng.randint(0, max_len))]


def sorted_crds(rng, dim, max_len=4):
    return sorted(rng.sample(range(dim), rng.randint(0, min(dim, max_len))))


def mutate(rng, toks, pool):
    """``toks`` with one token before its D replaced, removed, inserted or swapped with the next (the stream
    still ends with its one D, so the op model sees the damage, not the source's check)."""
    toks = list(toks)
    k = rng.randrange(len(toks))
    how = rng.randrange(4)
    if how == 0 and k + 1 < len(toks):
        toks[k] = rng.choice(pool)
    elif how == 1 and k + 1 < len(toks):
        del toks[k]
    elif how == 2:
        toks.insert(k, rng.choice(pool))
    elif k + 2 < len(toks):
        toks[k], toks[k + 1] = toks[k + 1], toks[k]
    return toks


def rand_mask(rng):
    """(mask text, rows, dim) of a random pattern that fits."""
    kind = rng.choice(["causal", "band", "bigbird"])
    if kind == "bigbird":
        b = rng.randint(1, 3)
        text = (f"bigbird:block={b},window={rng.choice([0, 1, 3])},global={rng.randint(0, 2)},"
                f"random={rng.randint(0, 2)},seed={rng.randint(0, 99)}")
        return text, b * rng.randint(1, 4), b * rng.randint(1, 4)
    text = "causal" if kind == "causal" else f"band:w={rng.randint(0, 3)}"
    return text, rng.randint(1, 9), rng.randint(1, 9)


def value(rng, mode):
    return rng.uniform(-4, 4) if mode == "float" else rng.randint(-(1 << 20), 1 << 20)


STOP_POOL = ["S0", "S1", "S2", "N"]


@pytest.mark.parametrize("mode", MODES)
def test_locate_random_streams(mode):
    rng = random.Random(f"locate-{mode}")
    ok = 0
    for case in range(200):
        dim, depth = rng.randint(1, 7), rng.randint(0, 2)
        tree = rand_tree(rng, depth, lambda: ("N" if rng.random() < 0.15 else rng.randint(0, 30),
                                              sorted_crds(rng, dim)))
        ref = stream(tree_map(tree, depth, lambda rc: rc[0]), depth)
        crd = stream(tree_map(tree, depth, lambda rc: rc[1]), depth + 1)
        broken = case % 3 == 2
        if broken:
            pool = STOP_POOL + [rng.randint(0, dim)]
            if rng.random() < 0.5:
                ref = mutate(rng, ref, pool)
            else:
                crd = mutate(rng, crd, pool)
        got = both("locate", {"dim": dim}, {"ref": ref, "crd": crd}, mode)
        ok += got[0] == "ok"
        assert broken or got[0] == "ok", got
    assert ok > 120


@pytest.mark.parametrize("mode", MODES)
def test_mask_scan_random_streams(mode):
    rng = random.Random(f"mask_scan-{mode}")
    ok = 0
    for case in range(200):
        mask, rows, dim = rand_mask(rng)
        depth = rng.randint(0, 2)
        tree = rand_tree(rng, depth, lambda: "N" if rng.random() < 0.1 else rng.randrange(rows))
        ref = stream(tree, depth)
        broken = case % 3 == 2
        if broken:
            ref = mutate(rng, ref, STOP_POOL + [rng.randrange(rows), rows])
        got = both("mask_scan", {"mask": mask, "rows": rows, "dim": dim}, {"ref": ref}, mode)
        ok += got[0] == "ok"
        assert broken or got[0] == "ok", got
    assert ok > 120


@pytest.mark.parametrize("mode", MODES)
def test_crd_mask_random_streams(mode):
    rng = random.Random(f"crd_mask-{mode}")
    ok = 0
    for case in range(200):
        mask, rows, dim = rand_mask(rng)
        depth, arity = rng.randint(0, 2), rng.randint(0, 2)
        with_n = rng.random() < 0.1
        tree = rand_tree(rng, depth, lambda: ("N" if with_n and rng.random() < 0.3 else rng.randrange(rows),
                                              sorted_crds(rng, dim)))
        outer = stream(tree_map(tree, depth, lambda rc: rc[0]), depth)
        crd = stream(tree_map(tree, depth, lambda rc: rc[1]), depth + 1)
        inputs = {"outer": outer, "crd": crd}
        for i in range(arity):
            inputs[f"ref{i}"] = [t if isinstance(t, str) else "N" if rng.random() < 0.1 else value(rng, mode)
                                 for t in crd]
        broken = case % 3 == 2
        if broken:
            port = rng.choice(sorted(inputs))
            inputs[port] = mutate(rng, inputs[port], STOP_POOL + [rng.randrange(dim), dim, rows])
        got = both("crd_mask", {"mask": mask, "rows": rows, "dim": dim, "arity": arity}, inputs, mode)
        ok += got[0] == "ok"
        assert broken or with_n or got[0] == "ok", got
    assert ok > 110


# ---- malformed streams and bad patterns: the same error, word for word --------------------------------------

MALFORMED = [
    ("locate", {"dim": 4}, {"ref": [0, "D"], "crd": [1, "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": [0, "S0", "D"], "crd": [1, "S0", "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": ["S0", "D"], "crd": ["S0", "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": [0, "D"], "crd": ["N", "S0", "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": ["D"], "crd": [1, "S0", "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": [2, 3, "D"], "crd": [1, "S1", "D"]}, StreamError),
    ("locate", {"dim": 4}, {"ref": [2, "D"], "crd": ["D"]}, StreamError),
    ("mask_scan", {"mask": "causal", "rows": 4, "dim": 4}, {"ref": [4, "S0", "D"]}, StreamError),
    ("mask_scan", {"mask": "band:w=1", "rows": 4, "dim": 4}, {"ref": [-1, "S0", "D"]}, StreamError),
    ("mask_scan", {"mask": "bigbird:block=3", "rows": 4, "dim": 6}, {"ref": [0, "D"]}, GraphError),
    ("mask_scan", {"mask": "wobble", "rows": 4, "dim": 6}, {"ref": [0, "D"]}, GraphError),
    ("mask_scan", {"mask": "causal", "rows": 0, "dim": 6}, {"ref": [0, "D"]}, GraphError),
    ("crd_mask", {"mask": "band", "rows": 4, "dim": 6}, {"outer": [0, "D"], "crd": [1, "S0", "D"],
                                                         "ref0": [1, "S0", "D"]}, GraphError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [5, "D"], "crd": [1, "S0", "D"],
                                                           "ref0": [1, "S0", "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": ["N", "D"], "crd": [1, "S0", "D"],
                                                           "ref0": [1, "S0", "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [1, "D"], "crd": [4, "S0", "D"],
                                                           "ref0": [1, "S0", "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [1, "D"], "crd": [0, "S0", "D"],
                                                           "ref0": [1.5, "S1", "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [1, "S0", "D"],
                                                           "crd": [0, "S0", "S0", "D"],
                                                           "ref0": [1, "S0", "S0", "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [1, "D"], "crd": [0, "D"],
                                                           "ref0": [1, "D"]}, StreamError),
    ("crd_mask", {"mask": "causal", "rows": 4, "dim": 4}, {"outer": [1, "D"], "crd": [0, "N", "D"],
                                                           "ref0": [1, "N", "D"]}, StreamError),
]


@pytest.mark.parametrize("op, params, inputs, exc", MALFORMED)
def test_malformed_same_error(op, params, inputs, exc):
    msgs = []
    for engine in ("python", "compiled"):
        with pytest.raises(exc) as info:
            run_op(op, params, inputs, engine=engine)
        msgs.append((type(info.value), str(info.value)))
    assert msgs[0] == msgs[1]


# ---- whole programs ---------------------------------------------------------------------------------------

MASKED = {
    "causal_csr": "tensor A(12, 12) : csr\nS(i,j) = mask[causal](i,j) * A(i,j)\n",
    "band_dcsr_rowsum": "tensor A(12, 10) : dcsr\nx(i) = sum[j](mask[band:w=2](i,j) * A(i,j))\n",
    "bigbird_dense": "tensor A(12, 12) : dense\n"
                     "S(i,j) = mask[bigbird:block=3,window=1,global=1,random=2,seed=7](i,j) * A(i,j)\n",
    "scores_causal": "tensor Q(16, 4) : dense\ntensor K(16, 4) : dense\n"
                     "S(i,j) = mask[causal](i,j) * sum[d](Q(i,d) * K(j,d))\n",
}


def _program(name, fuse):
    if name in ("residual", "sddmm"):
        return load_program(os.path.join(_ROOT, "examples", "kernels", name, "graph.json"))
    if name == "masked_attention":
        return compile_program(parse_file(programs.path("masked_attention")), fuse=fuse).program
    return compile_text(MASKED[name], fuse=fuse).program


CASES = [("residual", None), ("sddmm", None)] + \
    [("masked_attention", fuse) for fuse in ("none", "regions", "full")] + \
    [(name, fuse) for name in MASKED for fuse in ("none", "full")]
KERNEL_FIELDS = ("name", "cycles", "tokens", "streams", "nodes", "alu_ops", "mem_read_bytes", "mem_write_bytes",
                 "memory", "stream_bound", "op_bound")


@pytest.mark.parametrize("name, fuse", CASES)
def test_programs_same_on_both_engines(name, fuse):
    prog = _program(name, fuse)
    why = compiled.unsupported(prog)
    if why:
        pytest.skip(why)
    for mode, density, seed, depth in (("float", 0.3, 1, None), ("fixed", 0.6, 2, None), ("float", 0.5, 3, 1)):
        inputs = random_inputs(prog, density, seed)
        trace = depth is not None
        res = {eng: run(prog, inputs, mode=mode, fifo_depth=depth, trace=trace, engine=eng)
               for eng in ("python", "compiled")}
        a, b = res["python"], res["compiled"]
        assert b.stats["engine"] == "compiled"
        assert sorted(a.outputs) == sorted(b.outputs)
        for k in a.outputs:
            assert np.array_equal(a.outputs[k], b.outputs[k]), k
        assert a.cycles == b.cycles and a.kernel_cycles == b.kernel_cycles
        for ka, kb in zip(a.stats["kernels"], b.stats["kernels"], strict=True):
            for f in KERNEL_FIELDS:
                assert ka[f] == kb[f], (ka["name"], f)
        for f in ("tokens", "alu_ops", "mem_read_bytes", "mem_write_bytes"):
            assert a.stats[f] == b.stats[f]
        if trace:
            assert a.trace == b.trace
            assert repr(a.trace_tokens) == repr(b.trace_tokens)
