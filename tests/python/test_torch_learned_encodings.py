"""Training the encodings' own parameters through pejit (docs/backward.md):
RoPE's position scale and learned inverse frequencies, ALiBi's learned
slopes, a T5 table beside a position scale (the issue's 2-layer model, 20
SGD steps against plain torch), 16-bit gradients, packed batches and key
lengths, all through the autograd of torch.ops.pejit.attention. Gradients
are compared with float64 torch autograd by max-norm relative error,
tolerance 1e-4 (float32; 2e-2 for 16-bit). Skipped when the test venv has
no torch."""
import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit  # noqa: E402
import pejit.torch  # noqa: E402
from training_support import (TOLERANCE, generator, hf_rope, inputs,  # noqa: E402
                              reference_attention, relative_error, train_side_by_side)


@pytest.mark.parametrize("rows", [1, 2], ids=["shared scale", "scale per batch row"])
def test_rope_position_scale_gradient_matches_float64(rows):
    # RoPE's runtime position scale s is an input the backward differentiates:
    # dL/ds summed over the rotated rows inside the kernel.
    b, sq, skv = 2, 23, 31
    q, k, v = inputs(b=b, sq=sq, skv=skv)
    g = generator()
    scale = (torch.rand(rows, generator=g) + 0.5).requires_grad_()
    # A scale per batch row rotates ids per batch row ([b, s]): the tables are per id row.
    qp, kp = torch.arange(skv - sq, skv), torch.arange(skv)
    if rows == b:
        qp, kp = qp.expand(b, sq).contiguous(), kp.expand(b, skv).contiguous()
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = torch.ops.pejit.attention(*leaves, pejit.torch.options(rope=True, causal=True),
                                  qp if rows == b else None, kp if rows == b else None, None,
                                  scale)
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    expected = [x.detach().double().requires_grad_() for x in (q, k, v, scale)]
    reference = reference_attention(hf_rope(expected[0], qp, scale=expected[3]),
                                    hf_rope(expected[1], kp, scale=expected[3]), expected[2],
                                    causal=True)
    (reference * do.double()).sum().backward()
    for got, want, name in zip(leaves + [scale], expected, ("dq", "dk", "dv", "dscale")):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


class RopeT5Block(torch.nn.Module):
    """An attention block with a learned T5 table and RoPE with a learned
    position scale, both in one attention: through pejit (the table and the
    scale passed to the op), or in plain torch (HF's rotate_half RoPE at
    scaled positions, T5's [h, s, s] bias through SDPA's attn_mask)."""

    def __init__(self, width=64, heads=4, use_pejit=True):
        super().__init__()
        self.heads, self.use_pejit = heads, use_pejit
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.table = torch.nn.Parameter(torch.randn(32, heads) * 0.5)
        self.scale = torch.nn.Parameter(torch.full((1,), 0.8))
        self.options = pejit.torch.options(
            rope=True, t5={"num_buckets": 32, "max_distance": 128, "bidirectional": True})

    def forward(self, x):
        import reference as ref
        b, s, width = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.use_pejit:
            o = torch.ops.pejit.attention(q, k, v, self.options, None, None, self.table,
                                          self.scale)
        else:
            positions = torch.arange(s)
            q, k = hf_rope(q, positions, scale=self.scale), hf_rope(k, positions, scale=self.scale)
            rel = positions[None, :] - positions[:, None]
            buckets = torch.from_numpy(ref.t5_buckets(rel.numpy(), True, 32, 128)).long()
            bias = self.table[buckets].permute(2, 0, 1)[None]  # [1, h, s, s]
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return x + self.out(o.transpose(1, 2).reshape(b, s, width))


def test_t5_table_and_position_scale_train_like_plain_torch_for_twenty_sgd_steps():
    # Issue 37's training test: 2 layers, each with a learnable T5 table and
    # a learnable RoPE position scale; 20 SGD steps through pejit match the
    # same model in plain torch step for step (loss and every parameter,
    # 1e-4 relative).
    nets = []
    for use_pejit in (True, False):
        torch.manual_seed(4)
        nets.append(torch.nn.Sequential(RopeT5Block(use_pejit=use_pejit),
                                        RopeT5Block(use_pejit=use_pejit)))
    train_side_by_side(*nets, lr=0.1, length=40)
    for layer in nets[0]:
        assert layer.scale.grad is not None and layer.scale.grad.abs().max() > 0
        assert layer.table.grad is not None and layer.table.grad.abs().max() > 0
    assert abs(nets[0][0].scale.item() - 0.8) > 1e-6, "the position scale did not move"


