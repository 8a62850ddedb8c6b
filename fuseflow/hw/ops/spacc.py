"""spacc: sparse accumulator (fuseflow/sim/ops/spacc.py), orders 1, 2 and 3, ``group`` reduced levels,
double-buffered.

Streams, outermost first (sub-tree depth d = stream d): ``crd_outer{order-2}`` .. ``crd_outer0``,
``crd_inner`` (with ``val``); capacities ``dims`` = (``dim_outer1``,) ``dim_outer``, ``dim`` for the
streams of order 3 (2; order 1: ``dim``).

Storage (owned by the op, not a tensor memory), two banks: an accumulator array ``acc`` of ``2 * prod(dims)``
values (bank k at ``k * prod(dims)``, entry ``(a * dim_outer + b) * dim + j``; two synchronous read ports, one
per side, addressed one cycle ahead from the next state (the accumulate side's from ``after("crd_inner")``,
the next head, and transparent to the write port; the emit side's from the next bitmap), so the data is there
in the cycle a combinational read would give it and the timing is unchanged; block RAM from
:data:`fuseflow.hw.memory.BLOCK_RAM_MIN_BITS`; one synchronous write port, the accumulate side's) and an
occupancy bitmap register of
``prod(dims)`` bits per bank. Emission walks its bank's bitmap with find-first-set (order 2: lowest non-empty
row, then its lowest bit; order 3: lowest non-empty plane, row, bit), so entries leave in sorted order one per
cycle; the find-first-set runs on the next bitmap and its result is registered. Capacity: a coordinate of stream d must be ``< dims[d]``; an entry beyond is not accumulated and sets
the sticky ``overflow`` output. The bitmaps and priority encoders cost O(prod(dims)) logic: meant for small
capacities (up to a few hundred entries; order 3 is for small tensors).

Two processes, each with its own firing rule (``_common.Fire``): the accumulate side pops the inputs and never
pushes; the emit side pushes the outputs and never pops. ``full[k]``: bank k was handed over and is not yet
emitted. The accumulate side writes bank ``ab`` and fires (except for D) only while ``full[ab] = 0``; the
group-closing firing sets ``full[ab]``, stores ``base[ab] = m - group`` and flips ``ab``. The emit side works
on bank ``eb`` while ``full[eb]``; its last firing (the closing stops) clears ``full[eb]`` and flips ``eb``.
Registers switch at the clock edge, so a bank closed in cycle t is emitted from t + 1 and a bank freed in
cycle t' is written from t' + 1 (the simulator's channel of depth 2).

Accumulate side: register ``dep`` is the stream being read, ``closed`` says its next token is a stop whose
fibre end a deeper stream already signalled, ``pre[d]`` holds the current coordinate of stream d.
- ``dep`` = innermost: both heads (crd_inner, val); data -> ``acc[ab, pre, j] = f(acc, v)`` (or v when new;
  N = 0), pops both; a stop pops both and ends the fibre (below).
- ``dep`` = d < innermost, ``closed``: pops stream d's stop alone and ends its fibre.
- otherwise stream d's head: data -> ``pre[d]``, ``dep = d + 1``; a stop (an empty fibre: every deeper
  stream holds its bare stop) pops streams d.. and val together and ends the fibre; D (d = 0) needs every
  head, pops them and sets ``done_in`` (no bank needed).
- fibre end of stream d with a stop of level j: d > 0 -> ``dep = d - 1``, ``closed = j != 0``; d = 0 and
  j >= group -> hand the bank over.

Emit side (bank ``eb``): one firing per entry (coordinate on stream d only with the first entry of its fibre),
then per row end one stop firing (order 3: S1 on crd_inner/val + S0 on crd_outer0 when the plane also ended,
else S0 on crd_inner/val; order 2: S0 on crd_inner/val), except after the last row (or for an empty group):
S_(base + d) on stream d (val: as crd_inner), which frees the bank. With no full bank and ``done_in``: D on
every output, once.
"""

from math import prod

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from ...errors import HardwareError
from ...samml.registry import REDUCE_MERGE, check_spacc
from ..stream import all_of
from ..token import is_data_or_empty, is_done, is_empty, stop_level
from ._common import Fire, OpComponent, set_data, set_done, set_stop
from ...hw.memory import memory_storage
from .alu import fixed_op

