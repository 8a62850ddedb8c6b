// crd_hold: repeats each outer coordinate once per coordinate of its inner fibre (fuseflow/sim/ops/crd_hold.py).
#include "../engine.hpp"

namespace ff {
namespace {

Proc run(Node& st) {
    Channel* io = st.in("outer");
    Channel* ii = st.in("inner");
    Out* out = st.out("outer");
    bool closed = false;
    i64 clock = -1;
    for (;;) {
        FF_WAIT_TOK(io);
        Tok c = io->head();
        i64 t = std::max(clock + 1, io->head_time() + 1);
        if (closed && c.is_stop()) {
            io->pop(t);      // the partner of an inner stop that closed this outer fibre
            closed = false;
            clock = st.clock = t;
            st.busy += 1;
            continue;
        }
        FF_WAIT_TOK(ii);
        Tok x = ii->head();
        t = std::max(t, ii->head_time() + 1);
        bool pop_outer = true;
        Tok push;
        if (!c.is_str()) {
            if (!x.is_str() || x.is_N()) {
                push = c;
                pop_outer = false;
            } else if (x.is_stop()) {
                push = x;
                closed = x.level() != 0;
            } else {
                bad(st, "outer coordinate " + repr(c) + " meets inner " + repr(x));
            }
        } else if (c.is_stop()) {
            Tok want = Tok::Stop(c.level() + 1);
            if (!tok_eq(x, want)) bad(st, "outer " + repr(c).substr(1, repr(c).size() - 2) + " meets inner " + repr(x) +
                                              " (expected " + repr(want).substr(1, repr(want).size() - 2) + ")");
            push = x;
        } else if (c.is_D()) {
            if (!x.is_D()) bad(st, "outer is done but inner has " + repr(x));
            push = TOK_D;
        } else {
            bad(st, "unexpected outer token " + repr(c));
        }
        FF_FIRE_AT(t, t, out);
        ii->pop(t);
        if (pop_outer) io->pop(t);
        out->push1(push, t);
        clock = st.clock = t;
        st.busy += 1;
        if (push.is_D()) co_return;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(crd_hold, build);
}  // namespace ff
