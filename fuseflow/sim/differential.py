"""Differential checking of the two simulator engines (issue "compiled simulator engine").

:func:`compare` runs one program on the Python reference engine and on the compiled engine and lists every
difference in what :func:`fuseflow.sim.run` returns, as human-readable lines (an empty list: the engines agree
exactly). The contract is exactness, so nothing is compared within a tolerance:

* outputs: the same names, shapes and dtypes, and the same bits (float64 compared as int64, so NaN payloads and
  -0.0 count);
* ``cycles``, ``kernel_cycles``, the totals of ``stats`` (tokens, ALU ops, bytes read and written, cycles,
  memory system) and, per kernel, every counter of ``stats["kernels"]`` (cycles, tokens per stream, busy /
  blocked / idle per node, stream and op bounds, memory timing);
* every written tensor (``res.tensors``): shape, format, each level's kind, size, seg and crd arrays, and the
  vals' bits;
* with ``trace=True``, the cycle and the token of every push on every stream;
* errors: when both engines raise, the same exception type and message is agreement (e.g. the same
  :class:`~fuseflow.errors.DeadlockError`); when only one raises, a mismatch.

A program the compiled engine cannot run (an op without a compiled model, blocked tensors, the engine not built)
raises :class:`Unsupported` (with the reason) before either engine runs, so a test can skip it.
"""

from __future__ import annotations

import struct

import numpy as np

from . import compiled
from .engine import load_program, run

#: stats keys that differ by design (host timing, which engine ran, the compiled engine's block arena)
_UNCOMPARED_STATS = ("wall_seconds", "cpu_seconds", "engine", "kernels", "block_arena")
#: at most this many lines per compared field (a broken model usually differs everywhere)
_MAX_LINES = 8


class Unsupported(Exception):
    """The compiled engine cannot run the program; ``why`` says why (:func:`fuseflow.sim.compiled.unsupported`)."""

    def __init__(self, why):
        self.why = why
        super().__init__(why)


def compare(prog, inputs, mode="float", **run_kwargs) -> list:
    """Run ``prog`` on ``inputs`` with both engines (``fuseflow.sim.run(..., engine="python")`` and
    ``engine="compiled"``, the same ``mode`` and other keyword arguments: ``fifo_depth``, ``trace``, ``memory``)
    and return every difference as a line of text; ``[]`` when the engines agree exactly.

    Raises :class:`Unsupported` when the compiled engine cannot run the program."""
    if "engine" in run_kwargs:
        raise TypeError("compare() runs both engines: do not pass engine=")
    prog = load_program(prog)
    why = compiled.unsupported(prog)
    if why is not None:
        raise Unsupported(why)
    results = []
    for engine in ("python", "compiled"):
        try:
            results.append((run(prog, inputs, mode=mode, engine=engine, **run_kwargs), None))
        except Exception as exc:  # noqa: BLE001 - any error is part of the contract: compared below
            results.append((None, exc))
    (ref, ref_exc), (got, got_exc) = results
    if ref_exc is not None or got_exc is not None:
        return _compare_errors(ref_exc, got_exc)
    return compare_results(ref, got)


def compare_results(ref, got) -> list:
    """The differences between two :class:`~fuseflow.sim.SimResult` (``ref`` from the Python engine)."""
    out = []
    if ref.mode != got.mode:
        out.append(f"mode: python {ref.mode!r}, compiled {got.mode!r}")
    out += _compare_arrays_dict("outputs", ref.outputs, got.outputs)
    if ref.cycles != got.cycles:
        out.append(f"cycles: python {ref.cycles}, compiled {got.cycles}")
    if list(ref.kernel_cycles) != list(got.kernel_cycles):
        out.append(f"kernel_cycles: python {list(ref.kernel_cycles)}, compiled {list(got.kernel_cycles)}")
    for key in sorted(set(ref.stats) | set(got.stats)):
        if key in _UNCOMPARED_STATS:
            continue
        out += _diff(f"stats[{key!r}]", ref.stats.get(key, _MISSING), got.stats.get(key, _MISSING))
    rk, gk = ref.stats.get("kernels", []), got.stats.get("kernels", [])
    if len(rk) != len(gk):
        out.append(f"stats['kernels']: python {len(rk)} kernels, compiled {len(gk)}")
    for a, b in zip(rk, gk):
        out += _diff(f"kernel {a.get('name')!r}", a, b)
    out += _compare_tensors(ref.tensors, got.tensors)
    for field in ("trace", "trace_tokens"):
        a, b = getattr(ref, field), getattr(got, field)
        if a is None and b is None:
            continue
        out += _diff(field, a, b)
    return out


# --- pieces ------------------------------------------------------------------------------------------------

class _Missing:
    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def _compare_errors(ref_exc, got_exc):
    if ref_exc is None:
        return [f"error: python ran, compiled raised {type(got_exc).__name__}: {got_exc}"]
    if got_exc is None:
        return [f"error: python raised {type(ref_exc).__name__}: {ref_exc}, compiled ran"]
    if type(ref_exc) is not type(got_exc) or str(ref_exc) != str(got_exc):
        return [f"error: python raised {type(ref_exc).__name__}: {ref_exc}; "
                f"compiled raised {type(got_exc).__name__}: {got_exc}"]
    return []


