"""The standalone kernels train (docs/backward.md, "Standalone kernels"):
RoPE on its own through torch.ops.pejit.rope and its backward op, and the
seed's position modules in pejit.torch against the seed's formulas written
in plain torch: forward to 1e-5, gradients to 1e-4 (max-norm relative
error against float64 autograd; 2e-2 for bf16), 10 SGD steps within 1e-4,
and a training step under torch.compile(fullgraph=True). Skipped when the
test venv has no torch."""
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


def seed_rotary(x, positions, base=10000.0):
    """The seed's RotaryPositionEmbedding, in plain torch (x's dtype)."""
    return hf_rope(x, positions, theta=base)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("per_row", [False, True], ids=["shared ids", "ids per row"])
def test_rope_autograd_matches_float64(dtype, per_row):
    g = generator()
    b, h, s, d = 2, 3, 37, 64
    x = torch.randn(b, h, s, d, generator=g)
    positions = torch.randint(0, 3000, (b, s) if per_row else (s,), generator=g)
    dy = torch.randn(b, h, s, d, generator=g)
    module = pejit.torch.RotaryPositionEmbedding(d)
    leaf = x.to(dtype).requires_grad_()
    y = module(leaf, positions)
    (y.float() * dy).sum().backward()
    want = x.to(dtype).double().detach().requires_grad_()
    y64 = seed_rotary(want, positions)
    (y64 * dy.double()).sum().backward()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    assert relative_error(y.detach().float(), y64.detach()) < tolerance
    assert leaf.grad.dtype == dtype
    tolerance = TOLERANCE if dtype == torch.float32 else 2e-2
    assert relative_error(leaf.grad.float(), want.grad) < tolerance


def test_rope_ops_pass_opcheck_and_rope_backward_is_rope_transposed():
    g = generator()
    x = torch.randn(1, 2, 9, 32, generator=g, requires_grad=True)
    positions = torch.arange(9)
    options = pejit.torch.rope_options({"rope_theta": 500000.0})
    torch.library.opcheck(torch.ops.pejit.rope.default, (x, positions, options))
    torch.library.opcheck(torch.ops.pejit.rope_backward.default, (x, positions, options))
    # <R x, u> = <x, R^T u> in float64 terms.
    u = torch.randn(1, 2, 9, 32, generator=g)
    rx = torch.ops.pejit.rope(x.detach(), positions, options)
    rtu = torch.ops.pejit.rope_backward(u, positions, options)
    left, right = (rx.double() * u.double()).sum(), (x.detach().double() * rtu.double()).sum()
    assert abs(left - right) <= 1e-5 * (rx.double() * u.double()).abs().sum()


def test_rotary_module_takes_the_seed_layouts_and_names_a_bad_dim():
    g = generator()
    module = pejit.torch.RotaryPositionEmbedding(32, max_seq_len=128)
    x3 = torch.randn(2, 10, 32, generator=g)
    assert relative_error(module(x3), seed_rotary(x3.double().unsqueeze(1),
                                                  torch.arange(10)).squeeze(1)) < 1e-5
    with pytest.raises(pejit.Error, match="expected last dim 32"):
        module(torch.randn(1, 2, 10, 16))


class _Rotated(torch.nn.Module):
    """A tiny model whose parameters reach the loss through a rotation:
    linear maps before and after RoPE."""

    def __init__(self, rotary):
        super().__init__()
        torch.manual_seed(3)
        self.before, self.after = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
        self.rotary = rotary

    def forward(self, x):
        return self.after(self.rotary(self.before(x).view(2, -1, 4, 16).transpose(1, 2))
                          .transpose(1, 2).reshape(x.shape))


class _SeedRotary(torch.nn.Module):
    def forward(self, x):
        return seed_rotary(x, torch.arange(x.shape[2]))


def test_rotary_model_trains_like_plain_torch_for_ten_sgd_steps():
    through_pejit = _Rotated(pejit.torch.RotaryPositionEmbedding(16))
    plain = _Rotated(_SeedRotary())
    plain.load_state_dict(through_pejit.state_dict())
    train_side_by_side(through_pejit, plain, lr=0.05, length=24, steps=10)


def test_rotary_training_step_compiles_fullgraph():
    g = generator()
    x, target = torch.randn(2, 24, 64, generator=g), torch.randn(2, 24, 64, generator=g)
    fullgraph_sgd_steps(lambda: _Rotated(pejit.torch.RotaryPositionEmbedding(16)), x, target,
                        "pejit.rope")


