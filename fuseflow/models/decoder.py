"""A GPT-3-style decoder with BigBird block-sparse attention (toy size by default).

Each block: ``h = x + attn(ln1(x))``, ``y = h + mlp(ln2(h))``; attention has ``heads`` heads, scaled scores,
the BigBird pattern (window, global and random blocks) as a coordinate mask, softmax over the kept
coordinates, and an output projection; the MLP is ``fc2(gelu(fc1(.)))`` (erf GELU, as the ALU computes it).
The head split and merge are PyTorch reshapes; the front end turns them into a head index.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..frontends.pytorch import coordinate_mask


class BigBirdAttention(nn.Module):
    def __init__(self, seq: int, dim: int, heads: int, block: int, window: int, global_blocks: int,
                 random_blocks: int, seed: int):
        super().__init__()
        self.seq, self.dim, self.heads, self.head_dim = seq, dim, heads, dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.o_proj = nn.Linear(dim, dim)
        self.spec = (f"bigbird:block={block},window={window},global={global_blocks},random={random_blocks},"
                     f"seed={seed}")
        self.register_buffer("keep", coordinate_mask(self.spec, seq))

    def forward(self, x):
        s, h, d = self.seq, self.heads, self.head_dim
        q = self.q_proj(x).view(s, h, d).transpose(0, 1)
        k = self.k_proj(x).view(s, h, d).transpose(0, 1)
        v = self.v_proj(x).view(s, h, d).transpose(0, 1)
        scores = (q @ k.transpose(1, 2)) / math.sqrt(d)
        probs = torch.softmax(scores.masked_fill(~self.keep, float("-inf")), dim=-1)
        out = (probs @ v).transpose(0, 1).reshape(s, self.dim)
        return self.o_proj(out)


class MLP(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class DecoderBlock(nn.Module):
    def __init__(self, seq, dim, heads, mlp_ratio, block, window, global_blocks, random_blocks, seed):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = BigBirdAttention(seq, dim, heads, block, window, global_blocks, random_blocks, seed)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, mlp_ratio * dim)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.mlp(self.ln2(h))


#: the size ladder of :func:`fuseflow.models.example` ("decoder", size=...): "small" is the default that the
#: test run simulates; "medium" one GPT-3-shaped block (a head of 64, MLP 4x) at sequence 64; "paper" GPT-3
#: Small's block (width 768, 12 heads of 64, MLP 3,072) with the BigBird pattern at sequence 1024, block 64
#: (its dense projections and MLP are about 7 G multiply-adds: hours on the compiled engine)
SIZES = {"small": dict(seq=32, dim=16, heads=2, mlp_ratio=2, block=4),
         "medium": dict(seq=64, dim=64, heads=1, mlp_ratio=4, block=16),
         "paper": dict(seq=1024, dim=768, heads=12, mlp_ratio=4, block=64, random_blocks=3)}


class Decoder(nn.Module):
    """``blocks`` GPT-3-style decoder blocks over a (seq x dim) sequence of token embeddings."""

    def __init__(self, seq: int = 32, dim: int = 16, heads: int = 2, blocks: int = 1, mlp_ratio: int = 2,
                 block: int = 4, window: int = 3, global_blocks: int = 1, random_blocks: int = 1, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.blocks = nn.Sequential(*[DecoderBlock(seq, dim, heads, mlp_ratio, block, window, global_blocks,
                                                   random_blocks, seed + b) for b in range(blocks)])
        self.FUSION = fusion_configs(blocks)

    def forward(self, x):
        return self.blocks(x)


def _subsets(b):
    p = f"blocks.{b}"
    return ([f"{p}.ln1", f"{p}.attn.q_proj", f"{p}.attn.k_proj", f"{p}.attn.v_proj"],     # up to the head split
            [f"{p}.attn"],                                                                # between the reshapes
            [f"{p}.attn.o_proj", f"{p}.ln2", f"{p}.mlp", p])                              # after the merge


def fusion_configs(blocks: int) -> dict:
    """The paper's GPT-3 configurations (Figure 22 d): unfused; partial = three subsets per block split at the
    reshapes; full = partial with subset 3 of block n merged with subset 1 of block n+1."""
    partial = [g for b in range(blocks) for g in _subsets(b)]
    full = []
    for b in range(blocks):
        s1, s2, s3 = _subsets(b)
        if b == 0:
            full.append(s1)
        full.append(s2)
        full.append(s3 + (_subsets(b + 1)[0] if b + 1 < blocks else []))
    return {"unfused": "none", "partial": partial, "full": full}
