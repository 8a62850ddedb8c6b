"""``python -m fuseflow.boards``: the simulated round trip, and one-line errors with exit 2 and no outputs
for bad input (these fail before any synthesis tool runs)."""

import json

import numpy as np
import pytest

from fuseflow.boards.__main__ import main
from fuseflow.samml import io as samml_io
from fuseflow.samml import kernels
from fuseflow.sim import run

from verilator_probe import requires_verilator  # noqa: E402  (tests/verilator_probe.py)


@pytest.fixture
def spmv_files(tmp_path):
    program, inputs = kernels.dcsr_example()
    g = tmp_path / "spmv.json"
    samml_io.save(program, g)
    d = tmp_path / "spmv.npz"
    np.savez(d, B=inputs["B"].toarray(), c=inputs["c"])
    return g, d


def test_simulate_command(spmv_files, capsys):
    g, d = spmv_files
    assert main(["simulate", str(g), "--inputs", str(d)]) == 0
    out = capsys.readouterr().out
    program, inputs = kernels.dcsr_example()
    cycles = run(program, inputs).cycles             # the reference simulator's count for the DESIGN.md SpMV
    assert f"RTL {cycles} cycles, reference simulator {cycles} cycles (equal)" in out
    assert "bit-identical" in out


@requires_verilator
@pytest.mark.slow
def test_simulate_command_on_verilator(spmv_files, capsys):
    """The same round trip on the board top's Verilog, cocotbext-uart as the host's UART."""
    g, d = spmv_files
    assert main(["simulate", str(g), "--inputs", str(d), "--simulator", "verilator"]) == 0
    out = capsys.readouterr().out
    program, inputs = kernels.dcsr_example()
    cycles = run(program, inputs).cycles
    assert f"RTL {cycles} cycles, reference simulator {cycles} cycles (equal)" in out
    assert "bit-identical" in out


@pytest.mark.parametrize("args, message", [
    (["--board", "nope"], "error: --board: unknown board 'nope'"),
    (["--board", "icebreaker", "--no-capacities"], "error: tensor B: no capacity"),
    (["--board", "ulx3s-85f", "--inputs", "{d}", "--clock", "25", "--baud", "10000000"],
     "error: --baud: 10000000 baud is too fast"),
    (["--board", "ulx3s-85f", "--inputs", "{d}", "--clock", "25", "--baud", "2900000"],
     "error: --baud: 2900000 baud is 4.2% off"),
    # the UART divisor follows the PLL clock: 10 Mbaud is 4 clocks per bit at 40 MHz, too fast at 30
    (["--board", "ulx3s-85f", "--inputs", "{d}", "--clock", "30", "--baud", "10000000"],
     "error: --baud: 10000000 baud is too fast for a 30 MHz clock"),
    (["--board", "ulx3s-85f", "--inputs", "{d}", "--clock", "500"], "error: --clock: the ECP5 PLL makes 10-400 MHz"),
    (["--board", "icebreaker", "--inputs", "{d}", "--clock", "20"], "error: --clock: board icebreaker runs on its"),
    (["--board", "ulx3s-85f", "--inputs", "{missing}"], "missing.npz: no such file"),
    (["--board", "icebreaker", "--inputs", "{d}", "--random-inputs", "0.5"], "either --inputs or --random-inputs"),
    (["--board", "icebreaker", "--random-inputs", "2"], "error: --random-inputs: density must be in (0, 1]"),
    (["--board", "ulx3s-85f", "--interface", "axi"], "error: --interface axi: a board build keeps the host port"),
    (["--board", "ulx3s-85f", "--interface", "apb"], "apb"),
])
def test_build_bad_input(spmv_files, tmp_path, capsys, args, message):
    g, d = spmv_files
    out = tmp_path / "out"
    if "--no-capacities" in args:              # a hand-written graph without capacities needs data
        args = [a for a in args if a != "--no-capacities"]
        doc = json.loads(g.read_text())
        for t in doc["tensors"]:
            t.pop("capacity", None)
        g.write_text(json.dumps(doc))
    args = [a.format(d=d, missing=tmp_path / "missing.npz") for a in args]
    assert main(["build", str(g), "-o", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err
    assert len(err.splitlines()) == 1
    assert not out.exists()


def test_simulate_needs_data(spmv_files, capsys):
    g, d = spmv_files
    assert main(["simulate", str(g)]) == 2
    assert "give the tensors with --inputs FILE or --random-inputs DENSITY" in capsys.readouterr().err


def test_run_needs_a_board_manifest(spmv_files, tmp_path, capsys):
    g, d = spmv_files
    m = tmp_path / "m.json"
    m.write_text('{"host": {}}')
    assert main(["run", str(g), "--inputs", str(d), "--manifest", str(m), "--port", "/dev/null"]) == 2
    assert "not a board manifest" in capsys.readouterr().err
