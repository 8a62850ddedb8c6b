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


def _blocked_ops(result):
    """(kernel index, node id, blocked cycles) of every op that waited on a full channel, most blocked first."""
    out = []
    for ki, ks in enumerate(result.stats["kernels"]):
        for nid, ns in ks["nodes"].items():
            if ns["blocked"] > 0:
                out.append((ki, nid, ns["blocked"]))
    out.sort(key=lambda x: -x[2])
    return out


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
        for ki, nid, _blocked in _blocked_ops(res)[:candidates]:
            k = prog.kernels[ki]
            outs = [s for s in k.streams.values() if s.src.node == nid and (s.depth or default) < max_depth]
            if not outs:
                continue
            old = {s.id: s.depth for s in outs}
            for s in outs:
                s.depth = min(max_depth, 2 * (s.depth or default))
            trial = run(prog, inputs, mode=mode)
            runs += 1
            if best is None or trial.cycles < best[0]:
                best = (trial.cycles, ki, {s.id: s.depth for s in outs}, trial)
            for s in outs:
                s.depth = old[s.id]
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
