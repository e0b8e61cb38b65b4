"""pejit.torch's nn.Modules (docs/python.md): attention layers whose
encodings' parameters train through the autograd of pejit.torch.attention
(the training forward and its backward, docs/backward.md)."""
from __future__ import annotations

import math
from typing import Optional

import torch

from ._pejit import Error
from ._rope import as_rope
from .torch import attention, options

class Attention(torch.nn.Module):
    """Fused attention with its positional encoding, as a module: the
    options are fixed at construction; forward(q, k, v[, q_positions,
    k_positions]) runs the custom op."""

    def __init__(self, **kwargs):
        super().__init__()
        self.options = options(**kwargs)

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return attention(q, k, v, self.options, q_positions, k_positions)


class T5Attention(torch.nn.Module):
    """Attention with T5's bucketed relative bias and its learned table
    [num_buckets, num_heads] (HF's relative_attention_bias weight) as an
    nn.Parameter: forward(q, k, v) runs the custom op, and loss.backward()
    reaches q, k, v and the table (docs/backward.md). The other keyword
    arguments are pejit.torch.options' (causal, window, softcap, scale)."""

    def __init__(self, num_heads: int, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = True, **kwargs):
        super().__init__()
        self.options = options(t5={"num_buckets": num_buckets, "max_distance": max_distance,
                                   "bidirectional": bidirectional}, **kwargs)
        self.table = torch.nn.Parameter(torch.randn(num_buckets, num_heads) * 0.02)

    def forward(self, q, k, v):
        return attention(q, k, v, self.options, t5_table=self.table)


class ScaledRoPEAttention(torch.nn.Module):
    """Attention with RoPE whose positions are multiplied by a learned scale
    s (angle = position * s * inv_freq; the seed's DynamicPositionEncoding's
    dynamic_scale), an nn.Parameter of shape [1], initialised to
    `initial_scale`: loss.backward() reaches q, k, v and s, whose gradient
    the backward kernel sums over the rotated rows (docs/backward.md).
    `rope` as for pejit.attention (default True: theta 10000, half
    layout); the other keyword arguments are pejit.torch.options'."""

    def __init__(self, rope=True, initial_scale: float = 1.0, **kwargs):
        super().__init__()
        self.options = options(rope=rope, **kwargs)
        self.scale = torch.nn.Parameter(torch.full((1,), float(initial_scale)))

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return attention(q, k, v, self.options, q_positions, k_positions,
                         rope_scale=self.scale)


class LearnedFrequencyRoPEAttention(torch.nn.Module):
    """Attention with RoPE whose inverse frequencies are an nn.Parameter
    [rotary_dim / 2] (seed 001 §8, "learnable frequencies"), initialised
    to the config's theta^(-2c/rd) (after its scaling), and, with
    learn_scale, a learned position scale [1] beside them (angle = position
    * s * inv_freq[c]). loss.backward() reaches q, k, v and both.
    `rope` as for pejit.attention (default True); the other keyword
    arguments are pejit.torch.options'."""

    def __init__(self, head_dim: int, rope=True, learn_scale: bool = False, **kwargs):
        super().__init__()
        from . import _pejit
        config = as_rope(rope)
        self.options = options(rope=rope, **kwargs)
        inv_freq, _ = _pejit.rope_frequencies(config.native(head_dim), head_dim, 1)
        self.inv_freq = torch.nn.Parameter(torch.tensor(inv_freq, dtype=torch.float32))
        self.scale = torch.nn.Parameter(torch.ones(1)) if learn_scale else None

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return attention(q, k, v, self.options, q_positions, k_positions,
                         rope_scale=self.scale, rope_inv_freq=self.inv_freq)


class ALiBiAttention(torch.nn.Module):
    """Attention with ALiBi whose per-head slopes are an nn.Parameter [hq],
    initialised to the paper's get_slopes(num_heads) (heads head_offset ..
    head_offset + hq of them): loss.backward() reaches q, k, v and the
    slopes, d slope_h = sum of dS times the distance (docs/backward.md).
    symmetric: -slope |i - j| instead of the causal form. The other keyword
    arguments are pejit.torch.options' (causal, window, softcap, scale)."""

    def __init__(self, num_heads: int, heads: Optional[int] = None, head_offset: int = 0,
                 symmetric: bool = False, **kwargs):
        super().__init__()
        heads = num_heads if heads is None else heads
        self.options = options(alibi={"num_heads": num_heads, "head_offset": head_offset,
                                      "symmetric": symmetric}, **kwargs)
        slopes = _paper_slopes(num_heads)[head_offset:head_offset + heads]
        self.slopes = torch.nn.Parameter(torch.tensor(slopes, dtype=torch.float32))

    def forward(self, q, k, v):
        return attention(q, k, v, self.options, alibi_slopes=self.slopes)


class ShawAttention(torch.nn.Module):
    """Attention with Shaw et al.'s relative key and value terms (distances
    clipped to [-clip, clip]): learned tables a^K [2 clip + 1, head_dim]
    and a^V [2 clip + 1, head_dim] (per head with per_head: [num_heads,
    ...]) as nn.Parameters, s_ij = scale q_i . (k_j + a^K[r_ij]) and o_i =
    sum_j p_ij (v_j + a^V[r_ij]). key / value: which terms to learn.
    loss.backward() reaches q, k, v and both tables (docs/backward.md). The
    other keyword arguments are pejit.torch.options' (causal, window,
    softcap, scale, rope)."""

    def __init__(self, head_dim: int, clip: int = 16, num_heads: Optional[int] = None,
                 key: bool = True, value: bool = True, per_head: bool = False, **kwargs):
        super().__init__()
        if not key and not value:
            raise Error("ShawAttention: key=False and value=False leave no term to learn")
        if per_head and num_heads is None:
            raise Error("ShawAttention: per_head tables need num_heads")
        self.options = options(shaw={"clip": clip}, **kwargs)
        lead = (num_heads,) if per_head else ()
        shape = lead + (2 * clip + 1, head_dim)
        self.key_table = torch.nn.Parameter(torch.randn(shape) * 0.02) if key else None
        self.value_table = torch.nn.Parameter(torch.randn(shape) * 0.02) if value else None

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return attention(q, k, v, self.options, q_positions, k_positions,
                         shaw_key_table=self.key_table, shaw_value_table=self.value_table)


def _paper_slopes(n: int):
    """The ALiBi paper's get_slopes(n), non-powers of two included."""
    def power_of_2(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][:n - closest]
