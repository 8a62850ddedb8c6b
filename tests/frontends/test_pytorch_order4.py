"""Attention written on 4-D (batch, heads, sequence, head dimension) tensors, as PyTorch code writes it
(issue 42): lowered to order-4 tensors, simulated on both engines and checked against PyTorch itself."""

import contextlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import fuseflow  # noqa: E402
from fuseflow.compiler.redundancy import FusionRedundancyWarning  # noqa: E402
from fuseflow.errors import ProgramError  # noqa: E402
from fuseflow.sim import compiled  # noqa: E402

ENGINES = ["python"] + (["compiled"] if compiled.available() else [])


def r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class ScaledAttention(nn.Module):
    """softmax(q k^T / sqrt(d)) v over (B, H, S, D) inputs; the scale computed from the sizes."""

    def forward(self, q, k, v):
        s = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
        return torch.softmax(s, dim=-1) @ v


class MultiHead(nn.Module):
    """Batched multi-head self-attention: (B, S, E) in and out, heads split with view + transpose(1, 2)."""

    def __init__(self, e=8, heads=2):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(e, e) for _ in range(4))

    def forward(self, x):
        b, s, e = x.shape
        split = (b, s, self.heads, e // self.heads)
        q = self.q(x).view(*split).transpose(1, 2)
        k = self.k(x).view(*split).transpose(1, 2)
        v = self.v(x).view(*split).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / (e // self.heads) ** 0.5, dim=-1) @ v
        return self.o(a.transpose(1, 2).reshape(b, s, e))


def _order(m):
    return max(len(t.shape) for t in m.program.tensors.values())


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("fuse", ["none", "full"])
def test_4d_attention_matches_pytorch(fuse, engine):
    model = ScaledAttention().eval()
    inputs = (r(2, 2, 4, 3), r(2, 2, 5, 3, seed=1), r(2, 2, 5, 3, seed=2))
    # fused, P V recomputes the scores and the softmax's max and sum per entry: said, not silent
    said = pytest.warns(FusionRedundancyWarning, match="recomputes") if fuse == "full" else \
        contextlib.nullcontext()
    with said:
        m = fuseflow.compile(model, inputs, fuse=fuse, mode="float")
    assert _order(m) == 4
    res = m.check(engine=engine)
    assert res.ok and res.max_rel_error <= 1e-6, res.problems
    with torch.no_grad():
        want = model(*[x.double() for x in inputs])
    assert tuple(res.simulation.arrays[0].shape) == tuple(want.shape)


@pytest.mark.parametrize("engine", ENGINES)
def test_batched_multi_head_attention_matches_pytorch(engine):
    torch.manual_seed(0)
    model = MultiHead().eval()
    m = fuseflow.compile(model, (r(2, 4, 8),), fuse="none", mode="float")
    assert _order(m) == 4
    res = m.check(engine=engine)
    assert res.ok and res.max_rel_error <= 1e-6, res.problems


def test_order_7_is_refused_with_one_line():
    class Twice(nn.Module):
        def forward(self, x):
            return x * 2
    with pytest.raises(ProgramError) as exc:
        fuseflow.compile(Twice(), (r(2, 2, 2, 2, 2, 2, 2),))
    assert "order 7" in str(exc.value) and "at most 6" in str(exc.value) and "\n" not in str(exc.value)
