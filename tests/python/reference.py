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
