"""The compiled engine's Python side: binds a kernel for ``fuseflow.sim._engine`` and chooses the engine.

The compiled engine (C++ in ``fuseflow/sim/csrc/``, built by ``pip install``) runs the same kernels as
:func:`fuseflow.sim.engine.run_kernel`, with the same contract: the same DAM timing, counters, results and
errors. Op facts are not copied into C++: every node's latency (``registry.op_latency``), input depth
(``OpSpec.input_depth_for``), output ports, encoded constants and a coordinate mask's kept columns are bound
here from the registry, the number mode and :mod:`fuseflow.samml.masks`, once per node.

``engine="auto"`` (the default everywhere) takes the compiled engine when it is built and can run the
program; when it falls back to the Python engine it says why in one line on a terminal (once per reason), and
``SimResult.stats["engine"]`` names the engine that ran.
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np

from ..errors import FuseFlowError
from ..samml import masks
from ..samml.registry import OPS, REDUCE_MERGE, UNARY_ALU_OPS, check_mask_scan, memory_role, op_interval, op_latency
from ..tensors import fixed as _fixed
from ..tensors import fixedfn as _fixedfn

ENGINES = ("auto", "compiled", "python")

try:                                        # built by pip from fuseflow/sim/csrc (optional: needs a C++ compiler)
    from . import _engine
except ImportError:                         # pragma: no cover - depends on the machine
    _engine = None
if os.environ.get("FUSEFLOW_NO_COMPILED_ENGINE"):     # behave as on a machine without a C++ compiler
    _engine = None

_told = set()

#: ops whose compiled models have not been checked on block tokens (programs that pass blocks through them run
#: on the Python engine); none today: the blocks suite's entries all compare exactly
BLOCKS_UNCHECKED = frozenset()


def available() -> bool:
    """Whether the compiled engine was built on this machine."""
    return _engine is not None


def compiled_ops() -> frozenset:
    """The ops that have a compiled model."""
    return frozenset(_engine.ops()) if _engine is not None else frozenset()


def unsupported(prog) -> str | None:
    """Why the compiled engine cannot run ``prog`` (None when it can)."""
    if _engine is None:
        return "the compiled engine is not built (no C++ compiler when fuseflow was installed)"
    have = compiled_ops()
    missing = sorted({n.op for k in prog.kernels for n in k.nodes.values()} - have)
    if missing:
        return f"no compiled model for op {', '.join(missing)}"
    if any(t.block for t in prog.tensors.values()):
        unchecked = sorted({n.op for k in prog.kernels for n in k.nodes.values()} & BLOCKS_UNCHECKED)
        if unchecked:
            return f"blocked tensors through op {', '.join(unchecked)} run on the Python engine only"
    return None


def choose(engine: str, prog) -> str:
    """The engine that runs ``prog``: ``"compiled"`` or ``"python"``. ``auto`` falls back with one line on a
    terminal's stderr (once per reason); ``compiled`` raises when it cannot run the program."""
    if engine not in ENGINES:
        raise FuseFlowError("--engine", f"unknown engine {engine!r} (expected {', '.join(ENGINES)})")
    if engine == "python":
        return "python"
    why = unsupported(prog)
    if why is None:
        return "compiled"
    if engine == "compiled":
        raise FuseFlowError("--engine compiled", why)
    if why not in _told and _interactive():
        # on a terminal only: scripts and CI logs keep their one-line errors; res.stats["engine"] says it too
        _told.add(why)
        print(f"note: {why}: simulating with the Python engine", file=sys.stderr)
    return "python"


def _interactive() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class _Counted:
    """What run_kernel's callers read of a stream: its token count (and, traced, every push)."""
    __slots__ = ("count", "log", "sent")

    def __init__(self, count, log=None, sent=None):
        self.count, self.log, self.sent = count, log, sent


def _bound_params(st):
    """A node's parameters with the facts its compiled model reads bound from the registry."""
    p = dict(st.params)
    spec = OPS.get(st.op)
    if spec is not None:
        p["_input_depth"] = spec.input_depth_for(st.params)
        p["_interval"] = op_interval(st.op, st.params)       # as _input_depth, every op's (block_matmul: B)
        if spec.sim_facts is not None:         # e.g. spacc's emit start delay (checking its params as its model does)
            p.update(spec.sim_facts(st.params, f"node {st.id}"))
    merge = p.get("op")
    if isinstance(merge, str) and merge in REDUCE_MERGE:
        p["_merge"] = REDUCE_MERGE[merge]
    if p.get("const") is not None:
        p["_const"] = st.env.encode(p["const"])
    zero = st.env.zero
    if getattr(zero, "ndim", 0):                 # a node whose values are blocks: what its N loads
        p["_block"] = list(zero.shape)
    vals = p.get("vals")
    if memory_role(st.op) == ("read", "vals") and vals is not None and len(vals) and np.ndim(vals[0]) > 0:
        # block values as one (n, B[, B]) array, bound into the run's block arena
        p["_bvals"] = np.asarray(vals, dtype=np.int64 if st.env.mode == "fixed" else np.float64)
        del p["vals"]
    if spec is not None and any(q.name == "mask" for q in spec.params):
        p.update(_mask_params(st))
    return p


