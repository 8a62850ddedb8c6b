"""serialize: merges lanes back into one stream in the original order (fuseflow/sim/ops/serialize.py).

States:

- SELECT (inspects every key): with a data head somewhere, the lane ``l`` of the smallest one (control heads
  sort after every coordinate). Depth 0: also inspects ``in<l>``, emits it, pops ``key<l>`` and ``in<l>``.
  Depth d >= 1: pops ``key<l>`` without output, sets ``copied`` and ``had[l]``, COPY(l). Every key at a stop
  S_m (the end of a key fibre): also inspects every payload; pops every key and the bare stop of every lane
  without a unit in the fibre (``had`` clear; every lane at depth 0); emits S_(d+m) if depth is 0 or nothing
  was copied; clears ``copied`` and ``had``. Every key at D: END's firing (D everywhere, emits D), FIN.
- COPY (inspects ``in<l>``; for a closing stop, a stop of level >= d-1, also every key): emits the token and
  pops it; a closing stop becomes S_(d+m) when every key is at a stop S_m, else S_(d-1), and returns to SELECT.

The lane choice (the smallest key head) is decided a cycle ahead, as union's
(:meth:`OpComponent.compare_heads_ahead`): each key input has a next-head view (``i_key<i>_behind``,
``i_key<i>_stay``), every pair of lanes compares every pair of candidates into a register, this cycle's pops
are registered beside them, and the next cycle chooses among the registered comparisons, so the firing
decision starts at flip-flops and a multiplexer, no comparator. The choice stays one-hot (``win``, one AND of
comparisons per lane: :func:`winners`; no index encoded and decoded again), and the pops' registers, the key
and payload readies and out's valid are written with the chosen lane last: key i is read when ``win[i]`` and
the firing *as if lane i were chosen* (every key valid; depth 0: payload i valid and out ready), which does
not depend on the choice, rather than the firing through the chosen lane's payload valid (the same values:
the firing rule of :class:`._common.Fire`, passed to :meth:`Fire.build` as its valid/ready expressions).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value

from ..stream import all_of
from ..token import is_done, is_stop, stop_level, token_layout
from ._common import OpComponent, copy_tok, set_done, set_stop

SELECT, COPY, FIN = 0, 1, 2


def winners(n, beats):
    """The one-hot lane of the smallest value from the pairwise comparisons ``beats`` ({(a, b): value b below
    value a}, a < b): lane i wins when it is below every lower lane and not above any higher one (the lowest
    index among equal values), one AND of n - 1 comparisons per lane."""
    if n == 1:
        return [Const(1, 1)]
    win = []
    for i in range(n):
        terms = [beats[a, i] for a in range(i)] + [~beats[i, b] for b in range(i + 1, n)]
        cond = terms[0]
        for t in terms[1:]:
            cond = cond & t
        win.append(cond)
    return win


def smallest(order, beats=None):
    """The smallest of the values ``order`` and its index, the lowest index among equal values: one comparator
    per pair of lanes, all side by side, so the choice is one comparison deep whatever the number of lanes
    (a tree of compare-and-mux stages is ceil(log2 n) comparisons deep, each waiting on the mux before it;
    docs/hardware.md, "Parallel lanes"). Lane i wins when it is below every lower lane and not above any higher
    one (:func:`winners`, which :class:`Serialize` uses on its comparisons registered a cycle ahead); the value
    is an AND-OR over the one-hot winner. ``beats`` (optional): the comparisons ``{(a, b): order[b] < order[a]}``
    (a < b) made elsewhere."""
    n = len(order)
    if n == 1:
        return order[0], Const(0, range(1))
    if beats is None:
        beats = {}                           # beats[a, b], a < b: lane b's value is below lane a's
        for a in range(n):
            for b in range(a + 1, n):
                beats[a, b] = order[b] < order[a]
    value = 0
    index = 0
    for i, cond in enumerate(winners(n, beats)):
        value = value | Mux(cond, order[i], 0)
        index = index | Mux(cond, i, 0)
    return value, index


class Serialize(OpComponent):
    op_name = "serialize"

    def _add_members(self, members):
        for i in range(self.params["lanes"]):
            self._add_after(members, f"key{i}")

    def after_ports(self):
        return [f"key{i}" for i in range(self.params["lanes"])]

    def elaborate(self, platform):
        m = Module()
        n, depth = self.params["lanes"], self.params["depth"]
        w = self.crd_width
        f = self.fire_logic()
        keys = [getattr(self, f"i_key{i}") for i in range(n)]
        pays = [getattr(self, f"i_in{i}") for i in range(n)]
        out = self.o_out
        state = Signal(range(4))
        cur = Signal(range(n))
        copied = Signal()
        had = Signal(n)

        keys_valid = all_of(k.valid for k in keys)

        def key(tok):
            # control heads sort after every coordinate
            return Cat(tok.data[:w], tok.ctrl)

        # taken[i]: key i's head is read this cycle (valid & ready), registered for the comparisons' choice;
        # driven below in a shallower form than the firing's valid & ready
        taken = [Signal(name=f"take{i}") for i in range(n)]
        # beats[a, b] (a < b): lane b's key head is below lane a's, compared a cycle ahead (as union's)
        beats = self.compare_heads_ahead(m, [f"key{i}" for i in range(n)], key,
                                         {"beats": lambda a, b: b < a}, taken=taken)["beats"]
        # win[i]: lane i holds the smallest head (one-hot: keys are disjoint; the first lane among equals
        # otherwise); sel: its index (the COPY state's lane)
        win = Signal(n)
        m.d.comb += win.eq(Cat(winners(n, beats)))
        sel = Signal(range(n))
        for i in range(1, n):
            with m.If(win[i]):
                m.d.comb += sel.eq(i)
        # some head is a coordinate (the smallest head is then one)
        any_data = ~all_of(k.payload.ctrl for k in keys)
        width = self.port_info["i_in0"][1]

        # the chosen lane's payload head and valid: AND-OR over the one-hot win (no index decode)
        sel_tok, sel_valid = Signal(token_layout(width), name="sel_tok"), Signal(name="sel_valid")
        tok_terms, valid_terms = 0, 0
        for i in range(n):
            tok_terms = tok_terms | Mux(win[i], Value.cast(pays[i].payload), 0)
            valid_terms = valid_terms | (win[i] & pays[i].valid)
        m.d.comb += [sel_tok.eq(tok_terms), sel_valid.eq(valid_terms)]

        def pick(index, name):
            # the payload head and valid of lane ``index``
            tok, valid = Signal(token_layout(width), name=f"{name}_tok"), Signal(name=f"{name}_valid")
            with m.Switch(index):
                for i in range(n):
                    with m.Case(i):
                        m.d.comb += [tok.eq(pays[i].payload), valid.eq(pays[i].valid)]
            return tok, valid

        cur_tok, cur_valid = pick(cur, "cur")

        # taken, written apart from the firing so that the chosen lane enters last: with a data head somewhere
        # (SELECT), key i is read when it is the chosen lane and the firing with lane i chosen happens (every key
        # valid; depth 0: lane i's payload valid and out ready); with every key at a control token (SELECT's D
        # or stop firing) every key is read when every key and payload is valid and out is ready or not
        # written (a stop at depth >= 1 after a copied unit); COPY and FIN read no key
        all_pays = all_of(p.valid for p in pays)
        if depth == 0:
            fire_lane = [keys_valid & pays[i].valid & out.ready for i in range(n)]
            fire_ctrl = keys_valid & all_pays & out.ready
        else:
            fire_lane = [keys_valid] * n
            fire_ctrl = keys_valid & all_pays & (out.ready | (copied & ~is_done(keys[0].payload)))
        is_select, done = state == SELECT, is_done(keys[0].payload)
        for i in range(n):
            m.d.comb += taken[i].eq(is_select & Mux(any_data, win[i] & fire_lane[i], fire_ctrl))
        # the ports' valid and readies written the same way (the firing rule's values, Fire.build): a key is
        # ready exactly when its head is taken (every firing that pops a key needs every key valid); out and
        # the payloads in SELECT as above (a stop pops the payloads of the lanes without a unit, ``had``
        # clear), in COPY from COPY's own firing (depth >= 1)
        closing = Signal()
        m.d.comb += closing.eq(is_stop(cur_tok) & (stop_level(cur_tok) >= depth - 1))
        ready = {f"key{i}": taken[i] for i in range(n)}
        if depth == 0:
            valid = {"out": is_select & keys_valid & Mux(any_data, sel_valid, all_pays)}
            for i in range(n):
                ready[f"in{i}"] = is_select & Mux(any_data, win[i] & fire_lane[i], fire_ctrl & (done | ~had[i]))
        else:
            copy_go = cur_valid & (~closing | keys_valid)
            valid = {"out": Mux(is_select, ~any_data & keys_valid & all_pays & (done | ~copied),
                                (state == COPY) & copy_go)}
            for i in range(n):
                ready[f"in{i}"] = Mux(is_select, ~any_data & fire_ctrl & (done | ~had[i]),
                                      (state == COPY) & copy_go & out.ready & (cur == i))

        with m.Switch(state):
            with m.Case(SELECT):
                with m.If(any_data):
                    for i in range(n):
                        m.d.comb += f.pop[f"key{i}"].eq(win[i])
                    if depth == 0:
                        m.d.comb += [f.go.eq(keys_valid & sel_valid), f.push["out"].eq(1)]
                        copy_tok(m, out, sel_tok)
                        for i in range(n):
                            m.d.comb += f.pop[f"in{i}"].eq(win[i])
                    else:
                        m.d.comb += f.go.eq(keys_valid)
                        with m.If(f.fire):
                            m.d.sync += [cur.eq(sel), copied.eq(1), state.eq(COPY)]
                            m.d.sync += had.eq(had | win)
                with m.Elif(is_done(keys[0].payload)):
                    m.d.comb += [f.go.eq(keys_valid & all_of(p.valid for p in pays)), f.push["out"].eq(1)]
                    for i in range(n):
                        m.d.comb += [f.pop[f"key{i}"].eq(1), f.pop[f"in{i}"].eq(1)]
                    set_done(m, out)
                    with m.If(f.fire):
                        m.d.sync += state.eq(FIN)
                with m.Else():
                    m.d.comb += f.go.eq(keys_valid & all_of(p.valid for p in pays))
                    for i in range(n):
                        m.d.comb += [f.pop[f"key{i}"].eq(1), f.pop[f"in{i}"].eq(~had[i])]
                    m.d.comb += f.push["out"].eq(1 if depth == 0 else ~copied)
                    set_stop(m, out, depth + stop_level(keys[0].payload))
                    with m.If(f.fire):
                        m.d.sync += [copied.eq(0), had.eq(0)]
            if depth >= 1:
                with m.Case(COPY):
                    x = cur_tok
                    for i in range(n):
                        m.d.comb += f.pop[f"in{i}"].eq(cur == i)
                    m.d.comb += f.push["out"].eq(1)
                    with m.If(closing):
                        m.d.comb += f.go.eq(cur_valid & keys_valid)
                        set_stop(m, out, Mux(any_data, depth - 1, depth + stop_level(keys[0].payload)))
                        with m.If(f.fire):
                            m.d.sync += state.eq(SELECT)
                    with m.Else():
                        m.d.comb += f.go.eq(cur_valid)
                        copy_tok(m, out, x)
        f.build(m, valid, ready)
        return m
