// level_write, value_write and run_op's test source and sink (fuseflow/sim/ops/level_write.py, value_write.py,
// engine._source/_sink): the ops that end streams.
#include "../engine.hpp"

namespace ff {
namespace {

// _common.sink: pop one token per cycle, hand it to take; stop after D
template <class Take>
Proc sink(Node& st, Channel* inp, Take take) {
    i64 clock = -1;
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 t = inp->head_time() + 1;
        if (t <= clock) t = clock + 1;
        inp->pop(t);
        clock = st.clock = t;
        st.busy += 1;
        take(tok);
        if (tok.is_D()) co_return;
    }
}

void level_write(Node& st, Built& b) {
    // A fibre ends at a stop that follows a coordinate, or a bare stop that follows S0 (an empty fibre); at
    // level 0 a bare stop at the start is the single empty fibre.
    // dense_above: the levels above are dense, so every stop ends a fibre (as at the top level)
    bool top = st.params.get_int("level", 0) == 0;
    bool every = st.params.truthy("dense_above");
    st.res_seg.assign(1, 0);
    st.res_crd.clear();
    enum { START, DATA, S0, S } last = START;
    Node* s = &st;
    auto take = [s, top, every, last](const Tok& tok) mutable {
        if (!tok.is_str()) {
            s->res_crd.push_back(tok.i);
            last = DATA;
        } else if (tok.is_stop()) {
            if (every || last == DATA || last == S0 || (top && last == START)) s->res_seg.push_back((i64)s->res_crd.size());
            last = tok.level() == 0 ? S0 : S;
        } else if (tok.is_D()) {
            if (top && s->res_seg.size() == 1) s->res_seg.push_back((i64)s->res_crd.size());
            s->result = Node::LEVEL_RESULT;
            s->mem_writes += (i64)(s->res_crd.size() + s->res_seg.size());
        } else {
            bad(*s, "unexpected token " + repr(tok));
        }
    };
    b.procs.push_back(sink(st, st.in("crd"), take));
}

void value_write(Node& st, Built& b) {
    Node* s = &st;
    Tok zero = st.env->zero;
    auto take = [s, zero](const Tok& tok) {
        if (!tok.is_str()) {
            s->res_vals.push_back(tok);
        } else if (tok.is_N()) {
            s->res_vals.push_back(zero);
        } else if (tok.is_D()) {
            s->result = Node::VALS_RESULT;
            s->mem_writes += (i64)s->res_vals.size();
        } else if (!tok.is_stop()) {
            bad(*s, "unexpected token " + repr(tok));
        }
    };
    b.procs.push_back(sink(st, st.in("val"), take));
}

// run_op's test source: all tokens visible from cycle 0
Proc source(Node& st) {
    Out* out = st.out("out");
    for (const Tok& tok : st.src_tokens) out->push1(tok, -1);
    co_return;
}

Proc test_sink(Node& st) {
    Channel* inp = st.in("in");
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->pop(0);
        st.res_vals.push_back(tok);
        if (tok.is_D()) {
            st.result = Node::TOKENS_RESULT;
            co_return;
        }
    }
}

void build_source(Node& st, Built& b) { b.procs.push_back(source(st)); }
void build_sink(Node& st, Built& b) { b.procs.push_back(test_sink(st)); }

}  // namespace
FF_REGISTER_OP(level_write, level_write);
FF_REGISTER_OP(value_write, value_write);
static ::ff::RegisterOp ff_register_source("_source", build_source);
static ::ff::RegisterOp ff_register_sink("_sink", build_sink);
}  // namespace ff