#: the ops that read a coordinate mask, and where their Python model takes the kept columns of a row from
#: (``runs``: :func:`fuseflow.samml.masks.row_runs`, which mask_scan walks; ``dense``:
#: :func:`fuseflow.samml.masks.dense_mask`, crd_mask's table)
_MASK_SOURCE = {"mask_scan": "runs", "crd_mask": "dense"}


def _mask_params(st):
    """A mask op's pattern as its compiled model reads it: the kept columns of every row as ascending runs
    (``_runs_ptr``: rows + 1 offsets; ``_runs``: lo, hi pairs), from the definition its Python model reads; or
    ``_error``, what ``check_mask_scan`` raises, which the model raises when it first runs (as the Python one)."""
    try:
        check_mask_scan(st.params, f"node {st.id}")
    except FuseFlowError as exc:
        return {"_error": [type(exc).__name__, exc.what, exc.why]}
    ptr, runs = _kept_runs(_MASK_SOURCE[st.op], masks.parse_mask(st.params["mask"]), st.params["rows"],
                           st.params["dim"])
    return {"_runs_ptr": ptr, "_runs": runs}


@functools.lru_cache(maxsize=32)
def _kept_runs(source, spec, rows, dim):
    if source == "runs":
        per_row = [masks.row_runs(spec, i, rows, dim) for i in range(rows)]
        ptr = np.cumsum([0] + [len(x) for x in per_row], dtype=np.int64)
        runs = np.array([v for x in per_row for run in x for v in run], dtype=np.int64)
        return ptr, runs
    keep = masks.dense_mask(spec, rows, dim).astype(np.int8)
    edge = np.diff(np.pad(keep, ((0, 0), (1, 1))), axis=1)       # +1 where a run starts, -1 after it ends
    srow, scol = np.nonzero(edge == 1)
    _, ecol = np.nonzero(edge == -1)                              # row-major: the ends pair with the starts
    ptr = np.concatenate(([0], np.cumsum(np.bincount(srow, minlength=rows)))).astype(np.int64)
    return ptr, np.stack((scol, ecol), axis=1).ravel().astype(np.int64)


@functools.lru_cache(maxsize=16)
def fixed_tables(fmt) -> dict:
    """The lookup tables and constants the compiled fixed-point functions read (csrc/functions.cpp), for
    :class:`~fuseflow.tensors.fixed.FixedFormat` ``fmt``: computed by the functions of fixed.py and fixedfn.py
    (the one definition, which the RTL generator also calls), never retyped in C++. Each table is ``(k, T)``
    with ``2**k + 1`` entries."""
    exp2 = _fixed.exp2_table(fmt)
    return {
        "exp2": ((len(exp2) - 1).bit_length() - 1, exp2),
        "tanh": _fixedfn.tanh_table(fmt),
        "gelu": _fixedfn.gelu_table(fmt),
        "log2": _fixedfn.log2_table(fmt),
        "log2e_q": _fixed.LOG2E_Q,
        "log2e_bits": _fixed.LOG2E_BITS,
        "exp_guard": _fixed.EXP_GUARD_BITS,
        "fn_guard": _fixedfn.FN_GUARD_BITS,
        "range_log2": _fixedfn.FN_RANGE_LOG2,
        "ln2_q": _fixedfn.LN2_Q,
        "ln2_bits": _fixedfn.LN2_BITS,
    }


#: float mode: the functions computed in C++ on NumPy's/SciPy's own float64 inner loop, and the loop each needs
LOOP_FUNCTIONS = {"exp": "exp", "sigmoid": "exp", "tanh": "tanh", "log": "log", "gelu": "erf"}

#: a few hundred probe values per loop: edges, every binade's neighbourhood, ranges where the routines switch
#: paths (exp's overflow/underflow, tanh's saturation, erf's intervals), random bit patterns
def _probes():
    rng = np.random.default_rng(20240611)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
             -1.7976931348623157e308, 709.782712893384, 709.7827128933841, -745.1332191019412, -708.3964185322641,
             19.06154746539849, -19.06154746539849, 1e-8, 1.0, -1.0, 0.5, 2.0, 1 - 2 ** -53, 1 + 2 ** -52]
    return np.concatenate([edges, rng.integers(0, 1 << 64, 96, dtype=np.uint64).view(np.float64),
                           rng.uniform(-750, 750, 64), rng.uniform(-25, 25, 64), rng.uniform(-1, 1, 32),
                           rng.uniform(0, 3, 32), 2.0 ** np.arange(-1074, 1024, 16, dtype=np.float64),
                           np.arange(-7, 7, 0.0625)])


