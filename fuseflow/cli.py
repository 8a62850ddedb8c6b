"""Shared command-line plumbing: one error boundary, atomic all-or-nothing outputs, clean signals.

Every entry point runs its command through :func:`main_guard`, which

* turns every expected failure class into one line ``error: what: why`` and exit status 2: a
  :class:`~fuseflow.errors.FuseFlowError`, an argparse usage error (no usage block), a file that is not
  text (``UnicodeDecodeError``), an OS error on an input or output path, pathological nesting
  (``RecursionError``), exhausted memory (``MemoryError``) and numbers too large to convert
  (``OverflowError``);
* ends the command on SIGINT / SIGTERM with ``error: interrupted: ...`` and exit status 130 / 143;
* makes the command's outputs all-or-nothing: every :func:`atomic_write` inside the guard is staged beside
  its target and the whole set is renamed into place only when the command returns (under a lock on each
  target directory, so concurrent runs on the same target end with one complete run's files). A failure or a
  signal leaves nothing behind.

Unexpected exceptions still show a traceback: they are bugs.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import signal
import sys
import threading
import time

from .errors import FuseFlowError

#: exit status for bad input; SIGINT and SIGTERM give 128 + the signal number (130, 143)
EXIT_BAD_INPUT = 2
_SIGNAL_MESSAGES = {signal.SIGINT: "stopped by user (SIGINT)", signal.SIGTERM: "terminated (SIGTERM)"}


class Interrupted(KeyboardInterrupt):
    """Raised by the signal handlers inside a guarded command (a KeyboardInterrupt, so code that cleans up on
    Ctrl-C also cleans up on SIGTERM)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


class UsageError(FuseFlowError):
    """A bad command line (argparse's errors, reworded to one line)."""
    default_what = "arguments"


# ---- signals --------------------------------------------------------------------------------------------------

_guard_depth = 0            # > 0 while a guarded command runs (signals raise Interrupted)
_deferred_signal = None     # set while outputs are being committed: the signal is acted on afterwards
_committing = False


def _on_signal(signum, frame):
    global _deferred_signal
    if _committing:
        _deferred_signal = signum           # finish renaming the staged outputs into place first
        return
    if _guard_depth == 0:
        # before (or after) a command runs, e.g. while its modules import: nothing can be half-written
        _print_error("interrupted", _SIGNAL_MESSAGES.get(signum, f"signal {signum}"))
        os._exit(128 + signum)
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """Make SIGINT and SIGTERM end a command with its one-line message (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, _on_signal)


def started_as_command() -> bool:
    """True when this process was started as a fuseflow command (``python -m fuseflow...`` or the ``fuseflow``
    console script), so that the package can take over SIGINT/SIGTERM before its heavy imports."""
    argv = getattr(sys, "orig_argv", None) or []
    for i, a in enumerate(argv[:-1]):
        if a == "-m":
            return argv[i + 1] == "fuseflow" or argv[i + 1].startswith("fuseflow.")
    return os.path.basename(sys.argv[0] if sys.argv else "") == "fuseflow"


# ---- the error boundary ------------------------------------------------------------------------------------------

def _print_error(what, why):
    why = " ".join(str(why).split())           # one line, whatever the message held
    try:
        sys.stderr.write(f"error: {what}: {why}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _usage_error(self, message):
    """argparse's ``error`` as one line: ``argument --mode: invalid choice ...`` -> ``--mode: invalid choice``."""
    if message.startswith("argument "):
        what, _, why = message[len("argument "):].partition(": ")
        raise UsageError(what, why or message)
    raise UsageError("arguments", message)


def _os_error_line(exc: OSError):
    what = exc.filename if exc.filename is not None else "file"
    why = exc.strerror or str(exc)
    if exc.filename2 is not None:
        why += f" ({exc.filename2})"
    return what, why


