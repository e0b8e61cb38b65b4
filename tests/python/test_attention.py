"""pejit.attention on NumPy arrays against the float64 reference
(tests/python/reference.py), with fresh inputs and poisoned outputs."""
import numpy as np
import pytest

import pejit
import reference as ref
from conftest import DTYPES, TOLERANCE, poisoned, random_array


def qkv(rng, dtype, b=2, hq=4, hkv=2, sq=37, skv=53, d=64, dv=64):
    q, q64 = random_array(rng, (b, hq, sq, d), dtype)
    k, k64 = random_array(rng, (b, hkv, skv, d), dtype)
    v, v64 = random_array(rng, (b, hkv, skv, dv), dtype)
    return (q, k, v), (q64, k64, v64)


def default_positions(sq, skv):
    return np.arange(skv - sq, skv), np.arange(skv)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_causal(rng, dtype):
    (q, k, v), (q64, k64, v64) = qkv(rng, dtype)
    out = poisoned((2, 4, 37, 64), dtype)
    result = pejit.attention(q, k, v, rope={"rope_theta": 500000.0}, causal=True, out=out)
    assert result is out
    qp, kp = default_positions(37, 53)
    expected = ref.attention(ref.rope(q64, qp, 64, theta=500000.0),
                             ref.rope(k64, kp, 64, theta=500000.0), v64, causal=True)
    assert ref.rel_error(out, expected) < TOLERANCE[dtype]


@pytest.mark.parametrize("rope, freq, rd, interleaved", [
    ({"interleaved": True}, {}, 64, True),
    ({"partial_rotary_factor": 0.5}, {}, 32, False),
    ({"rope_type": "linear", "factor": 4.0}, {"scaling": "linear", "factor": 4.0}, 64, False),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 32, "rope_theta": 500000.0},
     {"scaling": "llama3", "factor": 8.0, "original_max_position": 32, "theta": 500000.0},
     64, False),
])
def test_rope_variants(rng, rope, freq, rd, interleaved):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32")
    out = pejit.attention(q, k, v, rope=rope, causal=True, out=poisoned((2, 4, 37, 64), "float32"))
    qp, kp = default_positions(37, 53)
    expected = ref.attention(ref.rope(q64, qp, rd, interleaved, **freq),
                             ref.rope(k64, kp, rd, interleaved, **freq), v64, causal=True)
    assert ref.rel_error(out, expected) < 1e-4


@pytest.mark.parametrize("kwargs, ref_kwargs", [
    ({"alibi": True, "causal": True}, {"alibi": True, "causal": True}),
    ({"window": (8, 3)}, {"window": (8, 3)}),
    ({"window": 5, "causal": True}, {"window": (5, None), "causal": True}),
    ({"softcap": 5.0, "scale": 0.3}, {"softcap": 5.0, "scale": 0.3}),
])
def test_masks_and_biases(rng, kwargs, ref_kwargs):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", hq=6, hkv=3)
    out = pejit.attention(q, k, v, out=poisoned((2, 6, 37, 64), "float32"), **kwargs)
    assert ref.rel_error(out, ref.attention(q64, k64, v64, **ref_kwargs)) < 1e-4


@pytest.mark.parametrize("per_batch", [False, True])
def test_explicit_positions(rng, per_batch):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", sq=16, skv=16)
    shape = (2, 16) if per_batch else (16,)
    qp = rng.integers(0, 100000, size=shape)
    kp = rng.integers(0, 100000, size=shape).astype(np.int32)
    out = pejit.attention(q, k, v, rope=True, q_positions=qp, k_positions=kp)
    expected = ref.attention(ref.rope(q64, qp, 64), ref.rope(k64, kp, 64), v64)
    assert ref.rel_error(out, expected) < 1e-4


def test_strided_views_and_allocated_output(rng):
    # [b, s, h, d] storage read as [b, h, s, d] without a copy.
    q = rng.standard_normal((1, 40, 4, 64)).astype(np.float32).transpose(0, 2, 1, 3)
    k = rng.standard_normal((1, 40, 2, 64)).astype(np.float32).transpose(0, 2, 1, 3)
    v = rng.standard_normal((1, 40, 2, 64)).astype(np.float32).transpose(0, 2, 1, 3)
    assert not q.flags.c_contiguous
    out = pejit.attention(q, k, v, rope=True, causal=True)
    assert out.shape == (1, 4, 40, 64) and out.dtype == np.float32
    p = np.arange(40)
    expected = ref.attention(ref.rope(q.astype(np.float64), p, 64),
                             ref.rope(k.astype(np.float64), p, 64), v.astype(np.float64),
                             causal=True)
    assert ref.rel_error(out, expected) < 1e-4