def _ufunc_loop(uf):
    """``(loop, data)``: the addresses of ufunc ``uf``'s float64 ``d->d`` inner loop and its data, read from the
    PyUFuncObject (numpy/ufuncobject.h, public ABI), or None when anything about the object is not as expected."""
    import ctypes
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8 or not isinstance(uf, np.ufunc):
        return None
    try:
        i = list(uf.types).index("d->d")
        a, h = id(uf), object.__basicsize__                      # after PyObject_HEAD: int nin, nout, nargs, identity
        nin, nout, nargs = (ctypes.c_int.from_address(a + h + 4 * k).value for k in range(3))
        functions = ctypes.c_void_p.from_address(a + h + 16).value
        data = ctypes.c_void_p.from_address(a + h + 24).value
        ntypes = ctypes.c_int.from_address(a + h + 32).value
        name = ctypes.c_void_p.from_address(a + h + 40).value
        types = ctypes.c_void_p.from_address(a + h + 48).value
        if (nin, nout, nargs, ntypes) != (uf.nin, uf.nout, 2, uf.ntypes) or (nin, nout) != (1, 1):
            return None
        if not (functions and name and types) or ctypes.string_at(name).decode() != uf.__name__:
            return None
        d = np.dtype(np.float64).num
        if tuple(ctypes.string_at(types + 2 * i, 2)) != (d, d):
            return None
        fn = ctypes.c_void_p.from_address(functions + 8 * i).value
        arg = ctypes.c_void_p.from_address(data + 8 * i).value if data else None
        return (fn, arg or 0) if fn else None
    except Exception:                                            # pragma: no cover - an unexpected ufunc object
        return None


@functools.lru_cache(maxsize=1)
def float_loops() -> dict:
    """``{"exp"|"log"|"tanh"|"erf": (loop, data)}``: NumPy's/SciPy's float64 inner loops that the compiled
    engine calls for the float-mode functions of LOOP_FUNCTIONS (csrc/functions.cpp), once per process: each
    read from its ufunc object, then checked on the probe values through the engine against the Python
    engine's own functions, bit for bit; a loop that cannot be read or differs on any probe is left out (its
    functions call back into Python). Empty when FUSEFLOW_NO_NATIVE_FLOAT is set."""
    if _engine is None or os.environ.get("FUSEFLOW_NO_NATIVE_FLOAT"):
        return {}
    try:
        from scipy.special import erf
    except ImportError:                                          # pragma: no cover - scipy is a dependency
        erf = None
    found = {n: _ufunc_loop(uf) for n, uf in (("exp", np.exp), ("log", np.log), ("tanh", np.tanh), ("erf", erf))
             if uf is not None}
    found = {n: v for n, v in found.items() if v is not None}
    return {n: addr for n, addr in found.items() if loop_passes(n, addr)}


def loop_passes(loop: str, addr) -> bool:
    """Whether the compiled functions on float loop ``loop`` at ``addr = (loop, data)`` give the Python engine's
    results, bit for bit, on the probe values."""
    xs = _probes()
    cenv = {"mode": "float", "width": 32, "frac": 16, "unary": {}, "loops": {loop: addr}}
    for name in (n for n, need in LOOP_FUNCTIONS.items() if need == loop):
        ref = _fixed.FLOAT_UNARY_OPS[name]
        want = np.array([ref(float(v)) for v in xs], dtype=np.float64)
        try:
            got = _engine.unary(name, cenv, xs)
        except Exception:                                        # pragma: no cover
            return False
        if not np.array_equal(got.view(np.int64), want.view(np.int64)):
            return False
    return True


def native_unary(mode: str) -> frozenset:
    """The unary alu ops the compiled engine computes in C++ in number mode ``mode``; the others call back
    into the Python function per value (csrc/functions.cpp says why each one is or is not native). In float
    mode exp, sigmoid, tanh, log and gelu are native when their NumPy/SciPy loop passed :func:`float_loops`."""
    if _engine is None:
        return frozenset()
    names = set(_engine.native_unary(mode))
    if mode == "float":
        loops = float_loops()
        names |= {n for n, need in LOOP_FUNCTIONS.items() if need in loops}
    return frozenset(names)


