"""Run a fuseflow command as the console does, in a forked child under a memory cap and a time limit.

The children fork from one forkserver that has already imported every command's module, so a case costs a
fork and the command's own work (no interpreter start, no numpy import): the corpus stays fast enough for
the default test run while each command still runs in a real process with ``RLIMIT_AS`` set.
``runpy.run_module(entry, run_name="__main__")`` executes the same ``__main__`` code as ``python -m entry``.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

ENTRIES = ("fuseflow", "fuseflow.samml", "fuseflow.sim", "fuseflow.compiler", "fuseflow.hw", "fuseflow.boards")
PRELOAD = ["fuseflow.samml.__main__", "fuseflow.sim.__main__", "fuseflow.compiler.__main__", "fuseflow.hw.__main__",
           "fuseflow.boards.__main__", "fuseflow.__main__", "fuseflow.datasets.__main__",
           "fuseflow.reports.correlation", "fuseflow.hw.elaborate", "fuseflow.boards.platforms", "fuseflow.samml.dot",
           "fuseflow.sim.fifo_sizing"]
MEMORY_CAP = 3 << 30          # bytes of address space per command
TIME_LIMIT = 60               # seconds per command (SIGALRM kills a command that runs away)

_ctx = None


def _context():
    global _ctx
    if _ctx is None:
        _ctx = multiprocessing.get_context("forkserver")
        _ctx.set_forkserver_preload(PRELOAD)
    return _ctx


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def _child(entry, argv, cwd, out_path, err_path, mem, seconds, env):
    import resource
    import runpy
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    signal.alarm(seconds)
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, out_path), (2, err_path)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdout = open(1, "w", closefd=False)
    sys.stderr = open(2, "w", closefd=False)
    sys.argv = [entry] + list(argv)
    sys.modules.pop(entry + ".__main__", None)     # preloaded for its imports; run afresh as __main__
    try:
        runpy.run_module(entry, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:                       # as the interpreter would: a traceback, status 1
        import traceback
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_forked(entry, argv, cwd, *, mem=MEMORY_CAP, seconds=TIME_LIMIT, env=None) -> Result:
    """Run ``python -m entry argv...`` in a forked child of the preloaded forkserver."""
    out_path = os.path.join(cwd, ".case-stdout")
    err_path = os.path.join(cwd, ".case-stderr")
    p = _context().Process(target=_child, args=(entry, [str(a) for a in argv], str(cwd), out_path, err_path, mem,
                                                seconds, dict(env or {})))
    p.start()
    p.join(seconds + 30)
    if p.is_alive():
        p.kill()
        p.join()
    code = p.exitcode
    with open(out_path, errors="replace") as f:
        out = f.read()
    with open(err_path, errors="replace") as f:
        err = f.read()
    os.unlink(out_path)
    os.unlink(err_path)
    if code is not None and code < 0:
        err += f"\n[killed by signal {-code}{' (time limit)' if -code == signal.SIGALRM else ''}]"
    return Result(code, out, err)


def run_process(args, cwd=None, env=None, **kw) -> subprocess.Popen:
    """Start ``python -m args...`` as a real process (for signals)."""
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.Popen([sys.executable, "-m", *map(str, args)], cwd=cwd, env=e, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def snapshot(root):
    """Every file and directory below ``root`` with its size and mtime (to prove a command wrote nothing)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            if name in (".case-stdout", ".case-stderr"):
                continue
            st = os.lstat(p)
            out[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return out


def assert_one_line_error(res: Result, *fragments, status=2):
    lines = res.stderr.strip().splitlines()
    assert res.returncode == status, f"exit {res.returncode}, stderr:\n{res.stderr}"
    assert "Traceback" not in res.stderr, res.stderr
    assert len(lines) == 1, f"{len(lines)} stderr lines:\n{res.stderr}"
    assert lines[0].startswith("error: "), res.stderr
    for f in fragments:
        assert f in lines[0], f"{f!r} not in {lines[0]!r}"
