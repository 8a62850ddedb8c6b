"""The compiler's stages, IR and graph, in the order :data:`PIPELINE` lists them.

Every stage is a function in ``fuseflow/compiler/passes/<stage name>.py``, loaded when it first runs:

- an **IR stage** is ``stage(compilation, options) -> report``: it reads and replaces the :class:`Compilation`'s
  ``ir`` (``lower_sugar``, ``lower_blocks``), makes its ``plans`` (``plan``) or its SAMML ``program``
  (``codegen``);
- a **graph stage** (a graph pass) is ``pass(program, options) -> report`` and changes the SAMML program in
  place; :func:`run_passes` runs the graph stages alone on any graph (the kernel builders of
  :mod:`fuseflow.samml.kernels` do), so every graph the project writes gets the same treatment.

``options`` is a :class:`fuseflow.compiler.options.CompileOptions`. ``skip`` names stages not to run (only the
skippable ones); ``dump_after`` keeps the text after a stage in the reports as ``"dump"`` (the IR's text before
``codegen``, graph.json from then on). :func:`render_pipeline` is the table in docs/compiler.md.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable

from ...errors import ProgramError

__all__ = ["PIPELINE", "Stage", "Compilation", "run_pipeline", "run_passes", "stage_names", "render_pipeline"]


@dataclass(frozen=True)
class Stage:
    """One stage of :data:`PIPELINE`: ``function`` in module ``fuseflow.compiler.passes.<name>``."""

    name: str
    kind: str             # "ir" (works on a Compilation) or "graph" (works on the SAMML program)
    skippable: bool
    function: str
    summary: str

    def load(self) -> Callable:
        """The stage's function (its module imported on first use)."""
        return getattr(importlib.import_module(f"{__name__}.{self.name}"), self.function)


#: the stages, in order
PIPELINE = (
    Stage("lower_sugar", "ir", False, "lower_sugar_stage",
          "softmax / layernorm / mean become primitive statements"),
    Stage("lower_blocks", "ir", False, "lower_blocks_stage",
          "a program with blocked operands is compiled at block granularity"),
    Stage("plan", "ir", False, "plan_stage",
          "fusion: kernel plans with their dataflow orders; the parallel schedule resolved to kernels"),
    Stage("codegen", "ir", False, "codegen_stage",
          "fusion tables, then the SAMML program (graph.json)"),
    Stage("locate", "graph", True, "locate_pass",
          "dense operands of intersections are located, not scanned"),
    Stage("drop_empty", "graph", True, "drop_empty_pass",
          "a CSR-style operand's empty rows are dropped after its scanners"),
    Stage("lanes", "graph", False, "lanes_pass",
          "parallelized kernels run the sub-tree below an index on several lanes"),
    Stage("blocks", "graph", False, "blocks_pass",
          "every val stream states the block shape its producer gives"),
    Stage("capacities", "graph", False, "declare_capacities",
          "worst-case or density-based capacities, so hardware builds without data"),
    Stage("widths", "graph", False, "assign_widths",
          "coordinate widths from shapes and capacities"),
    Stage("depths", "graph", False, "assign_depths",
          "channel depths within a budget of FIFO bits"),
)


def stage_names(kind: str | None = None) -> tuple:
    """The names of :data:`PIPELINE`'s stages (of one ``kind`` when given), in order."""
    return tuple(s.name for s in PIPELINE if kind is None or s.kind == kind)


@dataclass
class Compilation:
    """What the stages work on: the Einsum IR, then the kernel plans and fusion tables, then the SAMML program;
    ``options`` (the ``plan`` stage adds the lanes it resolved) and the stages' ``reports``."""

    options: Any
    ir: Any = None
    plans: list | None = None
    tables: dict = field(default_factory=dict)
    program: Any = None
    reports: dict = field(default_factory=dict)


def run_pipeline(c: Compilation, kind: str | None = None) -> dict:
    """Run :data:`PIPELINE`'s stages (of one ``kind`` when given) on ``c``, skipping ``c.options.skip``;
    returns ``c.reports`` ({stage name: report}, and ``"dump"`` after ``c.options.dump_after``)."""
    for stage in PIPELINE:
        if kind is not None and stage.kind != kind:
            continue
        if stage.name in c.options.skip:
            c.reports[stage.name] = {"skipped": True}
        elif stage.kind == "ir":
            c.reports[stage.name] = stage.load()(c, c.options)
        else:
            c.reports[stage.name] = stage.load()(c.program, c.options)
        if stage.name == c.options.dump_after:
            c.reports["dump"] = dump(c)
    if c.program is not None:
        c.program.validate()
    return c.reports


def run_passes(program, options, *, dump_after: str | None = None) -> dict:
    """Run the graph stages of :data:`PIPELINE` on the SAMML ``program`` (in place) with ``options`` (a
    :class:`~fuseflow.compiler.options.CompileOptions`); returns {stage name: report}. ``dump_after`` (a graph
    stage) puts graph.json after it in the reports as ``"dump"``."""
    if dump_after is not None:
        if dump_after not in stage_names("graph"):
            raise ProgramError("--dump-after", f"no graph pass called {dump_after!r} (graph passes: "
                                               f"{', '.join(stage_names('graph'))})")
        options = options.replace(dump_after=dump_after)
    return run_pipeline(Compilation(options, program=program), kind="graph")


def dump(c: Compilation) -> str:
    """The text ``--dump-after`` prints: graph.json once there is a SAMML program, else the kernel plans (after
    ``plan``) and the IR's text."""
    if c.program is not None:
        return json.dumps(c.program.to_json(), indent=1)
    lines = []
    for p in c.plans or ():
        order = getattr(p, "order", None)
        lines.append(f"plan {p.name}" + (f" (order {','.join(order)}): {p.describe()}" if order else
                                         f": transpose {p.src} -> {p.dst}"))
    return "\n".join(lines + [str(c.ir)])


def render_pipeline() -> str:
    """:data:`PIPELINE` as the Markdown table of docs/compiler.md."""
    rows = ["| stage | kind | `--skip` | what it does |", "|---|---|---|---|"]
    for s in PIPELINE:
        rows.append(f"| `{s.name}` | {s.kind} | {'yes' if s.skippable else 'no'} | {s.summary} |")
    return "\n".join(rows)