def test_scaled_rope_attention_module_learns_its_scale():
    layer = pejit.torch.ScaledRoPEAttention(causal=True, initial_scale=1.0)
    q, k, v = (x.requires_grad_() for x in inputs(sq=16, skv=16))
    layer(q, k, v).square().sum().backward()
    assert layer.scale.grad is not None and torch.isfinite(layer.scale.grad).all()
    assert layer.scale.grad.abs().item() > 0


def test_torch_compile_fullgraph_with_table_and_position_scale():
    # A training step over blocks with a learnable T5 table and RoPE
    # position scale compiles as one forward graph; the scale moves.
    torch.manual_seed(5)
    net = torch.nn.Sequential(RopeT5Block(), RopeT5Block())
    compiled = torch.compile(net, fullgraph=True, backend="aot_eager")
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    g = generator()
    x, target = torch.randn(2, 24, 64, generator=g), torch.randn(2, 24, 64, generator=g)
    for _ in range(3):
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(compiled(x), target).backward()
        optimizer.step()
    assert abs(net[0].scale.item() - 0.8) > 1e-6


@pytest.mark.parametrize("symmetric", [False, True], ids=["causal form", "symmetric form"])
def test_alibi_learned_slopes_gradient_matches_float64(symmetric):
    # ALiBi's slopes as an input (learned_slopes): d slope_h = sum dS * distance.
    import reference as ref
    heads, s = 12, 30
    q, k, v = inputs(hq=heads, hkv=4, sq=s, skv=s)
    g = generator()
    slopes = (torch.tensor(ref.alibi_slopes(heads), dtype=torch.float32)
              * (torch.rand(heads, generator=g) + 0.5)).requires_grad_()
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    options = pejit.torch.options(alibi={"num_heads": heads, "symmetric": symmetric},
                                  causal=not symmetric)
    o = torch.ops.pejit.attention(*leaves, options, None, None, None, None, slopes)
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    expected = [x.detach().double().requires_grad_() for x in (q, k, v, slopes)]
    i, j = torch.arange(s)[:, None], torch.arange(s)[None, :]
    distance = -(i - j).abs() if symmetric else (j - i)
    bias = expected[3][:, None, None] * distance
    kk, vv = (x.repeat_interleave(3, dim=1) for x in expected[1:3])
    scores = torch.einsum("bhid,bhjd->bhij", expected[0], kk) * 32 ** -0.5 + bias
    if not symmetric:
        scores = scores.masked_fill(j > i, float("-inf"))
    reference = torch.einsum("bhij,bhjd->bhid", torch.softmax(scores, -1), vv)
    (reference * do.double()).sum().backward()
    for got, want, name in zip(leaves + [slopes], expected, ("dq", "dk", "dv", "dslopes")):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


def test_alibi_attention_module_starts_at_the_paper_slopes_and_learns_them():
    import reference as ref
    layer = pejit.torch.ALiBiAttention(num_heads=8, causal=True)
    assert np.allclose(layer.slopes.detach().numpy(), ref.alibi_slopes(8))
    q, k, v = (x.requires_grad_() for x in inputs(hq=8, hkv=8, sq=20, skv=20))
    layer(q, k, v).square().sum().backward()
    assert layer.slopes.grad is not None and layer.slopes.grad.abs().max() > 0
    torch.library.opcheck(torch.ops.pejit.attention.default,
                          (q, k, v, layer.options, None, None, None, None, layer.slopes))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_half_precision_autograd_gives_half_gradients(dtype):
    # 16-bit q, k, v give 16-bit gradients, computed in f32 (docs/backward.md);
    # 2e-2 max-norm relative to float64 gradients of the rounded inputs.
    q, k, v = (x.to(dtype) for x in inputs(sq=40, skv=40))
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = torch.ops.pejit.attention(*leaves, pejit.torch.options(rope=True, causal=True))
    do = torch.randn(o.shape, generator=generator()).to(dtype)
    (o * do).float().sum().backward()
    positions = torch.arange(40)
    expected = [x.detach().double().requires_grad_() for x in (q, k, v)]
    reference = reference_attention(hf_rope(expected[0], positions),
                                    hf_rope(expected[1], positions), expected[2], causal=True)
    (reference * do.double()).sum().backward()
    for got, want, name in zip(leaves, expected, ("dq", "dk", "dv")):
        assert got.grad.dtype == dtype, name
        assert relative_error(got.grad, want.grad) < 2e-2, name


