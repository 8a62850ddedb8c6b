"""The Verilator build cache: finished builds keep only what a run needs, and the least recently used go first."""

import fcntl
import os

from fuseflow.hw import verilator


def _fake_build(root, name, mb, used_at):
    d = root / name
    d.mkdir()
    (d / name.split("-")[0]).write_bytes(b"\0" * int(mb * 1e6))
    stamp = d / "fuseflow-build.ok"
    stamp.write_text("x")
    os.utime(stamp, (used_at, used_at))
    return d


def test_prune_drops_least_recently_used_first(tmp_path):
    old = _fake_build(tmp_path, "a-1", 1.0, 1000)
    mid = _fake_build(tmp_path, "b-2", 1.0, 2000)
    new = _fake_build(tmp_path, "c-3", 1.0, 3000)
    removed = verilator.prune_cache(tmp_path, max_mb=2.5)
    assert removed == [old]
    assert not old.exists() and mid.exists() and new.exists()
    assert verilator.prune_cache(tmp_path, max_mb=2.5) == []


def test_prune_keeps_the_current_build_and_unfinished_ones(tmp_path):
    current = _fake_build(tmp_path, "a-1", 1.0, 1000)
    unfinished = tmp_path / "b-2"
    unfinished.mkdir()
    (unfinished / "b").write_bytes(b"\0" * 1_000_000)
    other = _fake_build(tmp_path, "c-3", 1.0, 2000)
    removed = verilator.prune_cache(tmp_path, keep=current, max_mb=0.5)
    assert removed == [other]
    assert current.exists() and unfinished.exists()


def test_prune_skips_a_build_whose_lock_is_held(tmp_path):
    busy = _fake_build(tmp_path, "a-1", 1.0, 1000)
    idle = _fake_build(tmp_path, "b-2", 1.0, 2000)
    with open(tmp_path / ".a-1.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert verilator.prune_cache(tmp_path, max_mb=1.5) == [idle]
    assert busy.exists()


def test_prune_reads_its_bound_from_the_environment(tmp_path, monkeypatch):
    _fake_build(tmp_path, "a-1", 1.0, 1000)
    monkeypatch.setenv("FUSEFLOW_HW_CACHE_MAX_MB", "5")
    assert verilator.prune_cache(tmp_path) == []
    monkeypatch.setenv("FUSEFLOW_HW_CACHE_MAX_MB", "0.5")
    assert len(verilator.prune_cache(tmp_path)) == 1


# a real build keeps only its executable, log and stamp: tests/hw/test_verilator.py
