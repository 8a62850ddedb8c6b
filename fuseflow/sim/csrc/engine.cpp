// The compiled engine's scheduler and shared mechanics (see engine.hpp; the reference is fuseflow/sim/engine.py).
#include "engine.hpp"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>

namespace ff {

// ---- Python reprs, for error messages identical to the reference's ----------------------------------------
static std::string float_repr(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    // Python's repr: the shortest round-tripping digits, exponent form outside 1e-4 <= |x| < 1e16
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
    std::string sci(buf, res.ptr);                          // d.ddde[+-]XX
    size_t e = sci.find('e');
    std::string mant = sci.substr(0, e);
    int exp10 = std::stoi(sci.substr(e + 1));
    bool neg = mant[0] == '-';
    if (neg) mant = mant.substr(1);
    std::string digits;
    for (char c : mant)
        if (c != '.') digits += c;
    std::string out;
    if (exp10 < -4 || exp10 >= 16) {
        out = digits.substr(0, 1);
        if (digits.size() > 1) out += "." + digits.substr(1);
        char eb[16];
        std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        out += eb;
    } else if (exp10 < 0) {
        out = "0." + std::string(-exp10 - 1, '0') + digits;
    } else {
        if ((int)digits.size() <= exp10 + 1) {
            out = digits + std::string(exp10 + 1 - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, exp10 + 1) + "." + digits.substr(exp10 + 1);
        }
    }
    return neg ? "-" + out : out;
}

std::string repr(const Tok& t) {
    switch (t.k) {
        case K_INT: return std::to_string(t.i);
        case K_FLT: return float_repr(t.f);
        case K_BLK: return "<block " + std::to_string(t.i) + ">";
        case K_STOP: return "'S" + std::to_string(t.i) + "'";
        case K_N: return "'N'";
        case K_D: return "'D'";
        case K_R: return "'R'";
        default: return "'S'";
    }
}

std::string repr_list(const std::vector<Tok>& toks) {
    std::string s = "[";
    for (size_t i = 0; i < toks.size(); ++i) {
        if (i) s += ", ";
        s += repr(toks[i]);
    }
    return s + "]";
}

void bad(const Node& st, const std::string& why) {
    throw SimError("StreamError", "node " + st.id + " (" + st.op + ")", why);
}

void Out::too_wide(const Tok& tok) {
    int need = 0;
    for (i64 v = tok.i; v; v >>= 1) ++need;
    int width = 0;
    for (i64 v = limit; v > 1; v >>= 1) ++width;
    throw SimError("TensorError", "stream " + name,
                   "token " + std::to_string(tok.i) + " needs " + std::to_string(need) + " bits, the stream is " +
                       std::to_string(width) +
                       " bits wide (the graph's widths do not hold this data: recompile it)");
}

std::string Out::describe_wait(const Node& st) {
    std::string full;
    for (Channel* c : chans)
        if (!c->has_credit()) full += (full.empty() ? "" : ", ") + c->name;
    return st.id + " waits to write '" + name + "' (full: " + (full.empty() ? "?" : full) + ")";
}

// ---- params ----------------------------------------------------------------------------------------------
bool Params::truthy(const std::string& k) const {
    const PVal* v = find(k);
    if (!v) return false;
    switch (v->t) {
        case PVal::BOOL:
        case PVal::INT: return v->i != 0;
        case PVal::FLT: return v->f != 0;
        case PVal::STR: return !v->s.empty();
        case PVal::IVEC:
        case PVal::FVEC: return !v->fv.empty() || !v->iv.empty();
        default: return !v->items.empty();
    }
}

std::span<const i64> Params::ivec(const std::string& k) const {
    const PVal* v = find(k);
    if (!v) return {};
    if (v->ext && v->t == PVal::IVEC) return {static_cast<const i64*>(v->ext), v->ext_n};
    return {v->iv.data(), v->iv.size()};
}

std::span<const double> Params::fvec(const std::string& k) const {
    const PVal* v = find(k);
    if (!v) return {};
    if (v->ext && v->t == PVal::FVEC) return {static_cast<const double*>(v->ext), v->ext_n};
    if (v->t == PVal::IVEC) {                   // ints as numbers: converted once, when first asked for
        std::span<const i64> iv = ivec(k);
        if (v->fv.size() != iv.size()) v->fv.assign(iv.begin(), iv.end());
    }
    return {v->fv.data(), v->fv.size()};
}

// ---- arithmetic (fuseflow/tensors/fixed.py) ---------------------------------------------------------------

static Tok f_add(const Env&, const Tok& a, const Tok& b) {
    if (a.k == K_INT && b.k == K_INT) return Tok::Int(a.i + b.i);
    return Tok::Flt(a.num() + b.num());
}
static Tok f_sub(const Env&, const Tok& a, const Tok& b) {
    if (a.k == K_INT && b.k == K_INT) return Tok::Int(a.i - b.i);
    return Tok::Flt(a.num() - b.num());
}
static Tok f_mul(const Env&, const Tok& a, const Tok& b) {
    if (a.k == K_INT && b.k == K_INT) return Tok::Int(a.i * b.i);
    return Tok::Flt(a.num() * b.num());
}
static Tok f_div(const Env&, const Tok& ta, const Tok& tb) {
    double a = ta.num(), b = tb.num();
    if (b == 0.0) {
        if (a == 0.0 || a != a) return Tok::Flt(NAN);
        return Tok::Flt(std::copysign(INFINITY, a) * std::copysign(1.0, b));
    }
    return Tok::Flt(a / b);
}
static Tok f_max(const Env&, const Tok& a, const Tok& b) {
    double x = a.num(), y = b.num();
    if (x != x) return a;
    if (y != y) return b;
    return x > y ? a : b;
}
static Tok f_min(const Env&, const Tok& a, const Tok& b) {
    double x = a.num(), y = b.num();
    if (x != x) return a;
    if (y != y) return b;
    return x < y ? a : b;
}

static inline Tok sat(const Env& e, __int128 r) { return Tok::Int(r < e.lo ? e.lo : r > e.hi ? e.hi : (i64)r); }

static Tok x_add(const Env& e, const Tok& a, const Tok& b) { return sat(e, (__int128)a.i + b.i); }
static Tok x_sub(const Env& e, const Tok& a, const Tok& b) { return sat(e, (__int128)a.i - b.i); }
static Tok x_mul(const Env& e, const Tok& a, const Tok& b) {
    return sat(e, ((__int128)a.i * b.i + e.half) >> e.frac);
}
static Tok x_div(const Env& e, const Tok& ta, const Tok& tb) {
    i64 a = ta.i, b = tb.i;
    if (b == 0) return Tok::Int(a >= 0 ? e.hi : e.lo);
    __int128 n = (__int128)a << e.frac;
    __int128 an = n < 0 ? -n : n, ab = b < 0 ? -(__int128)b : (__int128)b;
    __int128 q = an / ab;
    if ((n < 0) != (b < 0)) q = -q;
    return sat(e, q);
}
static Tok x_max(const Env&, const Tok& a, const Tok& b) { return a.i >= b.i ? a : b; }
static Tok x_min(const Env&, const Tok& a, const Tok& b) { return a.i <= b.i ? a : b; }

// ---- blocks (fuseflow/sim/blocks.py blockwise, fixed.py *_array) -----------------------------------------
// Element-wise on blocks: a scalar operand is broadcast, a B-vector meeting a B x B block is broadcast over
// the block's rows (element (r, c) meets v[r]). Float: the IEEE operation NumPy's loops do (a / b as the
// hardware divides, max/min as np.maximum/np.minimum: NaN propagates, else x > y ? x : y); fixed: the *_array
// rules, which are the scalar ones element by element (operands in range, so int64 never overflows).
enum BinOp { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN };

template <int OP>
static inline double fop(double x, double y) {
    if constexpr (OP == OP_ADD) return x + y;
    if constexpr (OP == OP_SUB) return x - y;
    if constexpr (OP == OP_MUL) return x * y;
    if constexpr (OP == OP_DIV) return x / y;
    if constexpr (OP == OP_MAX) return x != x ? x : y != y ? y : x > y ? x : y;
    if constexpr (OP == OP_MIN) return x != x ? x : y != y ? y : x < y ? x : y;
    return 0;
}

static inline i64 sat64(const Env& e, __int128 r) { return r < e.lo ? e.lo : r > e.hi ? e.hi : (i64)r; }

template <int OP>
static inline i64 xop(const Env& e, i64 a, i64 b) {
    if constexpr (OP == OP_ADD) return sat64(e, (__int128)a + b);
    if constexpr (OP == OP_SUB) return sat64(e, (__int128)a - b);
    if constexpr (OP == OP_MUL) return sat64(e, ((__int128)a * b + e.half) >> e.frac);
    if constexpr (OP == OP_DIV) {
        if (b == 0) return a >= 0 ? e.hi : e.lo;
        __int128 n = (__int128)a << e.frac;
        __int128 an = n < 0 ? -n : n, ab = b < 0 ? -(__int128)b : (__int128)b;
        __int128 q = an / ab;
        if ((n < 0) != (b < 0)) q = -q;
        return sat64(e, q);
    }
    if constexpr (OP == OP_MAX) return a >= b ? a : b;
    if constexpr (OP == OP_MIN) return a <= b ? a : b;
    return 0;
}

std::string shape_repr(const Env& env, const Tok& t) {
    if (!t.is_blk()) return "()";
    const BlockArena::Hdr& h = env.arena->at(t);
    std::string n = std::to_string(h.n);
    return h.ndim == 2 ? "(" + n + ", " + n + ")" : "(" + n + ",)";
}

[[noreturn]] static void cannot_broadcast(const Env& env, const Tok& a, const Tok& b) {
    throw SimError("GraphError", "blocks", "operands of shapes " + shape_repr(env, a) + " and " +
                                               shape_repr(env, b) + " cannot be combined element-wise");
}

// a's element k of a result of shape (ndim, n): its index into a's storage (scalar: unused)
struct BIdx {
    int mode;        // 0 scalar, 1 same shape, 2 a B-vector over rows (index k / n)
    uint32_t n;
    size_t operator()(size_t k) const { return mode == 1 ? k : mode == 2 ? k / n : 0; }
};

template <int OP>
static Tok block_binary(const Env& e, const Tok& a, const Tok& b) {
    BlockArena& ar = *e.arena;
    int ndim = 0;
    uint32_t n = 0;
    for (const Tok* t : {&a, &b})
        if (t->is_blk()) {
            const BlockArena::Hdr& h = ar.at(*t);
            if (ndim && h.n != n) cannot_broadcast(e, a, b);
            if (h.ndim > ndim) ndim = h.ndim;
            n = h.n;
        }
    auto idx = [&](const Tok& t) {
        if (!t.is_blk()) return BIdx{0, n};
        return BIdx{ar.at(t).ndim == ndim ? 1 : 2, n};
    };
    BIdx ia = idx(a), ib = idx(b);
    Tok r = ar.make(ndim, n);
    size_t c = BlockArena::count(ndim, n);
    if (e.fixed) {
        i64 sa = a.is_blk() ? 0 : (a.k == K_FLT ? (i64)a.f : a.i), sb = b.is_blk() ? 0 : (b.k == K_FLT ? (i64)b.f : b.i);
        const i64* pa = a.is_blk() ? ar.ip(a) : &sa;
        const i64* pb = b.is_blk() ? ar.ip(b) : &sb;
        i64* pr = ar.ip(r);
        for (size_t k = 0; k < c; ++k) pr[k] = xop<OP>(e, pa[ia(k)], pb[ib(k)]);
    } else {
        double sa = a.is_blk() ? 0 : a.num(), sb = b.is_blk() ? 0 : b.num();
        const double* pa = a.is_blk() ? ar.fp(a) : &sa;
        const double* pb = b.is_blk() ? ar.fp(b) : &sb;
        double* pr = ar.fp(r);
        for (size_t k = 0; k < c; ++k) pr[k] = fop<OP>(pa[ia(k)], pb[ib(k)]);
    }
    return r;
}

static const BinFn FLOAT_BIN[] = {f_add, f_sub, f_mul, f_div, f_max, f_min};
static const BinFn FIXED_BIN[] = {x_add, x_sub, x_mul, x_div, x_max, x_min};

// blockwise(scalar, vectorised): the scalar op unless an operand is a block
template <int OP>
static Tok blockwise(const Env& e, const Tok& a, const Tok& b) {
    if (a.k == K_BLK || b.k == K_BLK) return block_binary<OP>(e, a, b);
    return (e.fixed ? FIXED_BIN : FLOAT_BIN)[OP](e, a, b);
}

static const BinFn BLOCKWISE[] = {blockwise<OP_ADD>, blockwise<OP_SUB>, blockwise<OP_MUL>,
                                  blockwise<OP_DIV>, blockwise<OP_MAX>, blockwise<OP_MIN>};

BinFn Env::binary(const std::string& name) const {
    if (blocks) {
        static const char* const names[] = {"add", "sub", "mul", "div", "max", "min"};
        for (int k = 0; k < 6; ++k)
            if (name == names[k]) return BLOCKWISE[k];
    }
    if (fixed) {
        if (name == "add") return x_add;
        if (name == "sub") return x_sub;
        if (name == "mul") return x_mul;
        if (name == "div") return x_div;
        if (name == "max") return x_max;
        if (name == "min") return x_min;
    } else {
        if (name == "add") return f_add;
        if (name == "sub") return f_sub;
        if (name == "mul") return f_mul;
        if (name == "div") return f_div;
        if (name == "max") return f_max;
        if (name == "min") return f_min;
    }
    throw SimError("GraphError", "op", "unknown binary op '" + name + "'");
}

// a unary op on a block: neg and relu here (np.negative, np.maximum(a, 0.0); fixed: neg_array, relu_array),
// the functions through the Python Env's vectorised op
static Tok block_unary(const Env& e, const std::string& name, const Tok& a) {
    BlockArena& ar = *e.arena;
    if (name == "neg" || name == "relu") {
        bool neg = name == "neg";
        const BlockArena::Hdr h = ar.at(a);
        Tok r = ar.make(h.ndim, h.n);
        size_t c = ar.size(r);
        if (e.fixed) {
            const i64* p = ar.ip(a);
            i64* q = ar.ip(r);
            for (size_t k = 0; k < c; ++k) q[k] = neg ? sat64(e, -(__int128)p[k]) : (p[k] > 0 ? p[k] : 0);
        } else {
            const double* p = ar.fp(a);
            double* q = ar.fp(r);
            for (size_t k = 0; k < c; ++k) q[k] = neg ? -p[k] : fop<OP_MAX>(p[k], 0.0);
        }
        return r;
    }
    auto it = e.unary_block_cb.find(name);
    if (it == e.unary_block_cb.end()) throw SimError("GraphError", "op", "unary op '" + name + "' on blocks is not compiled");
    return it->second(a);
}

// fixed.canonical_nan: every NaN of a block product or row reduction is np.nan (the positive quiet NaN)
static inline void canonical_nan(double* p, size_t c) {
    for (size_t k = 0; k < c; ++k)
        if (p[k] != p[k]) p[k] = std::numeric_limits<double>::quiet_NaN();
}

Tok Env::row_reduce(const std::string& op, const Tok& x) const {
    if (!fixed && x.is_blk() && arena->at(x).ndim == 2 && (op == "sum" || op == "max" || op == "min")) {
        // fixed.float_row_reduce: each row left to right, acc = row[0], acc = op(acc, row[c])
        BlockArena& ar = *arena;
        uint32_t n = ar.at(x).n;
        Tok r = ar.make(1, n);
        const double* p = ar.fp(x);
        double* q = ar.fp(r);
        for (uint32_t row = 0; row < n; ++row) {
            const double* v = p + (size_t)row * n;
            double acc = v[0];
            if (op == "sum") for (uint32_t c = 1; c < n; ++c) acc = fop<OP_ADD>(acc, v[c]);
            else if (op == "max") for (uint32_t c = 1; c < n; ++c) acc = fop<OP_MAX>(acc, v[c]);
            else for (uint32_t c = 1; c < n; ++c) acc = fop<OP_MIN>(acc, v[c]);
            q[row] = acc;
        }
        canonical_nan(q, n);
        return r;
    }
    if (fixed && x.is_blk() && arena->at(x).ndim == 2 && (op == "sum" || op == "max" || op == "min")) {
        // FixedFormat.row_reduce_array: a row's sum exact (int64), saturated once; max/min exact
        BlockArena& ar = *arena;
        uint32_t n = ar.at(x).n;
        Tok r = ar.make(1, n);
        const i64* p = ar.ip(x);
        i64* q = ar.ip(r);
        for (uint32_t row = 0; row < n; ++row) {
            const i64* v = p + (size_t)row * n;
            i64 acc = v[0];
            for (uint32_t c = 1; c < n; ++c) {
                if (op == "sum") acc += v[c];
                else if (op == "max") acc = v[c] > acc ? v[c] : acc;
                else acc = v[c] < acc ? v[c] : acc;
            }
            q[row] = op == "sum" ? sat64(*this, acc) : acc;
        }
        return r;
    }
    // the error for a value that is not a B x B block (the Python Env's message)
    auto it = rows_cb.find(op);
    if (it == rows_cb.end()) throw SimError("GraphError", "reduce", "row reduction '" + op + "' is not compiled");
    return it->second(x);
}

// fixed.float_matmul: element (i, j) is a[i,0]*b[0,j] + a[i,1]*b[1,j] + ... added left to right, every product
// and sum rounded on its own (the extension is built with -ffp-contract=off: no fused multiply-add). The loops
// run k outside j, which keeps each element's order and lets the compiler vectorise over j.
static Tok float_matmul(BlockArena& ar, const Tok& a, const Tok& b) {
    const BlockArena::Hdr ha = ar.at(a), hb = ar.at(b);
    uint32_t n = ha.n;
    Tok r = ar.make(hb.ndim, n);
    const double* pa = ar.fp(a);
    const double* pb = ar.fp(b);
    double* pr = ar.fp(r);
    if (hb.ndim == 2) {
        for (uint32_t i = 0; i < n; ++i) {
            const double* ai = pa + (size_t)i * n;
            double* ri = pr + (size_t)i * n;
            for (uint32_t j = 0; j < n; ++j) ri[j] = ai[0] * pb[j];
            for (uint32_t k = 1; k < n; ++k) {
                const double aik = ai[k];
                const double* bk = pb + (size_t)k * n;
                for (uint32_t j = 0; j < n; ++j) ri[j] = ri[j] + aik * bk[j];
            }
        }
    } else {
        for (uint32_t i = 0; i < n; ++i) {
            const double* ai = pa + (size_t)i * n;
            double acc = ai[0] * pb[0];
            for (uint32_t k = 1; k < n; ++k) acc = acc + ai[k] * pb[k];
            pr[i] = acc;
        }
    }
    canonical_nan(pr, ar.size(r));
    return r;
}

Tok Env::matmul(const Tok& a, const Tok& b) const {
    if (!fixed) return float_matmul(*arena, a, b);
    // FixedFormat.matmul_array: every product exact, summed exactly, rounded once as mul rounds, saturated.
    // |a|, |b| < 2**31 (width <= 32): a sum of B products needs < 64 + log2(B) bits, so __int128 is exact.
    BlockArena& ar = *arena;
    const BlockArena::Hdr ha = ar.at(a), hb = ar.at(b);
    uint32_t n = ha.n;
    Tok r = ar.make(hb.ndim, n);
    const i64* pa = ar.ip(a);
    const i64* pb = ar.ip(b);
    i64* pr = ar.ip(r);
    uint32_t cols = hb.ndim == 2 ? n : 1;
    for (uint32_t i = 0; i < n; ++i)
        for (uint32_t j = 0; j < cols; ++j) {
            __int128 s = 0;
            for (uint32_t k = 0; k < n; ++k) s += (__int128)pa[(size_t)i * n + k] * pb[(size_t)k * cols + j];
            pr[(size_t)i * cols + j] = sat64(*this, (s + half) >> frac);
        }
    return r;
}

UnFn unary_with_blocks(const Env& env, const std::string& name, UnFn scalar) {
    if (!env.blocks) return scalar;
    const Env* e = &env;
    return [e, name, scalar](const Tok& a) { return a.k == K_BLK ? block_unary(*e, name, a) : scalar(a); };
}

UnaryFn Env::unary(const std::string& name) const {
    const Env* e = this;
    if (name == "neg") {
        if (fixed) return [e](const Tok& a) { return sat(*e, -(__int128)a.i); };
        return [](const Tok& a) { return a.k == K_INT ? Tok::Int(-a.i) : Tok::Flt(-a.f); };
    }
    if (name == "relu") {
        if (fixed) return [](const Tok& a) { return a.i > 0 ? a : Tok::Int(0); };
        return [e](const Tok& a) { return f_max(*e, a, Tok::Flt(0.0)); };
    }
    if (UnaryFn f = native_unary(*this, name)) return f;          // functions.cpp
    auto it = unary_cb.find(name);                                 // the rest: Python's own function
    if (it == unary_cb.end()) throw SimError("GraphError", "op", "unknown unary op '" + name + "'");
    return it->second;
}

// ---- output groups and pipelines --------------------------------------------------------------------------
std::string Together::describe_wait(const Node& s) {
    std::string r;
    for (Out* o : outs) {
        if (o->room_() != NONE) continue;
        if (!r.empty()) r += "; ";
        r += o->describe_wait(s);
    }
    return r;
}

Pipeline::Pipeline(Node* s, std::vector<Out*> o, i64 latency) : st(s), outs(std::move(o)), nout(outs.size()),
                                                                  o0(nout > 0 ? outs[0] : nullptr),
                                                                  o1(nout > 1 ? outs[1] : nullptr), ahead(latency - 1),
                                                                  lat(latency) {
    size_t cap = 4;
    while (cap < (size_t)latency + 1) cap *= 2;
    ring.assign(cap, Rec{});
    rd = ring.data();
    mask = cap - 1;
    for (size_t i = 0; i < cap; ++i) rd[i].at = 0;
    if (nout > 2) wide.assign(cap * nout, Tok());
}

i64 Pipeline::out_room_n() const { return room_of(outs); }

void Pipeline::flush() {
    i64 moved = 0;
    while (np != 0) {
        i64 r = out_room();
        if (r == NONE) break;
        deliver(toks_at(head), rd[head].at, r);
        --np;
        ++moved;
    }
    st->moved += moved;
}

std::string Pipeline::describe_wait(const Node&) {
    std::string names;
    for (Out* o : outs) {
        if (o->room_() != NONE) continue;
        if (!names.empty()) names += ", ";
        names += "'" + o->name + "'";
    }
    return st->id + " (output pipeline) waits to deliver to " + names;
}

Stage::Stage(Pipeline* p) : Emitter(E_STAGE), pipe(p), name(p->st->id + " pipeline") {}

i64 Stage::room_slow() {
    if (pipe->out_room() == NONE) return NONE;
    pipe->flush();
    return pipe->credit0();
}

void Stage::push_pending(const Tok* toks, i64 t) {
    Pipeline* p = pipe;
    size_t pos = (p->head + p->np) & p->mask;
    Pipeline::Rec& f = p->rd[pos];
    if (p->nout <= 2) {
        f.tok[0] = toks[0];
        if (p->nout == 2) f.tok[1] = toks[1];
    } else {
        for (size_t i = 0; i < p->nout; ++i) p->wide[pos * p->nout + i] = toks[i];
    }
    f.at = t;
    ++p->np;
}

std::string Stage::describe_wait(const Node&) {
    return pipe->st->id + " waits to write '" + name + "' (its output pipeline is full)";
}

Proc pipeline_drain(Pipeline* pipe) {
    Node* st = pipe->st;
    while (!pipe->done) {
        co_yield pipe;
        pipe->flush();
    }
    if (pipe->last > st->clock) st->clock = pipe->last;
}

Emitter* make_pipeline(Node& st, Built& b, std::vector<Out*> outs, i64 latency) {
    Pipeline* pipe = b.make<Pipeline>(&st, std::move(outs), latency);
    if (st.env && st.env->arena) st.env->arena->pipes.push_back(pipe);     // its tokens in flight keep their blocks
    Stage* stage = b.make<Stage>(pipe);
    b.procs.push_back(pipeline_drain(pipe));
    return stage;
}

Emitter* make_emitter(Node& st, Built& b, std::vector<Out*> outs, i64 latency) {
    if (latency > 1) return make_pipeline(st, b, std::move(outs), latency);
    if (outs.size() == 1) return outs[0];
    return b.make<Together>(&st, std::move(outs));
}

std::unordered_map<std::string, OpBuilder>& op_table() {
    static std::unordered_map<std::string, OpBuilder> table;
    return table;
}

// ---- the scheduler (engine.run_kernel) --------------------------------------------------------------------
namespace {
// a process at its bit position: its node, its coroutine (null in a gap) and what it waits for (the promise writes
// there)
struct Live {
    Node* st;
    std::coroutine_handle<Proc::promise_type> h;
    Wait w;
};

std::string deadlock_message(const std::vector<Live>& blocked) {
    std::string msg = "no op can fire: ";
    bool first = true;
    for (const Live& it : blocked) {
        const Wait& pw = it.w;
        std::string part;
        if (pw.em) {
            part = pw.em->describe_wait(*it.st);
        } else if (pw.pipe) {
            part = pw.pipe->describe_wait(*it.st);
        } else if (pw.ch) {
            Channel* w = pw.ch;
            std::string held = w->empty() ? "empty" : "holds " + std::to_string(w->size()) + ", needs another";
            part = it.st->id + " waits for a token on '" + w->name + "' (" + held + ")";
        } else {
            part = it.st->id + " waits";
        }
        if (!first) msg += "; ";
        msg += part;
        first = false;
    }
    return msg;
}
}  // namespace

KernelResult run_kernel(std::vector<Node>& nodes, const std::vector<StreamSpec>& streams, i64 depth_default,
                        RunHooks& hooks) {
    std::vector<std::unique_ptr<Channel>> chans;
    std::vector<std::unique_ptr<Out>> outs;
    std::vector<Out*> stream_outs;
    for (const StreamSpec& s : streams) {
        std::vector<Channel*> cs;
        for (auto& [dn, dp] : s.dsts) {
            Node& d = nodes[dn];
            i64 depth = s.depth < 0 ? 0 : (s.depth ? s.depth : depth_default);
            chans.push_back(std::make_unique<Channel>(s.id + " -> " + d.id + "." + dp, depth, d.id + "." + dp));
            d.ins[dp] = chans.back().get();
            cs.push_back(chans.back().get());
        }
        outs.push_back(std::make_unique<Out>(s.id, std::move(cs)));
        Out* o = outs.back().get();
        if (s.width > 0) o->limit = (i64)1 << s.width;
        if (hooks.trace && hooks.traces) {
            auto& tr = (*hooks.traces)[s.id];
            o->log = &tr.first;
            o->sent = &tr.second;
            o->settle();
        }
        nodes[s.src].outs[s.src_port] = o;
        stream_outs.push_back(o);
    }
    for (Node& st : nodes)
        for (const std::string& port : st.out_ports)
            if (!st.outs.count(port)) {
                outs.push_back(std::make_unique<Out>(st.id + "." + port, std::vector<Channel*>{}));
                st.outs[port] = outs.back().get();
            }
    std::vector<Built> built(nodes.size());
    auto& table = op_table();
    for (size_t i = 0; i < nodes.size(); ++i) {
        Node& st = nodes[i];
        auto it = table.find(st.op);
        if (it == table.end()) throw SimError("GraphError", "node " + st.id, "op '" + st.op + "' has no compiled model");
        it->second(st, built[i]);
    }
    // The processes in the reference's order (node by node), each at a bit of `ready`: the processes to look at
    // in the current round. A node's processes sit in one 64-bit word (a node that would straddle one starts
    // the next), so a channel wakes its consumer node, or its producer node, with one OR. A process whose bit
    // is clear would be skipped by the reference's round as well: since it last yielded, no token reached its
    // node's inputs, no slot was freed on its node's outputs and no process of its node ran (what it waits for
    // is one of those, or something of its node's own); so the rounds resume the same processes in the same
    // order as engine._schedule, and a round without progress is the same deadlock.
    std::vector<Live> slots;                 // by bit position (gaps: a null h)
    std::vector<uint64_t> node_mask(nodes.size(), 0);
    std::vector<size_t> node_word(nodes.size(), 0);
    size_t pos = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
        size_t np = built[i].procs.size();
        if (np == 0) continue;
        if (np > 64) throw SimError("GraphError", "node " + nodes[i].id, "more than 64 processes in one node");
        if ((pos & 63) + np > 64) pos = (pos | 63) + 1;
        node_word[i] = pos >> 6;
        for (size_t k = 0; k < np; ++k) node_mask[i] |= uint64_t(1) << ((pos + k) & 63);
        slots.resize(pos + np, Live{nullptr, {}, {}});
        for (Proc& p : built[i].procs) slots[pos++] = Live{&nodes[i], p.h, p.h.promise().own};
    }
    for (Live& l : slots)                    // slots no longer moves: each promise writes into its slot
        if (l.h) l.h.promise().w = &l.w;
    size_t nwords = (slots.size() + 63) >> 6;
    std::vector<uint64_t> ready(nwords + 1, 0), alive(nwords + 1, 0);
    std::vector<uint64_t> slot_mask(slots.size(), 0);    // each slot's node's mask (in the slot's word)
    for (size_t i = 0; i < nodes.size(); ++i) {
        if (!node_mask[i]) continue;
        ready[node_word[i]] |= node_mask[i];
        alive[node_word[i]] |= node_mask[i];
    }
    for (size_t b = 0; b < slots.size(); ++b)
        if (slots[b].h) slot_mask[b] = node_mask[slots[b].st - nodes.data()];
    size_t nlive = 0;
    for (const Live& l : slots) nlive += bool(l.h);
    // wire the channels of the streams: a push wakes the consumer node, a pop the producer node
    {
        size_t k = 0;
        for (const StreamSpec& s : streams) {
            for (auto& [dn, dp] : s.dsts) {
                Channel* c = chans[k++].get();
                (void)dp;
                c->cwake = &ready[node_word[dn]];
                c->cmask = node_mask[dn];
                c->pwake = &ready[node_word[s.src]];
                c->pmask = c->unbounded ? 0 : node_mask[s.src];
            }
        }
    }
    auto live_now = [&] {
        std::vector<Live> v;
        for (size_t b = 0; b < slots.size(); ++b)
            if (slots[b].h && (alive[b >> 6] >> (b & 63) & 1)) v.push_back(slots[b]);
        return v;
    };

