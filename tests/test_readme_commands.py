"""Every ``fuseflow`` command that README.md shows runs: the ones that need no data of yours and no FPGA or
Verilator tools run for real, in a scratch directory (as from the repository root); the others must at least be
commands whose ``--help`` answers."""

import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: commands that need your data (data.npz, model.py), Verilator or the FPGA tools: --help only
NEEDS_MORE = ("data.npz", "model.py", "hw sim", "hw correlate", "boards build")


def readme_commands():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    cmds = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.MULTILINE | re.DOTALL):
        if lang != "sh":
            continue
        for line in body.splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("fuseflow "):
                cmds.append(line)
    return cmds


def test_readme_shows_commands():
    assert len(readme_commands()) >= 5


def _run(args, cwd):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fuseflow", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_readme_commands_run(tmp_path):
    for name in ("fuseflow", "examples"):                     # the repository-relative paths the README uses
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    for cmd in readme_commands():
        args = shlex.split(cmd)[1:]
        if any(marker in cmd for marker in NEEDS_MORE):
            sub = [a for a in args[:2] if not a.startswith("-") and "." not in a and "/" not in a]
            proc = _run(sub + ["--help"], tmp_path)
        else:
            proc = _run(args, tmp_path)
        assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
