"""The PyTorch operations the front end knows, by kind (one table; the lowering dispatches on the kind)."""

from __future__ import annotations

import operator

import torch
import torch.nn as nn
import torch.nn.functional as F

#: element-wise functions: torch spelling -> index-notation function
UNARY = {
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "gelu": "gelu", "exp": "exp", "log": "log",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "abs": "abs", "neg": "neg", "square": "square",
}
BINARY = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "div": "/", "rsub": "r-"}
REDUCE = {"sum": "sum", "mean": "mean", "amax": "max", "amin": "min"}
IDENTITY = {"contiguous", "clone", "detach", "to_dense", "float", "double", "dropout", "to", "type_as"}
MATMUL = {"matmul", "mm", "bmm", "_sparse_mm", "sparse_mm"}

MODULES = {
    nn.ReLU: ("unary", "relu"), nn.Sigmoid: ("unary", "sigmoid"), nn.Tanh: ("unary", "tanh"),
    nn.GELU: ("unary", "gelu"), nn.Identity: ("identity", None), nn.Dropout: ("identity", None),
    nn.Linear: ("linear", None), nn.LayerNorm: ("layernorm", None), nn.Softmax: ("softmax", None),
}


def kind_of(n, gm):
    """(kind, detail) of a call node, or (None, None) when the front end does not know it."""
    if n.op == "call_module":
        mod = gm.get_submodule(n.target)
        return MODULES.get(type(mod), (None, None))
    t = n.target
    name = t if isinstance(t, str) else getattr(t, "__name__", "")
    if n.op == "call_function" and t is getattr and len(n.args) > 1:
        attr = n.args[1]
        if attr in ("T", "mT"):
            return "permute", attr
        return None, None
    if n.op == "call_function" and t in (operator.add, operator.sub, operator.mul, operator.truediv):
        return "binary", BINARY[name]
    if n.op == "call_function" and t is operator.neg:
        return "unary", "neg"
    if n.op == "call_function" and t is operator.matmul:
        return "matmul", None
    if name in ("add", "sub", "mul", "div", "true_divide", "rsub"):
        if name == "div" and n.kwargs.get("rounding_mode") is not None:
            return None, None
        return "binary", BINARY.get(name, "/")
    if name in UNARY or name in ("relu_",):
        return "unary", UNARY[name.rstrip("_")]
    if name == "pow":
        return "pow", None
    if name in REDUCE:
        return "reduce", REDUCE[name]
    if name in MATMUL:
        return "matmul", None
    if name == "linear":
        return "linear", None
    if name in ("softmax",):
        return "softmax", None
    if name == "layer_norm":
        return "layernorm", None
    if name in ("transpose", "permute", "t", "swapaxes"):
        return "permute", name
    if name in ("view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze"):
        return "reshape", name
    if name == "masked_fill":
        return "masked_fill", None
    if name in IDENTITY:
        return "identity", name
    return None, None


SUPPORTED = ("matmul/@/mm/bmm/torch.sparse.mm, linear/nn.Linear, relu, sigmoid, tanh, gelu, exp, log, sqrt, rsqrt, "
             "abs, neg, + - * / (broadcasting, scalars), pow 2, sum/mean/amax/amin over dims, softmax, "
             "layer_norm/nn.LayerNorm, masked_fill, transpose/permute/.T, view/reshape/flatten/(un)squeeze, "
             "dropout (eval), contiguous")


def gelu_function(approximate):
    """The index-notation function for ``F.gelu(x, approximate=...)`` (the ALU's form decides)."""
    return "gelu"


_ = (torch, F)
