"""The compiler's options: one typed, validated :class:`CompileOptions`.

Every option of :func:`fuseflow.compiler.compile_program`, of the stages of
:data:`fuseflow.compiler.passes.PIPELINE` and of ``fuseflow compile`` is a field here, checked once when the
options are made (a bad value is a one-line :class:`~fuseflow.errors.ProgramError`). The stages read the fields
(``pass(program, options: CompileOptions) -> report``).

>>> from fuseflow.compiler.options import CompileOptions
>>> o = CompileOptions(fuse="full", order="i,k,j", skip="locate")
>>> o.order, o.skip, o.locate
(('i', 'k', 'j'), ('locate',), False)
>>> o.replace(fifo_depth=4).fifo_depth
4
>>> CompileOptions.from_kwargs(locate=False, passes={"budget_bits": 0}).skip
('locate',)
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..errors import FuseFlowError, ProgramError
from ..samml.offchip import parse_contract
from ..samml.registry import DMA
from .defaults import SCHEDULES, TILE_FUSION
from .lanes import parse_parallel
from .passes import PIPELINE, stage_names
from .tiling import DEFAULT_BUFFERS, parse_tiles

__all__ = ["CompileOptions", "parse_order"]

ITERATIONS = ("factored", "global")


def parse_order(order):
    """``"i,k,j"`` / ``"i->k->j"`` / a sequence -> a tuple of index names (None stays None). A list of
    ``"KERNEL=i,k,j"`` strings (the command line's repeated ``--order``) -> {kernel: order}."""
    if order is None:
        return None
    if isinstance(order, (list, tuple)) and order and all(isinstance(o, str) and "=" in o for o in order):
        out = {}
        for o in order:
            name, chain = (x.strip() for x in o.split("=", 1))
            if name in out:
                raise ProgramError("--order", f"two orders for kernel {name}")
            out[name] = parse_order(chain)
        return out
    if isinstance(order, (list, tuple)) and order and all(isinstance(o, str) and "," in o for o in order):
        if len(order) > 1:
            raise ProgramError("--order", "give one chain for every kernel, or KERNEL=ORDER for each kernel")
        order = order[0]
    if isinstance(order, str) and "=" in order:
        return parse_order([order])
    if isinstance(order, str):
        parts = [p.strip() for p in re.split(r",|->", order)]
        for p in parts:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", p):
                raise ProgramError("--order", f"expected index names separated by commas, got {order!r}")
        if not parts:
            raise ProgramError("--order", "needs at least one index name")
        return tuple(parts)
    return tuple(order)


def _order(order):
    """The ``order`` field: None, a tuple of index names, or {kernel: tuple}."""
    if isinstance(order, Mapping):
        return {str(k): parse_order(v) for k, v in order.items()}
    out = parse_order(order)
    if isinstance(out, tuple) and any("=" in o for o in out):
        raise ProgramError("--order", "mixes KERNEL=ORDER with a plain chain")
    return out


def _stages(value, what: str) -> tuple:
    """Stage names (a name, or several) as a tuple; an unknown name is a one-line error naming ``what``."""
    names = (value,) if isinstance(value, str) else tuple(value or ())
    known = stage_names()
    for n in names:
        if n not in known:
            raise ProgramError(what, f"no stage called {n!r} (stages: {', '.join(known)})")
    return names


@dataclass(frozen=True)
class CompileOptions:
    """Every compile option, typed and checked (:func:`fuseflow.compiler.compile_program`).

    Build one with keywords, :meth:`from_kwargs` (which also takes the older ``locate=``, ``drop_empty=`` and
    ``passes={...}`` keywords) or :meth:`replace`. Values are normalized: ``order``, ``parallel``, ``tiles``,
    ``dma`` and ``skip`` hold the parsed forms whatever text or mapping was given.
    """

    #: fusion granularity: ``none`` (one kernel per statement), ``regions`` (the ``fuse { }`` regions), ``full``
    fuse: str = "regions"
    #: dataflow order, outer to inner: a tuple of index names (every kernel takes the ones it has), or
    #: {kernel: tuple}; text ``"i,k,j"`` / ``"K=i,k,j"`` is parsed
    order: tuple | dict | None = None
    #: ``factored`` iteration, or ``global`` (one iteration space per kernel, for comparisons)
    iteration: str = "factored"
    #: the SAMML program's name (default: the source program's)
    name: str | None = None
    #: {index: lanes} (or ``"i=4,j=2"``), on top of the program's ``parallel`` lines: the sub-tree below the
    #: index runs on that many lanes
    parallel: dict = field(default_factory=dict)
    #: {index: tile size} (or ``"i=1024"``), on top of the program's ``tile`` lines (docs/tiling.md)
    tiles: dict = field(default_factory=dict)
    #: choose tile sizes so that one tile fits this many bits of on-chip memory (None: no automatic tiling)
    onchip_bits: int | None = None
    #: sample inputs {tensor: data} that automatic tile sizes are chosen on
    tile_inputs: Mapping | None = None
    #: a tiled program's off-chip contract (``"buffers=1,latency=20"`` or a dict; stored as the whole contract)
    dma: dict | None = None
    #: how a tiled fuse region of two products runs: ``wavefront`` | ``recompute`` | ``materialise`` (None: the
    #: cost model's choice; :mod:`fuseflow.compiler.tilefuse`)
    tile_fusion: str | None = None
    #: with ``onchip_bits``: split the output rows into at least this many tiles (of at least 64 rows) even when
    #: the program fits, so that loads from off-chip memory stream behind the runs (:func:`.tiling.auto_sizes`)
    min_tiles: int | None = None
    #: stages of :data:`~fuseflow.compiler.passes.PIPELINE` not to run (only skippable ones: locate, drop_empty)
    skip: tuple = ()
    #: a stage after which the result's reports hold the IR's text or graph.json as ``"dump"``
    dump_after: str | None = None
    #: build every permuted copy with the general transpose kernel (tests)
    general_transposes: bool = False
    #: every channel gets this depth (deadlock floors kept) instead of the depths pass's choice
    fifo_depth: int | None = None
    #: the depths pass's budget of FIFO bits (default: ``board``'s share, else ``DEFAULT_BUDGET_BITS``)
    budget_bits: int | None = None
    #: the target board (``fuseflow.boards.catalog``): the default ``budget_bits``
    board: str | None = None
    #: also size channel depths by simulating synthetic inputs (slower)
    profile: bool = False
    #: the lanes pass's input, {kernel: lanes or [{"lanes", "dim", "level", "unit"}]}: the ``plan`` stage fills
    #: it from ``parallel``; hand-built graphs give it directly
    lanes: dict = field(default_factory=dict)

    def __post_init__(self):
        def put(name, value):
            object.__setattr__(self, name, value)
        if self.fuse not in SCHEDULES:
            raise ProgramError("--fuse", f"unknown schedule {self.fuse!r} (expected {', '.join(SCHEDULES)})")
        if self.iteration not in ITERATIONS:
            raise ProgramError("iteration", f"expected 'factored' or 'global', got {self.iteration!r}")
        if self.name is not None and not isinstance(self.name, str):
            raise ProgramError("name", f"expected a program name, got {self.name!r}")
        put("order", _order(self.order))
        put("parallel", parse_parallel(self.parallel or None))
        put("tiles", parse_tiles(self.tiles or None))
        _count("--onchip-bits", self.onchip_bits, 1, f"must be a positive number of bits, got {self.onchip_bits!r}")
        if self.tile_inputs is not None and not isinstance(self.tile_inputs, Mapping):
            raise ProgramError("tile_inputs", f"expected {{tensor: data}}, got {type(self.tile_inputs).__name__}")
        if self.dma is not None:
            try:
                contract = parse_contract(self.dma, "--dma", {**DMA.defaults(), "buffers": DEFAULT_BUFFERS})
            except FuseFlowError as exc:
                raise ProgramError(exc.what, exc.why) from None
            put("dma", contract.to_json())
        if self.tile_fusion is not None and self.tile_fusion not in TILE_FUSION:
            raise ProgramError("--tile-fusion", f"unknown strategy {self.tile_fusion!r} (expected "
                                                f"{', '.join(TILE_FUSION)})")
        _count("--min-tiles", self.min_tiles, 1, f"must be a positive number of tiles, got {self.min_tiles!r}")
        if self.min_tiles is not None and self.onchip_bits is None:
            raise ProgramError("--min-tiles", "streams the tiles chosen under a budget: give --onchip-bits too")
        skip = _stages(self.skip, "--skip")
        for n in skip:
            stage = next(s for s in PIPELINE if s.name == n)
            if not stage.skippable:
                raise ProgramError("--skip", f"stage {n!r} cannot be skipped (skippable: "
                                             f"{', '.join(s.name for s in PIPELINE if s.skippable)})")
        put("skip", tuple(dict.fromkeys(skip)))
        if self.dump_after is not None:
            _stages(self.dump_after if isinstance(self.dump_after, str) else [self.dump_after], "--dump-after")
        _count("--fifo-depth", self.fifo_depth, 1, "must be at least 1")
        _count("--fifo-budget", self.budget_bits, 0, "must be at least 0")
        if self.board is not None and not isinstance(self.board, str):
            raise ProgramError("--board", f"expected a board name, got {self.board!r}")
        for name in ("profile", "general_transposes"):
            if not isinstance(getattr(self, name), bool):
                raise ProgramError(name, f"expected True or False, got {getattr(self, name)!r}")
        if not isinstance(self.lanes, Mapping):
            raise ProgramError("lanes", f"expected {{kernel: lanes}}, got {self.lanes!r}")
        put("lanes", dict(self.lanes))

    def runs(self, stage: str) -> bool:
        """Whether the stage ``stage`` of :data:`~fuseflow.compiler.passes.PIPELINE` runs (is not skipped)."""
        return stage not in self.skip

    @property
    def locate(self) -> bool:
        """Whether the locate stage runs."""
        return self.runs("locate")

    @property
    def drop_empty(self) -> bool:
        """Whether the drop_empty stage runs."""
        return self.runs("drop_empty")

    @classmethod
    def from_kwargs(cls, base: CompileOptions | None = None, /, **kwargs: Any) -> CompileOptions:
        """``base`` (default: the defaults) with ``kwargs`` changed: the fields, and the older keywords
        ``locate=False`` / ``drop_empty=False`` (skip that stage) and ``passes={...}`` (the graph passes'
        options: ``fifo_depth``, ``budget_bits``, ``board``, ``profile``, ``locate``, ``drop_empty``, ``skip``,
        ``dump_after``, ``parallel`` as {kernel: lanes}). An unknown keyword is a one-line error."""
        base = base if base is not None else cls()
        if not isinstance(base, CompileOptions):
            raise ProgramError("options", f"expected CompileOptions, got {type(base).__name__} (give options "
                                          f"as keywords, e.g. fuse='full')")
        changes, on, off = {}, [], []
        for key, value in kwargs.items():
            if key == "passes":
                _passes(value or {}, changes, on, off)
            elif key in _SKIPPABLE:
                (on if value else off).append(key)
            elif key in _FIELDS:
                changes[key] = value
            else:
                raise ProgramError("options", f"unknown option {key!r} (options: "
                                              f"{', '.join([*_FIELDS, *_SKIPPABLE])}, passes)")
        if on or off:
            skip = _stages(changes.get("skip", base.skip), "--skip")
            changes["skip"] = tuple(n for n in skip if n not in on) + tuple(off)
        return dataclasses.replace(base, **changes)

    def replace(self, **kwargs: Any) -> CompileOptions:
        """A copy with ``kwargs`` changed (the keywords of :meth:`from_kwargs`)."""
        return CompileOptions.from_kwargs(self, **kwargs)

    def graph_options(self) -> dict:
        """The options of the graph stages as a ``passes={...}`` dict (for callers that forward them)."""
        return {"skip": self.skip, "dump_after": self.dump_after, "fifo_depth": self.fifo_depth,
                "budget_bits": self.budget_bits, "board": self.board, "profile": self.profile}


#: the skippable stages: each is also an older keyword (``locate=False`` skips the locate stage)
_SKIPPABLE = tuple(s.name for s in PIPELINE if s.skippable)
#: the fields (the keywords :meth:`CompileOptions.from_kwargs` takes besides the older ones)
_FIELDS = tuple(f.name for f in dataclasses.fields(CompileOptions))
#: the keys of an older ``passes={...}`` dict and the field each sets (locate/drop_empty: skip)
_PASS_KEYS = {"fifo_depth": "fifo_depth", "budget_bits": "budget_bits", "board": "board", "profile": "profile",
              "skip": "skip", "dump_after": "dump_after", "parallel": "lanes"}


def _passes(passes, changes, on, off):
    """Fold an older ``passes={...}`` dict into ``changes`` (fields) and ``on``/``off`` (stages)."""
    if not isinstance(passes, Mapping):
        raise ProgramError("passes", f"expected a dict of pass options, got {type(passes).__name__}")
    for key, value in passes.items():
        if key in _SKIPPABLE:
            (on if value is not False else off).append(key)
        elif key in _PASS_KEYS:
            changes[_PASS_KEYS[key]] = value if key != "parallel" else (value or {})
        else:
            raise ProgramError("passes", f"unknown pass option {key!r} (options: "
                                         f"{', '.join([*_PASS_KEYS, *_SKIPPABLE])})")


def _count(what: str, value, least: int, why: str) -> None:
    """``value`` is None or an int >= ``least`` (one-line error ``what: why`` otherwise)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ProgramError(what, why)
