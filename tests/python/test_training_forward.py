"""The training forward (docs/backward.md): pejit.attention(...,
return_lse=True) returns each row's log-sum-exp, which
pejit.attention_backward(..., lse=) reads instead of recomputing; in torch,
pejit.torch.attention runs torch.ops.pejit.attention_with_lse when a
gradient will be taken, and its backward reads that lse. Compared with
float64 references (NumPy, and torch autograd) by max-norm relative error,
tolerance 1e-4 (float32); fresh random inputs."""
import numpy as np
import pytest

import pejit

import reference as ref


def logsumexp_reference(q, k, causal):
    """lse [b, hq, sq] in float64, GQA by repeat, bottom-right causal."""
    group = q.shape[1] // k.shape[1]
    k = np.repeat(k.astype(np.float64), group, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k) / np.sqrt(q.shape[-1])
    sq, skv = q.shape[2], k.shape[2]
    if causal:
        i = np.arange(sq)[:, None] + (skv - sq)
        s = np.where(np.arange(skv)[None, :] <= i, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    return (m + np.log(np.exp(s - m).sum(axis=-1, keepdims=True)))[..., 0]


def test_numpy_lse_and_the_backward_that_reads_it():
    rng = np.random.default_rng()
    q = rng.standard_normal((2, 4, 21, 32)).astype(np.float32)
    k = rng.standard_normal((2, 2, 30, 32)).astype(np.float32)
    v = rng.standard_normal((2, 2, 30, 32)).astype(np.float32)
    o, lse = pejit.attention(q, k, v, causal=True, return_lse=True)
    assert lse.shape == (2, 4, 21) and lse.dtype == np.float32
    want = logsumexp_reference(q, k, causal=True)
    assert np.abs(lse - want).max() / np.abs(want).max() < 1e-4
    assert np.array_equal(o, pejit.attention(q, k, v, causal=True))
    do = rng.standard_normal(o.shape).astype(np.float32)
    given = pejit.attention_backward(q, k, v, o, do, causal=True, lse=lse)
    recomputed = pejit.attention_backward(q, k, v, o, do, causal=True)
    for a, b, name in zip(given, recomputed, ("dq", "dk", "dv")):
        assert np.abs(a - b).max() / np.abs(b).max() < 1e-4, name
    # A wrong lse is refused by name, and a corrupted one changes the result.
    with pytest.raises(pejit.Error, match="lse: expected float32"):
        pejit.attention_backward(q, k, v, o, do, causal=True, lse=lse[:, :, :20])
    shifted = pejit.attention_backward(q, k, v, o, do, causal=True, lse=lse + 1)
    assert np.abs(shifted[0] - recomputed[0]).max() > 1e-2


def test_numpy_training_forward_with_a_t5_table():
    rng = np.random.default_rng()
    q, k, v = (rng.standard_normal((1, 4, 17, 16)).astype(np.float32) for _ in range(3))
    table = rng.standard_normal((32, 4)).astype(np.float32)
    t5 = pejit.T5Config(32, 128, False)
    o, lse = pejit.attention(q, k, v, t5=t5, t5_table=table, causal=True, return_lse=True)
    buckets = ref.t5_buckets(ref.distances(17, 17), False, 32, 128)
    bias = np.transpose(table.astype(np.float64)[buckets], (2, 0, 1))  # [h, sq, skv]
    want = ref.attention_with_terms(q.astype(np.float64), k.astype(np.float64),
                                    v.astype(np.float64), bias=bias, causal=True)
    assert np.abs(o - want).max() / np.abs(want).max() < 1e-4
    assert np.isfinite(lse).all()
    do = rng.standard_normal(o.shape).astype(np.float32)
    given = pejit.attention_backward(q, k, v, o, do, t5=t5, t5_table=table, causal=True, lse=lse)
    recomputed = pejit.attention_backward(q, k, v, o, do, t5=t5, t5_table=table, causal=True)
    for a, b in zip(given, recomputed):
        assert np.abs(a - b).max() / np.abs(b).max() < 1e-4


torch = pytest.importorskip("torch")


def test_torch_training_forward_gradients_match_float64():
    import pejit.torch
    from training_support import TOLERANCE, float64_gradients, generator, inputs, relative_error
    q, k, v = inputs(b=2, sq=33, skv=40)
    leaves = [x.clone().requires_grad_() for x in (q, k, v)]
    options = pejit.torch.options(causal=True)
    o = pejit.torch.attention(*leaves, options)
    assert "attention_with_lse" in o.grad_fn.name()  # the training forward ran
    do = torch.randn(o.shape, generator=generator())
    (o * do).sum().backward()
    for got, want, name in zip(leaves, float64_gradients(q, k, v, do, causal=True),
                               ("dq", "dk", "dv")):
        assert relative_error(got.grad, want) < TOLERANCE, name
    # lse has no gradient; without grad the plain op runs.
    out, lse = torch.ops.pejit.attention_with_lse(*leaves, options)
    assert not lse.requires_grad and lse.dtype == torch.float32
    with torch.no_grad():
        assert torch.equal(pejit.torch.attention(q, k, v, options), out.detach())


def test_torch_attention_with_lse_passes_opcheck():
    import pejit.torch
    from training_support import inputs
    q, k, v = (x.requires_grad_() for x in inputs(sq=12, skv=12))
    torch.library.opcheck(torch.ops.pejit.attention_with_lse.default,
                          (q, k, v, pejit.torch.options(rope=True, causal=True)))


def test_torch_compile_fullgraph_training_step_through_the_training_forward():
    import pejit.torch
    from training_support import generator
    layer = pejit.torch.T5Attention(num_heads=4, bidirectional=False, causal=True)
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    g = generator()
    q, k, v = (torch.randn(1, 4, 24, 32, generator=g, requires_grad=True) for _ in range(3))
    before = layer.table.detach().clone()
    for _ in range(2):
        optimizer.zero_grad()
        compiled(q, k, v).square().sum().backward()
        optimizer.step()
    assert not torch.equal(before, layer.table.detach())


def test_torch_compile_fullgraph_of_a_whole_training_step():
    # Forward, loss, backward and the parameter update in one compiled
    # function, no graph break (torch >= 2.15 traces the backward with
    # trace_autograd_ops, as torch.autograd.grad: loss.backward()'s p.grad
    # side effects were not replayed faithfully on a second call; and
    # torch.optim's step breaks the graph on purpose, so the update is plain
    # SGD). Its parameters match the same steps run eagerly.
    import pejit.torch
    import torch._dynamo
    from training_support import generator
    if not hasattr(torch._dynamo.config, "trace_autograd_ops"):
        pytest.skip(f"torch {torch.__version__} cannot trace loss.backward() in a graph")
    g = generator()
    q, k, v = (torch.randn(1, 4, 20, 32, generator=g) for _ in range(3))
    layers = []
    for _ in range(2):
        torch.manual_seed(3)
        layers.append((pejit.torch.T5Attention(num_heads=4, bidirectional=False, causal=True),
                       torch.nn.Linear(32, 32)))

    def step(attention, linear):
        params = list(attention.parameters()) + list(linear.parameters())
        loss = attention(linear(q), k, v).square().mean()
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, grad in zip(params, grads):
                p -= 0.1 * grad
        return loss.detach()

    graphs = []

    def recorder(gm, example_inputs):
        graphs.append(gm.code)
        return gm.forward

    torch._dynamo.config.trace_autograd_ops = True
    try:
        compiled = torch.compile(step, fullgraph=True, backend=recorder)
        for _ in range(2):
            compiled(*layers[0])
            step(*layers[1])
    finally:
        torch._dynamo.config.trace_autograd_ops = False
    # Each graph compiled (fullgraph: a break would raise; a second call may
    # recompile) holds the training forward, the gradient and the update.
    assert graphs
    for code in graphs:
        assert "pejit.attention_with_lse" in code and "autograd.grad" in code
    for got, want in zip(layers[0][0].parameters(), layers[1][0].parameters()):
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)
