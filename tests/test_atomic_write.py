"""Atomic output files: complete or absent, with ordinary permissions."""

import os
import stat

import pytest

from fuseflow.cli import atomic_write


def test_written_file_has_umask_permissions(tmp_path):
    path = tmp_path / "out.txt"
    with atomic_write(path) as f:
        f.write("hello")
    umask = os.umask(0)
    os.umask(umask)
    assert path.read_text() == "hello"
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_failure_leaves_nothing(tmp_path):
    path = tmp_path / "out.txt"
    with pytest.raises(RuntimeError):
        with atomic_write(path) as f:
            f.write("partial")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
