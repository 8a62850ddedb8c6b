"""alu: element-wise arithmetic on aligned value streams; stops must match and pass through.

A pipelined operation (``registry.op_latency`` > 1) fires as the combinational ones do, into the output
pipeline of :func:`._common.pipeline` (which delivers the results as the output has room)."""

from ...samml.registry import UNARY_ALU_OPS, op_latency
from ._common import bad, pipeline


def run(st, ins, outs):
    latency = op_latency("alu", st.params, st.env.fixed)
    if latency == 1:
        return fire(st, ins, outs["out"])
    stage_in, drain = pipeline(st, outs["out"], latency)
    return fire(st, ins, stage_in), drain


def fire(st, ins, out):
    """The firing side: one token per cycle from a (and b) to ``out`` (the output or the pipeline)."""
    p = st.params
    op = p["op"]
    a = ins["a"]
    env = st.env
    zero = env.zero
    unary = op in UNARY_ALU_OPS
    if unary:
        f = env.unary[op]
        b = None
    else:
        f = env.binary[op]
        const = p.get("const")
        b = None if const is not None else ins.get("b")
        if b is None:
            if const is None:
                raise bad(st, "binary op without input b or const")
            cval = env.encode(const)
    clock = -1
    ops = 0
    while True:
        while not a.toks:
            yield a
        if b is not None:
            while not b.toks:
                yield b
            tin = max(clock + 1, a.times[0] + 1, b.times[0] + 1)
        else:
            tin = max(clock + 1, a.times[0] + 1)
        x = a.toks[0]
        y = b.toks[0] if b is not None else (None if unary else cval)
        xs = x.__class__ is str and x != "N"
        if xs:
            if b is not None and y != x:
                raise bad(st, f"operands out of step: a has {x!r}, b has {y!r}")
            v = x
        else:
            if x == "N":
                x = zero
            if b is not None:
                if y.__class__ is str:
                    if y != "N":
                        raise bad(st, f"operands out of step: a has {x!r}, b has {y!r}")
                    y = zero
            v = f(x) if unary else f(x, y)
            ops += 1
        r = out.room()
        while r is None:
            yield out
            r = out.room()
        t = tin if tin >= r else r
        st.blocked += t - tin
        a.pop(t)
        if b is not None:
            b.pop(t)
        out.push(v, t)
        clock = t
        if t > st.clock:
            st.clock = t
        st.busy += 1
        if v == "D":
            st.alu_ops += ops
            return