def test_one_kernel_per_shape_class(rng):
    (q, k, v), _ = qkv(rng, "float32", sq=9, skv=9)
    pejit.attention(q, k, v, rope=True, causal=True)
    compiles = pejit.stats()["compiles"]
    for length in (1, 17, 130):
        (q, k, v), (q64, k64, v64) = qkv(rng, "float32", sq=length, skv=length + 3)
        out = pejit.attention(q, k, v, rope=True, causal=True)
        qp, kp = default_positions(length, length + 3)
        expected = ref.attention(ref.rope(q64, qp, 64), ref.rope(k64, kp, 64), v64, causal=True)
        assert ref.rel_error(out, expected) < 1e-4
    assert pejit.stats()["compiles"] == compiles


@pytest.mark.parametrize("bidirectional, causal", [(True, False), (False, True)])
def test_t5_buckets(rng, bidirectional, causal):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", hq=4, hkv=4, sq=40, skv=300)
    table = rng.standard_normal((32, 4)).astype(np.float32)
    config = pejit.T5Config(num_buckets=32, max_distance=128, bidirectional=bidirectional)
    out = pejit.attention(q, k, v, t5=config, t5_table=table, scale=1.0, causal=causal,
                          out=poisoned((2, 4, 40, 64), "float32"))
    buckets = ref.t5_buckets(ref.distances(40, 300), bidirectional, 32, 128)
    bias = np.transpose(table.astype(np.float64)[buckets], (2, 0, 1))  # [h, sq, skv]
    expected = ref.attention_with_terms(q64, k64, v64, bias=bias, causal=causal, scale=1.0)
    assert ref.rel_error(out, expected) < 1e-4


@pytest.mark.parametrize("terms, per_head", [("kv", False), ("k", True), ("v", False)])
def test_shaw_terms(rng, terms, per_head):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", hq=4, hkv=2, sq=33, skv=70)
    lead = (4,) if per_head else ()
    key_table = rng.standard_normal(lead + (2 * 8 + 1, 64)).astype(np.float32) if "k" in terms else None
    value_table = rng.standard_normal(lead + (2 * 8 + 1, 64)).astype(np.float32) if "v" in terms else None
    out = pejit.attention(q, k, v, shaw=pejit.ShawConfig(clip=8), shaw_key=key_table,
                          shaw_value=value_table, causal=True,
                          out=poisoned((2, 4, 33, 64), "float32"))
    expected = ref.attention_with_terms(
        q64, k64, v64, clip=8, causal=True,
        key_table=None if key_table is None else key_table.astype(np.float64),
        value_table=None if value_table is None else value_table.astype(np.float64))
    assert ref.rel_error(out, expected) < 1e-4


def test_shaw_needs_its_tables():
    q = np.zeros((1, 2, 4, 64), np.float32)
    with pytest.raises(pejit.Error, match="shaw: give shaw_key"):
        pejit.attention(q, q, q, shaw=pejit.ShawConfig(clip=4))


@pytest.mark.parametrize("bias_shape", [(37, 53), (1, 1, 37, 53), (2, 1, 37, 53), (1, 4, 37, 53),
                                        (2, 4, 37, 53)])
def test_bias_tensor_broadcast_like_sdpa(rng, bias_shape):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32")
    bias = (rng.standard_normal(bias_shape) * 2).astype(np.float32)
    bias[..., 5] = -np.inf  # a key hidden from every row
    out = pejit.attention(q, k, v, bias=bias, causal=True, out=poisoned((2, 4, 37, 64), "float32"))
    full = np.broadcast_to(bias.astype(np.float64).reshape((1,) * (4 - bias.ndim) + bias.shape),
                           (2, 4, 37, 53))
    expected = np.stack([ref.attention_with_terms(q64[n:n + 1], k64[n:n + 1], v64[n:n + 1],
                                                  bias=full[n], causal=True)[0]
                         for n in range(2)])
    assert ref.rel_error(out, expected) < 1e-4


