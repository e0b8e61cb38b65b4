"""The lab's model: a small decoder-only byte-level language model whose
positional encoding is a switch (encodings.py), with its attention run by
pejit (`backend="pejit"`: the fused kernels of pejit.torch, forward and
backward) or written in plain torch (`backend="torch"`: SDPA, with the
encoding computed the way HF's models do: rotate_half RoPE, an additive bias
for ALiBi and T5, explicit einsums for Shaw). Both backends hold the same
parameters under the same names, so one state_dict loads into either.

    block(x) = x + attn(ln1(x)); x + mlp(ln2(x))        (pre-LN, GELU MLP)
    logits   = head(ln_f(blocks(embed(tokens) [+ absolute positions])))
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

import torch
import torch.nn.functional as F

import pejit.torch  # noqa: F401  (registers torch.ops.pejit.*)
from pejit._torch_modules import _paper_slopes
from pejit.torch import attention, linear_options, options

from .encodings import ENCODINGS, Encoding, rope_config

THETA = 10000.0


@dataclass
class ModelConfig:
    encoding: str = "rope"
    layers: int = 4
    d_model: int = 256
    heads: int = 4
    context: int = 128  # the training length
    max_eval: int = 2048  # the learned table's rows (positions past training stay at init)
    vocab: int = 256  # bytes
    t5_buckets: int = 32
    t5_max_distance: int = 128
    shaw_clip: int = 16

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads

    def as_dict(self) -> dict:
        return asdict(self)


def inverse_frequencies(width: int) -> torch.Tensor:
    """THETA^(-2i / width) for i < width / 2, float64: RoPE's over a head,
    the sinusoidal encoding's over d_model."""
    return THETA ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)


def t5_buckets(rel: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """HF T5's unidirectional _relative_position_bucket of rel = j - i."""
    r = (-rel).clamp(min=0)
    exact = num_buckets // 2
    large = exact + (torch.log(r.float().clamp(min=1) / exact) / math.log(max_distance / exact) *
                     (num_buckets - exact)).to(torch.long)
    return torch.where(r < exact, r, large.clamp(max=num_buckets - 1))


def rotate_half(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """HF's apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, angle [s, d/2]."""
    cos = torch.cat([angle.cos(), angle.cos()], -1)
    sin = torch.cat([angle.sin(), angle.sin()], -1)
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-b, a], -1) * sin


