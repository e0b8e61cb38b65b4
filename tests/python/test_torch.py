"""pejit on torch CPU tensors, the pejit::attention custom op, and
torch.compile(fullgraph=True) through it. Skipped when the test venv has no
torch (scripts/python.sh installs it with PEJIT_TEST_TORCH=1)."""
import numpy as np
import pytest

try:
    import torch
except Exception as e:  # not installed, or an install cut short (scripts/python.sh)
    pytest.skip(f"torch does not import in the test venv: {e}", allow_module_level=True)

import pejit  # noqa: E402
import pejit.torch  # noqa: E402
import reference as ref  # noqa: E402

TORCH_DTYPES = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


def tensors(dtype, b=1, hq=4, hkv=2, sq=24, skv=24, d=64):
    g = torch.Generator().manual_seed(int(np.random.default_rng().integers(1 << 31)))
    make = lambda *s: torch.randn(*s, generator=g).to(getattr(torch, dtype))  # noqa: E731
    return make(b, hq, sq, d), make(b, hkv, skv, d), make(b, hkv, skv, d)


def expected(q, k, v, theta=10000.0):
    q64, k64, v64 = (x.to(torch.float64).numpy() for x in (q, k, v))
    sq, skv = q.shape[2], k.shape[2]
    return ref.attention(ref.rope(q64, np.arange(skv - sq, skv), q.shape[3], theta=theta),
                         ref.rope(k64, np.arange(skv), k.shape[3], theta=theta), v64,
                         causal=True)


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
def test_torch_tensors(dtype):
    q, k, v = tensors(dtype)
    out = torch.full((1, 4, 24, 64), float("nan"), dtype=getattr(torch, dtype))
    result = pejit.attention(q, k, v, rope=True, causal=True, out=out)
    assert result is out
    assert ref.rel_error(out.to(torch.float64).numpy(), expected(q, k, v)) < TORCH_DTYPES[dtype]


def test_allocated_torch_output_and_grad_inputs():
    q, k, v = tensors("float32")
    out = pejit.attention(q.requires_grad_(), k, v, rope=True, causal=True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert ref.rel_error(out.numpy(), expected(q.detach(), k, v)) < 1e-4


def test_custom_op_opcheck():
    q, k, v = tensors("float32")
    options = pejit.torch.options(rope={"rope_theta": 500000.0}, causal=True)
    torch.library.opcheck(torch.ops.pejit.attention.default, (q, k, v, options))


def test_torch_compile_fullgraph():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(64, 64)
            self.attn = pejit.torch.Attention(rope={"rope_theta": 500000.0}, causal=True)

        def forward(self, q, k, v):
            return self.proj(self.attn(q, k, v))

    layer = Layer()
    q, k, v = tensors("float32")
    eager = layer(q, k, v)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    traced = compiled(q, k, v)
    torch.testing.assert_close(traced, eager, rtol=1e-5, atol=1e-5)
    assert ref.rel_error(layer.attn(q, k, v).numpy(), expected(q, k, v, 500000.0)) < 1e-4


@pytest.mark.parametrize("ids", ["torch", "numpy"])
def test_repeated_calls_with_positions(ids):
    # The second and third calls take the fast path (a cached plan; torch
    # tensors passed as raw pointers, or through DLPack beside NumPy ids).
    for _ in range(3):
        q, k, v = tensors("float32", sq=12, skv=12)
        rng = np.random.default_rng()
        qp, kp = rng.integers(0, 50000, size=12), rng.integers(0, 50000, size=12)
        pos = (torch.from_numpy(qp), torch.from_numpy(kp)) if ids == "torch" else (qp, kp)
        out = torch.full((1, 4, 12, 64), float("nan"))
        pejit.attention(q, k, v, rope=True, q_positions=pos[0], k_positions=pos[1], out=out)
        q64, k64, v64 = (x.to(torch.float64).numpy() for x in (q, k, v))
        expected = ref.attention(ref.rope(q64, qp, 64), ref.rope(k64, kp, 64), v64)
        assert ref.rel_error(out.numpy(), expected) < 1e-4


def test_float_positions_are_an_error():
    q, k, v = tensors("float32")
    pejit.attention(q, k, v, rope=True, q_positions=torch.arange(24), k_positions=torch.arange(24))
    with pytest.raises(pejit.Error, match="float32"):
        pejit.attention(q, k, v, rope=True, q_positions=torch.arange(24.0),
                        k_positions=torch.arange(24.0))


def test_negated_views_are_read_as_their_values():
    # torch._neg_view(q) holds -q logically over q's memory: pejit reads -q
    # (through the fast path too), and refuses such a view as `out`.
    q, k, v = tensors("float32")
    want = expected(-q, k, v)
    for _ in range(2):  # the first call plans, the second takes the fast path
        out = pejit.attention(torch._neg_view(q), k, v, rope=True, causal=True)
        assert ref.rel_error(out.to(torch.float64).numpy(), want) < 1e-4
    with pytest.raises(pejit.Error, match="out: a negated or conjugated view"):
        pejit.attention(q, k, v, rope=True, causal=True,
                        out=torch._neg_view(torch.empty(1, 4, 24, 64)))


def test_options_take_numpy_window_sizes():
    assert pejit.torch.options(window=np.int64(3)) == pejit.torch.options(window=3)
    with pytest.raises(pejit.Error, match="window"):
        pejit.torch.options(window=True)


def test_bias_matches_sdpa_attn_mask():
    # A bool mask (True = attend) and a float bias, as torch's SDPA reads
    # them, against SDPA in float64.
    q, k, v = tensors("float32", sq=24, skv=24)
    g = torch.Generator().manual_seed(7)
    mask = torch.rand(24, 24, generator=g) < 0.8
    mask |= torch.eye(24, dtype=torch.bool)  # every row sees a key
    bias = torch.randn(1, 4, 24, 24, generator=g)
    for attn_mask in (mask, bias):
        out = pejit.attention(q, k, v, bias=attn_mask)
        want = torch.nn.functional.scaled_dot_product_attention(
            q.double(), k.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1),
            attn_mask=attn_mask if attn_mask.dtype == torch.bool else attn_mask.double())
        assert ref.rel_error(out.double().numpy(), want.numpy()) < 1e-4