def main_guard(func, argv=None):
    """Run ``func(argv)`` as a command: the one error boundary of every entry point (see the module docstring).

    Returns the exit status: ``func``'s (0 when it returns None), 2 for bad input, 130 / 143 on SIGINT /
    SIGTERM."""
    global _guard_depth
    outer = _guard_depth == 0
    old_handlers = {}
    old_error = argparse.ArgumentParser.error
    if outer and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            old_handlers[sig] = signal.getsignal(sig)
        install_signal_handlers()
    argparse.ArgumentParser.error = _usage_error      # every parser, also ones other modules make
    tx = OutputTransaction() if outer else None
    _guard_depth += 1
    try:
        with _activate(tx):
            code = func(argv)
            if tx is not None:
                tx.commit()
    except BaseException as exc:
        if _active_tx is not None:
            _active_tx.discard()          # a failed command (also a nested one) leaves nothing behind
        code = _error_status(exc)
        if code is None:
            raise
        return code
    finally:
        _guard_depth -= 1
        argparse.ArgumentParser.error = old_error
        for sig, handler in old_handlers.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, handler)
    return code or 0


def _error_status(exc):
    """Print the one-line error for an expected failure class and return its exit status; None for a bug."""
    try:
        raise exc
    except FuseFlowError as exc:
        _print_error(exc.what, exc.why)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        _print_error("interrupted", _SIGNAL_MESSAGES.get(signum, f"signal {signum}"))
        return 128 + signum
    except UnicodeDecodeError as exc:
        _print_error(_current_file(exc) or "input", f"not a UTF-8 text file ({exc.reason} at byte {exc.start})")
        return EXIT_BAD_INPUT
    except OSError as exc:
        _print_error(*_os_error_line(exc))
        return EXIT_BAD_INPUT
    except RecursionError:
        _print_error("input", "nested too deeply (recursion limit)")
        return EXIT_BAD_INPUT
    except MemoryError:
        _print_error("memory", "the input needs more memory than is available (see docs/errors.md, Limits)")
        return EXIT_BAD_INPUT
    except OverflowError as exc:
        _print_error("number", f"too large ({exc})")
        return EXIT_BAD_INPUT
    except BaseException:
        return None


def _current_file(exc):
    return getattr(exc, "fuseflow_path", None)


def read_text(path, what=None) -> str:
    """Read a UTF-8 text file; a file that is not text is a one-line error naming it."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FuseFlowError(what or path, f"not a UTF-8 text file ({exc.reason} at byte {exc.start})") from None


# ---- all-or-nothing outputs ----------------------------------------------------------------------------------

_active_tx = None


@contextlib.contextmanager
def _activate(tx):
    global _active_tx
    prev = _active_tx
    if tx is not None:
        _active_tx = tx
    try:
        yield
    finally:
        if tx is not None:
            tx.discard()
            _active_tx = prev


def _first_existing(path):
    """The nearest existing ancestor of ``path`` (``path`` itself when it exists)."""
    d = os.path.abspath(path)
    while not os.path.lexists(d):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return d


def check_output_path(path, what=None) -> str:
    """Raise a one-line error naming ``path`` when a file cannot be written there: it is a directory, one of
    its ancestors is not a directory, or the nearest existing directory is not writable. Returns the path."""
    path = os.fspath(path)
    what = what or path
    if path == "" or path.endswith(os.sep):
        raise FuseFlowError(what, f"{path!r} is not a file name")
    if os.path.isdir(path):
        raise FuseFlowError(what, f"{path} is a directory, not a file")
    _check_parent(os.path.dirname(os.path.abspath(path)), path, what)
    return path


def check_output_dir(directory, what=None) -> str:
    """Raise a one-line error naming ``directory`` when files cannot be written into it: it, or an ancestor, is
    not a directory, or the nearest existing directory is not writable. Returns the directory."""
    directory = os.fspath(directory)
    what = what or directory
    if directory == "":
        raise FuseFlowError(what, "'' is not a directory name")
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise FuseFlowError(what, f"{directory} exists and is not a directory")
    _check_parent(directory, directory, what)
    return directory


def _check_parent(directory, user_path, what):
    d = _first_existing(directory)
    if not os.path.isdir(d):
        raise FuseFlowError(what, f"{user_path} lies below {d}, which is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise FuseFlowError(what, f"cannot write {user_path}: {d} is not writable (permission denied)")
    _probe_directory(d, user_path, what)


def _probe_directory(d, user_path, what):
    """Create and remove an empty directory in ``d``: ``os.access`` says yes to root and to pseudo file systems
    (``/proc``, ``/sys``) where nothing can be created. ``d``'s modification time is put back afterwards."""
    import tempfile
    try:
        st = os.stat(d)
        probe = tempfile.mkdtemp(dir=d, prefix=".fuseflow-probe-")
    except OSError as exc:
        raise FuseFlowError(what, f"cannot write {user_path}: nothing can be created in {d} "
                                  f"({exc.strerror or exc})") from None
    with contextlib.suppress(OSError):
        os.rmdir(probe)
        os.utime(d, ns=(st.st_atime_ns, st.st_mtime_ns))


