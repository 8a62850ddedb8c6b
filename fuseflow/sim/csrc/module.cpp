// fuseflow.sim._engine: the Python binding of the compiled engine (called by fuseflow/sim/compiled.py only).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

#include "engine.hpp"

namespace py = pybind11;
using namespace ff;

namespace {

// ---- block tokens (fuseflow.sim.tokens.Block) <-> the run's BlockArena ----------------------------------------
Tok block_in(py::handle h, BlockArena& ar) {
    py::array a = py::array::ensure(h);
    if (!a || (a.ndim() != 1 && a.ndim() != 2) || a.size() == 0 || (a.ndim() == 2 && a.shape(0) != a.shape(1)))
        throw SimError("StreamError", "token", "not a block token: " + py::repr(h).cast<std::string>() +
                                                   " (a B-vector or a B x B block of numbers)");
    Tok t = ar.make((int)a.ndim(), (uint32_t)a.shape(0));
    size_t c = ar.size(t);
    if (ar.fixed) {
        auto v = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(a);
        std::memcpy(ar.ip(t), v.data(), c * sizeof(i64));
    } else {
        auto v = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
        std::memcpy(ar.fp(t), v.data(), c * sizeof(double));
    }
    return t;
}

py::object block_out(const Tok& t, BlockArena& ar) {
    // kept for the process's life (a static py::object would be released after the interpreter finalizes)
    static py::handle as_block = py::object(py::module_::import("fuseflow.sim.tokens").attr("as_block")).release();
    const BlockArena::Hdr& h = ar.at(t);
    std::vector<py::ssize_t> shape(h.ndim, (py::ssize_t)h.n);
    size_t c = ar.size(t);
    if (ar.fixed) {
        py::array_t<i64> a(shape);
        std::memcpy(a.mutable_data(), ar.ip(t), c * sizeof(i64));
        return as_block(a);
    }
    py::array_t<double> a(shape);
    std::memcpy(a.mutable_data(), ar.fp(t), c * sizeof(double));
    return as_block(a);
}

bool is_block_obj(py::handle h) {
    return py::isinstance<py::array>(h) || PyList_Check(h.ptr()) || PyTuple_Check(h.ptr());
}

Tok to_tok(py::handle h, BlockArena* ar = nullptr) {
    if (ar && is_block_obj(h)) return block_in(h, *ar);
    if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) return Tok::Int(h.cast<i64>());
    if (PyFloat_Check(h.ptr())) return Tok::Flt(h.cast<double>());
    if (PyUnicode_Check(h.ptr())) {
        std::string s = h.cast<std::string>();
        if (s == "D") return TOK_D;
        if (s == "N") return TOK_N;
        if (s == "R") return TOK_R;
        if (s == "S") return TOK_S;
        if (s.size() > 1 && s[0] == 'S') return Tok::Stop(std::stoi(s.substr(1)));
        throw SimError("StreamError", "token", "unknown control token '" + s + "'");
    }
    throw SimError("StreamError", "token", "the compiled engine cannot take this token: " +
                                               py::repr(h).cast<std::string>());
}

py::object from_tok(const Tok& t, BlockArena* ar = nullptr) {
    switch (t.k) {
        case K_BLK: return block_out(t, *ar);
        case K_INT: return py::int_(t.i);
        case K_FLT: return py::float_(t.f);
        case K_STOP: return py::str("S" + std::to_string(t.i));
        case K_N: return py::str("N");
        case K_D: return py::str("D");
        case K_R: return py::str("R");
        default: return py::str("S");
    }
}

// a 1-d array of T as v's values: read in place (kept alive in keep) or, without keep, copied into own
template <class T>
void bind_vec(PVal& v, py::handle h, std::vector<py::array>* keep, std::vector<T>& own) {
    // no copy when it already is C-contiguous T
    auto arr = py::array_t<T, py::array::c_style | py::array::forcecast>::ensure(h);
    if (keep) {
        keep->push_back(arr);
        v.ext = arr.data();
        v.ext_n = (size_t)arr.size();
    } else {
        own.assign(arr.data(), arr.data() + arr.size());
    }
}

