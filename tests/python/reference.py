"""A float64 NumPy reference for the Python tests, written from
docs/semantics.md independently of pejit's C++ reference."""
import math

import numpy as np


def inv_freq(rd, theta=10000.0, scaling="none", factor=1.0, low_freq_factor=1.0,
             high_freq_factor=4.0, original_max_position=0):
    inv = theta ** (-np.arange(0, rd, 2, dtype=np.float64) / rd)
    if scaling == "linear":
        return inv / factor
    if scaling == "llama3":  # HF's _compute_llama3_parameters
        low_wavelen = original_max_position / low_freq_factor
        high_wavelen = original_max_position / high_freq_factor
        wavelen = 2 * math.pi / inv
        smooth = (original_max_position / wavelen - low_freq_factor) / (
            high_freq_factor - low_freq_factor)
        scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
        mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
        return np.where(mid, (1 - smooth) * inv / factor + smooth * inv, scaled)
    assert scaling == "none", scaling
    return inv


def rope(x, positions, rd, interleaved=False, **freq):
    """x [b, h, s, d] float64 rotated at positions [s] or [b, s]."""
    inv = inv_freq(rd, **freq)
    pos = np.asarray(positions, dtype=np.float64)
    angle = pos[..., None] * inv  # [s, rd/2] or [b, s, rd/2]
    if angle.ndim == 3:
        angle = angle[:, None]  # [b, 1, s, rd/2]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    if interleaved:
        x1, x2 = x[..., 0:rd:2], x[..., 1:rd:2]
        out[..., 0:rd:2] = x1 * cos - x2 * sin
        out[..., 1:rd:2] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., : rd // 2], x[..., rd // 2: rd]
        out[..., : rd // 2] = x1 * cos - x2 * sin
        out[..., rd // 2: rd] = x2 * cos + x1 * sin
    return out


def alibi_slopes(n):
    def power_of_two(m):
        start = 2.0 ** (-8.0 / m)
        return [start ** (i + 1) for i in range(m)]
    p = 2 ** int(math.floor(math.log2(n)))
    if p == n:
        return power_of_two(n)
    return power_of_two(p) + power_of_two(2 * p)[0::2][: n - p]


def attention(q, k, v, causal=False, window=(None, None), softcap=None, scale=None,
              alibi=False):
    """Softmax attention in float64 on [b, h, s, d] arrays (GQA by head groups)."""
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    group = hq // hkv
    k = np.repeat(k, group, axis=1)
    v = np.repeat(v, group, axis=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    if softcap is not None:
        s = softcap * np.tanh(s / softcap)
    i = np.arange(sq)[:, None] + (skv - sq)  # the aligned query index
    j = np.arange(skv)[None, :]
    if alibi:
        slopes = np.array(alibi_slopes(hq))[:, None, None]
        s = s - slopes * (i - j)
    visible = np.ones((sq, skv), dtype=bool)
    if causal:
        visible &= j <= i
    left, right = window
    if left is not None:
        visible &= j >= i - left
    if right is not None:
        visible &= j <= i + right
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    l = p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v)
    return np.where(l > 0, o / np.where(l > 0, l, 1.0), 0.0)


def rel_error(out, ref):
    """max |out - ref| / max |ref|, in float64."""
    out = np.asarray(out, dtype=np.float64)
    return float(np.max(np.abs(out - ref)) / max(np.max(np.abs(ref)), 1e-30))


def t5_buckets(rel, bidirectional, num_buckets, max_distance):
    """docs/semantics.md's T5 bucket of each distance rel = j - i (float64 log)."""
    rel = np.asarray(rel, dtype=np.int64)
    if bidirectional:
        n = num_buckets // 2
        base = np.where(rel > 0, n, 0)
        r = np.abs(rel)
    else:
        n = num_buckets
        base = np.zeros_like(rel)
        r = np.maximum(-rel, 0)
    exact = n // 2
    with np.errstate(divide="ignore"):
        large = exact + np.floor(np.log(np.maximum(r, 1) / exact) / math.log(max_distance / exact)
                                 * (n - exact)).astype(np.int64)
    return base + np.where(r < exact, r, np.minimum(large, n - 1))


def distances(sq, skv):
    """rel = j - (i + skv - sq): key index minus the aligned query index."""
    return np.arange(skv)[None, :] - (np.arange(sq)[:, None] + skv - sq)


def attention_with_terms(q, k, v, bias=None, key_table=None, value_table=None, clip=0,
                         causal=False, scale=None):
    """Softmax attention with a [h, sq, skv] bias and Shaw's terms, float64."""
    b, hq, sq, d = q.shape
    group = hq // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    skv = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    scores = np.einsum("bhid,bhjd->bhij", q, k)
    rel = np.clip(distances(sq, skv), -clip, clip) + clip
    if key_table is not None:
        table = key_table if key_table.ndim == 3 else np.broadcast_to(key_table, (hq,) + key_table.shape)
        qa = np.einsum("bhid,hmd->bhim", q, table)  # q_i . aK[m]
        scores = scores + np.take_along_axis(
            qa, np.broadcast_to(rel, (b, hq, sq, skv)), axis=3)
    s = scale * scores
    if bias is not None:
        s = s + bias[None]
    if causal:
        s = np.where(distances(sq, skv) <= 0, s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    o = np.einsum("bhij,bhjd->bhid", p, v)
    if value_table is not None:
        table = value_table if value_table.ndim == 3 else np.broadcast_to(
            value_table, (hq,) + value_table.shape)
        av = table[:, rel]  # [h, sq, skv, dv]
        o = o + np.einsum("bhij,hijd->bhid", p, av)
    return o
