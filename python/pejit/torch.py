"""PyTorch integration: the custom op `pejit::attention` (with a fake, so
torch.compile(fullgraph=True) traces through it, and an autograd formula:
its backward is the op `pejit::attention_backward`, the kernel the
compiler derives from the forward, docs/backward.md) and an nn.Module.

    import pejit.torch
    layer = pejit.torch.Attention(rope={"rope_theta": 500000.0}, causal=True)
    out = layer(q, k, v)                  # eager, or inside torch.compile

The op's options travel as one JSON string (pejit.torch.options(...)), so
the traced graph holds them as a constant; each distinct string is its own
cached kernel. Requires torch >= 2.4; the rest of pejit works without it.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math
from typing import Optional, Tuple

import torch

from ._attention import ShawConfig, T5Config, _as_alibi, _window, attention as _attention
from ._backward import attention_backward as _attention_backward
from ._checks import boolean, optional_number
from ._pejit import Error
from ._rope import as_rope

_OPTIONS = ("rope", "alibi", "t5", "shaw", "causal", "window", "softcap", "scale")


def options(**kwargs) -> str:
    """The op's options string: pejit.attention's keyword arguments (rope,
    alibi, t5, shaw, causal, window, softcap, scale), checked and
    normalized. With t5, the op takes the table as its t5_table argument;
    with shaw (a ShawConfig, a dict {"clip": k} or k), its tables as
    shaw_key_table and shaw_value_table."""
    unknown = set(kwargs) - set(_OPTIONS)
    if unknown:
        raise Error(f"pejit.torch.options: unknown option '{sorted(unknown)[0]}' "
                    f"(one of {', '.join(_OPTIONS)})")
    normalized = dict(kwargs)
    rope = as_rope(kwargs.get("rope"))
    normalized["rope"] = None if rope is None else dataclasses.asdict(rope)
    alibi = _as_alibi(kwargs.get("alibi"))
    normalized["alibi"] = None if alibi is None else dataclasses.asdict(alibi)
    t5 = _as_t5(kwargs.get("t5"))
    normalized["t5"] = None if t5 is None else dataclasses.asdict(t5)
    shaw = _as_shaw(kwargs.get("shaw"))
    normalized["shaw"] = None if shaw is None else dataclasses.asdict(shaw)
    optional_number(kwargs.get("scale"), "scale")
    optional_number(kwargs.get("softcap"), "softcap", positive=True)
    if "causal" in kwargs:
        boolean(kwargs["causal"], "causal")
    left, right = _window(kwargs.get("window"))
    normalized["window"] = left if right is None else [left, right]
    return json.dumps(normalized, sort_keys=True)


@functools.lru_cache(maxsize=256)
def _decode(text: str) -> dict:
    """The options string as pejit.attention's keyword arguments (cached:
    a traced graph passes the same string on every call; never mutated)."""
    kwargs = json.loads(text)
    if kwargs.get("rope") is not None:
        kwargs["rope"] = as_rope(kwargs["rope"])
    if kwargs.get("t5") is not None:
        kwargs["t5"] = T5Config(**kwargs["t5"])
    if kwargs.get("shaw") is not None:
        kwargs["shaw"] = ShawConfig(**kwargs["shaw"])
    return kwargs


def _as_shaw(shaw) -> Optional[ShawConfig]:
    """A ShawConfig from a config, a dict {"clip": k} or the clip k."""
    if shaw is None or isinstance(shaw, ShawConfig):
        return shaw
    if isinstance(shaw, dict):
        unknown = set(shaw) - {"clip"}
        if unknown:
            raise Error(f"shaw: unknown field '{sorted(unknown)[0]}'")
        return ShawConfig(**shaw)
    if isinstance(shaw, int) and not isinstance(shaw, bool):
        return ShawConfig(shaw)
    raise Error(f"shaw: expected a pejit.ShawConfig, a dict or the clip, got {type(shaw).__name__}")


def _as_t5(t5) -> Optional[T5Config]:
    """A T5Config from a config or a dict of its fields (num_buckets,
    max_distance, bidirectional)."""
    if t5 is None or isinstance(t5, T5Config):
        return t5
    if isinstance(t5, dict):
        unknown = set(t5) - {"num_buckets", "max_distance", "bidirectional"}
        if unknown:
            raise Error(f"t5: unknown field '{sorted(unknown)[0]}'")
        return T5Config(**t5)
    raise Error(f"t5: expected a pejit.T5Config or a dict, got {type(t5).__name__}")


@torch.library.custom_op("pejit::attention", mutates_args=(), device_types="cpu")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
                 q_positions: Optional[torch.Tensor] = None,
                 k_positions: Optional[torch.Tensor] = None,
                 t5_table: Optional[torch.Tensor] = None,
                 rope_scale: Optional[torch.Tensor] = None,
                 alibi_slopes: Optional[torch.Tensor] = None,
                 rope_inv_freq: Optional[torch.Tensor] = None,
                 cu_seqlens_q: Optional[torch.Tensor] = None,
                 cu_seqlens_k: Optional[torch.Tensor] = None,
                 key_lengths: Optional[torch.Tensor] = None,
                 shaw_key_table: Optional[torch.Tensor] = None,
                 shaw_value_table: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _attention(q, k, v, q_positions=q_positions, k_positions=k_positions,
                      t5_table=t5_table, rope_scale=rope_scale, alibi_slopes=alibi_slopes,
                      rope_inv_freq=rope_inv_freq, cu_seqlens_q=cu_seqlens_q,
                      cu_seqlens_k=cu_seqlens_k, key_lengths=key_lengths,
                      shaw_key=shaw_key_table, shaw_value=shaw_value_table, **_decode(options))


@attention_op.register_fake
def _(q, k, v, options, q_positions=None, k_positions=None, t5_table=None, rope_scale=None,
      alibi_slopes=None, rope_inv_freq=None, cu_seqlens_q=None, cu_seqlens_k=None,
      key_lengths=None, shaw_key_table=None, shaw_value_table=None):
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))


@torch.library.custom_op("pejit::attention_backward", mutates_args=(), device_types="cpu")
def attention_backward_op(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, grad: torch.Tensor,
        options: str, q_positions: Optional[torch.Tensor] = None,
        k_positions: Optional[torch.Tensor] = None, t5_table: Optional[torch.Tensor] = None,
        rope_scale: Optional[torch.Tensor] = None, alibi_slopes: Optional[torch.Tensor] = None,
        rope_inv_freq: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
        cu_seqlens_k: Optional[torch.Tensor] = None, key_lengths: Optional[torch.Tensor] = None,
        shaw_key_table: Optional[torch.Tensor] = None,
        shaw_value_table: Optional[torch.Tensor] = None
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
           torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv, then the gradients of the T5 table, RoPE's position scale,
    ALiBi's slopes, RoPE's inverse frequencies and Shaw's key and value
    tables (an empty tensor for each one absent); with RoPE, dq and dk
    rotated back inside the kernel."""
    kwargs = {name: value for name, value in _decode(options).items() if name in _OPTIONS}
    grads = list(_attention_backward(q, k, v, o, grad, t5_table=t5_table,
                                     shaw_key=shaw_key_table, shaw_value=shaw_value_table,
                                     q_positions=q_positions, k_positions=k_positions,
                                     rope_scale=rope_scale, alibi_slopes=alibi_slopes,
                                     rope_inv_freq=rope_inv_freq, cu_seqlens_q=cu_seqlens_q,
                                     cu_seqlens_k=cu_seqlens_k, key_lengths=key_lengths,
                                     **kwargs))
    # attention_backward returns them as t5_table, shaw_key, shaw_value,
    # alibi_slopes, rope_scale, rope_inv_freq.
    given = {name: grads.pop(3) for name, x in (("t5_table", t5_table),
                                                ("shaw_key_table", shaw_key_table),
                                                ("shaw_value_table", shaw_value_table),
                                                ("alibi_slopes", alibi_slopes),
                                                ("rope_scale", rope_scale),
                                                ("rope_inv_freq", rope_inv_freq))
             if x is not None}
    # An absent one is an empty tensor of its own (returns may not alias).
    return (*grads[:3], *(given[name] if name in given else q.new_empty((0,))
                          for name in _OPERAND_GRADIENTS))


