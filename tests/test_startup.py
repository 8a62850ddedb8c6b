"""Start-up (issue 42): ``--help`` builds its parser without the heavy libraries, and docs/README.md quotes the
ratios from the committed benchmarks/results/startup.json (the benchmark is the measure; no timed test)."""

import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_startup_numbers_match_the_committed_results():
    with open(os.path.join(ROOT, "benchmarks", "results", "startup.json"), encoding="utf-8") as f:
        res = json.load(f)
    rows = {r["command"]: r for r in res["rows"]}
    with open(os.path.join(ROOT, "docs", "README.md"), encoding="utf-8") as f:
        text = " ".join(f.read().split())
    m = re.search(r"`fuseflow --help` takes ([\d.]+)x and `python -m fuseflow.compiler --help` ([\d.]+)x the wall "
                  r"time of `python -c pass` \(medians of (\d+) interleaved runs", text)
    assert m, "docs/README.md's start-up sentence changed: update this test"
    assert float(m.group(1)) == rows["fuseflow --help"]["wall_ratio"]
    assert float(m.group(2)) == rows["python -m fuseflow.compiler --help"]["wall_ratio"]
    assert int(m.group(3)) == res["repeats"]
    m = re.search(r"`fuseflow compile spmv.ff -o OUT` takes ([\d.]+)x", text)
    assert m and float(m.group(1)) == rows["fuseflow compile spmv.ff -o OUT"]["wall_ratio"]
    for cmd in ("fuseflow --help", "python -m fuseflow.compiler --help"):
        assert rows[cmd]["wall_ratio"] <= res["goal_ratio"], rows[cmd]


HEAVY = ("numpy", "scipy", "networkx", "jsonschema", "amaranth", "torch")
RUN = """
import contextlib, io, runpy, sys
sys.argv = [{entry!r}] + {argv!r}
with contextlib.redirect_stdout(io.StringIO()):
    try:
        runpy.run_module({entry!r}, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        assert exc.code in (0, None), exc.code
print(" ".join(m for m in {heavy!r} if m in sys.modules))
"""


@pytest.mark.parametrize("entry, argv", [
    ("fuseflow", ["--help"]), ("fuseflow.compiler", ["--help"]), ("fuseflow", ["compile", "--help"]),
    ("fuseflow", ["compile", "p.ff", "--help"]), ("fuseflow", ["sim", "--help"]), ("fuseflow", ["samml", "--help"]),
    ("fuseflow", ["hw", "--help"]), ("fuseflow", ["boards", "--help"]), ("fuseflow.sim", ["run", "--help"]),
])
def test_help_imports_no_heavy_library(entry, argv):
    code = RUN.format(entry=entry, argv=argv, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"{entry} {' '.join(argv)} imported {out.stdout.strip()}"


def test_importing_the_packages_is_light_and_names_still_resolve():
    code = ("import sys, fuseflow.compiler, fuseflow.samml, fuseflow.tensors, fuseflow.sim, fuseflow.hw\n"
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr
    import fuseflow.compiler as c
    import fuseflow.samml as s
    import fuseflow.tensors as t
    for mod in (c, s, t):
        for name in mod.__all__:
            assert getattr(mod, name) is not None, (mod.__name__, name)
    from fuseflow.compiler import EinsumProgram, compile_program, compile_text, parse_file  # noqa: F401
    import fuseflow.compiler.lower_sugar as submodule
    assert c.lower_sugar is submodule                    # the submodule (the pass is submodule.lower_sugar)
    with pytest.raises(AttributeError):
        c.no_such_name  # noqa: B018
