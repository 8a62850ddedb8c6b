// intersect: co-iterates n fibres and emits the coordinates present in all of them
// (fuseflow/sim/ops/intersect.py: the two-input op with its look-ahead, and the ring rule from arity 3).
// The look-ahead's channel depth is the registry's input_depth_for at these params, bound as _input_depth.
#include "../engine.hpp"

namespace ff {
namespace {

// _second_visible(crd, ref, t): whether the second coordinate and the second reference are both visible at t
#define SECOND_VISIBLE(res, crd, ref, t)                                  \
    do {                                                                  \
        FF_WAIT_N(crd, 2);                                                \
        if ((crd)->time_at(1) + 1 > (t)) {                                  \
            res = false;                                                  \
        } else {                                                          \
            FF_WAIT_N(ref, 2);                                            \
            res = (ref)->time_at(1) + 1 <= (t);                             \
        }                                                                 \
    } while (0)

Proc run2(Node& st) {
    Channel *c0 = st.in("crd0"), *c1 = st.in("crd1"), *r0 = st.in("ref0"), *r1 = st.in("ref1");
    Out *ocrd = st.out("crd"), *or0 = st.out("ref0"), *or1 = st.out("ref1");
    std::vector<Out*> allouts{ocrd, or0, or1};
    i64 need = st.params.get_int("_input_depth", 0);
    bool look = true;
    for (Channel* ch : {c0, c1, r0, r1})
        if (!(ch->depth == 0 || ch->depth >= need)) look = false;
    if (need == 0) look = false;
    i64 clock = -1, r, t;
    for (;;) {
        FF_WAIT_TOK(c0);
        FF_WAIT_TOK(r0);
        FF_WAIT_TOK(c1);
        FF_WAIT_TOK(r1);
        i64 tin = clock + 1;
        tin = std::max({tin, c0->head_time() + 1, c1->head_time() + 1, r0->head_time() + 1, r1->head_time() + 1});
        Tok a = c0->head(), b = c1->head();
        bool sa = a.is_str(), sb = b.is_str();
        if (!sa && !sb) {
            if (tok_eq(a, b)) {
                FF_WAIT_ROOM_ALL(r, allouts);
                t = tin >= r ? tin : r;
                st.blocked += t - tin;
                ocrd->push1(a, t);
                c0->pop(t);
                c1->pop(t);
                or0->push1(r0->pop(t), t);
                or1->push1(r1->pop(t), t);
            } else if (look) {
                // the lower input's next coordinate decides whether the other one's head can match
                Channel *lo, *lor, *hi, *hir;
                Tok top;
                if (tok_lt(a, b)) { lo = c0; lor = r0; hi = c1; hir = r1; top = b; }
                else { lo = c1; lor = r1; hi = c0; hir = r0; top = a; }
                FF_WAIT_N(lo, 2);
                t = lo->time_at(1) + 1;
                if (t < tin) t = tin;
                Tok n = lo->tok_at(1);
                bool have_n = true;
                if (!n.is_str() && tok_lt(n, top)) {
                    // the second is below the largest head too: pop it as well when its reference is there
                    bool two;
                    SECOND_VISIBLE(two, lo, lor, t);
                    lo->pop(t);
                    lor->pop(t);
                    if (two) {
                        lo->pop(t);
                        lor->pop(t);
                        FF_WAIT_TOK(lo);
                        if (lo->time_at(0) < t) n = lo->tok_at(0);
                        else have_n = false;
                    }
                } else {
                    lo->pop(t);
                    lor->pop(t);
                }
                if (have_n && (n.is_str() || tok_lt(top, n))) {
                    hi->pop(t);
                    hir->pop(t);
                }
            } else {
                t = tin;
                if (tok_lt(a, b)) {
                    c0->pop(t);
                    r0->pop(t);
                } else {
                    c1->pop(t);
                    r1->pop(t);
                }
            }
        } else if (sa && sb) {
            if (!tok_eq(a, b) || (!a.is_D() && !a.is_stop()))
                bad(st, "inputs end their fibres differently: " + repr_list({a, b}));
            FF_WAIT_ROOM_ALL(r, allouts);
            t = tin >= r ? tin : r;
            st.blocked += t - tin;
            ocrd->push1(a, t);
            c0->pop(t);
            c1->pop(t);
            r0->pop(t);
            r1->pop(t);
            or0->push1(a, t);
            or1->push1(a, t);
            if (a.is_D()) {
                st.clock = t;
                st.busy += 1;
                co_return;
            }
        } else {
            if (a.is_D() || b.is_D()) bad(st, "one input is done while another is not: " + repr_list({a, b}));
            t = tin;
            Channel* lo = sa ? c1 : c0;
            Channel* lor = sa ? r1 : r0;
            bool two = false;
            if (look) {
                // the other input has ended its fibre: its next coordinate goes too when it is there
                SECOND_VISIBLE(two, lo, lor, t);
                two = two && !lo->tok_at(1).is_str();
            }
            lo->pop(t);
            lor->pop(t);
            if (two) {
                lo->pop(t);
                lor->pop(t);
            }
        }
        clock = st.clock = t;
        st.busy += 1;
    }
}

Proc run_n(Node& st) {
    JoinerPorts jp = joiner_ports(st);
    int n = jp.n;
    std::vector<Channel*>&crds = jp.crds, &refs = jp.refs, &chans = jp.chans;
    std::vector<Out*>&orefs = jp.orefs, &allouts = jp.allouts;
    Out* ocrd = jp.ocrd;
    std::vector<Tok> heads(n);
    std::vector<char> low(n);
    i64 clock = -1, r, t;
    for (;;) {
        i64 tin;
        FF_WAIT_HEADS(tin, chans, clock);
        int nstr = 0;
        for (int i = 0; i < n; ++i) {
            heads[i] = crds[i]->head();
            nstr += heads[i].is_str();
        }
        if (nstr == 0) {
            Tok mx = heads[0], mn = heads[0];
            for (int i = 1; i < n; ++i) {
                if (tok_lt(mx, heads[i])) mx = heads[i];
                if (tok_lt(heads[i], mn)) mn = heads[i];
            }
            if (tok_eq(mn, mx)) {
                FF_WAIT_ROOM_ALL(r, allouts);
                t = std::max(tin, r);
                st.blocked += t - tin;
                ocrd->push1(mx, t);
                for (int i = 0; i < n; ++i) {
                    crds[i]->pop(t);
                    orefs[i]->push1(refs[i]->pop(t), t);
                }
            } else {
                // an input pops when below a ring neighbour (at arity 3 every other input is one)
                t = tin;
                for (int i = 0; i < n; ++i)
                    low[i] = tok_lt(heads[i], heads[(i + n - 1) % n]) || tok_lt(heads[i], heads[(i + 1) % n]);
                for (int i = 0; i < n; ++i)
                    if (low[i]) {
                        crds[i]->pop(t);
                        refs[i]->pop(t);
                    }
            }
        } else if (nstr == n) {
            Tok h0 = heads[0];
            bool differ = false;
            for (int i = 0; i < n; ++i)
                if (!tok_eq(heads[i], h0)) differ = true;
            if (differ || (!h0.is_D() && !h0.is_stop()))
                bad(st, "inputs end their fibres differently: " + repr_list(heads));
            FF_WAIT_ROOM_ALL(r, allouts);
            t = std::max(tin, r);
            st.blocked += t - tin;
            ocrd->push1(h0, t);
            for (int i = 0; i < n; ++i) {
                crds[i]->pop(t);
                refs[i]->pop(t);
                orefs[i]->push1(h0, t);
            }
            if (h0.is_D()) {
                st.clock = t;
                st.busy += 1;
                co_return;
            }
        } else {
            for (int i = 0; i < n; ++i)
                if (heads[i].is_D()) bad(st, "one input is done while another is not: " + repr_list(heads));
            t = tin;
            for (int i = 0; i < n; ++i)
                if (!heads[i].is_str()) {
                    crds[i]->pop(t);
                    refs[i]->pop(t);
                }
        }
        clock = st.clock = t;
        st.busy += 1;
    }
}

void build(Node& st, Built& b) {
    if (st.params.get_int("arity") == 2) b.procs.push_back(run2(st));
    else b.procs.push_back(run_n(st));
}

}  // namespace
FF_REGISTER_OP(intersect, build);
}  // namespace ff
