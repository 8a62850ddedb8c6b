"""PyTorch snippets (one op or a small layer each) traced, compiled and checked against PyTorch itself.

Golden values are the PyTorch model's own outputs in float64; float mode must agree to 1e-6 relative,
fixed mode within the tolerance of docs/numbers.md (fuseflow.model.tolerance)."""

import math
import warnings

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import fuseflow  # noqa: E402
from fuseflow.frontends.pytorch import coordinate_mask  # noqa: E402

warnings.filterwarnings("ignore", message=".*Sparse CSR tensor support is in beta.*")


class Fn1(nn.Module):
    def __init__(self, f, **parts):
        super().__init__()
        self.f = f
        for k, v in parts.items():
            if isinstance(v, nn.Module):
                setattr(self, k, v)
            else:
                self.register_buffer(k, v)

    def forward(self, a):
        return self.f(self, a)


class Fn2(Fn1):
    def forward(self, a, b):
        return self.f(self, a, b)


def r(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g)


def _heads(s, x):
    q = s.q(x).view(8, 2, 3).transpose(0, 1)
    k = s.k(x).view(8, 2, 3).permute(1, 2, 0)
    v = s.v(x).view(8, 2, 3).transpose(0, 1)
    return s.o(((q @ k) / math.sqrt(3)).softmax(-1).matmul(v).transpose(0, 1).reshape(8, 6))


torch.manual_seed(0)
SNIPPETS = {
    "matmul": (lambda s, a, b: a @ b, (r(5, 4), r(4, 3))),
    "mm_vector": (lambda s, a, b: torch.mm(a, b).sum(dim=1), (r(5, 4), r(4, 3))),
    "bmm": (lambda s, a, b: torch.bmm(a, b), (r(2, 3, 4), r(2, 4, 5))),
    "linear": (lambda s, x: s.l(x), (r(5, 4),), dict(l=nn.Linear(4, 3))),
    "linear_nobias_F": (lambda s, x: F.linear(x, s.w), (r(5, 4),), dict(w=r(3, 4))),
    "relu": (lambda s, x: F.relu(x) + torch.relu(-x), (r(4, 3),)),
    "sigmoid": (lambda s, x: torch.sigmoid(x), (r(4, 3),)),
    "tanh": (lambda s, x: torch.tanh(x), (r(4, 3),)),
    "gelu": (lambda s, x: F.gelu(x), (r(4, 3),)),
    "gelu_module": (lambda s, x: s.g(x), (r(4, 3),), dict(g=nn.GELU())),
    "softmax_last": (lambda s, x: torch.softmax(x, dim=-1), (r(4, 5),)),
    "softmax_first": (lambda s, x: F.softmax(x, dim=0), (r(4, 5),)),
    "layer_norm": (lambda s, x: s.ln(x), (r(4, 6),), dict(ln=nn.LayerNorm(6))),
    "layer_norm_F": (lambda s, x: F.layer_norm(x, (6,)), (r(4, 6),)),
    "broadcast_row": (lambda s, x, b: x + b, (r(4, 3), r(1, 3))),
    "broadcast_col": (lambda s, x, c: x * c - c, (r(4, 3), r(4, 1))),
    "broadcast_rank": (lambda s, x, b: x / (b * b + 1), (r(2, 4, 3), r(3))),
    "scalars": (lambda s, x: 2.5 * x - 1 / (x * x + 1) + 0.25, (r(4, 3),)),
    "permute3": (lambda s, x: x.permute(2, 0, 1) * 2, (r(2, 3, 4),)),
    "transpose_T": (lambda s, x, y: x.T @ y + y.t().sum(1), (r(4, 3), r(4, 2))),
    "sum_dim": (lambda s, x: x.sum(dim=1), (r(4, 3),)),
    "mean_keepdim": (lambda s, x: x - x.mean(dim=-1, keepdim=True), (r(4, 3),)),
    "amax": (lambda s, x: torch.amax(torch.relu(x), dim=0), (r(4, 3),)),
    "sum_all": (lambda s, x: x.sum(), (r(4, 3),)),
    "masked_fill_causal": (lambda s, q, k: torch.softmax((q @ k.T).masked_fill(~s.m, float("-inf")), dim=-1),
                           (r(8, 4), r(8, 4, seed=1)), dict(m=torch.tril(torch.ones(8, 8, dtype=torch.bool)))),
    "masked_fill_bigbird": (lambda s, q, k: torch.softmax((q @ k.T).masked_fill(~s.m, float("-inf")), dim=-1),
                            (r(16, 4), r(16, 4, seed=1)),
                            dict(m=coordinate_mask("bigbird:block=4,window=1,global=1,random=1,seed=0", 16))),
    "masked_fill_tensor": (lambda s, x: x.masked_fill(s.m, 0.0), (r(5, 5),), dict(m=r(5, 5, seed=3) > 0)),
    "attention_heads": (_heads, (r(8, 6),), dict(q=nn.Linear(6, 6), k=nn.Linear(6, 6), v=nn.Linear(6, 6),
                                                   o=nn.Linear(6, 6))),
    "one_by_one": (lambda s, a, b: a @ b, (r(1, 1), r(1, 1))),
    "csr_empty_rows": (lambda s, a, x: torch.sparse.mm(a, x),
                       (torch.tensor([[0, 0, 0], [1.0, 0, 2], [0, 0, 0]]).to_sparse_csr(), r(3, 2))),
    "csr_all_zero": (lambda s, a, x: torch.sparse.mm(a, x), (torch.zeros(3, 3).to_sparse_csr(), r(3, 2))),
    "coo_plus_one": (lambda s, a, x: torch.sparse.mm(a, x) + 1,
                     (torch.tensor([[0, 0, 3.0], [1.0, 0, 2], [0, 0, 0]]).to_sparse_coo(), r(3, 2))),
    "csc": (lambda s, a, x: a @ x, (torch.tensor([[0, 0, 3.0], [1.0, 0, 2], [0, 4.0, 0]]).to_sparse_csc(), r(3, 2))),
    "flatten_unflatten": (lambda s, x: x.reshape(2, 6).relu().view(2, 2, 3).sum(1), (r(2, 2, 3),)),
}


