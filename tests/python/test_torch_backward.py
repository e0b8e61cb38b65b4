"""Training through pejit (docs/backward.md): pejit.attention_backward, the
autograd formula of torch.ops.pejit.attention, opcheck's autograd checks,
torch.compile(fullgraph=True) of a training step, and a small model trained
through pejit step for step against the same model in plain torch (SDPA).
Gradients are compared with float64 torch autograd by max-norm relative
error, tolerance 1e-4 (float32). Skipped when the test venv has no torch."""
import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit  # noqa: E402
import pejit.torch  # noqa: E402

TOLERANCE = 1e-4


def generator():
    return torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 31)))


def inputs(b=1, hq=4, hkv=2, sq=37, skv=37, d=32, dv=32, g=None):
    g = g or generator()
    make = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return make(b, hq, sq, d), make(b, hkv, skv, d), make(b, hkv, skv, dv)


def reference_attention(q, k, v, causal=False, window=None, softcap=None, scale=None):
    """Attention in plain torch (float64 when given float64), GQA by repeat:
    docs/semantics.md's masks, bottom-right aligned."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
    if softcap is not None:
        s = softcap * torch.tanh(s / softcap)
    sq, skv = q.shape[2], k.shape[2]
    i = torch.arange(sq)[:, None] + (skv - sq)
    j = torch.arange(skv)[None, :]
    visible = torch.ones(sq, skv, dtype=torch.bool)
    if causal:
        visible &= j <= i
    if window is not None:
        left, right = window if isinstance(window, tuple) else (window, None)
        if left is not None:
            visible &= j >= i - left
        if right is not None:
            visible &= j <= i + right
    s = s.masked_fill(~visible, float("-inf"))
    p = torch.softmax(s, dim=-1).nan_to_num(0.0)  # a row that sees no key: zeros
    return torch.einsum("bhij,bhjd->bhid", p, v)


def relative_error(got, want):
    return ((got.double() - want).abs().max() / want.abs().max()).item()


def float64_gradients(q, k, v, do, **options):
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    (reference_attention(*leaves, **options) * do.double()).sum().backward()
    return [x.grad for x in leaves]


CASES = [dict(), dict(causal=True), dict(causal=True, softcap=0.8), dict(window=(6, 3)),
         dict(causal=True, window=5, scale=0.3)]


@pytest.mark.parametrize("options", CASES, ids=str)
@pytest.mark.parametrize("lengths", [(37, 37), (1, 20), (20, 9)], ids=str)
def test_autograd_matches_float64(options, lengths):
    q, k, v = inputs(sq=lengths[0], skv=lengths[1])
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = torch.ops.pejit.attention(*leaves, pejit.torch.options(**options))
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    for got, want, name in zip([x.grad for x in leaves], float64_gradients(q, k, v, do, **options),
                               ("dq", "dk", "dv")):
        assert relative_error(got, want) < TOLERANCE, name


def test_numpy_backward_and_determinism():
    q, k, v = inputs(b=2, hq=8, hkv=2, sq=50, skv=64)
    o = pejit.attention(q.numpy(), k.numpy(), v.numpy(), causal=True)
    do = np.random.default_rng().standard_normal(o.shape).astype(np.float32)
    first = pejit.attention_backward(q.numpy(), k.numpy(), v.numpy(), o, do, causal=True)
    again = pejit.attention_backward(q.numpy(), k.numpy(), v.numpy(), o, do, causal=True)
    want = float64_gradients(q, k, v, torch.from_numpy(do), causal=True)
    for got, repeat, expected, name in zip(first, again, want, ("dq", "dk", "dv")):
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert relative_error(torch.from_numpy(got), expected) < TOLERANCE, name
        assert np.array_equal(got, repeat), f"{name} differs between two runs"


def test_a_strided_or_broadcast_output_gradient():
    # loss = o.sum() hands the backward a stride-0 gradient of ones.
    q, k, v = inputs()
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    torch.ops.pejit.attention(*leaves, pejit.torch.options(causal=True)).sum().backward()
    want = float64_gradients(q, k, v, torch.ones(1, 4, 37, 32), causal=True)
    for got, expected in zip([x.grad for x in leaves], want):
        assert relative_error(got, expected) < TOLERANCE


def test_alibi_autograd_matches_float64():
    import reference as ref
    q, k, v = inputs(hq=8, hkv=8, sq=30, skv=30)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = torch.ops.pejit.attention(*leaves, pejit.torch.options(alibi=True, causal=True))
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    slopes = torch.tensor(ref.alibi_slopes(8), dtype=torch.float64)[:, None, None]
    i, j = torch.arange(30)[:, None], torch.arange(30)[None, :]
    bias = -slopes * (i - j)
    expected = [x.detach().double().requires_grad_() for x in (q, k, v)]
    s = torch.einsum("bhid,bhjd->bhij", expected[0], expected[1]) * 32 ** -0.5 + bias
    s = s.masked_fill(j > i, float("-inf"))
    reference = torch.einsum("bhij,bhjd->bhid", torch.softmax(s, -1), expected[2])
    (reference * do.double()).sum().backward()
    for got, want, name in zip(leaves, expected, ("dq", "dk", "dv")):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


def hf_rope(x, positions, theta=10000.0, scale=None, inv_freq=None):
    """HF's rotate_half RoPE: x [b, h, s, d], positions [s] or [b, s]; a
    position scale [1] or [b] (a tensor, so autograd reaches it) multiplies
    the positions."""
    d = x.shape[-1]
    if inv_freq is None:
        inv_freq = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    positions = positions.to(x.dtype)
    if scale is not None:
        positions = positions * (scale if positions.dim() == 1 and scale.numel() == 1
                                 else scale.reshape(-1, 1))
    angles = positions[..., None] * inv_freq.to(x.dtype)  # [(b,) s, d/2]
    emb = torch.cat([angles, angles], dim=-1)
    if emb.dim() == 3:
        emb = emb[:, None]
    cos, sin = emb.cos(), emb.sin()
    half = d // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


@pytest.mark.parametrize("ids", ["default", "given", "given per batch row"])
def test_rope_autograd_matches_float64(ids):
    # dq and dk come back rotated by RoPE's adjoint inside the kernel.
    b, sq, skv = 2, 29, 41
    q, k, v = inputs(b=b, sq=sq, skv=skv)
    g = generator()
    q_positions = k_positions = None
    if ids == "given":
        q_positions = torch.randint(0, 200, (sq,), generator=g)
        k_positions = torch.randint(0, 200, (skv,), generator=g)
    elif ids == "given per batch row":
        q_positions = torch.randint(0, 200, (b, sq), generator=g)
        k_positions = torch.randint(0, 200, (b, skv), generator=g)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = torch.ops.pejit.attention(*leaves, pejit.torch.options(rope=True, causal=True),
                                  q_positions, k_positions)
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    qp = torch.arange(skv - sq, skv) if q_positions is None else q_positions
    kp = torch.arange(skv) if k_positions is None else k_positions
    expected = [x.detach().double().requires_grad_() for x in (q, k, v)]
    reference = reference_attention(hf_rope(expected[0], qp), hf_rope(expected[1], kp),
                                    expected[2], causal=True)
    (reference * do.double()).sum().backward()
    for got, want, name in zip(leaves, expected, ("dq", "dk", "dv")):
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


def test_opcheck_including_autograd():
    q, k, v = (x.requires_grad_() for x in inputs(sq=16, skv=16))
    options = pejit.torch.options(causal=True)
    torch.library.opcheck(torch.ops.pejit.attention.default, (q, k, v, options))
    o = torch.ops.pejit.attention(q, k, v, options).detach()
    torch.library.opcheck(torch.ops.pejit.attention_backward.default,
                          (q.detach(), k.detach(), v.detach(), o, torch.randn_like(o), options))
    # With a learnable T5 table: the op's autograd reaches it too.
    t5 = pejit.torch.options(t5={"num_buckets": 32}, causal=True)
    table = torch.randn(32, 4, generator=generator()).requires_grad_()
    torch.library.opcheck(torch.ops.pejit.attention.default, (q, k, v, t5, None, None, table))
    # RoPE with a learnable position scale, beside the table, with ids.
    both = pejit.torch.options(rope=True, t5={"num_buckets": 32}, causal=True)
    scale = torch.tensor([0.7]).requires_grad_()
    ids = torch.arange(16)
    torch.library.opcheck(torch.ops.pejit.attention.default,
                          (q, k, v, both, ids, ids, table, scale))


class Block(torch.nn.Module):
    """A pre-norm attention block: projections, causal attention (pejit's
    op, or plain torch's SDPA), output projection, residual."""

    def __init__(self, width=64, heads=4, use_pejit=True):
        super().__init__()
        self.heads, self.use_pejit = heads, use_pejit
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.attention = pejit.torch.Attention(causal=True)

    def forward(self, x):
        b, s, width = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.use_pejit:
            o = self.attention(q, k, v)
        else:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.out(o.transpose(1, 2).reshape(b, s, width))


def model(use_pejit, seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(Block(use_pejit=use_pejit), Block(use_pejit=use_pejit))


def test_torch_compile_fullgraph_captures_the_backward_op():
    # The model compiles as one graph; AOTAutograd traces its backward,
    # which calls pejit::attention_backward. (torch itself breaks the graph
    # at loss.backward() and optimizer.zero_grad(), so those stay eager.)
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    graphs = {"forward": [], "backward": []}

    def recorder(kind):
        def compiler(gm, example_inputs):
            graphs[kind].append(gm.code)
            return make_boxed_func(gm.forward)
        return compiler

    backend = aot_autograd(fw_compiler=recorder("forward"), bw_compiler=recorder("backward"))
    net = model(use_pejit=True, seed=1)
    compiled = torch.compile(net, fullgraph=True, backend=backend)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)
    g = generator()
    x, target = torch.randn(2, 24, 64, generator=g), torch.randn(2, 24, 64, generator=g)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(compiled(x), target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert len(graphs["forward"]) == 1, "the forward broke into several graphs"
    assert any("pejit.attention_backward" in code for code in graphs["backward"])
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]


def test_twenty_sgd_steps_match_plain_torch():
    through_pejit, plain = model(use_pejit=True, seed=2), model(use_pejit=False, seed=2)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.05) for m in (through_pejit, plain)]
    g = generator()
    x, target = torch.randn(2, 32, 64, generator=g), torch.randn(2, 32, 64, generator=g)
    for step in range(20):
        losses = []
        for net, optimizer in zip((through_pejit, plain), optimizers):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= TOLERANCE * abs(losses[1]), f"step {step}: {losses}"
    for (name, a), b in zip(through_pejit.named_parameters(), plain.parameters()):
        assert relative_error(a.detach(), b.detach().double()) < TOLERANCE, name


