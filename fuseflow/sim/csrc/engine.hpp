// The compiled simulator engine: the reference engine's DAM semantics (fuseflow/sim/engine.py) in C++.
//
// One definition stays in Python: op facts (ports, latencies, parameters) come from the registry through the
// node parameters that fuseflow/sim/compiled.py binds; this file only holds the mechanics of tokens,
// channels and processes. Each op model is a C++20 coroutine in ops/<op>.cpp written line by line after
// fuseflow/sim/ops/<op>.py, so the two can be read side by side; a process yields what it waits for (a
// channel without a token, or an output without room), exactly as the Python generators do.
#pragma once

#include <algorithm>
#include <coroutine>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ff {

using i64 = int64_t;
constexpr i64 NONE = -1;   // "not known yet" for room(): cycles are never negative
constexpr int MAX_STOP = 64;

// ---- tokens ---------------------------------------------------------------------------------------------
// The SAM convention of fuseflow/sim/tokens.py: data (an int, or a float value), S<n>, N, D, and R/S on
// repeat-signal streams. k >= K_STOP is a "control" token (a str in Python). K_BLK is a block value
// (fuseflow/sim/tokens.py Block): i indexes the run's BlockArena.
enum Kind : uint8_t { K_INT = 0, K_FLT = 1, K_BLK = 2, K_STOP = 3, K_N = 4, K_D = 5, K_R = 6, K_S = 7 };

struct Tok {
    union {
        i64 i;
        double f;
    };
    uint8_t k;

    Tok() : i(0), k(K_INT) {}
    static Tok Int(i64 v) { Tok t; t.i = v; t.k = K_INT; return t; }
    static Tok Flt(double v) { Tok t; t.f = v; t.k = K_FLT; return t; }
    static Tok Stop(int lvl) { Tok t; t.i = lvl; t.k = K_STOP; return t; }
    static Tok Ctl(Kind kind) { Tok t; t.i = 0; t.k = kind; return t; }
    static Tok Blk(i64 idx) { Tok t; t.i = idx; t.k = K_BLK; return t; }

    bool is_str() const { return k >= K_STOP; }        // Python: tok.__class__ is str
    bool is_data() const { return k < K_STOP; }
    bool is_stop() const { return k == K_STOP; }        // Python: tok in LEVEL
    bool is_N() const { return k == K_N; }
    bool is_D() const { return k == K_D; }
    bool is_blk() const { return k == K_BLK; }
    int level() const { return (int)i; }
    double num() const { return k == K_FLT ? f : (double)i; }
};

inline const Tok TOK_N = Tok::Ctl(K_N);
inline const Tok TOK_D = Tok::Ctl(K_D);
inline const Tok TOK_R = Tok::Ctl(K_R);
inline const Tok TOK_S = Tok::Ctl(K_S);

// Python's ==: control tokens by name, numbers by value (0 == 0.0)
inline bool tok_eq(const Tok& a, const Tok& b) {
    if (a.is_str() || b.is_str()) return a.k == b.k && (a.k != K_STOP || a.i == b.i);
    if (a.k == K_INT && b.k == K_INT) return a.i == b.i;
    return a.num() == b.num();
}
// Python's < on numbers (the callers have checked both are data)
inline bool tok_lt(const Tok& a, const Tok& b) {
    if (a.k == K_INT && b.k == K_INT) return a.i < b.i;
    return a.num() < b.num();
}

std::string repr(const Tok& t);                       // Python's repr of the token
std::string repr_list(const std::vector<Tok>& toks);  // Python's repr of a list of tokens

// ---- errors (re-raised in Python as fuseflow.errors classes) ---------------------------------------------
struct SimError : std::exception {
    std::string cls, what_, why;
    SimError(std::string c, std::string w, std::string y) : cls(std::move(c)), what_(std::move(w)), why(std::move(y)) {}
    const char* what() const noexcept override { return why.c_str(); }
};

// ---- a growable ring buffer (deque without allocation on the hot path) -----------------------------------
#define FF_INLINE inline __attribute__((always_inline))

template <class T>
struct Ring {
    std::vector<T> buf;
    T* data;                   // buf.data(), and its size - 1 (a power of two): no vector bookkeeping per token
    size_t head = 0, n = 0, mask = 3;

    Ring() : buf(4), data(buf.data()) {}
    Ring(const Ring& o) : buf(o.buf), data(buf.data()), head(o.head), n(o.n), mask(o.mask) {}
    Ring& operator=(const Ring& o) {
        buf = o.buf;
        data = buf.data();
        head = o.head, n = o.n, mask = o.mask;
        return *this;
    }
    FF_INLINE size_t size() const { return n; }
    FF_INLINE bool empty() const { return n == 0; }
    FF_INLINE T& operator[](size_t i) { return data[(head + i) & mask]; }
    FF_INLINE const T& operator[](size_t i) const { return data[(head + i) & mask]; }
    FF_INLINE T& front() { return data[head]; }
    FF_INLINE const T& front_c() const { return data[head]; }
    FF_INLINE void push_back(const T& v) {
        if (__builtin_expect(n > mask, 0)) grow();
        data[(head + n) & mask] = v;
        ++n;
    }
    FF_INLINE T pop_front() {
        T v = data[head];
        head = (head + 1) & mask;
        --n;
        return v;
    }
    void reserve(size_t cap) {           // room for cap elements without growing (only while empty)
        size_t c = buf.size();
        while (c < cap) c *= 2;
        buf.assign(c, T());
        data = buf.data();
        head = 0;
        mask = c - 1;
    }
    __attribute__((noinline)) void grow() {
        std::vector<T> nb(buf.size() * 2);
        for (size_t i = 0; i < n; ++i) nb[i] = (*this)[i];
        buf.swap(nb);
        data = buf.data();
        head = 0;
        mask = buf.size() - 1;
    }
};

