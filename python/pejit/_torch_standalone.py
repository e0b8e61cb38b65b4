"""pejit.torch's standalone ops (docs/standalone-kernels.md), each with its
autograd formula (docs/backward.md, "Standalone kernels"):

- `pejit::rope`: RoPE on its own, with an optional runtime position scale;
  its backward the ops `pejit::rope_backward` (the kernel of pe.rope
  adjoint) and, for the scale, `pejit::rope_scale_grad`;
- `pejit::learned_positions` (x + table[positions]) and `pejit::embed`
  (table[tokens] * scale): their tables' gradients by the op
  `pejit::embedding_backward` (pe.embed_grad);
- `pejit::sinusoidal_positions`: x plus the sinusoidal encoding; the
  gradient passes through.

Fakes are registered, so torch.compile(fullgraph=True) traces through
them. The RoPE travels as one JSON string (rope_options(...)), a constant
of the traced graph."""
from __future__ import annotations

import dataclasses
import functools
import json

from typing import Optional

import torch

from ._pejit import Error
from ._rope import as_rope
from ._standalone import (add_positions as _add_positions, embed as _embed,
                          embedding_backward as _embedding_backward, rope as _rope,
                          rope_backward as _rope_backward,
                          rope_scale_gradient as _rope_scale_gradient)


def rope_options(rope=True) -> str:
    """The RoPE ops' options string: a RopeConfig, a dict or True, as
    pejit.rope's `rope`, checked and normalized."""
    config = as_rope(rope)
    if config is None:
        raise Error("rope: give the RoPE to apply (a RopeConfig, a dict or True)")
    return json.dumps(dataclasses.asdict(config), sort_keys=True)


@functools.lru_cache(maxsize=256)
def _decode_rope(text: str):
    return as_rope(json.loads(text))


