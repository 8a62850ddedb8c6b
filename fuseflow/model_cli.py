"""``fuseflow compile model.py:Class``: compile a PyTorch model (a thin wrapper over :func:`fuseflow.compile`).

    fuseflow compile model.py:GCN --inputs data.npz -o out/gcn [--fuse none|regions|full|auto] [--mode fixed]
                     [--check] [--report] [--ff] [--build build/] [--rtl-sim] [--args '{"hidden": 8}']
    fuseflow compile gcn --check --report          # a bundled model (gcn, graphsage, autoencoder, decoder)

The model is ``Class(**args)`` from ``model.py``. Example inputs: ``--inputs FILE.npz`` with one array per
``forward`` argument, by name (SciPy sparse matrices become sparse CSR tensors), else ``Class.example_inputs()``
or a module-level ``example_inputs()`` in ``model.py``; bundled models bring their own data. ``-o`` writes
graph.json, model.ff and the saved model; ``--build`` Verilog and the manifest; ``--rtl-sim`` runs Verilator
and compares bit for bit with the simulator. An op the front end cannot lower is one line ``error: <op> at
<module path>: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .cli import describe, output_dir
from .errors import FuseFlowError


def parser():
    ap = argparse.ArgumentParser(prog="fuseflow compile", description=describe(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="FILE.py:CLASS (a torch.nn.Module subclass) or a bundled model name "
                                  "(gcn, graphsage, autoencoder, decoder)")
    ap.add_argument("--args", default="{}", help="JSON object of keyword arguments for the model's constructor")
    ap.add_argument("--inputs", help=".npz with one array per forward() argument (by name)")
    ap.add_argument("--fuse", default="regions",
                    help="none | regions (one region per child module; default) | full | auto (the "
                         "autoscheduler fuses or splits each region and picks the orders, simulating the best "
                         "few schedules on the example inputs) | module names, comma-separated (one region each)")
    ap.add_argument("--max-nodes", type=int, help="--fuse auto: resource budget in SAMML nodes")
    ap.add_argument("--max-kernels", type=int, help="--fuse auto: resource budget in kernels")
    ap.add_argument("--max-lanes", type=int, help="--fuse auto: also choose parallel factors, at most this many "
                                                  "lanes per kernel")
    ap.add_argument("--budget", type=float, help="--fuse auto: time budget in seconds (default 60)")
    ap.add_argument("--no-simulate", action="store_true", help="--fuse auto: rank with the cost model only, "
                                                               "simulate no candidate")
    ap.add_argument("--redundancy", choices=("warn", "rewrite", "ignore"), default="warn",
                    help="a fused kernel that does more work than unfused (cost model): warn (default), rewrite "
                         "(materialise what it recomputes) or ignore")
    ap.add_argument("--order", help="dataflow order for the compiler, e.g. i,k,j")
    ap.add_argument("-o", "--output", type=output_dir, help="directory for graph.json, model.ff and the saved model")
    ap.add_argument("--ff", action="store_true", help="print the lowered program as .ff text")
    add_action_arguments(ap, "the PyTorch model")
    return ap


def add_action_arguments(ap, against: str) -> None:
    """What to do with the compiled program, the same for a PyTorch model and a ``.ff`` program."""
    ap.add_argument("--mode", choices=("float", "fixed"), default="fixed",
                    help="number mode of --simulate/--check/--report (default fixed, the hardware's; 'fuseflow sim "
                         "run' defaults to float)")
    ap.add_argument("--simulate", action="store_true", help="run the reference simulator and print cycles")
    ap.add_argument("--engine", choices=("auto", "compiled", "python"), default="auto",
                    help="simulator engine: auto (default: compiled when built), compiled or python")
    ap.add_argument("--check", action="store_true", help=f"simulate and compare with {against}; exit 1 on mismatch")
    ap.add_argument("--report", action="store_true", help="print the per-kernel table (cycles, tokens, ALU ops, "
                                                          "bytes, FIFO slots)")
    ap.add_argument("--build", metavar="DIR", type=output_dir, help="write Verilog and the manifest here")
    ap.add_argument("--rtl-sim", action="store_true", help="run the RTL on Verilator against the simulator")
    ap.add_argument("--progress", action="store_true",
                    help="show the progress of long steps (--fuse auto's ranking and simulations, the RTL's "
                         "elaboration and Verilator build) on stderr even when it is not a terminal")


def run_actions(m, args) -> int:
    """--simulate, --check, --report, --build and --rtl-sim on the compiled model ``m``; the exit status."""
    status = 0
    if args.simulate and not args.check:
        print(f"  simulated: {m.simulate(mode=args.mode, engine=args.engine).summary()}")
    if args.check:
        c = m.check(mode=args.mode, engine=args.engine)
        print(f"  simulated: {c.simulation.summary()}")
        print(f"  check: {c.summary()}")
        for p in c.problems:
            print(f"  MISMATCH {p}")
        status = 0 if c.ok else 1
    if args.report:
        print(m.report(mode=args.mode))
    if args.build:
        paths = m.build(args.build)
        print(f"wrote {paths['verilog']}, {paths['manifest']}")
    if args.rtl_sim:
        r = m.rtl_sim(progress=args.progress or sys.stderr.isatty())
        same = "bit-identical" if r["ok"] else f"DIFFERENT ({'; '.join(r['mismatches'][:2]) or r['stuck']})"
        built = r.get("build", {})
        how = ("; build reused from the cache" if built.get("cached") else
               f"; built in {built['seconds']:.0f} s (cached for later runs)" if built else "")
        print(f"  RTL (Verilator): {r['rtl_cycles']} cycles, simulator {r['sim_cycles']} "
              f"({'equal' if r['cycles_equal'] else 'different'}); outputs {same}{how}")
        status = status or (0 if r["ok"] else 1)
    return status


def load_model(spec: str, kwargs: dict):
    """(model, example inputs or None, forward argument names) from ``FILE.py:CLASS`` or a bundled name."""
    import importlib.util
    import inspect
    import torch
    if ":" not in spec and not spec.endswith(".py"):
        from .models import MODELS, example
        if spec not in MODELS:
            raise FuseFlowError(spec, f"not a FILE.py:CLASS nor a bundled model ({', '.join(MODELS)})")
        model, inputs = example(spec, **kwargs)
        return model, inputs
    path, _, cls_name = spec.rpartition(":")
    if not path or not cls_name:
        raise FuseFlowError(spec, "expected FILE.py:CLASS")
    if not os.path.exists(path):
        raise FileNotFoundError(2, "No such file or directory", path)
    mod_name = "_fuseflow_user_model"
    here = os.path.dirname(os.path.abspath(path))
    if here not in sys.path:                  # the model file imports its sibling modules, as `python model.py` would
        sys.path.insert(0, here)
    s = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(s)
    try:
        s.loader.exec_module(module)
    except Exception as exc:
        raise FuseFlowError(path, f"importing it failed: {type(exc).__name__}: {exc}") from None
    cls = getattr(module, cls_name, None)
    if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):
        raise FuseFlowError(spec, f"{cls_name} is not a torch.nn.Module subclass in {path}")
    try:
        model = cls(**kwargs)
    except TypeError as exc:
        raise FuseFlowError(spec, f"cannot construct it: {exc}") from None
    inputs = None
    for maker in (getattr(cls, "example_inputs", None), getattr(module, "example_inputs", None)):
        if callable(maker):
            inputs = maker() if maker is getattr(module, "example_inputs", None) else maker(model) \
                if not isinstance(inspect.getattr_static(cls, "example_inputs"), (staticmethod, classmethod)) \
                else maker()
            break
    return model, inputs


def inputs_from_npz(path: str, model, data=None):
    """The ``forward()`` arguments of ``model`` from the tensor file ``path`` (``data``: its contents, already
    loaded)."""
    import inspect
    import numpy as np
    import scipy.sparse as sp
    import torch
    from .tensors.io import check_no_nan, load_tensor_file
    data = load_tensor_file(path) if data is None else data
    names = [p for p in inspect.signature(model.forward).parameters]
    missing = [n for n in names if n not in data]
    if missing:
        raise FuseFlowError(path, f"no array for forward() argument(s) {', '.join(missing)} "
                                  f"(has: {', '.join(sorted(data)) or 'none'})")
    out = []
    for n in names:
        v = data[n]
        check_no_nan(v, f"{path}:{n}")
        if sp.issparse(v):
            v = sp.csr_matrix(v)
            out.append(torch.sparse_csr_tensor(torch.from_numpy(v.indptr.astype(np.int64)),
                                               torch.from_numpy(v.indices.astype(np.int64)),
                                               torch.from_numpy(v.data.astype(np.float32)), size=v.shape,
                                               check_invariants=False))
        else:
            out.append(torch.from_numpy(np.asarray(v, dtype=np.float32)))
    return tuple(out)


def main(argv=None):
    args = parser().parse_args(argv)
    data = None
    if args.inputs:                       # read (and size-check) the data before torch and the model load
        from .tensors.io import load_tensor_file
        data = load_tensor_file(args.inputs)
    import warnings
    warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise FuseFlowError("compile", "PyTorch models need the torch extra: pip install 'fuseflow[torch]'") from None
    import fuseflow
    try:
        kwargs = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise FuseFlowError("--args", f"not JSON: {exc.msg}") from None
    if not isinstance(kwargs, dict):
        raise FuseFlowError("--args", "must be a JSON object")
    model, inputs = load_model(args.model, kwargs)
    if args.inputs:
        inputs = inputs_from_npz(args.inputs, model, data)
    if inputs is None:
        raise FuseFlowError(args.model, "no example inputs: give --inputs FILE.npz or define example_inputs()")
    fuse = args.fuse if args.fuse in ("none", "regions", "full", "auto") else \
        [n.strip() for n in args.fuse.split(",")]
    model.eval()
    from .compiler.redundancy import FusionRedundancyWarning
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FusionRedundancyWarning)     # printed below, one line each
        m = fuseflow.compile(model, inputs, fuse=fuse, order=args.order, mode=args.mode, max_nodes=args.max_nodes,
                             max_kernels=args.max_kernels, max_lanes=args.max_lanes, redundancy=args.redundancy,
                             budget=args.budget, simulate=not args.no_simulate,
                             progress=fuse == "auto" and (args.progress or sys.stderr.isatty()))
    print(f"{m.name}: {len(m.program.kernels)} kernel(s), {sum(len(k.nodes) for k in m.program.kernels)} nodes, "
          f"compiled in {m.compile_seconds:.2f} s (fuse={args.fuse})")
    for r in m.redundancies:
        print(f"{'note' if r.action else 'warning'}: {r.line()}")
    if m.schedule is not None:
        c = m.schedule
        groups = " ".join("{" + ",".join(g) + "}" for g in c.groups or [])
        lanes = ",".join(f"{i}={f}" for i, f in (c.parallel or {}).items()) or "none"
        cycles = (f"{c.simulated_cycles} simulated cycles" if c.simulated_cycles is not None else
                  f"{c.estimated_cycles:.0f} estimated cycles (not simulated)")
        print(f"  auto: {c.fuse} {groups}; parallel {lanes}; {cycles} with hbm2 ({len(m.candidates)} schedules "
              f"ranked)")
        for line in m.schedule_report.report().splitlines()[1:]:
            print(f"  {line}")
    if args.ff:
        print(m.ff_text, end="")
    if args.output:
        m.save(args.output)
        print(f"wrote {args.output}/graph.json, model.ff, model.json, constants.npz")
    return run_actions(m, args)


if __name__ == "__main__":
    from .cli import main_guard
    sys.exit(main_guard(main))