struct Node;

// ---- what a process may wait for -------------------------------------------------------------------------
// A Channel (resumed once it holds a token), or a Waitable: an Emitter (resumed once room() != NONE) or a
// Pipeline (its drain); a Waitable says what it waits for in a deadlock report.
struct Waitable {
    virtual ~Waitable() = default;
    virtual std::string describe_wait(const Node& st) = 0;
};

// A FIFO between a producer port and one consumer port (fuseflow/sim/channel.py: Channel).
struct Slot {
    Tok tok;
    i64 t;                     // the cycle it was pushed (visible one cycle later)
};

struct Channel {
    std::string name, consumer;
    i64 depth;                 // 0: unbounded (run_op's sources)
    bool unbounded;
    // One ring holds both sides of the FIFO: the queued tokens with their push cycles at [head, head + n), and, on
    // a bounded channel, its free slots at [head + n, head + depth), each holding the cycle from which it may be
    // refilled (the reference's `credits`, oldest first). A push writes its token over the oldest credit; a pop
    // writes the freed slot's credit at head + depth, behind the others. The ring's size is a power of two >=
    // depth, so the bounded ring never grows.
    Ring<Slot> q;
    // The hot path without branches on `unbounded`: a pop writes (t + 1) & cmask at head + coff (a bounded
    // channel: its credit at head + depth; an unbounded one: 0 over the slot it frees, so every free slot of an
    // unbounded ring reads 0, the cycle it is free from, and its ring always keeps one free slot); cap is depth,
    // or no limit.
    i64 cap;
    size_t coff;
    i64 cmask_t;
    // The scheduler's wake-ups (run_kernel): a push flags the consumer node's processes to be looked at, a pop
    // the producer node's. A channel the scheduler did not wire (one inside a node) points at its own spare
    // word: only its node's processes touch it, and they are looked at again after each resume anyway.
    uint64_t* cwake;
    uint64_t cmask = 0;
    uint64_t* pwake;
    uint64_t pmask = 0;
    uint64_t spare = 0;

    Channel(std::string nm, i64 d, std::string cons) : name(std::move(nm)), consumer(std::move(cons)), depth(d),
                                                        unbounded(d == 0), cwake(&spare), pwake(&spare) {
        q.reserve((size_t)d + 1);           // a bounded ring never fills: n <= depth <= mask
        set_unbounded(unbounded);
    }
    void set_unbounded(bool u) {
        unbounded = u;
        cap = u ? INT64_MAX : depth;
        coff = u ? 0 : (size_t)depth;
        cmask_t = u ? 0 : -1;
    }
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;
    FF_INLINE bool empty() const { return q.empty(); }
    FF_INLINE size_t size() const { return q.size(); }
    FF_INLINE const Tok& head() const { return q.front_c().tok; }
    FF_INLINE i64 head_time() const { return q.front_c().t; }
    FF_INLINE const Tok& tok_at(size_t i) const { return q[i].tok; }    // Python: ch.toks[i]
    FF_INLINE i64 time_at(size_t i) const { return q[i].t; }            // Python: ch.times[i]
    FF_INLINE Tok pop(i64 t) {
        Slot* d = q.data;
        size_t h = q.head, m = q.mask;
        Tok v = d[h].tok;
        d[(h + coff) & m].t = (t + 1) & cmask_t;
        *pwake |= pmask;                    // 0 on an unbounded channel: nobody waits for its room
        q.head = (h + 1) & m;
        --q.n;
        return v;
    }
    // credits as the producer sees them (an unbounded channel always has a slot free from cycle 0)
    FF_INLINE bool has_credit() const { return (i64)q.n < cap; }
    FF_INLINE i64 credit0() const { return q.data[(q.head + q.n) & q.mask].t; }
    FF_INLINE void take_credit() {}         // the push writes over the oldest credit
    FF_INLINE void put(const Tok& tok, i64 t) {
        Slot& s = q.data[(q.head + q.n) & q.mask];
        s.tok = tok;
        s.t = t;
        if (__builtin_expect(++q.n > q.mask, 0)) q.grow();     // only an unbounded ring: keep a free slot
        *cwake |= cmask;
    }
    // a token that takes no slot (spacc's D, passed behind the last bank): nothing is written after it, and the
    // channel keeps no credits from here on (the ring may grow past depth)
    void put_past_credits(const Tok& tok, i64 t) {
        set_unbounded(true);
        put(tok, t);
    }
};

// Anything a firing writes: an Out, several written together, or an output pipeline's stage input.
// push() takes one token per output. Three kinds, dispatched on a tag (inlined on the hot path) rather than
// through virtual calls.
struct Emitter : Waitable {
    enum EKind : uint8_t { E_OUT, E_TOGETHER, E_STAGE };
    EKind ekind;
    explicit Emitter(EKind k) : ekind(k) {}
    FF_INLINE i64 room();                           // defined after Stage
    FF_INLINE void push(const Tok* toks, i64 t);
};

