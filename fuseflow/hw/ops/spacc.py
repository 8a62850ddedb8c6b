"""spacc: sparse accumulator (fuseflow/sim/ops/spacc.py), orders 1, 2 and 3, ``group`` reduced levels.

Streams, outermost first (sub-tree depth d = stream d): ``crd_outer{order-2}`` .. ``crd_outer0``,
``crd_inner`` (with ``val``); capacities ``dims`` = (``dim_outer1``,) ``dim_outer``, ``dim`` for the
streams of order 3 (2; order 1: ``dim``).

Storage (owned by the op, not a tensor memory): a dense accumulator array ``acc`` (value width x
``prod(dims)`` entries, address ``(a * dim_outer + b) * dim + j``; one combinational read port, one
synchronous write port) and an occupancy bitmap register of ``prod(dims)`` bits. Emission walks the bitmap
with find-first-set (order 2: lowest non-empty row, then its lowest bit; order 3: lowest non-empty plane,
row, bit), so entries leave in sorted order one per cycle. Capacity: a coordinate of stream d must be
``< dims[d]``; an entry beyond is not accumulated and sets the sticky ``overflow`` output. The bitmap and the
priority encoders cost O(prod(dims)) logic: meant for small capacities (up to a few hundred entries; order 3
is for small tensors).

Accumulate phase: register ``dep`` is the stream being read, ``closed`` says its next token is a stop whose
fibre end a deeper stream already signalled, ``pre[d]`` holds the current coordinate of stream d.
- ``dep`` = innermost: both heads (crd_inner, val); data -> ``acc[pre, j] = f(acc, v)`` (or v when new;
  N = 0), pops both; a stop pops both and ends the fibre (below).
- ``dep`` = d < innermost, ``closed``: pops stream d's stop alone and ends its fibre.
- otherwise stream d's head: data -> ``pre[d]``, ``dep = d + 1``; a stop (an empty fibre: every deeper
  stream holds its bare stop) pops streams d.. and val together and ends the fibre; D (d = 0) needs every
  head and emits D on every output.
- fibre end of stream d with a stop of level j: d > 0 -> ``dep = d - 1``, ``closed = j != 0``; d = 0 and
  j >= group -> the emission phase with ``base = j - group``.

Emission: one firing per entry (coordinate on stream d only with the first entry of its fibre), then per
row end one stop firing (order 3: S1 on crd_inner/val + S0 on crd_outer0 when the plane also ended, else
S0 on crd_inner/val; order 2: S0 on crd_inner/val), except after the last row (or for an empty group):
S_(base + d) on stream d (val: as crd_inner), back to the accumulate phase.
"""

from math import prod

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ...errors import HardwareError
from ...samml.registry import check_spacc
from ..stream import all_of
from ..token import is_data_or_empty, is_done, is_empty, stop_level
from ._common import OpComponent, copy_ctrl, set_data, set_stop
from .alu import fixed_op

ACC, EMIT, ROWSTOP = 0, 1, 2
_PORT = {"dim": "crd_inner", "dim_outer": "crd_outer0", "dim_outer1": "crd_outer1"}


def _ffs(m, bits, n, name):
    """Index of the lowest set bit of ``bits`` (n bits); 0 when none."""
    idx = Signal(range(max(n, 2)), name=name)
    for i in reversed(range(n)):
        with m.If(bits[i]):
            m.d.comb += idx.eq(i)
    return idx


def _one_bit(x):
    """At most one bit of ``x`` is set."""
    return (x & (x - 1)) == 0