# The operand gradients the backward op returns after dq, dk, dv, in order.
_OPERAND_GRADIENTS = ("t5_table", "rope_scale", "alibi_slopes", "rope_inv_freq",
                      "shaw_key_table", "shaw_value_table")


@attention_backward_op.register_fake
def _(q, k, v, o, grad, options, q_positions=None, k_positions=None, t5_table=None,
      rope_scale=None, alibi_slopes=None, rope_inv_freq=None, cu_seqlens_q=None,
      cu_seqlens_k=None, key_lengths=None, shaw_key_table=None, shaw_value_table=None):
    operands = [q.new_empty((0,)) if x is None else torch.empty_like(x)
                for x in (t5_table, rope_scale, alibi_slopes, rope_inv_freq, shaw_key_table,
                          shaw_value_table)]
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), *operands


def _setup_context(ctx, inputs, output):
    (q, k, v, options, q_positions, k_positions, t5_table, rope_scale, alibi_slopes, inv_freq,
     cu_q, cu_k, key_lengths, shaw_key, shaw_value) = inputs
    ctx.save_for_backward(q, k, v, output, q_positions, k_positions, t5_table, rope_scale,
                          alibi_slopes, inv_freq, cu_q, cu_k, key_lengths, shaw_key, shaw_value)
    ctx.options = options


