// reduce: one value per non-empty innermost fibre (sum, max or min); S_n (n >= 1) becomes S_(n-1)
// (fuseflow/sim/ops/reduce.py). The merge op is the registry's REDUCE_MERGE, bound as _merge. With ``rows``
// every B x B block is first reduced to the B-vector of its rows (Env::row_reduce); N is the node's zero.
#include "../engine.hpp"

namespace ff {
namespace {

Proc with_crd(Node& st) {
    Channel *iv = st.in("val"), *ic = st.in("crd");
    Out* out = st.out("val");
    const Env& env = *st.env;
    BinFn f = env.binary(st.params.get_str("_merge"));
    bool rows = st.params.truthy("rows");
    std::string rop = st.params.get_str("op", "sum");
    Tok zero = env.zero;
    // the accumulator is held across yields (blocks: BlockArena::hold); zero is pinned, so releasing a pushed
    // zero or stop is a no-op
    auto hold = [&env](const Tok& x) { if (x.is_blk()) env.arena->hold(x); };
    auto release = [&env](const Tok& x) { if (x.is_blk()) env.arena->release(x); };
    Tok acc;
    bool have = false;
    bool closed = false;
    i64 clock = -1, ops = 0;
    for (;;) {
        FF_WAIT_TOK(ic);
        Tok c = ic->head();
        i64 t = std::max(clock + 1, ic->head_time() + 1);
        Tok push;
        bool pop_c, pop_v;
        if (closed && c.is_stop()) {
            push = c;
            pop_c = true;
            pop_v = false;
            closed = false;
        } else {
            FF_WAIT_TOK(iv);
            Tok v = iv->head();
            t = std::max(t, iv->head_time() + 1);
            if (!c.is_str()) {
                if (!v.is_str() || v.is_N()) {
                    v = v.is_N() ? zero : (rows ? env.row_reduce(rop, v) : v);
                    if (!have) {
                        acc = v;
                        have = true;
                        hold(acc);
                    } else {
                        Tok nv = f(env, acc, v);
                        hold(nv);
                        release(acc);
                        acc = nv;
                        ops += 1;
                    }
                    iv->pop(t);
                    clock = st.clock = t;
                    st.busy += 1;
                    continue;
                }
                if (!v.is_stop()) bad(st, "coordinate " + repr(c) + " meets value token " + repr(v));
                push = have ? acc : zero;      // (acc stays held until it is pushed)
                pop_c = pop_v = true;
                have = false;
                closed = v.level() != 0;
            } else if (c.is_stop()) {
                Tok want = Tok::Stop(c.level() + 1);
                if (!tok_eq(v, want)) {
                    std::string cs = repr(c), ws = repr(want);
                    bad(st, "outer " + cs.substr(1, cs.size() - 2) + " meets value " + repr(v) + " (expected " +
                                ws.substr(1, ws.size() - 2) + ")");
                }
                push = c;
                pop_c = pop_v = true;
            } else if (c.is_D()) {
                if (!v.is_D()) bad(st, "crd is done but val has " + repr(v));
                push = TOK_D;
                pop_c = pop_v = true;
            } else {
                bad(st, "unexpected token " + repr(c) + " on crd");
            }
        }
        FF_FIRE_AT(t, t, out);
        if (pop_c) ic->pop(t);
        if (pop_v) iv->pop(t);
        out->push1(push, t);
        release(push);
        clock = st.clock = t;
        st.busy += 1;
        if (push.is_D()) {
            st.alu_ops += ops;
            co_return;
        }
    }
}

Proc plain(Node& st) {
    Channel* inp = st.in("val");
    Out* out = st.out("val");
    const Env& env = *st.env;
    BinFn f = env.binary(st.params.get_str("_merge"));
    bool rows = st.params.truthy("rows");
    std::string rop = st.params.get_str("op", "sum");
    Tok zero = env.zero;
    // the accumulator is held across yields (blocks: BlockArena::hold); zero is pinned, so releasing a pushed
    // zero or stop is a no-op
    auto hold = [&env](const Tok& x) { if (x.is_blk()) env.arena->hold(x); };
    auto release = [&env](const Tok& x) { if (x.is_blk()) env.arena->release(x); };
    Tok acc;
    bool have = false;
    i64 clock = -1, ops = 0, t;
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        if (!tok.is_str() || tok.is_N()) {
            Tok v = tok.is_N() ? zero : (rows ? env.row_reduce(rop, tok) : tok);
            if (!have) {
                acc = v;
                have = true;
                hold(acc);
            } else {
                Tok nv = f(env, acc, v);
                hold(nv);
                release(acc);
                acc = nv;
                ops += 1;
            }
            inp->pop(tin);
            clock = st.clock = tin;
            st.busy += 1;
            continue;
        }
        Tok push;
        bool has_push = true, pop;
        if (tok.is_D()) {
            if (have) bad(st, "stream ends without closing its last fibre");
            push = TOK_D;
            pop = true;
        } else if (tok.is_stop()) {
            int n = tok.level();
            if (have) {
                push = acc;          // (held until it is pushed)
                pop = n == 0;        // S_n (n >= 1) is handled again as a bare stop
                have = false;
            } else if (n > 0) {
                push = Tok::Stop(n - 1);
                pop = true;
            } else {
                has_push = false;    // an empty fibre gives no value
                pop = true;
            }
        } else {
            bad(st, "unexpected token " + repr(tok));
        }
        if (!has_push) {
            t = tin;
        } else {
            FF_FIRE_AT(t, tin, out);
            out->push1(push, t);
            release(push);
        }
        if (pop) inp->pop(t);
        clock = st.clock = t;
        st.busy += 1;
        if (has_push && push.is_D()) {
            st.alu_ops += ops;
            co_return;
        }
    }
}

void build(Node& st, Built& b) {
    if (st.in("crd")) b.procs.push_back(with_crd(st));
    else b.procs.push_back(plain(st));
}

}  // namespace
FF_REGISTER_OP(reduce, build);
}  // namespace ff
