"""The off-chip memory model: onchip is exactly today's timing; off chip each kernel pays for its bytes."""

import math
import subprocess
import sys

import pytest

from fuseflow.compiler import compile_program, parse_file
from fuseflow.errors import FuseFlowError
from fuseflow.samml import kernels
from fuseflow.sim import engine
from fuseflow.sim.memory import PRESETS, MemorySystem, memory_stages, memory_system
from fuseflow.dse.experiments import example_path


def _gcn(fuse):
    prog = compile_program(parse_file(example_path("gcn")), fuse=fuse).program
    return prog, kernels.random_inputs(prog, density=0.3, seed=1)


@pytest.mark.parametrize("name", ["spmv_csr", "spmspm_gustavson", "sddmm"])
def test_onchip_is_todays_timing(name):
    prog = kernels.build(name)
    inputs = kernels.random_inputs(prog, density=0.4, seed=2)
    plain = engine.run(prog, inputs)
    onchip = engine.run(prog, inputs, memory="onchip")
    assert onchip.cycles == plain.cycles
    # the op-level clock: 1 + the last firing of any op
    for ks in onchip.stats["kernels"]:
        assert ks["cycles"] == ks["memory"]["compute"]
        last = max(n["busy"] + n["blocked"] + n["idle"] for n in ks["nodes"].values())
        assert last == ks["cycles"]


def test_off_chip_charges_bytes_and_latency():
    prog, inputs = _gcn("none")
    on = engine.run(prog, inputs)
    mem = MemorySystem("slow", 0.5, 7)
    off = engine.run(prog, inputs, memory=mem)
    assert len(off.kernel_cycles) == 2
    for k, ks_on, ks in zip(prog.kernels, on.stats["kernels"], off.stats["kernels"]):
        m = ks["memory"]
        moved = m["read_bytes"] + m["write_bytes"]
        assert moved > 0
        assert m["transfer"] == math.ceil(moved / 0.5)
        assert m["latency"] % 7 == 0 and m["latency"] >= 7 * 2
        assert ks["cycles"] == max(ks_on["cycles"], m["transfer"]) + m["latency"]
    # T = A X: A's compressed level, then A's values, then T's value writer are dependent round trips (A's
    # dense row level and X's located levels move no bytes)
    assert off.stats["kernels"][0]["memory"]["latency"] == 7 * 3
    # T = A X: A's compressed level, then A's values, then T's value writer are dependent round trips (A's
    # dense row level and X's located levels move no bytes)
    assert off.stats["kernels"][0]["memory"]["latency"] == 7 * 3
    # outputs do not depend on where memory is
    assert (off.outputs["H"] == on.outputs["H"]).all()


def test_unfused_pays_for_its_intermediate():
    unfused, inputs = _gcn("none")
    fused, _ = _gcn("regions")
    u, f = engine.run(unfused, inputs, memory="hbm2"), engine.run(fused, inputs, memory="hbm2")
    # the intermediate T is written by the first kernel and read back by the second
    t_bytes = u.stats["kernels"][0]["memory"]["write_bytes"]
    assert t_bytes > 0
    assert u.stats["mem_read_bytes"] + u.stats["mem_write_bytes"] > f.stats["mem_read_bytes"] + f.stats["mem_write_bytes"]
    assert u.cycles - engine.run(unfused, inputs).cycles > f.cycles - engine.run(fused, inputs).cycles


def test_presets_and_specs():
    assert memory_system(None) is PRESETS["onchip"]
    assert memory_system("hbm2").bytes_per_cycle == 32.0
    m = memory_system("bw=4,latency=20")
    assert (m.bytes_per_cycle, m.latency) == (4.0, 20)
    for bad in ("sram", "bw=0", "bw=x", "latency=3", "bw=1,foo=2"):
        with pytest.raises(FuseFlowError):
            memory_system(bad)


def test_cli_memory(tmp_path):
    import numpy as np
    prog, inputs = _gcn("none")
    from fuseflow.samml import io as samml_io
    g = tmp_path / "g.json"
    g.write_text(samml_io.dumps(prog))
    np.savez(tmp_path / "in.npz", **inputs)
    run = lambda *a: subprocess.run([sys.executable, "-m", "fuseflow.sim", "run", str(g), "--inputs",
                                     str(tmp_path / "in.npz"), *a], capture_output=True, text=True)
    ok = run("--memory", "hbm2")
    assert ok.returncode == 0 and "memory hbm2" in ok.stdout and "latency" in ok.stdout
    bad = run("--memory", "sram")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --memory") and "Traceback" not in bad.stderr
