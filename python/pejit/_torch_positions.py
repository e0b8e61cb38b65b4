"""pejit.torch's position-encoding modules (docs/python.md, "The seed's
modules"): the positional encodings of the seed articles' code as
nn.Modules with the same constructor arguments, each computing the seed's
formula through a pejit kernel, forward and backward."""
from __future__ import annotations

from typing import Optional

import torch

from ._pejit import Error
from ._torch_standalone import rope_options


def _positions(positions: Optional[torch.Tensor], length: int) -> torch.Tensor:
    if positions is None:
        return torch.arange(length, dtype=torch.int64)
    return positions


def _on_heads(x: torch.Tensor, positions: Optional[torch.Tensor], rotate) -> torch.Tensor:
    """rotate(rows [b, h, s, d], ids) of x [b, h, s, d], or of x [b, s, d] as
    one head (the result then [b, s, d] again)."""
    heads = x.dim() == 4
    rows = x if heads else x.unsqueeze(1)
    out = rotate(rows, _positions(positions, rows.shape[2]))
    return out if heads else out.squeeze(1)


class RotaryPositionEmbedding(torch.nn.Module):
    """The seed's RotaryPositionEmbedding: x rotated by RoPE,

        inv_freq = 1 / base^(2i / dim),  angle = position * inv_freq,
        out = x * cos(cat(angle, angle)) + rotate_half(x) * sin(cat(angle, angle))

    (the NeoX/LLaMA half layout). forward(x, positions=None): x [b, h, s,
    dim] or [b, s, dim]; positions int64 [s] or [b, s], default 0 .. s-1.
    One fused pejit kernel each way (torch.ops.pejit.rope; its backward the
    rotation transposed). The angles are computed per call, so max_seq_len
    is kept for the seed's signature only: any position works. No
    parameters."""

    def __init__(self, dim: int, max_seq_len: int = 2048, base: float = 10000.0):
        super().__init__()
        if dim <= 0 or dim % 2:
            raise Error(f"dim: expected a positive even head dim, got {dim}")
        self.dim, self.max_seq_len, self.base = dim, max_seq_len, float(base)
        self.options = rope_options({"rope_theta": self.base})

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        if x.shape[-1] != self.dim:
            raise Error(f"x: expected last dim {self.dim} (the module's dim), got "
                        f"{list(x.shape)}")
        return _on_heads(x, positions,
                         lambda rows, ids: torch.ops.pejit.rope(rows, ids, self.options))


class LearnablePositionalEmbedding(torch.nn.Module):
    """The seed's LearnablePositionalEmbedding (BERT's, GPT-2's): a learned
    table of max_len rows, one per position, added to the input,

        out[b, t] = x[b, t] + position_embeddings.weight[t]

    the table an nn.Embedding (its weight initialised N(0, 1), as
    nn.Embedding's, so a seed state_dict loads). forward(x, positions=None):
    x [b, s, d_model], positions int64 [s] (default 0 .. s-1; a position
    past the table is an error naming it). One pejit kernel adds the rows
    (torch.ops.pejit.learned_positions); the table's gradient is the
    deterministic scatter-add by position (torch.ops.pejit.embedding_backward),
    x's passes through."""

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        self.position_embeddings = torch.nn.Embedding(max_len, d_model)

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        return torch.ops.pejit.learned_positions(x, _positions(positions, x.shape[1]),
                                                 self.position_embeddings.weight)


