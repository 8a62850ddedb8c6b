// fuseflow.sim._engine: the Python binding of the compiled engine (called by fuseflow/sim/compiled.py only).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "engine.hpp"

namespace py = pybind11;
using namespace ff;

namespace {

Tok to_tok(py::handle h) {
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

py::object from_tok(const Tok& t) {
    switch (t.k) {
        case K_INT: return py::int_(t.i);
        case K_FLT: return py::float_(t.f);
        case K_STOP: return py::str("S" + std::to_string(t.i));
        case K_N: return py::str("N");
        case K_D: return py::str("D");
        case K_R: return py::str("R");
        default: return py::str("S");
    }
}

PVal to_pval(py::handle h) {
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
            auto arr = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(h);
            v.t = PVal::IVEC;
            v.iv.assign(arr.data(), arr.data() + arr.size());
            v.fv.assign(v.iv.begin(), v.iv.end());
            return v;
        }
        if (a.ndim() == 1 && kind == 'f') {
            auto arr = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(h);
            v.t = PVal::FVEC;
            v.fv.assign(arr.data(), arr.data() + arr.size());
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
            v.fv.reserve(n);
            if (ints) v.iv.reserve(n);
            PyObject** items = PySequence_Fast_ITEMS(o);
            for (Py_ssize_t i = 0; i < n; ++i) {
                if (ints) {
                    i64 x = PyLong_AsLongLong(items[i]);
                    v.iv.push_back(x);
                    v.fv.push_back((double)x);
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

// nodes: [(id, op, params, latency, out_ports)]; streams: [(id, src, src_port, [(dst, port)], depth, width)]
// (depth 0: the default, -1: unbounded); env: {"mode", "width", "frac", "unary": {name: callable}}.
// Returns (cycles, {stream: tokens}, [per node: dict of counters and result]) and, with trace, the traces.
py::tuple run_kernel_py(py::list nodes_in, py::list streams_in, i64 depth_default, py::dict env_in, bool trace,
                        py::object progress) {
    std::vector<Node> nodes;
    KernelResult partial;
    try {
        Env env;
        env.fixed = env_in["mode"].cast<std::string>() == "fixed";
        env.width = env_in["width"].cast<int>();
        env.frac = env_in["frac"].cast<int>();
        env.lo = -((i64)1 << (env.width - 1));
        env.hi = ((i64)1 << (env.width - 1)) - 1;
        env.half = env.frac ? (i64)1 << (env.frac - 1) : 0;
        env.zero = env.fixed ? Tok::Int(0) : Tok::Flt(0.0);
        py::dict unary = env_in["unary"];
        for (auto kv : unary) {
            py::object fn = py::reinterpret_borrow<py::object>(kv.second);
            bool fixed = env.fixed;
            env.unary_cb[kv.first.cast<std::string>()] = [fn, fixed](const Tok& a) {
                py::object r = fn(from_tok(a));
                return fixed ? Tok::Int(r.cast<i64>()) : Tok::Flt(r.cast<double>());
            };
        }
        nodes.resize(nodes_in.size());
        for (size_t i = 0; i < nodes.size(); ++i) {
            py::tuple t = nodes_in[i];
            Node& n = nodes[i];
            n.id = t[0].cast<std::string>();
            n.op = t[1].cast<std::string>();
            for (auto kv : t[2].cast<py::dict>()) {
                std::string key = kv.first.cast<std::string>();
                if (n.op == "_source" && key == "tokens") {
                    for (py::handle x : kv.second) n.src_tokens.push_back(to_tok(x));
                    continue;
                }
                n.params.m[key] = to_pval(kv.second);
            }
            n.latency = t[3].cast<i64>();
            n.out_ports = t[4].cast<std::vector<std::string>>();
            n.env = &env;
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
        RunHooks hooks;
        hooks.poll = [] {
            if (PyErr_CheckSignals() != 0) throw py::error_already_set();
        };
        std::unordered_map<std::string, std::pair<std::vector<i64>, std::vector<Tok>>> traces;
        hooks.trace = trace;
        hooks.traces = &traces;
        hooks.partial = &partial;
        if (!progress.is_none()) hooks.progress = [progress](i64 tokens, i64 cycles) { progress(tokens, cycles); };
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
                for (const Tok& t : n.res_vals) l.append(from_tok(t));
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
                for (const Tok& t : p.second) l.append(from_tok(t));
                sent[py::str(sid)] = l;
            }
            tr = py::make_tuple(logs, sent);
        }
        return py::make_tuple(res.cycles, counts, per_node, tr, stopped);
    } catch (const SimError& e) {
        raise_sim_error(e);
    }
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
}
