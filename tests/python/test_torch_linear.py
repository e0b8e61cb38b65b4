"""Linear attention trains (docs/backward.md, "Linear attention"):
pejit.linear_attention_backward and torch autograd through
torch.ops.pejit.linear_attention against float64 autograd of the
definition in plain torch (max-norm relative error: forward 1e-5,
gradients 1e-4 in f32, 2e-2 in bf16), and the seed's
LinearAttentionWithRoPE against the seed's code in plain torch: forward,
gradients, 10 SGD steps alike, a training step under
torch.compile(fullgraph=True). Skipped when the test venv has no torch."""
import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit  # noqa: E402
import pejit.torch  # noqa: E402
from training_support import (TOLERANCE, fullgraph_sgd_steps, generator, hf_rope,  # noqa: E402
                              relative_error, train_side_by_side)


def reference_linear(q, k, v, feature_map, causal, rope, placement, positions=None):
    """docs/linear-attention.md's definition in plain torch (q, k, v's dtype;
    GQA by repeat; ids default to 0 .. s-1 with sq = skv)."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q.shape[2]
    positions = torch.arange(s) if positions is None else positions
    rotate = (lambda x: hf_rope(x, positions)) if rope else (lambda x: x)
    visible = torch.ones(s, s).tril() if causal else torch.ones(s, s)
    visible = visible.to(q.dtype)
    if feature_map == "softmax_keys":
        qr, kr = rotate(q), rotate(k)
        # softmax over the visible keys per channel: exp(k - max) summed
        # row by row (the max over all keys is a shift that cancels).
        e = (kr - kr.amax(dim=2, keepdim=True)).exp()
        z = torch.einsum("ij,bhjc->bhic", visible, e)
        num = torch.einsum("ij,bhjc,bhje->bhice", visible, e, v)
        return torch.einsum("bhic,bhice->bhie", qr / z, num)
    phi = {"elu_plus_one": lambda x: torch.nn.functional.elu(x) + 1,
           "relu": torch.relu, "identity": lambda x: x}[feature_map]
    if rope and placement == "rope_on_numerator":
        qn, kn, qd, kd = rotate(phi(q)), rotate(phi(k)), phi(q), phi(k)
    else:
        qn = qd = phi(rotate(q))
        kn = kd = phi(rotate(k))
    scores = torch.einsum("bhid,bhjd->bhij", qn, kn) * visible
    out = scores @ v
    if feature_map == "identity":
        return out
    return out / (torch.einsum("bhid,bhjd->bhij", qd, kd) * visible).sum(-1, keepdim=True)


CASES = [("elu_plus_one", False, None), ("elu_plus_one", True, "rope_on_numerator"),
         ("relu", True, "rope_before_feature_map"), ("identity", False, "rope_on_numerator"),
         ("softmax_keys", False, "rope_before_feature_map"), ("softmax_keys", True, None)]


@pytest.mark.parametrize("feature_map,causal,placement", CASES,
                         ids=[f"{m}{' causal' if c else ''} {p or 'no rope'}"
                              for m, c, p in CASES])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_autograd_matches_float64(feature_map, causal, placement, dtype):
    g = generator()
    q, k, v = (torch.randn(2, h, 45, 32, generator=g) * 0.5 for h in (4, 2, 2))
    if feature_map == "relu":  # rows whose features all vanish have no gradient
        q, k = q.abs(), k.abs()
    do = torch.randn(2, 4, 45, 32, generator=g)
    leaves = [x.to(dtype).requires_grad_() for x in (q, k, v)]
    rope = placement is not None
    out = pejit.torch.linear_attention(*leaves, feature_map=feature_map, causal=causal,
                                       rope=True if rope else None, rope_placement=placement,
                                       q_positions=torch.arange(45) if rope else None,
                                       k_positions=torch.arange(45) if rope else None)
    (out.float() * do).sum().backward()
    want = [x.to(dtype).double().detach().requires_grad_() for x in (q, k, v)]
    out64 = reference_linear(*want, feature_map, causal, rope, placement)
    (out64 * do.double()).sum().backward()
    forward_tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert relative_error(out.detach().float(), out64.detach()) < forward_tolerance
    tolerance = TOLERANCE if dtype == torch.float32 else 2e-2
    for name, got, ref in zip("qkv", leaves, want):
        assert got.grad.dtype == dtype, name
        assert relative_error(got.grad.float(), ref.grad) < tolerance, name


def test_numpy_backward_and_errors_that_name_the_option():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 2, 20, 16)).astype(np.float32) for _ in range(3))
    o = pejit.linear_attention(q, k, v, feature_map="softmax_keys", causal=True, rope=True)
    do = rng.standard_normal(o.shape).astype(np.float32)
    dq, dk, dv = pejit.linear_attention_backward(q, k, v, o, do, feature_map="softmax_keys",
                                                 causal=True, rope=True)
    leaves = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v)]
    out64 = reference_linear(*leaves, "softmax_keys", True, True, "rope_before_feature_map")
    (out64 * torch.tensor(do, dtype=torch.float64)).sum().backward()
    for got, ref in zip((dq, dk, dv), leaves):
        assert isinstance(got, np.ndarray) and got.dtype == np.float32
        assert relative_error(torch.from_numpy(got), ref.grad) < TOLERANCE
    with pytest.raises(pejit.Error, match="feature_map: expected one of"):
        pejit.linear_attention(q, k, v, feature_map="softmax")
    with pytest.raises(pejit.Error, match="softmax_keys has no denominator"):
        pejit.linear_attention_backward(q, k, v, o, do, feature_map="softmax_keys", rope=True,
                                        rope_placement="rope_on_numerator")
    with pytest.raises(pejit.Error, match=r"do: expected float32 \[b, hq, sq, dv\]"):
        pejit.linear_attention_backward(q, k, v, o, do[:, :, :5])


def test_ops_pass_opcheck():
    g = generator()
    q, k, v = (torch.randn(1, 2, 11, 16, generator=g, requires_grad=True) for _ in range(3))
    options = pejit.torch.linear_options("elu_plus_one", True, True, "rope_on_numerator")
    ids = torch.arange(11)
    torch.library.opcheck(torch.ops.pejit.linear_attention.default,
                          (q, k, v, options, ids, ids))
    o = torch.ops.pejit.linear_attention(q.detach(), k.detach(), v.detach(), options, ids, ids)
    torch.library.opcheck(torch.ops.pejit.linear_attention_backward.default,
                          (q.detach(), k.detach(), v.detach(), o, torch.randn_like(o), options,
                           ids, ids))


class SeedLinearAttentionWithRoPE(torch.nn.Module):
    """The seed's LinearAttentionWithRoPE in plain torch: RoPE on q and k,
    K softmaxed over the sequence, two einsums."""

    def __init__(self, d_model, num_heads):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q_proj = torch.nn.Linear(d_model, d_model)
        self.k_proj = torch.nn.Linear(d_model, d_model)
        self.v_proj = torch.nn.Linear(d_model, d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)

    def forward(self, x, positions=None):
        b, s, d_model = x.shape
        positions = torch.arange(s) if positions is None else positions

        def heads(y):
            return y.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        q, k = hf_rope(q, positions), hf_rope(k, positions)
        k = k.softmax(dim=-2)
        context = torch.einsum("bhnd,bhne->bhde", k, v)
        out = torch.einsum("bhnd,bhde->bhne", q, context)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, d_model))


def seed_pair():
    torch.manual_seed(7)
    ours = pejit.torch.LinearAttentionWithRoPE(64, 4)
    seed = SeedLinearAttentionWithRoPE(64, 4)
    seed.load_state_dict(ours.state_dict())
    return ours, seed


def test_seed_module_matches_the_seed_forward_and_gradients():
    ours, seed = seed_pair()
    g = generator()
    x = torch.randn(2, 40, 64, generator=g)
    dy = torch.randn(2, 40, 64, generator=g)
    leaf = x.clone().requires_grad_()
    (ours(leaf) * dy).sum().backward()
    want = x.double().requires_grad_()
    seed64 = seed.double()
    y64 = seed64(want)
    (y64 * dy.double()).sum().backward()
    assert relative_error(ours(x).detach(), y64.detach()) < 1e-5
    assert relative_error(leaf.grad, want.grad) < TOLERANCE
    for (name, a), b in zip(ours.named_parameters(), seed64.parameters()):
        assert relative_error(a.grad, b.grad) < TOLERANCE, name


def test_seed_module_trains_like_the_seed_for_ten_sgd_steps():
    ours, seed = seed_pair()
    train_side_by_side(ours, seed, lr=0.05, length=24, steps=10)


def test_seed_module_training_step_compiles_fullgraph():
    g = generator()
    x, target = torch.randn(2, 24, 64, generator=g), torch.randn(2, 24, 64, generator=g)

    def make():
        torch.manual_seed(7)
        return pejit.torch.LinearAttentionWithRoPE(64, 4, causal=True)

    fullgraph_sgd_steps(make, x, target, "pejit.linear_attention")