def _backward(ctx, grad):
    (q, k, v, o, q_positions, k_positions, t5_table, rope_scale, alibi_slopes, inv_freq, cu_q,
     cu_k, key_lengths, shaw_key, shaw_value) = ctx.saved_tensors
    dq, dk, dv, dtable, dscale, dslopes, dfreq, dkey, dvalue = (
        torch.ops.pejit.attention_backward(q, k, v, o, grad, ctx.options, q_positions,
                                           k_positions, t5_table, rope_scale, alibi_slopes,
                                           inv_freq, cu_q, cu_k, key_lengths, shaw_key,
                                           shaw_value))
    # Position ids, offsets, lengths and the options string have no gradient.
    return (dq, dk, dv, None, None, None, None if t5_table is None else dtable,
            None if rope_scale is None else dscale, None if alibi_slopes is None else dslopes,
            None if inv_freq is None else dfreq, None, None, None,
            None if shaw_key is None else dkey, None if shaw_value is None else dvalue)


attention_op.register_autograd(_backward, setup_context=_setup_context)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
              q_positions: Optional[torch.Tensor] = None,
              k_positions: Optional[torch.Tensor] = None,
              t5_table: Optional[torch.Tensor] = None,
              rope_scale: Optional[torch.Tensor] = None,
              alibi_slopes: Optional[torch.Tensor] = None,
              rope_inv_freq: Optional[torch.Tensor] = None,
              cu_seqlens_q: Optional[torch.Tensor] = None,
              cu_seqlens_k: Optional[torch.Tensor] = None,
              key_lengths: Optional[torch.Tensor] = None,
              shaw_key_table: Optional[torch.Tensor] = None,
              shaw_value_table: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.ops.pejit.attention: `options` from pejit.torch.options(...);
    cu_seqlens_q, cu_seqlens_k (int32, a packed batch) and key_lengths
    (int32 [b]) as for pejit.attention, with autograd; Shaw's tables with
    options(shaw=...)."""
    return torch.ops.pejit.attention(q, k, v, options, q_positions, k_positions, t5_table,
                                     rope_scale, alibi_slopes, rope_inv_freq, cu_seqlens_q,
                                     cu_seqlens_k, key_lengths, shaw_key_table, shaw_value_table)


class Attention(torch.nn.Module):
    """Fused attention with its positional encoding, as a module: the
    options are fixed at construction; forward(q, k, v[, q_positions,
    k_positions]) runs the custom op."""

    def __init__(self, **kwargs):
        super().__init__()
        self.options = options(**kwargs)

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return torch.ops.pejit.attention(q, k, v, self.options, q_positions, k_positions)


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
        return torch.ops.pejit.attention(q, k, v, self.options, None, None, self.table)


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
        return torch.ops.pejit.attention(q, k, v, self.options, q_positions, k_positions, None,
                                         self.scale)


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
        return torch.ops.pejit.attention(q, k, v, self.options, q_positions, k_positions, None,
                                         self.scale, None, self.inv_freq)


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
        return torch.ops.pejit.attention(q, k, v, self.options, None, None, None, None,
                                         self.slopes, None)


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
        return torch.ops.pejit.attention(q, k, v, self.options, q_positions, k_positions, None,
                                         None, None, None, None, None, None, self.key_table,
                                         self.value_table)


def _paper_slopes(n: int):
    """The ALiBi paper's get_slopes(n), non-powers of two included."""
    def power_of_2(m):
        start = 2 ** (-(2 ** -(math.log2(m) - 3)))
        return [start * start ** i for i in range(m)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _paper_slopes(2 * closest)[0::2][:n - closest]
