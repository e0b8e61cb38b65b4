#!/usr/bin/env python3
"""PyTorch CPU peers for `pejit bench --linear` (same shapes: b=1, h=4, f32,
causal, RoPE theta 10000, d = dv = 64 and 128, s = 2048, 8192, 32768).

- softmax: HF-style RoPE (rotate_half) on Q and K, then
  scaled_dot_product_attention(is_causal=True): what a user writes today.
- linear: causal linear attention with elu+1 and RoPE on the numerator
  (RoFormer sec. 3.3), written the way a PyTorch user would without a
  fused kernel: chunks of 64 rows, the state carried across chunks
  (S += phi(k)^T v as a matmul per chunk), the within-chunk part a masked
  64 x 64 matmul. Checked against the quadratic form at s = 256 first.

Times are medians after a warm-up; s = 32768 softmax runs once.

    bench/.venv/bin/python bench/compare_linear.py [--threads 2]
"""

import argparse

import torch
import torch.nn.functional as F

from bench_timing import median_ms


def rope_tables(s, d, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.arange(s, dtype=torch.float64)[:, None] * inv[None, :]
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def softmax_attention(q, k, v, cos, sin):
    return F.scaled_dot_product_attention(rope(q, cos, sin), rope(k, cos, sin), v, is_causal=True)


def phi(x):
    return F.elu(x) + 1.0


def linear_attention(q, k, v, cos, sin, chunk=64):
    pq, pk = phi(q), phi(k)
    nq, nk = rope(pq, cos, sin), rope(pk, cos, sin)  # numerator sides
    b, h, s, d = q.shape
    dv = v.shape[-1]
    state = q.new_zeros(b, h, d, dv)
    norm = q.new_zeros(b, h, d)
    out = torch.empty(b, h, s, dv, dtype=q.dtype)
    mask = torch.ones(chunk, chunk, dtype=q.dtype).tril()
    for c0 in range(0, s, chunk):
        c1 = min(c0 + chunk, s)
        m = mask[: c1 - c0, : c1 - c0]
        qn, kn, qd, kd, vc = nq[..., c0:c1, :], nk[..., c0:c1, :], pq[..., c0:c1, :], pk[..., c0:c1, :], v[..., c0:c1, :]
        num = qn @ state + ((qn @ kn.transpose(-1, -2)) * m) @ vc
        den = (qd @ norm[..., None]).squeeze(-1) + ((qd @ kd.transpose(-1, -2)) * m).sum(-1)
        out[..., c0:c1, :] = torch.where(den[..., None] == 0, 0.0, num / den[..., None])
        state = state + kn.transpose(-1, -2) @ vc
        norm = norm + kd.sum(-2)
    return out


def quadratic_linear(q, k, v, cos, sin):
    pq, pk = phi(q), phi(k)
    nq, nk = rope(pq, cos, sin), rope(pk, cos, sin)
    s = q.shape[-2]
    m = torch.ones(s, s).tril()
    num = ((nq @ nk.transpose(-1, -2)) * m) @ v
    den = ((pq @ pk.transpose(-1, -2)) * m).sum(-1)
    return num / den[..., None]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    # The chunked form is the quadratic one.
    q, k, v = (torch.randn(1, 2, 256, 32) for _ in range(3))
    cos, sin = rope_tables(256, 32)
    err = (linear_attention(q, k, v, cos, sin) - quadratic_linear(q, k, v, cos, sin)).abs().max()
    assert err < 1e-4, err
    print(f"torch {torch.__version__}, {args.threads} threads; b=1 h=4 f32 causal\n")
    print("| d | s | torch kernel | ms |\n| ---: | ---: | --- | ---: |")
    h = 4
    for d in (64, 128):
        for s in (2048, 8192, 32768):
            q, k, v = (torch.rand(1, h, s, d) * 2 - 1 for _ in range(3))
            cos, sin = rope_tables(s, d)
            with torch.no_grad():
                lin = median_ms(lambda: linear_attention(q, k, v, cos, sin), args.repeats)
                soft = median_ms(lambda: softmax_attention(q, k, v, cos, sin),
                                 1 if s > 8192 else args.repeats)
            print(f"| {d} | {s} | linear, chunked (elu+1, RoPE on numerator) | {lin:.1f} |")
            print(f"| {d} | {s} | HF RoPE + SDPA causal | {soft:.1f} |", flush=True)


if __name__ == "__main__":
    main()
