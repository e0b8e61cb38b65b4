"""Helpers of the torch training tests (test_torch_backward.py,
test_torch_learned_encodings.py): inputs, float64 attention in plain torch
with docs/semantics.md's masks, HF's rotate_half RoPE, and the max-norm
relative error they compare by."""
import numpy as np
import torch

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


def train_side_by_side(through_pejit, plain, lr, length, steps=20):
    """SGD steps on the same data for a model through pejit and the same
    model in plain torch: the losses must agree at every step and every
    parameter at the end, to TOLERANCE relative."""
    optimizers = [torch.optim.SGD(net.parameters(), lr=lr) for net in (through_pejit, plain)]
    g = generator()
    x, target = torch.randn(2, length, 64, generator=g), torch.randn(2, length, 64, generator=g)
    for step in range(steps):
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


def fullgraph_sgd_steps(make_model, x, target, op_name, steps=2, lr=0.1):
    """SGD steps of make_model() under torch.compile(fullgraph=True) (the
    forward, the loss, torch.autograd.grad and the update in one graph, no
    break) beside the same steps run eagerly on a second make_model(): each
    graph must call `op_name` and autograd.grad, and the parameters must
    agree at the end to 1e-5. Skips when torch cannot trace the backward."""
    import torch._dynamo
    import pytest
    if not hasattr(torch._dynamo.config, "trace_autograd_ops"):
        pytest.skip(f"torch {torch.__version__} cannot trace the backward in a graph")
    models = [make_model(), make_model()]

    def step(model):
        params = list(model.parameters())
        loss = torch.nn.functional.mse_loss(model(x), target)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, grad in zip(params, grads):
                p -= lr * grad
        return loss.detach()

    graphs = []

    def recorder(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.reset()
    torch._dynamo.config.trace_autograd_ops = True
    try:
        compiled = torch.compile(step, fullgraph=True, backend=recorder)
        for _ in range(steps):
            compiled(models[0])
            step(models[1])
    finally:
        torch._dynamo.config.trace_autograd_ops = False
    assert graphs
    for code in graphs:
        assert op_name in code and "autograd.grad" in code, code
    for (name, got), want in zip(models[0].named_parameters(), models[1].parameters()):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), name
