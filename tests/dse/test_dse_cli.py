"""python -m fuseflow.dse: list, a real run (JSON, PNG, page), and bad input as one-line errors, exit 2."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def dse(*args):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "fuseflow.dse", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env)


def one_line_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr
    for frag in fragments:
        assert frag in lines[0]


def test_list():
    p = dse("list")
    assert p.returncode == 0
    for name in ("fusion", "flops", "sparsity", "orders", "Fig. 16", "Fig. 17"):
        assert name in p.stdout


@pytest.mark.parametrize("args, frags", [
    (["run", "fig99"], ["fig99", "unknown"]),
    (["run", "orders", "--budget", "3"], ["--budget", "impossible", "orders needs"]),
    (["run", "orders", "--budget", "0"], ["--budget"]),
    (["run", "orders", "--scheduler", "tcp://127.0.0.1:9"], ["--scheduler", "no Dask scheduler answered"]),
    (["run", "orders", "--scheduler", "cluster"], ["scheduler"]),
])
def test_bad_input(tmp_path, args, frags):
    out = tmp_path / "rep"
    p = dse(*args, "-o", str(out), "--quiet")
    one_line_error(p, *frags)
    assert not out.exists()          # nothing written


def test_orders_run_writes_json_png_page(tmp_path):
    from fuseflow.dse.experiments import nested_configs
    out = tmp_path / "rep"
    p = dse("run", "orders", "-o", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "orders.json").read_text())
    # one point per (layout, valid order) the compiler lists; every point simulated
    assert data["points"] == len(nested_configs(34)) == len(data["results"])
    rows = data["summary"]["rows"]
    assert data["summary"]["max_over_min_hbm2"] == pytest.approx(rows[-1]["cycles_hbm2"] / rows[0]["cycles_hbm2"])
    assert (out / "orders.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    assert 'src="orders.png"' in page and "29x" in page and "Not yet reproduced" not in page    # Fig. 17 is in


@pytest.mark.slow
def test_blocks_run_fig17(tmp_path):
    """Fig. 17: BigBird attention blocked at B = 4, 8, 16 against the unstructured program, simulated: blocked is
    faster at every B and the speedup grows with B; the page carries the paper's claim and the plot."""
    out = tmp_path / "rep"
    p = dse("run", "blocks", "-o", str(out), "--quiet")
    assert p.returncode == 0, p.stderr
    data = json.loads((out / "blocks.json").read_text())
    rows = data["summary"]["rows"]
    assert [r["B"] for r in rows] == [1, 4, 8, 16] and data["points"] == 4
    speedups = [r["speedup_onchip"] for r in rows]
    assert speedups[0] == 1.0 and all(a < b for a, b in zip(speedups, speedups[1:]))
    assert all(r["speedup_onchip"] == pytest.approx(rows[0]["cycles_onchip"] / r["cycles_onchip"]) for r in rows)
    assert (out / "blocks.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / "index.html").read_text()
    assert 'src="blocks.png"' in page and "proportional to the block size" in page and "Fig. 17" in page


def test_a_silent_scheduler_address_is_one_line_within_ten_seconds(tmp_path):
    # something listens but never answers Dask's handshake (the Dask client alone would wait forever)
    import socket
    import time
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        out = tmp_path / "rep"
        t0 = time.monotonic()
        p = dse("run", "orders", "-o", str(out), "--quiet", "--scheduler", f"tcp://127.0.0.1:{srv.getsockname()[1]}")
        elapsed = time.monotonic() - t0
    finally:
        srv.close()
    one_line_error(p, "--scheduler", "no Dask scheduler answered", "does not answer")
    assert not out.exists()
    assert elapsed < 30            # the handshake gives up after 5 s; generous for a loaded machine