// A producer port: the channels of its stream (several when it fans out) (channel.py: Out).
struct Out : Emitter {
    std::string name;
    std::vector<Channel*> chans;
    i64 count = 0;
    i64 limit = 0;              // tokens must be below this (1 << width) when > 0: the width check
    std::vector<i64>* log = nullptr;   // trace: cycle of every push
    std::vector<Tok>* sent = nullptr;  // trace: every token pushed

    Out(std::string nm, std::vector<Channel*> cs) : Emitter(E_OUT), name(std::move(nm)), chans(std::move(cs)) {
        if (chans.size() == 1) single = chans[0];
        settle();
    }

    Channel* single = nullptr;  // the channel when the stream has one consumer (the common case)
    Channel* fast = nullptr;    // single, when no trace is kept: push1's common case
    void settle() { fast = log == nullptr ? single : nullptr; }

    FF_INLINE i64 room_() const {
        if (single) return single->has_credit() ? single->credit0() : NONE;
        i64 m = 0;
        for (const Channel* c : chans) {
            if (!c->has_credit()) return NONE;
            i64 x = c->credit0();
            if (x > m) m = x;
        }
        return m;
    }
    FF_INLINE i64 room() { return room_(); }
    FF_INLINE void push1(const Tok& tok, i64 t) {
        if (__builtin_expect(limit != 0, 0) && tok.k == K_INT && tok.i >= limit) too_wide(tok);
        ++count;
        if (__builtin_expect(fast != nullptr, 1)) {
            fast->put(tok, t);
            return;
        }
        push_rest(tok, t);
    }
    // push1 without a lone untraced channel: the trace, then every channel of the stream
    void push_rest(const Tok& tok, i64 t) {
        if (log != nullptr) { log->push_back(t); sent->push_back(tok); }
        for (Channel* c : chans) {
            c->take_credit();
            c->put(tok, t);
        }
    }
    FF_INLINE void push(const Tok* toks, i64 t) { push1(toks[0], t); }
    std::string describe_wait(const Node& st) override;
    [[noreturn]] void too_wide(const Tok& tok);
};

// ---- nodes -----------------------------------------------------------------------------------------------
struct PVal {
    enum T { NONE_, BOOL, INT, FLT, STR, IVEC, FVEC, OTHER } t = NONE_;
    i64 i = 0;
    double f = 0;
    std::string s;
    std::vector<i64> iv;       // a list of ints (or of numbers, truncated: check t)
    mutable std::vector<double> fv;    // a list of numbers (of an IVEC: filled when first asked for)
    // a NumPy array read in place (int64 for IVEC, float64 for FVEC) instead of iv / fv: the binding keeps it
    // alive for the run, and nodes bound to the same array share its storage
    const void* ext = nullptr;
    size_t ext_n = 0;
    std::vector<PVal> items;   // a list of other things (nested lists)
};

struct Params {
    std::unordered_map<std::string, PVal> m;
    const PVal* find(const std::string& k) const {
        auto it = m.find(k);
        return it == m.end() || it->second.t == PVal::NONE_ ? nullptr : &it->second;
    }
    bool has(const std::string& k) const { return find(k) != nullptr; }        // present and not None
    i64 get_int(const std::string& k, i64 dflt = 0) const {
        const PVal* v = find(k);
        return v ? (v->t == PVal::FLT ? (i64)v->f : v->i) : dflt;
    }
    double get_flt(const std::string& k, double dflt = 0) const {
        const PVal* v = find(k);
        return v ? (v->t == PVal::FLT ? v->f : (double)v->i) : dflt;
    }
    std::string get_str(const std::string& k, const std::string& dflt = "") const {
        const PVal* v = find(k);
        return v && v->t == PVal::STR ? v->s : dflt;
    }
    bool truthy(const std::string& k) const;    // Python: bool(params.get(k))
    std::span<const i64> ivec(const std::string& k) const;
    std::span<const double> fvec(const std::string& k) const;
};

struct Env;

struct Node {
    std::string id, op;
    Params params;
    i64 latency = 1;           // registry.op_latency for this node (bound in Python)
    Env* env = nullptr;
    i64 busy = 0, blocked = 0, alu_ops = 0, mem_reads = 0, mem_writes = 0, moved = 0, clock = -1;
    // what a writer op leaves (level_write: seg and crd; value_write: vals)
    enum Result { NO_RESULT, LEVEL_RESULT, VALS_RESULT, TOKENS_RESULT } result = NO_RESULT;
    std::vector<i64> res_seg, res_crd;
    std::vector<Tok> res_vals;
    std::vector<Tok> src_tokens;          // _source (run_op's test source): the tokens it pushes
    std::vector<std::string> out_ports;   // the op's output ports (registry): unconnected ones discard
    std::unordered_map<std::string, Channel*> ins;
    std::unordered_map<std::string, Out*> outs;

    Channel* in(const std::string& port) const {
        auto it = ins.find(port);
        return it == ins.end() ? nullptr : it->second;
    }
    Out* out(const std::string& port) const { return outs.at(port); }
};

// bad(st, why): the op model's StreamError
[[noreturn]] void bad(const Node& st, const std::string& why);

