"""How few cycles an intersect can take: the matched-pair floor of its input streams.

The stream bound (the busiest stream's token count) assumes every op moves one token per port per cycle. An
intersect cannot always: a coordinate present in every input leaves in one firing that pops it from all of
them, so one input waits while another steps over coordinates the first does not have. For any intersect that
pops at most one token per input per firing and pops a match's tokens, a stop's and D in one firing (the
merging intersect of docs/samml.md without look-ahead, or with a look-ahead that only skips, and any wider
look-ahead window of that kind), a fibre whose
matches sit at positions ``m_1 < m_2 < ...`` of input i takes at least

    sum_k max_i (m_k[i] - m_(k-1)[i])  +  max_i (tokens of input i after its last match)  +  1 (the stop)

firings: between two matches each input pops its tokens one per firing, and no firing pops tokens on both sides
of a match. :func:`matched_pair_floor` is that count over whole streams (fibres end at stops; D adds one).
An intersect that pops two tokens of an input in one firing (our look-ahead does, below the largest head), or
keeps popped tokens in a window of its own and emits matches from there, is not bound by it.
"""

__all__ = ["matched_pair_floor", "intersect_floors"]


def _fibres(stream):
    """Split a coordinate stream into (coordinates, closing token) per fibre."""
    coords = []
    for tok in stream:
        if isinstance(tok, str):
            yield coords, tok
            coords = []
        else:
            coords.append(tok)
    if coords:
        yield coords, None


def matched_pair_floor(streams) -> int:
    """The fewest firings of an intersect of ``streams`` (one coordinate token list per input, stops as
    strings, ending with ``"D"``) that pops at most one token per input per firing and a match's tokens together.
    """
    fibres = [list(_fibres(s)) for s in streams]
    if len({len(f) for f in fibres}) != 1:
        raise ValueError("the input streams have different numbers of fibres")
    total = 0
    for parts in zip(*fibres):
        coords = [p[0] for p in parts]
        common = set(coords[0]).intersection(*coords[1:])
        where = [{c: i for i, c in enumerate(cs) if c in common} for cs in coords]
        last = [-1] * len(coords)
        for c in sorted(common):
            total += max(w[c] - p for w, p in zip(where, last))
            last = [w[c] for w in where]
        total += max(len(cs) - 1 - p for cs, p in zip(coords, last))
        if parts[0][1] is not None:
            total += 1                       # the stop, or D, pops every input in one firing
    return total


def intersect_floors(program, result):
    """Per kernel, ``{intersect node: (matched-pair floor, firings in this run)}`` from a ``run(...,
    trace=True)`` result of ``program``."""
    if result.trace_tokens is None:
        raise ValueError("needs a result of run(..., trace=True)")
    out = []
    for k, sent, stats in zip(program.kernels, result.trace_tokens, result.stats["kernels"]):
        feeds = {(d.node, d.port): s.id for s in k.streams.values() for d in s.dsts}
        floors = {}
        for nid, node in k.nodes.items():
            if node.spec.coiterate != "all":         # the matched pairs of an intersection
                continue
            arity = node.params.get("arity", 2)
            streams = [sent[feeds[(nid, f"crd{i}")]] for i in range(arity)]
            floors[nid] = (matched_pair_floor(streams), stats["nodes"][nid]["busy"])
        out.append(floors)
    return out
