"""Profile-guided FIFO sizing: deepen the channels whose producers stall, as far as it shortens the run.

A stream's depth is a hardware cost (``depth`` tokens of storage per consumer), and the default of 2 only
sustains one token per cycle when producer and consumer run in step. Where paths of different latency meet
again (a coordinate stream beside the value pipeline it steers, a sparse accumulator's burst of output), a
deeper channel lets the early side run ahead instead of stalling the whole pipeline.

:func:`size_fifos` is greedy and measured: it runs the reference simulator (cycle-exact with the RTL) on
sample inputs, tries doubling the output channels of each op that spent cycles blocked on a full channel
(most blocked first), keeps the single change that saves the most cycles, and repeats until no change saves
at least ``min_gain`` of the run. The depths it picks fit the sample data; check them on other data (the RTL
benchmark sizes on one random seed and measures on another).
"""

from ..samml import Program
from .engine import load_program, run

__all__ = ["size_fifos"]


def _copy(program):
    return Program.from_json(program.to_json())


def _candidates(prog, result, default, max_depth, n):
    """Groups of streams to deepen together, one group per trial: the output channels of the ops that waited
    longest on a full channel, then the input channels of the busiest ops (an op may use deeper inputs
    only when all of them are deep, e.g. the intersect's look-ahead)."""
    blocked, busy = [], []
    for ki, ks in enumerate(result.stats["kernels"]):
        for nid, ns in ks["nodes"].items():
            if ns["blocked"] > 0:
                blocked.append((ns["blocked"], ki, nid))
            busy.append((ns["busy"], ki, nid))
    out = []
    for _, ki, nid in sorted(blocked, key=lambda x: -x[0])[:n]:
        out.append((ki, [s for s in prog.kernels[ki].streams.values() if s.src.node == nid]))
    for _, ki, nid in sorted(busy, key=lambda x: -x[0])[:max(1, n // 4)]:
        out.append((ki, [s for s in prog.kernels[ki].streams.values() if any(d.node == nid for d in s.dsts)]))
    return [(ki, [s for s in group if (s.depth or default) < max_depth]) for ki, group in out]


def size_fifos(program, inputs, *, mode="fixed", max_depth=64, min_gain=0.002, candidates=8, max_rounds=40,
               progress=None):
    """Deepen channels of ``program`` (a Program or graph.json path) where that shortens the run on ``inputs``.

    Parameters
    ----------
    max_depth : int
        No channel gets deeper than this.
    min_gain : float
        A change is kept only if it saves at least this fraction of the current cycles.
    candidates : int
        How many of the most-blocked ops are tried per round (each try is one simulation).
    progress : callable, optional
        Called with one line of text per kept change.

    Returns
    -------
    (Program, dict)
        A sized copy of the program (the input is not changed) and a report: ``cycles_before``,
        ``cycles_after``, ``depths`` (stream id -> new depth, per kernel), ``extra_slots`` (added token
        slots, counting every consumer's channel) and ``runs`` (simulations made).
    """
    prog = _copy(load_program(program))
    default = int(prog.config.get("fifo_depth", 2))
    res = run(prog, inputs, mode=mode)
    before = cycles = res.cycles
    runs = 1
    changed = {}
    for _ in range(max_rounds):
        best = None
        for ki, outs in _candidates(prog, res, default, max_depth, candidates):
            if not outs:
                continue
            old = {s.id: s.depth for s in outs}
            new = {s.id: min(max_depth, 2 * (s.depth or default)) for s in outs}
            for s in outs:
                s.depth = new[s.id]
            try:
                trial = run(prog, inputs, mode=mode)
            finally:
                for s in outs:
                    s.depth = old[s.id]
            runs += 1
            if best is None or trial.cycles < best[0]:
                best = (trial.cycles, ki, new, trial)
        if best is None or cycles - best[0] < max(1, min_gain * cycles):
            break
        c, ki, depths, res = best
        k = prog.kernels[ki]
        for sid, d in depths.items():
            k.streams[sid].depth = d
            changed.setdefault(k.name, {})[sid] = d
        if progress:
            progress(f"{cycles} -> {c} cycles: " + ", ".join(f"{sid} depth {d}" for sid, d in depths.items()))
        cycles = c
    extra = 0
    for k in prog.kernels:
        for sid in changed.get(k.name, {}):
            s = k.streams[sid]
            extra += (s.depth - default) * len(s.dsts)
    prog.validate()
    return prog, {"cycles_before": before, "cycles_after": cycles, "depths": changed, "extra_slots": extra,
                  "runs": runs}
