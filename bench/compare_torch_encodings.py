#!/usr/bin/env python3
"""PyTorch CPU peer for `pejit bench --encodings`.

What a user would write without pejit, at the same shapes (b=1, hq=hkv=16,
s=2048, fp32, d=64 and 128, causal and not):

- plain: torch.nn.functional.scaled_dot_product_attention.
- T5: HF transformers' T5Attention way: `_relative_position_bucket` of
  (key - query), the learned [num_buckets, h] table looked up into a float
  [1, h, s, s] bias, given to SDPA as attn_mask (causal: the mask folded
  into the bias, -inf above the diagonal). The bias build is timed with the
  attention, as one HF layer forward computes it.
- bias tensor: SDPA with a ready [1, h, s, s] float attn_mask.
- Shaw a^K + a^V (clip 16): the HF BERT `relative_key` way for the key
  term (relative embeddings gathered into [s, s, d], einsum with Q) and the
  same gather for the value term (einsum of P with [s, s, dv]), in eager
  matmul + softmax: SDPA takes no value term.

FLOPs = 4*b*hq*sq*skv*d (halved when causal), the count pejit's table uses.
Run bench/setup_torch_venv.sh first, then:
    bench/.venv/bin/python bench/compare_torch_encodings.py [--threads 2] [--repeats N]
"""

import argparse
import math

import torch

from bench_timing import median_ms

HEADS, SEQ, NUM_BUCKETS, MAX_DISTANCE, CLIP = 16, 2048, 32, 128, 16


def t5_bucket(relative, bidirectional, num_buckets=NUM_BUCKETS, max_distance=MAX_DISTANCE):
    """HF T5Attention._relative_position_bucket, on key - query."""
    buckets = torch.zeros_like(relative)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative > 0).to(torch.long) * num_buckets
        relative = torch.abs(relative)
    else:
        relative = -torch.min(relative, torch.zeros_like(relative))
    max_exact = num_buckets // 2
    is_small = relative < max_exact
    large = max_exact + (
        torch.log(relative.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative, large)


def relative_index(seq):
    pos = torch.arange(seq)
    return pos[None, :] - pos[:, None]  # key - query


def t5_attention(q, k, v, table, causal):
    rel = relative_index(q.shape[2])
    bias = table[t5_bucket(rel, bidirectional=not causal)].permute(2, 0, 1).unsqueeze(0)
    if causal:
        bias = bias.masked_fill(rel > 0, float("-inf"))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def shaw_attention(q, k, v, a_key, a_value, causal):
    s, d = q.shape[2], q.shape[3]
    rows = relative_index(s).clamp(-CLIP, CLIP) + CLIP
    rel_k, rel_v = a_key[rows], a_value[rows]  # [s, s, d]: HF BERT's distance embedding
    scores = q @ k.transpose(-1, -2) + torch.einsum("bhld,lrd->bhlr", q, rel_k)
    scores = scores / math.sqrt(d)
    if causal:
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.softmax(scores, dim=-1)
    return p @ v + torch.einsum("bhlr,lrd->bhld", p, rel_v)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(7)
    print(f"torch {torch.__version__} CPU, {args.threads} threads, b=1 hq=hkv={HEADS} s={SEQ} fp32")
    print("| d | mask | peer | ms | GFLOP/s |\n| ---: | --- | --- | ---: | ---: |")
    with torch.inference_mode():
        for d in (64, 128):
            q, k, v = (torch.rand(1, HEADS, SEQ, d) * 2 - 1 for _ in range(3))
            table = torch.rand(NUM_BUCKETS, HEADS) * 2 - 1
            bias = torch.rand(1, HEADS, SEQ, SEQ) * 2 - 1
            a_key, a_value = (torch.rand(2 * CLIP + 1, d) * 2 - 1 for _ in range(2))
            for causal in (False, True):
                gflop = 4.0 * HEADS * SEQ * SEQ * d * (0.5 if causal else 1.0) / 1e9
                sdpa = torch.nn.functional.scaled_dot_product_attention
                mask = bias
                if causal:
                    mask = bias.masked_fill(relative_index(SEQ) > 0, float("-inf"))
                rows = [
                    ("plain SDPA", lambda: sdpa(q, k, v, is_causal=causal)),
                    ("T5 bias built the HF way + SDPA", lambda: t5_attention(q, k, v, table, causal)),
                    ("SDPA with a [1, h, s, s] float attn_mask", lambda: sdpa(q, k, v, attn_mask=mask)),
                    ("Shaw a^K + a^V, clip 16 (eager, HF BERT way)",
                     lambda: shaw_attention(q, k, v, a_key, a_value, causal)),
                ]
                for name, fn in rows:
                    ms = median_ms(fn, args.repeats)
                    print(f"| {d} | {'causal' if causal else 'none'} | {name} | {ms:.1f} | "
                          f"{gflop / ms * 1e3:.1f} |", flush=True)


if __name__ == "__main__":
    main()
