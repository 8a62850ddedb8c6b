"""block_matmul: out = a @ b per token (a B x B block times a B x B block or a B-vector); N is a zero block.

Initiation interval B (``registry.op_interval``): a firing on data takes the op for B cycles (one output row
per cycle), a stop or D for 1. The result is visible ``registry.op_latency`` cycles after the firing, through
the output pipeline of :func:`._common.pipeline`. Stops must match on a and b and pass through."""

import numpy as np

from ...samml.registry import op_interval, op_latency
from ..tokens import as_block
from ._common import bad, fire_at, pipeline


def run(st, ins, outs):
    stage_in, drain = pipeline(st, outs["out"], op_latency("block_matmul", st.params, st.env.fixed))
    return fire(st, ins, stage_in), drain


def fire(st, ins, out):
    """The firing side: one (a, b) pair per firing; a data firing holds the op for ``op_interval`` cycles."""
    n = st.params["block"]
    interval = op_interval("block_matmul", st.params)
    matmul = st.env.matmul
    dtype = np.int64 if st.env.mode == "fixed" else np.float64
    zero_a = np.zeros((n, n), dtype)
    zero_b = np.zeros((n, n) if st.params.get("rhs", "matrix") == "matrix" else (n,), dtype)
    a, b = ins["a"], ins["b"]
    free = 0                       # the first cycle the op may fire again
    ops = 0
    while True:
        while not a.toks:
            yield a
        while not b.toks:
            yield b
        tin = max(free, a.times[0] + 1, b.times[0] + 1)
        x, y = a.toks[0], b.toks[0]
        xs, ys = x.__class__ is str and x != "N", y.__class__ is str and y != "N"
        if xs or ys:
            if not (xs and ys and x == y):
                raise bad(st, f"operands out of step: a has {_show(x)}, b has {_show(y)}")
            v, busy = x, 1
        else:
            x = zero_a if x.__class__ is str else x
            y = zero_b if y.__class__ is str else y
            if np.shape(x) != zero_a.shape or np.shape(y) != zero_b.shape:
                raise bad(st, f"operand shapes {np.shape(x)} and {np.shape(y)} do not fit block {n} "
                              f"(a {zero_a.shape}, b {zero_b.shape})")
            v, busy = as_block(matmul(x, y)), interval
            ops += 1
        t = yield from fire_at(st, [out], tin)
        a.pop(t)
        b.pop(t)
        out.push(v, t)
        free = t + busy
        st.clock = max(st.clock, t + busy - 1)      # the op is busy until its last row has entered
        st.busy += busy
        if v.__class__ is str and v == "D":
            st.alu_ops += ops
            return


def _show(tok):
    return repr(tok) if tok.__class__ is str else f"a {np.shape(tok)} block"
