// The alu's element-wise functions written in C++ (Env::unary takes these before the Python callback).
//
// Fixed mode: the integer algorithms of fuseflow/tensors/fixed.py (FixedFormat._exp) and
// fuseflow/tensors/fixedfn.py (fx_*), line by line, so the two read side by side. Python ints are unbounded
// and >> floors, so the arithmetic is done in __int128 (whose >> is the arithmetic, flooring shift in C++20)
// wherever a product may pass 64 bits (log: y * LN2_Q; rsqrt: 2**(3*frac); sqrt: x << frac). The lookup
// tables and constants are not typed here: compiled.fixed_tables computes them with the Python functions and
// module.cpp binds them into Env::fns. Operands are raw values of the format (as in fixed.py).
//
// Float mode: sqrt, rsqrt (1.0 / sqrt(x)), abs and square (x * x) are native everywhere: each one IEEE-754
// correctly rounded operation (or two), the same on any machine. exp, sigmoid, tanh, log and gelu are not
// libm's: the reference calls NumPy/SciPy routines that differ from the C library in the last bit (checked
// over 6.76 million inputs, NumPy 2.4.6 / SciPy 1.17.1 on x86-64 with AVX-512, glibc 2.36: std::exp 158,179
// mismatches, sigmoid 61,557, std::tanh 802,858, std::log 2,996, gelu with std::erf 276,118), and NumPy picks
// its routine by CPU at run time (here: Intel SVML's __svml_exp8_ha / __svml_log8_ha for exp and log, and
// its own Highway port of SVML's tanh for tanh, all AVX-512; AVX2/FMA3 and libm paths elsewhere). So these
// call the very routine the reference runs: the float64 inner loop of np.exp / np.log / np.tanh /
// scipy.special.erf (Env::loops, bound by compiled.float_loops after a probe check), on one value, with the
// reference's arithmetic around it. Without a bound loop they stay Python callbacks.
#include <cmath>

#include "engine.hpp"