def _hold():
    """Testing aid: ``FUSEFLOW_HOLD_OUTPUTS=SECONDS`` pauses after each staged file (signals and concurrent runs
    can then be tested while a command holds half of its outputs)."""
    delay = os.environ.get("FUSEFLOW_HOLD_OUTPUTS")
    if delay:
        with contextlib.suppress(ValueError):
            time.sleep(float(delay))


class OutputTransaction:
    """The files a command writes, staged beside their targets and renamed into place together by
    :meth:`commit` (or all removed by :meth:`discard`).

    A staged file lives in the target's directory when it exists, else in a staging directory
    (``.fuseflow-stage-*``) in the nearest existing ancestor, so each rename stays on one file system.
    The commit holds an ``flock`` on every target directory (taken in sorted order),
    so two commands writing to the same place end with one complete set of files."""

    def __init__(self):
        self.staged = []            # (temporary path, target path, permission bits)
        self.stage_dirs = []

    def stage(self, path):
        import tempfile
        directory = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(directory):
            base = directory
        else:
            base = directory
            while not os.path.isdir(base):
                base = os.path.dirname(base)
            base = tempfile.mkdtemp(dir=base, prefix=".fuseflow-stage-")
            self.stage_dirs.append(base)
        fd, tmp = tempfile.mkstemp(dir=base, prefix=".tmp-", suffix="-" + os.path.basename(path))
        return fd, tmp

    def add(self, tmp, path, perms):
        target = os.path.abspath(path)
        for old in [s for s in self.staged if s[1] == target]:      # written twice: the last one counts
            self.staged.remove(old)
            with contextlib.suppress(OSError):
                os.unlink(old[0])
        self.staged.append((tmp, target, perms))
        _hold()

    def _check_targets(self):
        """Refuse (before anything is renamed or created) a set of targets that cannot all be put in place: one
        target lies below another (a file cannot also be a directory), or a target is now a directory."""
        targets = {target for _, target, _ in self.staged}
        for target in sorted(targets):
            if os.path.isdir(target):
                raise FuseFlowError(target, "is a directory, not a file")
            d = os.path.dirname(target)
            while d != os.path.dirname(d):
                if d in targets:
                    raise FuseFlowError(target, f"lies inside {d}, which this command also writes as a file")
                d = os.path.dirname(d)

    def commit(self):
        global _committing, _deferred_signal
        if not self.staged:
            return
        _committing = True
        made = []                   # directories created here: removed again when the commit fails
        try:
            self._check_targets()
            dirs = sorted({os.path.dirname(target) for _, target, _ in self.staged})
            with contextlib.ExitStack() as locks:
                for d in dirs:
                    missing = []
                    p = d
                    while not os.path.lexists(p) and p != os.path.dirname(p):
                        missing.append(p)
                        p = os.path.dirname(p)
                    os.makedirs(d, exist_ok=True)
                    made.extend(missing)
                    locks.enter_context(_dir_lock(d))
                for tmp, target, perms in self.staged:
                    os.chmod(tmp, perms)
                    os.replace(tmp, target)
            self.staged = []
            made = []
        finally:
            for d in sorted(made, key=len, reverse=True):
                with contextlib.suppress(OSError):
                    os.rmdir(d)
            _committing = False
            self.discard()
            if _deferred_signal is not None:
                signum, _deferred_signal = _deferred_signal, None
                raise Interrupted(signum)

    def commit_now(self):
        """Rename what is staged so far into place (a command that keeps a consistent set on purpose, e.g. the
        partial correlation report of an interrupted run)."""
        self.commit()

    def discard(self):
        for tmp, _, _ in self.staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self.staged = []
        if self.stage_dirs:
            import shutil                   # already loaded: staging used tempfile, which imports it
            for d in self.stage_dirs:
                shutil.rmtree(d, ignore_errors=True)
        self.stage_dirs = []


@contextlib.contextmanager
def _dir_lock(directory):
    import fcntl
    fd = os.open(directory, os.O_RDONLY)          # flock on the directory itself: no lock file is left behind
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def commit_outputs() -> None:
    """Rename the outputs staged so far by the running command into place now (see
    :meth:`OutputTransaction.commit_now`); a no-op outside a guarded command."""
    if _active_tx is not None:
        _active_tx.commit_now()


