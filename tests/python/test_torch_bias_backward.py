"""A bias tensor's gradient (docs/backward.md): dS summed over the bias's
broadcast dims, computed only when the bias requires grad (else it is a
mask, held fixed). Through pejit.torch.attention's autograd and through
pejit.attention_backward, against float64 torch autograd of plain
attention with the bias added after the scale: max-norm relative error,
tolerance 1e-4 (float32); fresh random inputs with -inf entries."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pejit  # noqa: E402
import pejit.torch  # noqa: E402
from training_support import TOLERANCE, generator, inputs, relative_error  # noqa: E402


def biased_reference(q, k, v, bias, causal):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = torch.einsum("bhid,bhjd->bhij", q, k) * q.shape[-1] ** -0.5 + bias
    sq, skv = q.shape[2], k.shape[2]
    if causal:
        i = torch.arange(sq)[:, None] + (skv - sq)
        s = s.masked_fill(torch.arange(skv)[None, :] > i, float("-inf"))
    # A row that sees no key outputs 0 (its softmax would be NaN, and so
    # would its autograd): softmax of zeros there, multiplied by 0.
    empty = torch.isinf(s).all(dim=-1, keepdim=True)
    p = torch.softmax(s.masked_fill(empty, 0.0), dim=-1) * ~empty
    return torch.einsum("bhij,bhjd->bhid", p, v)


def draw_bias(shape, g):
    bias = torch.randn(shape, generator=g)
    bias[..., 2, :] = float("-inf")  # a row that sees no key
    bias[..., 5, 1] = float("-inf")
    return bias


@pytest.mark.parametrize("shape", [(1, 4, 19, 27), (19, 27), (2, 1, 19, 27)],
                         ids=["per head", "[sq, skv]", "per batch row"])
def test_bias_gradient_through_autograd_matches_float64(shape):
    g = generator()
    q, k, v = inputs(b=2, sq=19, skv=27, g=g)
    bias = draw_bias(shape, g).requires_grad_()
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = pejit.torch.attention(*leaves, pejit.torch.options(causal=True), bias=bias)
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    expected = [x.detach().double().requires_grad_() for x in (q, k, v, bias)]
    (biased_reference(*expected, causal=True) * do.double()).sum().backward()
    for got, want, name in zip(leaves + [bias], expected, ("dq", "dk", "dv", "dbias")):
        assert got.grad.shape == want.grad.shape, name
        assert relative_error(got.grad, want.grad) < TOLERANCE, name


def test_a_mask_gets_no_gradient_and_the_others_are_right():
    g = generator()
    q, k, v = inputs(sq=16, skv=16, g=g)
    mask = torch.ones(16, 16, dtype=torch.bool).tril()  # True attends
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    o = pejit.torch.attention(*leaves, pejit.torch.options(), bias=mask)
    do = torch.randn(o.shape, generator=g)
    (o * do).sum().backward()
    additive = torch.zeros(16, 16, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    expected = [x.detach().double().requires_grad_() for x in (q, k, v)]
    (biased_reference(*expected, additive, causal=False) * do.double()).sum().backward()
    for got, want in zip(leaves, expected):
        assert relative_error(got.grad, want.grad) < TOLERANCE


def test_numpy_attention_backward_returns_the_bias_gradient_in_its_shape():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 2, 12, 16)).astype(np.float32) for _ in range(3))
    bias = rng.standard_normal((12, 12)).astype(np.float32)
    o = pejit.attention(q, k, v, bias=bias)
    do = rng.standard_normal(o.shape).astype(np.float32)
    grads = pejit.attention_backward(q, k, v, o, do, bias=bias)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape, (12, 12)]
    expected = [torch.from_numpy(x).double().requires_grad_() for x in (q, k, v, bias)]
    (biased_reference(*expected, causal=False) * torch.from_numpy(do).double()).sum().backward()
    for got, want in zip(grads, expected):
        assert relative_error(torch.from_numpy(got), want.grad) < TOLERANCE
    # bias_grad=False: a mask, dq, dk, dv only.
    assert len(pejit.attention_backward(q, k, v, o, do, bias=bias, bias_grad=False)) == 3
