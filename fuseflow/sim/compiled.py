"""The compiled engine's Python side: binds a kernel for ``fuseflow.sim._engine`` and chooses the engine.

The compiled engine (C++ in ``fuseflow/sim/csrc/``, built by ``pip install``) runs the same kernels as
:func:`fuseflow.sim.engine.run_kernel`, with the same contract: the same DAM timing, counters, results and
errors. Op facts are not copied into C++: every node's latency (``registry.op_latency``), input depth
(``OpSpec.input_depth_for``), output ports and encoded constants are bound here from the registry and the
number mode, once per node.

``engine="auto"`` (the default everywhere) takes the compiled engine when it is built and can run the
program, and says in one line on stderr, once per reason, when it falls back to the Python engine.
"""

from __future__ import annotations

import sys

from ..errors import FuseFlowError
from ..samml.registry import OPS, REDUCE_MERGE, op_latency

ENGINES = ("auto", "compiled", "python")

try:                                        # built by pip from fuseflow/sim/csrc (optional: needs a C++ compiler)
    from . import _engine
    _IMPORT_ERROR = None
except ImportError as exc:                  # pragma: no cover - depends on the machine
    _engine = None
    _IMPORT_ERROR = str(exc)

_told = set()


def available() -> bool:
    """Whether the compiled engine was built on this machine."""
    return _engine is not None


def compiled_ops() -> frozenset:
    """The ops that have a compiled model."""
    return frozenset(_engine.ops()) if _engine is not None else frozenset()


def unsupported(prog, trace=False) -> str | None:
    """Why the compiled engine cannot run ``prog`` (None when it can)."""
    if _engine is None:
        return "the compiled engine is not built (no C++ compiler when fuseflow was installed)"
    if any(t.block for t in prog.tensors.values()):
        return "blocked tensors run on the Python engine only"
    have = compiled_ops()
    missing = sorted({n.op for k in prog.kernels for n in k.nodes.values()} - have)
    if missing:
        return f"no compiled model for op {', '.join(missing)}"
    return None


def choose(engine: str, prog, trace=False) -> str:
    """The engine that runs ``prog``: ``"compiled"`` or ``"python"``. ``auto`` falls back with one line on
    stderr (once per reason); ``compiled`` raises when it cannot run the program."""
    if engine not in ENGINES:
        raise FuseFlowError("--engine", f"unknown engine {engine!r} (expected {', '.join(ENGINES)})")
    if engine == "python":
        return "python"
    why = unsupported(prog, trace)
    if why is None:
        return "compiled"
    if engine == "compiled":
        raise FuseFlowError("--engine compiled", why)
    if why not in _told:
        _told.add(why)
        print(f"note: {why}: simulating with the Python engine", file=sys.stderr)
    return "python"


class _Counted:
    """What run_kernel's callers read of a stream: its token count (and, traced, every push)."""
    __slots__ = ("count", "log", "sent")

    def __init__(self, count, log=None, sent=None):
        self.count, self.log, self.sent = count, log, sent


def _bound_params(st):
    """A node's parameters with the facts its compiled model reads bound from the registry."""
    p = dict(st.params)
    spec = OPS.get(st.op)
    if spec is not None:
        p["_input_depth"] = spec.input_depth_for(st.params)
    merge = p.get("op")
    if isinstance(merge, str) and merge in REDUCE_MERGE:
        p["_merge"] = REDUCE_MERGE[merge]
    if p.get("const") is not None:
        p["_const"] = st.env.encode(p["const"])
    return p


def run_kernel(nodes, streams, depth_default=2, widths=None, env=None, trace=False, unbounded=None, progress=None):
    """:func:`fuseflow.sim.engine.run_kernel` on the compiled engine: the same arguments (``env``, the number
    mode, is the nodes' :class:`~fuseflow.sim.engine.Env`), the same return value; writes the counters and
    results into the nodes' states. ``progress(tokens, cycles)`` is called about twice a second. On Ctrl-C the
    counters so far are written and the KeyboardInterrupt is raised with ``partial = (cycles, outs)``."""
    widths = widths or {}
    index = {st.id: i for i, st in enumerate(nodes)}
    cnodes = []
    for st in nodes:
        spec = OPS.get(st.op)
        outs = [name for name, _ in spec.output_ports(st.params)] if spec else []
        lat = op_latency(st.op, st.params, env.fixed) if spec else 1
        cnodes.append((st.id, st.op, _bound_params(st), lat, outs))
    cstreams = []
    for sid, (src, sport), dsts, depth in streams:
        code = -1 if unbounded is not None and depth == unbounded else (depth or 0)
        cstreams.append((sid, index[src], sport, [(index[d], p) for d, p in dsts], code, widths.get(sid, 0)))
    cenv = {"mode": env.mode, "width": env.fixed.width, "frac": env.fixed.frac,
            "unary": {n: f for n, f in env.unary.items() if n not in ("neg", "relu")}}
    cycles, counts, per_node, traced, stopped = _engine.run_kernel(cnodes, cstreams, depth_default, cenv, trace,
                                                                   progress)
    for st, d in zip(nodes, per_node):
        st.busy, st.blocked, st.alu_ops = d["busy"], d["blocked"], d["alu_ops"]
        st.mem_reads, st.mem_writes, st.moved, st.clock = d["mem_reads"], d["mem_writes"], d["moved"], d["clock"]
        if d["result"] is not None:
            st.result = d["result"]
    if trace:
        logs, sent = traced
        outs = {sid: _Counted(c, logs.get(sid, []), sent.get(sid, [])) for sid, c in counts.items()}
    else:
        outs = {sid: _Counted(c) for sid, c in counts.items()}
    if stopped is not None:
        stopped.partial = (cycles, outs)
        raise stopped
    return cycles, outs, {}
