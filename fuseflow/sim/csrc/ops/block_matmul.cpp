// block_matmul: out = a @ b per token (a B x B block times a B x B block or a B-vector); N is a zero block
// (fuseflow/sim/ops/block_matmul.py). Initiation interval B (registry.op_interval, bound as _interval): a firing
// on data takes the op for B cycles, a stop or D for 1. The result leaves through the output pipeline
// (registry.op_latency). Stops must match on a and b and pass through.
#include "../engine.hpp"

namespace ff {
namespace {

std::string show(const Env& env, const Tok& tok) {
    return tok.is_str() ? repr(tok) : "a " + shape_repr(env, tok) + " block";
}

Proc fire(Node& st, Emitter* out) {
    const Env& env = *st.env;
    BlockArena& ar = *env.arena;
    uint32_t n = (uint32_t)st.params.get_int("block", 1);
    i64 interval = st.params.get_int("_interval", 1);
    bool matrix = st.params.get_str("rhs", "matrix") == "matrix";
    Tok zero_a = ar.make(2, n);
    Tok zero_b = ar.make(matrix ? 2 : 1, n);
    ar.pin(zero_a);
    ar.pin(zero_b);
    std::string sa = shape_repr(env, zero_a), sb = shape_repr(env, zero_b);
    Channel *a = st.in("a"), *b = st.in("b");
    i64 free = 0, ops = 0, r;
    auto fits = [&](const Tok& t, int ndim) {
        return t.is_blk() && ar.at(t).ndim == ndim && ar.at(t).n == n;
    };
    for (;;) {
        FF_WAIT_TOK(a);
        FF_WAIT_TOK(b);
        i64 tin = std::max({free, a->head_time() + 1, b->head_time() + 1});
        Tok x = a->head(), y = b->head();
        bool xs = x.is_str() && !x.is_N(), ys = y.is_str() && !y.is_N();
        Tok v;
        i64 busy;
        if (xs || ys) {
            if (!(xs && ys && tok_eq(x, y)))
                bad(st, "operands out of step: a has " + show(env, x) + ", b has " + show(env, y));
            v = x;
            busy = 1;
        } else {
            if (x.is_str()) x = zero_a;
            if (y.is_str()) y = zero_b;
            if (!fits(x, 2) || !fits(y, matrix ? 2 : 1))
                bad(st, "operand shapes " + shape_repr(env, x) + " and " + shape_repr(env, y) + " do not fit block " +
                            std::to_string(n) + " (a " + sa + ", b " + sb + ")");
            v = env.matmul(x, y);
            busy = interval;
            ops += 1;
        }
        if (v.is_blk()) ar.hold(v);             // a result kept while the op waits for room
        FF_WAIT_ROOM(r, out);
        i64 t = tin >= r ? tin : r;
        st.blocked += t - tin;
        a->pop(t);
        b->pop(t);
        out->push(&v, t);
        if (v.is_blk()) ar.release(v);
        free = t + busy;
        st.clock = std::max(st.clock, t + busy - 1);    // the op is busy until its last row has entered
        st.busy += busy;
        if (v.is_D()) {
            st.alu_ops += ops;
            co_return;
        }
    }
}

void build(Node& st, Built& b) {
    Emitter* out = make_pipeline(st, b, {st.out("out")}, st.latency);
    b.procs.insert(b.procs.begin(), fire(st, out));
}

}  // namespace
FF_REGISTER_OP(block_matmul, build);
}  // namespace ff
