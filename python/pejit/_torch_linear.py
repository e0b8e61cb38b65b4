"""pejit.torch's linear attention (docs/linear-attention.md): the op
`pejit::linear_attention` with its autograd formula (the op
`pejit::linear_attention_backward`, the kernel attn-derive-backward derives;
docs/backward.md, "Linear attention"), `linear_attention(...)`, and the
seed's `LinearAttentionWithRoPE` module. Fakes are registered, so
torch.compile(fullgraph=True) traces through the ops; the options travel as
one JSON string, a constant of the traced graph."""
from __future__ import annotations

import dataclasses
import functools
import json
from typing import Optional, Tuple

import torch

from ._checks import boolean
from ._linear import FEATURE_MAPS, PLACEMENTS
from ._linear import linear_attention as _linear_attention
from ._linear import linear_attention_backward as _linear_attention_backward
from ._pejit import Error
from ._rope import as_rope


def linear_options(feature_map: str = "elu_plus_one", causal: bool = False, rope=None,
                   rope_placement: Optional[str] = None) -> str:
    """The linear attention ops' options string, checked and normalized:
    the arguments as pejit.linear_attention's."""
    if feature_map not in FEATURE_MAPS:
        raise Error(f"feature_map: expected one of {', '.join(FEATURE_MAPS)}, got "
                    f"{feature_map!r}")
    boolean(causal, "causal")
    config = as_rope(rope)
    if config is not None and rope_placement is None:
        rope_placement = "rope_before_feature_map"
    if rope_placement is not None and rope_placement not in PLACEMENTS:
        raise Error(f"rope_placement: expected one of {', '.join(PLACEMENTS)}, got "
                    f"{rope_placement!r}")
    return json.dumps({"feature_map": feature_map, "causal": bool(causal),
                       "rope": None if config is None else dataclasses.asdict(config),
                       "rope_placement": rope_placement}, sort_keys=True)


@functools.lru_cache(maxsize=256)
def _decode(options: str) -> dict:
    fields = json.loads(options)
    fields["rope"] = as_rope(fields["rope"])
    return fields


@torch.library.custom_op("pejit::linear_attention", mutates_args=(), device_types="cpu")
def linear_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, options: str,
                        q_positions: Optional[torch.Tensor] = None,
                        k_positions: Optional[torch.Tensor] = None) -> torch.Tensor:
    """pejit.linear_attention with linear_options(...)'s options."""
    return _linear_attention(q.contiguous(), k.contiguous(), v.contiguous(), **_decode(options),
                             q_positions=q_positions, k_positions=k_positions)


@linear_attention_op.register_fake
def _(q, k, v, options, q_positions=None, k_positions=None):
    return q.new_empty((q.shape[0], q.shape[1], q.shape[2], v.shape[3]))


@torch.library.custom_op("pejit::linear_attention_backward", mutates_args=(),
                         device_types="cpu")
def linear_attention_backward_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 o: torch.Tensor, do: torch.Tensor, options: str,
                                 q_positions: Optional[torch.Tensor] = None,
                                 k_positions: Optional[torch.Tensor] = None
                                 ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of pejit::linear_attention for its output's gradient do."""
    return _linear_attention_backward(q.contiguous(), k.contiguous(), v.contiguous(),
                                      o.contiguous(), do.contiguous(), **_decode(options),
                                      q_positions=q_positions, k_positions=k_positions)


@linear_attention_backward_op.register_fake
def _(q, k, v, o, do, options, q_positions=None, k_positions=None):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _setup(ctx, inputs, output):
    q, k, v, options, *ids = inputs
    ids = ids + [None] * (2 - len(ids))
    ctx.save_for_backward(q, k, v, output, ids[0], ids[1])
    ctx.options = options


def _grad(ctx, grad):
    q, k, v, o, q_positions, k_positions = ctx.saved_tensors
    dq, dk, dv = torch.ops.pejit.linear_attention_backward(q, k, v, o, grad, ctx.options,
                                                           q_positions, k_positions)
    return dq, dk, dv, None, None, None


linear_attention_op.register_autograd(_grad, setup_context=_setup)


def linear_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                     feature_map: str = "elu_plus_one", causal: bool = False, rope=None,
                     rope_placement: Optional[str] = None,
                     q_positions: Optional[torch.Tensor] = None,
                     k_positions: Optional[torch.Tensor] = None) -> torch.Tensor:
    """pejit.linear_attention as a torch op with autograd (q, k, v get
    gradients; position ids none)."""
    options = linear_options(feature_map, causal, rope, rope_placement)
    return torch.ops.pejit.linear_attention(q, k, v, options, q_positions, k_positions)


class LinearAttentionWithRoPE(torch.nn.Module):
    """The seed's LinearAttentionWithRoPE: projections to heads, RoPE on q
    and k, then linear attention with K softmaxed over the sequence,

        q, k, v = (x W_q, x W_k, x W_v) as [b, h, s, d_model / h]
        q, k = RoPE(q, positions), RoPE(k, positions)     (base, half layout)
        context = einsum('bhnd,bhne->bhde', softmax(k, dim=seq), v)
        out = einsum('bhnd,bhde->bhne', q, context)       heads merged, then W_o

    in one pejit kernel each way (pejit::linear_attention, feature map
    softmax_keys, the RoPE fused before it). forward(x, positions=None): x
    [b, s, d_model], positions int64 [s] or [b, s] (default 0 .. s-1).
    feature_map ("elu_plus_one", "relu", "identity") replaces the keys'
    softmax by a normalized feature map on q and k, causal=True masks the
    future (running sums), rope_placement="rope_on_numerator" rotates after
    the feature map (RoFormer's; not with softmax_keys). The angles are
    computed per call, so max_seq_len bounds nothing."""

    def __init__(self, d_model: int, num_heads: int, max_seq_len: int = 2048,
                 base: float = 10000.0, *, feature_map: str = "softmax_keys",
                 causal: bool = False, rope_placement: str = "rope_before_feature_map"):
        super().__init__()
        if num_heads <= 0 or d_model % num_heads or (d_model // num_heads) % 2:
            raise Error(f"d_model, num_heads: expected d_model a multiple of num_heads with an "
                        f"even head dim, got {d_model} and {num_heads}")
        self.d_model, self.num_heads, self.max_seq_len = d_model, num_heads, max_seq_len
        self.head_dim = d_model // num_heads
        self.q_proj = torch.nn.Linear(d_model, d_model)
        self.k_proj = torch.nn.Linear(d_model, d_model)
        self.v_proj = torch.nn.Linear(d_model, d_model)
        self.out_proj = torch.nn.Linear(d_model, d_model)
        self.options = linear_options(feature_map, causal, {"rope_theta": float(base)},
                                      rope_placement)

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise Error(f"x: expected [b, s, {self.d_model}], got {list(x.shape)}")
        b, s, _ = x.shape
        if positions is None:
            positions = torch.arange(s, dtype=torch.int64)

        def heads(y):
            return y.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

        out = torch.ops.pejit.linear_attention(heads(self.q_proj(x)), heads(self.k_proj(x)),
                                               heads(self.v_proj(x)), self.options, positions,
                                               positions)
        return self.out_proj(out.transpose(1, 2).reshape(b, s, self.d_model))