def _bits(a):
    """An array's bits, comparable exactly (float64 as int64: NaN and -0.0 included)."""
    a = np.ascontiguousarray(a)
    if a.dtype == np.float64:
        return a.view(np.int64)
    if a.dtype.kind == "f":
        return a.view(np.dtype(f"i{a.dtype.itemsize}"))
    return a


def _compare_array(what, a, b):
    if not isinstance(a, np.ndarray) or not isinstance(b, np.ndarray):
        return _diff(what, a, b)
    if a.shape != b.shape:
        return [f"{what}: shape python {a.shape}, compiled {b.shape}"]
    if a.dtype != b.dtype:
        return [f"{what}: dtype python {a.dtype}, compiled {b.dtype}"]
    if a.dtype == object:
        return _diff(what, a.tolist(), b.tolist())
    ba, bb = _bits(a), _bits(b)
    if np.array_equal(ba, bb):
        return []
    where = np.argwhere(ba != bb) if ba.ndim else np.zeros((1, 0), dtype=int)
    shown = ", ".join(f"[{','.join(map(str, ix))}] python {_show(a[tuple(ix)])} compiled {_show(b[tuple(ix)])}"
                      for ix in where[:4])
    more = f" (+{len(where) - 4} more)" if len(where) > 4 else ""
    return [f"{what}: {len(where)} of {a.size} elements differ: {shown}{more}"]


def _compare_arrays_dict(what, ra, ga):
    out = []
    if set(ra) != set(ga):
        out.append(f"{what}: names python {sorted(ra)}, compiled {sorted(ga)}")
    for name in sorted(set(ra) & set(ga)):
        out += _compare_array(f"{what}[{name!r}]", np.asarray(ra[name]), np.asarray(ga[name]))
    return out


def _compare_tensors(ra, ga):
    out = []
    if set(ra) != set(ga):
        out.append(f"tensors: names python {sorted(ra)}, compiled {sorted(ga)}")
    for name in sorted(set(ra) & set(ga)):
        a, b = ra[name], ga[name]
        what = f"tensors[{name!r}]"
        if tuple(a.shape) != tuple(b.shape):
            out.append(f"{what}.shape: python {a.shape}, compiled {b.shape}")
        if a.format != b.format:
            out.append(f"{what}.format: python {a.format}, compiled {b.format}")
        if len(a.levels) != len(b.levels):
            out.append(f"{what}: python {len(a.levels)} levels, compiled {len(b.levels)}")
        for lv, (la, lb) in enumerate(zip(a.levels, b.levels)):
            lw = f"{what}.levels[{lv}]"
            if type(la) is not type(lb):
                out.append(f"{lw}: python {type(la).__name__}, compiled {type(lb).__name__}")
                continue
            for attr in la.__slots__:
                va, vb = getattr(la, attr), getattr(lb, attr)
                if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
                    out += _compare_array(f"{lw}.{attr}", np.asarray(va), np.asarray(vb))
                elif va != vb:
                    out.append(f"{lw}.{attr}: python {va!r}, compiled {vb!r}")
        out += _compare_array(f"{what}.vals", np.asarray(a.vals), np.asarray(b.vals))
    return out


def _show(x):
    """A value as text; a float that its repr would not tell apart (NaN, a signed zero) with its bits."""
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and (x != x or x == 0.0):
        return f"{x!r} (0x{_float_bits(x) & (2**64 - 1):016x})"
    return repr(x)


def _float_bits(x):
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _same_scalar(a, b):
    """Exact equality of two leaves: the same type and value (floats by their bits)."""
    if isinstance(a, np.generic):
        a = a.item()
    if isinstance(b, np.generic):
        b = b.item()
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return _float_bits(a) == _float_bits(b)
    return a == b


def _diff(what, a, b, out=None):
    """Every difference between two nested structures (dicts, lists, tuples, arrays, scalars), at most
    _MAX_LINES lines."""
    out = [] if out is None else out
    if len(out) >= _MAX_LINES:
        return out
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        out += _compare_array(what, a, b)
    elif isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            only_a, only_b = sorted(map(str, set(a) - set(b))), sorted(map(str, set(b) - set(a)))
            out.append(f"{what}: keys only in python {only_a[:6]}, only in compiled {only_b[:6]}")
        for k in _sorted_keys(set(a) & set(b)):
            _diff(f"{what}[{k!r}]", a[k], b[k], out)
            if len(out) >= _MAX_LINES:
                _more(out)
                break
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            out.append(f"{what}: length python {len(a)}, compiled {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(f"{what}[{i}]", x, y, out)
            if len(out) >= _MAX_LINES:
                _more(out)
                break
    elif not _same_scalar(a, b):
        out.append(f"{what}: python {_show(a)} ({type(a).__name__}), compiled {_show(b)} ({type(b).__name__})")
    return out


def _more(out):
    if not out[-1].endswith("(further differences not listed)"):
        out.append("(further differences not listed)")


def _sorted_keys(keys):
    try:
        return sorted(keys)
    except TypeError:
        return sorted(keys, key=repr)


__all__ = ["compare", "compare_results", "Unsupported"]
