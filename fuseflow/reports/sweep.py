"""One sweep runner: independent configurations, each run by one function, results keyed by configuration.

Correlation suites, design-space experiments and benchmark sweeps are all a list of :class:`Task` s. This
module runs such a list

- ``serial`` (default): in this process, in order;
- ``local`` or ``local:N``: on a local Dask cluster of N worker processes (default: this machine's cores);
- ``tcp://HOST:PORT``: on an existing Dask scheduler (``dask scheduler`` / ``dask worker`` started elsewhere).

Results come back as a dict keyed by the task keys, in task order, whatever the order of completion, so
nothing is lost or counted twice. A worker that dies takes its running task with it; the Dask scheduler
gives that task to another worker (up to ``distributed.scheduler.allowed-failures`` times), so a killed worker
loses no result. An exception raised by a task's function is not retried (it is the function's answer) and is
raised again here, naming the task.

>>> from fuseflow.reports.sweep import Task, run_sweep
>>> run_sweep([Task("a", pow, (2, 3)), Task("b", pow, (3, 2))], progress=False)
{'a': 8, 'b': 9}
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ..errors import FuseFlowError
from .progress import Progress

#: how long a ``tcp://`` scheduler may take to answer before the sweep gives up
CONNECT_TIMEOUT_S = 10
#: how long something listening at that address may take to answer Dask's handshake (a scheduler answers in
#: milliseconds; with Python's start-up, a silent listener is reported within 10 s of the command)
HANDSHAKE_TIMEOUT_S = 5


class SweepError(FuseFlowError):
    """A sweep that cannot run: bad scheduler, duplicate keys, or a task that failed."""
    default_what = "sweep"


@dataclass
class Task:
    """One configuration: ``fn(*args, **kwargs)`` keyed by ``key`` (a string, unique in the sweep).

    ``weight`` is what the task counts for on the progress bar (e.g. the number of kernels it runs)."""
    key: str
    fn: Callable[..., Any]
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    weight: int = 1


def parse_scheduler(scheduler: str | None) -> tuple[str, Any]:
    """``None``/``serial`` -> ("serial", None); ``local[:N]`` -> ("local", N or None); ``tcp://..`` -> ("address",
    the address). Raises SweepError for anything else."""
    if scheduler in (None, "", "serial"):
        return "serial", None
    m = re.fullmatch(r"local(?::(\d+))?", scheduler)
    if m:
        n = int(m.group(1)) if m.group(1) else None
        if n is not None and n < 1:
            raise SweepError("--scheduler", f"a local cluster needs at least 1 worker, got {scheduler!r}")
        return "local", n
    if re.fullmatch(r"(tcp|tls|inproc|ws|wss)://\S+", scheduler):
        return "address", scheduler
    raise SweepError("--scheduler", f"expected serial, local, local:N or tcp://HOST:PORT, got {scheduler!r}")


def run_sweep(tasks: Iterable[Task], scheduler: str | None = None, *, progress: bool = True,
              label: str = "sweep", stream=None,
              on_result: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """Run every task and return ``{key: result}`` in task order (see the module docstring for ``scheduler``).

    ``on_result(key, result)`` is called as each task finishes (in completion order), so a caller keeps what
    was measured when the sweep is interrupted."""
    tasks = list(tasks)
    seen = set()
    for t in tasks:
        if t.key in seen:
            raise SweepError(f"task {t.key!r}", "two tasks have this key (results are keyed by configuration)")
        seen.add(t.key)
    kind, arg = parse_scheduler(scheduler)
    bar = Progress(sum(t.weight for t in tasks), label, stream=stream, enabled=progress)
    with bar:
        if kind == "serial":
            results = {}
            for t in tasks:
                bar.note(t.key)
                results[t.key] = t.fn(*t.args, **t.kwargs)
                if on_result:
                    on_result(t.key, results[t.key])
                bar.step(t.key, n=t.weight)
            return results
        return _run_dask(tasks, kind, arg, bar, on_result)


def _run_dask(tasks, kind, arg, bar, on_result):
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise SweepError("--scheduler", "Dask is not installed (pip install 'dask[distributed]')") from None
    import logging
    cluster = None
    try:
        if kind == "local":
            n = arg or os.cpu_count() or 1
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            _check_reachable(arg)
            try:
                client = Client(arg, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise SweepError("--scheduler", f"no Dask scheduler answered at {arg} within "
                                                f"{CONNECT_TIMEOUT_S} s ({type(exc).__name__})") from None
        with client:
            futures = {}
            for t in tasks:
                # pure=False: equal arguments are still separate configurations; the key names the task on
                # the scheduler's dashboard and keeps a resubmitted sweep from sharing stale results
                fut = client.submit(_call, t.fn, t.args, t.kwargs, key=f"fuseflow-{t.key}-{os.urandom(4).hex()}",
                                    pure=False)
                futures[fut] = t
            results = {}
            for fut in as_completed(list(futures)):
                t = futures[fut]
                try:
                    results[t.key] = fut.result()
                except Exception as exc:  # noqa: BLE001 - re-raised naming the task
                    if isinstance(exc, FuseFlowError):
                        raise
                    raise SweepError(f"task {t.key!r}", f"{type(exc).__name__}: {exc}") from exc
                if on_result:
                    on_result(t.key, results[t.key])
                bar.step(t.key, n=t.weight)
            return {t.key: results[t.key] for t in tasks}
    finally:
        if cluster is not None:
            cluster.close()


def _check_reachable(address):
    """Fail within :data:`CONNECT_TIMEOUT_S`, not after the Dask client's retries or never, when nothing at a
    ``tcp://`` address answers as a Dask scheduler: nothing listening (refused at once), a listener that stays
    silent (the Dask client would wait for its handshake forever) or one that speaks another protocol (its
    bytes read as a Dask frame header can ask for gigabytes)."""
    import asyncio
    import socket
    import time
    m = re.fullmatch(r"tcp://\[?([^\]]+?)\]?:(\d+)", address)
    if not m:
        return
    t0 = time.monotonic()
    try:
        socket.create_connection((m.group(1), int(m.group(2))), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SweepError("--scheduler", f"no Dask scheduler answered at {address} "
                                        f"({exc.strerror or type(exc).__name__})") from None
    left = max(1.0, min(HANDSHAKE_TIMEOUT_S, CONNECT_TIMEOUT_S - (time.monotonic() - t0)))
    try:
        reply = asyncio.run(asyncio.wait_for(_identity(address, left), left))
    except (asyncio.TimeoutError, TimeoutError):
        raise SweepError("--scheduler", f"no Dask scheduler answered at {address} within {left:.0f} s "
                                        f"(something listens there but does not answer)") from None
    except Exception as exc:  # noqa: BLE001 - whatever a non-Dask peer makes the protocol raise
        raise SweepError("--scheduler", f"no Dask scheduler answered at {address} (it does not speak Dask's "
                                        f"protocol: {type(exc).__name__})") from None
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise SweepError("--scheduler", f"{address} is not a Dask scheduler (it answers as {kind})")


async def _identity(address, timeout):
    """The ``identity`` reply of the Dask server at ``address``."""
    from distributed.comm import connect
    comm = await connect(address, timeout=timeout)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _call(fn, args, kwargs):
    return fn(*args, **kwargs)


__all__ = ["Task", "run_sweep", "parse_scheduler", "SweepError", "CONNECT_TIMEOUT_S", "HANDSHAKE_TIMEOUT_S"]