# --- The absolute embeddings: the seed's modules against their formulas in plain torch.

class SeedLearned(torch.nn.Module):
    """The seed's LearnablePositionalEmbedding, in plain torch."""

    def __init__(self, d_model, max_len):
        super().__init__()
        self.position_embeddings = torch.nn.Embedding(max_len, d_model)

    def forward(self, x, positions=None):
        positions = torch.arange(x.shape[1]) if positions is None else positions
        return x + self.position_embeddings(positions)


class SeedSinusoidal(torch.nn.Module):
    """The seed's SinusoidalPositionalEncoding, in plain torch (float64 table)."""

    def __init__(self, d_model, max_len=5000, base=10000.0):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float64)[:, None]
        div = base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        table = torch.zeros(max_len, d_model, dtype=torch.float64)
        table[:, 0::2], table[:, 1::2] = torch.sin(position / div), torch.cos(position / div)
        self.register_buffer("table", table)

    def forward(self, x, positions=None):
        positions = torch.arange(x.shape[1]) if positions is None else positions
        return x + self.table[positions].to(x.dtype)


class SeedHybrid(torch.nn.Module):
    def __init__(self, d_model, max_len):
        super().__init__()
        self.learned = SeedLearned(d_model, max_len)

    def forward(self, x, positions=None):
        positions = torch.arange(x.shape[1]) if positions is None else positions
        return seed_rotary(self.learned(x, positions).unsqueeze(1), positions).squeeze(1)


class SeedDynamic(torch.nn.Module):
    """The seed's DynamicPositionEncoding, in plain torch: 0.7 base + 0.3 a
    rotation at positions scaled by the learnable dynamic_scale."""

    def __init__(self, initial_scale):
        super().__init__()
        self.dynamic_scale = torch.nn.Parameter(torch.full((1,), initial_scale))

    def forward(self, x, positions=None):
        positions = torch.arange(x.shape[1]) if positions is None else positions
        rows = x.unsqueeze(1)
        out = 0.7 * seed_rotary(rows, positions) + 0.3 * hf_rope(rows, positions,
                                                                scale=self.dynamic_scale)
        return out.squeeze(1)


def module_pairs():
    """(name, the pejit module, the seed's in plain torch with the same weights)."""
    pairs = []
    for name, ours, seed in (
            ("learned", lambda: pejit.torch.LearnablePositionalEmbedding(64, max_len=96),
             lambda: SeedLearned(64, 96)),
            ("sinusoidal", lambda: pejit.torch.SinusoidalPositionalEncoding(64),
             lambda: SeedSinusoidal(64)),
            ("hybrid", lambda: pejit.torch.HybridPositionEncoding(64, max_len=96),
             lambda: SeedHybrid(64, 96)),
            ("dynamic", lambda: pejit.torch.DynamicPositionEncoding(64, initial_scale=1.3),
             lambda: SeedDynamic(1.3))):
        torch.manual_seed(5)
        a = ours()
        b = seed()
        b.load_state_dict(a.state_dict(), strict=False)
        for (pa, pb) in zip(a.parameters(), b.parameters()):
            with torch.no_grad():
                pb.copy_(pa)
        pairs.append((name, a, b))
    return pairs


@pytest.mark.parametrize("index", range(4), ids=["learned", "sinusoidal", "hybrid", "dynamic"])
def test_position_modules_match_the_seed_forward_and_gradients(index):
    name, ours, seed = module_pairs()[index]
    g = generator()
    x = torch.randn(3, 40, 64, generator=g)
    # Repeated positions: the table's rows sum several gradient rows.
    positions = torch.randint(0, 12, (40,), generator=g)
    dy = torch.randn(3, 40, 64, generator=g)
    leaf = x.clone().requires_grad_()
    y = ours(leaf, positions)
    (y * dy).sum().backward()
    want = x.double().requires_grad_()
    seed64 = seed.double()
    y64 = seed64(want, positions)
    (y64 * dy.double()).sum().backward()
    assert relative_error(y.detach(), y64.detach()) < 1e-5
    assert relative_error(leaf.grad, want.grad) < TOLERANCE
    for (pname, p), q in zip(ours.named_parameters(), seed64.parameters()):
        assert relative_error(p.grad, q.grad) < TOLERANCE, pname


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_embedding_gradient_is_a_scaled_scatter_add_by_token(dtype):
    g = generator()
    tokens = torch.randint(0, 30, (4, 50), generator=g)  # every token repeats
    module = pejit.torch.Embedding(100, 64, scale=8.0).to(dtype)
    out = module(tokens)
    dy = torch.randn(4, 50, 64, generator=g)
    (out.float() * dy).sum().backward()
    weight = module.weight.detach().double().requires_grad_()
    ((weight[tokens] * 8.0) * dy.to(dtype).double()).sum().backward()
    assert module.weight.grad.dtype == dtype
    tolerance = TOLERANCE if dtype == torch.float32 else 2e-2
    assert relative_error(out.float(), (weight[tokens] * 8.0).detach()) < tolerance
    assert relative_error(module.weight.grad.float(), weight.grad) < tolerance