// keep: where the NumPy arrays read in place are kept alive (nullptr: copy them)
PVal to_pval(py::handle h, std::vector<py::array>* keep = nullptr) {
    PVal v;
    PyObject* o = h.ptr();
    if (o == Py_None) return v;
    if (PyBool_Check(o)) { v.t = PVal::BOOL; v.i = o == Py_True; return v; }
    if (PyLong_Check(o)) { v.t = PVal::INT; v.i = h.cast<i64>(); v.f = (double)v.i; return v; }
    if (PyFloat_Check(o)) { v.t = PVal::FLT; v.f = h.cast<double>(); v.i = (i64)v.f; return v; }
    if (PyUnicode_Check(o)) { v.t = PVal::STR; v.s = h.cast<std::string>(); return v; }
    if (py::isinstance<py::array>(h)) {
        py::array a = py::reinterpret_borrow<py::array>(h);
        char kind = a.dtype().kind();
        if (a.ndim() == 1 && (kind == 'i' || kind == 'u' || kind == 'b')) {
            v.t = PVal::IVEC;
            bind_vec<i64>(v, h, keep, v.iv);
            return v;
        }
        if (a.ndim() == 1 && kind == 'f') {
            v.t = PVal::FVEC;
            bind_vec<double>(v, h, keep, v.fv);
            return v;
        }
        v.t = PVal::OTHER;
        for (py::handle x : h.attr("tolist")()) v.items.push_back(to_pval(x));
        return v;
    }
    if (PyList_Check(o) || PyTuple_Check(o)) {
        bool ints = true, nums = true;
        for (py::handle x : h) {
            PyObject* xo = x.ptr();
            bool is_int = PyLong_Check(xo) && !PyBool_Check(xo);
            if (!is_int) ints = false;
            if (!is_int && !PyFloat_Check(xo)) { nums = false; break; }
        }
        if (nums) {
            v.t = ints ? PVal::IVEC : PVal::FVEC;
            Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
            if (ints) v.iv.reserve(n);
            else v.fv.reserve(n);
            PyObject** items = PySequence_Fast_ITEMS(o);
            for (Py_ssize_t i = 0; i < n; ++i) {
                if (ints) {
                    v.iv.push_back(PyLong_AsLongLong(items[i]));
                } else {
                    v.fv.push_back(PyFloat_Check(items[i]) ? PyFloat_AS_DOUBLE(items[i])
                                                           : (double)PyLong_AsLongLong(items[i]));
                }
            }
            if (PyErr_Occurred()) throw py::error_already_set();
            return v;
        }
        v.t = PVal::OTHER;
        for (py::handle x : h) v.items.push_back(to_pval(x));
        return v;
    }
    if (PyDict_Check(o)) {
        v.t = PVal::OTHER;     // the ops that take dicts read them through items (key, value) pairs
        for (auto kv : py::reinterpret_borrow<py::dict>(h)) {
            PVal pair;
            pair.t = PVal::OTHER;
            pair.items.push_back(to_pval(kv.first));
            pair.items.push_back(to_pval(kv.second));
            v.items.push_back(std::move(pair));
        }
        return v;
    }
    v.t = PVal::OTHER;
    v.s = py::repr(h).cast<std::string>();
    return v;
}

