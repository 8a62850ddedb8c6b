"""Shared command-line plumbing: one-line errors, exit status 2, atomic output files."""

import contextlib
import os
import sys
import tempfile

from .errors import FuseFlowError


def main_guard(func, argv=None):
    """Run ``func(argv)``; turn :class:`FuseFlowError` and bad files into ``error: what: why``, exit 2."""
    try:
        code = func(argv)
    except FuseFlowError as exc:
        print(f"error: {exc.what}: {exc.why}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted: stopped by user", file=sys.stderr)
        return 130
    return code or 0


@contextlib.contextmanager
def atomic_write(path, mode="w"):
    """Write to a temporary file beside ``path`` and rename it into place only on success."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, mode) as f:
            yield f
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)        # mkstemp makes 0600; give the file ordinary permissions
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