// ---- block values (fuseflow/sim/blocks.py) ---------------------------------------------------------------
// Every block token of a run lives in one arena: a B-vector (ndim 1) or a B x B block (ndim 2) of float64
// (float mode) or int64 raw fixed point (fixed mode). Entries are never changed once made (a token is its
// index), so a loaded block may be shared by every token that carries it.
//
// Blocks are reclaimed by a mark-and-sweep collection at the scheduler's polls (module.cpp: every 256 rounds,
// between two resumes, so no process is in the middle of a firing): a block is live while a token of it waits in
// a channel or in an output pipeline, while an op holds it (hold/release), when it is pinned (made before the
// run: zero blocks, test sources) or written by a writer (Node::res_vals). Everything else, the blocks popped and
// not forwarded or pushed to no consumer, goes back to a free list of its size and its slot (index and storage)
// is reused by the next block made of that size. A fork is no special case: its token sits in each consumer's
// channel, so the block lives until the last consumer has popped it. Nothing is collected while tracing (the
// traces keep every token).
// The rule for op models: a block kept in a local across a yield, and not at that time still queued in an
// input channel (a head not popped yet), must be held: reduce's accumulator, repeat's held token, spacc's
// rows, and a result computed before the op waits for room (alu, block_matmul).
//
// An array's block values are not copied: they are views into the bound (n, B[, B]) array (the binding keeps it
// alive for the run), with negative indices, never freed.
struct Pipeline;
struct BlockArena {
    struct Hdr {
        void* p;               // the block's first entry (double or i64); chunks never move
        uint32_t n;
        uint8_t ndim;
        uint8_t free;          // on a free list
        uint16_t holds;        // holds by op state (PINNED: for the whole run)
    };
    static constexpr uint16_t PINNED = 0xFFFF;
    // Entries live in chunks of CHUNK values (8 bytes each) that are never moved or grown: no doubling, and no
    // copy of everything made so far when the arena grows (a std::vector's realloc held the old and the new
    // storage at once). The headers likewise, HCHUNK per chunk.
    static constexpr size_t CHUNK = size_t(1) << 17, HBITS = 14, HCHUNK = size_t(1) << HBITS;
    bool fixed = false;
    std::vector<std::unique_ptr<Hdr[]>> hchunks;
    std::vector<std::unique_ptr<std::byte[]>> chunks;   // storage for double (float mode) or i64 (fixed mode)
    size_t nhdr = 0, used = CHUNK;                       // slots made (the next new one's index); values taken
                                                         // in the current chunk
    // free slots by size (values per block): most runs have one or two sizes
    std::vector<std::pair<size_t, std::vector<size_t>>> free_by_size;
    size_t nfree = 0;
    // counters (stats["block_arena"]): blocks made (new or reused slots), storage in bytes (chunks and headers:
    // it never shrinks, so it is also the peak), collections and the blocks they freed
    size_t made = 0, storage = 0, collections = 0, freed = 0;
    // collection: on (collect) when the run has blocks and keeps no trace; the next one once `since` (values
    // made since the last) reaches `threshold` (at least min_values, and at least the slots and the live values,
    // so a sweep costs no more than the blocks made since the last one, and the storage stays within about twice
    // the largest live set)
    bool collect_on = false;
    size_t min_values = CHUNK, since = 0, threshold = CHUNK, live_values = 0, sweep_from = 0;
    std::vector<Pipeline*> pipes;                        // the run's output pipelines (their tokens are roots)
    // views: block values read in place, indices [base, base + count) (negative, below the previous view's)
    struct View {
        i64 base, count;
        std::byte* p;
        size_t bytes;          // per block
        uint32_t n;
        uint8_t ndim;
    };
    std::vector<View> views;
    i64 view_next = 0;
    // count blocks of shape (ndim, n) stored one after the other from p: the first one's index
    i64 add_view(void* p, i64 count, int ndim, uint32_t n) {
        view_next -= count;
        views.push_back(View{view_next, count, static_cast<std::byte*>(p), BlockArena::count(ndim, n) * 8, n,
                             (uint8_t)ndim});
        return view_next;
    }
    i64 viewed() const { return -view_next; }            // the blocks read in place

    static size_t count(int ndim, uint32_t n) { return ndim == 2 ? (size_t)n * n : n; }
    size_t size() const { return nhdr; }                 // the slots made (the next new block's index)
    size_t live() const { return nhdr - nfree; }
    Hdr& hdr(size_t k) { return hchunks[k >> HBITS][k & (HCHUNK - 1)]; }
    // a new block of zeros (0.0 in float mode, 0 in fixed mode: all bits zero either way)
    Tok make(int ndim, uint32_t n) {
        size_t c = count(ndim, n);
        ++made;
        since += c;
        if (nfree)
            for (auto& [sz, slots] : free_by_size)
                if (sz == c && !slots.empty()) {
                    size_t k = slots.back();
                    slots.pop_back();
                    --nfree;
                    Hdr& h = hdr(k);
                    std::memset(h.p, 0, c * 8);
                    h = Hdr{h.p, n, (uint8_t)ndim, 0, 0};
                    return Tok::Blk((i64)k);
                }
        std::byte* mem;
        if (c > CHUNK) {                                 // larger than a chunk: a chunk of its own, put before
            chunks.emplace_back(new std::byte[c * 8]()); // the current one (which keeps filling)
            storage += c * 8;
            mem = chunks.back().get();
            if (chunks.size() >= 2) std::swap(chunks[chunks.size() - 1], chunks[chunks.size() - 2]);
        } else {
            if (used + c > CHUNK) {
                chunks.emplace_back(new std::byte[CHUNK * 8]());
                storage += CHUNK * 8;
                used = 0;
            }
            mem = chunks.back().get() + used * 8;
            used += c;
        }
        if ((nhdr & (HCHUNK - 1)) == 0) {
            hchunks.emplace_back(new Hdr[HCHUNK]);
            storage += HCHUNK * sizeof(Hdr);
        }
        hchunks.back()[nhdr & (HCHUNK - 1)] = Hdr{(void*)mem, n, (uint8_t)ndim, 0, 0};
        return Tok::Blk((i64)nhdr++);
    }
    Hdr at(const Tok& t) const {
        if (__builtin_expect(t.i < 0, 0)) return view_at(t.i);
        size_t k = (size_t)t.i;
        return hchunks[k >> HBITS][k & (HCHUNK - 1)];
    }
    Hdr view_at(i64 k) const {
        for (const View& v : views)
            if (k >= v.base && k < v.base + v.count)
                return Hdr{(void*)(v.p + (size_t)(k - v.base) * v.bytes), v.n, v.ndim, 0, PINNED};
        return Hdr{nullptr, 0, 0, 0, PINNED};
    }
    size_t size(const Tok& t) const { const Hdr& h = at(t); return count(h.ndim, h.n); }
    double* fp(const Tok& t) { return static_cast<double*>(at(t).p); }
    i64* ip(const Tok& t) { return static_cast<i64*>(at(t).p); }

