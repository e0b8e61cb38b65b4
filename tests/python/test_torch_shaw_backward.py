"""Shaw's relative key and value terms train through pejit (docs/backward.md):
loss.backward() through torch.ops.pejit.attention reaches q, k, v and both
tables (shared or per head, each term alone or both), compared with
float64 autograd of plain torch (the terms materialized as [(h,) sq, skv,
d] tensors) by max-norm relative error, tolerance 1e-4 (float32). The
ShawAttention module learns both tables, passes opcheck, compiles with
fullgraph=True, and trains 20 SGD steps like the same model in plain torch.
Skipped when the test venv has no torch."""
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit  # noqa: E402
import pejit.torch  # noqa: E402
from training_support import (TOLERANCE, generator, inputs, relative_error,  # noqa: E402
                              train_side_by_side)


def shaw_reference(q, k, v, key_table, value_table, clip, causal):
    """Shaw attention in plain torch (float64 when given float64), GQA by
    repeat: s = scale q_i . (k_j + a^K[r]), o_i = sum_j p_ij (v_j + a^V[r]),
    r = clamp(j - (i + skv - sq), -clip, clip) + clip."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    sq, skv = q.shape[2], k.shape[2]
    i = torch.arange(sq)[:, None] + (skv - sq)
    j = torch.arange(skv)[None, :]
    r = (j - i).clamp(-clip, clip) + clip  # [sq, skv]
    s = torch.einsum("bhid,bhjd->bhij", q, k)
    if key_table is not None:
        a = key_table[..., r, :]  # [(h,) sq, skv, d]
        s = s + (torch.einsum("bhid,hijd->bhij", q, a) if a.dim() == 4
                 else torch.einsum("bhid,ijd->bhij", q, a))
    s = s * q.shape[-1] ** -0.5
    if causal:
        s = s.masked_fill(j > i, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.einsum("bhij,bhjd->bhid", p, v)
    if value_table is not None:
        a = value_table[..., r, :]
        o = o + (torch.einsum("bhij,hijd->bhid", p, a) if a.dim() == 4
                 else torch.einsum("bhij,ijd->bhid", p, a))
    return o


@pytest.mark.parametrize("key,value,per_head", [(True, True, False), (True, False, True),
                                                (False, True, False), (True, True, True)],
                         ids=["both shared", "key per head", "value shared", "both per head"])
def test_shaw_table_gradients_match_float64(key, value, per_head):
    clip, hq = 4, 4
    q, k, v = inputs(b=2, hq=hq, hkv=2, sq=29, skv=35)
    g = generator()
    shape = (hq, 2 * clip + 1, 32) if per_head else (2 * clip + 1, 32)
    tables = [torch.randn(shape, generator=g).requires_grad_() if use else None
              for use in (key, value)]
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = pejit.torch.attention(*leaves, pejit.torch.options(shaw=clip, causal=True),
                              shaw_key_table=tables[0], shaw_value_table=tables[1])
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    expected = [x.detach().double().requires_grad_() for x in (q, k, v)]
    expected_tables = [None if t is None else t.detach().double().requires_grad_()
                       for t in tables]
    (shaw_reference(*expected, *expected_tables, clip, causal=True) * do.double()).sum().backward()
    assert relative_error(o.detach(), shaw_reference(q.double(), k.double(), v.double(),
                                                     *[None if t is None else t.detach().double()
                                                       for t in tables], clip, True)) < TOLERANCE
    for got, want, name in zip(leaves, expected, ("dq", "dk", "dv")):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name
    for got, want, name in zip(tables, expected_tables, ("d shaw_key", "d shaw_value")):
        if got is not None:
            assert relative_error(got.grad, want.grad) < TOLERANCE, name


def test_numpy_attention_backward_returns_the_tables_gradients():
    import numpy as np
    clip = 3
    q, k, v = (x.numpy() for x in inputs(sq=12, skv=12))
    rng = np.random.default_rng()
    key_table = rng.standard_normal((2 * clip + 1, 32)).astype(np.float32)
    value_table = rng.standard_normal((2 * clip + 1, 32)).astype(np.float32)
    shaw = pejit.ShawConfig(clip)
    o = pejit.attention(q, k, v, shaw=shaw, shaw_key=key_table, shaw_value=value_table)
    do = rng.standard_normal(o.shape).astype(np.float32)
    grads = pejit.attention_backward(q, k, v, o, do, shaw=shaw, shaw_key=key_table,
                                     shaw_value=value_table)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape, key_table.shape,
                                        value_table.shape]
    expected = [torch.from_numpy(x).double().requires_grad_()
                for x in (q, k, v, key_table, value_table)]
    (shaw_reference(*expected, clip, causal=False) * torch.from_numpy(do).double()).sum().backward()
    for got, want in zip(grads, expected):
        assert relative_error(torch.from_numpy(got), want.grad) < TOLERANCE
    with pytest.raises(pejit.Error, match="shaw: give shaw_key, shaw_value or both"):
        pejit.attention_backward(q, k, v, o, do, shaw=shaw)


class ShawBlock(torch.nn.Module):
    """A block with Shaw's learned tables: through pejit.torch.ShawAttention,
    or the same parameters in plain torch (shaw_reference)."""

    def __init__(self, width=64, heads=4, clip=8, use_pejit=True):
        super().__init__()
        self.heads, self.clip, self.use_pejit = heads, clip, use_pejit
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.attention = pejit.torch.ShawAttention(width // heads, clip=clip, causal=True)
        with torch.no_grad():  # tables large enough to matter
            self.attention.key_table.normal_(0, 0.5)
            self.attention.value_table.normal_(0, 0.5)

    def forward(self, x):
        b, s, width = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.use_pejit:
            o = self.attention(q, k, v)
        else:
            o = shaw_reference(q, k, v, self.attention.key_table, self.attention.value_table,
                               self.clip, causal=True)
        return x + self.out(o.transpose(1, 2).reshape(b, s, width))


def test_shaw_tables_train_like_plain_torch_for_twenty_sgd_steps():
    nets = []
    for use_pejit in (True, False):
        torch.manual_seed(6)
        nets.append(torch.nn.Sequential(ShawBlock(use_pejit=use_pejit),
                                        ShawBlock(use_pejit=use_pejit)))
    train_side_by_side(*nets, lr=0.1, length=40)
    for layer in nets[0]:
        assert layer.attention.key_table.grad.abs().max() > 0
        assert layer.attention.value_table.grad.abs().max() > 0


def test_shaw_attention_module_opcheck_and_compile():
    layer = pejit.torch.ShawAttention(32, clip=4, num_heads=4, per_head=True, causal=True)
    q, k, v = (x.requires_grad_() for x in inputs(sq=20, skv=20))
    torch.library.opcheck(torch.ops.pejit.attention.default,
                          (q, k, v, layer.options, None, None, None, None, None, None, None,
                           None, None, layer.key_table, layer.value_table))
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    compiled(q, k, v).square().sum().backward()
    assert layer.key_table.grad.abs().max() > 0 and layer.value_table.grad.abs().max() > 0
    with pytest.raises(pejit.Error, match="leave no term to learn"):
        pejit.torch.ShawAttention(32, key=False, value=False)
