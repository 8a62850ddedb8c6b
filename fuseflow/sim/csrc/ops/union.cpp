// union: co-iterates n fibres and emits every coordinate present in any; absent sides get reference N
// (fuseflow/sim/ops/union.py).
#include "../engine.hpp"

namespace ff {
namespace {

Proc run(Node& st) {
    JoinerPorts jp = joiner_ports(st);
    int n = jp.n;
    std::vector<Channel*>&crds = jp.crds, &refs = jp.refs, &chans = jp.chans;
    std::vector<Out*>&orefs = jp.orefs, &allouts = jp.allouts;
    Out* ocrd = jp.ocrd;
    std::vector<Tok> heads(n);
    i64 clock = -1, r;
    for (;;) {
        i64 tin;
        FF_WAIT_HEADS(tin, chans, clock);
        bool any_data = false;
        Tok m;
        for (int i = 0; i < n; ++i) {
            heads[i] = crds[i]->head();
            if (!heads[i].is_str() && (!any_data || tok_lt(heads[i], m))) {
                m = heads[i];
                any_data = true;
            }
        }
        FF_WAIT_ROOM_ALL(r, allouts);
        i64 t = std::max(tin, r);
        st.blocked += t - tin;
        if (any_data) {
            ocrd->push1(m, t);
            for (int i = 0; i < n; ++i) {
                if (!heads[i].is_str() && tok_eq(heads[i], m)) {
                    crds[i]->pop(t);
                    orefs[i]->push1(refs[i]->pop(t), t);
                } else {
                    orefs[i]->push1(TOK_N, t);
                }
            }
        } else {
            Tok h0 = heads[0];
            bool differ = false;
            for (int i = 0; i < n; ++i)
                if (!tok_eq(heads[i], h0)) differ = true;
            if (differ || (!h0.is_D() && !h0.is_stop()))
                bad(st, "inputs end their fibres differently: " + repr_list(heads));
            ocrd->push1(h0, t);
            for (int i = 0; i < n; ++i) {
                crds[i]->pop(t);
                refs[i]->pop(t);
                orefs[i]->push1(h0, t);
            }
        }
        clock = st.clock = t;
        st.busy += 1;
        if (!any_data && heads[0].is_D()) co_return;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(union, build);
}  // namespace ff
