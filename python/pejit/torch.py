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


# The op's optional tensor arguments after (q, k, v, options), in order; the
# backward op takes them after (q, k, v, o, grad, options), then lse.
_TENSOR_ARGS = ("q_positions", "k_positions", "t5_table", "rope_scale", "alibi_slopes",
                "rope_inv_freq", "cu_seqlens_q", "cu_seqlens_k", "key_lengths",
                "shaw_key_table", "shaw_value_table", "bias")
# Those with a gradient, in the order the backward op returns them after dq,
# dk, dv; position ids, offsets and lengths have none.
_OPERAND_GRADIENTS = ("t5_table", "rope_scale", "alibi_slopes", "rope_inv_freq",
                      "shaw_key_table", "shaw_value_table", "bias")


def _tensors(arguments: dict) -> tuple:
    """The op's optional tensor arguments, in _TENSOR_ARGS' order, from a
    function's locals() taken before it binds any name of its own."""
    return tuple(arguments[name] for name in _TENSOR_ARGS)


def _keywords(tensors) -> dict:
    """pejit.attention's keyword arguments for the op's optional tensors."""
    named = dict(zip(_TENSOR_ARGS, tensors))
    named["shaw_key"] = named.pop("shaw_key_table")
    named["shaw_value"] = named.pop("shaw_value_table")
    return named


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
                 shaw_value_table: Optional[torch.Tensor] = None,
                 bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    tensors = _tensors(locals())
    return _attention(q, k, v, **_keywords(tensors), **_decode(options))


@attention_op.register_fake
def _(q, k, v, options, *tensors):
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))


@torch.library.custom_op("pejit::attention_with_lse", mutates_args=(), device_types="cpu")
def attention_with_lse_op(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
        q_positions: Optional[torch.Tensor] = None, k_positions: Optional[torch.Tensor] = None,
        t5_table: Optional[torch.Tensor] = None, rope_scale: Optional[torch.Tensor] = None,
        alibi_slopes: Optional[torch.Tensor] = None, rope_inv_freq: Optional[torch.Tensor] = None,
        cu_seqlens_q: Optional[torch.Tensor] = None, cu_seqlens_k: Optional[torch.Tensor] = None,
        key_lengths: Optional[torch.Tensor] = None, shaw_key_table: Optional[torch.Tensor] = None,
        shaw_value_table: Optional[torch.Tensor] = None,
        bias: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The training forward: pejit::attention's output and each row's lse
    (float32 [b, hq, sq]), which its backward reads instead of recomputing
    (docs/backward.md). lse itself has no gradient."""
    tensors = _tensors(locals())
    return _attention(q, k, v, return_lse=True, **_keywords(tensors), **_decode(options))


@attention_with_lse_op.register_fake
def _(q, k, v, options, *tensors):
    return (q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3])),
            q.new_empty((q.shape[0], q.shape[1], q.shape[2]), dtype=torch.float32))


@torch.library.custom_op("pejit::attention_backward", mutates_args=(), device_types="cpu")
def attention_backward_op(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, grad: torch.Tensor,
        options: str, q_positions: Optional[torch.Tensor] = None,
        k_positions: Optional[torch.Tensor] = None, t5_table: Optional[torch.Tensor] = None,
        rope_scale: Optional[torch.Tensor] = None, alibi_slopes: Optional[torch.Tensor] = None,
        rope_inv_freq: Optional[torch.Tensor] = None, cu_seqlens_q: Optional[torch.Tensor] = None,
        cu_seqlens_k: Optional[torch.Tensor] = None, key_lengths: Optional[torch.Tensor] = None,
        shaw_key_table: Optional[torch.Tensor] = None,
        shaw_value_table: Optional[torch.Tensor] = None, bias: Optional[torch.Tensor] = None,
        lse: Optional[torch.Tensor] = None, bias_grad: bool = False
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
           torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv, then the gradients of _OPERAND_GRADIENTS (an empty tensor
    for each one absent); with RoPE, dq and dk rotated back inside the
    kernel; with lse (the training forward's), it is read, not recomputed.
    The bias's gradient (s x s) only with bias_grad; else it is a mask."""
    tensors = _tensors(locals())
    kwargs = {name: value for name, value in _decode(options).items() if name in _OPTIONS}
    # A bias that needs no gradient is a mask: its s x s gradient is skipped.
    grads = list(_attention_backward(q, k, v, o, grad, lse=lse, bias_grad=bias_grad,
                                     **_keywords(tensors), **kwargs))
    # attention_backward returns them as t5_table, shaw_key, shaw_value,
    # bias, alibi_slopes, rope_scale, rope_inv_freq.
    named = dict(zip(_TENSOR_ARGS, tensors))
    wants = {name: named[name] is not None for name in named}
    wants["bias"] = bias is not None and bias_grad
    given = {name: grads.pop(3) for name in ("t5_table", "shaw_key_table", "shaw_value_table",
                                             "bias", "alibi_slopes", "rope_scale",
                                             "rope_inv_freq")
             if wants[name]}
    # An absent one is an empty tensor of its own (returns may not alias).
    return (*grads[:3], *(given[name] if name in given else q.new_empty((0,))
                          for name in _OPERAND_GRADIENTS))


@attention_backward_op.register_fake
def _(q, k, v, o, grad, options, q_positions=None, k_positions=None, t5_table=None,
      rope_scale=None, alibi_slopes=None, rope_inv_freq=None, cu_seqlens_q=None,
      cu_seqlens_k=None, key_lengths=None, shaw_key_table=None, shaw_value_table=None, bias=None,
      lse=None, bias_grad=False):
    named = {"t5_table": t5_table, "rope_scale": rope_scale, "alibi_slopes": alibi_slopes,
             "rope_inv_freq": rope_inv_freq, "shaw_key_table": shaw_key_table,
             "shaw_value_table": shaw_value_table, "bias": bias if bias_grad else None}
    operands = [q.new_empty((0,)) if named[name] is None else torch.empty_like(named[name])
                for name in _OPERAND_GRADIENTS]
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v), *operands


