"""fuseflow.cli.main_guard in-process: the failure classes, bugs still visible, staged outputs, nothing leaks."""

import argparse
import json
import signal

import pytest

from fuseflow.cli import atomic_write, commit_outputs, main_guard, output_dir
from fuseflow.errors import GraphError


def one_line(capsys, *fragments):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for f in fragments:
        assert f in lines[0], lines[0]


@pytest.mark.parametrize("exc, fragments", [
    (GraphError("$.x", "bad\nsecond line"), ["$.x: bad second line"]),
    (RecursionError(), ["nested too deeply"]),
    (MemoryError(), ["memory"]),
    (OverflowError("int too large to convert to float"), ["too large"]),
    (b"\xff".decode, ["not a UTF-8 text file"]),
    (FileNotFoundError(2, "No such file or directory", "nope.json"), ["nope.json: No such file"]),
])
def test_expected_failures_are_one_line(capsys, exc, fragments):
    def func(argv):
        if callable(exc):
            exc()
        raise exc
    assert main_guard(func, []) == 2
    one_line(capsys, *fragments)


def test_bugs_still_raise():
    with pytest.raises(ZeroDivisionError):
        main_guard(lambda argv: 1 / 0, [])


def test_argparse_errors_are_one_line_and_the_parser_is_restored(capsys):
    def func(argv):
        ap = argparse.ArgumentParser(prog="x")
        ap.add_argument("--mode", choices=("a", "b"))
        ap.parse_args(argv)
    original_error = argparse.ArgumentParser.error
    before = signal.getsignal(signal.SIGINT)
    assert main_guard(func, ["--mode", "c"]) == 2
    one_line(capsys, "error: --mode: invalid choice: 'c'")
    assert argparse.ArgumentParser.error is original_error
    assert signal.getsignal(signal.SIGINT) is before


def test_outputs_appear_together_or_not_at_all(tmp_path):
    a, b = tmp_path / "out" / "a.json", tmp_path / "out" / "sub" / "b.json"

    def write_both(fail):
        def func(argv):
            with atomic_write(a) as f:
                json.dump(1, f)
            assert not a.exists()                 # staged, not yet in place
            with atomic_write(b) as f:
                json.dump(2, f)
            if fail:
                raise GraphError("g", "late failure")
        return func
    assert main_guard(write_both(True), []) == 2
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == []          # no staging directory left either
    assert main_guard(write_both(False), []) == 0
    assert json.loads(a.read_text()) == 1 and json.loads(b.read_text()) == 2


def test_a_failed_nested_command_discards_the_outer_outputs(tmp_path):
    target = tmp_path / "r.json"

    def inner(argv):
        with atomic_write(target) as f:
            f.write("{}")
        raise GraphError("g", "inner failure")
    assert main_guard(lambda argv: main_guard(inner, argv), []) == 2
    assert not target.exists()


def test_commit_outputs_keeps_a_consistent_set_on_purpose(tmp_path):
    target = tmp_path / "partial.json"

    def func(argv):
        with atomic_write(target) as f:
            f.write("{}")
        commit_outputs()
        raise KeyboardInterrupt
    assert main_guard(func, []) == 130
    assert target.read_text() == "{}"


def test_output_dir_type_names_the_blocking_file(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(argparse.ArgumentTypeError, match="lies below .*f, which is not a directory"):
        output_dir(str(tmp_path / "f" / "sub"))
