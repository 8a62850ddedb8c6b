"""Tracing a PyTorch module with ``torch.fx`` and running it once on example inputs.

The tracer records, for every graph node, the path of the module it was created in (``conv1``,
``block.attn``), so that fusion regions can follow the model's child modules and errors can say where an
op sits. :func:`concrete_values` runs the traced graph once on the example inputs and keeps every node's
value: shapes, and the values of nodes that do not depend on the inputs (weights, masks, sizes), which the
lowering treats as constants.
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ...errors import ProgramError

#: methods and functions that read only a tensor's metadata, never its values
SHAPE_QUERIES = {"size", "dim", "numel", "shape", "dtype", "device", "ndim"}


class _Tracer(fx.Tracer):
    """``torch.fx`` tracer that tags nodes with the module path they come from."""

    def __init__(self):
        super().__init__()
        self.path = []
        self.failed_at = None

    def call_module(self, m, forward, args, kwargs):
        name = self.path_of_module(m)
        self.path.append(name)
        try:
            return super().call_module(m, forward, args, kwargs)
        except Exception:
            if self.failed_at is None:
                self.failed_at = name
            raise
        finally:
            self.path.pop()

    def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
        node = super().create_node(kind, target, args, kwargs, name, type_expr)
        node.meta["ff_path"] = self.path[-1] if self.path else ""
        return node


def trace(model: torch.nn.Module) -> fx.GraphModule:
    """Symbolically trace ``model``; one-line :class:`ProgramError` when torch.fx cannot."""
    tracer = _Tracer()
    try:
        graph = tracer.trace(model)
    except Exception as exc:            # torch.fx raises TraceError, TypeError, ... with long messages
        where = tracer.failed_at or type(model).__name__
        msg = " ".join(str(exc).split())
        if "control flow" in msg:
            why = ("data-dependent control flow (an if/while/for on a tensor's values) cannot be traced by "
                   "torch.fx: write it with tensor ops")
        else:
            why = f"torch.fx cannot trace it: {type(exc).__name__}: {msg[:200]}"
        raise ProgramError(f"module {where}", why) from None
    gm = fx.GraphModule(tracer.root, graph, type(model).__name__)
    gm.graph.eliminate_dead_code()
    gm.recompile()
    return gm


class _Recorder(fx.Interpreter):
    def __init__(self, gm):
        super().__init__(gm)
        self.values = {}

    def run_node(self, n):
        try:
            out = super().run_node(n)
        except Exception as exc:
            raise ProgramError(f"{describe(n)}", f"running the model on the example inputs failed: "
                                                 f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}") \
                from None
        self.values[n] = out
        return out


def concrete_values(gm: fx.GraphModule, example_inputs) -> dict:
    """Run ``gm`` on ``example_inputs``; {node: value} for every node."""
    rec = _Recorder(gm)
    with torch.no_grad():
        rec.run(*example_inputs)
    return rec.values


def depends_on_inputs(gm: fx.GraphModule) -> set:
    """Nodes whose values depend on the model's inputs (shape queries do not)."""
    dyn = set()
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            dyn.add(n)
        elif n.op in ("call_function", "call_method", "call_module"):
            name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
            if name in SHAPE_QUERIES or (name == "getattr" and len(n.args) > 1 and n.args[1] in SHAPE_QUERIES):
                continue
            if any(a in dyn for a in n.all_input_nodes):
                dyn.add(n)
        elif n.op == "output":
            pass
    return dyn


def op_name(n: fx.Node, gm: fx.GraphModule = None) -> str:
    """A readable name for a node's operation: ``torch.sort``, ``Tensor.view``, ``nn.Conv2d``."""
    if n.op == "call_module":
        mod = gm.get_submodule(n.target) if gm is not None else None
        return f"nn.{type(mod).__name__}" if mod is not None else str(n.target)
    if n.op == "call_method":
        return f"Tensor.{n.target}"
    if n.op == "call_function":
        t = n.target
        mod = getattr(t, "__module__", None) or ""
        name = getattr(t, "__name__", str(t))
        if mod.startswith("torch.nn.functional"):
            return f"F.{name}"
        if mod == "_operator" or mod == "operator":
            return f"operator.{name}"
        if name.startswith("_sparse_"):
            return f"torch.sparse.{name[len('_sparse_'):]}"
        return f"torch.{name}" if mod.startswith("torch") or mod == "" or mod is None else f"{mod}.{name}"
    return n.op


def describe(n: fx.Node, gm: fx.GraphModule = None) -> str:
    """``torch.sort at layer1`` (the op and the module path it sits in)."""
    path = n.meta.get("ff_path", "")
    if n.op == "call_module":
        path = n.target
    return f"{op_name(n, gm)} at {path or 'the top-level module'}"