def _setup_context(ctx, inputs, output):
    q, k, v, options, *tensors = inputs
    # The training forward's output is (o, lse); lse has no gradient.
    o, lse = output if isinstance(output, tuple) else (output, None)
    if lse is not None:
        ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, o, lse, *tensors)
    ctx.options = options
    bias = dict(zip(_TENSOR_ARGS, tensors)).get("bias")
    ctx.bias_grad = bias is not None and bias.requires_grad


def _backward(ctx, grad, grad_lse=None):
    q, k, v, o, lse, *tensors = ctx.saved_tensors
    dq, dk, dv, *operands = torch.ops.pejit.attention_backward(q, k, v, o, grad, ctx.options,
                                                               *tensors, lse, ctx.bias_grad)
    by_name = dict(zip(_OPERAND_GRADIENTS, operands))
    # Position ids, offsets, lengths, a bool mask and the options string
    # have no gradient.
    return (dq, dk, dv, None,
            *(by_name[name] if name in by_name and x is not None and x.is_floating_point()
              else None for name, x in zip(_TENSOR_ARGS, tensors)))


attention_op.register_autograd(_backward, setup_context=_setup_context)
attention_with_lse_op.register_autograd(_backward, setup_context=_setup_context)


def _needs_grad(tensors) -> bool:
    return torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in tensors)


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
              shaw_value_table: Optional[torch.Tensor] = None,
              bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Fused attention with autograd: `options` from pejit.torch.options(...);
    cu_seqlens_q, cu_seqlens_k (int32, a packed batch) and key_lengths
    (int32 [b]) as for pejit.attention; Shaw's tables with
    options(shaw=...); bias ([sq, skv] or [b|1, hq|1, sq, skv], float32 or a
    bool mask), whose gradient (dS summed over its broadcast dims) is
    computed only when it requires grad. When a gradient will be taken, it runs the training
    forward (torch.ops.pejit.attention_with_lse), whose lse the backward
    reads; else torch.ops.pejit.attention."""
    tensors = _tensors(locals())
    if _needs_grad((q, k, v) + tensors):
        return torch.ops.pejit.attention_with_lse(q, k, v, options, *tensors)[0]
    return torch.ops.pejit.attention(q, k, v, options, *tensors)


from ._torch_modules import (ALiBiAttention, Attention, LearnedFrequencyRoPEAttention,  # noqa
                             ScaledRoPEAttention, ShawAttention, T5Attention)
from ._torch_standalone import rope_options  # noqa: E402,F401  (registers pejit::rope)
from ._torch_linear import (LinearAttentionWithRoPE, linear_attention,  # noqa: E402,F401
                            linear_options)
from ._torch_positions import (DynamicPositionEncoding, Embedding,  # noqa: E402,F401
                               HybridPositionEncoding, LearnablePositionalEmbedding,
                               RotaryPositionEmbedding, SinusoidalPositionalEncoding)
