"""level_scan: one reference in, that fibre's coordinates and child references out, with stop promotion.

States (the simulator's model, fuseflow/sim/ops/level_scan.py):

- IDLE: looks at the input head. ``S_m``/``D`` -> emits ``S_(m+1)``/``D`` on both outputs and pops it.
  ``N`` or a reference whose fibre is empty -> pops it without output, goes to END. A reference ``r``
  with a non-empty fibre -> pops it and emits the fibre's first coordinate (crd[seg[r]], ref seg[r]) in
  the same firing; SCAN follows if the fibre has more coordinates, else END.
- SCAN: emits the next coordinate each firing (no input needed); END after the last.
- END (fibre end): looks at the next input head: ``S_m`` -> pops it and emits ``S_(m+1)``; anything
  else -> emits ``S0`` without popping. Back to IDLE.

Memory interfaces (compressed; addresses are crd_width bits): ``seg_lo_b_addr/seg_lo_b_data`` (seg[r]) and
``seg_hi_b_addr/seg_hi_b_data`` (seg[r+1], addressed with r: a port of offset 1, which reads a copy of seg shifted by
one entry, so no adder precedes the read) at the token behind the head, two reads of the seg array of latency 1 with an
enable (``_en``; ``seg_lo_b_data1`` is seg[r] + 1, in block RAM from a copy holding every entry + 1);
``first_b_addr/first_b_data/first_b_en``, such a read of the level's ``first`` array (per fibre: its first coordinate,
whether it holds exactly one and whether it is empty, ``fuseflow.hw.memory.first_words``) at the same token; and
``crd_addr/crd_data``, a read of latency ``registry.MEMORY_READ_LATENCY`` (2: the address, then the registered data;
block RAM with its output register on ECP5, :class:`fuseflow.hw.memory.TensorMemory`) of the crd array. The seg and
first reads are registers that hold the head's entries (LUT RAM and a register with an enable; from
``fuseflow.samml.storage.BOUNDS_BLOCK_MIN_BITS`` block RAM with its clock enable), so an IDLE step emits its first
coordinate and decides an empty fibre and END or SCAN from registers: they load when the head is read (the token behind
it, ``i_ref_behind``, the channel's ``r_behind``, is the next head) and when the channel has no head (``r_behind`` is
then the token being written, the next head if there is one), and hold while the head stays; the reads wait for nothing
of this cycle's firing, which only enables them. With ``bounds_latency`` 2 (the kernel top's choice for seg or first
in block RAM: :mod:`fuseflow.samml.storage`) the entries pass one more register (the blocks' output registers) and so
are those of the head of the cycle before: a reference step then waits while the head is not ``steady`` (the input
had the same head in the last cycle and did not pop it; docs/samml.md, level_scan); they then also load while the head
is not a reference (its entries are unused), and SCAN's end test and q + 1 are registers made a step ahead
(docs/hardware.md, "seg and first in block RAM"). ``crd_addr`` is the next position (seg[r] + 1 after an IDLE step,
q + 1 after a SCAN step), so crd_data holds crd[q] one cycle after each SCAN step; no memory read depends on another
within a cycle. A compressed level's tokens leave through an :class:`OutputPipeline` of latency
``registry.op_latency`` (2; docs/samml.md, "Latency"), both outputs together (docs/hardware.md, "Memories"). In block
RAM read with latency 1 those registers are the blocks' outputs, late in the cycle: the state machine takes every
reference for a non-empty fibre and the first array's flags pick between the outcomes last, in one LUT
(:func:`late_mux`; docs/hardware.md, "The first array's flags in block RAM").
Dense levels (``dim`` param) use no memory: refs are
``r*dim + c``, coordinates ``c``; ``r*dim`` and ``r*dim + dim`` of the next head are registered like the seg reads, from
both candidates (so the ref a dense level emits comes from a register, not from a multiply of its channel's head).
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Elaboratable, Instance, Module, Mux, Signal, Value

from ...errors import HardwareError
from ...samml.registry import MEMORY_READ_LATENCY, op_latency
from ..stream import all_of
from ..token import is_done, is_empty, is_stop, stop_level, token_layout
from ._common import OpComponent, copy_ctrl, kept, set_data, set_stop
from ._cells import MUX_AND_INIT, MUX_INIT, dsp_family
from ._pipe import OutputPipeline

IDLE, SCAN, END = 0, 1, 2


def successor(x, y):
    """``y == x + 1`` for unsigned ``x``, ``y`` of one width n, modulo 2^n, without a carry chain: bit i of
    ``x ^ y`` must be the carry into bit i of ``x + 1`` (1 at bit 0, then the carry into bit i - 1 while
    ``x``'s bit i - 1 is set); given the bits below agree, that carry is ``d[i - 1] & x[i - 1]``. Each bit's
    test reads two bits of each operand (one LUT4), then one AND over the bits: a few LUT levels from the
    operands' registers, where ``x + 1 < y`` was an adder and a comparator, two carry chains in a row."""
    return all_of(successor_terms(x, y))


def successor_terms(x, y):
    """:func:`successor`'s per-bit tests (two bits of each operand each), whose AND is ``y == x + 1``."""
    assert len(x) == len(y)
    d = x ^ y
    return [d[0]] + [~(d[i] ^ (d[i - 1] & x[i - 1])) for i in range(1, len(x))]


def second_successor_terms(x, y):
    """Per-bit tests whose AND is ``y == x + 2`` modulo 2^n, without a carry chain: bit 0 agrees, and the bits
    above are :func:`successor`'s tests of ``x >> 1`` and ``y >> 1``."""
    assert len(x) == len(y)
    return [~(x[0] ^ y[0])] + successor_terms(x[1:], y[1:])


class LUT4Model(Elaboratable):
    """An ECP5 ``LUT4`` from the instance's own parameter and pins (``Z = INIT[{D, C, B, A}]``, as Yosys'
    ``cells_sim``): a check of :func:`late_mux`'s ``INIT`` and wiring in the Amaranth simulator."""

    def __init__(self, params, pins):
        self.params, self.pins = params, pins

    def elaborate(self, platform):
        m = Module()
        index = Cat(*[Value.cast(self.pins[f"i_{p}"])[0] for p in "ABCD"])
        m.d.comb += self.pins["o_Z"].eq(Const(self.params["p_INIT"], 16).bit_select(index, 1))
        return m


def late_mux(m, platform, sel, a, b, name, init=MUX_INIT, d=None, model=False):
    """``sel ? a : b`` (``init=MUX_AND_INIT``: ``sel ? a : b & d``) with ``sel`` a late signal (a block RAM's output):
    on ECP5 one ``LUT4`` instance (``sel`` on A, its fastest input), which the logic mapper keeps as it is (it would
    otherwise fold ``sel`` into the logic of ``a`` and ``b``, two or three LUT levels after the block), elsewhere
    the expression; ``model``: :class:`LUT4Model` on the instance's parameter and pins (tests)."""
    out = Signal(name=name)
    if dsp_family(platform) == "ecp5" or model:
        params = {"p_INIT": init}
        pins = {"i_A": sel, "i_B": a, "i_C": b, "i_D": 0 if d is None else d, "o_Z": out}
        m.submodules[f"{name}_lut"] = LUT4Model(params, pins) if model else Instance("LUT4", **params, **pins)
    elif init == MUX_INIT:
        m.d.comb += out.eq(Mux(sel, a, b))
    else:
        m.d.comb += out.eq(Mux(sel, a, b & d))
    return out


class LevelScan(OpComponent):
    op_name = "level_scan"

    def harness_cycles(self):
        p = self.params
        return 4 * (len(p.get("crd") or []) + 4 * (p.get("dim") or 0) * 16)

    def _add_members(self, members):
        self.dense = self.params["format"] == "dense"
        if self.dense:
            if self.params.get("dim") is None:
                raise HardwareError("op level_scan", "a dense level_scan needs 'dim' (the level's size)")
            self.dim = int(self.params["dim"])
            self._add_after(members, "ref")
        else:
            w = self.crd_width
            # seg[next head] and seg[next head + 1], read at the token behind the head (the channel's r_behind:
            # the next head when the head is read, and when there is no head): the reads do not wait for this
            # cycle's firing, which only decides whether their registers load (see elaborate)
            # (and seg[next head] + 1, the position after the fibre's first: in block RAM from a copy holding
            # every entry + 1, so no adder follows the block's read)
            self._add_read(members, "seg", "seg_lo_b", w, held=True, plus_one=True)
            # seg[addr + 1] from a copy of seg shifted by one entry: no adder before the read
            self._add_read(members, "seg", "seg_hi_b", w, offset=1, held=True)
            # per fibre: first coordinate << 2 | single (one coordinate) << 1 | empty
            self._add_read(members, "first", "first_b", w + 2, held=True)
            self._add_read(members, "crd", "crd", w, sync=True)
            # 2: the seg and first reads registered once more (in block RAM the blocks' output registers), so a
            # reference is taken once it has been the head for a cycle (docs/samml.md, "Latency")
            self.bounds_latency = int(self.params.get("bounds_latency") or 1)
            for array in ("seg", "first"):
                self.memories[array].held_latency = self.bounds_latency
            self._add_after(members, "ref")

    def after_ports(self):
        return ["ref"]

    def elaborate(self, platform):
        m = Module()
        w = self.crd_width
        f = self.fire_logic()
        inp, inv = self.i_ref.payload, self.i_ref.valid
        # the ref output is built in or_tok (below: straight to o_ref, or into the output pipeline)
        or_tok = Signal(token_layout(self.port_info["o_ref"][1]))
        orf = SimpleNamespace(payload=or_tok)
        # the crd output is built in oc_tok; a SCAN step's coordinate (crd_data, from the read's register)
        # passes one multiplexer after it (below), not the whole state decode
        oc_tok = Signal(token_layout(w))
        oc = SimpleNamespace(payload=oc_tok)
        state = Signal(range(3))
        nstate = Signal(range(3))    # the next state (state at the next clock edge)
        q = Signal(w + 1)            # position of the next coordinate (SCAN)
        nq = Signal(w + 1)
        m.d.comb += [nstate.eq(state), nq.eq(q)]
        m.d.sync += q.eq(nq)
        if self.dense:
            m.d.sync += state.eq(nstate)        # compressed: after the state machine (below)
        # the firing the state machine's updates follow: compressed, the firing as if the head's fibre were not
        # empty (an empty fibre's step is applied after the machine, below)
        fire_full = Signal()
        fsm_fire = f.fire if self.dense else fire_full
        last_q = Signal(w + 1)       # position of the current fibre's last coordinate (its end - 1; the fibre is
                                     # not empty): SCAN compares q with it, no q + 1 before the comparison
        c = Signal(w + 1)            # next coordinate of a dense fibre (SCAN)
        lo_now = Signal(w + 1)
        hi_now = Signal(w + 1)
        # the head's fibre is empty: from a register (compressed: the first array's flag; dense: compared when
        # the bounds are read), so no comparison sits in the firing decision
        no_crd = Signal()
        first_crd = Signal(w)
        next_crd = Signal(w)
        if self.dense:
            # r * dim of the next head, for both candidates, registered (the multiply does not follow the
            # channel's read and this op's firing, and the ref this op emits comes from a register)
            taken = self.head_taken("ref")
            lo_b, lo_s = Signal(w + 1), Signal(w + 1)
            lo_reg, hi_reg = Signal(w + 1), Signal(w + 1)
            m.d.comb += [lo_b.eq(self.i_ref_behind.data[:w] * self.dim), lo_s.eq(self.i_ref_stay.data[:w] * self.dim)]
            hi_b, hi_s = Signal(w + 1), Signal(w + 1)
            m.d.comb += [hi_b.eq(lo_b + self.dim), hi_s.eq(lo_s + self.dim)]
            dense_empty = Signal()
            m.d.sync += [lo_reg.eq(Mux(taken, lo_b, lo_s)), hi_reg.eq(Mux(taken, hi_b, hi_s)),
                         dense_empty.eq(Mux(taken, lo_b >= hi_b, lo_s >= hi_s))]
            m.d.comb += no_crd.eq(dense_empty)
            m.d.comb += [lo_now.eq(lo_reg), hi_now.eq(hi_reg), first_crd.eq(0), next_crd.eq(c)]
        else:
            behind = self.i_ref_behind.data[:w]
            # seg[head], seg[head + 1] and first[head] (crd[seg[head]] << 2 | single << 1 | fibre empty): reads of
            # latency 1 with an enable, i.e. registers that hold the head's entries. They load the entries of the token
            # behind the head when the head is read (it is the next head) and when the channel has no head (the
            # token behind it is then the one being written, the next head, as r_stay; a channel's r_behind),
            # and hold while the head stays. So the reads' paths end at the registers (in block RAM: the block's
            # address register) without a choice between candidates, and the head that stays is not read at all
            load = Signal()
            first = self.first_b_data
            m.d.comb += [
                self.seg_lo_b_addr.eq(behind),
                self.seg_hi_b_addr.eq(behind),          # the port reads entry addr + 1
                self.first_b_addr.eq(behind),
                self.seg_lo_b_en.eq(load),
                self.seg_hi_b_en.eq(load),
                self.first_b_en.eq(load),
                lo_now.eq(self.seg_lo_b_data),
                hi_now.eq(self.seg_hi_b_data),
                no_crd.eq(first[0]),
                first_crd.eq(first[2:]),
                next_crd.eq(self.crd_data),
            ]

        # the fibre of the head holds one coordinate (lo + 1 >= hi; an IDLE step then goes to END, not SCAN).
        # Compressed: the step sees a non-empty fibre (no_crd clear: the first array's flag, seg[r] < seg[r + 1]
        # as fuseflow.hw.memory.first_words writes it), so lo + 1 >= hi is hi == lo + 1, tested without a carry
        # chain on the registered bounds (successor); lo + 1 < hi was an adder and a comparator in a row before
        # the state register
        single = Signal()
        if self.dense:
            m.d.comb += single.eq(lo_now + 1 >= hi_now)
        else:
            m.d.comb += single.eq(self.first_b_data[1])
        # compressed: the fibre's emptiness (the first array's flag, read in the last cycle) is applied after the
        # state machine (below), which sees every reference as a non-empty fibre
        empty_fibre = is_empty(inp) | no_crd if self.dense else is_empty(inp)

        # bounds_latency 2: the seg and first data are the entries of the head of the cycle before, so a reference
        # step waits until the head has stayed for a cycle (steady: the input had this head and did not pop it);
        # and SCAN's end test (q + 1 == the fibre's end) is made a step ahead, into one register per bit test
        # (scan_end_terms, below), so the state register waits for their AND only
        registered_end = not self.dense and self.bounds_latency == 2
        scan_end_terms = Signal(w + 1)
        go_idle = inv
        if registered_end:
            steady = Signal()
            not_ref = is_stop(inp) | is_done(inp) | is_empty(inp)
            m.d.sync += steady.eq(inv & ~self.i_ref.ready)
            go_idle = inv & (steady | not_ref)
        with m.Switch(state):
            with m.Case(IDLE):
                m.d.comb += f.go.eq(go_idle)
                with m.If(is_stop(inp) | is_done(inp)):
                    m.d.comb += [f.push["crd"].eq(1), f.push["ref"].eq(1), f.pop["ref"].eq(1)]
                    with m.If(is_stop(inp)):
                        set_stop(m, oc, stop_level(inp) + 1)
                        set_stop(m, orf, stop_level(inp) + 1)
                    with m.Else():
                        copy_ctrl(m, oc, inp)
                        copy_ctrl(m, orf, inp)
                with m.Elif(empty_fibre):
                    m.d.comb += f.pop["ref"].eq(1)
                    with m.If(fsm_fire):
                        m.d.comb += nstate.eq(END)
                with m.Else():
                    m.d.comb += [f.push["crd"].eq(1), f.push["ref"].eq(1), f.pop["ref"].eq(1)]
                    set_data(m, oc, first_crd)
                    set_data(m, orf, lo_now)
                    with m.If(fsm_fire):
                        m.d.sync += c.eq(1)
                        # compressed: SCAN, or END for a single coordinate after the machine (below)
                        m.d.comb += nstate.eq(Mux(single, END, SCAN) if self.dense else SCAN)
                        if self.dense:
                            m.d.sync += last_q.eq(hi_now - 1)
                            m.d.comb += nq.eq(lo_now + 1)
                    if not self.dense:
                        # the bounds of the head's fibre, whether the step fires or not: they are used only by
                        # the SCAN steps after a firing of this step (whose emptiness and firing are then not on
                        # their paths)
                        m.d.sync += last_q.eq(hi_now)
                        m.d.comb += nq.eq(self.seg_lo_b_data1)
            with m.Case(SCAN):
                m.d.comb += [f.go.eq(1), f.push["crd"].eq(1), f.push["ref"].eq(1)]
                set_data(m, oc, 0)               # the data is next_crd, multiplexed last (below)
                set_data(m, orf, q)
                with m.If(fsm_fire):
                    m.d.sync += c.eq(c + 1)
                    m.d.comb += nq.eq(q + 1)
                    # q + 1 >= the fibre's end (dense: last_q is the end - 1; compressed: the end, and SCAN
                    # starts below it, so the last step has q + 1 == end, tested without a carry chain)
                    with m.If(q >= last_q if self.dense else
                              scan_end_terms.all() if registered_end else successor(q, last_q)):
                        m.d.comb += nstate.eq(END)
            with m.Case(END):
                m.d.comb += [f.go.eq(inv), f.push["crd"].eq(1), f.push["ref"].eq(1)]
                with m.If(is_stop(inp)):
                    m.d.comb += f.pop["ref"].eq(1)
                    set_stop(m, oc, stop_level(inp) + 1)
                    set_stop(m, orf, stop_level(inp) + 1)
                with m.Else():
                    set_stop(m, oc, 0)
                    set_stop(m, orf, 0)
                with m.If(fsm_fire):
                    m.d.comb += nstate.eq(IDLE)
        latency = op_latency(self.op_name, self.params)
        if latency == 1:
            m.d.comb += [self.o_crd.payload.ctrl.eq(oc_tok.ctrl),
                         self.o_crd.payload.data.eq(Mux(state == SCAN, next_crd, kept(m, oc_tok.data))),
                         self.o_ref.payload.eq(or_tok)]
            f.build(m)
            return m
        # compressed: crd_data arrives from the read's register one cycle after the firing; both tokens leave
        # through the output pipeline (every firing that pushes writes both outputs).
        # The state machine above took every reference head for a non-empty fibre. An empty one (no_crd, the
        # first array's flag: in block RAM the block's output, 5.6 ns after the clock) pops without pushing and
        # goes to END; no_crd picks, in one multiplexer level, between the two outcomes computed from
        # registers (kept wires, so that the synthesis keeps the flag last): the firing, the input's ready, the
        # seg and first reads' enable and the next state. The tokens and the next position do not depend on it
        # (nothing is pushed, and the next position is used only after a non-empty step)
        ref_step = Signal()                     # IDLE with a reference head: the step the flag decides
        m.d.comb += ref_step.eq((state == IDLE) & ~(is_stop(inp) | is_done(inp) | is_empty(inp)))
        no_crd_k = kept(m, no_crd, "no_crd_k")   # the flag as read (in block RAM after the row choice)
        # the LUT4 instances only where the first array is block RAM (elsewhere its flags come from registers and
        # the mapper does better with plain multiplexers: level_scan compressed 146 -> 180 MHz, +mem 144 -> 158)
        # (with bounds_latency 2 the flags leave the blocks' output registers early: plain multiplexers)
        lut_platform = platform if "first_b" in self.memories["first"].in_block and self.bounds_latency == 1 \
            else None
        push = Signal()                         # the step's push: not for an empty fibre
        m.d.comb += push.eq(f.push["crd"] & ~(ref_step & no_crd))
        room = Signal()
        # fire_full: the firing if the fibre is not empty (any other step: its firing)
        fire_empty = Signal()                   # ... if it is (a reference step then needs no room)
        pipe = OutputPipeline(m, [self.o_crd, self.o_ref], latency, f.go, push=push, fire=f.fire,
                              fire_from=lambda r: late_mux(m, lut_platform, no_crd_k,
                                                           kept(m, fire_empty, "fire_empty_k"),
                                                           kept(m, fire_full, "fire_full_k"), "fire_late"))
        m.d.comb += [room.eq(pipe.inflight != latency),
                     fire_full.eq(f.go & (~f.push["crd"] | room)),
                     fire_empty.eq(f.go & (~(f.push["crd"] & ~ref_step) | room))]
        # the input's ready and the reads' enable (the head is read or there is none: the reads load the next
        # head's entries)
        ready_full, ready_empty = Signal(), Signal()
        m.d.comb += [ready_full.eq(fire_full & f.pop["ref"]), ready_empty.eq(fire_empty & f.pop["ref"])]
        ready = late_mux(m, lut_platform, no_crd_k, kept(m, ready_empty, "ready_empty_k"),
                         kept(m, ready_full, "ready_full_k"), "ready_late")
        if registered_end:
            # bounds_latency 2: the reads also load while the head is not a reference (its entries are never used,
            # and the reference behind it is loaded when it is popped), so only a reference head is decoded
            # further: it is read by an IDLE step once steady, with room or for an empty fibre (no state, room or
            # stop level for the other tokens in front of the blocks' clock enables)
            ref_wait = Signal()                 # a reference head that an IDLE step reads once it has room
            m.d.comb += ref_wait.eq((state == IDLE) & steady & ~not_ref)
            load_next = ~inv | not_ref | ref_wait & (room | no_crd)
        else:
            load_next = late_mux(m, lut_platform, no_crd_k, kept(m, ready_empty | ~inv, "load_empty_k"),
                                 kept(m, ready_full | ~inv, "load_full_k"), "load_late")
        m.d.comb += [self.i_ref.ready.eq(ready), load.eq(load_next)]
        # the next state: the machine's (it fires as fire_full; a reference step goes to SCAN) unless a reference
        # step fires with an empty fibre (END) or with a single coordinate (the first array's second flag: END)
        ref_fire_full, ref_fire_empty = Signal(), Signal()
        m.d.comb += [ref_fire_full.eq(ref_step & fire_full), ref_fire_empty.eq(ref_step & fire_empty)]
        ns_base = kept(m, nstate, "ns_base_k")
        to_end = late_mux(m, lut_platform, no_crd_k, kept(m, ref_fire_empty, "ref_fire_empty_k"),
                          kept(m, ref_fire_full, "ref_fire_full_k"), "to_end_late", MUX_AND_INIT,
                          kept(m, single, "single_k"))
        # state = to_end ? END : ns_base, per bit through a LUT4 too (otherwise the synthesis turns the machine's
        # holding into the register's clock enable, a wide function of to_end)
        assert (END, SCAN) == (2, 1)
        m.d.sync += state.eq(Cat(late_mux(m, lut_platform, to_end, 0, ns_base[0], "state0_late"),
                                 late_mux(m, lut_platform, to_end, 1, ns_base[1], "state1_late")))
        # the crd read's address is the next position (its data serves a SCAN step in the next cycle): lo + 1 in
        # IDLE (from seg_lo's copy holding seg + 1), q + 1 after a SCAN step (SCAN always pushes and needs no
        # head: it fires when the pipeline has room), else q
        if registered_end:
            # q + 1 in a register (q_plus1, crd's address bits), so no carry chain runs from q into the block's
            # address; it loads seg[r] + 2 in every IDLE cycle (the adder after the block's output, into a register)
            # and steps with q. And the end test a step ahead: in every IDLE cycle the first SCAN step's
            # (seg[r] + 2 == seg[r + 1]; used only after the step fires), at each SCAN firing the next step's
            # (q + 2 == end); each the per-bit tests, no carry chain
            q_plus1 = Signal(w)
            with m.If(state == IDLE):
                m.d.sync += q_plus1.eq(self.seg_lo_b_data1[:w] + 1)
            with m.Elif((state == SCAN) & room):
                m.d.sync += q_plus1.eq(q_plus1 + 1)
            m.d.comb += self.crd_addr.eq(Mux(state == IDLE, self.seg_lo_b_data1,
                                             Mux((state == SCAN) & room, q_plus1, q)))
            with m.If(state == IDLE):
                m.d.sync += scan_end_terms.eq(Cat(*second_successor_terms(lo_now, hi_now)))
            with m.Elif((state == SCAN) & room):
                m.d.sync += scan_end_terms.eq(Cat(*second_successor_terms(q, last_q)))
        else:
            m.d.comb += self.crd_addr.eq(Mux(state == IDLE, self.seg_lo_b_data1,
                                             Mux((state == SCAN) & room, q + 1, q)))
        crd_now = next_crd                      # crd[q] at the last stage (a read of MEMORY_READ_LATENCY)
        for i in range(MEMORY_READ_LATENCY, latency):   # none unless the op's latency grows beyond the read's
            r = Signal.like(next_crd, name=f"crd_data_p{i}")
            m.d.sync += r.eq(crd_now)
            crd_now = r
        scan = pipe.beside(state == SCAN, "scan")
        oc_last = token_layout(self.port_info["o_crd"][1])(pipe.beside(oc_tok, "crd"))
        crd_last = Signal.like(oc_tok)
        m.d.comb += [crd_last.ctrl.eq(oc_last.ctrl), crd_last.data.eq(Mux(scan, crd_now, oc_last.data))]
        pipe.connect([crd_last, pipe.beside(or_tok, "ref")])
        return m
