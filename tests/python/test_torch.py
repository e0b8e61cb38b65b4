"""pejit on torch CPU tensors, the pejit::attention custom op, and
torch.compile(fullgraph=True) through it. Skipped when the test venv has no
torch (scripts/python.sh installs it with PEJIT_TEST_TORCH=1)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed in the test venv")

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