    // an op keeps t across a yield (no-op on a non-block token); release when it no longer does
    void hold(const Tok& t) {
        if (t.k != K_BLK || t.i < 0) return;
        Hdr& h = hdr((size_t)t.i);
        if (h.holds < PINNED) ++h.holds;                 // a saturated count stays: the block is kept
    }
    void release(const Tok& t) {
        if (t.k != K_BLK || t.i < 0) return;
        Hdr& h = hdr((size_t)t.i);
        if (h.holds > 0 && h.holds < PINNED) --h.holds;
    }
    // every block made so far is kept for the whole run (called once the run's inputs are bound): the sweeps
    // start after them
    void pin_all() {
        for (size_t k = 0; k < nhdr; ++k) hdr(k).holds = PINNED;
        sweep_from = nhdr;
    }
    void pin(const Tok& t) {
        if (t.k == K_BLK && t.i >= 0) hdr((size_t)t.i).holds = PINNED;
    }
    bool want_collect() const { return collect_on && since >= threshold; }
    // mark and sweep: roots(visit) calls visit(tok) on every token in a channel, pipeline or writer result
    template <class Roots>
    void collect(Roots&& roots) {
        std::vector<uint64_t> mark((nhdr + 63) >> 6, 0);
        auto visit = [&](const Tok& t) {
            if (t.k == K_BLK && (size_t)t.i < nhdr) mark[(size_t)t.i >> 6] |= uint64_t(1) << (t.i & 63);
        };
        roots(visit);
        size_t lv = 0;
        for (size_t k = sweep_from; k < nhdr; ++k) {
            Hdr& h = hdr(k);
            if (h.free) continue;
            size_t c = count(h.ndim, h.n);
            if (h.holds || (mark[k >> 6] >> (k & 63) & 1)) {
                lv += c;
                continue;
            }
            h.free = 1;
            if (!min_values) std::memset(h.p, 0xA5, c * 8);   // tests: a stale read of a freed block shows
            ++nfree;
            ++freed;
            std::vector<size_t>* list = nullptr;
            for (auto& [sz, slots] : free_by_size)
                if (sz == c) list = &slots;
            if (!list) {
                free_by_size.emplace_back(c, std::vector<size_t>{});
                list = &free_by_size.back().second;
            }
            list->push_back(k);
        }
        ++collections;
        live_values = lv;
        since = 0;
        // min_values 0 (tests): at every poll, and freed blocks are overwritten with a marker until reused
        threshold = min_values ? std::max({min_values, nhdr - sweep_from, lv}) : 0;
    }
};

// ---- number modes (fuseflow/tensors/fixed.py): the arithmetic every op model uses ------------------------
using BinFn = Tok (*)(const Env&, const Tok&, const Tok&);
using UnaryFn = std::function<Tok(const Tok&)>;
using UnFn = UnaryFn;

// One lookup table of fixed.py/fixedfn.py: 2**k + 1 entries, each with frac + guard fractional bits.
struct FnTable {
    int k = -1;
    std::vector<i64> t;
};

// The tables and constants of the fixed-point functions for the current format. Never typed in C++: Python
// computes them with the functions of fixed.py/fixedfn.py and binds them (compiled.fixed_tables).
struct FixedFns {
    bool bound = false;
    FnTable exp2, tanh, gelu, log2;
    i64 log2e_q = 0, ln2_q = 0;
    int log2e_bits = 0, exp_guard = 0, fn_guard = 0, range_log2 = 0, ln2_bits = 0;
};

// Float mode: NumPy's and SciPy's own compiled inner loops for float64 exp, log, tanh and scipy.special.erf
// (the `d->d` entry of each ufunc's loop table, which NumPy filled with the routine it dispatched to for this
// CPU), called in C++ on one value. compiled.float_loops reads them from the ufunc objects, checks them
// against the Python functions on probe values, and binds the ones that pass (functions.cpp).
using UfuncLoop = void (*)(char** args, const std::intptr_t* dims, const std::intptr_t* steps, void* data);
struct FloatLoop {
    UfuncLoop fn = nullptr;
    void* data = nullptr;
    explicit operator bool() const { return fn != nullptr; }
    double operator()(double x) const {
        double out;
        char* args[2] = {(char*)&x, (char*)&out};
        std::intptr_t n = 1, steps[2] = {(std::intptr_t)sizeof(double), (std::intptr_t)sizeof(double)};
        fn(args, &n, steps, data);
        return out;
    }
};
struct FloatLoops {
    FloatLoop exp, log, tanh, erf;
};

