// serialize: merges lanes back into one stream in the original order, by the lanes' key coordinates
// (fuseflow/sim/ops/serialize.py, line by line; its wait_heads and fire helpers are written out as macros).
//
// Each lane's key stream holds the coordinates of the parallelized level, in fibres (c.., S0, .., D; every lane
// has the same stops). The payload of a lane holds one unit per key coordinate: one token at depth 0, at depth
// d >= 1 the fibre below the key, closed by a stop of level >= d-1. Within each key fibre the op takes the lane
// with the smallest head coordinate, copies its unit and renumbers the closing stop.
#include "../engine.hpp"

namespace ff {
namespace {

// tin = wait_heads(chans, clock): the first cycle (> clock) every channel's head is visible
#define WAIT_HEADS(tin, chans, clock)                       \
    do {                                                    \
        (tin) = (clock) + 1;                                \
        for (Channel* ff_ch_ : (chans)) {                   \
            FF_WAIT_TOK(ff_ch_);                            \
            i64 ff_v_ = ff_ch_->head_time() + 1;            \
            if (ff_v_ > (tin)) (tin) = ff_v_;               \
        }                                                   \
    } while (0)

// tin = wait_heads([ch], clock)
#define WAIT_HEAD(tin, ch, clock)                           \
    do {                                                    \
        (tin) = (clock) + 1;                                \
        FF_WAIT_TOK(ch);                                    \
        i64 ff_v_ = (ch)->head_time() + 1;                  \
        if (ff_v_ > (tin)) (tin) = ff_v_;                   \
    } while (0)

// t = fire(tin): the cycle of a firing that writes out, no earlier than tin
#define FIRE(t, tin)                                        \
    do {                                                    \
        FF_WAIT_ROOM(r, out);                               \
        (t) = (tin) >= r ? (tin) : r;                       \
        st.blocked += (t) - (tin);                          \
    } while (0)

// the stop name as an f-string prints it (no quotes)
std::string str_stop(int level) { return "S" + std::to_string(level); }

Proc run(Node& st) {
    int n = (int)st.params.get_int("lanes");
    int depth = (int)st.params.get_int("depth");
    std::vector<Channel*> keys, pays;
    for (int i = 0; i < n; ++i) keys.push_back(st.in("key" + std::to_string(i)));
    for (int i = 0; i < n; ++i) pays.push_back(st.in("in" + std::to_string(i)));
    Out* out = st.out("out");
    i64 clock = -1, r, t, tin, t2;
    bool copied = false;                   // a unit of depth >= 1 was copied in this key fibre
    std::vector<bool> had(n, false);       // lane i's unit(s) in this key fibre (its closing stop is popped)
    std::vector<Tok> heads(n), ptoks(n);

    for (;;) {
        WAIT_HEADS(tin, keys, clock);
        for (int i = 0; i < n; ++i) heads[i] = keys[i]->head();
        int lane = -1;                     // min(live, key=heads[i]): the first smallest data head
        for (int i = 0; i < n; ++i)
            if (heads[i].is_data() && (lane < 0 || tok_lt(heads[i], heads[lane]))) lane = i;
        if (lane >= 0) {
            if (depth == 0) {
                WAIT_HEAD(t2, pays[lane], clock);
                tin = std::max(tin, t2);
                Tok tok = pays[lane]->head();
                if (tok.is_str() && !tok.is_N())
                    bad(st, "lane " + std::to_string(lane) + " has key " + repr(heads[lane]) + " but payload " +
                                repr(tok));
                FIRE(t, tin);
                keys[lane]->pop(t);
                pays[lane]->pop(t);
                out->push1(tok, t);
                clock = st.clock = t;
                st.busy += 1;
                continue;
            }
            // depth >= 1: select the lane (no output), then copy its unit
            keys[lane]->pop(tin);
            clock = st.clock = tin;
            st.busy += 1;
            copied = true;
            had[lane] = true;
            Channel* pay = pays[lane];
            for (;;) {
                WAIT_HEAD(tin, pay, clock);
                Tok tok = pay->head();
                if (tok.is_stop() && tok.level() >= depth - 1) {
                    WAIT_HEADS(t2, keys, clock);
                    tin = std::max(tin, t2);
                    Tok khead = keys[0]->head(), own = keys[lane]->head();
                    bool last = true;
                    for (Channel* k : keys)
                        if (k->head().is_data()) last = false;
                    if (last && !khead.is_stop())
                        bad(st, "lane " + std::to_string(lane) + "'s unit ends where the keys hold " + repr(khead));
                    if (tok.level() > (own.is_stop() ? depth + own.level() : depth - 1))
                        bad(st, "lane " + std::to_string(lane) + " closes a unit with " + str_stop(tok.level()) +
                                    " at depth " + std::to_string(depth));
                    tok = last ? Tok::Stop(depth + khead.level()) : Tok::Stop(depth - 1);
                    FIRE(t, tin);
                    pay->pop(t);
                    out->push1(tok, t);
                    clock = st.clock = t;
                    st.busy += 1;
                    break;
                }
                if (tok.is_D()) bad(st, "lane " + std::to_string(lane) + "'s payload ends inside a unit");
                FIRE(t, tin);
                pay->pop(t);
                out->push1(tok, t);
                clock = st.clock = t;
                st.busy += 1;
            }
            continue;
        }
        bool all_d = true;
        for (const Tok& h : heads)
            if (!h.is_D()) all_d = false;
        if (all_d) break;
        // every key is at the stop closing its fibre
        for (const Tok& h : heads)
            if (!tok_eq(h, heads[0]) || !h.is_stop())
                bad(st, "key heads " + repr_list(heads) + ": expected the same stop on every lane");
        Tok stop = Tok::Stop(depth + heads[0].level());
        WAIT_HEADS(t2, pays, clock);
        tin = std::max(tin, t2);
        for (int i = 0; i < n; ++i) ptoks[i] = pays[i]->head();
        bool emit = depth == 0 || !copied;
        for (int i = 0; i < n; ++i)
            if (!had[i] && !tok_eq(ptoks[i], stop))
                bad(st, "lane " + std::to_string(i) + "'s payload has " + repr(ptoks[i]) +
                            " where its key fibre ends (expected " + str_stop(stop.level()) + ")");
        if (emit) FIRE(t, tin);
        else t = tin;
        for (Channel* k : keys) k->pop(t);
        for (int i = 0; i < n; ++i)
            if (!had[i]) pays[i]->pop(t);
        if (emit) out->push1(stop, t);
        clock = st.clock = t;
        st.busy += 1;
        copied = false;
        had.assign(n, false);
    }
    // D on every key and payload
    std::vector<Channel*> all = keys;
    all.insert(all.end(), pays.begin(), pays.end());
    WAIT_HEADS(tin, all, clock);
    for (Channel* ch : all)
        if (!ch->head().is_D()) bad(st, "expected D on every input, got " + repr(ch->head()) + " on " + ch->name);
    FIRE(t, tin);
    for (Channel* ch : all) ch->pop(t);
    out->push1(TOK_D, t);
    clock = st.clock = t;
    st.busy += 1;
}

void build(Node& st, Built& b) { b.procs.push_back(run(st)); }

}  // namespace
FF_REGISTER_OP(serialize, build);
}  // namespace ff
