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

from ._attention import _as_alibi, _window, attention as _attention
from ._backward import attention_backward as _attention_backward
from ._checks import boolean, optional_number
from ._pejit import Error
from ._rope import as_rope

_OPTIONS = ("rope", "alibi", "causal", "window", "softcap", "scale")


def options(**kwargs) -> str:
    """The op's options string: pejit.attention's keyword arguments (rope,
    alibi, causal, window, softcap, scale), checked and normalized."""
    unknown = set(kwargs) - set(_OPTIONS)
    if unknown:
        raise Error(f"pejit.torch.options: unknown option '{sorted(unknown)[0]}' "
                    f"(one of {', '.join(_OPTIONS)})")
    normalized = dict(kwargs)
    rope = as_rope(kwargs.get("rope"))
    normalized["rope"] = None if rope is None else dataclasses.asdict(rope)
    alibi = _as_alibi(kwargs.get("alibi"))
    normalized["alibi"] = None if alibi is None else dataclasses.asdict(alibi)
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
    return kwargs


@torch.library.custom_op("pejit::attention", mutates_args=(), device_types="cpu")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
                 q_positions: Optional[torch.Tensor] = None,
                 k_positions: Optional[torch.Tensor] = None) -> torch.Tensor:
    return _attention(q, k, v, q_positions=q_positions, k_positions=k_positions,
                      **_decode(options))


@attention_op.register_fake
def _(q, k, v, options, q_positions=None, k_positions=None):
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))


@torch.library.custom_op("pejit::attention_backward", mutates_args=(), device_types="cpu")
def attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor,
                          grad: torch.Tensor,
                          options: str) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    kwargs = {name: value for name, value in _decode(options).items()
              if name in ("rope", "alibi", "causal", "window", "softcap", "scale")}
    return _attention_backward(q, k, v, o, grad, **kwargs)


@attention_backward_op.register_fake
def _(q, k, v, o, grad, options):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup_context(ctx, inputs, output):
    q, k, v, options, _, _ = inputs
    ctx.save_for_backward(q, k, v, output)
    ctx.options = options


def _backward(ctx, grad):
    q, k, v, o = ctx.saved_tensors
    dq, dk, dv = torch.ops.pejit.attention_backward(q, k, v, o, grad, ctx.options)
    # Position ids and the options string have no gradient.
    return dq, dk, dv, None, None, None


attention_op.register_autograd(_backward, setup_context=_setup_context)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
              q_positions: Optional[torch.Tensor] = None,
              k_positions: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.ops.pejit.attention: `options` from pejit.torch.options(...)."""
    return torch.ops.pejit.attention(q, k, v, options, q_positions, k_positions)


class Attention(torch.nn.Module):
    """Fused attention with its positional encoding, as a module: the
    options are fixed at construction; forward(q, k, v[, q_positions,
    k_positions]) runs the custom op."""

    def __init__(self, **kwargs):
        super().__init__()
        self.options = options(**kwargs)

    def forward(self, q, k, v, q_positions=None, k_positions=None):
        return torch.ops.pejit.attention(q, k, v, self.options, q_positions, k_positions)
