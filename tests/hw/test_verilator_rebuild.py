"""A compiled model's Verilator build does not depend on its data: a second ``rtl_sim`` with new inputs of the same
shapes reuses the build (no Verilator, no C++ compile) and is still bit-identical and cycle-equal to the simulator;
the first build shows its progress on stderr when asked (issue 42, item 6)."""

import os

import numpy as np
import scipy.sparse as sp

import fuseflow
from fuseflow import programs
from fuseflow.hw import verilator
from fuseflow.hw.elaborate import build

from verilator_probe import requires_verilator

pytestmark = requires_verilator


def _data(seed, density):
    rng = np.random.default_rng(seed)
    a = sp.random(8, 8, density=density, random_state=seed, format="csr", data_rvs=lambda n: rng.uniform(-2, 2, n))
    return {"A": a, "x": rng.uniform(-2, 2, 8)}


def _spmv():
    return fuseflow.compile("program spmv\ntensor A(8, 8) : csr\ntensor x(8) : dense\ny(i) = A(i,j) * x(j)\n")


def test_verilog_does_not_depend_on_the_data():
    """Capacities come from the graph (the compiler declares them) and the memories are loaded at run time: two
    elaborations with different data (different nonzeros) give the same Verilog text, the cache's key."""
    m = _spmv()
    a = build(m.program, m._inputs(_data(1, 0.2))).verilog()
    b = build(m.program, m._inputs(_data(2, 0.6))).verilog()
    assert a == b
    baked = build(m.program, m._inputs(_data(1, 0.2)), bake=True).verilog()
    assert baked != a                        # baked data is in the text: the check above can fail


def test_second_rtl_sim_with_new_data_reuses_the_build(cache, monkeypatch, capfd):
    monkeypatch.setenv("FUSEFLOW_HW_CACHE", str(cache))
    m = _spmv()
    first = m.rtl_sim(_data(1, 0.2), progress=True)
    err = capfd.readouterr().err
    assert first["ok"] and first["cycles_equal"], first["mismatches"] or first["stuck"]
    if not first["build"]["cached"]:         # built here (not by an earlier test of this cache): it said so
        # (the stages in between, such as "compiling C++", print at most every 10 s off a terminal: a fast build
        # shows only its first and last line)
        assert "verilator: building spmv" in err and "100%  built" in err, err
    assert "elaborating spmv" in err

    before = sorted(os.listdir(cache))
    calls = []
    real = verilator._run_logged
    monkeypatch.setattr(verilator, "_run_logged", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    second = m.rtl_sim(_data(2, 0.6), progress=True)
    err = capfd.readouterr().err
    assert calls == [] and second["build"]["cached"] and second["build"]["dir"] == first["build"]["dir"]
    assert "reusing the cached build" in err
    assert second["ok"] and second["cycles_equal"], second["mismatches"] or second["stuck"]
    # the new data ran: other cycles, and outputs equal to the fixed-mode simulator on that data
    assert second["sim_cycles"] == m.simulate(_data(2, 0.6), mode="fixed").cycles
    assert second["sim_cycles"] != first["sim_cycles"]
    assert sorted(os.listdir(cache)) == before and os.path.basename(first["build"]["dir"]) in before


def test_make_objects_reads_verilators_class_lists(tmp_path):
    mk = tmp_path / "Vtop_classes.mk"
    mk.write_text("VM_CLASSES_FAST += \\\n\tVtop \\\n\tVtop___024root__DepSet_h0__0 \\\n\n"
                  "VM_CLASSES_SLOW += \\\n\tVtop___024root__Slow \\\n\n"
                  "VM_SUPPORT_FAST += \\\n\n"
                  "VM_USER_CLASSES = \\\n\tverilator \\\n\n"
                  "VM_GLOBAL_FAST += \\\n\tverilated \\\n\tverilated_vpi \\\n\n")
    assert verilator._make_objects(mk, runtime=False) == ["Vtop", "Vtop___024root__DepSet_h0__0",
                                                          "Vtop___024root__Slow", "verilator"]
    assert verilator._make_objects(mk, runtime=True)[-2:] == ["verilated", "verilated_vpi"]
    assert verilator._make_objects(tmp_path / "missing.mk", runtime=True) == []


def test_hw_sim_says_the_build_was_reused(cache, monkeypatch, tmp_path, capfd):
    """``fuseflow hw sim GRAPH --random-inputs D --progress``: the same graph as the model above, so the same build
    (built by the test before, or here the first time); the second command reuses it and says so."""
    from fuseflow.hw.__main__ import main
    from fuseflow.samml import io as samml_io
    monkeypatch.setenv("FUSEFLOW_HW_CACHE", str(cache))
    graph = tmp_path / "graph.json"
    samml_io.save(_spmv().program, str(graph))
    for seed in ("1", "2"):
        assert main(["sim", str(graph), "--random-inputs", "0.4", "--data-seed", seed, "--progress"]) == 0
    out, err = capfd.readouterr()
    assert "elaborating spmv" in err and "reusing the cached build" in err
    assert "Verilator build reused from the cache" in out
