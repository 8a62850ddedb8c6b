"""The sweep runner: serial, a local Dask cluster, and a real Dask scheduler with workers on localhost."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from fuseflow.reports import correlation as corr, suites
from fuseflow.reports.sweep import SweepError, Task, parse_scheduler, run_sweep


def norm_of_random(seed, n):
    """A configuration's result: deterministic from its parameters."""
    return float(np.linalg.norm(np.random.default_rng(seed).standard_normal(n)))


def slow_square(x, delay):
    time.sleep(delay)
    return x * x


def fails(x):
    raise ValueError(f"bad configuration {x}")


def expected(seeds, n=50):
    return {f"s{s}": float(np.linalg.norm(np.random.default_rng(s).standard_normal(n))) for s in seeds}


def test_serial_results_keyed_and_in_task_order():
    tasks = [Task(f"s{s}", norm_of_random, (s, 50)) for s in (5, 1, 3)]
    seen = []
    out = run_sweep(tasks, progress=False, on_result=lambda k, v: seen.append(k))
    assert list(out) == ["s5", "s1", "s3"] and out == expected((5, 1, 3))
    assert seen == ["s5", "s1", "s3"]


def test_duplicate_keys_and_bad_schedulers_are_refused():
    with pytest.raises(SweepError, match="two tasks have this key"):
        run_sweep([Task("a", pow, (1, 1)), Task("a", pow, (2, 1))], progress=False)
    for bad in ("locall", "local:0", "http://x", "tcp//h:1", "3"):
        with pytest.raises(SweepError, match="--scheduler"):
            parse_scheduler(bad)
    assert parse_scheduler(None) == ("serial", None) and parse_scheduler("local:3") == ("local", 3)
    assert parse_scheduler("tcp://127.0.0.1:8786") == ("address", "tcp://127.0.0.1:8786")


def test_progress_counts_task_weights():
    import io
    buf = io.StringIO()
    run_sweep([Task("a", pow, (2, 2), weight=3), Task("b", pow, (2, 3), weight=2)], label="w", stream=buf)
    lines = buf.getvalue().splitlines()
    assert "3/5" in lines[0] and "5/5" in lines[-1]


def test_local_cluster_gives_the_serial_results():
    tasks = [Task(f"s{s}", norm_of_random, (s, 50)) for s in range(6)]
    assert run_sweep(tasks, "local:2", progress=False) == expected(range(6))


def test_a_failing_task_is_named():
    with pytest.raises(SweepError, match="task 'x'.*ValueError: bad configuration 7"):
        run_sweep([Task("ok", pow, (2, 2)), Task("x", fails, (7,))], "local:1", progress=False)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_scheduler_fails_within_ten_seconds():
    t0 = time.monotonic()
    with pytest.raises(SweepError, match="no Dask scheduler answered"):
        run_sweep([Task("a", pow, (2, 2))], f"tcp://127.0.0.1:{_free_port()}", progress=False)
    assert time.monotonic() - t0 < 30        # the limit is 10 s; generous for a loaded CI machine


@pytest.fixture
def listener():
    """A TCP listener on localhost that is not a Dask scheduler: ``silent`` accepts and never writes,
    ``http`` answers every connection with an HTTP response (read as a Dask frame header it asks for ~10^18
    bytes)."""
    servers = []

    def start(kind):
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        conns = []

        def serve():
            while True:
                try:
                    c, _ = srv.accept()
                except OSError:
                    return
                conns.append(c)
                if kind == "http":
                    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        threading.Thread(target=serve, daemon=True).start()
        servers.append((srv, conns))
        return f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    yield start
    for srv, conns in servers:
        srv.close()
        for c in conns:
            c.close()


@pytest.mark.parametrize("kind, why", [("silent", "does not answer"), ("http", "does not speak Dask")])
def test_a_listener_that_is_not_a_scheduler_fails_within_ten_seconds(listener, kind, why):
    # the Dask client alone waits for a silent peer's handshake forever and turns an HTTP answer into a
    # MemoryError; the sweep must say what is wrong instead, in bounded time
    address = listener(kind)
    t0 = time.monotonic()
    with pytest.raises(SweepError, match=f"no Dask scheduler answered at {address}.*{why}"):
        run_sweep([Task("a", pow, (2, 2))], address, progress=False)
    assert time.monotonic() - t0 < 30        # the limit is 10 s; generous for a loaded CI machine



@pytest.fixture
def dask_cluster(tmp_path):
    """A real scheduler and two single-threaded workers (no nanny: killing one kills the worker) on localhost."""
    sched_file = tmp_path / "scheduler.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", "0", "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        for _ in range(300):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        address = json.loads(sched_file.read_text())["address"]
        workers = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                     "--no-nanny", "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                   for i in range(2)]
        procs += workers
        from distributed import Client
        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        yield address, workers
    finally:
        for p in procs[1:]:
            p.kill()
        procs[0].send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_killing_a_worker_mid_sweep_loses_no_configuration(dask_cluster):
    address, workers = dask_cluster
    tasks = [Task(f"x{x}", slow_square, (x, 0.4)) for x in range(16)]
    seen = []
    killed = threading.Event()

    def on_result(key, value):
        seen.append(key)
        if len(seen) == 2 and not killed.is_set():
            workers[0].kill()             # SIGKILL: the task it was running is lost with it
            killed.set()

    out = run_sweep(tasks, address, progress=False, on_result=on_result)
    assert killed.is_set() and workers[0].wait(timeout=10) is not None
    assert out == {f"x{x}": x * x for x in range(16)}
    assert sorted(seen) == sorted(out) and len(seen) == len(set(seen)) == 16


def test_correlation_on_a_local_cluster_equals_serial(tmp_path):
    entries = [suites.classic("vector_add", 5, 0.5, s) for s in (1, 2)] + [suites.classic("vector_mul", 4, 0.5, 3)]
    suite = suites.Suite("tiny", entries)
    a = corr.correlate(suite, tmp_path / "serial", "amaranth", progress=False)
    b = corr.correlate(suite, tmp_path / "local", "amaranth", progress=False, scheduler="local:2")
    keys = ("name", "status", "sim_cycles", "rtl_cycles", "cycles_equal", "counts")
    assert [{k: r[k] for k in keys} for r in a["records"]] == [{k: r[k] for k in keys} for r in b["records"]]
    assert all(r["status"] == "ok" and r["cycles_equal"] for r in b["records"])
