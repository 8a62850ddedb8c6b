// repeat: re-emits the held input token once per R; S closes its fibre with stop promotion
// (fuseflow/sim/ops/repeat.py; its _emit and _close helpers are written out where they are used).
#include "../engine.hpp"

namespace ff {
namespace {

// _emit(out, tok, tin, st): push tok no earlier than tin; t is the firing cycle
#define EMIT(tok, tin)              \
    do {                            \
        FF_FIRE_AT(t, (tin), out);  \
        out->push1((tok), t);       \
    } while (0)

Proc run(Node& st) {
    Channel* inp = st.in("in");
    Channel* rs = st.in("repsig");
    Out* out = st.out("out");
    BlockArena* ar = st.env ? st.env->arena : nullptr;
    i64 clock = -1, t = 0, tin;
    bool holding = false;
    Tok held;
    for (;;) {
        bool close = false, pop_sig = false;
        if (!holding) {
            FF_WAIT_TOK(inp);
            FF_WAIT_TOK(rs);
            Tok x = inp->head(), s = rs->head();
            tin = std::max({clock + 1, inp->head_time() + 1, rs->head_time() + 1});
            if (x.is_str() && !x.is_N()) {
                if (x.is_D()) {
                    if (!s.is_D()) bad(st, "input done but repeat signal is " + repr(s));
                    EMIT(TOK_D, tin);
                    inp->pop(t);
                    rs->pop(t);
                    st.clock = t;
                    st.busy += 1;
                    co_return;
                }
                if (!x.is_stop() || s.k != K_S) bad(st, "input stop " + repr(x) + " meets repeat signal " + repr(s));
                EMIT(Tok::Stop(x.level() + 1), tin);
                inp->pop(t);
                rs->pop(t);
            } else if (s.k == K_R) {
                EMIT(x, tin);
                inp->pop(t);
                rs->pop(t);
                held = x;
                if (x.is_blk()) ar->hold(held);     // kept across yields while it is repeated
                holding = true;
            } else if (s.k == K_S) {
                // empty fibre for x: take both now, close the fibre once the next input is visible
                t = tin;
                inp->pop(t);
                rs->pop(t);
                clock = st.clock = t;
                st.busy += 1;
                close = true;
                pop_sig = false;
            } else {
                bad(st, "repeat signal " + repr(s) + " while the input holds " + repr(x));
            }
        } else {
            FF_WAIT_TOK(rs);
            Tok s = rs->head();
            tin = std::max(clock + 1, rs->head_time() + 1);
            if (s.k == K_R) {
                EMIT(held, tin);
                rs->pop(t);
            } else if (s.k == K_S) {
                close = true;
                pop_sig = true;
                holding = false;
                if (held.is_blk()) ar->release(held);
            } else {
                bad(st, "repeat signal " + repr(s) + " while repeating " + repr(held));
            }
        }
        if (close) {
            // _close: end the held token's fibre: S_(m+1) if the next input is S_m (popped), else S0
            FF_WAIT_TOK(inp);
            Tok nxt = inp->head();
            tin = std::max(clock + 1, inp->head_time() + 1);
            if (pop_sig) tin = std::max(tin, rs->head_time() + 1);
            bool promote = nxt.is_stop();
            EMIT(promote ? Tok::Stop(nxt.level() + 1) : Tok::Stop(0), tin);
            if (promote) inp->pop(t);
            if (pop_sig) rs->pop(t);
        }
        clock = st.clock = t;
        st.busy += 1;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(repeat, build);
}  // namespace ff