def test_bool_mask_and_fully_masked_rows(rng):
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", b=1, sq=8, skv=8)
    mask = rng.random((8, 8)) < 0.7
    mask[3] = False  # row 3 sees nothing: zeros
    out = pejit.attention(q, k, v, bias=mask)
    seen = mask.copy()
    seen[3] = True  # the reference's row 3 is replaced: a row that sees no key is zeros
    bias = np.where(seen, 0.0, -np.inf)[None].repeat(4, axis=0)
    expected = ref.attention_with_terms(q64, k64, v64, bias=bias)
    expected[:, :, 3] = 0.0
    assert np.all(out[0, :, 3] == 0)
    assert ref.rel_error(out, expected) < 1e-4
    with pytest.raises(pejit.Error, match=r"bias: shape \[1, 1, 8, 7\] is not"):
        pejit.attention(q, k, v, bias=np.zeros((8, 7), np.float32))


def test_packed_varlen_batch(rng):
    # Two sequences packed: each is attention of its own (causal, RoPE at
    # positions from 0 in each), FlashAttention's varlen.
    lengths_q, lengths_k = [5, 7], [9, 12]
    cu_q = np.array([0, 5, 12], np.int32)
    cu_k = np.array([0, 9, 21], np.int32)
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", b=1, sq=12, skv=21)
    out = pejit.attention(q, k, v, rope=True, causal=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k,
                          out=poisoned((1, 4, 12, 64), "float32"))
    for n in range(2):
        qs, ks = slice(cu_q[n], cu_q[n + 1]), slice(cu_k[n], cu_k[n + 1])
        sq, skv = lengths_q[n], lengths_k[n]
        qp, kp = default_positions(sq, skv)
        expected = ref.attention(ref.rope(q64[:, :, qs], qp, 64), ref.rope(k64[:, :, ks], kp, 64),
                                 v64[:, :, ks], causal=True)
        assert ref.rel_error(out[:, :, qs], expected) < 1e-4
    with pytest.raises(pejit.Error, match="cu_seqlens_q, cu_seqlens_k: give both"):
        pejit.attention(q, k, v, cu_seqlens_q=cu_q)
    with pytest.raises(pejit.Error, match="cu_seqlens_k: expected int32"):
        pejit.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k.astype(np.int64))


def test_key_lengths_and_a_paged_cache(rng):
    # A decode step over a cache with room to grow: row n sees its first
    # lengths[n] keys; then the same keys from a paged cache (page size 4,
    # pages in a shuffled pool).
    (q, k, v), (q64, k64, v64) = qkv(rng, "float32", b=2, sq=1, skv=24)
    lengths = np.array([13, 24], np.int32)
    out = pejit.attention(q, k, v, rope=True, causal=True, key_lengths=lengths)
    for n in range(2):
        L = int(lengths[n])
        qp, kp = default_positions(1, L)
        expected = ref.attention(ref.rope(q64[n:n + 1], qp, 64), ref.rope(k64[n:n + 1, :, :L], kp, 64),
                                 v64[n:n + 1, :, :L], causal=True)
        assert ref.rel_error(out[n:n + 1], expected) < 1e-4
    page, pages = 4, 12
    order = rng.permutation(pages)  # row n's page p is pool page order[6 n + p]
    k_pages = np.zeros((pages, page, 2, 64), np.float32)
    v_pages = np.zeros((pages, page, 2, 64), np.float32)
    table = np.zeros((2, 6), np.int32)
    for n in range(2):
        for p in range(6):
            slot = order[6 * n + p]
            table[n, p] = slot
            k_pages[slot] = k[n, :, p * page:(p + 1) * page].transpose(1, 0, 2)
            v_pages[slot] = v[n, :, p * page:(p + 1) * page].transpose(1, 0, 2)
    paged = pejit.attention(q, k_pages, v_pages, rope=True, causal=True, key_lengths=lengths,
                            block_table=table, out=poisoned((2, 4, 1, 64), "float32"))
    assert ref.rel_error(paged, out.astype(np.float64)) < 1e-6
    bad = table.copy()
    bad[1, 2] = 99
    with pytest.raises(pejit.Error, match="block_table"):
        pejit.attention(q, k_pages, v_pages, rope=True, causal=True, key_lengths=lengths,
                        block_table=bad)
