"""An HF-style Llama attention layer, with its RoPE + SDPA replaced by one
fused pejit.attention call; checked against the torch original and timed
against it.

    python examples/python/llama_layer.py [--seq 1024] [--config CONFIG.json]

The RoPE settings come from a model's config.json (default: Llama 3.1's,
llama3 scaling); the layer is narrower than the model (8 query heads, 2
key/value heads, head dim 128) so that it runs in seconds on a laptop CPU.
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.nn.functional as F

import pejit
import pejit.torch

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(HERE, "..", "..", "tests", "data", "hf_configs", "llama-3.1-8b.json")


def llama3_inv_freq(rope: pejit.RopeConfig, head_dim: int) -> torch.Tensor:
    """HF's _compute_llama3_parameters, written out."""
    inv = 1.0 / (rope.theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    if rope.scaling != "llama3":
        return inv
    low_wavelen = rope.original_max_position / rope.low_freq_factor
    high_wavelen = rope.original_max_position / rope.high_freq_factor
    wavelen = 2 * math.pi / inv
    smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) / (
        rope.high_freq_factor - rope.low_freq_factor)
    scaled = torch.where(wavelen > low_wavelen, inv / rope.factor, inv)
    mid = (wavelen <= low_wavelen) & (wavelen >= high_wavelen)
    return torch.where(mid, (1 - smooth) * inv / rope.factor + smooth * inv, scaled)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(torch.nn.Module):
    """The HF structure: projections, RoPE (cos/sin tables, rotate_half),
    repeat_kv by SDPA's GQA, causal SDPA, output projection."""

    def __init__(self, hidden, heads, kv_heads, head_dim, rope: pejit.RopeConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = torch.nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.v_proj = torch.nn.Linear(hidden, kv_heads * head_dim, bias=False)
        self.o_proj = torch.nn.Linear(heads * head_dim, hidden, bias=False)
        self.register_buffer("inv_freq", llama3_inv_freq(rope, head_dim).float())
        self.pejit_attention = pejit.torch.Attention(rope=rope, causal=True)

    def project(self, x):
        b, s, _ = x.shape
        # [b, s, h, d] viewed as [b, h, s, d]: pejit reads the strided view.
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def attention_torch(self, q, k, v):
        """HF's way: cos/sin tables, rotate_half on Q and K, then SDPA."""
        positions = torch.arange(q.shape[2], dtype=torch.float32)
        freqs = torch.outer(positions, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    def forward_torch(self, x):
        o = self.attention_torch(*self.project(x))
        return self.o_proj(o.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))

    def forward_pejit(self, x):
        q, k, v = self.project(x)
        o = self.pejit_attention(q, k, v)  # RoPE + causal attention, one fused kernel
        return self.o_proj(o.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))


def interleaved_medians(fns, rounds):
    """Median ms of each function, timed in interleaved rounds (one call of
    each per round, after one warm-up call each): a slow phase of the host
    then costs every variant alike instead of whichever ran during it."""
    for fn in fns.values():
        fn()  # warm-up (pejit compiles here, or loads from its disk cache)
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved timing rounds")
    args = parser.parse_args()
    rope = pejit.from_hf_config(args.config).rope
    torch.manual_seed(0)
    layer = LlamaAttention(hidden=1024, heads=8, kv_heads=2, head_dim=128, rope=rope).eval()
    x = torch.randn(1, args.seq, 1024)
    with torch.no_grad():
        expected = layer.forward_torch(x)
        got = layer.forward_pejit(x)
        error = ((got - expected).abs().max() / expected.abs().max()).item()
        q, k, v = layer.project(x)

        def projections():
            o = layer.project(x)[0]
            return layer.o_proj(o.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))

        t = interleaved_medians({
            "layer torch": lambda: layer.forward_torch(x),
            "layer pejit": lambda: layer.forward_pejit(x),
            "attention torch": lambda: layer.attention_torch(q, k, v),
            "attention pejit": lambda: layer.pejit_attention(q, k, v),
            "projections": projections,
        }, args.repeats)
    print(f"config: {os.path.relpath(args.config)} (RoPE {rope.scaling}, theta {rope.theta})")
    print(f"layer: hidden 1024, 8/2 heads, head dim 128, seq {args.seq}, "
          f"{torch.get_num_threads()} torch threads")
    print(f"pejit vs torch (HF RoPE + SDPA): max relative difference {error:.2e}")
    print(f"median of {args.repeats} interleaved rounds:")
    print(f"  projections (the same torch code in both): {t['projections']:.2f} ms")
    print(f"  RoPE + attention alone: torch {t['attention torch']:.2f} ms, "
          f"pejit {t['attention pejit']:.2f} ms "
          f"({t['attention torch'] / t['attention pejit']:.2f}x)")
    print(f"  whole layer: torch {t['layer torch']:.2f} ms, pejit {t['layer pejit']:.2f} ms "
          f"({t['layer torch'] / t['layer pejit']:.2f}x)")
    # The layers differ only in their attention: their difference should be
    # the attention's, within the host's noise.
    print(f"  torch - pejit: layer {t['layer torch'] - t['layer pejit']:+.2f} ms, "
          f"attention {t['attention torch'] - t['attention pejit']:+.2f} ms")
    # HF forms its angles in f32, pejit in float64: at seq 1024 the two
    # differ by up to ~1e-4 rad, so the check allows 1e-3.
    if error > 1e-3:
        raise SystemExit(f"pejit and torch differ by {error:.2e} (more than 1e-3)")


if __name__ == "__main__":
    main()