class T5Block(torch.nn.Module):
    """An attention block with T5's learned relative bias: pejit's
    T5Attention, or plain torch as HF's T5 does it (the [h, s, s] bias
    gathered from the table by bucket, added through SDPA's attn_mask)."""

    def __init__(self, width=64, heads=4, use_pejit=True):
        super().__init__()
        self.heads, self.use_pejit = heads, use_pejit
        self.norm = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.attention = pejit.torch.T5Attention(heads, num_buckets=32, max_distance=128,
                                                 bidirectional=True)

    def forward(self, x):
        import reference as ref
        b, s, width = x.shape
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.use_pejit:
            o = self.attention(q, k, v)
        else:
            rel = torch.arange(s)[None, :] - torch.arange(s)[:, None]
            buckets = torch.from_numpy(ref.t5_buckets(rel.numpy(), True, 32, 128)).long()
            bias = self.attention.table[buckets].permute(2, 0, 1)[None]  # [1, h, s, s]
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return x + self.out(o.transpose(1, 2).reshape(b, s, width))


def test_t5_table_trains_like_plain_torch_for_twenty_sgd_steps():
    nets = []
    for use_pejit in (True, False):
        torch.manual_seed(3)
        nets.append(torch.nn.Sequential(T5Block(use_pejit=use_pejit), T5Block(use_pejit=use_pejit)))
    optimizers = [torch.optim.SGD(net.parameters(), lr=0.1) for net in nets]
    g = generator()
    x, target = torch.randn(2, 40, 64, generator=g), torch.randn(2, 40, 64, generator=g)
    for step in range(20):
        losses = []
        for net, optimizer in zip(nets, optimizers):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= TOLERANCE * abs(losses[1]), f"step {step}: {losses}"
    tables = [net[0].attention.table for net in nets]
    assert tables[0].grad is not None and tables[0].grad.abs().max() > 0
    for (name, a), b in zip(nets[0].named_parameters(), nets[1].parameters()):
        assert relative_error(a.detach(), b.detach().double()) < TOLERANCE, name


