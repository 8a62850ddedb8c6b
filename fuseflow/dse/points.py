"""One design point: a program compiled with a schedule, given data, simulated and estimated.

:func:`run_point` is the function every sweep task calls (a top-level function of plain arguments, so Dask
workers can run it): it compiles ``.ff`` text with a fusion granularity and an optional order, builds inputs
(random of a density, or a graph adjacency from :mod:`fuseflow.dse.graphs`), runs the simulator once and
returns counters, cycles under every memory preset (from the per-kernel counters, :func:`recharge`) and the
cost heuristic's estimate.
"""

from __future__ import annotations

import time

from ..compiler import compile_program
from ..compiler.cost import estimate
from ..compiler.frontend import EinsumProgram
from ..samml import kernels
from ..sim import engine
from ..sim.memory import PRESETS, recharge


def make_inputs(program, data: dict) -> dict:
    """Inputs for ``program``: ``{"density": p, "seed": s}`` (random, dense tensors full) and optionally
    ``{"graph": {family, n, ...}, "adjacency": "A"}`` (that tensor from a networkx graph) or ``{"mask": {"tensor":
    "M", "spec": "bigbird:..."}}`` (that tensor the 0/1 matrix of a coordinate mask, :mod:`fuseflow.samml.masks`)."""
    inputs = kernels.random_inputs(program, density=data.get("density", 0.3), seed=data.get("seed", 0))
    if "mask" in data:
        from ..samml.masks import dense_mask, parse_mask
        name = data["mask"].get("tensor", "M")
        shape = next(t.shape for t in program.inputs if t.name == name)
        inputs[name] = dense_mask(parse_mask(data["mask"]["spec"], "data"), *shape).astype(float)
    if "graph" in data:
        from .graphs import adjacency
        inputs[data.get("adjacency", "A")] = adjacency(**data["graph"])
    return inputs


def run_point(text: str, fuse: str = "regions", order=None, data: dict | None = None, simulate: bool = True,
              mode: str = "float", parallel: dict | None = None) -> dict:
    """Compile ``text`` with ``fuse``/``order`` (and ``parallel`` lanes), simulate on ``data`` and estimate;
    returns a JSON-able dict."""
    data = data or {}
    t0 = time.perf_counter()
    result = compile_program(EinsumProgram.parse(text), fuse=fuse, order=order, parallel=parallel)
    program = result.program
    compile_s = time.perf_counter() - t0
    inputs = make_inputs(program, data)
    t1 = time.perf_counter()
    orders = [list(p.order) for p in result.plans if hasattr(p, "order")]
    out = {"fuse": fuse, "order": order, "parallel": parallel, "kernels": len(program.kernels), "orders": orders,
           "compile_s": compile_s, "estimate": None}
    est = estimate(program, inputs=inputs, mode=mode)
    est_hbm2 = estimate(program, inputs=inputs, mode=mode, memory="hbm2")
    out["estimate"] = {"alu_ops": est.alu_ops, "bytes": est.bytes, "cycles": est.cycles,
                       "cycles_hbm2": est_hbm2.cycles}
    out["estimate_s"] = time.perf_counter() - t1
    if simulate:
        t2 = time.perf_counter()
        res = engine.run(program, inputs, mode=mode)
        out.update({"sim_s": time.perf_counter() - t2, **counters(res.stats)})
        assert out["cycles"]["onchip"] == res.cycles
    return out


def counters(stats: dict) -> dict:
    """A simulation's counters as a point records them: ALU ops, bytes moved, tokens, cycles under every memory
    preset (:func:`fuseflow.sim.memory.recharge`)."""
    return {"alu_ops": stats["alu_ops"], "bytes": stats["mem_read_bytes"] + stats["mem_write_bytes"],
            "read_bytes": stats["mem_read_bytes"], "write_bytes": stats["mem_write_bytes"], "tokens": stats["tokens"],
            "cycles": {name: recharge(stats, name) for name in PRESETS}}


def paper_model(model: str, dataset: str = "cora", size: str = "paper"):
    """(PyTorch model, inputs) of one of Figure 12's models: ``gcn`` / ``graphsage`` (two layers, hidden 16) on
    ``dataset`` (:func:`fuseflow.datasets.load`; ``size`` "small" / "medium" take a breadth-first sample of
    200 / 1,000 nodes), ``autoencoder`` / ``attention`` / ``decoder`` at ``size`` (:func:`fuseflow.models.example`)."""
    from .. import datasets
    from ..errors import FuseFlowError
    from ..models import example, gcn_for, graphsage_for
    if model in ("gcn", "graphsage"):
        g = datasets.load(dataset)
        sample = {"small": 200, "medium": 1000}.get(size)
        if sample and sample < g.nodes:
            g = g.subgraph(g.bfs(sample))
        return (gcn_for if model == "gcn" else graphsage_for)(g)
    if model in ("autoencoder", "attention", "decoder"):
        return example(model, size=size)
    raise FuseFlowError("model", f"unknown Figure 12 model {model!r} (known: {', '.join(PAPER_MODELS)})")


#: the models :func:`paper_model` builds
PAPER_MODELS = ("gcn", "graphsage", "autoencoder", "attention", "decoder")


def run_model_point(model: str, fuse=None, dataset: str = "cora", size: str = "paper", engine: str = "auto",
                    config: str | None = None, mode: str = "float") -> dict:
    """Compile one of Figure 12's PyTorch models (:func:`paper_model`) with ``fuse`` (or the model's own
    ``FUSION[config]``: "unfused" / "partial" / "full"), simulate it in ``mode`` (float by default) and check it
    against PyTorch; counters and cycles under every memory preset, as :func:`run_point`."""
    from .. import compile as compile_model
    from ..errors import FuseFlowError
    torch_model, inputs = paper_model(model, dataset, size)
    if config is not None:
        if config not in torch_model.FUSION:
            raise FuseFlowError("config", f"{model} has no fusion configuration {config!r} (known: "
                                          f"{', '.join(torch_model.FUSION)})")
        fuse = torch_model.FUSION[config]
    if fuse is None:
        raise FuseFlowError("fuse", "give fuse or config")
    t0 = time.perf_counter()
    m = compile_model(torch_model, inputs, fuse=fuse, mode=mode)
    compile_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    check = m.check(engine=engine)
    s = check.simulation.stats
    return {"model": model, "config": config,
            "fuse": fuse if isinstance(fuse, str) else f"{len(fuse)} module groups (the model's FUSION)",
            "dataset": dataset if model in ("gcn", "graphsage") else None, "size": size, "mode": mode,
            "kernels": len(m.program.kernels), "nodes": sum(len(k.nodes) for k in m.program.kernels),
            "engine": s["engine"], "compile_s": compile_s, "sim_s": time.perf_counter() - t1,
            "check_ok": bool(check.ok), "max_rel_error": check.max_rel_error, **counters(s)}
