// locate: coordinates of a fibre -> references r*dim + c of a dense level (r: the fibre's parent reference)
// (fuseflow/sim/ops/locate.py, line by line; its _emit helper is written out where it is used).
// States: FRESH (nothing held) inspects both heads; HELD (a parent reference held) inspects the coordinate head,
// and the parent head too when that is a stop of level >= 1 (the parent's stop it closes).
#include "../engine.hpp"

namespace ff {
namespace {

// Python's f"{tok}" (str, not repr: a control token without quotes)
std::string str_(const Tok& t) {
    std::string s = repr(t);
    return t.is_str() ? s.substr(1, s.size() - 2) : s;
}

// p * dim + c on tokens (ints in every graph; Python's arithmetic when a number is a float)
Tok locate_ref(const Tok& p, i64 dim, const Tok& c) {
    if (p.k == K_INT && c.k == K_INT) return Tok::Int(p.i * dim + c.i);
    double pd = p.k == K_INT ? (double)(p.i * dim) : p.f * (double)dim;
    return Tok::Flt(pd + c.num());
}

// _emit(out, tok, tin, st): push tok no earlier than tin; t is the firing cycle
#define EMIT(tok, tin)              \
    do {                            \
        FF_FIRE_AT(t, (tin), out);  \
        out->push1((tok), t);       \
    } while (0)

Proc run(Node& st) {
    i64 dim = st.params.get_int("dim");
    Channel *par = st.in("ref"), *crd = st.in("crd");
    Out* out = st.out("ref");
    i64 clock = -1, t = 0;
    bool holding = false;   // held is not None
    Tok held;               // the parent reference of the current fibre (an int or N), once taken
    for (;;) {
        FF_WAIT_TOK(crd);
        Tok c = crd->head();
        i64 tin = crd->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        bool c_stop = c.is_str();
        if (c.is_N()) bad(st, "N on the coordinate input");
        if (!holding) {
            FF_WAIT_TOK(par);
            Tok p = par->head();
            if (par->head_time() + 1 > tin) tin = par->head_time() + 1;
            if (p.is_str() && !p.is_N()) {
                if (p.is_D()) {
                    if (!c.is_D()) bad(st, "parent done but coordinate " + repr(c));
                } else if (!p.is_stop() || !c.is_stop() || c.level() != p.level() + 1) {
                    bad(st, "parent stop " + repr(p) + " meets coordinate token " + repr(c) + " (expected S" +
                                std::to_string((p.is_stop() ? p.level() : 0) + 1) + ")");
                }
                EMIT(c, tin);
                par->pop(t);
                crd->pop(t);
                clock = st.clock = t;
                st.busy += 1;
                if (c.is_D()) co_return;
                continue;
            }
            if (c.is_D()) bad(st, "coordinates done while the parent holds " + repr(p));
            held = p;
            holding = true;
            if (c_stop) {
                // an empty fibre: take the parent reference alone; the stop is handled as HELD next cycle
                par->pop(tin);
                clock = st.clock = tin;
                st.busy += 1;
                continue;
            }
            EMIT(p.is_N() ? TOK_N : locate_ref(p, dim, c), tin);
            par->pop(t);
            crd->pop(t);
        } else if (!c_stop) {
            EMIT(held.is_N() ? TOK_N : locate_ref(held, dim, c), tin);
            crd->pop(t);
        } else {
            if (c.is_D() || !c.is_stop()) bad(st, "coordinate token " + repr(c) + " inside the fibre of parent " + repr(held));
            int n = c.level();
            if (n >= 1) {
                FF_WAIT_TOK(par);
                Tok p = par->head();
                if (par->head_time() + 1 > tin) tin = par->head_time() + 1;
                if (!p.is_stop() || p.level() != n - 1)
                    bad(st, "coordinate stop " + str_(c) + " closes a fibre but the parent's next token is " + repr(p));
            }
            EMIT(c, tin);
            crd->pop(t);
            if (n >= 1) par->pop(t);
            holding = false;
        }
        clock = st.clock = t;
        st.busy += 1;
    }
}

#undef EMIT

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(locate, build);
}  // namespace ff
