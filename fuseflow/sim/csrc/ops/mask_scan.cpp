// mask_scan: a row coordinate in, the columns its coordinate mask keeps out (refs r*dim + c), with stop
// promotion; the timing of a dense level_scan whose fibre holds only the kept columns
// (fuseflow/sim/ops/mask_scan.py, line by line).
//
// The pattern is not read here: fuseflow/sim/compiled.py binds the kept columns of every row as the Python model
// reads them (fuseflow.samml.masks.row_runs: the runs of row i are _runs[2k], _runs[2k + 1] for
// _runs_ptr[i] <= k < _runs_ptr[i + 1]), and check_mask_scan's error, if any, as _error (raised where the Python
// model raises it: when the process first runs).
#include "../engine.hpp"

namespace ff {
namespace {

// fire(tin): the cycle (>= tin) at which both outputs have room (yields the first lacking one)
#define FIRE(tin)                                                             \
    do {                                                                      \
        for (;;) {                                                            \
            r1 = ocrd->room_();                                               \
            r2 = oref->room_();                                               \
            if (r1 != NONE && r2 != NONE) break;                              \
            co_yield static_cast<Emitter*>(r1 == NONE ? ocrd : oref);        \
        }                                                                     \
        t = std::max({(tin), r1, r2});                                        \
        st.blocked += t - (tin);                                              \
    } while (0)

Proc run(Node& st) {
    const Params& p = st.params;
    if (const PVal* e = p.find("_error")) throw SimError(e->items[0].s, e->items[1].s, e->items[2].s);
    i64 rows = p.get_int("rows"), dim = p.get_int("dim");
    std::span<const i64> runs_ptr = p.ivec("_runs_ptr");
    std::span<const i64> runs = p.ivec("_runs");
    Channel* inp = st.in("ref");
    Out *ocrd = st.out("crd"), *oref = st.out("ref");
    i64 clock = -1, r1, r2, t = 0;
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = std::max(inp->head_time() + 1, clock + 1);
        i64 k0 = 0, k1 = 0;    // the row's runs: cols = [c for lo, hi in runs[k0:k1] for c in range(lo, hi)]
        if (tok.is_str()) {
            if (tok.is_D() || tok.is_stop()) {
                Tok out_tok = tok.is_D() ? TOK_D : Tok::Stop(tok.level() + 1);
                FIRE(tin);
                inp->pop(t);
                ocrd->push1(out_tok, t);
                oref->push1(out_tok, t);
                clock = st.clock = t;
                st.busy += 1;
                if (tok.is_D()) co_return;
                continue;
            }
            if (!tok.is_N()) bad(st, "unexpected token " + repr(tok) + " on input ref");
        } else {
            if (!(0 <= tok.num() && tok.num() < rows))
                bad(st, "row " + repr(tok) + " outside the mask's " + std::to_string(rows) + " rows");
            // (a float row, never in a graph, is a TypeError in row_runs)
            if (tok.k != K_INT) bad(st, "row " + repr(tok) + " is not an integer");
            k0 = runs_ptr[tok.i];
            k1 = runs_ptr[tok.i + 1];
        }
        // the firing that takes the row emits its first kept column
        bool first = true;
        for (i64 k = k0; k < k1; ++k) {
            for (i64 c = runs[2 * k]; c < runs[2 * k + 1]; ++c) {
                FIRE(tin);
                if (first) inp->pop(t);
                first = false;
                ocrd->push1(Tok::Int(c), t);
                oref->push1(Tok::Int(tok.i * dim + c), t);
                st.busy += 1;
                tin = t + 1;
            }
        }
        if (!first) {
            clock = st.clock = t;
        } else {
            inp->pop(tin);
            clock = st.clock = tin;
            st.busy += 1;
        }
        // fibre end: stop promotion from the next input
        FF_WAIT_TOK(inp);
        Tok nxt = inp->head();
        tin = std::max(inp->head_time() + 1, clock + 1);
        bool promote = nxt.is_stop();
        Tok out_tok = promote ? Tok::Stop(nxt.level() + 1) : Tok::Stop(0);
        FIRE(tin);
        if (promote) inp->pop(t);
        ocrd->push1(out_tok, t);
        oref->push1(out_tok, t);
        clock = st.clock = t;
        st.busy += 1;
    }
}

#undef FIRE

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(mask_scan, build);
}  // namespace ff