def _default_perms():
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(path, mode="w", perms=None):
    """Write ``path`` completely or not at all.

    Outside a guarded command: a temporary file beside ``path``, renamed into place on success. Inside one
    (:func:`main_guard`): staged, and renamed into place with the command's other outputs when the command
    returns. Errors name ``path`` (never the temporary file). ``perms``: permission bits (default: 0666 less the
    umask)."""
    import tempfile
    path = os.fspath(path)
    check_output_path(path)
    perms = _default_perms() if perms is None else perms
    tx = _active_tx
    try:
        if tx is not None:
            fd, tmp = tx.stage(path)
        else:
            directory = os.path.dirname(os.path.abspath(path))
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix="-" + os.path.basename(path))
    except OSError as exc:
        raise FuseFlowError(path, f"cannot write: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        if tx is not None:
            tx.add(tmp, path, perms)
        else:
            os.chmod(tmp, perms)
            os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, FileNotFoundError) and exc.errno in (
                errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM):
            raise FuseFlowError(path, f"cannot write: {exc.strerror}") from None
        raise


def adopt_file(src, path, perms=None) -> None:
    """Move a finished file (e.g. a simulator's waveform) to ``path`` as one of the command's outputs."""
    import shutil
    with atomic_write(path, "wb", perms) as f, open(src, "rb") as g:
        shutil.copyfileobj(g, f)


# ---- help text -----------------------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:func|mod|class|meth|data|attr|exc):`(~?)([^`]+)`")


def describe(doc: str) -> str:
    """A module docstring as ``--help`` text: reST markup (````code````, ``:func:`~a.b.c```) as plain text, and
    the ``fuseflow`` command instead of ``python -m fuseflow.<part>``."""
    text = _ROLE.sub(lambda m: m.group(2).rsplit(".", 1)[-1] if m.group(1) else m.group(2), doc)
    text = text.replace("``", "")
    text = re.sub(r"python -m fuseflow\.compiler( compile)?\b", "fuseflow compile", text)
    text = re.sub(r"python -m fuseflow\.(\w+)", r"fuseflow \1", text)
    return text.strip("\n")


# ---- argparse types: bad values are caught while parsing, before any work ------------------------------------

def _int_at_least(text: str, least: int, why: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < least:
        raise argparse.ArgumentTypeError(f"{why}, got {v}")
    return v


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1, "must be at least 1")


def nonnegative_int(text: str) -> int:
    """argparse type: an integer >= 0 (seeds)."""
    return _int_at_least(text, 0, "must not be negative")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (v > 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return v


def check_separate_outputs(files=None, dirs=None) -> None:
    """Refuse, before any work, output paths of one command that would collide: two file outputs (``files``:
    ``{"--json": path, ...}``; ``None`` values are ignored) that are the same file, a file output that is also a
    directory output (``dirs``), or any output that lies below a file output (that path cannot be both a file
    and a directory)."""
    def norm(p):
        return os.path.realpath(os.path.abspath(os.fspath(p)))
    fs = [(flag, p, norm(p)) for flag, p in (files or {}).items() if p]
    ds = [(flag, p, norm(p)) for flag, p in (dirs or {}).items() if p]
    for i, (flag, p, full) in enumerate(fs):
        for flag2, p2, full2 in fs[i + 1:] + ds:
            if full == full2:
                kind = "file" if (flag2, p2, full2) in fs else "directory"
                raise FuseFlowError(flag2, f"{p2} is the same path as {flag} {p} (give the {kind} another name)")
        for flag2, p2, full2 in fs + ds:
            if full2.startswith(full + os.sep):
                raise FuseFlowError(flag2, f"{p2} lies inside {p}, which {flag} writes as a file")


def output_file(text: str) -> str:
    """argparse type: a file a command will write (checked before any work: not a directory, not below a
    regular file)."""
    try:
        return check_output_path(text)
    except FuseFlowError as exc:
        raise argparse.ArgumentTypeError(exc.why) from None


def output_dir(text: str) -> str:
    """argparse type: a directory a command will write files into."""
    try:
        return check_output_dir(text)
    except FuseFlowError as exc:
        raise argparse.ArgumentTypeError(exc.why) from None
