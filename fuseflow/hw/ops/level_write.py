"""level_write: builds one level (seg, crd) of an output tensor from its coordinate stream.

fuseflow/sim/ops/level_write.py: pops one token per firing (no outputs). A coordinate is written to
``crd[count]``; a stop that ends a fibre (after a coordinate, after S0, or a bare stop at the start of the
top level) writes ``seg[seg_count] = count``; at the top level, D with no fibre yet writes ``seg[1] = 0``.

Write interfaces: ``crd_waddr/crd_wdata/crd_wen``, ``seg_waddr/seg_wdata/seg_wen`` and
``first_waddr/first_wdata/first_wen`` (synchronous write ports; ``first`` is the level's per-fibre first
coordinate, emptiness and whether it holds exactly one coordinate, ``fuseflow.hw.memory.first_words``, which a
level_scan of the tensor reads: the fibre's first coordinate writes ``first[fibre] = crd << 2 | 2`` (single), its
second one ``first[fibre] = crd0 << 2`` (the first coordinate, kept in a register), a fibre that ends without one
``first[fibre] = 1``; with ``dense_above``, the levels above dense, every stop ends a fibre),
``count`` (crd entries written), ``seg_count`` (seg entries, seg[0] included) and ``fibre_count`` (first
entries, ``seg_count - 1``), ``done``
(1 from the cycle after the D firing once every write has landed). ``seg[0] = 0`` is written by the
level writer itself in the first cycle without an input head, or after the D firing (cycle 0 in a kernel,
since a writer's input is at least two ops downstream of a root), so the memory needs no initialisation.
"""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib.wiring import Out

from ..token import is_done, is_stop, stop_level
from ._common import OpComponent

START, DATA, LAST_S0, LAST_S = 0, 1, 2, 3


class LevelWrite(OpComponent):
    op_name = "level_write"

    def _add_members(self, members):
        w = self.crd_width
        self._add_write(members, "seg", "seg", w, "seg_count")
        self._add_write(members, "crd", "crd", w, "count")
        self._add_write(members, "first", "first", w + 2, "fibre_count")
        members["done"] = Out(1)

    def elaborate(self, platform):
        m = Module()
        w = self.crd_width
        top = self.params.get("level", 0) == 0
        f = self.fire_logic()
        x, xv = self.i_crd.payload, self.i_crd.valid
        last = Signal(range(4))
        cnt = Signal(w + 1)
        scnt = Signal(w + 1, init=1)
        seg0 = Signal(init=1)            # seg[0] = 0 still to be written
        finished = Signal()
        seg_write = Signal()
        m.d.comb += [f.go.eq(xv & ~finished), f.pop["crd"].eq(1),
                     self.count.eq(cnt), self.seg_count.eq(scnt), self.fibre_count.eq(scnt - 1),
                     self.done.eq(finished & ~seg0),
                     self.crd_waddr.eq(cnt), self.crd_wdata.eq(x.data[:w])]
        # the fibre being written is fibre scnt - 1 (its end writes seg[scnt]); last != DATA: it has no
        # coordinate yet
        # the written words and addresses come from registers and the head, not from the firing (they reach
        # the top's capacity check and the memories' write ports; only the enables follow the firing): a fibre's
        # first coordinate writes first = crd << 2 | 2 (single so far), its second one first = crd0 << 2 (crd0: the
        # first coordinate, registered), a stop that ends an empty fibre first = 1
        crd0 = Signal(w)
        one = Signal()                   # the fibre being written holds exactly one coordinate
        m.d.comb += [self.first_waddr.eq(scnt - 1),
                     self.first_wdata.eq(Mux(x.ctrl, 1, Mux(last != DATA, x.data[:w] << 2 | 2, crd0 << 2)))]
        with m.If(~x.ctrl):
            m.d.comb += [self.crd_wen.eq(f.fire), self.first_wen.eq(f.fire & ((last != DATA) | one))]
            with m.If(f.fire):
                m.d.sync += [cnt.eq(cnt + 1), last.eq(DATA), one.eq(last != DATA)]
                with m.If(last != DATA):
                    m.d.sync += crd0.eq(x.data[:w])
        with m.Elif(is_stop(x)):
            ends = (last == DATA) | (last == LAST_S0)
            if top:
                ends = ends | (last == START)
            if self.params.get("dense_above"):       # the levels above are dense: every stop ends a fibre
                ends = 1
            m.d.comb += seg_write.eq(f.fire & ends)
            with m.If(f.fire):
                m.d.sync += last.eq(LAST_S)
                with m.If(stop_level(x) == 0):
                    m.d.sync += last.eq(LAST_S0)
        with m.Elif(is_done(x)):
            if top:
                m.d.comb += seg_write.eq(f.fire & (scnt == 1))
            with m.If(f.fire):
                m.d.sync += finished.eq(1)
        # seg[0] = 0 is written in a cycle without an input head (cycle 0 in a kernel) or once finished, so
        # never with a fibre's end (which needs a head and no finish): the seg address and word then depend on
        # registers only
        seg0_now = Signal()
        m.d.comb += [seg0_now.eq(seg0 & (~xv | finished)),
                     self.seg_waddr.eq(Mux(seg0_now, 0, scnt)), self.seg_wdata.eq(Mux(seg0_now, 0, cnt)),
                     self.seg_wen.eq(seg_write | seg0_now)]
        with m.If(seg_write):
            with m.If(last != DATA):              # the fibre ends empty
                m.d.comb += self.first_wen.eq(1)
            m.d.sync += scnt.eq(scnt + 1)
        with m.If(seg0_now):
            m.d.sync += seg0.eq(0)
        f.build(m)
        return m
