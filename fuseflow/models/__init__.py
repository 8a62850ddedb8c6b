"""The FuseFlow paper's four model classes as PyTorch modules, with their fusion configurations.

    from fuseflow.models import GCN, example
    model, inputs = example("gcn")                  # a model and example inputs (offline data)
    for config, fuse in model.FUSION.items():       # unfused / partial / full (paper, Appendix C)
        m = fuseflow.compile(model, inputs, fuse=fuse)

Models: :class:`GCN` and :class:`GraphSAGE` (two layers, :mod:`.gnn`), :class:`SparseAutoencoder`
(three pruned layers, :mod:`.autoencoder`), :class:`Decoder` (GPT-3-style blocks with BigBird attention,
:mod:`.decoder`). Data: :mod:`.data`. Needs the ``torch`` extra.
"""

from __future__ import annotations

from .autoencoder import SparseAutoencoder
from .decoder import Decoder
from .gnn import GCN, GraphSAGE

from ..models_names import MODELS

__all__ = ["GCN", "GraphSAGE", "SparseAutoencoder", "Decoder", "MODELS", "example"]


def example(name: str, **sizes):
    """(model, example inputs) of a bundled model on its offline data; ``sizes`` go to the model.

    ``gcn`` and ``graphsage`` run on Zachary's karate club (``graph=`` a :class:`.data.Graph` to change it)."""
    from ..errors import FuseFlowError
    from . import data
    if name in ("gcn", "graphsage"):
        g = sizes.pop("graph", None) or data.karate_club(sizes.get("in_features", 16))
        sizes.setdefault("in_features", int(g.features.shape[1]))
        if name == "gcn":
            return GCN(**sizes), (g.adjacency, g.features)
        return GraphSAGE(**sizes), (g.neighbours, g.degree, g.features)
    if name == "autoencoder":
        model = SparseAutoencoder(**sizes)
        side = int(round(model.enc1.linear.in_features ** 0.5))
        x = data.images(5, side) if side * side == model.enc1.linear.in_features else \
            data.images(5, 1)[:, :0]
        return model, (x,)
    if name == "decoder":
        model = Decoder(**sizes)
        blk = model.blocks[0]
        return model, (data.token_embeddings(blk.attn.seq, blk.attn.dim),)
    raise FuseFlowError("model", f"unknown model {name!r} (known: {', '.join(MODELS)})")