template <class T>
py::array_t<T> as_array(const std::vector<T>& v) {
    py::array_t<T> a((py::ssize_t)v.size());
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

py::object vals_array(const std::vector<Tok>& vals, const Env& env) {
    for (const Tok& t : vals)
        if (t.is_blk()) {
            // blocks: the list value_write collects (engine._collect_writes broadcasts and stacks it)
            py::list l;
            for (const Tok& x : vals) l.append(from_tok(x, env.arena));
            return l;
        }
    if (env.fixed) {
        py::array_t<i64> a((py::ssize_t)vals.size());
        i64* p = a.mutable_data();
        for (size_t i = 0; i < vals.size(); ++i) p[i] = vals[i].k == K_FLT ? (i64)vals[i].f : vals[i].i;
        return a;
    }
    py::array_t<double> a((py::ssize_t)vals.size());
    double* p = a.mutable_data();
    for (size_t i = 0; i < vals.size(); ++i) p[i] = vals[i].num();
    return a;
}

[[noreturn]] void raise_sim_error(const SimError& e) {
    py::object errors = py::module_::import("fuseflow.errors");
    py::object cls = errors.attr(e.cls.c_str());
    py::object exc = e.what_.empty() ? cls(e.why) : cls(e.what_, e.why);
    PyErr_SetObject(cls.ptr(), exc.ptr());
    throw py::error_already_set();
}

// One table of the fixed-point functions: (k, [2**k + 1 ints]).
void bind_table(py::dict tables, const char* name, FnTable& out) {
    py::tuple kt = tables[name];
    out.k = kt[0].cast<int>();
    out.t = kt[1].cast<std::vector<i64>>();
    if (out.k < 0 || out.k > 30 || out.t.size() != ((size_t)1 << out.k) + 1)
        throw SimError("GraphError", "env", std::string("the fixed-point table '") + name + "' does not have 2**k + 1 entries");
}

// env: {"mode", "width", "frac", "unary": {name: callable}, "tables": compiled.fixed_tables(fmt) (fixed mode),
// "loops": {"exp"|"log"|"tanh"|"erf": (loop address, data address)} (float mode: compiled.float_loops, checked)}
// and, for blocks (given an arena: a run's), "blocks": True, "unary_block": {name: callable}, "rows": {op: callable}
// (the Python Env's vectorised ops on Blocks; rows only for its error on a value that is not a block).
// The callables are the Python functions of the names that have no native version (functions.cpp).
void bind_env(Env& env, py::dict env_in, BlockArena* arena) {
    env.fixed = env_in["mode"].cast<std::string>() == "fixed";
    env.width = env_in["width"].cast<int>();
    env.frac = env_in["frac"].cast<int>();
    env.lo = -((i64)1 << (env.width - 1));
    env.hi = ((i64)1 << (env.width - 1)) - 1;
    env.half = env.frac ? (i64)1 << (env.frac - 1) : 0;
    env.zero = env.fixed ? Tok::Int(0) : Tok::Flt(0.0);
    if (env.fixed && env_in.contains("tables") && !env_in["tables"].is_none()) {
        py::dict t = env_in["tables"];
        FixedFns& F = env.fns;
        bind_table(t, "exp2", F.exp2);
        bind_table(t, "tanh", F.tanh);
        bind_table(t, "gelu", F.gelu);
        bind_table(t, "log2", F.log2);
        F.log2e_q = t["log2e_q"].cast<i64>();
        F.log2e_bits = t["log2e_bits"].cast<int>();
        F.exp_guard = t["exp_guard"].cast<int>();
        F.fn_guard = t["fn_guard"].cast<int>();
        F.range_log2 = t["range_log2"].cast<int>();
        F.ln2_q = t["ln2_q"].cast<i64>();
        F.ln2_bits = t["ln2_bits"].cast<int>();
        F.bound = true;
    }
    if (!env.fixed && env_in.contains("loops") && !env_in["loops"].is_none()) {
        for (auto kv : env_in["loops"].cast<py::dict>()) {
            std::string n = kv.first.cast<std::string>();
            auto fd = kv.second.cast<std::pair<std::uintptr_t, std::uintptr_t>>();
            FloatLoop* l = n == "exp" ? &env.loops.exp : n == "log" ? &env.loops.log : n == "tanh" ? &env.loops.tanh
                         : n == "erf" ? &env.loops.erf : nullptr;
            if (!l || !fd.first) throw SimError("GraphError", "env", "unknown float loop '" + n + "'");
            l->fn = reinterpret_cast<UfuncLoop>(fd.first);
            l->data = reinterpret_cast<void*>(fd.second);
        }
    }
    if (arena) {
        arena->fixed = env.fixed;
        env.arena = arena;
        env.blocks = env_in.contains("blocks") && env_in["blocks"].cast<bool>();
    }
    if (env.blocks) {
        // the unary functions on blocks call the Python Env's vectorised op
        BlockArena* ar = arena;
        auto block_fn = [ar](py::object fn) {
            return [fn, ar](const Tok& a) { return to_tok(fn(from_tok(a, ar)), ar); };
        };
        for (auto kv : env_in["unary_block"].cast<py::dict>())
            env.unary_block_cb[kv.first.cast<std::string>()] = block_fn(py::reinterpret_borrow<py::object>(kv.second));
        for (auto kv : env_in["rows"].cast<py::dict>())
            env.rows_cb[kv.first.cast<std::string>()] = block_fn(py::reinterpret_borrow<py::object>(kv.second));
    }
    py::dict unary = env_in["unary"];
    for (auto kv : unary) {
        py::object fn = py::reinterpret_borrow<py::object>(kv.second);
        bool fixed = env.fixed;
        env.unary_cb[kv.first.cast<std::string>()] = [fn, fixed](const Tok& a) {
            py::object r = fn(from_tok(a));
            return fixed ? Tok::Int(r.cast<i64>()) : Tok::Flt(r.cast<double>());
        };
    }
}

// nodes: [(id, op, params, latency, out_ports)]; streams: [(id, src, src_port, [(dst, port)], depth, width)]
// (depth 0: the default, -1: unbounded); env: see bind_env.
// Returns (cycles, {stream: tokens}, [per node: dict of counters and result]) and, with trace, the traces.
py::tuple run_kernel_py(py::list nodes_in, py::list streams_in, i64 depth_default, py::dict env_in, bool trace,
                        py::object progress) {
    std::vector<Node> nodes;
    KernelResult partial;
    try {
        Env env;
        BlockArena arena;
        std::vector<py::array> bound_arrays;             // what is read in place: the arena's views (array's block
                                                         // values) and 1-d parameter arrays (vals, seg, crd)
        bind_env(env, env_in, &arena);
        nodes.resize(nodes_in.size());
        std::vector<std::unique_ptr<Env>> node_envs;     // a node whose values are blocks: its zero block
        for (size_t i = 0; i < nodes.size(); ++i) {
            py::tuple t = nodes_in[i];
            Node& n = nodes[i];
            n.id = t[0].cast<std::string>();
            n.op = t[1].cast<std::string>();
            Env* node_env = &env;
            for (auto kv : t[2].cast<py::dict>()) {
                std::string key = kv.first.cast<std::string>();
                if (n.op == "_source" && key == "tokens") {
                    for (py::handle x : kv.second) n.src_tokens.push_back(to_tok(x, env.blocks ? &arena : nullptr));
                    continue;
                }
                if (key == "_bvals") {          // array's block values (n, B[, B]): read in place (an arena view)
                    py::array a = py::array::ensure(kv.second);
                    if (!a || a.ndim() < 2 || a.ndim() > 3 || (a.ndim() == 3 && a.shape(1) != a.shape(2)))
                        throw SimError("GraphError", "node " + n.id, "block values must have shape (n, B) or (n, B, B)");
                    i64 count = a.shape(0), bn = a.shape(1);
                    int ndim = (int)a.ndim() - 1;
                    // the values as the number mode holds them, C-contiguous (no copy when they already are),
                    // kept alive until the results are read
                    py::array v;
                    if (arena.fixed) v = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(a);
                    else v = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(a);
                    if (!v) throw SimError("GraphError", "node " + n.id, "block values must be numbers");
                    bound_arrays.push_back(v);
                    i64 base = arena.add_view(const_cast<void*>(v.data()), count, ndim, (uint32_t)bn);
                    n.params.m["_bvals_base"] = to_pval(py::int_(base));
                    n.params.m["_bvals_n"] = to_pval(py::int_(count));
                    continue;
                }
                if (key == "_block") {           // the node's block shape: its N and empty fibres load zeros
                    auto shape = kv.second.cast<std::vector<i64>>();
                    node_envs.push_back(std::make_unique<Env>(env));
                    node_envs.back()->zero = arena.make((int)shape.size(), (uint32_t)shape[0]);
                    node_env = node_envs.back().get();
                    continue;
                }
                n.params.m[key] = to_pval(kv.second, &bound_arrays);
            }
            n.latency = t[3].cast<i64>();
            n.out_ports = t[4].cast<std::vector<std::string>>();
            n.env = node_env;
        }
        std::vector<StreamSpec> streams;
        for (py::handle h : streams_in) {
            py::tuple t = py::reinterpret_borrow<py::tuple>(h);
            StreamSpec s;
            s.id = t[0].cast<std::string>();
            s.src = t[1].cast<int>();
            s.src_port = t[2].cast<std::string>();
            s.dsts = t[3].cast<std::vector<std::pair<int, std::string>>>();
            s.depth = t[4].cast<i64>();
            s.width = t[5].cast<i64>();
            streams.push_back(std::move(s));
        }
        // blocks: what is bound so far (array values, zero blocks, test sources) is kept for the whole run; the
        // rest is collected at the scheduler's polls (between resumes) unless the run keeps a trace
        arena.pin_all();
        size_t bound = arena.size(), made0 = arena.made;
        arena.collect_on = env.blocks && !trace;
        if (env_in.contains("arena_min_values")) arena.min_values = env_in["arena_min_values"].cast<size_t>();
        arena.threshold = arena.min_values;
        auto roots = [&nodes, &arena](auto&& visit) {
            for (Node& n : nodes) {
                for (auto& [port, ch] : n.ins)
                    for (size_t i = 0; i < ch->size(); ++i) visit(ch->tok_at(i));
                for (const Tok& t : n.res_vals) visit(t);
            }
            for (Pipeline* p : arena.pipes) {         // the firings not delivered yet (engine.hpp, Pipeline)
                for (size_t i = 0; i < p->np; ++i) {
                    const Tok* t = p->toks_at((p->head + i) & p->mask);
                    for (size_t j = 0; j < p->nout; ++j) visit(t[j]);
                }
            }
        };
        RunHooks hooks;
        hooks.poll = [&arena, &roots] {
            if (arena.want_collect()) arena.collect(roots);
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        };
        std::unordered_map<std::string, std::pair<std::vector<i64>, std::vector<Tok>>> traces;
        hooks.trace = trace;
        hooks.traces = &traces;
        hooks.partial = &partial;
        if (!progress.is_none()) hooks.progress = [progress](i64 tokens, i64 cycles) { progress(tokens, cycles); };
        if (env_in.contains("progress_seconds")) hooks.progress_seconds = env_in["progress_seconds"].cast<double>();
        KernelResult res;
        py::object stopped = py::none();
        try {
            res = run_kernel(nodes, streams, depth_default, hooks);
        } catch (py::error_already_set& e) {
            if (!e.matches(PyExc_KeyboardInterrupt)) throw;
            // Ctrl-C: return the counters so far, marked interrupted (the caller raises)
            res = partial;
            res.interrupted = true;
            stopped = e.value();
        }
        py::dict counts;
        for (auto& [sid, c] : res.counts) counts[py::str(sid)] = c;
        py::list per_node;
        for (Node& n : nodes) {
            py::dict d;
            d["busy"] = n.busy;
            d["blocked"] = n.blocked;
            d["alu_ops"] = n.alu_ops;
            d["mem_reads"] = n.mem_reads;
            d["mem_writes"] = n.mem_writes;
            d["moved"] = n.moved;
            d["clock"] = n.clock;
            if (n.result == Node::LEVEL_RESULT) {
                py::dict r;
                r["seg"] = as_array(n.res_seg);
                r["crd"] = as_array(n.res_crd);
                d["result"] = r;
            } else if (n.result == Node::VALS_RESULT) {
                py::dict r;
                r["vals"] = vals_array(n.res_vals, env);
                d["result"] = r;
            } else if (n.result == Node::TOKENS_RESULT) {
                py::list l;
                for (const Tok& t : n.res_vals) l.append(from_tok(t, &arena));
                d["result"] = l;
            } else {
                d["result"] = py::none();
            }
            per_node.append(d);
        }
        py::object tr = py::none();
        if (trace) {
            py::dict logs, sent;
            for (auto& [sid, p] : traces) {
                logs[py::str(sid)] = py::cast(p.first);
                py::list l;
                for (const Tok& t : p.second) l.append(from_tok(t, &arena));
                sent[py::str(sid)] = l;
            }
            tr = py::make_tuple(logs, sent);
        }
        py::dict ast;
        ast["bound_blocks"] = (size_t)arena.viewed() + bound;   // inputs (read in place) and zero blocks
        ast["blocks_made"] = arena.made - made0;           // made by the ops during the run
        ast["peak_blocks"] = arena.size() - bound;         // the most slots they took at once
        ast["live_blocks"] = arena.live() - bound;         // ... and took at the end
        ast["storage_bytes"] = arena.storage;
        ast["collections"] = arena.collections;
        ast["freed"] = arena.freed;
        return py::make_tuple(res.cycles, counts, per_node, tr, stopped, ast);
    } catch (const SimError& e) {
        raise_sim_error(e);
    }
}

// Env::unary(name) applied to every value (int64 raw values in fixed mode, float64 in float mode), for the
// tests that compare the compiled functions with the Python ones over many values at once.
py::array unary_py(const std::string& name, py::dict env_in, py::array values) {
    try {
        Env env;
        bind_env(env, env_in, nullptr);
        UnaryFn f = env.unary(name);
        if (env.fixed) {
            auto in = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(values);
            py::array_t<i64> out(in.size());
            const i64* x = in.data();
            i64* y = out.mutable_data();
            for (py::ssize_t i = 0; i < in.size(); ++i) y[i] = f(Tok::Int(x[i])).i;
            return out;
        }
        auto in = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(values);
        py::array_t<double> out(in.size());
        const double* x = in.data();
        double* y = out.mutable_data();
        for (py::ssize_t i = 0; i < in.size(); ++i) y[i] = f(Tok::Flt(x[i])).f;
        return out;
    } catch (const SimError& e) {
        raise_sim_error(e);
    }
}

py::list native_unary_py(const std::string& mode) {
    py::list l;
    l.append("neg");
    l.append("relu");
    for (const std::string& n : native_unary_names(mode == "fixed")) l.append(n);
    return l;
}

py::list ops_py() {
    py::list l;
    for (auto& [name, _] : op_table()) l.append(name);
    return l;
}

}  // namespace

PYBIND11_MODULE(_engine, m) {
    m.doc() = "The compiled simulator engine (fuseflow.sim.compiled is its Python side).";
    m.def("run_kernel", &run_kernel_py, py::arg("nodes"), py::arg("streams"), py::arg("depth_default"),
          py::arg("env"), py::arg("trace") = false, py::arg("progress") = py::none());
    m.def("ops", &ops_py, "The ops that have a compiled model.");
    m.def("native_unary", &native_unary_py, py::arg("mode"),
          "The unary alu ops written in C++ in number mode 'fixed' or 'float' (the others call back into Python).");
    m.def("unary", &unary_py, py::arg("name"), py::arg("env"), py::arg("values"),
          "Unary op `name` of the bound env (as run_kernel's) on every value of a 1-d array (tests).");
}
