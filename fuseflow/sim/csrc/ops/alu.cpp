// alu: element-wise arithmetic on aligned value streams; stops must match and pass through
// (fuseflow/sim/ops/alu.py). A pipelined operation (op_latency > 1) fires into the output pipeline.
#include "../engine.hpp"

namespace ff {
namespace {

const char* const UNARY[] = {"neg", "relu", "exp", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs",
                             "square"};

// the float-mode add, sub and mul of engine.cpp (f_add, f_sub, f_mul) inlined: no call per firing
enum FastOp { FO_NONE, FO_ADD, FO_SUB, FO_MUL };
FF_INLINE Tok fast_op(int fo, const Tok& a, const Tok& b) {
    bool ints = a.k == K_INT && b.k == K_INT;
    switch (fo) {
        case FO_ADD: return ints ? Tok::Int(a.i + b.i) : Tok::Flt(a.num() + b.num());
        case FO_SUB: return ints ? Tok::Int(a.i - b.i) : Tok::Flt(a.num() - b.num());
        default: return ints ? Tok::Int(a.i * b.i) : Tok::Flt(a.num() * b.num());
    }
}

// E: the emitter type (Out at latency 1, else the pipeline's Stage), so its room and push are inlined
template <class E>
Proc fire(Node& st, E* out) {
    const Params& p = st.params;
    std::string op = p.get_str("op");
    Channel* a = st.in("a");
    const Env& env = *st.env;
    Tok zero = env.zero;
    bool unary = false;
    for (const char* u : UNARY)
        if (op == u) unary = true;
    std::function<Tok(const Tok&)> uf;
    BinFn f = nullptr;
    int fo = FO_NONE;
    Channel* b = nullptr;
    Tok cval;
    if (unary) {
        uf = unary_with_blocks(env, op, env.unary(op));
    } else {
        f = env.binary(op);
        if (!env.fixed && !env.blocks) fo = op == "add" ? FO_ADD : op == "sub" ? FO_SUB : op == "mul" ? FO_MUL : FO_NONE;
        bool has_const = p.has("const");
        b = has_const ? nullptr : st.in("b");
        if (!b) {
            if (!has_const) bad(st, "binary op without input b or const");
            // the constant as the number mode holds it: encoded in Python (Env.encode), bound as _const
            const PVal* c = p.find("_const");
            cval = env.fixed ? Tok::Int(c->i) : Tok::Flt(c->f);
        }
    }
    i64 clock = -1, ops = 0, r, tin;
    for (;;) {
        FF_WAIT_TOK(a);
        if (b) {
            FF_WAIT_TOK(b);
            tin = std::max({clock + 1, a->head_time() + 1, b->head_time() + 1});
        } else {
            tin = std::max(clock + 1, a->head_time() + 1);
        }
        Tok x = a->head();
        Tok y = b ? b->head() : cval;
        bool xs = x.is_str() && !x.is_N();
        Tok v;
        if (xs) {
            if (b && !tok_eq(y, x))
                bad(st, "operands out of step: a has " + repr(x) + ", b has " + repr(y));
            v = x;
        } else {
            if (x.is_N()) x = zero;
            if (b && y.is_str()) {
                if (!y.is_N()) bad(st, "operands out of step: a has " + repr(x) + ", b has " + repr(y));
                y = zero;
            }
            v = fo != FO_NONE ? fast_op(fo, x, y) : unary ? uf(x) : f(env, x, y);
            ops += 1;
        }
        if (v.is_blk()) env.arena->hold(v);     // a result kept while the op waits for room
        FF_WAIT_ROOM(r, out);
        i64 t = tin >= r ? tin : r;
        st.blocked += t - tin;
        a->pop(t);
        if (b) b->pop(t);
        out->push(&v, t);
        if (v.is_blk()) env.arena->release(v);
        clock = t;
        if (t > st.clock) st.clock = t;
        st.busy += 1;
        if (v.is_D()) {
            st.alu_ops += ops;
            co_return;
        }
    }
}

void build(Node& st, Built& b) {
    Out* o = st.out("out");
    if (st.latency == 1) b.procs.insert(b.procs.begin(), fire(st, o));
    else b.procs.insert(b.procs.begin(), fire(st, static_cast<Stage*>(make_pipeline(st, b, {o}, st.latency))));
}

}  // namespace
FF_REGISTER_OP(alu, build);
}  // namespace ff
