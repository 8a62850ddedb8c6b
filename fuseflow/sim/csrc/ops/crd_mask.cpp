// crd_mask: filters the coordinates (and aligned references) of each fibre by a coordinate mask on (row, c)
// (fuseflow/sim/ops/crd_mask.py, line by line). The row of each inner fibre is the outer stream's token; structure
// and timing as crd_hold: one firing per inner token (kept or dropped), plus one for an outer stop whose inner
// partner (S_n, n >= 1) already closed the fibre.
//
// The pattern is not read here: fuseflow/sim/compiled.py binds the Python model's table
// (fuseflow.samml.masks.dense_mask) row by row as runs of kept columns (keep[r, x] is true iff
// _runs[2k] <= x < _runs[2k + 1] for some _runs_ptr[r] <= k < _runs_ptr[r + 1]), and check_mask_scan's error, if
// any, as _error (raised where the Python model raises it: when the process first runs).
#include "../engine.hpp"

namespace ff {
namespace {

// Python's f"{tok}" (str, not repr: a control token without quotes)
std::string str_(const Tok& t) {
    std::string s = repr(t);
    return t.is_str() ? s.substr(1, s.size() - 2) : s;
}

// keep[r, x]: the runs of row r are ascending and disjoint; x is kept iff the last run starting at or before x
// ends after it
bool kept(std::span<const i64> runs_ptr, std::span<const i64> runs, i64 r, i64 x) {
    i64 lo = runs_ptr[r], hi = runs_ptr[r + 1];    // the first run starting after x is in [lo, hi]
    while (lo < hi) {
        i64 mid = (lo + hi) / 2;
        if (runs[2 * mid] <= x) lo = mid + 1;
        else hi = mid;
    }
    return lo > runs_ptr[r] && x < runs[2 * (lo - 1) + 1];
}

Proc run(Node& st) {
    const Params& p = st.params;
    if (const PVal* e = p.find("_error")) throw SimError(e->items[0].s, e->items[1].s, e->items[2].s);
    i64 rows = p.get_int("rows"), dim = p.get_int("dim");
    std::span<const i64> runs_ptr = p.ivec("_runs_ptr");
    std::span<const i64> runs = p.ivec("_runs");
    int n = (int)p.get_int("arity");
    Channel *io = st.in("outer"), *ic = st.in("crd");
    std::vector<Channel*> irefs;
    Out* oc = st.out("crd");
    std::vector<Out*> orefs;
    for (int i = 0; i < n; ++i) {
        irefs.push_back(st.in("ref" + std::to_string(i)));
        orefs.push_back(st.out("ref" + std::to_string(i)));
    }
    std::vector<Out*> every{oc};
    every.insert(every.end(), orefs.begin(), orefs.end());
    std::vector<Channel*> inner{ic};
    inner.insert(inner.end(), irefs.begin(), irefs.end());
    std::vector<Tok> heads(n);
    bool closed = false;
    i64 clock = -1;
    for (;;) {
        FF_WAIT_TOK(io);
        Tok r = io->head();
        i64 t = std::max(clock + 1, io->head_time() + 1);
        if (closed && r.is_stop()) {
            io->pop(t);      // the partner of an inner stop that closed this row's fibre
            closed = false;
            clock = st.clock = t;
            st.busy += 1;
            continue;
        }
        for (Channel* ch : inner) {
            FF_WAIT_TOK(ch);
            t = std::max(t, ch->head_time() + 1);
        }
        Tok x = ic->head();
        for (int i = 0; i < n; ++i) heads[i] = irefs[i]->head();
        bool pop_outer = true, push = true;
        if (!r.is_str() || r.is_N()) {
            if (!x.is_str()) {
                if (r.is_N() || !(0 <= r.num() && r.num() < rows))
                    bad(st, "row " + repr(r) + " outside the mask's " + std::to_string(rows) + " rows");
                if (!(0 <= x.num() && x.num() < dim))
                    bad(st, "coordinate " + repr(x) + " outside the mask's " + std::to_string(dim) + " columns");
                // (a float row or coordinate, never in a graph, is an IndexError in keep[r, x])
                if (r.k != K_INT || x.k != K_INT)
                    bad(st, "row " + repr(r) + " and coordinate " + repr(x) + " must be integers");
                push = kept(runs_ptr, runs, r.i, x.i);
                pop_outer = false;
            } else if (x.is_stop()) {
                closed = x.level() != 0;
            } else {
                bad(st, "row " + str_(r) + " meets inner " + repr(x));
            }
        } else if (r.is_stop()) {
            Tok want = Tok::Stop(r.level() + 1);
            if (!tok_eq(x, want))
                bad(st, "outer " + str_(r) + " meets inner " + repr(x) + " (expected " + str_(want) + ")");
        } else if (r.is_D()) {
            if (!x.is_D()) bad(st, "outer is done but inner has " + repr(x));
        } else {
            bad(st, "unexpected outer token " + repr(r));
        }
        if (x.is_str()) {
            for (const Tok& h : heads)
                if (!tok_eq(h, x)) bad(st, "references " + repr(h) + " not aligned with coordinate token " + repr(x));
        }
        if (push) {
            FF_FIRE_AT_ALL(t, t, every);
        }
        for (Channel* ch : inner) ch->pop(t);
        if (pop_outer) io->pop(t);
        if (push) {
            oc->push1(x, t);
            for (int i = 0; i < n; ++i) orefs[i]->push1(heads[i], t);
        }
        clock = st.clock = t;
        st.busy += 1;
        if (x.is_D()) co_return;
    }
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(crd_mask, build);
}  // namespace ff
