"""Generic code asks an op's spec, not its name (issue 38): the comparisons against op names outside the registry,
each op's own files and the passes may only go down.

A comparison (``op == "locate"``, ``node.op in ("alu", "reduce")``: any :class:`ast.Compare`) counts when one of
its string constants, or an element of a tuple, list or set of them, names a registry op. It does not count when
every other operand is evidently a level format or capability (``fmt == "array"`` is a Matrix Market format,
``"locate" in LEVEL_CAPABILITIES[f]`` a level's capability): its name says so. Creating a node that names its op
is not a comparison. Exempt: ``fuseflow/samml/registry.py``, ``fuseflow/sim/ops/``, ``fuseflow/hw/ops/`` and
``fuseflow/compiler/passes/`` (pattern-matching passes name the ops they match).

``python tests/test_op_names.py`` prints the comparisons.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuseflow.samml.registry import OPS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fuseflow"
EXEMPT_FILES = {"fuseflow/samml/registry.py"}
EXEMPT_DIRS = ("fuseflow/sim/ops/", "fuseflow/hw/ops/", "fuseflow/compiler/passes/")
#: an operand whose name holds one of these is a level format or capability, not an op
NOT_OPS = ("fmt", "format", "capabilit")

#: the comparisons left (issue 38 asks for at most 20): lower it when you remove one, never raise it
MAX_COMPARISONS = 3


def _strings(node) -> list:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _name(node) -> str:
    """The identifier an operand ends in: ``x`` of ``a.b.x``, ``x[i]`` and ``x(...)``; "" for anything else."""
    while isinstance(node, (ast.Subscript, ast.Call)):
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def comparisons(source: str, ops) -> list:
    """``[(line, names, text)]``: the comparisons of ``source`` against names in ``ops``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left] + node.comparators
        names = sorted({s for c in operands for s in _strings(c) if s in ops})
        others = [c for c in operands if not _strings(c)]
        if not names or (others and all(any(w in _name(c).lower() for w in NOT_OPS) for c in others)):
            continue
        out.append((node.lineno, names, ast.unparse(node)))
    return sorted(out)


def op_name_comparisons(root: Path = ROOT) -> list:
    """``[(path, line, names, text)]`` over ``root/fuseflow/``, outside the exempt files."""
    out = []
    for path in sorted((root / "fuseflow").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel in EXEMPT_FILES or rel.startswith(EXEMPT_DIRS):
            continue
        out += [(rel, *hit) for hit in comparisons(path.read_text(), set(OPS))]
    return out


def _report(hits) -> str:
    return "\n".join(f"{path}:{line}: {text}" for path, line, _, text in hits)


def test_op_name_comparisons_only_go_down():
    hits = op_name_comparisons()
    assert len(hits) <= MAX_COMPARISONS, (
        f"{len(hits)} comparisons against op names (at most {MAX_COMPARISONS}): ask the op's spec "
        f"(fuseflow/samml/registry.py) instead\n{_report(hits)}")
    # the bound follows the count down, so a removed comparison cannot be spent again
    assert len(hits) == MAX_COMPARISONS, f"{len(hits)} comparisons: lower MAX_COMPARISONS\n{_report(hits)}"


def test_the_count_sees_comparisons_not_creations_or_formats():
    ops = {"alu", "locate", "array", "union", "spacc"}
    src = '''
if node.op == "alu": pass
if op in ("spacc", "other"): pass
if "union" != k.nodes[n].op: pass
x = Cell("union", {}, "u")
if fmt == "array": pass
if "locate" in LEVEL_CAPABILITIES[level_format]: pass
if node.op == "neither": pass
'''
    assert [(line, names) for line, names, _ in comparisons(src, ops)] == [(2, ["alu"]), (3, ["spacc"]),
                                                                           (4, ["union"])]


def test_exempt_places_are_not_counted(tmp_path):
    for rel in ("fuseflow/samml/registry.py", "fuseflow/sim/ops/x.py", "fuseflow/hw/ops/x.py",
                "fuseflow/compiler/passes/x.py", "fuseflow/samml/counted.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text('if op == "spacc":\n    pass\n')
    assert [(path, line) for path, line, _, _ in op_name_comparisons(tmp_path)] == [("fuseflow/samml/counted.py", 1)]


if __name__ == "__main__":
    found = op_name_comparisons()
    print(_report(found))
    print(f"{len(found)} comparisons against op names (bound {MAX_COMPARISONS})")