@torch.library.custom_op("pejit::rope", mutates_args=(), device_types="cpu")
def rope_op(x: torch.Tensor, positions: torch.Tensor, options: str,
            scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """x [b, h, s, d] rotated at positions ([s] or [b, s]; M-RoPE [A, ...]),
    the positions times scale (float32 [1] or [b]) when given."""
    return _rope(x.contiguous(), positions.contiguous(), _decode_rope(options),
                 scale=None if scale is None else scale.contiguous())


@rope_op.register_fake
def _(x, positions, options, scale=None):
    return torch.empty_like(x)


@torch.library.custom_op("pejit::rope_backward", mutates_args=(), device_types="cpu")
def rope_backward_op(grad: torch.Tensor, positions: torch.Tensor, options: str,
                     scale: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The gradient of pejit::rope's input: grad rotated back."""
    return _rope_backward(grad.contiguous(), positions.contiguous(), _decode_rope(options),
                          scale=None if scale is None else scale.contiguous())


@rope_backward_op.register_fake
def _(grad, positions, options, scale=None):
    return torch.empty_like(grad)


@torch.library.custom_op("pejit::rope_scale_grad", mutates_args=(), device_types="cpu")
def rope_scale_grad_op(grad: torch.Tensor, x: torch.Tensor, positions: torch.Tensor,
                       options: str, scale: torch.Tensor) -> torch.Tensor:
    """The gradient of pejit::rope's scale, float32 of the scale's shape."""
    return _rope_scale_gradient(grad.contiguous(), x.contiguous(), positions.contiguous(),
                                scale.contiguous(), _decode_rope(options))


@rope_scale_grad_op.register_fake
def _(grad, x, positions, options, scale):
    return torch.empty_like(scale)


def _setup_rope(ctx, inputs, output):
    x, positions, options, *rest = inputs
    scale = rest[0] if rest else None
    wants_scale = scale is not None and scale.requires_grad
    ctx.save_for_backward(positions, scale, x if wants_scale else None)
    ctx.options = options


def _rope_grad(ctx, grad):
    positions, scale, x = ctx.saved_tensors
    dx = torch.ops.pejit.rope_backward(grad, positions, ctx.options, scale)
    dscale = (torch.ops.pejit.rope_scale_grad(grad, x, positions, ctx.options, scale)
              if x is not None else None)
    return dx, None, None, dscale


def _rope_backward_grad(ctx, grad):
    # The adjoint's adjoint is the rotation itself (the scale held fixed).
    positions, scale, _ = ctx.saved_tensors
    return torch.ops.pejit.rope(grad, positions, ctx.options, scale), None, None, None


def _setup_rope_backward(ctx, inputs, output):
    _, positions, options, *rest = inputs
    ctx.save_for_backward(positions, rest[0] if rest else None, None)
    ctx.options = options


rope_op.register_autograd(_rope_grad, setup_context=_setup_rope)
rope_backward_op.register_autograd(_rope_backward_grad, setup_context=_setup_rope_backward)


@torch.library.custom_op("pejit::embedding_backward", mutates_args=(), device_types="cpu")
def embedding_backward_op(grad: torch.Tensor, ids: torch.Tensor, rows: int,
                          scale: float) -> torch.Tensor:
    """A table's gradient: rows of grad [b, s, d] summed by id, [rows, d] of
    grad's dtype (accumulated in float32)."""
    return _embedding_backward(grad.contiguous(), ids.contiguous(), rows, scale=scale)


@embedding_backward_op.register_fake
def _(grad, ids, rows, scale):
    return grad.new_empty((rows, grad.shape[2]))


@torch.library.custom_op("pejit::learned_positions", mutates_args=(), device_types="cpu")
def learned_positions_op(x: torch.Tensor, positions: torch.Tensor,
                         table: torch.Tensor) -> torch.Tensor:
    """x [b, s, d] + table[positions[t]] (positions [s])."""
    return _add_positions(x.contiguous(), positions.contiguous(),
                          position_table=table.contiguous())


@learned_positions_op.register_fake
def _(x, positions, table):
    return torch.empty_like(x)


def _setup_learned(ctx, inputs, output):
    _, positions, table = inputs
    ctx.save_for_backward(positions)
    ctx.rows, ctx.table_dtype = table.shape[0], table.dtype


def _learned_grad(ctx, grad):
    (positions,) = ctx.saved_tensors
    table = torch.ops.pejit.embedding_backward(grad, positions, ctx.rows, 1.0)
    return grad, None, table.to(ctx.table_dtype)


learned_positions_op.register_autograd(_learned_grad, setup_context=_setup_learned)


@torch.library.custom_op("pejit::sinusoidal_positions", mutates_args=(), device_types="cpu")
def sinusoidal_positions_op(x: torch.Tensor, positions: torch.Tensor,
                            base: float) -> torch.Tensor:
    """x [b, s, d] + the sinusoidal encoding of positions[t] (positions [s])."""
    return _add_positions(x.contiguous(), positions.contiguous(), sinusoidal_base=base)


@sinusoidal_positions_op.register_fake
def _(x, positions, base):
    return torch.empty_like(x)


def _sinusoidal_grad(ctx, grad):
    return grad, None, None


sinusoidal_positions_op.register_autograd(_sinusoidal_grad,
                                          setup_context=lambda ctx, inputs, output: None)


@torch.library.custom_op("pejit::embed", mutates_args=(), device_types="cpu")
def embed_op(tokens: torch.Tensor, table: torch.Tensor, scale: float) -> torch.Tensor:
    """table[tokens[b, t]] * scale: [b, s, d] of the table's dtype."""
    return _embed(tokens.contiguous(), table.contiguous(), scale=scale)


@embed_op.register_fake
def _(tokens, table, scale):
    return table.new_empty((tokens.shape[0], tokens.shape[1], table.shape[1]))


def _setup_embed(ctx, inputs, output):
    tokens, table, scale = inputs
    ctx.save_for_backward(tokens)
    ctx.rows, ctx.table_dtype, ctx.scale = table.shape[0], table.dtype, scale


def _embed_grad(ctx, grad):
    (tokens,) = ctx.saved_tensors
    table = torch.ops.pejit.embedding_backward(grad, tokens, ctx.rows, ctx.scale)
    return None, table.to(ctx.table_dtype), None


embed_op.register_autograd(_embed_grad, setup_context=_setup_embed)
