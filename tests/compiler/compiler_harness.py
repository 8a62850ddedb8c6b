"""Helpers for compiler tests: random inputs for a program, compile + simulate + compare with NumPy."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fuseflow.compiler import EinsumProgram, compile_program
from fuseflow.samml import expr as E


def random_tensor(shape, density, rng, levels=None):
    """A dense array with about ``density`` nonzeros (values in [-2,-0.5] U [0.5, 2])."""
    vals = rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    mask = rng.random(shape) < density
    return np.where(mask, vals, 0.0)


def inputs_for(ir, rng, density=0.4, densities=None):
    out = {}
    for t in ir.tensors.values():
        if t.role != "input":
            continue
        d = (densities or {}).get(t.name, density)
        if t.levels is not None and all(l == "dense" for l in t.levels) and densities is None:
            d = 1.0 if density >= 0.3 else density
        out[t.name] = random_tensor(t.shape, d, rng)
    return out


def reference(ir, inputs):
    """Dense NumPy results of every statement (evaluated one statement at a time: index names are local
    to a statement)."""
    env = {k: (v.toarray() if hasattr(v, "toarray") else np.asarray(v, dtype=float)) for k, v in inputs.items()}
    out = {}
    for st in E.parse_statements(ir.expr_text().replace("; ", "\n")):
        res = E.evaluate([st], env)
        env.update(res)
        out.update(res)
    return out


def run_and_check(src, inputs=None, fuse="full", order=None, rng=None, iteration="factored", rtol=1e-9,
                  atol=1e-9, fifo_depth=None, mode="float", general_transposes=False, locate=True):
    """Compile ``src`` (text or EinsumProgram), simulate (float mode, or fixed mode: then compare within
    ``atol``), compare every output with NumPy. ``general_transposes`` builds every permuted copy with the
    general transpose kernel. Returns (compile result, sim result)."""
    import fuseflow.sim as sim
    if isinstance(src, str):
        src = EinsumProgram.parse(src)
    ir = src.to_ir() if hasattr(src, "to_ir") else src
    rng = rng or np.random.default_rng(0)
    if inputs is None:
        inputs = inputs_for(ir, rng)
    res = compile_program(ir, fuse=fuse, order=order, iteration=iteration, locate=locate,
                          general_transposes=general_transposes)
    used = {t.name for t in res.program.inputs}
    out = sim.run(res.program, {k: v for k, v in inputs.items() if k in used}, mode=mode,
                  fifo_depth=fifo_depth)
    ref = reference(ir, inputs)
    for name in ir.outputs:
        np.testing.assert_allclose(out.outputs[name], ref[name], rtol=rtol, atol=atol,
                                   err_msg=f"output {name} (fuse={fuse}, order={order})")
    return res, out
