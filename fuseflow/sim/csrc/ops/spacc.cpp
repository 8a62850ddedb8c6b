// spacc: sparse accumulator. Merges every entry of a group into one sorted sub-tree
// (fuseflow/sim/ops/spacc.py, line by line: _acc1 for order 1, _acc_nested for orders 2 and 3, and _emitter
// with its _emit written out where it is used).
//
// Double-buffered: two processes joined by an internal channel "<id>.banks" of depth 2 whose slots are the two
// banks. A bank token is a K_INT index into the banks the two processes share (Shared::banks); D passes behind
// the last bank outside the channel's credits. The merge op is the registry's REDUCE_MERGE (bound as _merge),
// the emit start delay E the registry's spacc_emit_delay(order) (bound as _emit_delay), and the parameters were
// checked by the registry's check_spacc when they were bound (fuseflow/sim/compiled.py).
#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "../engine.hpp"

namespace ff {
namespace {

// Python's dict keys: coordinates (numbers, 1 == 1.0) ordered as sorted() orders them; a map keeps the key
// first inserted, as a dict does
struct TokLess {
    bool operator()(const Tok& a, const Tok& b) const { return tok_lt(a, b); }
};
// prefix tuples, ordered as Python orders tuples
struct PrefixLess {
    bool operator()(const std::vector<Tok>& a, const std::vector<Tok>& b) const {
        return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(), TokLess());
    }
};

// map nodes from a free list: a bank's rows are built and freed once per group, so reusing their nodes saves a
// malloc and a free per accumulated entry
template <class T>
struct NodePool {
    using value_type = T;
    NodePool() = default;
    template <class U>
    NodePool(const NodePool<U>&) {}
    static void*& free_list() {
        static thread_local void* head = nullptr;
        return head;
    }
    T* allocate(size_t n) {
        void*& head = free_list();
        if (n == 1 && head) {
            void* p = head;
            head = *static_cast<void**>(p);
            return static_cast<T*>(p);
        }
        return static_cast<T*>(::operator new(n * (sizeof(T) < sizeof(void*) ? sizeof(void*) : sizeof(T))));
    }
    void deallocate(T* p, size_t n) {
        if (n != 1) {
            ::operator delete(p);
            return;
        }
        *reinterpret_cast<void**>(p) = free_list();
        free_list() = p;
    }
    template <class U>
    bool operator==(const NodePool<U>&) const { return true; }
    template <class U>
    bool operator!=(const NodePool<U>&) const { return false; }
};

using Row = std::map<Tok, Tok, TokLess, NodePool<std::pair<const Tok, Tok>>>;   // {j: value}
using Acc = std::map<std::vector<Tok>, Row, PrefixLess>;     // {prefix tuple: row} (order 1: the prefix ())

struct Bank {
    Acc acc;
    i64 base = 0;                                            // m - group
};

// len(set(acc_log) & set(log)), the cycles in which both sides fired, counted as the logs grow: each side fires
// in non-decreasing cycles, so a cycle below the other side's oldest pending one can never meet it and is
// dropped (memory stays bounded by how far the sides drift apart, not by the run's length). Should a side ever
// log out of order, everything is kept and counted with sets at the end, as the Python model does.
struct BothFired {
    Ring<i64> pending[2];
    i64 last[2] = {-1, -1};
    i64 both = 0;
    bool unordered = false;
    std::vector<i64> all[2];

    void add(int side, i64 t) {
        if (unordered) {
            all[side].push_back(t);
            return;
        }
        if (t < last[side]) {            // out of order: keep every cycle from now on (and what is pending)
            unordered = true;
            for (int s = 0; s < 2; ++s)
                while (!pending[s].empty()) all[s].push_back(pending[s].pop_front());
            all[side].push_back(t);
            return;
        }
        if (t == last[side]) return;     // a set holds each cycle once
        last[side] = t;
        pending[side].push_back(t);
        Ring<i64>&a = pending[0], &b = pending[1];
        while (!a.empty() && !b.empty()) {
            i64 x = a.front(), y = b.front();
            if (x == y) {
                ++both;
                a.pop_front();
                b.pop_front();
            } else if (x < y) {
                a.pop_front();
            } else {
                b.pop_front();
            }
        }
    }

