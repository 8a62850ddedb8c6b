"""spacc: sparse accumulator (fuseflow/sim/ops/spacc.py), orders 1 and 2.

Storage (owned by the op, not a tensor memory): a dense accumulator array ``acc`` (value width x
``dim`` entries for order 1, ``dim_outer * dim`` for order 2; one combinational read port, one synchronous
write port) and an occupancy bitmap register (``dim`` or ``dim_outer * dim`` bits). Emission walks the
bitmap with a find-first-set, so entries leave in sorted order one per cycle. Capacity: inner
coordinates must be ``< dim`` (and outer ones ``< dim_outer``); a coordinate beyond is not accumulated
and sets the sticky ``overflow`` output. The bitmap and find-first-set cost O(dim) (order 2:
O(dim_outer * dim)) logic: meant for dims up to a few hundred.

Order 1 (``i_crd_inner``, ``i_val`` -> ``o_crd_inner``, ``o_val``), accumulate phase, both heads:
coordinate j -> ``acc[j] = f(acc[j], v)`` (or v when j is new; N = 0), pops both, no output; ``S0`` ->
pops both; ``S_n`` (n >= 1) -> pops both, no output, then the emission phase: one firing per occupied j
(ascending) emitting ``(j, acc[j])`` and clearing it, then one firing emitting ``S_(n-1)`` on both; D -> D.

Order 2 (adds ``i_crd_outer0`` / ``o_crd_outer0``; the accumulated sub-tree is (i, j)): outside an
inner fibre the outer head is inspected: i -> pops it, the inner fibre of i follows (``j`` + values
accumulated into row i, its stop pops both; a stop of level >= 1 means the outer fibre is closed and the
next outer stop is popped alone); an outer stop ``S_m`` (with ``S_(m+1)`` on the inner streams unless
closed) pops, and for m >= 1 starts the emission: per non-empty row i (ascending) its entries
(``i`` on ``o_crd_outer0`` with the first one only), then ``S0`` on crd_inner/val, except after the last
row, which gets ``S_m``, ``S_m`` and ``S_(m-1)`` on crd_outer0 (also the whole output when no row is
non-empty). D -> D on all three.
"""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ...errors import HardwareError
from ..stream import all_of
from ..token import is_data_or_empty, is_done, is_empty, is_stop, stop_level
from ._common import OpComponent, copy_ctrl, set_data, set_stop
from .alu import fixed_op

ACC, EMIT, ROWSTOP = 0, 1, 2


def _ffs(m, bits, n, name):
    """Index of the lowest set bit of ``bits`` (n bits); 0 when none."""
    idx = Signal(range(max(n, 2)), name=name)
    for i in reversed(range(n)):
        with m.If(bits[i]):
            m.d.comb += idx.eq(i)
    return idx