def build(name):
    spec = SNIPPETS[name]
    f, inputs = spec[0], spec[1]
    parts = spec[2] if len(spec) > 2 else {}
    return (Fn1 if len(inputs) == 1 else Fn2)(f, **parts).eval(), inputs


#: snippets of several ops, also checked fused into one kernel
FUSED = ("scalars", "mean_keepdim", "layer_norm", "masked_fill_causal", "broadcast_col", "flatten_unflatten")


@pytest.mark.parametrize("name, fuse", [(n, "none") for n in sorted(SNIPPETS)] + [(n, "full") for n in FUSED])
def test_snippet_matches_pytorch(name, fuse):
    model, inputs = build(name)
    m = fuseflow.compile(model, inputs, fuse=fuse)
    flt = m.check(mode="float")
    assert flt.ok and flt.max_rel_error <= 1e-6, flt.problems
    fixed = m.check(mode="fixed")
    assert fixed.ok, fixed.problems
    want = m.reference()[0]
    assert tuple(fixed.simulation.arrays[0].shape) == tuple(want.shape)


def test_enough_snippets():
    assert len(SNIPPETS) >= 20


def test_views_and_reshapes_make_no_kernels():
    model, inputs = build("attention_heads")
    m = fuseflow.compile(model, inputs, fuse="none")
    # q, k, v projections, scores, scale, softmax, probs @ v, output projection: reshapes and transposes are
    # relabellings of stored levels, not kernels
    assert len(m.statements) == 8
    assert "view" not in m.ff_text and "transpose" not in m.ff_text
    assert "(2, 3, 6)" in m.ff_text.replace("tensor q_weight", "")   # the head split reached the weights


def test_coordinate_masks_are_recognised():
    model, inputs = build("masked_fill_causal")
    assert "mask[causal]" in fuseflow.compile(model, inputs).ff_text
    model, inputs = build("masked_fill_bigbird")
    assert "mask[bigbird:block=4" in fuseflow.compile(model, inputs).ff_text
    model, inputs = build("masked_fill_tensor")
    text = fuseflow.compile(model, inputs).ff_text
    assert "mask[" not in text and "_keep" in text            # an arbitrary mask becomes a sparse mask tensor


def test_formats_come_from_the_tensors():
    model, inputs = build("csr_empty_rows")
    assert "tensor a(3, 3) : csr" in fuseflow.compile(model, inputs).ff_text
    model, inputs = build("csc")
    assert "tensor a(3, 3) : csc" in fuseflow.compile(model, inputs).ff_text
    model, inputs = build("matmul")
    text = fuseflow.compile(model, inputs, formats={"a": "dcsr"}).ff_text
    assert "tensor a(5, 4) : dcsr" in text


def test_ff_text_compiles_back_to_the_same_graph():
    from fuseflow.compiler import EinsumProgram, compile_program
    from fuseflow.samml import io as samml_io
    model, inputs = build("layer_norm")
    m = fuseflow.compile(model, inputs, fuse="regions")
    again = compile_program(EinsumProgram.parse(m.ff_text, m.name), fuse="regions")
    assert samml_io.dumps(again.program) == samml_io.dumps(m.program)


@pytest.mark.parametrize("bad, op", [
    (lambda s, x: torch.sort(x, dim=1).values, "torch.sort"),
    (lambda s, x: x.masked_fill(s.m, 3.0), "masked_fill"),
    (lambda s, x: torch.cumsum(x, 0), "torch.cumsum"),
])
def test_unsupported_op_is_named(bad, op):
    from fuseflow.errors import ProgramError
    model = Fn1(bad, m=torch.zeros(4, 3, dtype=torch.bool))
    with pytest.raises(ProgramError) as e:
        fuseflow.compile(model, (r(4, 3),))
    assert op in str(e.value)
