"""Every command that README.md and the docs guides show runs as written (issue 44).

A command is a line of an ``sh`` block that starts with ``fuseflow`` or ``python`` (``\\``-continued lines joined).
Each page's commands run in order in a scratch directory that holds only the repository's ``fuseflow/`` and
``examples/`` (what a fresh clone has; the data they use is made by earlier commands of the same page, e.g.
``fuseflow samml random ... -o data.npz``). The ``fuseflow`` commands run through the bad-input corpus's forked
harness (the same ``__main__`` code as the console, without an interpreter start per command), ``python`` lines as
processes.

Commands that need Verilator or the FPGA tools, or take minutes (:data:`SLOW`), run for real only in the slow
test; the default test asks for their ``--help``. Lines of other blocks are synopses: each must show that it is
one (an option in brackets, alternatives with ``|``, or a placeholder in capitals), so that no runnable example
hides outside the tested blocks. ``make`` lines are targets of the Makefile (``make test`` would run this test).
"""

import os
import re
import shlex
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "badinput"))
from harness import run_forked  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: README.md and the guides (docs/README.md lists them; compiler.md and hardware.md are design notes)
PAGES = ["README.md"] + [f"docs/{p}.md" for p in ("pytorch", "language", "simulator", "datasets", "boards",
                                                  "correlation", "evaluation", "errors", "tensors", "numbers",
                                                  "tiling")]

#: Verilator, Yosys/nextpnr, or minutes of elaboration: run by the slow test only
SLOW = ("hw sim", "hw correlate", "hw build", "fuseflow build", "fuseflow rtl-sim", "fuseflow correlate",
        "boards build", "--rtl-sim")

FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SYNOPSIS = re.compile(r"\[|\||\.\.\.|\b[A-Z][A-Z_]{2,}\b")


def _read(page):
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


def _lines(body):
    """The block's lines with ``\\`` continuations joined and comments dropped."""
    out, cur = [], ""
    for raw in body.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            cur += line[:-1] + " "
            continue
        out.append((cur + line).strip())
        cur = ""
    return [x for x in out if x]


def page_commands(page):
    """(commands of the page's sh blocks, lines of its other blocks that look like commands)."""
    cmds, others = [], []
    for lang, body in FENCE.findall(_read(page)):
        for line in _lines(body):
            if lang == "sh" and line.startswith(("fuseflow ", "python ", "make ")):
                cmds.append(line)
            elif lang != "sh" and re.match(r"^(\$ )?(fuseflow |python -m fuseflow)", line):
                others.append(line)
    return cmds, others


def _env():
    return {"PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _scratch(tmp_path):
    for name in ("fuseflow", "examples"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    return tmp_path


def _run(cmd, cwd, slow_too):
    args = shlex.split(cmd)
    if args[0] == "make":
        return None                                   # Makefile targets: not run here (make test runs this test)
    if args[0] == "python":
        proc = subprocess.run([sys.executable, *args[1:]], cwd=cwd, env=dict(os.environ, **_env()),
                              capture_output=True, text=True, timeout=600)
        return proc.returncode, proc.stdout, proc.stderr
    if not slow_too and any(marker in cmd for marker in SLOW):
        sub = [a for a in args[1:3] if not a.startswith("-") and "." not in a and "/" not in a]
        args = ["fuseflow"] + sub + ["--help"]
    res = run_forked("fuseflow", args[1:], cwd, mem=1 << 40, seconds=3600 if slow_too else 300, env=_env())
    return res.returncode, res.stdout, res.stderr


def _run_page(page, tmp_path, slow_too):
    cwd = _scratch(tmp_path)
    cmds, _ = page_commands(page)
    for cmd in cmds:
        out = _run(cmd, cwd, slow_too)
        if out is None:
            continue
        code, stdout, stderr = out
        assert code == 0, f"{page}: {cmd}\nexit {code}\n{stdout[-2000:]}\n{stderr[-2000:]}"
    return cwd


def test_readme_shows_commands():
    cmds, _ = page_commands("README.md")
    assert len(cmds) >= 8
    assert any(c.startswith("fuseflow samml random") for c in cmds), "README makes its sample data"
    made = next(i for i, c in enumerate(cmds) if c.startswith("fuseflow samml random"))
    assert not any("data.npz" in c for c in cmds[:made]), "a README command uses data.npz before it is made"


@pytest.mark.parametrize("page", PAGES)
def test_other_blocks_hold_only_synopses(page):
    _, others = page_commands(page)
    loose = [line for line in others if not SYNOPSIS.search(line)]
    assert not loose, f"{page}: runnable-looking commands outside sh blocks (put them in an sh block, where " \
                      f"tests run them, or write them as a synopsis): {loose}"


def test_make_lines_are_makefile_targets():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as f:
        targets = set(re.findall(r"^([\w-]+):", f.read(), re.MULTILINE))
    for page in PAGES:
        for cmd in page_commands(page)[0]:
            if cmd.startswith("make "):
                assert cmd.split()[1] in targets, f"{page}: {cmd}"


@pytest.mark.parametrize("page", [p for p in PAGES if page_commands(p)[0]])
def test_commands_run(page, tmp_path):
    cwd = _run_page(page, tmp_path, slow_too=False)
    if page == "README.md":
        # what the first commands made, as the later ones (and a new user) rely on
        from fuseflow.samml import load
        from fuseflow.tensors.io import load_npz
        prog = load(cwd / "out" / "gcn2" / "graph.json")
        data = load_npz(cwd / "data.npz")
        assert sorted(data) == sorted(t.name for t in prog.inputs)
        assert (cwd / "out" / "mynet" / "graph.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "docs/pytorch.md"])
def test_commands_run_with_the_tools(page, tmp_path):
    """The same pages with Verilator, the FPGA tools and the long builds for real."""
    _run_page(page, tmp_path, slow_too=True)