struct Env {
    bool fixed = false;
    int width = 32, frac = 16;
    i64 lo = 0, hi = 0, half = 0;
    Tok zero;
    FixedFns fns;              // fixed mode: what the native functions read
    FloatLoops loops;          // float mode: NumPy's/SciPy's loops that passed compiled.float_loops' check
    // unary functions without a native version call back into Python (bit-identical by construction)
    std::unordered_map<std::string, UnaryFn> unary_cb;
    // blocks (Env(blocks=True)): binary and unary ops also take block tokens; the unary functions on blocks
    // call the Python Env's vectorised op (matmul and row reductions are native in both number modes: float
    // mode sums in a defined order, fixed.float_matmul / fixed.float_row_reduce)
    bool blocks = false;
    BlockArena* arena = nullptr;
    std::unordered_map<std::string, UnFn> unary_block_cb;     // Env.unary[name] on a Block
    std::unordered_map<std::string, UnFn> rows_cb;            // Env.row_reduce[op]: only its error on a non-block

    BinFn binary(const std::string& name) const;           // add sub mul div max min
    UnaryFn unary(const std::string& name) const;          // native when implemented, else the callback
    Tok row_reduce(const std::string& op, const Tok& x) const;   // Env.row_reduce[op] (reduce with rows)
    Tok matmul(const Tok& a, const Tok& b) const;                 // Env.matmul (block_matmul)
};
// Env.unary[name] with blocks: `scalar` (Env::unary) unless the operand is a block (blocks.blockwise)
UnFn unary_with_blocks(const Env& env, const std::string& name, UnFn scalar);
// a token's block shape as Python prints np.shape(tok): "(2, 2)", "(2,)", "()"
std::string shape_repr(const Env& env, const Tok& t);

// functions.cpp: the element-wise functions written in C++ (exp, sigmoid, tanh, gelu, sqrt, rsqrt, log, abs,
// square in fixed mode; sqrt, rsqrt, abs, square in float mode). native_unary gives an empty function when
// `name` has no native version in env's mode (or, in fixed mode, when no tables were bound).
UnaryFn native_unary(const Env& env, const std::string& name);
// the names native_unary implements in a mode (besides neg and relu, which Env::unary has itself)
const std::vector<std::string>& native_unary_names(bool fixed);

// ---- processes -------------------------------------------------------------------------------------------
// What a suspended process waits for (one of the three is set): a channel's token (ch), an emitter's room (em: an
// output, a group or a pipeline stage, its room() inlined), or a pipeline's delivery (pipe: its drain).
struct Wait {
    Channel* ch = nullptr;
    Emitter* em = nullptr;
    Pipeline* pipe = nullptr;
};

struct Proc {
    struct promise_type {
        // where the process writes what it waits for: its own record until the scheduler points it at the
        // scheduler's dense table (one cache line holds several processes' records, read before every resume)
        Wait own;
        Wait* w = &own;
        std::exception_ptr exc;
        Proc get_return_object() { return Proc{std::coroutine_handle<promise_type>::from_promise(*this)}; }
        std::suspend_always initial_suspend() noexcept { return {}; }
        std::suspend_always final_suspend() noexcept { return {}; }
        std::suspend_always yield_value(Channel* c) noexcept { *w = Wait{c, nullptr, nullptr}; return {}; }
        std::suspend_always yield_value(Emitter* e) noexcept { *w = Wait{nullptr, e, nullptr}; return {}; }
        std::suspend_always yield_value(Pipeline* p) noexcept { *w = Wait{nullptr, nullptr, p}; return {}; }
        void return_void() noexcept {}
        void unhandled_exception() { exc = std::current_exception(); }
    };
    std::coroutine_handle<promise_type> h;

    explicit Proc(std::coroutine_handle<promise_type> hh) : h(hh) {}
    Proc(Proc&& o) noexcept : h(std::exchange(o.h, {})) {}
    Proc& operator=(Proc&& o) noexcept { if (h) h.destroy(); h = std::exchange(o.h, {}); return *this; }
    Proc(const Proc&) = delete;
    ~Proc() { if (h) h.destroy(); }
};

// The processes of one node, plus objects they share that must live as long as they do.
struct Built {
    std::vector<Proc> procs;
    std::vector<std::unique_ptr<Waitable>> keep;
    std::vector<std::unique_ptr<Channel>> chans;
    std::vector<std::unique_ptr<Out>> outs;
    template <class T, class... A>
    T* make(A&&... a) {
        auto p = std::make_unique<T>(std::forward<A>(a)...);
        T* r = p.get();
        keep.push_back(std::move(p));
        return r;
    }
};

using OpBuilder = void (*)(Node&, Built&);
std::unordered_map<std::string, OpBuilder>& op_table();

struct RegisterOp {
    RegisterOp(const char* name, OpBuilder b) { op_table()[name] = b; }
};
#define FF_REGISTER_OP(name, fn) static ::ff::RegisterOp ff_register_##name(#name, fn)

// ---- waiting, as the Python models' `while not ch.toks: yield ch` ----------------------------------------
#define FF_WAIT_TOK(ch) \
    while ((ch)->empty()) co_yield (ch)
#define FF_WAIT_N(ch, n) \
    while ((ch)->size() < (size_t)(n)) co_yield (ch)
// r = out.room(); while r is None: yield out; r = out.room()
#define FF_WAIT_ROOM(r, em) \
    while (((r) = (em)->room()) == ::ff::NONE) co_yield (em)

