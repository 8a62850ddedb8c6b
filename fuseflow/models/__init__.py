"""The FuseFlow paper's four model classes as PyTorch modules, with their fusion configurations, and
model-scale data for the example ``.ff`` programs.

    from fuseflow.models import example
    model, inputs = example("gcn")                  # a model and example inputs (offline data)
    for config, fuse in model.FUSION.items():       # unfused / partial / full (paper, Appendix C)
        m = fuseflow.compile(model, inputs, fuse=fuse)

PyTorch models (need the ``torch`` extra; imported on first use): :class:`GCN` and :class:`GraphSAGE`
(two layers, :mod:`.gnn`), :class:`SparseAutoencoder` (three pruned layers, :mod:`.autoencoder`),
:class:`Decoder` (GPT-3-style blocks with BigBird attention, :mod:`.decoder`); their data: :mod:`.data`.
GPT-3 Small multi-head attention with a BigBird mask at the paper's sizes (12 heads of 64, sequence up to
1024, block 16/32/64): :func:`multihead_attention` (:mod:`.attention`), or ``example("attention",
size="small" | "medium" | "paper")``.

On real graphs (:mod:`fuseflow.datasets`): :func:`gcn_for` and :func:`graphsage_for` build the paper's
configuration (two layers, hidden 16) sized for a loaded graph, with its inputs:

    g = fuseflow.datasets.load("cora").subgraph(200)
    model, inputs = gcn_for(g)                     # GCN(1433 -> 16 -> 7), (adjacency, sparse features)

NumPy data for the example programs ``fuseflow/programs/{decoder,autoencoder,graphsage2}.ff``:
:func:`example_inputs` (:mod:`.program_data`).
"""

from __future__ import annotations

from ..models_names import MODELS
from .program_data import PRUNED_KEEP, example_inputs, program_inputs

__all__ = ["GCN", "GraphSAGE", "SparseAutoencoder", "Decoder", "MODELS", "example", "example_inputs", "program_inputs",
           "PRUNED_KEEP", "gcn_for", "graphsage_for", "MultiHeadAttention", "multihead_attention"]

_LAZY = {"GCN": "gnn", "GraphSAGE": "gnn", "SparseAutoencoder": "autoencoder", "Decoder": "decoder",
         "MultiHeadAttention": "attention", "multihead_attention": "attention"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def example(name: str, **sizes):
    """(model, example inputs) of a bundled PyTorch model on its offline data; ``sizes`` go to the model.

    ``attention`` (GPT-3 Small BigBird multi-head attention, :func:`multihead_attention`) takes
    ``size="small"`` (sequence 64, 2 heads of 8, block 8; the default), ``"medium"`` (256, 12 x 64, block
    64) or ``"paper"`` (1024, 12 x 64, block 64), and any of its parameters on top.

    ``decoder`` takes ``size="small"`` (sequence 32, width 16; the default sizes), ``"medium"`` (one GPT-3-shaped
    block at sequence 64, width 64) or ``"paper"`` (GPT-3 Small's block at sequence 1024), and its parameters.

    ``autoencoder`` takes ``size="small"`` (8 x 8 images, the default sizes), ``"medium"`` (32 x 32) or
    ``"paper"`` (224 x 224, 50 % weight sparsity), and its parameters on top.

    ``gcn`` and ``graphsage`` run on Zachary's karate club (``graph=`` a :class:`.data.Graph` to change it)."""
    from ..errors import FuseFlowError
    from . import data
    if name in ("gcn", "graphsage"):
        from .gnn import GCN, GraphSAGE
        g = sizes.pop("graph", None) or data.karate_club(sizes.get("in_features", 16))
        sizes.setdefault("in_features", int(g.features.shape[1]))
        if name == "gcn":
            return GCN(**sizes), (g.adjacency, g.features)
        return GraphSAGE(**sizes), (g.neighbours, g.degree, g.features)
    if name == "autoencoder":
        from .autoencoder import SIZES as AE_SIZES, SparseAutoencoder
        size = sizes.pop("size", None)
        if size is not None:
            if size not in AE_SIZES:
                raise FuseFlowError("size", f"unknown size {size!r} for autoencoder (known: {', '.join(AE_SIZES)})")
            sizes = {**AE_SIZES[size], **sizes}
        model = SparseAutoencoder(**sizes)
        features = model.enc1.linear.in_features
        side = int(round(features ** 0.5))
        x = data.images(5, side) if side * side == features else data.images(5, 1, seed=1).repeat(1, features)
        return model, (x,)
    if name == "attention":
        from .attention import SIZES, multihead_attention
        size = sizes.pop("size", "small")
        if size not in SIZES:
            raise FuseFlowError("size", f"unknown size {size!r} for attention (known: {', '.join(SIZES)})")
        return multihead_attention(**{**SIZES[size], **sizes})
    if name == "decoder":
        from .decoder import SIZES as DEC_SIZES, Decoder
        size = sizes.pop("size", None)
        if size is not None:
            if size not in DEC_SIZES:
                raise FuseFlowError("size", f"unknown size {size!r} for decoder (known: {', '.join(DEC_SIZES)})")
            sizes = {**DEC_SIZES[size], **sizes}
        model = Decoder(**sizes)
        blk = model.blocks[0]
        return model, (data.token_embeddings(blk.attn.seq, blk.attn.dim),)
    raise FuseFlowError("model", f"unknown model {name!r} (known: {', '.join(MODELS)})")


def _gnn_for(cls, graph, hidden, classes, seed):
    from ..errors import FuseFlowError
    if classes is None:
        classes = graph.num_classes or hidden
    for what, v in (("hidden", hidden), ("classes", classes)):
        if not isinstance(v, int) or v < 1:
            raise FuseFlowError(what, f"must be a positive int, got {v!r}")
    return cls(in_features=graph.num_features, hidden=hidden, classes=classes, seed=seed)


def gcn_for(graph, hidden: int = 16, classes: int | None = None, seed: int = 0):
    """(model, example inputs) of a two-layer :class:`GCN` for ``graph`` (a :class:`.data.Graph`, e.g. from
    :mod:`fuseflow.datasets`): input width the graph's features, ``hidden`` units (16, the paper's and Kipf
    and Welling's), one output per class (``classes``, default the graph's; ``hidden`` for a graph without
    labels). Inputs: the normalised adjacency and the features as stored (sparse stays sparse)."""
    from .gnn import GCN
    return _gnn_for(GCN, graph, hidden, classes, seed), (graph.adjacency, graph.features)


def graphsage_for(graph, hidden: int = 16, classes: int | None = None, seed: int = 0):
    """(model, example inputs) of a two-layer mean-aggregation :class:`GraphSAGE` for ``graph``, sized as
    :func:`gcn_for`. Inputs: the plain adjacency, the degrees and the features as stored."""
    from .gnn import GraphSAGE
    return _gnn_for(GraphSAGE, graph, hidden, classes, seed), (graph.neighbours, graph.degree, graph.features)
