// parallelize: splits a stream across lanes, round-robin by fibre; stops and D go to every lane
// (fuseflow/sim/ops/parallelize.py, line by line).
#include "../engine.hpp"

namespace ff {
namespace {

Proc run(Node& st) {
    Channel* inp = st.in("in");
    int n = (int)st.params.get_int("lanes");
    std::vector<Out*> lanes;
    for (int i = 0; i < n; ++i) lanes.push_back(st.out("out" + std::to_string(i)));
    std::vector<Out*> one(1);
    i64 clock = -1;
    i64 k = 0;                             // position of the next data token in its fibre
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        bool ctrl = tok.is_str() && !tok.is_N();
        std::vector<Out*>* targets;
        if (ctrl) {
            if (!tok.is_D() && !tok.is_stop()) bad(st, "unexpected token " + repr(tok));
            targets = &lanes;              // a stop or D: every lane
        } else {
            one[0] = lanes[k % n];
            targets = &one;
        }
        i64 r = tin, room;
        for (Out* o : *targets) {
            FF_WAIT_ROOM(room, o);
            if (room > r) r = room;
        }
        st.blocked += r - tin;
        inp->pop(r);
        for (Out* o : *targets) o->push1(tok, r);
        clock = st.clock = r;
        st.busy += 1;
        k = ctrl ? 0 : k + 1;
        if (tok.is_D()) co_return;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(parallelize, build);
}  // namespace ff