def test_table_ops_pass_opcheck():
    g = generator()
    x = torch.randn(2, 9, 32, generator=g, requires_grad=True)
    table = torch.randn(16, 32, generator=g, requires_grad=True)
    positions = torch.arange(9)
    torch.library.opcheck(torch.ops.pejit.learned_positions.default, (x, positions, table))
    torch.library.opcheck(torch.ops.pejit.sinusoidal_positions.default, (x, positions, 10000.0))
    torch.library.opcheck(torch.ops.pejit.embed.default,
                          (torch.randint(0, 16, (2, 9), generator=g), table, 2.0))
    torch.library.opcheck(torch.ops.pejit.embedding_backward.default,
                          (x.detach(), positions, 16, 1.0))


class _Around(torch.nn.Module):
    """Linear, the position module, linear: a model whose weights reach the
    loss through the module (its own table too, when it has one)."""

    def __init__(self, module):
        super().__init__()
        torch.manual_seed(3)
        self.before, self.after = torch.nn.Linear(64, 64), torch.nn.Linear(64, 64)
        self.module = module

    def forward(self, x):
        return self.after(self.module(self.before(x)))


@pytest.mark.parametrize("index", range(4), ids=["learned", "sinusoidal", "hybrid", "dynamic"])
def test_position_modules_train_like_the_seed_for_ten_sgd_steps(index):
    name, ours, seed = module_pairs()[index]
    through_pejit, plain = _Around(ours), _Around(seed)
    plain.load_state_dict(through_pejit.state_dict(), strict=False)
    train_side_by_side(through_pejit, plain, lr=0.05, length=24, steps=10)


@pytest.mark.parametrize("make,op", [
    (lambda: pejit.torch.LearnablePositionalEmbedding(64, max_len=32), "pejit.learned_positions"),
    (lambda: pejit.torch.SinusoidalPositionalEncoding(64), "pejit.sinusoidal_positions"),
    (lambda: pejit.torch.HybridPositionEncoding(64, max_len=32), "pejit.rope"),
    (lambda: pejit.torch.DynamicPositionEncoding(64, initial_scale=1.3), "pejit.rope"),
], ids=["learned", "sinusoidal", "hybrid", "dynamic"])
def test_position_module_training_step_compiles_fullgraph(make, op):
    g = generator()
    x, target = torch.randn(2, 24, 64, generator=g), torch.randn(2, 24, 64, generator=g)
    fullgraph_sgd_steps(lambda: _Around(make()), x, target, op)


@pytest.mark.parametrize("rows", [1, 2], ids=["scale [1]", "scale [b], ids per row"])
def test_rope_scale_gradient_matches_float64(rows):
    g = generator()
    b, h, s, d = 2, 3, 29, 64
    x = torch.randn(b, h, s, d, generator=g)
    positions = torch.randint(0, 2000, (b, s) if rows == 2 else (s,), generator=g)
    scale = (torch.rand(rows, generator=g) + 0.5).requires_grad_()
    dy = torch.randn(b, h, s, d, generator=g)
    leaf = x.clone().requires_grad_()
    options = pejit.torch.rope_options(True)
    (torch.ops.pejit.rope(leaf, positions, options, scale) * dy).sum().backward()
    want_x = x.double().requires_grad_()
    want_scale = scale.detach().double().requires_grad_()
    (hf_rope(want_x, positions, scale=want_scale) * dy.double()).sum().backward()
    assert relative_error(leaf.grad, want_x.grad) < TOLERANCE
    assert relative_error(scale.grad, want_scale.grad) < TOLERANCE
    torch.library.opcheck(torch.ops.pejit.rope_scale_grad.default,
                          (dy, x, positions, options, scale.detach()))