namespace ff {
namespace {

using i128 = __int128;
using u128 = unsigned __int128;

inline i128 pow2(int n) { return (i128)1 << n; }

// fixedfn._clamp / FixedFormat.saturate
inline i64 clamp(const Env& e, i128 x) { return x < e.lo ? e.lo : x > e.hi ? e.hi : (i64)x; }

// fixedfn.interp: T[i] + ((D[i] * t + 2**(r-1)) >> r), i = u >> r, t = u & (2**r - 1), with
// (T[i], D[i]) = interp_row(T, i) (D = 0 at the last entry)
i128 interp(const FnTable& T, i128 u, int r) {
    i128 i = u >> r;
    if (i < 0 || i >= (i128)T.t.size())
        throw SimError("StreamError", "value", "a fixed-point function's table index is out of range "
                                               "(an operand outside the format?)");
    size_t j = (size_t)i;
    i128 t0 = T.t[j];
    i128 d = j + 1 < T.t.size() ? (i128)T.t[j + 1] - T.t[j] : 0;
    if (!r) return t0;
    return t0 + ((d * (u & (pow2(r) - 1)) + pow2(r - 1)) >> r);
}

// fixedfn._round_guard: (v + 2**(shift-1)) >> shift (v unchanged when shift == 0)
inline i128 round_guard(i128 v, int shift) { return shift ? (v + pow2(shift - 1)) >> shift : v; }

// fixedfn.isqrt_round: r = isqrt(n), plus one if n - r*r > r. isqrt by the restoring digit recurrence (two
// bits per step), which leaves the remainder n - r*r in n.
u128 isqrt_round(u128 n) {
    u128 r = 0, bit = (u128)1 << 126;
    while (bit > n) bit >>= 2;
    while (bit) {
        if (n >= r + bit) {
            n -= r + bit;
            r = (r >> 1) + bit;
        } else {
            r >>= 1;
        }
        bit >>= 2;
    }
    return n > r ? r + 1 : r;
}

// FixedFormat._exp with bits = EXP_TABLE_BITS (the table's k = min(bits, p) was bound with it)
i64 fx_exp(const Env& e, i64 x) {
    const FixedFns& F = e.fns;
    int g = F.exp_guard;
    int p = e.frac + g;
    i128 y = ((i128)x * F.log2e_q + pow2(F.log2e_bits - g - 1)) >> (F.log2e_bits - g);
    i128 n = y >> p;
    i128 f = y & (pow2(p) - 1);
    int k = F.exp2.k;
    int r = p - k;
    i128 v = interp(F.exp2, f, r);        // i = f >> r; T[i] + ((d * t + 2**(r-1)) >> r), or T[i] when r == 0
    i128 s = n - g;
    if (s >= 0) {
        if (s >= e.width || v > ((i128)e.hi >> (int)s)) return e.hi;
        return (i64)(v << (int)s);
    }
    s = -s;
    if (s >= 62) return 0;
    i128 d = (v + pow2((int)s - 1)) >> (int)s;
    return d < e.hi ? (i64)d : e.hi;       // narrow formats: v itself may not fit
}

// fixedfn.fx_tanh
i64 fx_tanh(const Env& e, i64 x) {
    const FixedFns& F = e.fns;
    int p = e.frac + F.fn_guard;
    int r = e.frac + F.range_log2 - F.tanh.k;
    i128 u = x < 0 ? -(i128)x : (i128)x;
    i128 v = u < pow2(e.frac + F.range_log2) ? interp(F.tanh, u, r) : pow2(p);
    i64 y = clamp(e, round_guard(v, F.fn_guard));
    return x < 0 ? -y : y;
}

// fixedfn.fx_sigmoid: (1 + tanh(x/2)) / 2 from the tanh table
i64 fx_sigmoid(const Env& e, i64 x) {
    const FixedFns& F = e.fns;
    int p = e.frac + F.fn_guard;
    int r = e.frac + F.range_log2 - F.tanh.k + 1;
    i128 u = x < 0 ? -(i128)x : (i128)x;
    i128 v = u < pow2(e.frac + F.range_log2 + 1) ? interp(F.tanh, u, r) : pow2(p);
    i128 s = x < 0 ? pow2(p) - v : pow2(p) + v;
    return clamp(e, round_guard(s, F.fn_guard + 1));
}

// fixedfn.fx_gelu: relu(x) + h(|x|), h from the gelu table (0 for |x| >= 2**FN_RANGE_LOG2)
i64 fx_gelu(const Env& e, i64 x) {
    const FixedFns& F = e.fns;
    int r = e.frac + F.range_log2 - F.gelu.k;
    i128 u = x < 0 ? -(i128)x : (i128)x;
    i128 h = u < pow2(e.frac + F.range_log2) ? round_guard(interp(F.gelu, u, r), F.fn_guard) : 0;
    return clamp(e, (i128)(x > 0 ? x : 0) + h);
}

// fixedfn.fx_sqrt: isqrt_round(x << frac); x <= 0 gives 0
i64 fx_sqrt(const Env& e, i64 x) {
    if (x <= 0) return 0;
    u128 s = isqrt_round((u128)x << e.frac);
    return clamp(e, (i128)s);
}

// fixedfn.fx_rsqrt: isqrt_round(2**(3*frac) // x); x <= 0 gives max_raw
i64 fx_rsqrt(const Env& e, i64 x) {
    if (x <= 0) return e.hi;
    u128 s = isqrt_round(((u128)1 << (3 * e.frac)) / (u128)x);
    return clamp(e, (i128)s);
}

// fixedfn.fx_log: log2 from the mantissa's table, times ln 2; x <= 0 gives min_raw
i64 fx_log(const Env& e, i64 x) {
    if (x <= 0) return e.lo;
    const FixedFns& F = e.fns;
    int p = e.frac + F.fn_guard;
    int m = e.width - 2;
    int ex = 63 - __builtin_clzll((unsigned long long)x);     // x.bit_length() - 1
    if (ex > m)                                               // Python: a negative shift count
        throw SimError("StreamError", "value", "log of " + std::to_string(x) + ", which is outside the format");
    i128 f = ((i128)x << (m - ex)) - pow2(m);
    i128 v = interp(F.log2, f, m - F.log2.k);
    i128 y = (i128)(ex - e.frac) * pow2(p) + v;             // ((e - frac) << p) + v
    int sh = F.ln2_bits + F.fn_guard;
    return clamp(e, (y * F.ln2_q + pow2(sh - 1)) >> sh);
}

// fixedfn.fx_abs: |x|, saturating
i64 fx_abs(const Env& e, i64 x) { return clamp(e, x < 0 ? -(i128)x : (i128)x); }

// fixedfn.fx_square: mul(x, x)
i64 fx_square(const Env& e, i64 x) { return clamp(e, ((i128)x * x + e.half) >> e.frac); }

using FixedFn = i64 (*)(const Env&, i64);

struct FixedEntry {
    const char* name;
    FixedFn fn;
};
const FixedEntry FIXED[] = {{"exp", fx_exp},   {"sigmoid", fx_sigmoid}, {"tanh", fx_tanh},
                            {"gelu", fx_gelu}, {"sqrt", fx_sqrt},       {"rsqrt", fx_rsqrt},
                            {"log", fx_log},   {"abs", fx_abs},         {"square", fx_square}};

// float mode (fixed.py FLOAT_UNARY_OPS: the NumPy routine on one float64; ints are converted first)
double f_sqrt(double x) { return std::sqrt(x); }
double f_rsqrt(double x) { return 1.0 / std::sqrt(x); }
double f_abs(double x) { return std::fabs(x); }
double f_square(double x) { return x * x; }

using FloatFn = double (*)(double);

// fixed.fexp: above ln(max float64) the result is inf; else np.exp
constexpr double EXP_OVERFLOW = 709.782712893384;
// fixedfn._gelu_array's math.sqrt(2.0) (correctly rounded)
constexpr double SQRT2 = 1.4142135623730951;

// The float functions on NumPy's/SciPy's loops (FLOAT_FUNCTION_ARRAYS: x is one float64): an empty function
// when the loop they need is not bound
UnaryFn loop_unary(const Env& env, const std::string& name) {
    const FloatLoops& L = env.loops;
    if (name == "exp" && L.exp) {
        FloatLoop f = L.exp;
        return [f](const Tok& a) {
            double x = a.num();
            return Tok::Flt(x > EXP_OVERFLOW ? INFINITY : f(x));
        };
    }
    if (name == "sigmoid" && L.exp) {      // 1.0 / (1.0 + np.exp(-x))
        FloatLoop f = L.exp;
        return [f](const Tok& a) { return Tok::Flt(1.0 / (1.0 + f(-a.num()))); };
    }
    if (name == "tanh" && L.tanh) {
        FloatLoop f = L.tanh;
        return [f](const Tok& a) { return Tok::Flt(f(a.num())); };
    }
    if (name == "log" && L.log) {
        FloatLoop f = L.log;
        return [f](const Tok& a) { return Tok::Flt(f(a.num())); };
    }
    if (name == "gelu" && L.erf) {         // 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
        FloatLoop f = L.erf;
        return [f](const Tok& a) {
            double x = a.num();
            double h = 0.5 * x;
            double e = 1.0 + f(x / SQRT2);
            return Tok::Flt(h * e);
        };
    }
    return {};
}

struct FloatEntry {
    const char* name;
    FloatFn fn;
};
const FloatEntry FLOAT[] = {{"sqrt", f_sqrt}, {"rsqrt", f_rsqrt}, {"abs", f_abs}, {"square", f_square}};

}  // namespace

UnaryFn native_unary(const Env& env, const std::string& name) {
    const Env* e = &env;
    if (env.fixed) {
        if (!env.fns.bound) return {};
        for (const FixedEntry& f : FIXED)
            if (name == f.name) {
                FixedFn fn = f.fn;
                return [e, fn](const Tok& a) { return Tok::Int(fn(*e, a.i)); };
            }
        return {};
    }
    for (const FloatEntry& f : FLOAT)
        if (name == f.name) {
            FloatFn fn = f.fn;
            return [fn](const Tok& a) { return Tok::Flt(fn(a.num())); };
        }
    return loop_unary(env, name);
}

const std::vector<std::string>& native_unary_names(bool fixed) {
    static const std::vector<std::string> fx = [] {
        std::vector<std::string> v;
        for (const FixedEntry& f : FIXED) v.push_back(f.name);
        return v;
    }();
    static const std::vector<std::string> fl = [] {
        std::vector<std::string> v;
        for (const FloatEntry& f : FLOAT) v.push_back(f.name);
        return v;
    }();
    return fixed ? fx : fl;
}

}  // namespace ff