@pytest.mark.parametrize("learn_scale", [False, True], ids=["frequencies", "frequencies + scale"])
def test_learned_rope_frequencies_gradient_matches_float64(learn_scale):
    # RoPE's inverse frequencies as a parameter (learned_inv_freq): its
    # gradient, with the position scale's beside it, through autograd.
    layer = pejit.torch.LearnedFrequencyRoPEAttention(32, causal=True, learn_scale=learn_scale)
    with torch.no_grad():  # moved away from theta's, as training would
        layer.inv_freq.mul_(torch.rand(16, generator=generator()) + 0.5)
        if learn_scale:
            layer.scale.fill_(0.8)
    q, k, v = inputs(sq=30, skv=30)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = layer(*leaves)
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    params = [layer.inv_freq] + ([layer.scale] if learn_scale else [])
    expected = [x.detach().double().requires_grad_() for x in [q, k, v] + params]
    positions = torch.arange(30)
    scale = expected[4] if learn_scale else None
    reference = reference_attention(
        hf_rope(expected[0], positions, scale=scale, inv_freq=expected[3]),
        hf_rope(expected[1], positions, scale=scale, inv_freq=expected[3]), expected[2],
        causal=True)
    (reference * do.double()).sum().backward()
    names = ("dq", "dk", "dv", "dinv_freq", "dscale")
    for got, want, name in zip(leaves + params, expected, names):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


def test_packed_sequences_train_through_autograd():
    # A packed batch (FlashAttention's varlen): each sequence its own causal
    # attention with RoPE at positions 0 .. n - 1; the gradients of each
    # sequence match float64 autograd on that sequence alone.
    lengths = [7, 30, 1, 20]
    cu = torch.tensor([0] + list(np.cumsum(lengths)), dtype=torch.int32)
    total = int(cu[-1])
    q, k, v = inputs(b=1, sq=total, skv=total)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = pejit.torch.attention(*leaves, pejit.torch.options(rope=True, causal=True),
                              cu_seqlens_q=cu, cu_seqlens_k=cu)
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    # The reference gradients, sequence by sequence, placed in whole tensors
    # (a one-token sequence's dq and dk are exactly 0: compared as part of
    # the whole, by the whole's max-norm).
    want = [torch.zeros(x.shape, dtype=torch.float64) for x in (q, k, v)]
    for n, length in enumerate(lengths):
        rows = slice(int(cu[n]), int(cu[n + 1]))
        part = [x[:, :, rows].detach().double().requires_grad_() for x in (q, k, v)]
        positions = torch.arange(length)
        reference = reference_attention(hf_rope(part[0], positions), hf_rope(part[1], positions),
                                        part[2], causal=True)
        (reference * do[:, :, rows].double()).sum().backward()
        for whole, p in zip(want, part):
            whole[:, :, rows] = p.grad
    for got, expected, name in zip(leaves, want, ("dq", "dk", "dv")):
        assert relative_error(got.grad, expected) < TOLERANCE, name


def test_key_lengths_leave_unused_keys_without_gradient():
    q, k, v = inputs(b=2, sq=5, skv=24)
    lengths = torch.tensor([24, 9], dtype=torch.int32)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = pejit.torch.attention(*leaves, pejit.torch.options(), key_lengths=lengths)
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    assert leaves[1].grad[1, :, 9:].abs().max() == 0 and leaves[2].grad[1, :, 9:].abs().max() == 0
    for n, length in enumerate(lengths.tolist()):
        part = [x[n:n + 1].detach().double().requires_grad_() for x in (q, k, v)]
        part[1] = part[1][:, :, :length].detach().requires_grad_()
        part[2] = part[2][:, :, :length].detach().requires_grad_()
        (reference_attention(*part) * do[n:n + 1].double()).sum().backward()
        assert relative_error(leaves[0].grad[n:n + 1], part[0].grad) < TOLERANCE
        assert relative_error(leaves[1].grad[n:n + 1, :, :length], part[1].grad) < TOLERANCE
        assert relative_error(leaves[2].grad[n:n + 1, :, :length], part[2].grad) < TOLERANCE
