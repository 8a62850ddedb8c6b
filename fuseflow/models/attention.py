"""GPT-3 Small multi-head attention with a BigBird mask, as the FuseFlow paper's artifact evaluates it.

``out[h] = softmax(mask(Q[h] K[h]^T / sqrt(d))) V[h]`` for ``heads`` heads of ``head_dim`` (GPT-3 Small: 12
heads of 64, width 768) over a sequence of ``seq`` tokens, with the BigBird block pattern
(:mod:`fuseflow.samml.masks`: a sliding window of 3 blocks, 1 global block and 3 random blocks per query
block, BigBird's default of 3 random blocks) as a coordinate mask: no mask tensor in memory.

Inputs: Q, K and V, each ``heads x seq x head_dim`` (order 3: the head is an index of every statement,
``S(h,i,j) = mask(i,j) * Q(h,i,d) * K(h,j,d)``). The Q/K/V projections from width 768 are left out by
default: at sequence 1024 they are three dense 1024 x 768 x 768 products (1.8 G multiply-adds, about six
times the attention's own 0.37 G at block 64) that no mask sparsifies and that fusion does not change;
``projections=True`` adds them (input: ``seq x width`` token embeddings; the front end turns the head split
into a head index, as in :mod:`.decoder`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

from ..frontends.pytorch import coordinate_mask
from ..samml.masks import kept_count, parse_mask

#: the BigBird pattern's parameters besides the block (Zaheer et al. 2020, ITC form; 3 random blocks as
#: BigBird's default): at sequence 1024 the mask keeps 46.5 / 24.1 / 12.3 % at block 64 / 32 / 16
WINDOW, GLOBAL, RANDOM = 3, 1, 3

#: the size ladder of :func:`fuseflow.models.example` ("attention", size=...)
SIZES = {"small": dict(seq=64, heads=2, head_dim=8, block=8),
         "medium": dict(seq=256, heads=12, head_dim=64, block=64),
         "paper": dict(seq=1024, heads=12, head_dim=64, block=64)}


def bigbird_spec(block: int, window: int = WINDOW, global_blocks: int = GLOBAL, random_blocks: int = RANDOM,
                 seed: int = 0) -> str:
    return f"bigbird:block={block},window={window},global={global_blocks},random={random_blocks},seed={seed}"


def mask_sparsity(seq: int, block: int, **params) -> float:
    """Fraction of the ``seq x seq`` scores the BigBird mask drops."""
    return 1.0 - kept_count(parse_mask(bigbird_spec(block, **params)), seq, seq) / (seq * seq)


class MultiHeadAttention(nn.Module):
    """BigBird-masked multi-head attention: ``forward(q, k, v)``, each heads x seq x head_dim."""

    def __init__(self, seq: int = 1024, heads: int = 12, head_dim: int = 64, block: int = 64,
                 window: int = WINDOW, global_blocks: int = GLOBAL, random_blocks: int = RANDOM, seed: int = 0):
        super().__init__()
        self.seq, self.heads, self.head_dim, self.block = seq, heads, head_dim, block
        self.seed = seed
        self.spec = bigbird_spec(block, window, global_blocks, random_blocks, seed)
        self.register_buffer("keep", coordinate_mask(self.spec, seq))
        self.scale = 1.0 / math.sqrt(head_dim)
        self.FUSION = {"unfused": "none", "full": "full"}

    @property
    def sparsity(self) -> float:
        """Fraction of the scores the mask drops."""
        return 1.0 - float(self.keep.sum()) / self.keep.numel()

    def attend(self, q, k, v):
        scores = (q @ k.transpose(1, 2)) * self.scale
        probs = torch.softmax(scores.masked_fill(~self.keep, float("-inf")), dim=-1)
        return probs @ v

    def forward(self, q, k, v):
        return self.attend(q, k, v)


class ProjectedMultiHeadAttention(MultiHeadAttention):
    """:class:`MultiHeadAttention` with its Q/K/V projections: ``forward(x)``, ``x`` seq x heads*head_dim."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        torch.manual_seed(self.seed)
        width = self.heads * self.head_dim
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)

    def forward(self, x):
        s, h, d = self.seq, self.heads, self.head_dim
        q = self.q_proj(x).view(s, h, d).transpose(0, 1)
        k = self.k_proj(x).view(s, h, d).transpose(0, 1)
        v = self.v_proj(x).view(s, h, d).transpose(0, 1)
        return self.attend(q, k, v)


def attention_inputs(seq: int, heads: int, head_dim: int, seed: int = 0, projections: bool = False):
    """Example inputs: Q, K, V (heads x seq x head_dim, standard normal / 2), or with ``projections`` one
    ``seq x heads*head_dim`` matrix of token embeddings."""
    rng = np.random.default_rng(seed)
    if projections:
        return (torch.from_numpy((0.5 * rng.standard_normal((seq, heads * head_dim))).astype(np.float32)),)
    return tuple(torch.from_numpy((0.5 * rng.standard_normal((heads, seq, head_dim))).astype(np.float32))
                 for _ in range(3))


def multihead_attention(seq: int = 1024, heads: int = 12, head_dim: int = 64, block: int = 64, seed: int = 0,
                        projections: bool = False, **mask):
    """(model, example inputs) of GPT-3 Small BigBird multi-head attention (defaults: the paper's size,
    sequence 1024, 12 heads of 64, block 64). ``mask``: ``window``, ``global_blocks``, ``random_blocks``."""
    cls = ProjectedMultiHeadAttention if projections else MultiHeadAttention
    model = cls(seq, heads, head_dim, block, seed=seed, **mask)
    return model, attention_inputs(seq, heads, head_dim, seed, projections)
