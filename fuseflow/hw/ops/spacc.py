"""spacc: sparse accumulator (fuseflow/sim/ops/spacc.py), orders 1, 2 and 3, ``group`` reduced levels,
double-buffered.

Streams, outermost first (sub-tree depth d = stream d): ``crd_outer{order-2}`` .. ``crd_outer0``,
``crd_inner`` (with ``val``); capacities ``dims`` = (``dim_outer1``,) ``dim_outer``, ``dim`` for the
streams of order 3 (2; order 1: ``dim``).

Storage (owned by the op, not a tensor memory), two banks: an accumulator array ``acc`` of ``2 * prod(dims)``
values (bank k at ``k * prod(dims)``, entry ``(a * dim_outer + b) * dim + j``), a
:class:`~fuseflow.hw.memory.TensorMemory` with two read ports of latency 2 (address register, data register:
on ECP5 DP16KD blocks with their output register, block RAM from :data:`fuseflow.hw.memory.BLOCK_RAM_MIN_BITS`)
and one write port, and an occupancy bitmap register of ``prod(dims)`` bits per bank. Entries leave in sorted
order of their linear address, one per cycle (lexicographic: order 2 row by row, order 3 plane by plane).

The accumulation is a pipeline; the timing contract is unchanged (every value reaches the outputs in the cycle a
combinational read-modify-write would give it). A firing in cycle t (entry A, value x):
- t - 1: the accumulate read is addressed from the next head (``after("crd_inner")`` at the next prefix and
  bank: the memory's address is right for an accumulating firing in t only, so it takes bank ``ab`` (a register;
  after a closing firing the next one accumulates into a freed, empty bank, whose read is not used) and the
  prefix a firing would take, and only crd_inner's view waits for the firing: with orders 2 and 3 not for the
  firing rule itself but for dep = innermost, both heads valid and the bank free, a LUT of registers that
  agrees with it whenever the next cycle accumulates); beside it, whether the firings of t - 1 .. t - 3 had that
  entry (``hit1 .. hit3``), and the address itself (``read_addr``): with order 1 from the two candidates (the
  step fires or not) and the true next bank, chosen by the firing; with orders 2 and 3 from the read's own two
  candidates, chosen by that LUT of registers after the comparisons (the read's address is the entry of any
  accumulating firing in t: a closing stop is at dep 0, so no close precedes one).
- t: the bitmap bit at ``read_addr`` (the bitmap holds the firings up to t - 2; with more than 64 bits in two
  steps: with order 1 its 4 bits around ``read_addr`` registered, one chosen by s1's address in t + 1; with
  orders 2 and 3 its 8 bits (``read_addr[3:]`` chooses, as a tree of 8:1 word selects on kept wires: on ECP5
  slices of LUT4 / PFUMX / L6MUX21 instances, the first level's select from a copy of ``read_addr``'s bits per
  node, ``TRELLIS_FF`` instances that Yosys does not merge), s1's 3 low bits choosing in t + 1); registers
  ``s1`` take A, its
  one-hot mask, x, whether the read's data holds A's value (occupied, no hit), ``hit1`` (``s1_hit1``: the result of
  t - 1 is s2's in t + 1) and else the value (``s1_cur``: the merged result of t - 2 or t - 3 (``s2``, ``s3``),
  the most recent first, or the operation's identity: a hit implies occupied); and A's comparisons with the
  head, second and third A meets in t + 1 (below).
- t + 1: ``merged = f(cur, x)`` (cur = the read's data, s2's value or ``s1_cur``; with block RAM merges side by
  side, chosen by ``s1_mem`` and ``s1_hit1`` after them, so the loop of back-to-back firings on one entry is
  s2 -> carry chain -> s2; with max/min the read's data or x, by the comparison's sign, is the last choice) into
  ``s2``; the bitmap bit is set and the entry inserted into the emit queue (below) from s1. A saturating add (op
  sum) keeps its result as the wrapped sum and its operands' signs (whether equal, and the second's; in
  ``merged``, ``s2``, ``s3``): the merge ends at its carry chain (the signs come from before it), and the
  overflow (equal signs, the sum's another) and saturated value (the sum's top bit repeated over its negation on
  overflow) are formed where they are used: ``s1_cur`` registers it; the forward from s2 adds s2's wrapped sum
  and, on s2's overflow (from registers), takes the limit + x instead, which needs no adder (x with its top bit
  flipped, or x - 1, registered with x, likewise); ``s2_merged`` is the memory write, the rings, the emitted value.
- max/min with block RAM: the accumulate read's blocks have no output register (latency 1) and its data is
  registered in the fabric instead (the same cycle t + 1), so the comparison with x starts at a flip-flop, not at
  the block's clock-to-output and its route; with the two-step lookup the 4 bitmap bits are registered each ANDed
  with whether it is read_addr's and with no hit, so ``s1_mem`` is their OR (one LUT from registers).
- t + 2: the memory write from ``s2``. So the read of t (latched at the edge ending t - 1) holds the firings up
  to t - 4; t - 3's write is at the very edge that latched the address, where a DP16KD's read data is
  undefined: it is never used (forwarded instead).

Orders 2 and 3 emit with a row walker instead (``Spacc._walk``: rows fetched from per-row nonempty bits, one
entry issued per cycle through the memory read into a queue ahead of the outputs), which starts E =
``registry.spacc_emit_delay(order)`` cycles after the bank closes (the simulator's ``_emitter``). With order 1,
per bank an emit queue in registers holds the three lowest entries (``head``, ``second``, ``third``: linear
address, memory address and coordinates) and a bitmap ``rest`` of the others, kept in groups of G bits
(G about sqrt(prod(dims)), a power of two) with per group a nonempty bit and the index of its lowest bit
(registers). Emitting pops the head (second and third move up; rest's lowest entry, a find-first-set over the
groups and a choice among the registered group lowests, becomes third; the group that lost it takes its next
lowest bit above its lowest, computed for every group from registers; rest's bit is not cleared: entries leave
rest in sorted order, so the emitted bits lie below their group's lowest, and rest is cleared as a whole while
the emitting bank's head is empty). A pop (``want[k]`` from registers and the outputs' room ``emit_room``,
both on kept wires) is the last choice before every register it changes: ``Mux(pop, if_pop, hold)``, both
candidates from registers (kept wires; a group takes ``(want & gone[g]) & emit_room``, gone the one-hot
mask of the first nonempty group, two kept wires per group, so the pop's fan-out is split, with its candidate
(the group's next lowest) on kept wires too); rest's bits do not look at it. The find-first-sets work in chunks
of 4 bits whose ORs are on kept wires; rest's lowest entry and each group's next lowest (:func:`_lowest_value`)
also keep each chunk's lowest payload and choose among the chunks by their ORs (16 bits: the payload 3 LUT
levels deep, a bit's mask 2 after the chunk ORs). Accumulating a new entry inserts it (three comparisons with
the head, second and third, made in the firing's cycle against the registers and s1's entry, chosen by s1's
place and registered; the displaced one goes to rest). Which group of rest s1's insertion may set is
registered in the firing's cycle, per group: ``rest<k>_new_group`` (the firing accumulates into bank k and its
entry lies in group g) and ``rest<k>_third_group`` (the same for the third the entry meets, the third after
that cycle's insertion), so in t + 1 a group's lowest bit, nonempty bit and rest bits look at their own two
registers and the comparisons, not at s1's validity and bank (which fanned out to every group of both banks).
The occupancy bitmap is cleared as a whole while its bank is full.
``emitting[k]`` (= full[k] and eb = k) is a register per bank, so the per-bank pops, ring writes and the emitted
value decode no ``eb``. The values of the head and the second are in
registers too, a ring of four per bank (the head's at a pointer, the second's after it): the accumulate side
writes the merged value of an entry that is (becomes) head or second into its slot from s2 (a new head steps the
pointer back); an emission steps the pointer forward, and the new second's value comes from the memory: the
emit read is addressed in every cycle with bank ``eb``'s third entry (a register), and its data, two cycles
after a pop, fills the slot two after the popped head's (or is the emitted value when that entry is emitted at
once). A bank's last merge lands in s2 in its closing cycle t_c, its last memory write at the edge ending
t_c + 1: the emitted value forwards s2 when the head's slot is still being written (first emission at t_c + 1)
and the emit read of t_c + 1 forwards s2's write when it names the same entry. So the emitted coordinates and
value, the row and plane ends (the second entry is in another row, plane) and the emit read's address come
from registers; the firings only choose among them and step pointers (the outputs' payloads: the entry when
a bank emits one, ``(em[k] & hv[k]) & ~ephase`` from registers, else the control token of the firing's case).
Capacity: a coordinate of stream d must be ``< dims[d]`` (compared as AND/OR logic, :func:`_less_const`, as is
the closing stop level with ``group``; crd_inner's test, and with order 1 the stop's, computed a cycle ahead
from the channel's two next-head views);
an entry beyond is not accumulated and sets the sticky ``overflow`` output. The bitmaps and find-first-sets
cost O(prod(dims)) logic: meant for small capacities (up to a few hundred entries; order 3 is for small
tensors).

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
  N = 0; the merge pipeline above), pops both; a stop pops both and ends the fibre (below).
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
from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal, Value, signed
from amaranth.lib.wiring import Out

from ...errors import HardwareError
from ...samml.registry import REDUCE_MERGE, check_spacc
from ..stream import all_of
from ..token import is_data_or_empty, is_done, is_empty, stop_level, token_layout
from ._common import Fire, OpComponent, kept, set_data, set_done, set_stop
from ...hw.memory import TensorMemory, memory_storage
from ._cells import get_cells
from .alu import fixed_op, saturate_overflow

_PORT = {"dim": "crd_inner", "dim_outer": "crd_outer0", "dim_outer1": "crd_outer1"}


def _less_const(x, k):
    """``x < k`` for an unsigned Value ``x`` and a constant ``k``, as AND/OR logic: some bit i with k_i = 1 and
    x_i = 0 below bits equal to k's (Yosys maps a comparison with a constant to a carry chain, whose first stage
    then sits on the paths from the channels' heads)."""
    x = Value.cast(x)
    w = len(x)
    if k <= 0:
        return Const(0, 1)
    if k >= 1 << w:
        return Const(1, 1)
    terms = [all_of([~x[i]] + [x[j] if (k >> j) & 1 else ~x[j] for j in range(i + 1, w)])
             for i in range(w) if (k >> i) & 1]
    return Cat(*terms).any()


