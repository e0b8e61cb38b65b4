"""pejit.torch's standalone ops (docs/standalone-kernels.md): RoPE on its
own as the custom op `pejit::rope`, whose autograd formula is the op
`pejit::rope_backward` (the kernel of pe.rope adjoint, docs/backward.md).
Fakes are registered, so torch.compile(fullgraph=True) traces through
both. The RoPE travels as one JSON string (rope_options(...)), a constant
of the traced graph."""
from __future__ import annotations

import dataclasses
import functools
import json

import torch

from ._pejit import Error
from ._rope import as_rope
from ._standalone import rope as _rope, rope_backward as _rope_backward


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
def rope_op(x: torch.Tensor, positions: torch.Tensor, options: str) -> torch.Tensor:
    """x [b, h, s, d] rotated at positions ([s] or [b, s]; M-RoPE [A, ...])."""
    return _rope(x.contiguous(), positions.contiguous(), _decode_rope(options))


@rope_op.register_fake
def _(x, positions, options):
    return torch.empty_like(x)


@torch.library.custom_op("pejit::rope_backward", mutates_args=(), device_types="cpu")
def rope_backward_op(grad: torch.Tensor, positions: torch.Tensor, options: str) -> torch.Tensor:
    """The gradient of pejit::rope's input: grad rotated back."""
    return _rope_backward(grad.contiguous(), positions.contiguous(), _decode_rope(options))


@rope_backward_op.register_fake
def _(grad, positions, options):
    return torch.empty_like(grad)


def _setup_rope(ctx, inputs, output):
    _, positions, options = inputs
    ctx.save_for_backward(positions)
    ctx.options = options


def _rope_grad(ctx, grad):
    (positions,) = ctx.saved_tensors
    return torch.ops.pejit.rope_backward(grad, positions, ctx.options), None, None


def _setup_rope_backward(ctx, inputs, output):
    _setup_rope(ctx, inputs, output)


def _rope_backward_grad(ctx, grad):
    # The adjoint's adjoint is the rotation itself.
    (positions,) = ctx.saved_tensors
    return torch.ops.pejit.rope(grad, positions, ctx.options), None, None


rope_op.register_autograd(_rope_grad, setup_context=_setup_rope)
rope_backward_op.register_autograd(_rope_backward_grad, setup_context=_setup_rope_backward)