class Spacc(OpComponent):
    op_name = "spacc"

    def _add_members(self, members):
        p = self.params
        if p.get("dim") is None:
            raise HardwareError("op spacc", "needs 'dim' (size of the innermost dimension: the accumulator's "
                                            "capacity in hardware)")
        self.dim = int(p["dim"])
        self.order = int(p["order"])
        if self.order == 2:
            if p.get("dim_outer") is None:
                raise HardwareError("op spacc", "order 2 needs 'dim_outer' (size of the outer dimension)")
            self.dim_outer = int(p["dim_outer"])
        else:
            self.dim_outer = 1
        if self.dim < 1 or self.dim_outer < 1:
            raise HardwareError("op spacc", "dim and dim_outer must be >= 1")
        members["overflow"] = Out(1)

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        w = self.crd_width
        dim, dout = self.dim, self.dim_outer
        n = dim * dout
        f = self.fire_logic()
        acc = Memory(shape=unsigned(W), depth=n, init=[])
        m.submodules.acc = acc
        rp = acc.read_port(domain="comb")
        wp = acc.write_port()
        bitmap = Signal(n)
        overflow = Signal()
        m.d.comb += self.overflow.eq(overflow)
        phase = Signal(range(3))
        level = Signal(8)                        # level of the stop that closes the emission

        c, cv = self.i_crd_inner.payload, self.i_crd_inner.valid
        v, vv = self.i_val.payload, self.i_val.valid
        oc, ov = self.o_crd_inner, self.o_val
        x = Signal(signed(W))
        m.d.comb += x.eq(Mux(is_empty(v), 0, v.data[:W].as_signed()))
        cur_val = Signal(signed(W))
        m.d.comb += cur_val.eq(rp.data.as_signed())
        merged = fixed_op(m, "add" if self.params["op"] == "sum" else "max", cur_val, x, fx, prefix="acc")

        def accumulate(row, cond):
            """Accumulate (row, c) <- v on fire (row: a Value or 0)."""
            j = c.data[:w]
            addr = Signal(range(max(n, 2)), name="acc_addr")
            ok = (j < dim) & (row < dout)
            m.d.comb += addr.eq(row * dim + j)
            occupied = bitmap.bit_select(addr, 1)
            m.d.comb += [rp.addr.eq(addr), wp.addr.eq(addr), wp.data.eq(Mux(occupied, merged, x)),
                         wp.en.eq(cond & ok)]
            with m.If(cond):
                with m.If(ok):
                    m.d.sync += bitmap.bit_select(addr, 1).eq(1)
                with m.Else():
                    m.d.sync += overflow.eq(1)

        if self.order == 1:
            j = _ffs(m, bitmap, n, "emit_j")
            with m.Switch(phase):
                with m.Case(ACC):
                    m.d.comb += [f.go.eq(cv & vv), f.pop["crd_inner"].eq(1), f.pop["val"].eq(1)]
                    with m.If(is_data_or_empty(c)):
                        accumulate(0, f.fire)
                    with m.Elif(is_done(c)):
                        m.d.comb += [f.push["crd_inner"].eq(1), f.push["val"].eq(1)]
                        copy_ctrl(m, oc, c)
                        copy_ctrl(m, ov, c)
                    with m.Elif(is_stop(c) & (stop_level(c) != 0)):
                        with m.If(f.fire):
                            m.d.sync += [phase.eq(EMIT), level.eq(stop_level(c) - 1)]
                with m.Case(EMIT):
                    m.d.comb += [f.go.eq(1), f.push["crd_inner"].eq(1), f.push["val"].eq(1)]
                    with m.If(bitmap != 0):
                        m.d.comb += rp.addr.eq(j)
                        set_data(m, oc, j)
                        set_data(m, ov, cur_val)
                        with m.If(f.fire):
                            m.d.sync += bitmap.bit_select(j, 1).eq(0)
                    with m.Else():
                        set_stop(m, oc, level)
                        set_stop(m, ov, level)
                        with m.If(f.fire):
                            m.d.sync += phase.eq(ACC)
            f.build(m)
            return m

        # ---- order 2 ----
        ii, iv_ = self.i_crd_outer0.payload, self.i_crd_outer0.valid
        oi = self.o_crd_outer0
        cur = Signal(w)
        in_row = Signal()                        # reading the inner fibre of `cur`
        closed = Signal()
        first = Signal(init=1)                   # the next entry is its row's first
        rows = [bitmap[r * dim:(r + 1) * dim] for r in range(dout)]
        row_nz = Signal(dout)
        for r in range(dout):
            m.d.comb += row_nz[r].eq(rows[r].any())
        ei = _ffs(m, row_nz, dout, "emit_i")
        row_bits = Signal(dim)
        m.d.comb += row_bits.eq(bitmap.word_select(ei, dim))
        ej = _ffs(m, row_bits, dim, "emit_j")
        eaddr = Signal(range(max(n, 2)))
        m.d.comb += eaddr.eq(ei * dim + ej)
        pushes_all = [f.push["crd_inner"], f.push["crd_outer0"], f.push["val"]]
        pops_all = [f.pop["crd_inner"], f.pop["crd_outer0"], f.pop["val"]]

        def final_stops():
            m.d.comb += [p.eq(1) for p in pushes_all]
            set_stop(m, oi, level - 1)
            set_stop(m, oc, level)
            set_stop(m, ov, level)
            with m.If(f.fire):
                m.d.sync += [phase.eq(ACC), first.eq(1)]

        with m.Switch(phase):
            with m.Case(ACC):
                with m.If(in_row):
                    m.d.comb += [f.go.eq(cv & vv), f.pop["crd_inner"].eq(1), f.pop["val"].eq(1)]
                    with m.If(is_data_or_empty(c)):
                        accumulate(cur, f.fire)
                    with m.Else():
                        with m.If(f.fire):
                            m.d.sync += [in_row.eq(0), closed.eq(stop_level(c) != 0)]
                with m.Elif(~ii.ctrl):
                    m.d.comb += [f.go.eq(iv_), f.pop["crd_outer0"].eq(1)]
                    with m.If(f.fire):
                        m.d.sync += [cur.eq(ii.data[:w]), in_row.eq(1)]
                with m.Elif(is_done(ii)):
                    m.d.comb += [f.go.eq(iv_ & cv & vv)] + [p.eq(1) for p in pushes_all + pops_all]
                    copy_ctrl(m, oi, ii)
                    copy_ctrl(m, oc, ii)
                    copy_ctrl(m, ov, ii)
                with m.Else():
                    with m.If(closed):
                        m.d.comb += [f.go.eq(iv_), f.pop["crd_outer0"].eq(1)]
                    with m.Else():
                        m.d.comb += [f.go.eq(iv_ & cv & vv)] + [p.eq(1) for p in pops_all]
                    with m.If(f.fire):
                        m.d.sync += closed.eq(0)
                        with m.If(stop_level(ii) != 0):
                            m.d.sync += [phase.eq(EMIT), level.eq(stop_level(ii)), first.eq(1)]
            with m.Case(EMIT):
                m.d.comb += f.go.eq(1)
                with m.If(row_nz == 0):
                    final_stops()
                with m.Else():
                    m.d.comb += [f.push["crd_inner"].eq(1), f.push["val"].eq(1), f.push["crd_outer0"].eq(first),
                                 rp.addr.eq(eaddr)]
                    set_data(m, oi, ei)
                    set_data(m, oc, ej)
                    set_data(m, ov, cur_val)
                    with m.If(f.fire):
                        m.d.sync += [bitmap.bit_select(eaddr, 1).eq(0), first.eq(0)]
                        with m.If((row_bits & (row_bits - 1)) == 0):
                            m.d.sync += phase.eq(ROWSTOP)
            with m.Case(ROWSTOP):
                m.d.comb += f.go.eq(1)
                with m.If(row_nz == 0):
                    final_stops()
                with m.Else():
                    m.d.comb += [f.push["crd_inner"].eq(1), f.push["val"].eq(1)]
                    set_stop(m, oc, 0)
                    set_stop(m, ov, 0)
                    with m.If(f.fire):
                        m.d.sync += [phase.eq(EMIT), first.eq(1)]
        f.build(m)
        return m