def bind_env(env) -> dict:
    """The number mode :class:`~fuseflow.sim.engine.Env` as the compiled engine takes it: the format, the
    Python functions of the unary ops that have no native version, (fixed mode) the function tables and (an
    Env with blocks) the Python Env's vectorised ops on blocks."""
    native = native_unary(env.mode)
    cenv = {"mode": env.mode, "width": env.fixed.width, "frac": env.fixed.frac,
            "unary": {n: f for n, f in env.unary.items() if n not in native}}
    if env.mode == "fixed":
        cenv["tables"] = fixed_tables(env.fixed)
    else:
        cenv["loops"] = float_loops()
    if getattr(env, "blocks", False):
        # the unary functions on blocks: the Python Env's vectorised ops (matmul and row reductions are native;
        # rows is called only for its error on a value that is not a block)
        cenv.update(blocks=True, rows=dict(env.row_reduce),
                    unary_block={n: env.unary[n] for n in UNARY_ALU_OPS if n not in ("neg", "relu")})
    return cenv


#: the counters of a kernel's block arena (``run_kernel(arena=...)``; summed over the kernels, peaks the largest,
#: in ``SimResult.stats["block_arena"]`` of a compiled run with blocks): ``bound_blocks`` (array values, read
#: in place from the packed tensors, and zero blocks, kept for the whole run), ``blocks_made`` (by the ops during the run), ``peak_blocks`` (the most
#: arena slots those took at once: freed blocks' slots are reused), ``live_blocks`` (taken at the end, outputs
#: included), ``storage_bytes`` (the arena's storage: its peak, it never shrinks), ``collections`` and ``freed``
#: (the collections run and the blocks they returned to the free lists)
ARENA_COUNTERS = ("bound_blocks", "blocks_made", "peak_blocks", "live_blocks", "storage_bytes", "collections",
                  "freed")
#: counters that are peaks (the largest over the kernels), the others are summed
ARENA_PEAKS = ("peak_blocks", "storage_bytes")
#: tests: collect once this many values were made since the last collection (None: the engine's default, a
#: chunk of 2**17 values, or more as the arena grows); 0 collects at every poll of the scheduler (every 256
#: rounds) and overwrites each freed block with a marker (0xA5 bytes), so a stale read changes the results
ARENA_MIN_VALUES = None


def run_kernel(nodes, streams, depth_default=2, widths=None, env=None, trace=False, unbounded=None, progress=None,
               progress_seconds=0.5, arena=None):
    """:func:`fuseflow.sim.engine.run_kernel` on the compiled engine: the same arguments (``env``, the number
    mode, is the nodes' :class:`~fuseflow.sim.engine.Env`), the same return value; writes the counters and
    results into the nodes' states. ``progress(tokens, cycles)`` is called about twice a second. On Ctrl-C the
    counters so far are written and the KeyboardInterrupt is raised with ``partial = (cycles, outs)``.

    ``arena``: a dict to fill with the counters of the kernel's block arena (:data:`ARENA_COUNTERS`)."""
    widths = widths or {}
    index = {st.id: i for i, st in enumerate(nodes)}
    cnodes = []
    for st in nodes:
        spec = OPS.get(st.op)
        outs = [name for name, _ in spec.output_ports(st.params)] if spec else []
        lat = op_latency(st.op, st.params, env.fixed) if spec else 1
        cnodes.append((st.id, st.op, _bound_params(st), lat, outs))
    cstreams = []
    for sid, (src, sport), dsts, depth in streams:
        code = -1 if unbounded is not None and depth == unbounded else (depth or 0)
        cstreams.append((sid, index[src], sport, [(index[d], p) for d, p in dsts], code, widths.get(sid, 0)))
    cenv = dict(bind_env(env), progress_seconds=progress_seconds)
    if ARENA_MIN_VALUES is not None:
        cenv["arena_min_values"] = int(ARENA_MIN_VALUES)
    cycles, counts, per_node, traced, stopped, arena_counts = _engine.run_kernel(cnodes, cstreams, depth_default,
                                                                                 cenv, trace, progress)
    if arena is not None:
        arena.update(arena_counts)
    for st, d in zip(nodes, per_node):
        st.busy, st.blocked, st.alu_ops = d["busy"], d["blocked"], d["alu_ops"]
        st.mem_reads, st.mem_writes, st.moved, st.clock = d["mem_reads"], d["mem_writes"], d["moved"], d["clock"]
        if d["result"] is not None:
            st.result = d["result"]
    if trace:
        logs, sent = traced
        outs = {sid: _Counted(c, logs.get(sid, []), sent.get(sid, [])) for sid, c in counts.items()}
    else:
        outs = {sid: _Counted(c) for sid, c in counts.items()}
    if stopped is not None:
        stopped.partial = (cycles, outs)
        raise stopped
    return cycles, outs, {}