// wait_room(outs): the cycle from which every output has room (yields the first lacking one)
#define FF_WAIT_ROOM_ALL(r, vec)                                         \
    for (;;) {                                                           \
        ::ff::i64 ff_m_ = 0;                                             \
        ::ff::Out* ff_lack_ = nullptr;                                   \
        for (::ff::Out* ff_o_ : (vec)) {                                 \
            ::ff::i64 ff_x_ = ff_o_->room_();                            \
            if (ff_x_ == ::ff::NONE) { ff_lack_ = ff_o_; break; }        \
            if (ff_x_ > ff_m_) ff_m_ = ff_x_;                            \
        }                                                                \
        if (!ff_lack_) { (r) = ff_m_; break; }                           \
        co_yield ff_lack_;                                               \
    }

// fire_at(st, outs, tin) (_common.fire_at): t becomes the cycle (>= tin) at which a firing that writes `em` (or
// every output in `vec`) can happen; the cycles it waits for room count as the node's blocked cycles
#define FF_FIRE_AT(t, tin, em)                           \
    do {                                                 \
        ::ff::i64 ff_tin_ = (tin), ff_r_;                \
        FF_WAIT_ROOM(ff_r_, em);                         \
        (t) = ff_tin_ >= ff_r_ ? ff_tin_ : ff_r_;        \
        st.blocked += (t) - ff_tin_;                     \
    } while (0)
#define FF_FIRE_AT_ALL(t, tin, vec)                      \
    do {                                                 \
        ::ff::i64 ff_tin_ = (tin), ff_r_;                \
        FF_WAIT_ROOM_ALL(ff_r_, vec);                    \
        (t) = ff_tin_ >= ff_r_ ? ff_tin_ : ff_r_;        \
        st.blocked += (t) - ff_tin_;                     \
    } while (0)

// wait_heads(chans, clock): tin becomes the first cycle (> clock) in which every channel's head is visible
#define FF_WAIT_HEADS(tin, chans, clock)              \
    do {                                              \
        (tin) = (clock) + 1;                          \
        for (::ff::Channel* ff_ch_ : (chans)) {       \
            FF_WAIT_TOK(ff_ch_);                      \
            ::ff::i64 ff_v_ = ff_ch_->head_time() + 1; \
            if (ff_v_ > (tin)) (tin) = ff_v_;         \
        }                                             \
    } while (0)

// joiner_ports(st): the ports of an n-ary joiner (intersect, union)
struct JoinerPorts {
    int n = 0;
    std::vector<Channel*> crds, refs, chans;    // chans: crds then refs
    Out* ocrd = nullptr;
    std::vector<Out*> orefs, allouts;           // allouts: ocrd then orefs
};

inline JoinerPorts joiner_ports(Node& st) {
    JoinerPorts j;
    j.n = (int)st.params.get_int("arity");
    j.ocrd = st.out("crd");
    j.allouts.push_back(j.ocrd);
    for (int i = 0; i < j.n; ++i) {
        j.crds.push_back(st.in("crd" + std::to_string(i)));
        j.refs.push_back(st.in("ref" + std::to_string(i)));
        j.orefs.push_back(st.out("ref" + std::to_string(i)));
        j.allouts.push_back(j.orefs.back());
    }
    j.chans = j.crds;
    j.chans.insert(j.chans.end(), j.refs.begin(), j.refs.end());
    return j;
}

// ---- output groups and pipelines (fuseflow/sim/ops/_common.py) -------------------------------------------
// the cycle from which every output of a group has room (NONE while one has none)
FF_INLINE i64 room_of(const std::vector<Out*>& outs) {
    i64 r = 0;
    for (Out* o : outs) {
        i64 x = o->room_();
        if (x == NONE) return NONE;
        if (x > r) r = x;
    }
    return r;
}
// the same for two outputs, without a loop (level_scan's crd and ref, two-output pipelines)
FF_INLINE i64 room_of2(Out* a, Out* b) {
    i64 x = a->room_();
    if (x == NONE) return NONE;
    i64 y = b->room_();
    if (y == NONE) return NONE;
    return x > y ? x : y;
}

// together(st, outs): outputs every firing writes together, without a pipeline
struct Together : Emitter {
    Node* st;
    std::vector<Out*> outs;
    size_t nout;
    Out *o0, *o1;              // outs[0], outs[1] when there are two (level_scan's crd and ref): no loop
    Together(Node* s, std::vector<Out*> o) : Emitter(E_TOGETHER), st(s), outs(std::move(o)), nout(outs.size()),
                                             o0(nout > 0 ? outs[0] : nullptr), o1(nout > 1 ? outs[1] : nullptr) {}
    FF_INLINE i64 room() {
        if (nout == 2) return room_of2(o0, o1);
        return room_of(outs);
    }
    FF_INLINE void push(const Tok* toks, i64 t) {
        if (nout == 2) {
            o0->push1(toks[0], t);
            o1->push1(toks[1], t);
            return;
        }
        for (size_t i = 0; i < nout; ++i) outs[i]->push1(toks[i], t);
    }
    std::string describe_wait(const Node& st) override;
};

