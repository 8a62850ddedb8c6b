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


@pytest.mark.parametrize("order", ["dir-first", "file-first"])
def test_overlapping_staged_outputs_leave_nothing(tmp_path, capsys, order):
    """One output inside another that is written as a file (issue 42: ``--json OUT/report.json --outputs OUT``
    left OUT/report.json behind): the commit refuses the set before it renames or creates anything."""
    inner, outer = tmp_path / "OUT" / "report.json", tmp_path / "OUT"

    def func(argv):
        for path in ([inner, outer] if order == "dir-first" else [outer, inner]):
            with atomic_write(path) as f:
                f.write("{}")
    assert main_guard(func, []) == 2
    one_line(capsys, "report.json", "lies inside", "also writes as a file")
    assert [p.name for p in tmp_path.iterdir()] == []


def test_check_separate_outputs():
    from fuseflow.cli import check_separate_outputs
    from fuseflow.errors import FuseFlowError
    check_separate_outputs({"--json": "r.json", "--outputs": "o.npz", "--vcd": None})
    check_separate_outputs({"--json": "out/r.json"}, {"-o": "out"})        # a file inside an output directory
    for files, dirs, match in [({"--json": "r.json", "--outputs": "./r.json"}, None, "--outputs: ./r.json is the same path as --json r.json"),
                               ({"--json": "OUT/r.json", "--outputs": "OUT"}, None, "--json: OUT/r.json lies inside"),
                               ({"--json": "out"}, {"-o": "out"}, "-o: out is the same path as --json"),
                               ({"--json": "out"}, {"-o": "out/sub"}, "-o: out/sub lies inside out")]:
        with pytest.raises(FuseFlowError, match=match):
            check_separate_outputs(files, dirs)
