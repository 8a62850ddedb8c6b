// array: loads values; reference r gives vals[r], N gives 0; stops and D pass through
// (fuseflow/sim/ops/array.py). A value leaves op_latency cycles after its firing, through the output pipeline.
#include "../engine.hpp"

namespace ff {
namespace {

// E: the emitter type (the pipeline's Stage), so its room and push are inlined without a dispatch
template <class E>
Proc load(Node& st, E* out) {
    Channel* inp = st.in("ref");
    bool fixed = st.env->fixed;
    const PVal* pv = st.params.find("vals");
    bool int_vals = fixed || (pv && pv->t == PVal::IVEC);
    std::span<const i64> ivals = st.params.ivec("vals");
    std::span<const double> fvals = int_vals ? std::span<const double>() : st.params.fvec("vals");
    i64 nvals = (i64)(int_vals ? ivals.size() : fvals.size());
    // block values: bound into the run's block arena as entries _bvals_base .. + _bvals_n - 1
    bool blocks = st.params.has("_bvals_base");
    i64 bbase = st.params.get_int("_bvals_base", 0);
    if (blocks) nvals = st.params.get_int("_bvals_n", 0);
    Tok zero = st.env->zero;
    const i64* ip = ivals.data();
    const double* fp = fvals.data();
    i64 clock = -1, reads = 0, r;
    for (;;) {
        FF_WAIT_TOK(inp);
        Tok tok = inp->head();
        i64 tin = inp->head_time() + 1;
        if (tin <= clock) tin = clock + 1;
        Tok v;
        if (tok.is_str()) {
            if (tok.is_N()) v = zero;
            else if (tok.is_D() || tok.is_stop()) v = tok;
            else bad(st, "unexpected token " + repr(tok));
        } else {
            if (!(0 <= tok.i && tok.i < nvals))
                bad(st, "reference " + std::to_string(tok.i) + " outside the " + std::to_string(nvals) + " values");
            v = blocks ? Tok::Blk(bbase + tok.i) : int_vals ? Tok::Int(ip[tok.i]) : Tok::Flt(fp[tok.i]);
            reads += 1;
        }
        FF_WAIT_ROOM(r, out);
        i64 t = tin >= r ? tin : r;
        st.blocked += t - tin;
        inp->pop(t);
        out->push(&v, t);
        clock = st.clock = t;
        st.busy += 1;
        if (v.is_D()) {
            st.mem_reads += reads;
            co_return;
        }
    }
}

void build(Node& st, Built& b) {
    Emitter* out = make_pipeline(st, b, {st.out("val")}, st.latency);
    b.procs.insert(b.procs.begin(), load(st, static_cast<Stage*>(out)));
}

}  // namespace
FF_REGISTER_OP(array, build);
}  // namespace ff