_PORT = {"dim": "crd_inner", "dim_outer": "crd_outer0", "dim_outer1": "crd_outer1"}


def _ffs(m, bits, n, name):
    """Index of the lowest set bit of ``bits`` (n bits); 0 when none. A tree (log2 n levels of multiplexers
    beside OR reductions), not a priority chain of n multiplexers."""
    def lowest(lo, width):              # (any bit set, index within bits[lo:lo + width])
        if width == 1:
            return bits[lo], Const(0, 0)
        h = 1 << ((width - 1).bit_length() - 1)       # the largest power of two below width
        a_any, a_idx = lowest(lo, h)
        b_any, b_idx = lowest(lo + h, width - h)
        k = (h - 1).bit_length()                      # index bits within a half
        return a_any | b_any, Cat(Mux(a_any, a_idx, b_idx)[:k] if k else Const(0, 0), ~a_any)
    idx = Signal(range(max(n, 2)), name=name)
    if n > 1:
        found, at = lowest(0, n)
        m.d.comb += idx.eq(Mux(found, at, 0))
    return idx


def _one_bit(x):
    """At most one bit of ``x`` is set."""
    return (x & (x - 1)) == 0


def _emit_index(m, bits, order, dims, prefix):
    """Find-first-set over a bank's bitmap ``bits``, outermost level first: ``(crds, row_idx, row_one,
    plane_last)``, the coordinates of the lowest entry per stream, its row, whether that row holds one entry
    and (order 3) whether the row is its plane's last non-empty one."""
    n, dim = prod(dims), dims[-1]
    if order == 1:
        return [_ffs(m, bits, n, f"{prefix}emit_j")], None, _one_bit(bits), None
    nrows = n // dim
    row_nz = Signal(nrows, name=f"{prefix}row_nz")
    for r in range(nrows):
        m.d.comb += row_nz[r].eq(bits[r * dim:(r + 1) * dim].any())
    plane_last = None
    if order == 2:
        ea = _ffs(m, row_nz, nrows, f"{prefix}emit_a")
        crds, row_idx = [ea], ea
    else:
        d0, d1 = dims[0], dims[1]
        plane_nz = Signal(d0, name=f"{prefix}plane_nz")
        for a in range(d0):
            m.d.comb += plane_nz[a].eq(row_nz[a * d1:(a + 1) * d1].any())
        ea = _ffs(m, plane_nz, d0, f"{prefix}emit_a")
        plane_rows = Signal(d1, name=f"{prefix}plane_rows")
        m.d.comb += plane_rows.eq(row_nz.word_select(ea, d1))
        eb_ = _ffs(m, plane_rows, d1, f"{prefix}emit_b")
        row_idx = Signal(range(max(nrows, 2)), name=f"{prefix}row_idx")
        m.d.comb += row_idx.eq(ea * d1 + eb_)
        crds = [ea, eb_]
        plane_last = _one_bit(plane_rows)
    row_bits = Signal(dim, name=f"{prefix}row_bits")
    m.d.comb += row_bits.eq(bits.word_select(row_idx, dim))
    crds.append(_ffs(m, row_bits, dim, f"{prefix}emit_j"))
    return crds, row_idx, _one_bit(row_bits), plane_last


