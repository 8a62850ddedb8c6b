"""``python -m fuseflow.compiler``: graph.json output, --list-orders, --dump-table, one-line errors with exit
status 2 and no half-written outputs."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "fuseflow", "programs")


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "fuseflow.compiler", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=120)


def test_compile_writes_graph(tmp_path):
    r = run("compile", os.path.join(EX, "gcn.ff"), "-o", str(tmp_path), "--fuse", "full")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "graph.json").read_text())
    assert doc["samml"] == 1 and len(doc["kernels"]) == 1
    from fuseflow.samml import load
    prog = load(str(tmp_path / "graph.json"))
    assert [t.name for t in prog.outputs] == ["H"]


def test_compile_then_simulate(tmp_path):
    import numpy as np
    import fuseflow.sim as sim
    from fuseflow.samml import load
    r = run("compile", os.path.join(EX, "graphsage.ff"), "-o", str(tmp_path))
    assert r.returncode == 0, r.stderr
    prog = load(str(tmp_path / "graph.json"))
    rng = np.random.default_rng(0)
    A = np.where(rng.random((10, 10)) < 0.3, rng.random((10, 10)), 0.0)
    X, W = rng.random((10, 6)), rng.random((6, 4))
    out = sim.run(prog, {"A": A, "X": X, "W": W})
    np.testing.assert_allclose(out.outputs["T"], A @ X @ W, rtol=1e-9)


def test_fuse_none_gives_one_kernel_per_statement(tmp_path):
    r = run("compile", os.path.join(EX, "gcn2.ff"), "-o", str(tmp_path), "--fuse", "none")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "graph.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == ["T1", "H1", "T2", "H2"]
    roles = {t["name"]: t["role"] for t in doc["tensors"]}
    assert roles["T1"] == "intermediate" and roles["H2"] == "output"
    r = run("compile", os.path.join(EX, "gcn2.ff"), "-o", str(tmp_path), "--fuse", "regions")
    doc = json.loads((tmp_path / "graph.json").read_text())
    assert [k["name"] for k in doc["kernels"]] == ["H1", "H2"]


def test_list_orders_and_dump_table():
    r = run("compile", os.path.join(EX, "graphsage.ff"), "--list-orders", "--dump-table")
    assert r.returncode == 0, r.stderr
    assert "i,l,m,j   (selected)" in r.stdout
    assert "fusion table of kernel T" in r.stdout
    for col in ("A(i,l)", "X(l,m)", "W(m,j)", "Red1_l", "Red1_m", "Intersect_m"):
        assert col in r.stdout


def test_list_orders_cap(tmp_path):
    prog = tmp_path / "p.ff"
    prog.write_text("tensor A(3,4,5) : ddd\ntensor B(6,7) : dd\ntensor C(2,2) : dd\n"
                    "T(i,j,l) = A(i,j,k) * B(l,m) * C(n,o)\n")
    r = run("compile", str(prog), "--list-orders", "--max-orders", "5")
    assert r.returncode == 0, r.stderr
    assert "capped at 5" in r.stdout


def test_order_flag(tmp_path):
    prog = tmp_path / "p.ff"
    prog.write_text("tensor A(5,6) : dcsr\ntensor X(6,4) : dcsc\nT(i,j) = A(i,k) * X(k,j)\n")
    r = run("compile", str(prog), "--list-orders", "--order", "j,i,k")
    assert "j,i,k   (selected)" in r.stdout


@pytest.mark.parametrize("text,want", [
    ("tensor A(3,3) : csr\nT(i,j) = A(i,j) +\n", "error: line 2, column"),
    ("tensor A(3,3) : csr\nT(i,j) = B(i,j)\n", "error: line 2, column 10: tensor B is not declared"),
    ("tensor A(3,4) : csr\ntensor B(3,3) : csr\nT(i,j) = A(i,j) * B(i,j)\n", "error: line 3"),
    ("tensor A(3,3) : csc\nx(i) = A(i,j)\norder i,j\n", "unsatisfiable dataflow order"),
    # order-7 tensors are refused by the compiler (graph.json, simulator and hardware carry order <= 6)
    ("tensor X(2,2,3,3,2,2,2)\ny(a) = X(a,b,c,d,e,f,g)\n", "error: line 1, column 1: X has order 7"),
    ("tensor A(2,2,2) : csf\nY(a,b,c,d,e,f,g) = A(a,b,c) * A(d,e,f) * A(g,a,b)\n",
     "error: line 2, column 1: Y has order 7"),
    # sugar: softmax / layernorm over an index the argument does not have, bad parameters
    ("tensor S(3,4)\nP(i,j) = softmax[k](S(i,j))\n", "error: line 2, column 10: softmax[k]: index k is not an "
                                                         "index of its argument S(i,j)"),
    ("tensor S(3,4)\nP(i,j) = layernorm[j, eps=0](S(i,j))\n", "eps must be positive"),
    ("tensor S(3,4)\nP(i,j) = layernorm[j, gain=1](S(i,j))\n", "has no parameter 'gain'"),
    ("tensor S(3,4)\ntensor g(5)\nP(i,j) = layernorm[j](S(i,j), g(k))\n", "uses k, which S(i,j) does not have"),
    ("tensor S(3,4)\nP(i,j) = softmax[j](S(i,j), S(i,j))\n", "takes 1 argument, got 2"),
])
def test_errors_exit_2(tmp_path, text, want):
    prog = tmp_path / "bad.ff"
    prog.write_text(text)
    out = tmp_path / "out"
    r = run("compile", str(prog), "-o", str(out))
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0]
    assert not (out / "graph.json").exists()


def test_missing_file_and_bad_flags(tmp_path):
    r = run("compile", str(tmp_path / "nope.ff"), "-o", str(tmp_path))
    assert r.returncode == 2 and r.stderr.startswith("error: ")
    r = run("compile", os.path.join(EX, "spmv.ff"))
    assert r.returncode == 2 and "nothing to do" in r.stderr
    r = run("compile", os.path.join(EX, "spmv.ff"), "-o", str(tmp_path), "--order", "i,,j")
    assert r.returncode == 2 and r.stderr.startswith("error: --order")


def test_listed_orders_of_compiler_made_kernels_are_accepted_back(tmp_path):
    """docs/compiler.md: an order --list-orders prints for a kernel the compiler created (here the temporary
    H_t1 of an unlowerable reduction) is accepted back with --order, in the
    KERNEL=ORDER form it prints (a plain chain constrains every kernel, which another kernel may refuse)."""
    prog = tmp_path / "p.ff"
    prog.write_text("tensor X(4,5)\ntensor Att(2,4,3)\ntensor WO(2,3,5)\ntensor Y(5,4)\n"
                    "H(i,m) = X(i,m) + Att(h,i,e) * WO(h,e,m)\nG(i,k) = H(i,m) * Y(m,k)\n")
    r = run("compile", str(prog), "--list-orders")
    assert r.returncode == 0, r.stderr
    hints = [l.split("--order ", 1)[1].rstrip(")") for l in r.stdout.splitlines() if "give one back" in l]
    assert any(h.startswith("H_t1=") for h in hints), r.stdout
    for h in hints:
        kernel, order = h.split("=")
        listed = run("compile", str(prog), "--list-orders", "--max-orders", "50").stdout
        block = listed.split(f"kernel {kernel}:")[1].split("\nkernel ")[0]
        for o in [l.split()[0] for l in block.splitlines() if l.startswith("    ")]:
            r = run("compile", str(prog), "--list-orders", "--order", f"{kernel}={o}", "-o", str(tmp_path / "o"))
            assert r.returncode == 0, r.stderr
            got = r.stdout.split(f"kernel {kernel}:")[1].split("\nkernel ")[0]
            assert f"    {o}   (selected)" in got
    r = run("compile", str(prog), "--list-orders", "--order", "Nope=i,m")
    assert r.returncode == 2 and r.stderr.startswith("error: --order: no kernel writes Nope")