    uint64_t rounds = 0;
    auto counts_so_far = [&](KernelResult& r) {
        i64 mx = -1;
        for (Node& st : nodes)
            if (st.clock > mx) mx = st.clock;
        r.cycles = mx + 1;
        r.counts.clear();
        for (size_t i = 0; i < streams.size(); ++i) r.counts.emplace_back(streams[i].id, stream_outs[i]->count);
    };
    using clock_t_ = std::chrono::steady_clock;
    auto next_report = clock_t_::now() + std::chrono::duration<double>(hooks.progress_seconds);
    auto poll = [&] {
        if (hooks.poll) hooks.poll();
        if (hooks.progress && clock_t_::now() >= next_report) {
            next_report = clock_t_::now() + std::chrono::duration<double>(hooks.progress_seconds);
            i64 tokens = 0, mx = -1;
            for (Out* o : stream_outs) tokens += o->count;
            for (Node& st : nodes)
                if (st.clock > mx) mx = st.clock;
            hooks.progress(tokens, mx + 1);
        }
    };
    try {
    while (nlive) {
        bool progress = false;
        for (size_t w = 0; w < nwords; ++w) {
            uint64_t seen = 0;                   // this word's bits at or below the last one visited
            // a resume may flag processes of this word (the channels' wake pointers), so ready is read from
            // memory each time; alive changes only here
            uint64_t* const rw = &ready[w];
            uint64_t live_w = alive[w];
            for (;;) {
                uint64_t bits = *rw & live_w & ~seen;
                if (!bits) break;
                unsigned b = (unsigned)__builtin_ctzll(bits);
                uint64_t bit = uint64_t(1) << b;
                seen = (bit << 1) - 1;           // bit 63: all ones
                *rw &= ~bit;
                size_t slot = (w << 6) | b;
                Live& item = slots[slot];
                // skip a process whose awaited token or slot has not appeared: resuming it would yield at once
                bool waits;
                if (item.w.ch) waits = item.w.ch->empty();
                else if (item.w.em) waits = item.w.em->room() == NONE;
                else waits = item.w.pipe && item.w.pipe->drain_waits();
                if (waits) continue;
                Node* st = item.st;
                // whether the round made progress is settled by its first resume that moved something: the
                // counters are compared only until then
                i64 before = progress ? 0 : st->busy + st->moved;
                auto h = item.h;
                h.resume();
                if (__builtin_expect(h.promise().exc != nullptr, 0)) std::rethrow_exception(h.promise().exc);
                // its node's processes (itself included) are looked at again: the later ones in this round,
                // the others (bits at or below b) in the next
                *rw |= slot_mask[slot];
                if (h.done()) {
                    progress = true;
                    live_w &= ~bit;
                    alive[w] = live_w;
                    --nlive;
                    continue;
                }
                if (!progress && st->busy + st->moved != before) progress = true;
            }
        }
        if (!progress) throw SimError("DeadlockError", "", deadlock_message(live_now()));
        if ((++rounds & 255) == 0) poll();
    }
    } catch (...) {
        if (hooks.partial) counts_so_far(*hooks.partial);
        throw;
    }
    KernelResult res;
    counts_so_far(res);
    return res;
}

}  // namespace ff