def _next_ffs(m, bm, eb, neb, eaddr, ab, set_bit, set_addr, clr_bit, n):
    """Order 1: find-first-set of the next emit bank's next bitmap, from candidates computed on the registered
    bitmaps only (per bank, so no bank multiplexer precedes them), chosen by this cycle's firings (which arrive
    late): bank eb loses at most its lowest bit (an emitted entry: then the next lowest, ffs with ``eaddr``
    cleared), the next emit bank gains at most one bit (an accumulated entry: then the smaller of its ffs and
    ``set_addr``, compared beside the candidates). Never both on one bank: while bank eb is full the accumulate
    side writes the other one. The same value as ffs(next bitmap), 0 when empty."""
    first = [_ffs(m, bm[k], n, f"emit_first{k}") for k in range(2)]
    rest = [Signal(n, name=f"emit_rest{k}") for k in range(2)]          # bank k without entry eaddr
    m.d.comb += [rest[k].eq(bm[k] & ~(1 << eaddr)[:n]) for k in range(2)]
    second = [_ffs(m, rest[k], n, f"emit_second{k}") for k in range(2)]
    nz = [bm[k].any() for k in range(2)]
    before = [set_addr < first[k] for k in range(2)]                   # the added entry comes first
    same = neb == eb
    gains = set_bit & (ab == neb)
    own = Mux(clr_bit, Mux(eb, second[1], second[0]),
              Mux(gains & (~Mux(eb, nz[1], nz[0]) | (set_addr < eaddr)), set_addr, eaddr))
    other = Mux(gains & ~Mux(eb, nz[0], nz[1]) | gains & Mux(eb, before[0], before[1]), set_addr,
                Mux(eb, first[0], first[1]))
    nxt = Signal(range(max(n, 2)), name="next_emit_j")
    m.d.comb += nxt.eq(Mux(same, own, other))
    return nxt


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
        self._add_after(members, "crd_inner")

    def after_ports(self):
        return ["crd_inner"]

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        w = self.crd_width
        order, dims = self.order, self.dims
        dim = dims[-1]
        n = prod(dims)
        fa = Fire(self, [], self.inputs())            # accumulate side
        fe = Fire(self, self.outputs(), [])           # emit side
        block = memory_storage("acc", 2 * n * W) == "block"
        acc = Memory(shape=unsigned(W), depth=2 * n, init=[], attrs={"ram_style": "block"} if block else None)
        m.submodules.acc = acc
        wp = acc.write_port()
        rpa = acc.read_port(transparent_for=[wp])      # sees the write of the cycle before, as a comb read
        rpe = acc.read_port()
        bm = [Signal(n, name=f"bitmap{k}") for k in range(2)]
        nbm = [Signal(n, name=f"next_bitmap{k}") for k in range(2)]
        m.d.comb += [nbm[k].eq(bm[k]) for k in range(2)]
        m.d.sync += [bm[k].eq(nbm[k]) for k in range(2)]
        full = [Signal(name=f"full{k}") for k in range(2)]
        base = [Signal(8, name=f"base{k}") for k in range(2)]   # m - group of the stop that closed the bank
        ab = Signal()                                  # the accumulate side's bank
        eb = Signal()                                  # the emit side's bank
        nab, neb = Signal(), Signal()                  # their next values
        m.d.comb += [nab.eq(ab), neb.eq(eb)]
        m.d.sync += [ab.eq(nab), eb.eq(neb)]
        done_in = Signal()                             # the accumulate side took D
        done_out = Signal()                            # the emit side emitted D
        overflow = Signal()
        m.d.comb += self.overflow.eq(overflow)
        a_free = Signal()
        m.d.comb += a_free.eq(Mux(ab, ~full[1], ~full[0]) & ~done_in)
        abits = Signal(n)
        m.d.comb += abits.eq(Mux(ab, bm[1], bm[0]))
        ebits = Signal(n)
        m.d.comb += ebits.eq(Mux(eb, bm[1], bm[0]))
        e_full = Signal()
        m.d.comb += e_full.eq(Mux(eb, full[1], full[0]))
        ebase = Signal(8)
        m.d.comb += ebase.eq(Mux(eb, base[1], base[0]))

        names = [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]
        ins = [getattr(self, f"i_{x}") for x in names]
        outs = [getattr(self, f"o_{x}") for x in names]
        c, cv = self.i_crd_inner.payload, self.i_crd_inner.valid
        v, vv = self.i_val.payload, self.i_val.valid
        oc, ov = self.o_crd_inner, self.o_val
        x = Signal(signed(W))
        m.d.comb += x.eq(Mux(is_empty(v), 0, v.data[:W].as_signed()))
        cur_val = Signal(signed(W))
        m.d.comb += cur_val.eq(rpa.data.as_signed())
        merged = fixed_op(m, REDUCE_MERGE[self.params["op"]], cur_val, x, fx, prefix="acc")

        # ---- accumulate side
        dep = Signal(range(max(order, 2)))
        closed = Signal()
        pre = [Signal(w, name=f"pre{d}") for d in range(order - 1)]
        npre = [Signal(w, name=f"next_pre{d}") for d in range(order - 1)]
        m.d.comb += [npre[d].eq(pre[d]) for d in range(order - 1)]
        m.d.sync += [pre[d].eq(npre[d]) for d in range(order - 1)]
        set_bit = Signal()
        set_addr = Signal(range(max(n, 2)))
        close = Signal()                               # this firing hands the bank over
        close_base = Signal(8)

        def accumulate():
            """On fire: acc[ab, pre, c] <- merge(v)."""
            j = c.data[:w]
            ok = j < dim
            lin = 0
            for d in range(order - 1):
                lin = lin * dims[d] + pre[d] if d else pre[d]
                ok = ok & (pre[d] < dims[d])
            m.d.comb += set_addr.eq(lin * dim + j if order > 1 else j)
            occupied = abits.bit_select(set_addr, 1)
            m.d.comb += [wp.addr.eq(ab * n + set_addr),
                         wp.data.eq(Mux(occupied, merged, x)), wp.en.eq(fa.fire & ok), set_bit.eq(fa.fire & ok)]
            with m.If(fa.fire & ~ok):
                m.d.sync += overflow.eq(1)

        def end_fibre(d, j):
            """On fire: the fibre of stream d ended with a stop of level j."""
            with m.If(fa.fire):
                if d:
                    m.d.sync += [dep.eq(d - 1), closed.eq(j != 0)]
                else:
                    m.d.sync += closed.eq(0)
            if not d:
                m.d.comb += [close.eq(fa.fire & (j >= self.group)), close_base.eq(j - self.group)]

        def take_done(tok):
            with m.If(is_done(tok)):
                m.d.comb += fa.go.eq(all_of(s.valid for s in ins + [self.i_val]) & ~done_in)
                m.d.comb += [fa.pop[p].eq(1) for p in fa.pop]
                with m.If(fa.fire):
                    m.d.sync += done_in.eq(1)

        with m.Switch(dep):
            for d in range(order):
                with m.Case(d):
                    hd, hv = ins[d].payload, ins[d].valid
                    if d == order - 1:
                        m.d.comb += [fa.pop["crd_inner"].eq(1), fa.pop["val"].eq(1)]
                        with m.If(is_data_or_empty(c)):
                            m.d.comb += fa.go.eq(cv & vv & a_free)
                            accumulate()
                        if d == 0:
                            with m.Elif(is_done(c)):
                                take_done(c)
                        with m.Elif(~is_done(c)):
                            m.d.comb += fa.go.eq(cv & vv & a_free)
                            end_fibre(d, stop_level(c))
                        continue
                    with m.If(closed):
                        m.d.comb += [fa.go.eq(hv & a_free), fa.pop[names[d]].eq(1)]
                        end_fibre(d, stop_level(hd))
                    with m.Elif(~hd.ctrl):
                        m.d.comb += [fa.go.eq(hv & a_free), fa.pop[names[d]].eq(1)]
                        with m.If(fa.fire):
                            m.d.sync += dep.eq(d + 1)
                            m.d.comb += npre[d].eq(hd.data[:w])
                    if d == 0:
                        with m.Elif(is_done(hd)):
                            take_done(hd)
                    with m.Elif(~is_done(hd)):
                        deeper = ins[d:] + [self.i_val]
                        m.d.comb += fa.go.eq(all_of(s.valid for s in deeper) & a_free)
                        m.d.comb += [fa.pop[p].eq(1) for p in names[d:] + ["val"]]
                        end_fibre(d, stop_level(hd))

        # the accumulate side's read, one cycle ahead: the next head of crd_inner at the next prefix and bank
        nj = self.after("crd_inner").data[:w]
        nlin = 0
        for d in range(order - 1):
            nlin = nlin * dims[d] + npre[d] if d else npre[d]
        m.d.comb += rpa.addr.eq(nab * n + (nlin * dim + nj if order > 1 else nj))

        # ---- emit side: find-first-set over bank eb, outermost level first, on the next bitmap (registered:
        # the emit address is the synchronous read's, one cycle ahead)
        nebits = Signal(n)
        m.d.comb += nebits.eq(Mux(neb, nbm[1], nbm[0]))
        n_ecrd, n_row_idx, n_row_one, n_plane_last = _emit_index(m, nebits, order, dims, "next_")
        ecrd = [Signal.like(x, name=f"emit_crd{d}") for d, x in enumerate(n_ecrd)]
        row_one = Signal(init=1)                       # the emitted row holds one entry (reset: empty bitmap)
        plane_last = Signal(init=1) if order == 3 else None
        m.d.sync += row_one.eq(n_row_one)
        if order == 3:
            m.d.sync += plane_last.eq(n_plane_last)
        eaddr = Signal(range(max(n, 2)))             # the emitted entry: ffs of bank eb's bitmap
        clr_bit = Signal()                             # this firing emits entry eaddr (clears its bit)
        if order == 1:
            n_eaddr = _next_ffs(m, bm, eb, neb, eaddr, ab, set_bit, set_addr, clr_bit, n)
            m.d.sync += ecrd[0].eq(n_eaddr)
        else:
            n_eaddr = n_row_idx * dim + n_ecrd[-1]
            m.d.sync += [r.eq(x) for r, x in zip(ecrd, n_ecrd)]
        m.d.sync += eaddr.eq(n_eaddr)
        m.d.comb += rpe.addr.eq(neb * n + n_eaddr)
        ephase = Signal()                              # 0: entries, 1: a row's closing stop (orders 2, 3)
        first = [Signal(init=1, name=f"first{d}") for d in range(order - 1)]
        plane_end = Signal()                           # order 3: the row just emitted was its plane's last
        release = Signal()                             # this firing emits the closing stops: frees bank eb

        def final_stops():
            m.d.comb += [fe.push[p].eq(1) for p in fe.push]
            for d, o in enumerate(outs):
                set_stop(m, o, ebase + d)
            set_stop(m, ov, ebase + order - 1)
            m.d.comb += release.eq(fe.fire)
            with m.If(fe.fire):
                m.d.sync += [ephase.eq(0)] + [s.eq(1) for s in first]
                m.d.comb += neb.eq(~eb)

        with m.If(e_full):
            m.d.comb += fe.go.eq(1)
            with m.If(ebits == 0):
                final_stops()
            with m.Elif(ephase == 0):
                m.d.comb += [fe.push["crd_inner"].eq(1), fe.push["val"].eq(1)]
                for d in range(order - 1):
                    m.d.comb += fe.push[names[d]].eq(first[d])
                for d in range(order):
                    set_data(m, outs[d], ecrd[d])
                set_data(m, ov, rpe.data.as_signed())
                m.d.comb += clr_bit.eq(fe.fire)
                with m.If(fe.fire):
                    m.d.sync += [s.eq(0) for s in first]
                    if order > 1:
                        with m.If(row_one):
                            m.d.sync += ephase.eq(1)
                            if plane_last is not None:
                                m.d.sync += plane_end.eq(plane_last)
            if order > 1:
                with m.Else():
                    m.d.comb += [fe.push["crd_inner"].eq(1), fe.push["val"].eq(1)]
                    if order == 3:
                        m.d.comb += fe.push[names[1]].eq(plane_end)
                        set_stop(m, outs[1], 0)
                        set_stop(m, oc, plane_end)
                        set_stop(m, ov, plane_end)
                    else:
                        set_stop(m, oc, 0)
                        set_stop(m, ov, 0)
                    with m.If(fe.fire):
                        m.d.sync += [ephase.eq(0), first[order - 2].eq(1)]
                        if order == 3:
                            m.d.sync += first[0].eq(plane_end)
        with m.Elif(done_in & ~done_out):
            m.d.comb += fe.go.eq(1)
            m.d.comb += [fe.push[p].eq(1) for p in fe.push]
            for o in outs + [ov]:
                set_done(m, o)
            with m.If(fe.fire):
                m.d.sync += done_out.eq(1)

        # ---- bank registers (the two sides never work on the same bank)
        for k in range(2):
            with m.If(set_bit & (ab == k)):
                m.d.comb += nbm[k].bit_select(set_addr, 1).eq(1)
            with m.If(clr_bit & (eb == k)):
                m.d.comb += nbm[k].bit_select(eaddr, 1).eq(0)
            with m.If(close & (ab == k)):
                m.d.sync += [full[k].eq(1), base[k].eq(close_base)]
            with m.If(release & (eb == k)):
                m.d.sync += full[k].eq(0)
        with m.If(close):
            m.d.comb += nab.eq(~ab)
        fa.build(m)
        fe.build(m)
        return m
