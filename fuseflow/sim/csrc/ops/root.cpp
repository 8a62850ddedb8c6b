// root: emits reference 0 at its first firing, then D (fuseflow/sim/ops/root.py).
#include "../engine.hpp"

namespace ff {
namespace {

Proc run(Node& st) {
    Out* out = st.out("ref");
    i64 clock = -1, r;
    for (Tok tok : {Tok::Int(0), TOK_D}) {
        FF_WAIT_ROOM(r, out);
        i64 t = std::max(clock + 1, r);
        out->push1(tok, t);
        clock = st.clock = t;
        st.busy += 1;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(root, build);
}  // namespace ff
