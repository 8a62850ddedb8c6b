"""No function in the hardware modules that issue 38 split (spacc, the kernel top) is longer than 200 lines."""

import ast
import os

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FILES = ["fuseflow/hw/ops/spacc.py", "fuseflow/hw/top.py"]
MAX_LINES = 200


def long_functions(path, limit=MAX_LINES):
    """``[(name, first line, length)]`` of the functions in ``path`` longer than ``limit`` lines (decorators
    not counted)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    return [(n.name, n.lineno, n.end_lineno - n.lineno + 1) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_long_functions_finds_a_long_one(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def short():\n    pass\n\n\ndef long():\n" + "    x = 1\n" * 200)
    assert long_functions(p) == [("long", 5, 201)]


@pytest.mark.parametrize("rel", FILES)
def test_no_function_longer_than_200_lines(rel):
    assert long_functions(os.path.join(ROOT, rel)) == []
