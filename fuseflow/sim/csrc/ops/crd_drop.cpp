// crd_drop: drops outer coordinates whose inner fibre is empty, and those empty fibres
// (fuseflow/sim/ops/crd_drop.py; its wait_inner/pop_inner/push_inner helpers are written out as macros).
#include "../engine.hpp"

namespace ff {
namespace {

// wait_inner(t): wait for the heads of inner and its references; t becomes the cycle they are all visible
#define WAIT_INNER(t)                                                                                   \
    do {                                                                                                \
        for (Channel* ch_ : inner) {                                                                    \
            FF_WAIT_TOK(ch_);                                                                           \
            (t) = std::max((t), ch_->head_time() + 1);                                                  \
        }                                                                                               \
        Tok x_ = ii->head();                                                                            \
        if (x_.is_str())                                                                                \
            for (Channel* ch_ : irefs)                                                                  \
                if (!tok_eq(ch_->head(), x_))                                                           \
                    bad(st, "reference " + repr(ch_->head()) + " not aligned with inner token " + repr(x_)); \
    } while (0)

static inline std::string bare(const Tok& s) {   // a stop as an f-string shows it: S0, not 'S0'
    std::string x = repr(s);
    return s.is_str() ? x.substr(1, x.size() - 2) : x;
}

Proc run(Node& st) {
    int n = (int)st.params.get_int("arity", 0);
    Channel *io = st.in("outer"), *ii = st.in("inner");
    Out *oo = st.out("outer"), *oi = st.out("inner");
    std::vector<Channel*> irefs, inner{ii};
    std::vector<Out*> orefs, inner_out{oi}, both{oo}, only_oo{oo};
    for (int i = 0; i < n; ++i) {
        irefs.push_back(st.in("ref" + std::to_string(i)));
        orefs.push_back(st.out("ref" + std::to_string(i)));
    }
    inner.insert(inner.end(), irefs.begin(), irefs.end());
    inner_out.insert(inner_out.end(), orefs.begin(), orefs.end());
    both.insert(both.end(), inner_out.begin(), inner_out.end());
    auto pop_inner = [&](i64 t) {
        for (Channel* ch : inner) ch->pop(t);
    };
    auto push_inner = [&](i64 t) {       // push the inner heads (not popped) on the inner outputs
        for (size_t i = 0; i < inner.size(); ++i) inner_out[i]->push1(inner[i]->head(), t);
    };
    bool pending = false, closed = false, in_fibre = false;
    i64 clock = -1, t;
    for (;;) {
        if (in_fibre) {
            t = std::max(clock + 1, (i64)0);
            WAIT_INNER(t);
            Tok x = ii->head();
            if (!x.is_str() || x.is_N()) {
                FF_FIRE_AT_ALL(t, t, inner_out);
                push_inner(t);
                pop_inner(t);
            } else if (x.is_stop() && x.level() == 0) {
                pop_inner(t);
                pending = true;
                in_fibre = false;
            } else if (x.is_stop()) {
                FF_FIRE_AT_ALL(t, t, inner_out);
                push_inner(t);
                pop_inner(t);
                closed = true;
                in_fibre = false;
            } else {
                bad(st, "unexpected inner token " + repr(x));
            }
        } else {
            FF_WAIT_TOK(io);
            Tok c = io->head();
            t = std::max(clock + 1, io->head_time() + 1);
            if (!c.is_str()) {
                WAIT_INNER(t);
                Tok x = ii->head();
                if (!x.is_str() || x.is_N()) {
                    FF_FIRE_AT_ALL(t, t, both);
                    io->pop(t);
                    oo->push1(c, t);
                    if (pending) {
                        for (Out* o : inner_out) o->push1(Tok::Stop(0), t);
                        pending = false;
                    } else {
                        push_inner(t);
                        pop_inner(t);
                    }
                    in_fibre = true;
                } else if (x.is_stop() && x.level() == 0) {
                    io->pop(t);
                    pop_inner(t);
                } else if (x.is_stop()) {
                    FF_FIRE_AT_ALL(t, t, inner_out);
                    io->pop(t);
                    push_inner(t);
                    pop_inner(t);
                    pending = false;
                    closed = true;
                } else {
                    bad(st, "outer coordinate " + repr(c) + " meets inner " + repr(x));
                }
            } else if (c.is_stop()) {
                if (closed) {
                    FF_FIRE_AT_ALL(t, t, only_oo);
                    io->pop(t);
                    oo->push1(c, t);
                    closed = false;
                } else {
                    WAIT_INNER(t);
                    Tok x = ii->head();
                    Tok want = Tok::Stop(c.level() + 1);
                    if (!tok_eq(x, want) || pending)
                        bad(st, "outer " + bare(c) + " meets inner " + repr(x) + " (expected " + bare(want) + ")");
                    FF_FIRE_AT_ALL(t, t, both);
                    io->pop(t);
                    oo->push1(c, t);
                    push_inner(t);
                    pop_inner(t);
                }
            } else if (c.is_D()) {
                WAIT_INNER(t);
                if (!ii->head().is_D() || pending) bad(st, "outer is done but inner has " + repr(ii->head()));
                FF_FIRE_AT_ALL(t, t, both);
                io->pop(t);
                oo->push1(TOK_D, t);
                push_inner(t);
                pop_inner(t);
                st.clock = t;
                st.busy += 1;
                co_return;
            } else {
                bad(st, "unexpected outer token " + repr(c));
            }
        }
        clock = st.clock = t;
        st.busy += 1;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(crd_drop, build);
}  // namespace ff
