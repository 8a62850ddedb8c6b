"""alu: element-wise fixed-point arithmetic on aligned value streams; stops must match and pass through.

One firing per cycle per token. Binary ops (add sub mul div max min) take ``i_b`` (present for a binary op
without ``const``) or the constant ``const`` (encoded with ``FixedFormat.encode``); unary ops (neg relu exp
sigmoid tanh gelu sqrt rsqrt log abs square) use ``i_a`` only. ``N`` operands count as 0. A control token on
``a`` (stop or D) is passed through (``b`` must hold the same one; both are popped).

The datapath (:func:`fixed_op`) is bit-identical to ``fuseflow/tensors/fixed.py``: saturating add/sub/neg,
mul with round-half-up shift, div truncating toward zero (b == 0 gives max_raw/min_raw by a's sign), exp by
the base-2 decomposition with the ``exp2_table`` ROM and linear interpolation; the functions of
``fuseflow/tensors/fixedfn.py`` the same way: tanh/sigmoid/gelu and log from their tables (ROMs of
``interp_rows``: value and slope per word) with linear interpolation, sqrt and rsqrt by a restoring digit
recurrence (rsqrt after a divider). add/sub/max/min/neg/relu/abs are single-cycle; the others are pipelined
(:class:`Pipe`, latencies in ``registry.op_latency``; docs/hardware.md, "alu datapath"), with ECP5
primitives (registered MULT18X18D, DP16KD with output register) when elaborated for ECP5.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib.memory import Memory

from ...errors import HardwareError
from ...samml.registry import UNARY_ALU_OPS, op_latency
from ...tensors.fixed import EXP_GUARD_BITS, EXP_TABLE_BITS, LOG2E_BITS, LOG2E_Q, exp2_table
from ...tensors.fixedfn import (FN_GUARD_BITS, FN_RANGE_LOG2, LN2_BITS, LN2_Q, gelu_table, interp_rows,
                                log2_table, tanh_table)
from ..token import is_empty
from ._common import OpComponent, copy_ctrl, set_data
from ._cells import dsp_family
from ._pipe import OutputPipeline, Pipe, rom_outreg


def pipelined_mul(P, a, b, add=0, b_en=None):
    """``a * b + add`` (signed; ``add`` a constant, e.g. a rounding half) in four stages: the operands
    (registered, so a multiplier's inputs come from flip-flops), 18x18 partial products (one ECP5 MULT18X18D
    each; :meth:`Pipe.products`), the two cross products summed beside the outer pair (concatenated), the
    full sum. ``b_en``: b's operand register loads only when it is 1, else keeps the last b (the product of
    the new a and that b)."""
    wa, wb = len(a), len(b)
    dsp = P.dsp if max(wa, wb) <= 35 else None     # every 17-bit part fits a MULT18X18D operand
    a, b = P.operands(a, b, dsp, b_en=b_en)
    if wa <= 18 and wb <= 18:
        p, = P.products([(a, b)], dsp, b_en=b_en)
        p = P.stage(p)
        return P.stage(p + add)
    h = 17
    if wa <= h or wb <= h:                  # one narrow operand: two partial products
        if b_en is not None:
            raise HardwareError("pipelined_mul", "a held operand needs both operands wider than 17 bits")
        if wb <= h:
            a, b = b, a
        p0, p1 = P.products([(a, b[:h]), (a, b[h:].as_signed())], dsp)
        p = P.stage(p0 + (p1 << h) + add)
        return P.stage(p)
    al, ah = a[:h], a[h:].as_signed()         # low parts unsigned, high parts signed
    bl, bh = b[:h], b[h:].as_signed()
    pll, plh, phl, phh = P.products([(al, bl), (al, bh), (ah, bl), (ah, bh)], dsp, b_en=b_en)
    outer, mid = P.stage(Cat(pll[:2 * h], phh).as_signed(), plh + phl)
    return P.stage(outer + (mid << h) + add)


def saturate(x, fixed):
    """``x`` clamped to [min_raw, max_raw] as signed(width). Overflow is read from the bits at and above
    width - 1 (all equal to the sign when it fits): reductions, not wide comparisons (carry chains)."""
    lo, hi, W = fixed.min_raw, fixed.max_raw, fixed.width
    x = Value.cast(x)
    if len(x) < W or (len(x) == W and x.shape().signed):       # always fits
        return x.as_signed() if x.shape().signed else Cat(x, Const(0, 1)).as_signed()
    top = x[W - 1:]
    if x.shape().signed:
        neg = x[-1]
        over, under = ~neg & top.any(), neg & ~top.all()
    else:
        over, under = top.any(), Const(0, 1)
    return Mux(over, hi, Mux(under, lo, x[:W]))[:W].as_signed()


def saturating_add_sub(a, b, fixed, sub=False):
    """``a + b`` (``a - b`` with ``sub``) saturated, for signed(width) ``a`` and ``b``: the wrapped width-bit
    sum, replaced by max_raw/min_raw (the sign of ``a``) on overflow, which the operands' signs and the sum's
    top bit tell (one LUT per result bit after a width-bit carry chain; no wider chain for the overflow)."""
    W = fixed.width
    a, b = Value.cast(a), Value.cast(b)
    if len(a) != W or len(b) != W or not (a.shape().signed and b.shape().signed) or W < 2:
        return saturate(a - b if sub else a + b, fixed)
    x = (a - b if sub else a + b)[:W]
    return saturate_overflow(x, add_sub_overflow(a, b, x, sub), ~a[-1])


def add_sub_overflow(a, b, x, sub=False):
    """Whether ``x``, the wrapped W-bit ``a + b`` (``a - b`` with ``sub``) of signed(W) ``a`` and ``b``
    (W >= 2), overflowed: from the operands' signs and the sum's top bit."""
    sa, sb = a[-1], b[-1]
    return (sa ^ sb if sub else ~(sa ^ sb)) & (x[-1] ^ sa)


def saturate_overflow(x, ovf, fill):
    """A wrapped W-bit result ``x`` saturated: on ``ovf`` the limit whose W - 1 low bits are ``fill`` and whose
    top bit is its negation (``fill`` 1: max_raw, 0: min_raw). After an overflowed add ``fill`` is the negation
    of ``a``'s sign, or the sum's top bit."""
    W = len(x)
    return Mux(ovf, Cat(fill.replicate(W - 1), ~fill), x).as_signed()


def fixed_op(m, name, a, b, fixed, prefix="alu", pipe=None):
    """A signed(width) Value computing fixed-point op ``name`` on signed(width) values ``a`` (and ``b``).

    May add submodules (the exp table ROM) to ``m``. ``pipe``: the :class:`Pipe` the pipelined operations
    register their stages in (``registry.op_latency - 1`` of them; the result then belongs to the token that
    entered that many cycles earlier); default a combinational one."""
    P = pipe if pipe is not None else Pipe(m, prefix, comb=True)
    W, F = fixed.width, fixed.frac
    if name in ("add", "sub"):
        return saturating_add_sub(a, b, fixed, sub=name == "sub")
    if name == "max":                       # the sign of the exact difference: one carry chain
        return Mux(~(a - b)[-1], a, b)
    if name == "min":
        return Mux(~(b - a)[-1], a, b)
    if name == "neg":
        return saturate(-a, fixed)
    if name == "relu":
        return Mux(a > 0, a, 0)[:W].as_signed()
    if name in ("mul", "square"):            # stages 1-4: the rounded product; 5: shifted and saturated
        p = pipelined_mul(P, a, a if name == "square" else b, (1 << (F - 1)) if F else 0)
        return P.stage(saturate(p >> F, fixed))
    if name == "div":
        return _div(m, P, a, b, fixed, prefix)
    if name == "exp":
        return _exp(m, P, a, fixed, prefix)
    if name == "abs":
        return saturate(Mux(a < 0, -a, a), fixed)
    if name in ("tanh", "sigmoid", "gelu"):
        return _table_fn(m, P, name, a, fixed, prefix)
    if name == "sqrt":
        return _sqrt(m, P, a, fixed, prefix)
    if name == "rsqrt":
        return _rsqrt(m, P, a, fixed, prefix)
    if name == "log":
        return _log(m, P, a, fixed, prefix)
    raise ValueError(f"unknown alu op {name!r}")


def _restoring_div(P, num, den, qbits, rw, carry=()):
    """Quotient bits ``qbits-1 .. 0`` of ``num // den`` by restoring division, one bit per stage; ``num``'s
    bits above ``qbits`` (shifted down) must be below ``den``. ``rw``: remainder width (> den's width).
    ``carry``: values that travel beside. Returns (quotient, remainder, carried values). Each stage is one
    subtraction (its sign is the comparison) and a multiplexer; a constant ``num`` is not registered."""
    r = num >> qbits
    q = Const(0, 1)
    fixed_num = isinstance(num, Const)
    if fixed_num and num.value >> qbits == 0:
        return _const_restoring_div(P, num, den, qbits, rw, carry)
    for i in reversed(range(qbits)):
        t = P.fit(Cat(num[i], r), rw + 1)
        diff = t - den
        ge = ~diff[-1]
        r, q, den, *carry = P.stage_tuple(P.fit(Mux(ge, diff, t), rw), P.fit(Cat(ge, q), qbits), den,
                                          *carry, *(() if fixed_num else (num,)))
        if not fixed_num:
            num = carry.pop()
    return q, r, carry


def _const_restoring_div(P, num, den, qbits, rw, carry=()):
    """:func:`_restoring_div` of a constant ``num`` below ``2**qbits`` (rsqrt's ``2**(3F)``), with the same
    stages. Before the stage of bit ``qbits-1-k`` the remainder is below ``2**k``, so while ``den`` is wider than
    ``k+1`` bits the stage compares ``den``'s low ``k+1`` bits only, gated by a flag registered a stage ahead
    (``den < 2**(k+1)``): short subtractions on the early stages, whose ``den`` comes straight from the input."""
    dw = len(den)
    r, q = Const(0, 1), Const(0, 1)

    def kept(ge, diff, t, bit):
        # Mux(ge, diff, t) with t's low bit the constant ``bit``: that bit written as an AND / OR with ge, so
        # that Yosys does not make the register a synchronous reset/set on ~ge (the LSR input's 0.4 ns setup
        # after the subtraction's carry chain was rsqrt's critical path)
        low = (ge & diff[0]) if bit == 0 else (~ge | diff[0])
        return Cat(low, Mux(ge, diff, t)[1:])

    small = den[1:] == 0 if dw > 1 else Const(1, 1)
    for k, i in enumerate(reversed(range(qbits))):
        t = Cat(num[i], r)
        if k + 1 < dw:
            tw = k + 1
            diff = P.fit(t, tw + 1) - den[:tw]
            ge = small & ~diff[-1]
            nxt_small = den[k + 2:] == 0 if k + 2 < dw else Const(1, 1)
            r, q, den, small, *carry = P.stage_tuple(P.fit(kept(ge, diff, t, num.value >> i & 1), tw),
                                                     P.fit(Cat(ge, q), qbits), den, nxt_small, *carry)
        else:
            t = P.fit(t, rw + 1)
            diff = t - den
            ge = ~diff[-1]
            r, q, den, *carry = P.stage_tuple(P.fit(kept(ge, diff, t, num.value >> i & 1), rw),
                                              P.fit(Cat(ge, q), qbits), den, *carry)
    return q, P.fit(r, rw), carry


def _div(m, P, a, b, fixed, prefix):
    """Truncating division as fixed.py's ``div``: |a| << F by |b| in W-1 restoring stages after an overflow
    test (a quotient >= 2**(W-1) saturates whatever its low bits). The last stage also forms the negated
    quotient (from the bits before it: -(2Q + 1) = ~2Q, -2Q = ~2Q + 1), so no adder follows it."""
    W, F = fixed.width, fixed.frac
    def mag(v):                         # |v| = (v ^ sign) + sign: the exclusive or folds into the adder's LUTs
        return P.fit(P.fit(v ^ v[-1].replicate(W), W) + v[-1], W)
    na, ba, neg, bzero, apos = P.stage(P.fit(mag(a) << F, W + F), mag(b), a[-1] ^ b[-1], b == 0, ~a[-1])
    ovf, na, ba, neg, bzero, apos = P.stage((na >> (W - 1)) >= ba, na, ba, neg, bzero, apos)
    beside = (na[0], ba, ovf, neg, bzero, apos)
    q, r, (n0, ba, ovf, neg, bzero, apos) = _restoring_div(P, na >> 1, ba, W - 2, W + 1, beside)
    t = P.fit(Cat(n0, r), W + 2)
    diff = t - ba
    ge = ~diff[-1]
    nt = P.fit(~P.fit(Cat(Const(0, 1), q), W), W)               # -(2Q + 1) mod 2**W
    q, nq, ovf, neg, bzero, apos = P.stage(Cat(ge, q), Mux(ge, nt, P.fit(nt + 1, W)), ovf, neg, bzero, apos)
    big = Mux(neg, fixed.min_raw, fixed.max_raw)
    return Mux(bzero, Mux(apos, fixed.max_raw, fixed.min_raw), Mux(ovf, big, Mux(neg, nq, q)))[:W].as_signed()


def _exp(m, P, x, fixed, prefix):
    W, F = fixed.width, fixed.frac
    g = EXP_GUARD_BITS
    p = F + g
    bits = EXP_TABLE_BITS
    table = exp2_table(fixed, bits)
    k = min(bits, p)
    r = p - k
    twidth = max(t.bit_length() for t in table)
    sh = LOG2E_BITS - g
    # stages 1-4: x * log2(e)
    prod = pipelined_mul(P, x, Const(LOG2E_Q, signed(32)), 1 << (sh - 1))
    y = Signal(signed(W + 33), name=f"{prefix}_exp_y")
    m.d.comb += y.eq(prod >> sh)
    n = Signal(signed(W + 33 - p), name=f"{prefix}_exp_n")
    f = Signal(unsigned(p), name=f"{prefix}_exp_f")
    m.d.comb += [n.eq(y >> p), f.eq(y[:p])]
    n, f = P.stage(n, f)                                       # stage 5: the integer and fraction parts
    # the shift amounts from n, one adder per stage beside the table and the product: s = n - G (stage 6);
    # s >= 0: v << s, saturated (v > max_raw >> s  <=>  v << s > max_raw), amount sc (stage 7); s < 0:
    # (v + 2**(-s-1)) >> -s, 0 once -s >= 62 (any -s >= cap already gives 0), amount sn (stage 8)
    sw = max(W, 1).bit_length()
    cap = min(twidth + 2, 62)
    dw = cap.bit_length()
    t0, d, t, (s,) = _interp_table(m, P, table, f, r, p, f"{prefix}_exp2", (n - g,))   # stage 6: the table
    sc = P.fit(Mux(s >= W, W, s[:sw]), sw)
    v, (big, s_pos, sc, sn) = _interp_product(                   # stages 7-8: the interpolation product
        P, t0, d, t, r, (s >= W, ~s[-1], sc, -s),
        lambda big, s_pos, sc, ns: (big, s_pos, sc, P.fit(Mux(ns >= cap, cap, ns[:dw]), dw)))
    half = (Const(1, cap + 1) << (sn - 1)[:dw])[:cap + 1]       # 2**(-s-1), the rounding half
    v, big, s_pos, sc, sn, half = P.stage(v, big, s_pos, sc, sn, half)   # stage 9: the value, the amounts
    v = v[:twidth + 1]
    up = Signal(unsigned(len(v) + W + 1), name=f"{prefix}_exp_up")
    m.d.comb += up.eq(v << sc)
    rsum = Signal(unsigned(len(v) + 1), name=f"{prefix}_exp_rsum")
    m.d.comb += rsum.eq(v + half)
    up, rsum, sn, big, s_pos = P.stage(up, rsum, sn, big, s_pos)   # stage 10: shifted up, rounded down
    down = Signal(unsigned(len(v) + 1), name=f"{prefix}_exp_down")
    m.d.comb += down.eq(rsum >> sn)
    # saturated like every result (fixed.py's exp does the same; it matters for formats with
    # width <= frac + 8, where 2**(width-1-frac) <= e**x < 2**8 overflows); unsigned > max_raw is a bit set at
    # or above W - 1 (a reduction, none when the value is narrower)
    def over(u):
        return u[W - 1:].any() if len(u) > W - 1 else Const(0, 1)
    up_res, down_res, s_pos = P.stage(Mux(big | over(up), fixed.max_raw, up[:W]),
                                      Mux(over(down), fixed.max_raw, down[:W]), s_pos)      # stage 11
    res = Signal(signed(W), name=f"{prefix}_exp_res")
    m.d.comb += res.eq(Mux(s_pos, up_res, down_res))
    return res


def _interp_table(m, P, table, idx, r, span, prefix, carry=()):
    """One stage: the ROM of ``interp_rows(table)`` (value and slope in one word, fuseflow/tensors/fixedfn.py)
    read at ``idx[r:span]`` (``idx`` a register of ``P``). Returns (T[i], D[i], the low ``r`` bits of
    ``idx``, carried values), registered. Only the rows the index bits reach are stored (not the last,
    whose slope is never used)."""
    k = span - r
    rows = interp_rows(table)[:1 << k]
    tw = max(abs(t0).bit_length() for t0, _ in rows) + 1
    dw = max(abs(d).bit_length() for _, d in rows) + 1
    words = [(t0 & ((1 << tw) - 1)) | ((d & ((1 << dw) - 1)) << tw) for t0, d in rows]
    t = idx[:r] if r else Const(0, 1)
    if P.dsp and not P.comb:
        word = rom_outreg(m, P, words, tw + dw, Value.cast(P.early(idx))[r:span], prefix)
        t, *carry = P.stage_tuple(t, *carry)
    else:
        rom = Memory(shape=unsigned(tw + dw), depth=len(words), init=words)
        m.submodules[f"{prefix}_table"] = rom
        rp = rom.read_port(domain="comb")
        m.d.comb += rp.addr.eq(idx[r:span])
        word, t, *carry = P.stage_tuple(rp.data, t, *carry)
    return word[:tw].as_signed(), word[tw:].as_signed(), t, carry


def _interp_product(P, t0, d, t, r, carry=(), between=None):
    """Two stages (the multiply's operands and product: a MULT18X18D's registers when ``d`` and ``t`` fit one)
    of ``T[i] + ((D[i] * t + 2**(r-1)) >> r)``. Returns that sum (combinational) and the carried values;
    ``between(*carry)``: the carried values of the second stage computed from the first's."""
    between = between or (lambda *c: c)
    if not r:
        t0, *carry = P.stage_tuple(t0, *carry)
        t0, *carry = P.stage_tuple(t0, *between(*carry))
        return t0, carry
    dsp = P.dsp_for(d, t)
    d, t, t0, *carry = P.operands(d, t, dsp, (t0, *carry))
    prod, t0, *carry = P.products([(d, t)], dsp, (t0, *between(*carry)))
    # t0 + ((prod + 2**(r-1)) >> r) as one adder: t0 * 2**r + 2**(r-1) is t0 above the constant r bits
    return (prod + Cat(Const(1 << (r - 1), r), t0).as_signed()) >> r, carry


def _interp(m, P, table, idx, r, span, prefix, carry=()):
    """``interp(table, idx, r)`` of fuseflow/tensors/fixedfn.py: a ROM and a linear interpolation; ``idx`` is
    a register whose bits ``r .. span`` address the table. Four stages (table, operands, product, sum);
    ``carry`` travels beside. Returns (value, carried values)."""
    t0, d, t, carry = _interp_table(m, P, table, idx, r, span, prefix, carry)
    v, carry = _interp_product(P, t0, d, t, r, carry)
    tw = max(abs(x).bit_length() for x in table) + 1
    v, *carry = P.stage_tuple(v[:tw + 1].as_signed(), *carry)
    return v, carry


def _table_fn(m, P, name, x, fixed, prefix):
    """tanh, sigmoid (from the tanh table) and gelu (relu + the gelu table), as fixedfn.fx_*."""
    W, F = fixed.width, fixed.frac
    g = FN_GUARD_BITS
    p = F + g
    k, table = gelu_table(fixed) if name == "gelu" else tanh_table(fixed)
    span = F + FN_RANGE_LOG2 + (1 if name == "sigmoid" else 0)   # index bits of |x| the table covers
    r = span - k
    # stage 1: |x| = (x ^ sign) + sign (the exclusive or folds into the adder's LUTs: no multiplexer after
    # it on the way to the table address), the sign (and relu(x) for gelu)
    sgn = x[-1]
    u, neg, xr = P.stage(P.fit(P.fit(x ^ sgn.replicate(W), W) + sgn, max(W, span) + 1), sgn, Mux(x > 0, x, 0))
    inside = u < (1 << span)
    v, (inside, neg, xr) = _interp(m, P, table, u, r, span, f"{prefix}_{name}", (inside, neg, xr))  # 2-5
    # the result: one adder from the registered v per case, the case chosen after it (-y is (~v + h) >> g:
    # -floor((v + h) / 2**g) = floor((-v - 1 + 2h) / 2**g) with 2h = 2**g); outside the table v is 2**p
    res = Signal(signed(W), name=f"{prefix}_{name}_res")
    if name == "tanh":
        h = 1 << (g - 1)
        out = ((1 << p) + h) >> g
        y = Mux(inside, Mux(neg, (~v + h) >> g, (v + h) >> g), Mux(neg, -out, out))
    elif name == "sigmoid":
        c = (1 << p) + (1 << g)                 # s = 2**p -+ v, rounded: (c -+ v) >> (g + 1)
        y = Mux(inside, Mux(neg, (~v + (c + 1)) >> (g + 1), (v + c) >> (g + 1)),
                Mux(neg, (c - (1 << p)) >> (g + 1), (c + (1 << p)) >> (g + 1)))
    else:                                       # relu(x) + ((v + h) >> g) = (v + relu(x) * 2**g + h) >> g
        y = Mux(inside, (v + Cat(Const(1 << (g - 1), g), xr).as_signed()) >> g, xr)
    m.d.comb += res.eq(saturate(y, fixed))
    return P.stage(res)                                        # stage 6: the result


def _isqrt_round(m, P, n, prefix, carry=()):
    """``isqrt_round(n)`` of fixedfn for an unsigned Value ``n``: the restoring digit recurrence (two bits
    of ``n`` per step, one stage each; one subtraction whose sign is the comparison), then one stage that
    registers the root and whether the remainder exceeds it. Returns ``root + that`` (combinational: the
    caller's result stage adds it) and the carried values."""
    steps = (len(n) + 1) // 2
    nn = Signal(unsigned(2 * steps), name=f"{prefix}_n")
    m.d.comb += nn.eq(n)
    rem = Const(0, steps + 2)
    root = Const(0, steps)
    for s in reversed(range(steps)):
        sh = P.fit((rem << 2) | nn[2 * s:2 * s + 2], steps + 3)
        diff = sh - ((root << 2) | 1)
        ge = ~diff[-1]
        rem, root, nn, *carry = P.stage_tuple(P.fit(Mux(ge, diff, sh), steps + 2), P.fit((root << 1) | ge, steps),
                                              nn, *carry)
    root, up, *carry = P.stage_tuple(root, (root - rem)[-1], *carry)
    return P.fit(root + up, steps + 1), carry


def _sqrt(m, P, x, fixed, prefix):
    W, F = fixed.width, fixed.frac
    n = Signal(unsigned(W - 1 + F), name=f"{prefix}_sqrt_in")
    m.d.comb += n.eq(Mux(x[-1], 0, x[:W - 1]) << F)            # x <= 0 gives 0 (x = 0 either way)
    root, _ = _isqrt_round(m, P, n, f"{prefix}_sqrt")
    res = Signal(signed(W), name=f"{prefix}_sqrt_res")
    m.d.comb += res.eq(saturate(root, fixed))
    return P.stage(res)


def _rsqrt(m, P, x, fixed, prefix):
    W, F = fixed.width, fixed.frac
    xu = Signal(unsigned(W - 1), name=f"{prefix}_rsqrt_x")
    m.d.comb += xu.eq(x[:W - 1])            # for x <= 0 the quotient is unused (the result is max_raw)
    q, _, (pos,) = _restoring_div(P, Const(1 << (3 * F), 3 * F + 1), xu, 3 * F + 1, W, (x > 0,))
    root, (pos,) = _isqrt_round(m, P, q, f"{prefix}_rsqrt", (pos,))
    res = Signal(signed(W), name=f"{prefix}_rsqrt_res")
    m.d.comb += res.eq(Mux(pos, saturate(root, fixed), fixed.max_raw))
    return P.stage(res)


def _log(m, P, x, fixed, prefix):
    W, F = fixed.width, fixed.frac
    g = FN_GUARD_BITS
    p = F + g
    M = W - 2
    k, table = log2_table(fixed)
    xu = Signal(unsigned(W - 1), name=f"{prefix}_log_x")
    m.d.comb += xu.eq(x[:W - 1])
    # stage 1: the leading one e as the normalising shift M - e and the exponent e - F, both constants per
    # position of a priority encoder (later bits win; no subtraction after it)
    nsh = Signal(range(max(M, 1) + 1), name=f"{prefix}_log_shift", init=M)
    es = Signal(signed(max(W - 1, 2).bit_length() + 2), name=f"{prefix}_log_es", init=-F)
    for i in range(W - 1):
        with m.If(xu[i]):
            m.d.comb += [nsh.eq(M - i), es.eq(i - F)]
    nsh, es, xu, pos = P.stage(nsh, es, xu, x > 0)
    norm, es, pos = P.stage(P.fit(xu << nsh, M + 1), es, pos)   # stage 2: normalised
    # stage 3: the normalised value again, so the table's address register (which takes the value this stage
    # registers) is fed by a register: the shifter and the route into the block RAM took one cycle together
    norm, es, pos = P.stage(norm, es, pos)
    r = M - k
    t0, d, t, (es, pos) = _interp_table(m, P, table, norm, r, M, f"{prefix}_log", (es, pos))   # stage 4
    # log2(x) = (e - F) * 2**p + interp = (D[i] * t + (e - F, T[i], 2**(r-1)) concatenated) >> r: one adder,
    # as every T[i] of the rows read is in [0, 2**p)
    rows = interp_rows(table)[:1 << k]
    if not all(0 <= t0_ < (1 << p) for t0_, _ in rows):
        raise HardwareError(f"alu log {fixed}", "log2 table value outside [0, 2**p)")
    h = 17                              # t split at 17 bits (one MULT18X18D operand each part)
    dsp = P.dsp_for(d, t[:h], t[h:]) if r else None
    d, t, t0, es, pos = P.operands(d, t, dsp, (t0, es, pos))   # stage 5: the product's operands
    pairs = ([(d, t[:h]), (d, t[h:])] if r > h else [(d, t)]) if r else []
    *prods, t0, es, pos = P.products(pairs, dsp, (t0, es, pos))  # stage 6: the partial products
    prod = (prods[0] + (prods[1] << h) if len(prods) > 1 else prods[0]) if prods else Const(0, 1)
    prod, t0, es, pos = P.stage(prod, t0, es, pos)             # stage 7: the product
    base = Cat(Const(1 << (r - 1), r) if r else Const(0, 0), t0[:p], es).as_signed()
    y = Signal(signed(p + W.bit_length() + 3), name=f"{prefix}_log_y")
    m.d.comb += y.eq((prod + base) >> r)
    y, pos = P.stage(y, pos)                                    # stage 8: log2(x)
    sh = LN2_BITS + g
    prod = pipelined_mul(P, y, Const(LN2_Q, signed(32)), 1 << (sh - 1))   # stages 9-12: * ln 2, rounded
    beside = Pipe(m, f"{prefix}_log_pos", comb=P.comb)          # x > 0 beside the multiplier's stages
    for _ in range(4):
        pos = beside.stage(pos)
    z = Signal(signed(len(y) + 32), name=f"{prefix}_log_z")
    m.d.comb += z.eq(prod >> sh)
    res = Signal(signed(W), name=f"{prefix}_log_res")
    m.d.comb += res.eq(Mux(pos, saturate(z, fixed), fixed.min_raw))
    return P.stage(res)                                        # stage 13: the result


def operand_cases(m, op, a, b, y, fixed):
    """A single-cycle op on token payloads ``a`` (and ``b``; else the constant or unused ``y``) where a control
    operand counts as 0: ``fixed_op`` on the raw payloads, and on copies with the control operand's value 0
    (constant-folded), selected after the datapath, so its carry chains start at the payload registers
    instead of behind a zeroing multiplexer. The same values as ``fixed_op(op, Mux(a.ctrl, 0, a), ...)``."""
    W = fixed.width
    zero = Const(0, signed(W))
    ra = a.data[:W].as_signed()
    if b is None:
        return Mux(a.ctrl, fixed_op(m, op, zero, y, fixed), fixed_op(m, op, ra, y, fixed))
    rb = b.data[:W].as_signed()
    return Mux(a.ctrl, Mux(b.ctrl, fixed_op(m, op, zero, zero, fixed), fixed_op(m, op, zero, rb, fixed)),
               Mux(b.ctrl, fixed_op(m, op, ra, zero, fixed), fixed_op(m, op, ra, rb, fixed)))


def pipelined_output(op, m, go, is_ctrl, ctrl_data, res, latency, has_b, empty=None, fire=None):
    """The output side of a pipelined op with one output ``o_out`` and inputs ``i_a`` (and ``i_b``):
    an :class:`OutputPipeline` whose last stage carries the result, or the control token that travelled
    beside the datapath's stages. ``empty``: ``(is N, result for N)``: that bit travels beside too and picks the
    constant result. ``fire``: the op's own firing signal when it needs it elsewhere (block_matmul's
    interval), else one is made here."""
    out = op.o_out
    DW = len(out.payload.data)
    pipe = OutputPipeline(m, [out], latency, go, fire=fire)
    m.d.comb += op.i_a.ready.eq(pipe.fire)
    if has_b:
        m.d.comb += op.i_b.ready.eq(pipe.fire)
    ctrl = pipe.beside(is_ctrl, "ctrl")
    cdata = pipe.beside(ctrl_data, "cdata")
    if empty is not None:
        res = Mux(pipe.beside(empty[0], "empty"), Const(empty[1], signed(len(res))), res)
    last = Signal(DW + 1)                       # {ctrl, data} of the last stage's token
    m.d.comb += [last[:DW].eq(Mux(ctrl, cdata, res)), last[DW].eq(ctrl)]
    pipe.connect([last])


class Alu(OpComponent):
    op_name = "alu"

    def _has_input(self, name):
        if name == "b":
            return self.params["op"] not in UNARY_ALU_OPS and self.params.get("const") is None
        return True

    def elaborate(self, platform):
        m = Module()
        fx = self.fixed
        W = fx.width
        op = self.params["op"]
        unary = op in UNARY_ALU_OPS
        has_b = "b" in self.inputs()
        latency = op_latency("alu", self.params, fx)
        a = self.i_a.payload
        x = Signal(signed(W))
        y = Signal(signed(W))
        go = Signal()
        m.d.comb += x.eq(Mux(a.ctrl, 0, a.data[:W].as_signed()))
        if has_b:
            b = self.i_b.payload
            m.d.comb += [y.eq(Mux(b.ctrl, 0, b.data[:W].as_signed())), go.eq(self.i_a.valid & self.i_b.valid)]
        else:
            if not unary:
                m.d.comb += y.eq(fx.encode(float(self.params["const"])))
            m.d.comb += go.eq(self.i_a.valid)
        pipe = Pipe(m, "alu", dsp=dsp_family(platform))
        zero_result = None
        if latency == 1:
            res = operand_cases(m, op, a, b if has_b else None, y, fx)
        elif unary:       # the raw payload enters the datapath; an N's result (op of 0) is chosen at the end
            zero_result = fx.unary(op)(0)
            res = fixed_op(m, op, a.data[:W].as_signed(), y, fx, pipe=pipe)
        else:
            res = fixed_op(m, op, x, y, fx, pipe=pipe)
        if pipe.stages != latency - 1:
            raise HardwareError(f"op alu {op}", f"datapath has {pipe.stages} stages, the registry says "
                                                f"latency {latency}")
        is_ctrl = a.ctrl & ~is_empty(a)
        if latency == 1:
            f = self.fire_logic()
            m.d.comb += [f.go.eq(go), f.pop["a"].eq(1), f.push["out"].eq(1)]
            if has_b:
                m.d.comb += f.pop["b"].eq(1)
            with m.If(is_ctrl):
                copy_ctrl(m, self.o_out, a)
            with m.Else():
                set_data(m, self.o_out, res)
            f.build(m)
            return m
        pipelined_output(self, m, go, is_ctrl, a.data[0:10], res, latency, has_b,
                         None if zero_result is None else (is_empty(a), zero_result))
        return m