    i64 count() {
        if (!unordered) return both;
        for (auto& v : all) {
            std::sort(v.begin(), v.end());
            v.erase(std::unique(v.begin(), v.end()), v.end());
        }
        std::vector<i64> common;
        std::set_intersection(all[0].begin(), all[0].end(), all[1].begin(), all[1].end(), std::back_inserter(common));
        return both + (i64)common.size();
    }
};

// what the two sides share: the banks handed over (by the index their token carries) and the cycles each side
// fired in (acc_log and the emitter's log of the Python model)
struct Shared {
    std::map<i64, Bank> banks;
    i64 next = 0;
    BothFired fired;
};

// stream_names(order): sub-tree streams, outermost first: crd_outer{order-2}, ..., crd_outer0, crd_inner
std::vector<std::string> stream_names(i64 order) {
    std::vector<std::string> names;
    for (i64 d = 0; d < order - 1; ++d) names.push_back("crd_outer" + std::to_string(order - 2 - d));
    names.push_back("crd_inner");
    return names;
}

// a stop token as an f-string shows it, without repr's quotes (Python's f"{STOPS[n]}")
std::string stop_str(i64 n) { return "S" + std::to_string(n); }

// _bank(bank_out): wait until a bank's credit is known; r = the cycle it is free from
#define WAIT_BANK(r) FF_WAIT_ROOM(r, bank_out)

// bank_out.push((acc, base), t): hand the accumulated bank over
static void hand_over(Shared& sh, Out* bank_out, Acc& acc, i64 base, i64 t) {
    i64 idx = sh.next++;
    Bank& b = sh.banks[idx];
    b.acc = std::move(acc);
    b.base = base;
    acc = Acc();
    bank_out->push1(Tok::Int(idx), t);
}

// _send_done(banks, t): the accumulate side took D in cycle t: pass it behind the last bank (no bank needed)
static void send_done(Channel* banks, i64 t) { banks->put_past_credits(TOK_D, t); }

// _merge(st, row, c, v, f, zero): merge value v into row[c] with the reduction f (the first value is kept as
// is; N is 0). A block in a row is held (BlockArena::hold) until the emitter has pushed it.
static void merge(Node& st, Row& row, const Tok& c, Tok v, BinFn f, const Env& env) {
    if (v.is_N()) {
        v = env.zero;
    } else if (v.is_str()) {
        bad(st, "coordinate " + repr(c) + " meets value token " + repr(v));
    }
    auto it = row.find(c);
    if (it != row.end()) {
        Tok nv = f(env, it->second, v);
        if (nv.is_blk()) env.arena->hold(nv);
        if (it->second.is_blk()) env.arena->release(it->second);
        it->second = nv;
    } else {
        row.emplace(c, v);
        if (v.is_blk()) env.arena->hold(v);
    }
    st.alu_ops += 1;
}

Proc acc1(Node& st, Channel* banks, Out* bank_out, std::shared_ptr<Shared> sh) {
    Channel *ic = st.in("crd_inner"), *iv = st.in("val");
    const Env& env = *st.env;
    BinFn f = env.binary(st.params.get_str("_merge"));
    i64 group = st.params.get_int("group", 1);
    auto log_t = [&sh](i64 t) { sh->fired.add(0, t); };
    Acc acc;
    Row* row = &acc[std::vector<Tok>{}];     // acc of order 1 is {j: value}: the row of the prefix ()
    bool have = false;                       // holds a bank (from the group's first firing to its closing stop)
    i64 clock = -1, r;
    for (;;) {
        FF_WAIT_TOK(ic);
        FF_WAIT_TOK(iv);
        Tok c = ic->head(), v = iv->head();
        i64 t = std::max({clock + 1, ic->head_time() + 1, iv->head_time() + 1});
        if (c.is_D()) {
            if (!v.is_D()) bad(st, "crd_inner has " + repr(c) + " but val has " + repr(v));
            if (!row->empty()) bad(st, "stream ends inside a group (no stop of level >= group closed it)");
            ic->pop(t);
            iv->pop(t);
            log_t(t);
            st.busy += 1;
            send_done(banks, t);
            co_return;
        }
        if (!have) {
            WAIT_BANK(r);
            if (r > t) t = r;
            have = true;
        }
        if (!c.is_str()) {
            merge(st, *row, c, v, f, env);
        } else if (!tok_eq(c, v)) {
            bad(st, "crd_inner has " + repr(c) + " but val has " + repr(v));
        } else if (c.is_stop()) {
            i64 m = c.level();
            if (m >= group) {
                // {(): acc} if acc else {}
                Acc bank;
                if (!row->empty()) bank = std::move(acc);
                hand_over(*sh, bank_out, bank, m - group, t);
                acc = Acc();
                row = &acc[std::vector<Tok>{}];
                have = false;
            }
        } else {
            bad(st, "unexpected token " + repr(c));
        }
        ic->pop(t);
        iv->pop(t);
        clock = t;
        log_t(t);
        st.busy += 1;
    }
}

// orders 2 and 3: a walk over the nested input streams (depth d reads stream d)
Proc acc_nested(Node& st, Channel* banks, Out* bank_out, std::shared_ptr<Shared> sh) {
    i64 n = st.params.get_int("order");
    i64 group = st.params.get_int("group", 1);
    std::vector<std::string> names = stream_names(n);
    std::vector<Channel*> chans;
    for (const std::string& x : names) chans.push_back(st.in(x));
    Channel* iv = st.in("val");
    Channel* ic = chans.back();
    const Env& env = *st.env;
    BinFn f = env.binary(st.params.get_str("_merge"));
    auto log_t = [&sh](i64 t) { sh->fired.add(0, t); };
    Acc acc;                                 // (a,) or (a, b) -> {j: value}
    bool have = false;                       // holds a bank (from the group's first firing to its closing stop)
    std::vector<Tok> prefix(n - 1);
    Row* row = nullptr;                      // acc row of the current prefix (while reading crd_inner)
    i64 d = 0;                               // the stream being read
    bool closed = false;  // stream d's next token is a stop whose fibre end a deeper stream already signalled
    i64 want = 0;                            // ... and its level
    i64 clock = -1, r, j = 0;
    // chans[1:] + [iv], chans + [iv]
    std::vector<Channel*> rest(chans.begin() + 1, chans.end()), every(chans);
    rest.push_back(iv);
    every.push_back(iv);
    std::vector<Channel*> deeper;
    for (;;) {
        if (d == n - 1) {
            // crd_inner and val: data accumulate into the current row; a stop ends the row
            FF_WAIT_TOK(ic);
            FF_WAIT_TOK(iv);
            Tok c = ic->head(), v = iv->head();
            i64 t = std::max({clock + 1, ic->head_time() + 1, iv->head_time() + 1});
            // (a bank is held: this fibre follows a coordinate of the group)
            ic->pop(t);
            iv->pop(t);
            clock = t;
            log_t(t);
            st.busy += 1;
            if (!c.is_str()) {
                merge(st, *row, c, v, f, env);
                continue;
            }
            if (!tok_eq(c, v) || !c.is_stop()) bad(st, "crd_inner has " + repr(c) + " but val has " + repr(v));
            j = c.level();
        } else {
            Channel* ch = chans[d];
            FF_WAIT_TOK(ch);
            Tok x = ch->head();
            i64 t = std::max(clock + 1, ch->head_time() + 1);
            if (x.is_D() && !closed) {
                if (d != 0) bad(st, names[d] + " ends inside a fibre of " + names[d - 1]);
                bool any = false;
                for (auto& kv : acc)
                    if (!kv.second.empty()) any = true;
                if (any) bad(st, "stream ends inside a group (no stop of level >= group closed it)");
                for (Channel* dch : rest) {
                    FF_WAIT_TOK(dch);
                    if (!dch->head().is_D())
                        bad(st, names[0] + " is done but another input has " + repr(dch->head()));
                    if (dch->head_time() + 1 > t) t = dch->head_time() + 1;
                }
                for (Channel* dch : every) dch->pop(t);
                log_t(t);
                st.busy += 1;
                send_done(banks, t);
                co_return;
            }
            if (!have) {
                WAIT_BANK(r);
                if (r > t) t = r;
                have = true;
            }
            if (closed) {
                if (!tok_eq(x, Tok::Stop((int)want)))
                    bad(st, names[d] + " has " + repr(x) + " where the fibre end needs " + stop_str(want));
                ch->pop(t);
                j = want;
                closed = false;
            } else if (!x.is_str()) {
                ch->pop(t);
                clock = t;
                log_t(t);
                st.busy += 1;
                prefix[d] = x;
                d += 1;
                if (d == n - 1) row = &acc[prefix];    // acc.setdefault(tuple(prefix), {})
                continue;
            } else if (x.is_stop()) {
                // an empty fibre on stream d: every deeper stream holds its bare stop, one level up per depth
                j = x.level();
                deeper.assign(chans.begin() + d + 1, chans.end());
                deeper.push_back(iv);
                for (size_t e = 0; e < deeper.size(); ++e) {
                    Channel* dch = deeper[e];
                    FF_WAIT_TOK(dch);
                    i64 need = j + std::min((i64)e + 1, n - 1 - d);
                    if (!tok_eq(dch->head(), Tok::Stop((int)need)))
                        bad(st, names[d] + " has the bare stop " + stop_str(j) + ", so " +
                                    (dch->consumer.empty() ? std::string("a deeper input") : dch->consumer) +
                                    " needs " + stop_str(need) + ", got " + repr(dch->head()));
                    if (dch->head_time() + 1 > t) t = dch->head_time() + 1;
                }
                ch->pop(t);
                for (Channel* dch : deeper) dch->pop(t);
            } else {
                bad(st, "unexpected token " + repr(x) + " on " + names[d]);
            }
            clock = t;
            log_t(t);
            st.busy += 1;
        }
        // the fibre of stream d ended with a stop of level j (taken in cycle clock)
        if (d) {
            d -= 1;
            if (j) {
                closed = true;
                want = j - 1;
            }
        } else if (j >= group) {
            hand_over(*sh, bank_out, acc, j - group, clock);
            have = false;
        }
    }
}


// the emit side: drains the banks in order, then emits D
Proc emitter(Node& st, Channel* banks, std::vector<Out*> ochans, std::shared_ptr<Shared> sh) {
    auto log_t = [&sh](i64 t) { sh->fired.add(1, t); };
    i64 clock = -1, t;
    i64 delay = st.params.get_int("_emit_delay");
    size_t n = ochans.size() - 1;
    // ochans[q:] for every q (first = ochans[q:], inner = ochans[n-1:], the fibre ends' ochans[q+1:])
    std::vector<std::vector<Out*>> from(n + 2);
    for (size_t q = 0; q <= n + 1; ++q) from[q].assign(ochans.begin() + std::min(q, n + 1), ochans.end());
    for (;;) {
        FF_WAIT_TOK(banks);
        Tok item = banks->head();
        i64 handed = banks->head_time();
        // a bank's first firing waits E cycles more (orders 2, 3: the RTL's row walker and memory read); D not
        i64 start = item.is_D() ? handed : handed + delay;
        if (clock < start) clock = start;
        if (item.is_D()) {
            FF_FIRE_AT_ALL(t, clock + 1, from[0]);
            banks->pop(t);
            for (Out* o : ochans) o->push1(TOK_D, t);
            log_t(t);
            st.busy += 1 - sh->fired.count();    // len(set(acc_log) & set(log))
            st.clock = t;
            co_return;
        }
        auto it = sh->banks.find(item.i);
        Bank bank = std::move(it->second);
        sh->banks.erase(it);
        // _emit(st, acc, base, ochans, clock, log): the accumulated sub-tree, the first firing after cycle
        // clock; the last firing (clock) carries the closing stops, S_(base + d) on stream d
        {
            std::vector<const std::vector<Tok>*> keys;       // sorted(p for p, r in acc.items() if r)
            for (auto& kv : bank.acc)
                if (!kv.second.empty()) keys.push_back(&kv.first);
            t = clock;
            size_t q = 0;                                    // the outermost stream that starts a new fibre
            for (size_t k = 0; k < keys.size(); ++k) {
                const std::vector<Tok>& p = *keys[k];
                const Row& row = bank.acc.find(p)->second;
                size_t idx = 0;
                for (auto& [jj, val] : row) {
                    FF_FIRE_AT_ALL(t, t + 1, (idx == 0 ? from[q] : from[n - 1]));
                    if (idx == 0)
                        for (size_t e = q; e + 1 < n; ++e) ochans[e]->push1(p[e], t);
                    ochans[n - 1]->push1(jj, t);
                    ochans[n]->push1(val, t);
                    if (val.is_blk()) st.env->arena->release(val);
                    log_t(t);
                    st.busy += 1;
                    ++idx;
                }
                if (k + 1 < keys.size()) {
                    const std::vector<Tok>& nxt = *keys[k + 1];
                    q = 0;
                    while (tok_eq(p[q], nxt[q])) q += 1;
                    // streams q+1 .. n-1 close a fibre: stream q+1 with S0, each deeper one a level higher
                    FF_FIRE_AT_ALL(t, t + 1, from[q + 1]);
                    for (size_t e = q + 1; e <= n; ++e)
                        ochans[e]->push1(Tok::Stop((int)(std::min(e, n - 1) - q - 1)), t);
                    log_t(t);
                    st.busy += 1;
                }
            }
            FF_FIRE_AT_ALL(t, t + 1, from[0]);
            for (size_t e = 0; e <= n; ++e) ochans[e]->push1(Tok::Stop((int)(bank.base + (i64)std::min(e, n - 1))), t);
            log_t(t);
            st.busy += 1;
            clock = t;
        }
        banks->pop(clock);
    }
}

void build(Node& st, Built& b) {
    if (!st.params.has("_emit_delay"))
        throw SimError("GraphError", "node " + st.id, "spacc's emit start delay is not bound (_emit_delay)");
    i64 order = st.params.get_int("order");
    std::vector<std::string> names = stream_names(order);
    std::vector<Out*> ochans;
    for (const std::string& x : names) ochans.push_back(st.out(x));
    ochans.push_back(st.out("val"));
    b.chans.push_back(std::make_unique<Channel>(st.id + ".banks", 2, st.id + " (emit side)"));
    Channel* banks = b.chans.back().get();
    b.outs.push_back(std::make_unique<Out>(banks->name, std::vector<Channel*>{banks}));
    Out* bank_out = b.outs.back().get();
    auto sh = std::make_shared<Shared>();
    if (order == 1) b.procs.push_back(acc1(st, banks, bank_out, sh));
    else b.procs.push_back(acc_nested(st, banks, bank_out, sh));
    b.procs.push_back(emitter(st, banks, ochans, sh));
}

}  // namespace
FF_REGISTER_OP(spacc, build);
}  // namespace ff