class SinusoidalPositionalEncoding(torch.nn.Module):
    """The seed's SinusoidalPositionalEncoding (the Transformer's, Vaswani et
    al. 2017): for position p and i < d_model / 2,

        out[b, t, 2i]     = x[b, t, 2i]     + sin(p / base^(2i / d_model))
        out[b, t, 2i + 1] = x[b, t, 2i + 1] + cos(p / base^(2i / d_model))

    forward(x, positions=None): x [b, s, d_model], positions int64 [s]
    (default 0 .. s-1). The angles are computed per call in float64, so
    max_len is kept for the seed's signature only. One pejit kernel
    (torch.ops.pejit.sinusoidal_positions); the gradient passes through. No
    parameters."""

    def __init__(self, d_model: int, max_len: int = 5000, base: float = 10000.0):
        super().__init__()
        if d_model <= 0 or d_model % 2:
            raise Error(f"d_model: expected a positive even width, got {d_model}")
        self.d_model, self.max_len, self.base = d_model, max_len, float(base)

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        return torch.ops.pejit.sinusoidal_positions(x, _positions(positions, x.shape[1]),
                                                    self.base)


class HybridPositionEncoding(torch.nn.Module):
    """The seed's HybridPositionEncoding: a learned absolute table, then RoPE
    over the same positions,

        out = RoPE(x + table[positions])

    (LearnablePositionalEmbedding, then RotaryPositionEmbedding on x as one
    head of width d_model). forward(x, positions=None): x [b, s, d_model].
    Two pejit kernels, not one: the learned add works on [b, s, d] rows and
    RoPE on heads [b, h, s, d], which no chain of pe ops spans yet."""

    def __init__(self, d_model: int, max_len: int = 512, base: float = 10000.0):
        super().__init__()
        self.learned = LearnablePositionalEmbedding(d_model, max_len)
        self.rotary = RotaryPositionEmbedding(d_model, max_len, base)

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        return self.rotary(self.learned(x, positions), positions)


class Embedding(torch.nn.Module):
    """nn.Embedding through pejit, with the embedding scale some models use
    (sqrt(d) in the Transformer, Gemma): out[b, t] = weight[tokens[b, t]] *
    scale. forward(tokens): int64 [b, s]. The gather is one pejit kernel
    (torch.ops.pejit.embed); weight's gradient the deterministic
    scatter-add by token, scaled (torch.ops.pejit.embedding_backward)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, scale: float = 1.0):
        super().__init__()
        self.scale = float(scale)
        self.weight = torch.nn.Parameter(torch.randn(num_embeddings, embedding_dim))

    def forward(self, tokens: torch.Tensor):
        return torch.ops.pejit.embed(tokens, self.weight, self.scale)


class DynamicPositionEncoding(torch.nn.Module):
    """The seed's DynamicPositionEncoding: a base rotation and a rotation at
    positions scaled by a learnable `dynamic_scale` s, blended,

        out = 0.7 * RoPE(x, positions) + 0.3 * RoPE(x, s * positions)

    (`weights` (base, dynamic), fixed by default; learn_weights=True makes
    them an nn.Parameter). forward(x, positions=None): x [b, h, s, d_model]
    or [b, s, d_model]. Two pejit kernels and torch's blend, not one fused
    kernel: a pe op that blends two rotations of one input is not built.
    dynamic_scale's gradient is pe.rope_scale_grad's (one pass over the
    output's gradient and x)."""

    def __init__(self, d_model: int, max_len: int = 2048, base: float = 10000.0,
                 initial_scale: float = 1.0, weights=(0.7, 0.3), learn_weights: bool = False):
        super().__init__()
        self.rotary = RotaryPositionEmbedding(d_model, max_len, base)
        self.dynamic_scale = torch.nn.Parameter(torch.full((1,), float(initial_scale)))
        blend = torch.tensor([float(w) for w in weights])
        if learn_weights:
            self.weights = torch.nn.Parameter(blend)
        else:
            self.register_buffer("weights", blend)

    def forward(self, x: torch.Tensor, positions: Optional[torch.Tensor] = None):
        def blend(rows, ids):
            options = self.rotary.options
            base = torch.ops.pejit.rope(rows, ids, options)
            scaled = torch.ops.pejit.rope(rows, ids, options, self.dynamic_scale)
            return self.weights[0] * base + self.weights[1] * scaled

        return _on_heads(x, positions, blend)