class Spacc(OpComponent):
    op_name = "spacc"

    def _add_members(self, members):
        p = self.params
        check_spacc(p, "op spacc")
        self.order = int(p["order"])
        self.group = int(p.get("group") or 1)
        names = ["dim_outer1", "dim_outer", "dim"][3 - self.order:]
        for name in names:
            if p.get(name) is None:
                raise HardwareError("op spacc", f"order {self.order} needs '{name}' (size of {_PORT[name]}'s "
                                                "dimension: the accumulator's capacity in hardware)")
            if int(p[name]) < 1:
                raise HardwareError("op spacc", f"'{name}' must be >= 1, got {p[name]}")
        self.dims = [int(p[x]) for x in names]
        self.dim = self.dims[-1]
        members["overflow"] = Out(1)

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        w = self.crd_width
        order, dims = self.order, self.dims
        dim = dims[-1]
        n = prod(dims)
        f = self.fire_logic()
        acc = Memory(shape=unsigned(W), depth=n, init=[])
        m.submodules.acc = acc
        rp = acc.read_port(domain="comb")
        wp = acc.write_port()
        bitmap = Signal(n)
        overflow = Signal()
        m.d.comb += self.overflow.eq(overflow)
        phase = Signal(range(3))
        base = Signal(8)                         # m - group of the stop that closed the group

        names = [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]
        ins = [getattr(self, f"i_{x}") for x in names]
        outs = [getattr(self, f"o_{x}") for x in names]
        c, cv = self.i_crd_inner.payload, self.i_crd_inner.valid
        v, vv = self.i_val.payload, self.i_val.valid
        oc, ov = self.o_crd_inner, self.o_val
        x = Signal(signed(W))
        m.d.comb += x.eq(Mux(is_empty(v), 0, v.data[:W].as_signed()))
        cur_val = Signal(signed(W))
        m.d.comb += cur_val.eq(rp.data.as_signed())
        merged = fixed_op(m, "add" if self.params["op"] == "sum" else "max", cur_val, x, fx, prefix="acc")

        dep = Signal(range(max(order, 2)))
        closed = Signal()
        pre = [Signal(w, name=f"pre{d}") for d in range(order - 1)]
        first = [Signal(init=1, name=f"first{d}") for d in range(order - 1)]

        def accumulate():
            """On fire: acc[pre, c] <- merge(v)."""
            j = c.data[:w]
            addr = Signal(range(max(n, 2)), name="acc_addr")
            ok = j < dim
            lin = 0
            for d in range(order - 1):
                lin = lin * dims[d] + pre[d] if d else pre[d]
                ok = ok & (pre[d] < dims[d])
            m.d.comb += addr.eq(lin * dim + j if order > 1 else j)
            occupied = bitmap.bit_select(addr, 1)
            m.d.comb += [rp.addr.eq(addr), wp.addr.eq(addr), wp.data.eq(Mux(occupied, merged, x)),
                         wp.en.eq(f.fire & ok)]
            with m.If(f.fire):
                with m.If(ok):
                    m.d.sync += bitmap.bit_select(addr, 1).eq(1)
                with m.Else():
                    m.d.sync += overflow.eq(1)

        def end_fibre(d, j):
            """On fire: the fibre of stream d ended with a stop of level j."""
            with m.If(f.fire):
                if d:
                    m.d.sync += [dep.eq(d - 1), closed.eq(j != 0)]
                else:
                    m.d.sync += closed.eq(0)
                    with m.If(j >= self.group):
                        m.d.sync += [phase.eq(EMIT), base.eq(j - self.group)] + [s.eq(1) for s in first]

        def final_stops():
            m.d.comb += [f.push[p].eq(1) for p in f.push]
            for d, o in enumerate(outs):
                set_stop(m, o, base + d)
            set_stop(m, ov, base + order - 1)
            with m.If(f.fire):
                m.d.sync += phase.eq(ACC)

        # ---- find-first-set over the bitmap, outermost level first
        if order == 1:
            ecrd = [_ffs(m, bitmap, n, "emit_j")]
            row_bits = bitmap
            plane_last = None
        else:
            nrows = n // dim
            row_nz = Signal(nrows)
            for r in range(nrows):
                m.d.comb += row_nz[r].eq(bitmap[r * dim:(r + 1) * dim].any())
            if order == 2:
                ea = _ffs(m, row_nz, nrows, "emit_a")
                ecrd = [ea]
                row_idx = ea
                plane_last = None
            else:
                d0, d1 = dims[0], dims[1]
                plane_nz = Signal(d0)
                for a in range(d0):
                    m.d.comb += plane_nz[a].eq(row_nz[a * d1:(a + 1) * d1].any())
                ea = _ffs(m, plane_nz, d0, "emit_a")
                plane_rows = Signal(d1)
                m.d.comb += plane_rows.eq(row_nz.word_select(ea, d1))
                eb = _ffs(m, plane_rows, d1, "emit_b")
                row_idx = Signal(range(max(nrows, 2)))
                m.d.comb += row_idx.eq(ea * d1 + eb)
                ecrd = [ea, eb]
                plane_last = _one_bit(plane_rows)
            row_bits = Signal(dim)
            m.d.comb += row_bits.eq(bitmap.word_select(row_idx, dim))
            ej = _ffs(m, row_bits, dim, "emit_j")
            ecrd.append(ej)
        eaddr = Signal(range(max(n, 2)))
        m.d.comb += eaddr.eq(ecrd[-1] if order == 1 else row_idx * dim + ecrd[-1])
        plane_end = Signal()                     # order 3: the row just emitted was its plane's last

        with m.Switch(phase):
            with m.Case(ACC):
                with m.Switch(dep):
                    for d in range(order):
                        with m.Case(d):
                            hd, hv = ins[d].payload, ins[d].valid
                            if d == order - 1:
                                m.d.comb += [f.pop["crd_inner"].eq(1), f.pop["val"].eq(1)]
                                with m.If(is_data_or_empty(c)):
                                    m.d.comb += f.go.eq(cv & vv)
                                    accumulate()
                                with m.Elif(is_done(c)):
                                    if d == 0:
                                        m.d.comb += f.go.eq(cv & vv)
                                        m.d.comb += [f.push[p].eq(1) for p in f.push]
                                        for o in outs + [ov]:
                                            copy_ctrl(m, o, c)
                                with m.Else():
                                    m.d.comb += f.go.eq(cv & vv)
                                    end_fibre(d, stop_level(c))
                                continue
                            with m.If(closed):
                                m.d.comb += [f.go.eq(hv), f.pop[names[d]].eq(1)]
                                end_fibre(d, stop_level(hd))
                            with m.Elif(~hd.ctrl):
                                m.d.comb += [f.go.eq(hv), f.pop[names[d]].eq(1)]
                                with m.If(f.fire):
                                    m.d.sync += [pre[d].eq(hd.data[:w]), dep.eq(d + 1)]
                            with m.Else():
                                deeper = ins[d:] + [self.i_val]
                                m.d.comb += [f.go.eq(all_of(s.valid for s in deeper))]
                                m.d.comb += [f.pop[p].eq(1) for p in names[d:] + ["val"]]
                                if d == 0:
                                    with m.If(is_done(hd)):
                                        m.d.comb += [f.push[p].eq(1) for p in f.push]
                                        for o in outs + [ov]:
                                            copy_ctrl(m, o, hd)
                                    with m.Else():
                                        end_fibre(d, stop_level(hd))
                                else:
                                    end_fibre(d, stop_level(hd))
            with m.Case(EMIT):
                m.d.comb += f.go.eq(1)
                with m.If(bitmap == 0):
                    final_stops()
                with m.Else():
                    m.d.comb += [f.push["crd_inner"].eq(1), f.push["val"].eq(1), rp.addr.eq(eaddr)]
                    for d in range(order - 1):
                        m.d.comb += f.push[names[d]].eq(first[d])
                    for d in range(order):
                        set_data(m, outs[d], ecrd[d])
                    set_data(m, ov, cur_val)
                    with m.If(f.fire):
                        m.d.sync += [bitmap.bit_select(eaddr, 1).eq(0)] + [s.eq(0) for s in first]
                        if order > 1:
                            with m.If(_one_bit(row_bits)):
                                m.d.sync += phase.eq(ROWSTOP)
                                if plane_last is not None:
                                    m.d.sync += plane_end.eq(plane_last)
            if order > 1:
                with m.Case(ROWSTOP):
                    m.d.comb += f.go.eq(1)
                    with m.If(bitmap == 0):
                        final_stops()
                    with m.Else():
                        m.d.comb += [f.push["crd_inner"].eq(1), f.push["val"].eq(1)]
                        if order == 3:
                            m.d.comb += f.push[names[1]].eq(plane_end)
                            set_stop(m, outs[1], 0)
                            set_stop(m, oc, plane_end)
                            set_stop(m, ov, plane_end)
                        else:
                            set_stop(m, oc, 0)
                            set_stop(m, ov, 0)
                        with m.If(f.fire):
                            m.d.sync += phase.eq(EMIT)
                            m.d.sync += first[order - 2].eq(1)
                            if order == 3:
                                m.d.sync += first[0].eq(plane_end)
        f.build(m)
        return m