def test_t5_table_gradient_from_numpy():
    import reference as ref
    q, k, v = inputs(hq=4, hkv=4, sq=33, skv=33)
    table = torch.randn(32, 4, generator=generator())
    t5 = pejit.T5Config(num_buckets=32, max_distance=128, bidirectional=False)
    o = pejit.attention(q.numpy(), k.numpy(), v.numpy(), t5=t5, t5_table=table.numpy(),
                        causal=True)
    do = np.random.default_rng().standard_normal(o.shape).astype(np.float32)
    dq, dk, dv, dtable = pejit.attention_backward(q.numpy(), k.numpy(), v.numpy(), o, do, t5=t5,
                                                  t5_table=table.numpy(), causal=True)
    leaves = [x.double().requires_grad_() for x in (q, k, v, table)]
    rel = torch.arange(33)[None, :] - torch.arange(33)[:, None]
    buckets = torch.from_numpy(ref.t5_buckets(rel.numpy(), False, 32, 128)).long()
    bias = leaves[3][buckets].permute(2, 0, 1)[None]
    s = torch.einsum("bhid,bhjd->bhij", leaves[0], leaves[1]) * 32 ** -0.5 + bias
    s = s.masked_fill(rel > 0, float("-inf"))
    reference = torch.einsum("bhij,bhjd->bhid", torch.softmax(s, -1), leaves[2])
    (reference * torch.from_numpy(do).double()).sum().backward()
    for got, leaf, name in zip((dq, dk, dv, dtable), leaves, ("dq", "dk", "dv", "dtable")):
        assert relative_error(torch.from_numpy(got), leaf.grad) < TOLERANCE, name


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
    optimizers = [torch.optim.SGD(net.parameters(), lr=0.1) for net in nets]
    g = generator()
    x, target = torch.randn(2, 40, 64, generator=g), torch.randn(2, 40, 64, generator=g)
    for step in range(20):
        losses = []
        for net, optimizer in zip(nets, optimizers):
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert abs(losses[0] - losses[1]) <= TOLERANCE * abs(losses[1]), f"step {step}: {losses}"
    for layer in nets[0]:
        assert layer.scale.grad is not None and layer.scale.grad.abs().max() > 0
        assert layer.table.grad is not None and layer.table.grad.abs().max() > 0
    assert abs(nets[0][0].scale.item() - 0.8) > 1e-6, "the position scale did not move"
    for (name, a), b in zip(nets[0].named_parameters(), nets[1].parameters()):
        assert relative_error(a.detach(), b.detach().double()) < TOLERANCE, name


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