class PositionalAttention(torch.nn.Module):
    """Multi-head causal self-attention with the encoding's attention part."""

    def __init__(self, config: ModelConfig, encoding: Encoding):
        super().__init__()
        self.config, self.encoding, self.backend = config, encoding, "pejit"
        d, h, dh = config.d_model, config.heads, config.head_dim
        self.qkv = torch.nn.Linear(d, 3 * d, bias=False)
        self.out = torch.nn.Linear(d, d, bias=False)
        kind = encoding.attention
        if kind == "t5":
            self.t5_table = torch.nn.Parameter(torch.randn(config.t5_buckets, h) * 0.02)
        if kind == "shaw":
            rows = 2 * config.shaw_clip + 1
            self.shaw_key = torch.nn.Parameter(torch.randn(rows, dh) * 0.02)
            self.shaw_value = torch.nn.Parameter(torch.randn(rows, dh) * 0.02)
        if kind == "rope_scale":
            self.rope_scale = torch.nn.Parameter(torch.ones(1))
        if kind == "alibi":
            slopes = torch.tensor(_paper_slopes(h), dtype=torch.float32)
            self.register_buffer("alibi_slopes", slopes, persistent=False)
        self.eval_length = config.context
        self._options = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h, dh = self.config.heads, self.config.head_dim
        q, k, v = (t.view(b, s, h, dh).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        o = self._pejit(q, k, v) if self.backend == "pejit" else self._torch(q, k, v)
        return self.out(o.transpose(1, 2).reshape(b, s, d))

    # pejit: one fused kernel each way.
    def _options_for(self, length: int) -> str:
        from pejit.torch import linear_options, options
        key = (self.encoding.name, length)
        if key not in self._options:
            kind, cfg = self.encoding.attention, self.config
            rope = rope_config(self.encoding, length, cfg.context, THETA)
            if kind == "linear":
                made = linear_options("elu_plus_one", True, rope, self.encoding.linear_placement)
            else:
                made = options(
                    causal=True, rope=rope if kind in ("rope", "rope_scale") else None,
                    alibi={"num_heads": cfg.heads} if kind == "alibi" else None,
                    t5={"num_buckets": cfg.t5_buckets, "max_distance": cfg.t5_max_distance,
                        "bidirectional": False} if kind == "t5" else None,
                    shaw={"clip": cfg.shaw_clip} if kind == "shaw" else None)
            self._options[key] = made
        return self._options[key]

    def _pejit(self, q, k, v):
        kind = self.encoding.attention
        opts = self._options_for(max(self.eval_length, q.shape[2]))
        if kind == "linear":
            return torch.ops.pejit.linear_attention(q, k, v, opts, None, None)
        return attention(q, k, v, opts, t5_table=getattr(self, "t5_table", None),
                         rope_scale=getattr(self, "rope_scale", None),
                         alibi_slopes=getattr(self, "alibi_slopes", None),
                         shaw_key_table=getattr(self, "shaw_key", None),
                         shaw_value_table=getattr(self, "shaw_value", None))

    # Plain torch, the HF way (training lengths; no evaluation-time scaling).
    def _torch(self, q, k, v):
        kind, cfg = self.encoding.attention, self.config
        s, dh = q.shape[2], cfg.head_dim
        pos = torch.arange(s)
        rel = pos[None, :] - pos[:, None]  # j - i
        if kind in ("rope", "rope_scale", "linear"):
            angle = pos[:, None].float() * inverse_frequencies(dh).float()[None, :]
            if kind == "rope_scale":
                angle = angle * self.rope_scale
        if kind == "linear":
            return self._torch_linear(q, k, v, angle, rel <= 0)
        if kind in ("rope", "rope_scale"):
            q, k = rotate_half(q, angle), rotate_half(k, angle)
        if kind == "shaw":
            return self._torch_shaw(q, k, v, rel)
        bias = torch.zeros(s, s).masked_fill(rel > 0, float("-inf"))
        if kind == "alibi":
            bias = bias + self.alibi_slopes[:, None, None] * rel.clamp(max=0)
        if kind == "t5":
            buckets = t5_buckets(rel, cfg.t5_buckets, cfg.t5_max_distance)
            bias = bias + self.t5_table[buckets].permute(2, 0, 1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    def _torch_shaw(self, q, k, v, rel):
        c = self.config.shaw_clip
        index = rel.clamp(-c, c) + c
        scores = (q @ k.transpose(-1, -2) +
                  torch.einsum("bhid,ijd->bhij", q, self.shaw_key[index])) / math.sqrt(q.shape[-1])
        p = torch.softmax(scores.masked_fill(rel > 0, float("-inf")), -1)
        return p @ v + torch.einsum("bhij,ijd->bhid", p, self.shaw_value[index])

    def _torch_linear(self, q, k, v, angle, visible):
        phi = lambda x: F.elu(x) + 1  # noqa: E731
        if self.encoding.linear_placement == "rope_before_feature_map":
            qf, kf = phi(rotate_half(q, angle)), phi(rotate_half(k, angle))
            numerator = denominator = (qf @ kf.transpose(-1, -2)) * visible
        else:
            qf, kf = phi(q), phi(k)
            denominator = (qf @ kf.transpose(-1, -2)) * visible
            numerator = (rotate_half(qf, angle) @ rotate_half(kf, angle).transpose(-1, -2)) * visible
        return (numerator @ v) / denominator.sum(-1, keepdim=True)


class Block(torch.nn.Module):
    def __init__(self, config: ModelConfig, encoding: Encoding):
        super().__init__()
        d = config.d_model
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.attn = PositionalAttention(config, encoding)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                       torch.nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class LanguageModel(torch.nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.encoding = ENCODINGS[config.encoding]
        d = config.d_model
        self.embed = torch.nn.Embedding(config.vocab, d)
        if self.encoding.absolute == "learned":
            # N(0, 1) as nn.Embedding's (the token table's scale); rows past the
            # training length get no gradient and stay at their initialisation.
            self.position_table = torch.nn.Parameter(torch.randn(config.max_eval, d))
        self.blocks = torch.nn.ModuleList(Block(config, self.encoding)
                                          for _ in range(config.layers))
        self.ln_f = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, config.vocab, bias=False)
        self.backend = "pejit"

    def set_backend(self, backend: str) -> "LanguageModel":
        if backend not in ("pejit", "torch"):
            raise ValueError(f"backend: expected pejit or torch, got {backend!r}")
        self.backend = backend
        for block in self.blocks:
            block.attn.backend = backend
        return self

    def set_eval_encoding(self, encoding: Encoding, length: int) -> None:
        """Evaluate as `encoding` (an evaluation-time RoPE scaling of this
        model's RoPE) at windows of `length` tokens."""
        for block in self.blocks:
            block.attn.encoding, block.attn.eval_length = encoding, length

    def positional_parameters(self) -> int:
        """Trainable parameters that belong to the positional encoding."""
        names = ("position_table", "t5_table", "shaw_key", "shaw_value", "rope_scale")
        return sum(p.numel() for n, p in self.named_parameters() if n.split(".")[-1] in names)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        s = tokens.shape[1]
        if self.encoding.absolute == "sinusoidal":
            x = self._sinusoidal(x)
        elif self.encoding.absolute == "learned":
            if s > self.position_table.shape[0]:
                raise ValueError(f"tokens: {s} positions, past the learned table's "
                                 f"{self.position_table.shape[0]} rows")
            x = (torch.ops.pejit.learned_positions(x, torch.arange(s), self.position_table)
                 if self.backend == "pejit" else x + self.position_table[:s])
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))

    def _sinusoidal(self, x):
        s, d = x.shape[1], x.shape[2]
        if self.backend == "pejit":
            return torch.ops.pejit.sinusoidal_positions(x, torch.arange(s), THETA)
        angle = torch.arange(s, dtype=torch.float64)[:, None] * inverse_frequencies(d)
        table = torch.stack([angle.sin(), angle.cos()], -1).reshape(s, d).float()
        return x + table


def loss_of(model: LanguageModel, tokens: torch.Tensor) -> torch.Tensor:
    """Mean next-byte cross entropy (nats) of tokens [b, s + 1]."""
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
