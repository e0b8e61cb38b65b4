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
from training_support import (TOLERANCE, float64_gradients, generator, hf_rope,  # noqa: E402
                              inputs, reference_attention, relative_error, train_side_by_side)

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
    train_side_by_side(through_pejit, plain, lr=0.05, length=32)


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
    train_side_by_side(*nets, lr=0.1, length=40)
    tables = [net[0].attention.table for net in nets]
    assert tables[0].grad is not None and tables[0].grad.abs().max() > 0


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
