// repeat_sig: coordinates to repeat signals: R per coordinate (or N), S per stop, D
// (fuseflow/sim/ops/repeat_sig.py).
#include "../engine.hpp"

namespace ff {
namespace {

Proc run(Node& st) {
    Channel* inp = st.in("in");
    Out* out = st.out("repsig");
    i64 clock = -1, r;
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        Tok sig;
        if (tok.is_str()) {
            if (tok.is_stop()) sig = TOK_S;
            else if (tok.is_D()) sig = TOK_D;
            else if (tok.is_N()) sig = TOK_R;
            else bad(st, "unexpected token " + repr(tok));
        } else {
            sig = TOK_R;
        }
        FF_WAIT_ROOM(r, out);
        i64 t = tin >= r ? tin : r;
        st.blocked += t - tin;
        inp->pop(t);
        out->push1(sig, t);
        clock = st.clock = t;
        st.busy += 1;
        if (sig.is_D()) co_return;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(repeat_sig, build);
}  // namespace ff
