// alu: element-wise arithmetic on aligned value streams; stops must match and pass through
// (fuseflow/sim/ops/alu.py). A pipelined operation (op_latency > 1) fires into the output pipeline.
#include "../engine.hpp"

namespace ff {
namespace {

const char* const UNARY[] = {"neg", "relu", "exp", "sigmoid", "tanh", "gelu", "sqrt", "rsqrt", "log", "abs",
                             "square"};

Proc fire(Node& st, Emitter* out) {
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
    Channel* b = nullptr;
    Tok cval;
    if (unary) {
        uf = unary_with_blocks(env, op, env.unary(op));
    } else {
        f = env.binary(op);
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
            v = unary ? uf(x) : f(env, x, y);
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
    Emitter* out = st.latency == 1 ? static_cast<Emitter*>(o) : make_pipeline(st, b, {o}, st.latency);
    b.procs.insert(b.procs.begin(), fire(st, out));
}

}  // namespace
FF_REGISTER_OP(alu, build);
}  // namespace ff