// pipeline(st, out, latency): the output pipeline of an op of latency >= 2 (see _common.pipeline)
struct Pipeline : Waitable {
    Node* st;
    std::vector<Out*> outs;
    size_t nout;
    Out *o0, *o1;              // outs[0], outs[1] (nullptr when fewer): the common one- and two-output cases
    i64 ahead;
    i64 lat;                   // the latency: the depth of the reference's internal channel
    // One ring, as a Channel's: the firings not delivered yet at [head, head + np) (a firing's tokens and its
    // cycle), the free slots at [head + np, head + lat) (`at`: the cycle from which each may be refilled, the
    // reference's credits, oldest first). A firing takes the oldest credit: it is delivered at once when nothing
    // is pending (the credit at head goes), else written over that credit; a delivery puts its slot's credit at
    // head + lat. With more than two outputs a firing's tokens are in `wide` at its position * nout.
    struct Rec {
        Tok tok[2];
        i64 at;
    };
    std::vector<Rec> ring;
    Rec* rd;
    size_t head = 0, np = 0, mask;
    std::vector<Tok> wide;
    i64 last = -1;
    bool done = false;
    FF_INLINE bool none_pending() const { return np == 0; }
    FF_INLINE bool has_credit() const { return (i64)np < lat; }
    FF_INLINE i64 credit0() const { return rd[(head + np) & mask].at; }
    FF_INLINE const Tok* toks_at(size_t pos) const { return nout <= 2 ? rd[pos].tok : &wide[pos * nout]; }

    Pipeline(Node* s, std::vector<Out*> o, i64 latency);
    FF_INLINE i64 out_room() const {
        if (nout == 1) return o0->room_();
        if (nout == 2) return room_of2(o0, o1);
        return out_room_n();
    }
    i64 out_room_n() const;
    // the firing at head (fired at fired_at, its tokens toks) leaves: its slot's credit goes behind the others
    FF_INLINE void deliver(const Tok* toks, i64 fired_at, i64 r) {
        i64 t = fired_at + ahead;
        if (t <= last) t = last + 1;
        if (t < r) t = r;
        bool d = toks[0].is_D();
        if (nout == 1) {
            o0->push1(toks[0], t);
        } else if (nout == 2) {
            o0->push1(toks[0], t);
            o1->push1(toks[1], t);
        } else {
            for (size_t i = 0; i < nout; ++i) outs[i]->push1(toks[i], t);
        }
        rd[(head + (size_t)lat) & mask].at = t + 1;
        head = (head + 1) & mask;
        last = t;
        if (d) done = true;
    }
    void flush();
    // the drain's wait: nothing to do until a firing is pending and an output has room, or D has left
    FF_INLINE bool drain_waits() const { return !done && (np == 0 || out_room() == NONE); }
    std::string describe_wait(const Node& st) override;
};

struct Stage : Emitter {
    Pipeline* pipe;
    std::string name;
    explicit Stage(Pipeline* p);
    FF_INLINE i64 room() {
        if (pipe->has_credit()) return pipe->credit0();
        return room_slow();
    }
    i64 room_slow();
    // a firing in cycle t (the caller has seen room(), so a credit is free)
    FF_INLINE void push(const Tok* toks, i64 t) {
        Pipeline* p = pipe;
        if (p->np == 0) {
            i64 r = p->out_room();
            if (r != NONE) {
                p->deliver(toks, t, r);
                return;
            }
        }
        push_pending(toks, t);
    }
    void push_pending(const Tok* toks, i64 t);
    std::string describe_wait(const Node& st) override;
};

FF_INLINE i64 Emitter::room() {
    switch (ekind) {
        case E_OUT: return static_cast<Out*>(this)->room_();
        case E_STAGE: return static_cast<Stage*>(this)->room();
        default: return static_cast<Together*>(this)->room();
    }
}
FF_INLINE void Emitter::push(const Tok* toks, i64 t) {
    switch (ekind) {
        case E_OUT: static_cast<Out*>(this)->push1(toks[0], t); return;
        case E_STAGE: static_cast<Stage*>(this)->push(toks, t); return;
        default: static_cast<Together*>(this)->push(toks, t); return;
    }
}

// The drain process of a pipeline: delivers what is still in flight, ends after D has left.
Proc pipeline_drain(Pipeline* pipe);

// pipeline(st, outs, latency): returns the stage (firing side's emitter) and adds the drain process.
Emitter* make_pipeline(Node& st, Built& b, std::vector<Out*> outs, i64 latency);
// latency 1: together(outs) (or the single output); else a pipeline
Emitter* make_emitter(Node& st, Built& b, std::vector<Out*> outs, i64 latency);

// ---- one kernel ------------------------------------------------------------------------------------------
struct StreamSpec {
    std::string id;
    int src;                   // node index
    std::string src_port;
    std::vector<std::pair<int, std::string>> dsts;
    i64 depth;                 // 0 = default, -1 = unbounded
    i64 width = 0;             // > 0: data tokens must fit this many bits
};

struct KernelResult {
    i64 cycles = 0;
    bool interrupted = false;
    std::vector<std::pair<std::string, i64>> counts;       // tokens per stream
};

struct RunHooks {
    std::function<void()> poll;      // called every so often: may throw to stop (Ctrl-C)
    // called about every progress_seconds with the tokens pushed so far and the latest firing's cycle
    std::function<void(i64, i64)> progress;
    double progress_seconds = 0.5;
    KernelResult* partial = nullptr; // filled with the counts so far when a hook stops the run
    bool trace = false;
    std::unordered_map<std::string, std::pair<std::vector<i64>, std::vector<Tok>>>* traces = nullptr;
};

KernelResult run_kernel(std::vector<Node>& nodes, const std::vector<StreamSpec>& streams, i64 depth_default,
                        RunHooks& hooks);

}  // namespace ff