def _at_most_one(m, bits, name):
    """Whether at most one bit of ``bits`` is set: per chunk of 4 bits its OR and whether two are set (kept
    wires), then the same over the chunks' ORs."""
    bits = Value.cast(bits)
    n = len(bits)
    if n <= 4:
        return ~Cat(*[bits[i] & bits[j] for i in range(n) for j in range(i + 1, n)]).any()
    nc = -(-n // 4)
    chunks = [bits[4 * c:min(4 * c + 4, n)] for c in range(nc)]
    c_any = Signal(nc, name=f"{name}_any", attrs={"keep": 1})
    c_two = Signal(nc, name=f"{name}_two", attrs={"keep": 1})
    m.d.comb += [c_any.eq(Cat(*[c.any() for c in chunks])),
                 c_two.eq(Cat(*[~_at_most_one(m, c, name) for c in chunks]))]
    return ~c_two.any() & _at_most_one(m, c_any, f"{name}_c")


def _or_all(values, width):
    """The OR of ``values`` (each ``width`` bits)."""
    out = Const(0, width)
    for v in values:
        out = out | v
    return out


def _lowest(m, bits, n, payloads, name):
    """The lowest set bit of ``bits`` (n bits): ``(any, onehot, payload)``, ``onehot`` its one-hot mask (0 when
    none) and ``payload`` the constant ``payloads[i]`` of that bit (0 when none).

    In chunks of 4 bits: each chunk's OR on a kept wire, the lowest nonempty chunk (recursively, its one-hot
    mask kept too) and, beside it, each chunk's own lowest bit and payload (functions of its 4 bits); a bit
    is the lowest when it is its chunk's lowest in the lowest nonempty chunk, and the payload is the OR of the
    chunks' payloads over the chunk mask. The kept wires bound the depth (16 bits: 3 LUT levels): without
    them the mapper, counting only LUT levels, shares the prefix ORs of all outputs as chains."""
    bits = Value.cast(bits)
    width = max(max(int(p).bit_length() for p in payloads), 1)
    onehot = Signal(n, name=f"{name}_onehot")
    payload = Signal(width, name=f"{name}_payload")

    def local(lo, hi):
        """The lowest set bit among bits[lo:hi] (at most 4): its one-hot mask and payload."""
        oh = [bits[i] & ~Cat(*[bits[j] for j in range(lo, i)]).any() if i > lo else bits[i] for i in range(lo, hi)]
        pl = [Cat(*[oh[i - lo] for i in range(lo, hi) if (int(payloads[i]) >> bb) & 1]).any()
              if any((int(payloads[i]) >> bb) & 1 for i in range(lo, hi)) else Const(0, 1) for bb in range(width)]
        return oh, Cat(*pl)
    if n <= 4:
        oh, pl = local(0, n)
        m.d.comb += [onehot.eq(Cat(*oh)), payload.eq(pl)]
        return bits.any(), onehot, payload
    nc = -(-n // 4)
    chunk = Signal(nc, name=f"{name}_chunks", attrs={"keep": 1})
    m.d.comb += chunk.eq(Cat(*[bits[4 * j:min(4 * j + 4, n)].any() for j in range(nc)]))
    c_any, c_oh, _ = _lowest(m, chunk, nc, list(range(nc)), f"{name}_c")
    c_first = Signal(nc, name=f"{name}_first_chunk", attrs={"keep": 1})
    m.d.comb += c_first.eq(c_oh)
    ohs, pls = [], []
    for j in range(nc):
        oh, pl = local(4 * j, min(4 * j + 4, n))
        ohs += [o & c_first[j] for o in oh]
        pls.append(c_first[j].replicate(width) & pl)
    m.d.comb += [onehot.eq(Cat(*ohs)), payload.eq(_or_all(pls, width))]
    return c_any, onehot, payload


def _lowest_value(m, bits, n, payloads, name, onehot=True):
    """The lowest set bit of ``bits`` (n bits) with a Value per bit: ``(any, onehot, payload)``, ``payload`` that
    bit's ``payloads[i]`` (all of one width; 0 when none). As :func:`_lowest`, but each chunk's payload (its
    lowest bit's, a function of its 4 bits and their payloads) is a kept wire, and with at most 4 chunks the
    payload is a priority choice among them by the chunk ORs (2 LUT levels after them and the chunk payloads),
    not a one-hot mask and an OR over all n. ``onehot=False``: the mask is not needed (None)."""
    bits = Value.cast(bits)
    width = len(Value.cast(payloads[0]))

    def local(lo, hi):
        oh = [bits[i] & ~Cat(*[bits[j] for j in range(lo, i)]).any() if i > lo else bits[i] for i in range(lo, hi)]
        return oh, _or_all([oh[i - lo].replicate(width) & payloads[i] for i in range(lo, hi)], width)
    if n <= 4:
        oh, pl = local(0, n)
        return bits.any(), Cat(*oh) if onehot else None, pl
    nc = -(-n // 4)
    chunk = Signal(nc, name=f"{name}_chunks", attrs={"keep": 1})
    m.d.comb += chunk.eq(Cat(*[bits[4 * j:min(4 * j + 4, n)].any() for j in range(nc)]))
    if nc > 4:
        c_any, c_oh, _ = _lowest(m, chunk, nc, list(range(nc)), f"{name}_c")
        c_first = Signal(nc, name=f"{name}_first_chunk", attrs={"keep": 1})
        m.d.comb += c_first.eq(c_oh)
    else:
        # (a bit's mask from its chunk's bits and the lower chunks' ORs: one LUT level less than through the
        # first-chunk mask)
        c_any = chunk.any()
        c_first = Cat(*[~chunk[:j].any() if j else Const(1, 1) for j in range(nc)])
    ohs, pls, cps = [], [], []
    for j in range(nc):
        oh, pl = local(4 * j, min(4 * j + 4, n))
        cp = Signal(width, name=f"{name}_chunk{j}_payload", attrs={"keep": 1})
        m.d.comb += cp.eq(pl)
        ohs += [o & c_first[j] for o in oh]
        pls.append(c_first[j].replicate(width) & cp)
        cps.append(cp)
    oh = Cat(*ohs) if onehot else None
    if nc > 4:
        return c_any, oh, _or_all(pls, width)
    value = Const(0, width)
    for j in reversed(range(nc)):
        value = Mux(chunk[j], cps[j], value)
    return c_any, oh, value


class Spacc(OpComponent):
    op_name = "spacc"
    #: the accumulator's implementation (:class:`fuseflow.hw.memory.TensorMemory`'s ``impl``): None picks by
    #: the platform; tests set ``"dp16kd-model"`` to run the DP16KD wiring in the Amaranth simulator
    memory_impl = None

    def harness_cycles(self):
        p = self.params         # time for every entry of the banks (dim x dim_outer x dim_outer1)
        return 4 * (p.get("dim") or 0) * (p.get("dim_outer") or 1) * (p.get("dim_outer1") or 1)

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
        s = SimpleNamespace(cells=get_cells(platform))     # the builders' shared state
        self._storage(m, s)
        self._merge_pipeline(m, s)
        self._accumulate_side(m, s)
        self._read_ahead(m, s)
        if self.order > 1:
            return self._walk(m, s)
        self._emit_queue(m, s)
        for k in range(2):
            self._emit_bank(m, s, k)
        self._emit_outputs(m, s)
        self._bank_registers(m, s)
        return m

    def _storage(self, m, s):
        """The accumulator memory and its ports, the bank registers and the op's ports."""
        fx = self.fixed
        W = fx.width
        w = self.crd_width
        order, dims = self.order, self.dims
        dim = dims[-1]
        n = prod(dims)
        fa = Fire(self, [], self.inputs())            # accumulate side
        fe = Fire(self, self.outputs(), [])           # emit side
        block = memory_storage("acc", 2 * n * W) == "block"
        # latency-2 reads (address register, then the data register: on ECP5 the DP16KD's output register);
        # a read of an entry written at the same clock edge is never used (forwarded instead)
        acc = TensorMemory(2 * n, W, block=block, name="acc", impl=self.memory_impl)
        m.submodules.acc = acc
        # max/min: the accumulate read's data register in the fabric (the blocks without their output register,
        # latency 1, and a register after them: the same cycle), so the comparison with x starts at a flip-flop
        # beside it, not at the block's clock-to-output and its route
        fabric_read = block and REDUCE_MERGE[self.params["op"]] in ("max", "min")
        rpa_data = None
        if fabric_read:
            rpa = acc.read_port(latency=1)             # accumulate side: addressed from the next head
            rpa_data = Signal(W, name="acc_read_data")
            m.d.sync += rpa_data.eq(rpa.data)
        else:
            rpa = acc.read_port()                      # accumulate side: addressed from the next head
        rpe = acc.read_port()                          # emit side: the emit bank's third entry, every cycle
        wp = acc.write_port()
        bm = [Signal(n, name=f"bitmap{k}") for k in range(2)]
        full = [Signal(name=f"full{k}") for k in range(2)]
        base = [Signal(8, name=f"base{k}") for k in range(2)]   # m - group of the stop that closed the bank
        ab = Signal()                                  # the accumulate side's bank
        eb = Signal()                                  # the emit side's bank
        nab, neb = (Signal() for _ in range(2))        # their next values
        m.d.comb += [nab.eq(ab), neb.eq(eb)]
        m.d.sync += [ab.eq(nab), eb.eq(neb)]
        done_in = Signal()                             # the accumulate side took D
        done_out = Signal()                            # the emit side emitted D
        overflow = Signal()
        m.d.comb += self.overflow.eq(overflow)
        a_free = Signal()
        ab_free = Signal(init=1, name="ab_free")         # ~full[ab], a register (set from the next values)
        m.d.comb += a_free.eq(ab_free & ~done_in)
        e_full = Signal()
        ebase = Signal(8)
        m.d.comb += ebase.eq(Mux(eb, base[1], base[0]))
        # em[k] = full[k] & (eb == k), a register per bank (set from the next values), so the bank registers'
        # enables do not decode eb
        em = [Signal(name=f"emitting{k}") for k in range(2)]
        m.d.comb += e_full.eq(em[0] | em[1])

        names = [f"crd_outer{order - 2 - d}" for d in range(order - 1)] + ["crd_inner"]
        ins = [getattr(self, f"i_{x}") for x in names]
        outs = [getattr(self, f"o_{x}") for x in names]
        c, cv = self.i_crd_inner.payload, self.i_crd_inner.valid
        v, vv = self.i_val.payload, self.i_val.valid
        oc, ov = self.o_crd_inner, self.o_val
        x = Signal(signed(W))
        m.d.comb += x.eq(Mux(is_empty(v), 0, v.data[:W].as_signed()))
        s.a_free, s.ab, s.ab_free, s.base, s.block, s.bm, s.c, s.cv = a_free, ab, ab_free, base, block, bm, c, cv
        s.dim, s.dims, s.done_in, s.done_out, s.e_full, s.eb = dim, dims, done_in, done_out, e_full, eb
        s.ebase, s.em, s.fa, s.fabric_read, s.fe, s.full, s.fx = ebase, em, fa, fabric_read, fe, full, fx
        s.ins, s.n, s.nab, s.names, s.neb, s.oc, s.order, s.outs, s.ov = ins, n, nab, names, neb, oc, order, outs, ov
        s.overflow, s.rpa, s.rpa_data, s.rpe, s.vv, s.W, s.w, s.wp = overflow, rpa, rpa_data, rpe, vv, W, w, wp
        s.x = x

    def _merge_pipeline(self, m, s):
        """The merge pipeline s1 .. s3 (module docstring, t .. t + 2) and the memory write."""
        ab, block, fabric_read, fx, n, order, rpa = s.ab, s.block, s.fabric_read, s.fx, s.n, s.order, s.rpa
        rpa_data, W, wp, x = s.rpa_data, s.W, s.wp, s.x
        # a new entry merges v with the operation's identity (0, min_raw, max_raw: merge(identity, v) = v), so the
        # choice between stored and new sits beside the read's bypass before the merge, not after it
        merge = REDUCE_MERGE[self.params["op"]]
        identity = {"add": 0, "max": fx.min_raw, "min": fx.max_raw}[merge]
        set_addr = Signal(range(max(n, 2)))            # the entry of crd_inner's head at the current prefix
        aw = Shape.cast(range(max(2 * n, 2))).width
        full_addr = Signal(aw)                         # bank ab's entry set_addr in the memory
        wen = Signal()                                 # this firing accumulates (fires, in range)
        # the merge pipeline (a firing in cycle t): s1 (cycle t + 1) holds its address and value, whether the
        # memory's read (addressed in t - 1) has its current value, and else that value (s1_cur: the identity
        # for a new entry, or the merged result of a firing of t - 1, t - 2 or t - 3, the most recent first);
        # in t + 1 the merge, into s2; in t + 2 the memory write from s2. The read holds the writes of the
        # firings up to t - 4; t - 3's write is at the edge that latched the read's address, whose data must
        # not be used (and is not: it is forwarded)
        s1_addr, s2_addr, s3_addr = (Signal(aw, name=f"s{i}_addr") for i in (1, 2, 3))
        s1_v, s2_v, s3_v = (Signal(name=f"s{i}_valid") for i in (1, 2, 3))
        s1_x = Signal(signed(W), name="s1_val")
        s1_xm1 = Signal(W, name="s1_val_minus1")        # (s1_x - 1, wrapped: the forwarded merge at max_raw)
        s1_mem = Signal(name="s1_from_memory")          # occupied, no firing of t - 1 .. t - 3 had the entry
        # a saturating add's result is kept as its wrapped sum and its operands' signs (``_signs``: whether they
        # are equal, and the second's, a register), whose overflow (equal signs, the sum's top bit another) and
        # saturated value are formed where they are used; so the merge ends at its carry chain, with no overflow
        # LUT or saturation multiplexer after it, and the signs come from before the chain. Other merges: the
        # result, signs 0 (never overflowed)
        sat_add = merge == "add" and W >= 2
        s1_cur = Signal(signed(W), name="s1_cur")        # (saturated)
        s2_raw, s3_raw = (Signal(signed(W), name=f"s{i}_sum") for i in (2, 3))
        s2_o, s3_o = (Signal(2, name=f"s{i}_signs") for i in (2, 3))
        s2_m = Signal(signed(W), name="s2_merged")     # s2's saturated value

        def saturated(raw, signs):
            """The merged value from its wrapped sum and operands' signs (on overflow the sum's sign is the
            opposite of both operands')."""
            if not sat_add:
                return raw
            return saturate_overflow(raw.as_unsigned(), signs[0] & (raw[-1] ^ signs[1]), raw[-1])

        def merge_parts(a, b, prefix):
            """(wrapped result, operands' signs) of the merge of signed(W) a, b (alu.saturating_add_sub's
            parts: it overflowed iff the signs are equal and the result's differs)."""
            if not sat_add:
                return fixed_op(m, merge, a, b, fx, prefix=prefix), Const(0, 2)
            a, b = Value.cast(a), Value.cast(b)
            raw = Signal(signed(W), name=f"{prefix}_sum")
            m.d.comb += raw.eq((a + b)[:W])
            return raw, Cat(~(a[-1] ^ b[-1]), b[-1])
        m.d.comb += s2_m.eq(saturated(s2_raw, s2_o))
        s1_lin = Signal(range(max(n, 2)), name="s1_lin")
        s1_bank = Signal(name="s1_bank")
        # registers, set in the cycle before from the read's address (the next head's entry, two candidates):
        # the firing of the cycle before (of two, three cycles before) had this entry; and the read's address
        # itself, whose bitmap bit is looked up in the firing's cycle (the bitmap is set one cycle after a
        # firing, from s1: so it holds the firings up to t - 2, and hit1 the firing of t - 1)
        hit_now, hit2, hit3 = Signal(name="hit1"), Signal(name="hit2"), Signal(name="hit3")
        read_addr = Signal(aw, name="read_addr")
        # the bitmap's bit at read_addr, looked up in t; with more than 64 bits (both banks) in two steps: in t
        # its 4 bits around read_addr (registered), in t + 1 s1's address (read_addr of t) chooses among them
        split_lookup = 2 * n > 64
        occ_bm = Signal(name="occupied_bitmap")
        s1_nohit = Signal(name="s1_no_hit")
        # (the word registered in t: 4 bits with order 1, 8 with orders 2 and 3, chosen by read_addr's bits from
        # lo up; in t + 1 s1's lo low bits choose the bit)
        lo = 2 if order == 1 else 3
        occ_row = Signal(1 << lo, name="occupied_row")
        occ_hot = None
        if split_lookup:
            if fabric_read:
                # (max/min: each of the bits registered with whether it is read_addr's and no hit, so s1_mem is
                # their OR, one LUT from registers with 4 bits)
                occ_hot = Signal(1 << lo, name="occupied_row_hot")
                m.d.comb += s1_mem.eq(occ_hot.any())
            else:
                m.d.comb += s1_mem.eq(occ_row.bit_select(s1_addr[:lo], 1) & s1_nohit)
        merged, merged_o = Signal(signed(W), name="merged"), Signal(2, name="merged_signs")
        # the firing of t - 1 had the entry (hit1 registered with s1): its merged result is s2's in t + 1, the
        # current value (s2 is a register, so the merge's loop is s2 -> merge -> s2, no choice before s2)
        s1_h1 = Signal(name="s1_hit1")
        # s2's value saturated only on overflow, to its limit (the operands' sign): the forwarded merge adds s2's
        # wrapped sum, or the limit, and the overflow (from s2's registers) chooses after the adders
        s2_ovf = s2_o[0] & (s2_raw[-1] ^ s2_o[1]) if sat_add else Const(0, 1)
        if block:
            # merged = f(cur, x) with cur = the read's data, s2's value or s1_cur (saturated: a register), as merges
            # side by side that s1_mem, s1_hit1 and s2's overflow choose between after them: the block RAM's
            # read data (its output register: a slow clock-to-output and a long route) and the registers go
            # straight into their merges' carry chains, and s1_mem (with more than 64 bitmap bits a choice among
            # registers) is looked at after the merges
            fwd_r, fwd_o = merge_parts(s2_raw, s1_x, "acc_fwd")
            if sat_add:
                # (limit + x wrapped, without an adder: min_raw + x is x with its top bit flipped, max_raw + x the
                # same of x - 1, registered with x)
                top = Const(1 << (W - 1), W)
                lim_r = Mux(s2_o[1], s1_x.as_unsigned() ^ top, s1_xm1 ^ top).as_signed()
                lim_o = Cat(~(s2_o[1] ^ s1_x[-1]), s1_x[-1])
                fwd_r, fwd_o = Mux(s2_ovf, lim_r, fwd_r), Mux(s2_ovf, lim_o, fwd_o)
            cur_r, cur_o = merge_parts(s1_cur, s1_x, "acc_cur")
            other_r, other_o = Mux(s1_h1, fwd_r, cur_r), Mux(s1_h1, fwd_o, cur_o)
            if merge in ("max", "min"):
                # (the read's data or x, by the comparison's sign, as the last choice: the sign, at the end of the
                # carry chain from the block RAM, meets one LUT per bit, not a tree of multiplexers)
                mem = (rpa_data if fabric_read else rpa.data).as_signed()
                keep_mem = ~(s1_x - mem)[-1] if merge == "min" else ~(mem - s1_x)[-1]
                m.d.comb += [merged.eq(Mux(s1_mem & keep_mem, mem, Mux(s1_mem, s1_x, other_r))),
                             merged_o.eq(0)]
            else:
                mem_r, mem_o = merge_parts(rpa.data.as_signed(), s1_x, "acc_mem")
                m.d.comb += [merged.eq(Mux(s1_mem, mem_r, other_r)), merged_o.eq(Mux(s1_mem, mem_o, other_o))]
        else:
            # (a LUT-RAM accumulator's read data comes from a register beside the logic: one merge, after the
            # choice, is smaller)
            cur_val = Signal(signed(W))
            m.d.comb += cur_val.eq(Mux(s1_mem, rpa.data.as_signed(), Mux(s1_h1, s2_m, s1_cur)))
            acc_r, acc_o = merge_parts(cur_val, s1_x, "acc")
            m.d.comb += [merged.eq(acc_r), merged_o.eq(acc_o)]
        if split_lookup:
            m.d.sync += s1_nohit.eq(~hit_now & ~hit2 & ~hit3)
        else:
            m.d.sync += s1_mem.eq(occ_bm & ~hit_now & ~hit2 & ~hit3)
        m.d.sync += [s1_addr.eq(full_addr), s1_v.eq(wen), s1_x.eq(x), s1_xm1.eq(x - 1), s1_lin.eq(set_addr),
                     s1_bank.eq(ab),
                     # (a hit means occupied; an occupied entry without a hit is read from the memory, so the
                     # bitmap's bit only chooses that; the firing of t - 2 (t - 3) had the entry: its result is
                     # s2's (s3's) in t, s1_cur's in t + 1)
                     s1_h1.eq(hit_now),
                     s1_cur.eq(Mux(hit2, s2_m, Mux(hit3, saturated(s3_raw, s3_o), identity)))]
        m.d.sync += [s2_addr.eq(s1_addr), s2_v.eq(s1_v), s2_raw.eq(merged), s2_o.eq(merged_o),
                     s3_addr.eq(s2_addr), s3_v.eq(s2_v), s3_raw.eq(s2_raw), s3_o.eq(s2_o)]
        m.d.comb += [wp.addr.eq(s2_addr), wp.data.eq(s2_m), wp.en.eq(s2_v)]
        s.aw, s.full_addr, s.hit2, s.hit3, s.hit_now, s.lo = aw, full_addr, hit2, hit3, hit_now, lo
        s.occ_bm, s.occ_hot, s.occ_row, s.read_addr, s.s1_addr = occ_bm, occ_hot, occ_row, read_addr, s1_addr
        s.s1_bank, s.s1_lin, s.s1_v, s.s2_addr, s.s2_m, s.s2_v = s1_bank, s1_lin, s1_v, s2_addr, s2_m, s2_v
        s.set_addr, s.split_lookup, s.wen = set_addr, split_lookup, wen

    def _accumulate_side(self, m, s):
        """The accumulate side's firing rule: prefixes, accumulating firings, fibre ends, D."""
        a_free, ab, c, cv, dim, dims, done_in, fa = s.a_free, s.ab, s.c, s.cv, s.dim, s.dims, s.done_in, s.fa
        full_addr, ins, n, names, order, overflow = s.full_addr, s.ins, s.n, s.names, s.order, s.overflow
        set_addr, vv, w, wen = s.set_addr, s.vv, s.w, s.wen
        # ---- accumulate side
        dep = Signal(range(max(order, 2)))
        closed = Signal()
        pre = [Signal(w, name=f"pre{d}") for d in range(order - 1)]
        npre = [Signal(w, name=f"next_pre{d}") for d in range(order - 1)]
        m.d.comb += [npre[d].eq(pre[d]) for d in range(order - 1)]
        m.d.sync += [pre[d].eq(npre[d]) for d in range(order - 1)]
        pre_f = [Signal(w, name=f"fire_pre{d}") for d in range(order - 1)]    # pre after a firing of this step
        m.d.comb += [pre_f[d].eq(pre[d]) for d in range(order - 1)]
        set_bit = Signal()
        wen_if = Signal()                              # this step accumulates if it fires
        close = Signal()                               # this firing hands the bank over
        close_if = Signal()                            # ... if this step fires
        close_base = Signal(8)

        # the entry of the head of crd_inner at the current prefix (used by a firing that accumulates)
        def linear(prefix, jj):
            """The linear index of entry (prefix, jj) in a bank. Each coordinate is cut to the bits of its
            capacity (an entry beyond it is not accumulated: its index is not used), so with capacities that are
            powers of two the index is their concatenation, not an adder on the read address's path."""
            crds = [Value.cast(x)[:max(dd - 1, 1).bit_length()] for x, dd in zip(list(prefix) + [jj], dims)]
            if all(dd & (dd - 1) == 0 for dd in dims):
                return Cat(*[x[:(dd - 1).bit_length()] for x, dd in reversed(list(zip(crds, dims)))])
            lin = crds[0]
            for d in range(1, order):
                lin = lin * dims[d] + crds[d]
            return lin

        def bank_addr(bank, lin):
            """The memory address of bank ``bank``'s entry ``lin``."""
            if n & (n - 1) == 0:
                return Cat(Value.cast(lin)[:max(n - 1, 1).bit_length() if n > 1 else 0], bank)
            return bank * n + lin

        j = c.data[:w]
        # properties of crd_inner's head computed a cycle ahead (as compare_heads_ahead): each of the channel's
        # two next-head views into a register, and whether the head was read picks one (a LUT after flip-flops,
        # not a comparison with a constant behind the head register, on the paths of the firing's enables)
        c_taken = Signal(name="crd_inner_taken")
        m.d.sync += c_taken.eq(self.head_taken("crd_inner"))
        c_lay = token_layout(self.port_info["i_crd_inner"][1])
        c_views = [c_lay(Value.cast(self.i_crd_inner_stay)), c_lay(Value.cast(self.i_crd_inner_behind))]

        def head_ahead(fn, name):
            """``fn`` of crd_inner's head, from registers."""
            r = [Signal(name=f"crd_inner_{name}_{x}") for x in ("stay", "behind")]
            m.d.sync += [r[i].eq(fn(c_views[i])) for i in range(2)]
            return Mux(c_taken, r[1], r[0])
        in_range = Signal()
        ok = head_ahead(lambda t: _less_const(t.data[:w], dim), "in_range")
        # (order 1: whether the head, as a stop, closes the group)
        c_closes = head_ahead(lambda t: ~_less_const(stop_level(t), self.group), "closes") if order == 1 else None
        for d in range(order - 1):
            ok = ok & _less_const(pre[d], dims[d])
        m.d.comb += [in_range.eq(ok), set_addr.eq(linear(pre, j))]
        m.d.comb += full_addr.eq(bank_addr(ab, set_addr))
        # the entry's one-hot mask, registered with s1 (sets the bitmap and rest without a decoder)
        s1_onehot = Signal(n, name="s1_onehot")
        m.d.sync += s1_onehot.eq(Cat(*[set_addr == b for b in range(n)]))

        def accumulate():
            """On fire: acc[ab, pre, c] <- merge(v) (the merge and the write follow in the next cycle)."""
            ok = in_range
            m.d.comb += [wen.eq(fa.fire & ok), set_bit.eq(fa.fire & ok), wen_if.eq(ok)]
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
                # (order 1: the stop is crd_inner's head, its level's test computed a cycle ahead)
                m.d.comb += [close_if.eq(c_closes if order == 1 else ~_less_const(j, self.group)),
                             close.eq(fa.fire & close_if),
                             close_base.eq(j - self.group)]

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
                        m.d.comb += [fa.go.eq(hv & a_free), fa.pop[names[d]].eq(1), pre_f[d].eq(hd.data[:w])]
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
        s.bank_addr, s.close, s.close_base, s.close_if, s.dep = bank_addr, close, close_base, close_if, dep
        s.hv, s.j, s.linear, s.pre, s.pre_f, s.s1_onehot, s.wen_if = hv, j, linear, pre, pre_f, s1_onehot, wen_if

    def _read_ahead(self, m, s):
        """The accumulate read addressed a cycle ahead and the occupancy lookups (hits, bitmap)."""
        a_free, ab, aw, bank_addr, bm, close_if, cv = s.a_free, s.ab, s.aw, s.bank_addr, s.bm, s.close_if, s.cv
        dep, fa, fabric_read, full_addr, hit2, hit3 = s.dep, s.fa, s.fabric_read, s.full_addr, s.hit2, s.hit3
        hit_now, linear, lo, n, occ_bm, occ_hot = s.hit_now, s.linear, s.lo, s.n, s.occ_bm, s.occ_hot
        cells, occ_row, order, pre, pre_f = s.cells, s.occ_row, s.order, s.pre, s.pre_f
        read_addr, rpa, s1_addr, s1_v, s2_addr, s2_v = s.read_addr, s.rpa, s.s1_addr, s.s1_v, s.s2_addr, s.s2_v
        split_lookup, vv, w, wen_if = s.split_lookup, s.vv, s.w, s.wen_if
        # the accumulate side's read, one cycle ahead: the next head of crd_inner at the next prefix and bank,
        # as two candidates (the step fires or not; each from registers and the channel's two next-head views)
        # that the firing chooses last. The memory's read needs the right address only for an accumulating
        # firing in the next cycle, so it takes bank ab (a register) even when the firing closes the bank (the
        # next firing then accumulates into the other bank, freed and so empty: its bitmap clear, no hits, the
        # read's data not used) and the prefix a firing would take (pre_f: when the step does not fire, the next
        # cycle reads the same stream, not crd_inner, unless the prefix is unchanged); only crd_inner's view waits
        # for the firing. The lookups (hits, bitmap, read_addr) take both candidates and the true next bank
        def entry_addr(bank, prefix, jj):
            return bank_addr(bank, linear(prefix, jj))
        behind = Value.cast(self.i_crd_inner_behind)[:w]
        stay = Value.cast(self.i_crd_inner_stay)[:w]
        addr_fire, addr_stay = Signal(aw, name="read_addr_fire"), Signal(aw, name="read_addr_stay")
        lin_fire = linear(pre_f, Mux(fa.pop["crd_inner"], behind, stay))
        m.d.comb += [addr_fire.eq(bank_addr(ab ^ close_if, lin_fire)), addr_stay.eq(entry_addr(ab, pre, stay))]
        # (the two candidates and the choice on kept wires, so the choice is one LUT before the block RAM's
        # address pins. The choice needs to be right only when the next cycle accumulates, i.e. reads crd_inner
        # at dep = innermost: after a step at a shallower dep that cycle does not accumulate unless the step
        # fired on a coordinate, which leaves crd_inner's head in place; at dep = innermost the step pops
        # crd_inner iff it fires, and it fires on a coordinate or stop iff both heads are valid and the bank is
        # free (on D, or when it does not fire, nothing accumulates next, or the head stays). So the choice is
        # a LUT of registers, not the firing rule over the channels' heads)
        if order > 1:
            rd_behind = Signal(aw, name="acc_read_behind", attrs={"keep": 1})
            rd_stay = Signal(aw, name="acc_read_stay", attrs={"keep": 1})
            rd_sel = Signal(name="acc_read_popped")
            m.d.comb += [rd_behind.eq(bank_addr(ab, linear(pre_f, behind))),
                         rd_stay.eq(bank_addr(ab, linear(pre_f, stay))),
                         rd_sel.eq((dep == order - 1) & cv & vv & a_free),
                         rpa.addr.eq(Mux(rd_sel, rd_behind, rd_stay))]
            rd_addr = rpa.addr
        else:
            # (order 1 keeps the firing's choice: with the above, order 1, dim 64 measured 156.0 -> 142.7 MHz)
            m.d.comb += rpa.addr.eq(bank_addr(ab, linear(pre_f, Mux(fa.fire & fa.pop["crd_inner"], behind, stay))))
        bm_all = Cat(bm[0], bm[1])                     # indexed by the memory address
        rows = -(-2 * n // (1 << lo))
        if split_lookup:
            words = Cat(bm_all, Const(0, rows * (1 << lo) - 2 * n))
            if order > 1:
                # (the 4 bits at read_addr as a tree of multiplexers, of 8 words, then of 4, each on a kept wire:
                # else the mapper builds the word select over all rows as a chain of LUTs; order 1, dim 64 keeps
                # the plain select, measured 152.5 -> 148.4 MHz (min) with the tree and the choice below)
                rw = 1 << lo
                level = [words[rw * r:rw * r + rw] for r in range(rows)]
                at, depth = lo, 0
                # (the first level's select bits duplicated, a register per node: read_addr's fan-out into the
                # 512 bits was the first route of the critical path. On ECP5 the copies are TRELLIS_FF
                # instances, which Yosys does not merge (equal registers it does, bit by bit, whatever their
                # reset values); without a reset: the lookup matters only for an accumulating firing, whose
                # address was registered at the edge before it, and the bitmap is empty after a reset)
                sb0 = min(3, aw - at)
                n0 = -(-len(level) // (1 << sb0))
                sel_d = Signal(sb0, name="read_addr_l0")
                m.d.comb += sel_d.eq(rd_addr[at:at + sb0])
                sel0 = [cells.copy_register(m, sel_d, f"read_addr_l0_{b}") for b in range(n0)]
                while len(level) > 1:
                    sb = min(3, aw - at)
                    up = []
                    for b in range(-(-len(level) // (1 << sb))):
                        part = level[b << sb:(b + 1) << sb]
                        part = part + [Const(0, rw)] * ((1 << sb) - len(part))
                        sel = sel0[b] if depth == 0 else read_addr[at:at + sb]
                        if sb == 3:
                            node = cells.mux8(m, sel, part, rw, f"occupied_l{depth}_{b}")
                        else:
                            node = Signal(rw, name=f"occupied_l{depth}_{b}", attrs={"keep": 1})
                            m.d.comb += node.eq(Cat(*part).word_select(sel, rw))
                        up.append(node)
                    level, at, depth = up, at + sb, depth + 1
                occ_word = level[0]
            else:
                occ_word = words.word_select(read_addr[2:], 4)
            m.d.sync += occ_row.eq(occ_word)
            if fabric_read:
                m.d.sync += occ_hot.eq(occ_word
                                       & Cat(*[read_addr[:lo] == i for i in range(1 << lo)])
                                       & (~hit_now & ~hit2 & ~hit3).replicate(1 << lo))
        else:
            m.d.comb += occ_bm.eq(bm_all.bit_select(read_addr, 1))
        if order > 1:
            # (orders 2 and 3: the accumulate read's address is the entry of an accumulating firing in the next
            # cycle (above: no close precedes one, the closing stop is at dep 0), so the lookups compare with its
            # two candidates, chosen by the LUT of registers after the comparisons, rather than with the
            # firing's two candidates chosen by the firing)
            def pick(f):
                return Mux(rd_sel, f(rd_behind), f(rd_stay))
            m.d.sync += [hit_now.eq(fa.fire & wen_if & pick(lambda a: full_addr == a)),
                         hit2.eq(s1_v & pick(lambda a: s1_addr == a)), hit3.eq(s2_v & pick(lambda a: s2_addr == a)),
                         read_addr.eq(rd_addr)]
        else:
            look = []
            for a in (addr_fire, addr_stay):
                look.append((s1_v & (s1_addr == a), s2_v & (s2_addr == a)))
            m.d.sync += [hit_now.eq(fa.fire & wen_if & (full_addr == addr_fire)),
                         hit2.eq(Mux(fa.fire, look[0][0], look[1][0])),
                         hit3.eq(Mux(fa.fire, look[0][1], look[1][1])),
                         read_addr.eq(Mux(fa.fire, addr_fire, addr_stay))]

    def _emit_queue(self, m, s):
        """Order 1: the emit queue's registers (head, second, third, rest in groups, value rings)."""
        ab, aw, c, dims, eb, em, n, oc, order, outs = s.ab, s.aw, s.c, s.dims, s.eb, s.em, s.n, s.oc, s.order, s.outs
        ov, pre, rpe, s1_bank, s1_lin, s2_addr, s2_m = s.ov, s.pre, s.rpe, s.s1_bank, s.s1_lin, s.s2_addr, s.s2_m
        s2_v, set_addr, W = s.s2_v, s.set_addr, s.W
        release = Signal()                             # this firing emits the closing stops: frees bank eb
        ephase = Signal()                              # 0: entries, 1: a row's closing stop (orders 2, 3)
        first = [Signal(init=1, name=f"first{d}") for d in range(order - 1)]
        # ---- emit side: per bank, its three lowest entries in registers (``head``, ``nxt``, ``third``: a sorted
        # queue) and the bitmap of the others (``rest``, in groups). Emitting pops the head: nxt and third move
        # up and the lowest entry of rest (from registers only) becomes third; accumulating inserts into the
        # queue (comparisons with the three registered entries, from s1). So the emitted entry, its row's end
        # and the emit read's address come from registers, the firings only choose among them.
        lw = Shape.cast(range(max(n, 2))).width
        cws = [Shape.cast(range(max(dd, 2))).width for dd in dims] if order > 1 else []

        def entry_const(k, i):
            """Packed entry i of bank k: linear index, memory address, then the coordinates (orders 2, 3)."""
            word, at = i | (k * n + i) << lw, lw + aw
            for d, cw in enumerate(cws):
                word |= (i // prod(dims[d + 1:]) % dims[d]) << at
                at += cw
            return word

        def fields(e):
            """(linear index, memory address, coordinates per stream) of a packed entry."""
            lin, addr, crds, at = e[:lw], e[lw:lw + aw], [], lw + aw
            for cw in cws:
                crds.append(e[at:at + cw])
                at += cw
            return lin, addr, crds or [lin]

        ew = lw + aw + sum(cws)
        head = [Signal(ew, name=f"head{k}") for k in range(2)]
        hv = [Signal(name=f"head_valid{k}") for k in range(2)]
        nxt = [Signal(ew, name=f"second{k}") for k in range(2)]
        nv = [Signal(name=f"second_valid{k}") for k in range(2)]
        third = [Signal(ew, name=f"third{k}") for k in range(2)]
        tv = [Signal(name=f"third_valid{k}") for k in range(2)]
        rest = [Signal(n, name=f"rest{k}") for k in range(2)]
        clr_bit = Signal()                             # this firing emits bank eb's head
        # ... per bank (pop[k] = clr_bit & (eb == k)), from the per-bank registers and the outputs' room
        e_room = Signal(name="emit_room", attrs={"keep": 1})
        m.d.comb += e_room.eq(all_of([oc.ready, ov.ready] + [~first[d] | outs[d].ready for d in range(order - 1)]))
        pop = [Signal(name=f"pop{k}") for k in range(2)]
        ehead = Signal(ew)
        m.d.comb += ehead.eq(Mux(eb, head[1], head[0]))
        enxt = Signal(ew)
        m.d.comb += enxt.eq(Mux(eb, nxt[1], nxt[0]))
        e_nv = Mux(eb, nv[1], nv[0])
        e_empty = ~((em[0] & hv[0]) | (em[1] & hv[1]))      # (used where e_full)
        eaddr, _, ecrd = fields(ehead)
        _, _, ncrd = fields(enxt)
        plane_last = None
        row_one = None
        if order > 1:                                  # the head is its row's last entry (its plane's last row)
            row_one = ~e_nv | (Cat(*ncrd[:-1]) != Cat(*ecrd[:-1]))
        if order == 3:
            plane_last = ~e_nv | (ncrd[0] != ecrd[0])
        # the accumulated entry, packed (bank ab's memory address), inserted into bank ab's queue in the cycle
        # after its firing, from s1, beside its merge
        ins_entry = Signal(ew, name="s1_entry")
        s_crds = Cat(*(pre[d][:cws[d]] for d in range(order - 1)), c.data[:cws[-1]]) if order > 1 else Cat()
        m.d.sync += ins_entry.eq(Cat(set_addr, (ab * n + set_addr)[:aw], s_crds))
        ins_lin = s1_lin
        # the values of the head and the second of each bank, in registers: a ring of four per bank, the head's
        # at the pointer, the second's after it. The accumulate side writes the merged result of the entry it
        # inserts or merges in the cycle (s1) when that entry is (becomes) the head (a new head: the pointer
        # steps back) or the second, into the slot chosen then, from s2 in the cycle after; the emit side steps
        # the pointer on an emission and fills the new second's slot (two after the old head's) from the
        # memory's read of the third entry (addressed in every cycle from the register; its data two cycles
        # later: f1, f2 say that the emit side popped one, two cycles ago, tgt2 is the slot). So every entry's
        # value is in the memory, the head's and the second's also in registers, and an emission changes only
        # the pointer and the fetch flags
        ring = [[Signal(signed(W), name=f"value{k}_{i}") for i in range(4)] for k in range(2)]
        ptr = [Signal(2, name=f"value_ptr{k}") for k in range(2)]
        tgt1, tgt2 = Signal(2, name="fetch_slot1"), Signal(2, name="fetch_slot2")
        s2_rw, s2_rslot = Signal(name="s2_ring_write"), Signal(2, name="s2_ring_slot")
        s2_rbank = Signal(name="s2_bank")
        m.d.sync += [s2_rw.eq(0), s2_rbank.eq(s1_bank)]
        # per bank: s2's write goes to the head's slot (the entry was or became the head; the bank cannot pop
        # in the cycle of its insertion, so the slot is still the head's when s2 writes it)
        s2_hw = [Signal(name=f"s2_head_write{k}") for k in range(2)]
        m.d.sync += [x.eq(0) for x in s2_hw]
        m.d.sync += [tgt1.eq(Mux(eb, ptr[1], ptr[0]) + 2), tgt2.eq(tgt1)]
        f1, f2 = Signal(name="fetch1"), Signal(name="fetch2")
        m.d.sync += [f1.eq(clr_bit), f2.eq(f1 & ~release)]
        # the emit read of cycle c (latched at the edge ending c) meets the write of s2 of cycle c when the bank
        # was closed in c - 1 (its last firing in c - 2): forward that write's value to the data of c + 2
        e_col1, e_col2 = Signal(name="emit_collide1"), Signal(name="emit_collide2")
        e_colv1, e_colv2 = Signal(signed(W), name="emit_collide_value1"), Signal(signed(W), name="emit_collide_value2")
        m.d.sync += [e_col1.eq(s2_v & (s2_addr == rpe.addr)), e_colv1.eq(s2_m), e_col2.eq(e_col1),
                     e_colv2.eq(e_colv1)]
        rdata = Signal(signed(W), name="emit_read")
        m.d.comb += rdata.eq(Mux(e_col2, e_colv2, rpe.data.as_signed()))
        low_addr = []
        # rest in groups of G bits: per group whether it has a bit (gne) and its lowest bit (glow), registers
        # kept with rest, so its lowest entry is a find-first-set over the groups and a choice among registers
        r = 1
        while r * r < n:
            r += 1
        G = 1 << max(1, (r - 1).bit_length())
        gw = G.bit_length() - 1
        ng = -(-n // G)
        gne = [Signal(ng, name=f"rest{k}_groups") for k in range(2)]
        glow = [[Signal(gw, name=f"rest{k}_g{g}_low") for g in range(ng)] for k in range(2)]

        def group_bits(bits, g):
            return Cat(*[bits[g * G + i] if g * G + i < n else Const(0, 1) for i in range(G)])

        pow2 = all(dd & (dd - 1) == 0 for dd in dims)

        def entry_of(k, lin):
            """The packed entry of bank k at linear index ``lin`` (a Value)."""
            lin = lin[:lw]
            addr = Cat(lin, Const(k, 1))[:aw] if n & (n - 1) == 0 else (lin + k * n)[:aw]
            if order == 1:
                return Cat(lin, addr)
            if pow2:
                crds, at = [], 0                       # the innermost coordinate in the low bits
                for d in reversed(range(order)):
                    cb = (dims[d] - 1).bit_length()
                    crds.insert(0, Cat(lin[at:at + cb], Const(0, cws[d]))[:cws[d]])
                    at += cb
                return Cat(lin, addr, *crds)
            table = Array([Const(entry_const(k, i) >> (lw + aw), sum(cws)) for i in range(n)])
            return Cat(lin, addr, table[lin])

        want = [Signal(name=f"pop_wanted{k}", attrs={"keep": 1}) for k in range(2)]
        m.d.comb += [want[k].eq(em[k] & hv[k] & ~ephase) for k in range(2)]
        s.clr_bit, s.e_empty, s.e_room, s.ecrd, s.entry_of = clr_bit, e_empty, e_room, ecrd, entry_of
        s.ephase, s.f1, s.f2, s.fields, s.first, s.G, s.glow, s.gne = ephase, f1, f2, fields, first, G, glow, gne
        s.group_bits, s.gw, s.head, s.hv, s.ins_entry, s.ins_lin = group_bits, gw, head, hv, ins_entry, ins_lin
        s.low_addr, s.lw, s.ng, s.nv, s.nxt, s.plane_last, s.pop = low_addr, lw, ng, nv, nxt, plane_last, pop
        s.ptr, s.rdata, s.release, s.rest, s.ring, s.row_one = ptr, rdata, release, rest, ring, row_one
        s.s2_hw, s.s2_rbank, s.s2_rslot, s.s2_rw, s.tgt2 = s2_hw, s2_rbank, s2_rslot, s2_rw, tgt2
        s.third, s.tv, s.want = third, tv, want

    def _emit_bank(self, m, s, k):
        """Order 1: bank ``k``'s emit queue: insertion from s1, pops, rest's groups, value ring."""
        ab, e_room, em, entry_of, f2, fields, G = s.ab, s.e_room, s.em, s.entry_of, s.f2, s.fields, s.G
        glow, gne, group_bits, gw, head, hv = s.glow, s.gne, s.group_bits, s.gw, s.head, s.hv
        ins_entry, ins_lin, low_addr, lw, n, ng, nv = s.ins_entry, s.ins_lin, s.low_addr, s.lw, s.n, s.ng, s.nv
        nxt, pop, ptr, rdata, rest, ring, s1_bank = s.nxt, s.pop, s.ptr, s.rdata, s.rest, s.ring, s.s1_bank
        s1_onehot, s1_v, s2_hw, s2_m, s2_rbank = s.s1_onehot, s.s1_v, s.s2_hw, s.s2_m, s.s2_rbank
        s2_rslot, s2_rw, set_addr, tgt2, third, tv = s.s2_rslot, s.s2_rw, s.set_addr, s.tgt2, s.third, s.tv
        want, wen = s.want, s.wen
        # rest's lowest entry from registers: the first nonempty group (a find-first-set on gne), that group's
        # registered lowest bit (glow)
        gb = max(ng - 1, 1).bit_length()
        any_rest, gone, low_lin = _lowest_value(m, gne[k], ng, [Cat(glow[k][g], Const(g, gb)) for g in range(ng)],
                                                f"rest{k}_group")
        low_entry = entry_of(k, low_lin[:lw])
        # the group that loses its lowest bit: its next lowest, for every group from registers. A pop does not
        # clear rest's bit: entries leave rest in sorted order, so a group's stale bits lie below its lowest
        # (glow) and its next lowest is its lowest bit above glow; rest is cleared as a whole once the bank
        # is emitted (its head empty), before it is refilled
        nlow = []
        for g in range(ng):
            bits = group_bits(rest[k], g)
            rem = Signal(G, name=f"rest{k}_g{g}_rem")
            m.d.comb += rem.eq(bits & Cat(*[glow[k][g] < i for i in range(G)]))
            g_any, _, g_low = _lowest_value(m, rem, G, [Const(i, gw) for i in range(G)], f"rest{k}_g{g}_next",
                                            onehot=False)
            # (kept: else the mapper moves the pop's choice into the find-first-set)
            k_any = Signal(name=f"rest{k}_g{g}_next_any", attrs={"keep": 1})
            k_low = Signal(gw, name=f"rest{k}_g{g}_next_low", attrs={"keep": 1})
            m.d.comb += [k_any.eq(g_any), k_low.eq(g_low)]
            nlow.append((k_any, k_low))
        low_addr.append(fields(third[k])[1])
        h_lin, n_lin, t_lin = fields(head[k])[0], fields(nxt[k])[0], fields(third[k])[0]
        mine = s1_v & (s1_bank == k)
        # the insertion's comparisons of s1's entry with the head, second and third, made a cycle ahead and
        # registered: in the firing's cycle the entry (set_addr) is compared with the registered head,
        # second and third and with the entry inserted in that cycle (s1's, Y); Y's place (head, second,
        # third or none) says what the three registers hold in the next cycle (the bank inserting is not
        # emitting), so it chooses among those comparisons
        lt_r = Signal(3, name=f"ins{k}_less")      # s1's entry < head, second, third
        eq_r = Signal(3, name=f"ins{k}_equal")
        lt_h, lt_n, lt_t = lt_r[0], lt_r[1], lt_r[2]
        eq_h, eq_n, eq_t = eq_r[0], eq_r[1], eq_r[2]
        ins_head = Signal(name=f"ins{k}_head")
        ins_second = Signal(name=f"ins{k}_second")
        ins_third = Signal(name=f"ins{k}_third")
        m.d.comb += [ins_head.eq(~hv[k] | lt_h), ins_second.eq(~eq_h & (~nv[k] | lt_n)),
                     ins_third.eq(~eq_h & ~eq_n & (~tv[k] | lt_t))]
        yh, ys, yt = (Signal(name=f"ins{k}_prev_{x}") for x in ("head", "second", "third"))
        m.d.comb += [yh.eq(mine & ins_head), ys.eq(mine & ~ins_head & ins_second),
                     yt.eq(mine & ~ins_head & ~ins_second & ins_third)]
        # the linear index of the third after this cycle's insertion of Y (from registers)
        t_next = Signal(lw, name=f"ins{k}_third_next")
        m.d.comb += t_next.eq(Mux(yh | ys, n_lin, Mux(yt, ins_lin, t_lin)))
        # the groups of rest that s1's insertion may set, registered in the firing's cycle per group (each
        # group's logic then looks at its own two registers, not at s1's validity and bank, which would fan
        # out to every group and rest bit of both banks): the firing accumulates into bank k and its entry
        # (the third the entry meets: the third after this cycle's insertion of Y) lies in group g. The
        # comparisons (below, from registers) then say which of the two goes to rest
        grp_new = Signal(ng, name=f"rest{k}_new_group")
        grp_third = Signal(ng, name=f"rest{k}_third_group")
        mine_next = wen & (ab == k)
        m.d.sync += [grp_new.eq(Cat(mine_next & ((set_addr >> gw) == g) for g in range(ng))),
                     grp_third.eq(Cat(mine_next & ((t_next >> gw) == g) for g in range(ng)))]

        def after_prev(r):
            """The comparisons (r: with head, second, third, Y) after this cycle's insertion of Y."""
            return Cat(Mux(yh, r[3], r[0]), Mux(yh, r[0], Mux(ys, r[3], r[1])),
                       Mux(yh | ys, r[1], Mux(yt, r[3], r[2])))
        m.d.sync += [lt_r.eq(after_prev([set_addr < h_lin, set_addr < n_lin, set_addr < t_lin,
                                         set_addr < ins_lin])),
                     eq_r.eq(after_prev([set_addr == h_lin, set_addr == n_lin, set_addr == t_lin,
                                         set_addr == ins_lin]))]
        # the registers a pop changes take Mux(pop, if_pop, hold) (late_regs: both candidates from registers,
        # on kept wires, so the pop, which waits for the outputs' room, is the last choice before each of
        # them); the others do not look at the pop (a bank that pops is emitting: it neither inserts nor
        # clears rest)
        late_regs = [ptr[k], head[k], hv[k], nxt[k], nv[k], third[k], tv[k]]
        if_pop = {id(r): Signal.like(r, name=f"{r.name}_if_pop", attrs={"keep": 1}) for r in late_regs}
        hold = {id(r): Signal.like(r, name=f"{r.name}_hold", attrs={"keep": 1}) for r in late_regs}
        for r in late_regs:
            m.d.comb += [if_pop[id(r)].eq(r), hold[id(r)].eq(r)]
            m.d.sync += r.eq(Mux(pop[k], if_pop[id(r)], hold[id(r)]))
        # the groups: only the group losing its lowest bit (gone) changes on a pop, so each group looks at its
        # own pop & gone[g] (a kept wire per group: the pop's fan-out is split among the groups); their hold
        # candidates (the insertion) are not kept
        for r in glow[k] + [gne[k]]:
            hold[id(r)] = Signal.like(r, name=f"{r.name}_hold")
            m.d.comb += hold[id(r)].eq(r)
        # (want & gone[g] from registers, so the outputs' room is one LUT before each group's choice)
        wg = [Signal(name=f"rest{k}_g{g}_pop_wanted", attrs={"keep": 1}) for g in range(ng)]
        pg = [Signal(name=f"rest{k}_g{g}_pop", attrs={"keep": 1}) for g in range(ng)]
        m.d.comb += [wg[g].eq(want[k] & gone[g]) for g in range(ng)]
        m.d.comb += [pg[g].eq(wg[g] & e_room) for g in range(ng)]
        m.d.sync += gne[k].eq(Cat(Mux(pg[g], nlow[g][0], hold[id(gne[k])][g]) for g in range(ng)))
        m.d.sync += [glow[k][g].eq(Mux(pg[g], nlow[g][1], hold[id(glow[k][g])])) for g in range(ng)]

        def on_pop(r, value):
            m.d.comb += if_pop[id(r)].eq(value)

        def on_hold(r, value):
            m.d.comb += hold[id(r)].eq(value)
        with m.If(em[k]):
            for i in range(4):
                with m.If(f2 & (tgt2 == i)):
                    m.d.sync += ring[k][i].eq(rdata)
        with m.Elif(mine):
            eq_head, eq_second = eq_h, eq_n
            slot = Signal(2, name=f"value_slot{k}")
            m.d.comb += slot.eq(Mux(ins_head, ptr[k] - 1, Mux(eq_head, ptr[k], ptr[k] + 1)))
            with m.If(ins_head):
                on_hold(ptr[k], ptr[k] - 1)
            m.d.sync += [s2_rw.eq(ins_head | eq_head | ins_second | eq_second), s2_rslot.eq(slot),
                         s2_hw[k].eq(ins_head | eq_head)]
        # the merged value lands in its slot from s2 (one cycle after the merge)
        for i in range(4):
            with m.If(s2_rw & (s2_rbank == k) & (s2_rslot == i)):
                m.d.sync += ring[k][i].eq(s2_m)
        on_pop(ptr[k], ptr[k] + 1)
        on_pop(head[k], nxt[k])
        on_pop(hv[k], nv[k])
        on_pop(nxt[k], third[k])
        on_pop(nv[k], tv[k])
        on_pop(third[k], low_entry)
        on_pop(tv[k], any_rest)
        # the insertion compares the entry with the registered head, second and third only (an entry already
        # there equals one of them or lies in rest, where setting its bit again changes nothing); it follows
        # the firing by a cycle (from s1), like the merge, and precedes the bank's first emission (the
        # closing firing's cycle holds the last one; a bank inserting is not emitting)
        with m.If(mine):
            with m.If(ins_head):
                for r, value in ((head[k], ins_entry), (hv[k], 1), (nxt[k], head[k]), (nv[k], hv[k]),
                                 (third[k], nxt[k]), (tv[k], nv[k])):
                    on_hold(r, value)
            with m.Elif(ins_second):
                for r, value in ((nxt[k], ins_entry), (nv[k], 1), (third[k], nxt[k]), (tv[k], nv[k])):
                    on_hold(r, value)
            with m.Elif(ins_third):
                on_hold(third[k], ins_entry)
                on_hold(tv[k], 1)
        # the entry that goes to rest: the displaced third, or the new entry beyond the third (with a third,
        # the three are valid and sorted: the entry enters them iff it is below the third and equals none of
        # them); per group from its registered selects (which hold s1's validity and bank: a bank inserting
        # is not emitting, so neither pops nor clears rest in that cycle) and the comparisons
        en_t = Signal(name=f"rest{k}_set_third")
        en_i = Signal(name=f"rest{k}_set_new")
        m.d.comb += [en_t.eq(tv[k] & lt_t & ~eq_h & ~eq_n), en_i.eq(tv[k] & ~lt_t & ~eq_t)]
        t_low = Cat(*[t_lin[:gw] == i for i in range(G)])
        gne_set = Signal(ng, name=f"rest{k}_groups_set")
        rest_set = []
        for g in range(ng):
            h_t, h_i = Signal(name=f"rest{k}_g{g}_set_third"), Signal(name=f"rest{k}_g{g}_set_new")
            m.d.comb += [h_t.eq(grp_third[g] & en_t), h_i.eq(grp_new[g] & en_i), gne_set[g].eq(h_t | h_i)]
            for i in range(G):
                if g * G + i < n:
                    rest_set.append((h_t & t_low[i]) | (h_i & s1_onehot[g * G + i]))
            for hit, low in ((h_t, t_lin[:gw]), (h_i, ins_lin[:gw])):
                with m.If(hit & (~gne[k][g] | (low < glow[k][g]))):
                    on_hold(glow[k][g], low)
        with m.If(em[k] & ~hv[k]):
            m.d.sync += rest[k].eq(0)
        with m.Else():
            m.d.sync += rest[k].eq(rest[k] | Cat(*rest_set))
        on_hold(gne[k], gne[k] | gne_set)

    def _emit_outputs(self, m, s):
        """Order 1: the emit side's firing rule and the outputs' payloads."""
        clr_bit, done_in, done_out, e_empty, e_full = s.clr_bit, s.done_in, s.done_out, s.e_empty, s.e_full
        e_room, eb, ebase, ecrd, em, ephase, f1, f2 = s.e_room, s.eb, s.ebase, s.ecrd, s.em, s.ephase, s.f1, s.f2
        fe, first, hv, low_addr, names, neb, oc = s.fe, s.first, s.hv, s.low_addr, s.names, s.neb, s.oc
        order, outs, ov, plane_last, pop, ptr, rdata = s.order, s.outs, s.ov, s.plane_last, s.pop, s.ptr, s.rdata
        release, ring, row_one, rpe, s2_hw, s2_m, W = s.release, s.ring, s.row_one, s.rpe, s.s2_hw, s.s2_m, s.W
        want = s.want
        # the emit side's read: bank eb's third entry (a register), which becomes its second when the head is
        # emitted in this cycle. The bank's last write (the merge of its last firing, in the cycle of the
        # closing firing) precedes its first emission, so the read never meets a write of its entry
        m.d.comb += rpe.addr.eq(Mux(eb, low_addr[1], low_addr[0]))
        plane_end = Signal()                           # order 3: the row just emitted was its plane's last

        # the outputs' payloads: an entry (coordinates, value) when a bank emits an entry (its head, from
        # registers: (em[k] & hv[k]) & ~ephase), else the control token the firing rule's cases give (``cp``),
        # so the case decode is a LUT of registers beside the value, not a priority chain behind it
        cp = {id(o): SimpleNamespace(payload=Signal(o.payload.shape(), name=f"{p}_control"))
              for p, o in zip(names + ["val"], outs + [ov])}
        # (kept: else the mapper builds the entry case from the pop's kept wires and the value's choices, a chain)
        e_data = Signal(name="emit_entry", attrs={"keep": 1})
        e_value = Signal(signed(W), name="emit_value", attrs={"keep": 1})
        m.d.comb += e_data.eq(((em[0] & hv[0]) | (em[1] & hv[1])) & ~ephase)
        def final_stops():
            m.d.comb += [fe.push[p].eq(1) for p in fe.push]
            for d, o in enumerate(outs):
                set_stop(m, cp[id(o)], ebase + d)
            set_stop(m, cp[id(ov)], ebase + order - 1)
            m.d.comb += release.eq(fe.fire)
            with m.If(fe.fire):
                m.d.sync += [ephase.eq(0)] + [s.eq(1) for s in first]
                m.d.comb += neb.eq(~eb)

        # pop[k] = want[k] & e_room: want[k] from registers, e_room from the outputs' room (both on kept wires, so
        # each register a pop changes takes one LUT after e_room: Mux(want & e_room, if_pop, hold))
        m.d.comb += [pop[k].eq(want[k] & e_room) for k in range(2)]
        with m.If(e_full):
            m.d.comb += fe.go.eq(1)
            with m.If(e_empty):
                final_stops()
            with m.Elif(ephase == 0):
                m.d.comb += [fe.push["crd_inner"].eq(1), fe.push["val"].eq(1)]
                for d in range(order - 1):
                    m.d.comb += fe.push[names[d]].eq(first[d])
                # the head's value: per bank from its ring at its pointer, the emitting bank's by em (registers)
                e_hval = _or_all([em[k].replicate(W) & Array(ring[k])[ptr[k]] for k in range(2)], W)
                # (the bank's first emission may follow its last merge directly: that value is still in s2)
                fw = (em[0] & s2_hw[0]) | (em[1] & s2_hw[1])
                m.d.comb += e_value.eq(Mux(f2 & f1, rdata, Mux(fw, s2_m, e_hval.as_signed())))
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
                        set_stop(m, cp[id(outs[1])], 0)
                        set_stop(m, cp[id(oc)], plane_end)
                        set_stop(m, cp[id(ov)], plane_end)
                    else:
                        set_stop(m, cp[id(oc)], 0)
                        set_stop(m, cp[id(ov)], 0)
                    with m.If(fe.fire):
                        m.d.sync += [ephase.eq(0), first[order - 2].eq(1)]
                        if order == 3:
                            m.d.sync += first[0].eq(plane_end)
        with m.Elif(done_in & ~done_out):
            m.d.comb += fe.go.eq(1)
            m.d.comb += [fe.push[p].eq(1) for p in fe.push]
            for o in outs + [ov]:
                set_done(m, cp[id(o)])
            with m.If(fe.fire):
                m.d.sync += done_out.eq(1)

        for o, value in list(zip(outs, ecrd)) + [(ov, e_value)]:
            m.d.comb += [o.payload.data.eq(Mux(e_data, value, cp[id(o)].payload.data)),
                         o.payload.ctrl.eq(~e_data & cp[id(o)].payload.ctrl)]

    def _bank_registers(self, m, s):
        """Order 1: bitmaps, full flags and bases per bank; the accumulate bank's next value."""
        ab, ab_free, base, bm, close, close_base, eb = s.ab, s.ab_free, s.base, s.bm, s.close, s.close_base, s.eb
        em, fa, fe, full, nab, neb, release, s1_bank = s.em, s.fa, s.fe, s.full, s.nab, s.neb, s.release, s.s1_bank
        s1_onehot, s1_v = s.s1_onehot, s.s1_v

        # ---- bank registers (the two sides never work on the same bank)
        nfulls = []
        for k in range(2):
            # the occupancy bitmap: set from s1, cleared as a whole while the bank is full (only the accumulate
            # side reads it, for its own bank: a full bank's bits are not looked at before it is freed, and a
            # bank freed in its first full cycle has none)
            with m.If(full[k]):
                m.d.sync += bm[k].eq(0)
            with m.Elif(s1_v & (s1_bank == k)):
                m.d.sync += bm[k].eq(bm[k] | s1_onehot)
            nfull = Signal(name=f"next_full{k}")
            m.d.comb += nfull.eq(full[k])
            with m.If(close & (ab == k)):
                m.d.sync += base[k].eq(close_base)
                m.d.comb += nfull.eq(1)
            with m.If(release & (eb == k)):
                m.d.comb += nfull.eq(0)
            m.d.sync += [full[k].eq(nfull), em[k].eq(nfull & (neb == k))]
            nfulls.append(nfull)
        m.d.sync += ab_free.eq(~Mux(nab, nfulls[1], nfulls[0]))
        with m.If(close):
            m.d.comb += nab.eq(~ab)
        fa.build(m)
        fe.build(m)

    def _walk(self, m, s):
        """Orders 2 and 3: the emit side as a row walker (the emit start delay E of the registry).

        Rows are the prefixes ((a,) or (a, b)), ``dim`` bits each of the bank's occupancy bitmap; ``rne[k]``
        (registers, set from s1) says which rows of bank k are nonempty. Three stages, each a register that
        takes the one before when it is empty or handed on: ``f1`` (the fetcher: the lowest row left of the
        fetch bank, its one-hot mask, cleared from rne; whether it is the bank's last row, its plane's last;
        an empty bank gives an ``empty`` item), ``nb`` (that row's bits, read from the bitmap by the mask,
        which clears them) and ``cr`` (the current row: its lowest bit is the next entry, cleared when issued;
        with no bit left its stop, a row end or the closing stops). Each issue (one per cycle, while the
        credits allow) is a firing descriptor (the outputs' tokens, the entry's memory address) through p1
        (the memory read addressed), p2, p3 (the read's data: the value) into a queue of ``Q`` ahead of the
        outputs; the outputs fire whenever the queue's head is present and they have room. The credits
        (issued, not yet fired, at most Q) keep the queue from overrunning. Every row costs at least two
        issues (an entry and its stop) and the fetch takes one row per cycle, so after the start-up (E) the
        issues keep pace with the outputs, across banks too (the fetcher moves on to the next full bank after
        a bank's last row). A bank's rows and bits are cleared as the walker passes them, so it is empty when
        freed (the closing firing, from the queue's head).

        Timing (ECP5): the fetcher's lowest row and last-row test are per bank from rne's registers, the fetch
        bank chosen after (the last row: at most one row nonempty, no find-first-set before it), and f1 keeps
        the one-hot mask only (nb's row payload is encoded from it); ``cr_has`` is whether two bits are set
        (no carry chain); p3 is written into the queue's slot whatever the firing (the firing only decides
        whether the write pointer steps), the head is taken on a kept wire from its own push flags and the
        outputs' room, the slot at the read pointer is chosen by slices of LUT4 / PFUMX / L6MUX21 with the
        pointer in 4 copies, the release comes from the pop, and ``ab_free`` has both close cases on kept
        wires, the close choosing last."""
        order, dims, n, W, aw = s.order, s.dims, s.n, s.W, s.aw
        dim = dims[-1]
        nrows = n // dim
        bm, full, base, ab, eb, nab, neb = s.bm, s.full, s.base, s.ab, s.eb, s.nab, s.neb
        fa, fe, outs, ov, rpe = s.fa, s.fe, s.outs, s.ov, s.rpe
        names = s.names
        s1_v, s1_bank, s1_onehot = s.s1_v, s.s1_bank, s.s1_onehot
        lw = Shape.cast(range(max(n, 2))).width
        cws = [Shape.cast(range(max(dd, 2))).width for dd in dims]
        jw = cws[-1]
        # per row: its linear base and its outer coordinates (constants), packed
        rpay = []
        for r in range(nrows):
            word, at = r * dim, lw
            for d in range(order - 1):
                word |= (r // prod(dims[d + 1:-1]) % dims[d]) << at
                at += cws[d]
            rpay.append(word)
        pw = lw + sum(cws[:-1])

        def unpack_row(p):
            crds, at = [], lw
            for d in range(order - 1):
                crds.append(p[at:at + cws[d]])
                at += cws[d]
            return p[:lw], crds

        # ---- row-nonempty bits per bank, set from s1 (beside the bitmap)
        rne = [Signal(nrows, name=f"row_nonempty{k}") for k in range(2)]
        rowor = Cat(*[s1_onehot[r * dim:(r + 1) * dim].any() for r in range(nrows)])
        walked = [Signal(name=f"walked{k}") for k in range(2)]     # the fetcher passed bank k's last row
        fb = Signal(name="fetch_bank")
        release = Signal()

        # ---- f1: the fetcher
        f1_v, f1_empty, f1_last, f1_plast, f1_bank = (Signal(name=f"f1_{x}") for x in
                                                      ("valid", "empty", "last", "plane_last", "bank"))
        f1_oh = Signal(nrows, name="f1_rows")
        f1_newp = Signal(name="f1_plane_first")
        newp = Signal(init=1, name="fetch_plane_first")            # the next row fetched starts a plane
        nb_v, nb_empty, nb_last, nb_plast, nb_bank, nb_newp = (Signal(name=f"nb_{x}") for x in
                                                               ("valid", "empty", "last", "plane_last", "bank",
                                                                "plane_first"))
        nb_bits = Signal(dim, name="nb_bits")
        nb_pay = Signal(pw, name="nb_row")
        cr_v, cr_empty, cr_last, cr_plast, cr_bank, cr_first, cr_newp = (
            Signal(name=f"cr_{x}") for x in ("valid", "empty", "last", "plane_last", "bank", "first",
                                             "plane_first"))
        cr_bits = Signal(dim, name="cr_bits")
        cr_pay = Signal(pw, name="cr_row")
        credit = Signal(init=1, name="emit_credit")

        pend = Signal(nrows, name="fetch_rows")
        m.d.comb += pend.eq(Mux(fb, rne[1], rne[0]))
        avail = Signal(name="fetch_avail")
        m.d.comb += avail.eq(Mux(fb, full[1] & ~walked[1], full[0] & ~walked[0]))
        # (the lowest nonempty row per bank from its registers, the fetch bank chosen after; the row's payload
        # is encoded from f1's one-hot mask on the way to nb)
        lows = [_lowest(m, rne[k], nrows, rpay, f"fetch{k}") for k in range(2)]
        p_any = Mux(fb, lows[1][0], lows[0][0])
        p_oh = Signal(nrows, name="fetch_lowest")
        m.d.comb += p_oh.eq(Mux(fb, lows[1][1], lows[0][1]))
        rest = pend & ~p_oh
        # (the fetch bank's row is its last when at most one row is nonempty: per bank from its registers, the
        # bank chosen after, rather than rest's OR after the find-first-set over the chosen bank's rows)
        last = Mux(fb, _at_most_one(m, rne[1], "fetch_one1"), _at_most_one(m, rne[0], "fetch_one0"))
        if order == 3:
            per = dims[1]
            plane_of = [r // per for r in range(nrows)]
            same = Cat(*[p_oh[r] & Cat(*[rest[q] for q in range(nrows) if plane_of[q] == plane_of[r]]).any()
                         for r in range(nrows)]).any()
            plast = ~same
        else:
            plast = Const(1, 1)
        # hand-on conditions
        # cr has a bit left: a register (cleared when the issue takes the last one: cr_bits & (cr_bits - 1),
        # the lowest bit cleared, a carry chain), so the hand-ons look at registers only
        cr_has = Signal(name="cr_has")
        has = cr_has
        cr_next = Signal(dim, name="cr_bits_next")
        m.d.comb += cr_next.eq(cr_bits & (cr_bits - 1))
        issue = Signal(name="issue")
        cr_done = Signal(name="cr_done")           # cr's item is finished by this cycle's issue
        m.d.comb += [issue.eq(cr_v & credit), cr_done.eq(issue & (cr_empty | ~has))]
        nb_take = Signal(name="nb_take")
        m.d.comb += nb_take.eq(nb_v & (~cr_v | cr_done))
        nb_free = ~nb_v | nb_take
        f1_take = Signal(name="f1_take")
        m.d.comb += f1_take.eq(f1_v & nb_free)
        f1_load = Signal(name="f1_load")
        m.d.comb += f1_load.eq(avail & (~f1_v | f1_take))
        with m.If(f1_load):
            m.d.sync += [f1_v.eq(1), f1_empty.eq(~p_any), f1_last.eq(last), f1_plast.eq(plast),
                         f1_bank.eq(fb), f1_oh.eq(p_oh), f1_newp.eq(newp)]
            m.d.sync += newp.eq(last | plast)
            with m.If(last):
                m.d.sync += fb.eq(~fb)
        with m.Elif(f1_take):
            m.d.sync += f1_v.eq(0)
        # ---- nb: the row's bits from the bitmap
        bmf = Mux(f1_bank, bm[1], bm[0])
        rows_bits = [bmf[r * dim:(r + 1) * dim] for r in range(nrows)]
        with m.If(f1_take):
            m.d.sync += [nb_v.eq(1), nb_empty.eq(f1_empty), nb_last.eq(f1_last), nb_plast.eq(f1_plast),
                         nb_bank.eq(f1_bank), nb_pay.eq(_or_all([f1_oh[r].replicate(pw) & Const(rpay[r], pw) for r in range(nrows)], pw)),
                         nb_newp.eq(f1_newp),
                         nb_bits.eq(_or_all([f1_oh[r].replicate(dim) & rows_bits[r] for r in range(nrows)], dim))]
        with m.Elif(nb_take):
            m.d.sync += nb_v.eq(0)
        # ---- cr: the current row, the issue
        j_any, j_oh, j = _lowest(m, cr_bits, dim, list(range(dim)), "row")
        with m.If(nb_take):
            m.d.sync += [cr_v.eq(1), cr_empty.eq(nb_empty), cr_last.eq(nb_last), cr_plast.eq(nb_plast),
                         cr_bank.eq(nb_bank), cr_pay.eq(nb_pay), cr_bits.eq(nb_bits), cr_first.eq(1),
                         cr_newp.eq(nb_newp), cr_has.eq(~nb_empty)]
        with m.Elif(cr_done):
            m.d.sync += cr_v.eq(0)
        with m.Elif(issue):
            # (a bit is left after the lowest when at least two are set: no carry chain on cr_has's path)
            m.d.sync += [cr_bits.eq(cr_next), cr_first.eq(0), cr_has.eq(~_at_most_one(m, cr_bits, "row_one"))]
        s.ab, s.aw, s.base, s.bm, s.cr_bank, s.cr_empty = ab, aw, base, bm, cr_bank, cr_empty
        s.cr_first, s.cr_last, s.cr_newp, s.cr_pay, s.cr_plast = cr_first, cr_last, cr_newp, cr_pay, cr_plast
        s.credit, s.dim, s.eb, s.f1_bank, s.f1_load, s.f1_oh = credit, dim, eb, f1_bank, f1_load, f1_oh
        s.f1_take, s.fa, s.fb, s.fe, s.full, s.has, s.issue, s.j = f1_take, fa, fb, fe, full, has, issue, j
        s.last, s.lw, s.nab, s.names, s.neb, s.nrows, s.order = last, lw, nab, names, neb, nrows, order
        s.outs, s.ov, s.release, s.rest, s.rne, s.rowor, s.rpe = outs, ov, release, rest, rne, rowor, rpe
        s.s1_bank, s.s1_onehot, s.s1_v, s.unpack_row, s.walked = s1_bank, s1_onehot, s1_v, unpack_row, walked
        self._walk_issue(m, s)
        self._walk_queue(m, s)
        self._walk_banks(m, s)
        return m

    def _walk_issue(self, m, s):
        """The walker's issue: a firing descriptor per entry or stop, through the memory read (p1 .. p3)."""
        aw, base, cr_bank, cr_empty, cr_first = s.aw, s.base, s.cr_bank, s.cr_empty, s.cr_first
        cr_last, cr_newp, cr_pay, cr_plast, has = s.cr_last, s.cr_newp, s.cr_pay, s.cr_plast, s.has
        issue, j, lw, names, order, outs, ov, rpe = s.issue, s.j, s.lw, s.names, s.order, s.outs, s.ov, s.rpe
        unpack_row = s.unpack_row
        # the descriptor: per output its push and token, val's token (a stop) or an entry (value from memory)
        outs_all = outs + [ov]
        toks = [Signal(o.payload.shape(), name=f"issue_{p}") for p, o in zip(names + ["val"], outs_all)]
        pushes = Signal(order + 1, name="issue_push")
        d_entry, d_close = Signal(name="issue_entry"), Signal(name="issue_close")
        d_addr = Signal(aw, name="issue_addr")
        rbase, rcrd = unpack_row(cr_pay)
        lin = (rbase + j)[:lw]
        m.d.comb += d_addr.eq(s.bank_addr(cr_bank, lin))
        ebase = Mux(cr_bank, base[1], base[0])
        closing = cr_empty | (~has & cr_last)
        with m.If(closing):
            m.d.comb += [d_close.eq(1), pushes.eq(-1)]
            for d in range(order):
                set_stop(m, SimpleNamespace(payload=toks[d]), ebase + d)
            set_stop(m, SimpleNamespace(payload=toks[order]), ebase + order - 1)
        with m.Elif(has):
            m.d.comb += d_entry.eq(1)
            pf = [cr_first & cr_newp] + [cr_first] if order == 3 else [cr_first]
            m.d.comb += pushes.eq(Cat(*pf, Const(3, 2)))
            for d in range(order - 1):
                set_data(m, SimpleNamespace(payload=toks[d]), rcrd[d])
            set_data(m, SimpleNamespace(payload=toks[order - 1]), j)
        with m.Else():
            # a row end: order 2 S0 on crd_inner/val; order 3 S1 there and S0 on crd_outer0 when the plane ends
            if order == 3:
                m.d.comb += pushes.eq(Cat(Const(0, 1), cr_plast, Const(3, 2)))
                set_stop(m, SimpleNamespace(payload=toks[1]), 0)
                set_stop(m, SimpleNamespace(payload=toks[2]), cr_plast)
                set_stop(m, SimpleNamespace(payload=toks[3]), cr_plast)
            else:
                m.d.comb += pushes.eq(Cat(Const(0, 1), Const(3, 2)))
                set_stop(m, SimpleNamespace(payload=toks[1]), 0)
                set_stop(m, SimpleNamespace(payload=toks[2]), 0)
        desc = Cat(pushes, d_entry, d_close, *[Value.cast(t) for t in toks])
        dw = len(desc)
        p = [(Signal(name=f"p{i}_valid"), Signal(dw, name=f"p{i}_desc")) for i in (1, 2, 3)]
        p1_addr = Signal(aw, name="p1_addr")
        m.d.sync += [p[0][0].eq(issue), p[0][1].eq(desc), p1_addr.eq(d_addr)]
        m.d.sync += [p[1][0].eq(p[0][0]), p[1][1].eq(p[0][1]), p[2][0].eq(p[1][0]), p[2][1].eq(p[1][1])]
        m.d.comb += rpe.addr.eq(p1_addr)
        # p3: the read's data (addressed by p1 two cycles before) is the entry's value
        vlay = ov.payload.shape()
        vtok = Signal(vlay, name="p3_val")
        p3 = p[2][1]
        vt_off = dw - len(Value.cast(toks[order]))
        m.d.comb += Value.cast(vtok).eq(p3[vt_off:])
        with m.If(p3[order + 1]):
            m.d.comb += [vtok.data.eq(rpe.data.as_signed()), vtok.ctrl.eq(0)]
        qin = Cat(p3[:vt_off], Value.cast(vtok))
        s.dw, s.outs_all, s.p, s.qin, s.toks = dw, outs_all, p, qin, toks

    def _walk_queue(self, m, s):
        """The walker's queue of descriptors ahead of the outputs, with credits; the outputs' firing."""
        credit, dw, eb, fe, full, issue, names, neb = s.credit, s.dw, s.eb, s.fe, s.full, s.issue, s.names, s.neb
        order, outs_all, p, qin, release, toks = s.order, s.outs_all, s.p, s.qin, s.release, s.toks
        # the queue: Q entries behind a head register (the outputs' tokens and push flags come from registers)
        Q = 8
        queue = Array([Signal(dw, name=f"queue{i}") for i in range(Q)])
        q_wr, q_rd = Signal(range(Q), name="queue_wr"), Signal(range(Q), name="queue_rd")
        q_n = Signal(range(Q + 1), name="queue_count")
        head = Signal(dw, name="queue_head")
        q_any = Signal(name="queue_head_valid")
        pop = Signal(name="queue_pop")
        # (the head is taken when empty or popped: from the head's register and the outputs' room directly, on
        # a kept wire, rather than through the firing rule's go and fire)
        take = kept(m, ~q_any | all_of([~head[i] | o.ready for i, o in enumerate(outs_all)]), "queue_take")
        m.d.comb += pop.eq(q_any & take)
        bypass = Signal(name="queue_bypass")
        m.d.comb += bypass.eq(take & (q_n == 0))
        # (the slot at q_rd as slices of LUT4/PFUMX/L6MUX21 on ECP5, their selects from copies of q_rd, 4 per
        # bit of it, each for a quarter of the head's bits)
        rd_next = Signal(range(Q), name="queue_rd_next")
        m.d.comb += rd_next.eq(Mux(take & (q_n != 0), q_rd + 1, q_rd))
        rd_cp = [s.cells.copy_register(m, rd_next, f"queue_rd_{c}") for c in range(4)]
        qw = -(-dw // 4)
        slot = Cat(*[s.cells.mux8(m, rd_cp[c], [queue[i][c * qw:min(dw, (c + 1) * qw)] for i in range(Q)],
                           min(dw, (c + 1) * qw) - c * qw, f"queue_slot_{c}") for c in range(4)])
        with m.If(take):
            with m.If(q_n != 0):
                m.d.sync += [head.eq(slot), q_any.eq(1), q_rd.eq(q_rd + 1)]
            with m.Else():
                m.d.sync += [head.eq(qin), q_any.eq(p[2][0])]
        wr = p[2][0] & ~bypass
        # (p3 is written into slot q_wr whatever the firing, which only decides whether q_wr steps: the slot
        # written when p3 goes straight into the head stays free. The slot is free whenever p3 is valid, as
        # the credits keep head, queue and p1..p3 at most Q: so the write enables come from registers)
        with m.If(p[2][0]):
            m.d.sync += queue[q_wr].eq(qin)
        with m.If(wr):
            m.d.sync += q_wr.eq(q_wr + 1)
        m.d.sync += q_n.eq(q_n + wr - (take & (q_n != 0)))
        occ = Signal(range(Q + 1), name="emit_issued")
        m.d.sync += occ.eq(occ + issue - pop)
        # (the credit does not wait for this cycle's firing, which occ counts from the next cycle: the outputs'
        # room is not on its path)
        m.d.sync += credit.eq(occ + issue < Q)
        done_in, done_out = s.done_in, s.done_out
        at = order + 3
        with m.If(q_any):
            m.d.comb += fe.go.eq(1)
            for i, (pn, o) in enumerate(zip(names + ["val"], outs_all)):
                tw = len(Value.cast(toks[i]))
                m.d.comb += [fe.push[pn].eq(head[i]), Value.cast(o.payload).eq(head[at:at + tw])]
                at += tw
            m.d.comb += release.eq(pop & head[order + 2])
        with m.Elif(done_in & ~done_out & ~full[0] & ~full[1]):
            m.d.comb += fe.go.eq(1)
            m.d.comb += [fe.push[pn].eq(1) for pn in fe.push]
            for o in outs_all:
                set_done(m, o)
            with m.If(fe.fire):
                m.d.sync += done_out.eq(1)
        with m.If(release):
            m.d.comb += neb.eq(~eb)

    def _walk_banks(self, m, s):
        """The walker's bank registers: bitmaps, row bits, full flags; the accumulate bank's next value."""
        ab, base, bm, dim, eb, f1_bank, f1_load = s.ab, s.base, s.bm, s.dim, s.eb, s.f1_bank, s.f1_load
        f1_oh, f1_take, fa, fb, fe, full, last, nab = s.f1_oh, s.f1_take, s.fa, s.fb, s.fe, s.full, s.last, s.nab
        nrows, release, rest, rne, rowor, s1_bank = s.nrows, s.release, s.rest, s.rne, s.rowor, s.s1_bank
        s1_onehot, s1_v, walked = s.s1_onehot, s.s1_v, s.walked
        # ---- bank registers
        nfulls = []
        for k in range(2):
            # the bitmap and row bits: set from s1; a row's cleared when the walker fetches it (f1: rne, nb: bm)
            # (a row's bits are cleared the cycle after nb read them, from registers: the bank stays full)
            clr = Signal(nrows, name=f"bitmap{k}_clear")
            m.d.sync += clr.eq(Mux(f1_take & (f1_bank == k), f1_oh, 0))
            with m.If(s1_v & (s1_bank == k)):
                m.d.sync += bm[k].eq(bm[k] | s1_onehot)
            with m.Else():
                m.d.sync += bm[k].eq(bm[k] & ~Cat(*[clr[r].replicate(dim) for r in range(nrows)]))
            with m.If(f1_load & (fb == k)):
                m.d.sync += rne[k].eq(rest)
                with m.If(last):
                    m.d.sync += walked[k].eq(1)
            with m.Elif(s1_v & (s1_bank == k)):
                m.d.sync += rne[k].eq(rne[k] | rowor)
            nfull = Signal(name=f"next_full{k}")
            m.d.comb += nfull.eq(full[k])
            with m.If(s.close & (ab == k)):
                m.d.sync += base[k].eq(s.close_base)
                m.d.comb += nfull.eq(1)
            with m.If(release & (eb == k)):
                m.d.comb += nfull.eq(0)
                m.d.sync += walked[k].eq(0)
            m.d.sync += full[k].eq(nfull)
            nfulls.append(nfull)
        # (whether the next accumulate bank is free: for both cases of the close, from registers and the emit
        # side's release on kept wires, the close chooses last)
        free_stay = kept(m, ~Mux(ab, full[1], full[0]) | (release & (eb == ab)), "ab_free_stay")
        free_flip = kept(m, ~Mux(ab, full[0], full[1]) | (release & (eb != ab)), "ab_free_flip")
        m.d.sync += s.ab_free.eq(Mux(s.close, free_flip, free_stay))
        with m.If(s.close):
            m.d.comb += nab.eq(~ab)
        fa.build(m)
        fe.build(m)

