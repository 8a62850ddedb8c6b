// level_scan: one reference in, that fibre's coordinates and child references out, with stop promotion
// (fuseflow/sim/ops/level_scan.py, line by line). A compressed level's tokens leave through the output
// pipeline of its latency (the registry's op_latency, bound as the node's latency).
#include "../engine.hpp"

namespace ff {
namespace {

// E: the emitter type (a Stage, or Together at latency 1), so its room and push are inlined without a dispatch
template <class E>
Proc scan(Node& st, E* out) {
    const Params& p = st.params;
    Channel* inp = st.in("ref");
    bool dense = p.get_str("format", "compressed") == "dense";
    i64 bounds = dense ? 1 : (p.get_int("bounds_latency", 0) ? p.get_int("bounds_latency", 0) : 1);
    i64 last_pop = -bounds;
    i64 dim = 0, nseg = 0;
    std::span<const i64> seg, crd;
    if (dense) {
        dim = p.get_int("dim");
    } else {
        seg = p.ivec("seg");
        crd = p.ivec("crd");
        nseg = (i64)seg.size() - 1;
    }
    const i64* crdp = crd.data();
    i64 clock = -1, reads = 0, r, t = 0;
    Tok pair[2];
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        i64 lo, hi;
        if (tok.is_str()) {
            if (tok.is_D() || tok.is_stop()) {
                Tok out_tok = tok.is_D() ? TOK_D : Tok::Stop(tok.level() + 1);
                FF_WAIT_ROOM(r, out);
                t = tin >= r ? tin : r;
                st.blocked += t - tin;
                inp->pop(t);
                last_pop = t;
                pair[0] = pair[1] = out_tok;
                out->push(pair, t);
                clock = st.clock = t;
                st.busy += 1;
                if (tok.is_D()) {
                    st.mem_reads += reads;
                    co_return;
                }
                continue;
            }
            if (!tok.is_N()) bad(st, "unexpected token " + repr(tok) + " on input ref");
            lo = hi = 0;
        } else if (dense) {
            lo = tok.i * dim;
            hi = lo + dim;
        } else {
            if (!(0 <= tok.i && tok.i < nseg))
                bad(st, "reference " + std::to_string(tok.i) + " outside the level's " + std::to_string(nseg) +
                            " fibres");
            lo = seg[tok.i];
            hi = seg[tok.i + 1];
            reads += 2 + hi - lo;
            if (bounds > 1) tin = std::max({tin, inp->head_time() + bounds, last_pop + bounds});
        }
        if (lo < hi) {
            for (i64 q = lo; q < hi; ++q) {
                FF_WAIT_ROOM(r, out);
                t = tin >= r ? tin : r;
                st.blocked += t - tin;
                if (q == lo) {
                    inp->pop(t);
                    last_pop = t;
                }
                pair[0] = Tok::Int(dense ? q - lo : crdp[q]);
                pair[1] = Tok::Int(q);
                out->push(pair, t);
                st.busy += 1;
                tin = t + 1;
            }
            clock = st.clock = t;
        } else {
            inp->pop(tin);
            last_pop = tin;
            clock = st.clock = tin;
            st.busy += 1;
        }
        // fibre end: look at the next input for stop promotion
        FF_WAIT_TOK(inp);
        Tok nxt = inp->head();
        tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        bool promote = nxt.is_stop();
        Tok out_tok = promote ? Tok::Stop(nxt.level() + 1) : Tok::Stop(0);
        FF_WAIT_ROOM(r, out);
        t = tin >= r ? tin : r;
        st.blocked += t - tin;
        if (promote) {
            inp->pop(t);
            last_pop = t;
        }
        pair[0] = pair[1] = out_tok;
        out->push(pair, t);
        clock = st.clock = t;
        st.busy += 1;
    }
}

void build(Node& st, Built& b) {
    Emitter* out = make_emitter(st, b, {st.out("crd"), st.out("ref")}, st.latency);
    if (out->ekind == Emitter::E_STAGE) b.procs.insert(b.procs.begin(), scan(st, static_cast<Stage*>(out)));
    else b.procs.insert(b.procs.begin(), scan(st, static_cast<Together*>(out)));
}

}  // namespace
FF_REGISTER_OP(level_scan, build);
}  // namespace ff
