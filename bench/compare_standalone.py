#!/usr/bin/env python3
"""The standalone kernels of `pejit bench --standalone`, run by PyTorch in
the same run as pejit's (pejit first, as a subprocess; its table is printed
as it is), 2 threads, f32:

- BERT embeddings: HF BertEmbeddings' word + position part,
  embedding(tokens) + position_embeddings(arange(s)), tokens [8, 512] into
  30522 x 768.
- Transformer embeddings: embedding(tokens) * sqrt(512) + pe[:s], with the
  sinusoidal table pe computed once outside the timing (as the annotated
  Transformer keeps it in a buffer: the best case for torch).
- ALiBi [1, 16, 2048, 2048], causal form -slope_h * (i - j) (j - i times
  the slope): the tensor a user materializes for an attn_mask.
- T5 [1, 16, 2048, 2048]: HF T5Attention.compute_bias (bidirectional,
  32 buckets, max distance 128).

Each torch result is checked first against pejit's semantics
(docs/semantics.md) computed in float64 numpy on a small shape. Reported:
median ms over rounds.

    python bench/compare_standalone.py [--threads 2] [--pejit build/tools/pejit/pejit]
"""

import argparse
import math
import subprocess

import numpy as np

from bench_timing import median_ms


def check(got, want, tolerance):
    """max |got - want| / max |want| within tolerance (f32 against float64)."""
    rel = np.abs(got - want).max() / np.abs(want).max()
    assert rel <= tolerance, rel


def alibi_slopes(heads):
    # Power-of-two head counts: 2^(-8 h / n), h = 1..n (docs/semantics.md).
    return np.array([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)])


def t5_bucket_reference(delta, buckets=32, max_distance=128):
    """docs/semantics.md's bidirectional T5 bucket of j - i, float64."""
    half = buckets // 2
    out = np.where(delta > 0, half, 0)
    n = np.abs(delta)
    exact = half // 2
    large = exact + np.floor(
        np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact))
    large = np.minimum(large, half - 1)
    return out + np.where(n < exact, n, large).astype(np.int64)


def torch_cases(rounds):
    import torch

    results = {}
    gen = torch.Generator().manual_seed(3)

    words = torch.rand(30522, 768, generator=gen) * 2 - 1
    table = torch.rand(512, 768, generator=gen) * 2 - 1
    tokens = torch.randint(0, 30522, (8, 512), generator=gen)
    pos = torch.arange(512)

    def bert():
        return torch.nn.functional.embedding(tokens, words) + torch.nn.functional.embedding(pos, table)

    got = bert()
    want = words.numpy()[tokens.numpy()] + table.numpy()[None]
    check(got.numpy(), want, 1e-6)
    results["BERT embeddings"] = median_ms(bert, rounds)

    words2 = torch.rand(37000, 512, generator=gen) * 2 - 1
    tokens2 = torch.randint(0, 37000, (8, 512), generator=gen)
    channel = np.arange(512)
    angle = np.arange(512)[:, None] / 10000.0 ** ((channel - channel % 2)[None, :] / 512)
    pe_np = np.where(channel % 2 == 0, np.sin(angle), np.cos(angle))
    pe = torch.from_numpy(pe_np.astype(np.float32))
    scale = math.sqrt(512)

    def transformer():
        return torch.nn.functional.embedding(tokens2, words2) * scale + pe

    got = transformer()
    want = words2.numpy()[tokens2.numpy()].astype(np.float64) * scale + pe_np[None]
    check(got.numpy(), want, 1e-6)
    results["Transformer embeddings"] = median_ms(transformer, rounds)

    heads, s = 16, 2048
    slopes = torch.from_numpy(alibi_slopes(heads).astype(np.float32))

    def alibi(n=s):
        i = torch.arange(n)[:, None]
        j = torch.arange(n)[None, :]
        return (j - i).float()[None, None] * slopes[None, :, None, None]

    small = alibi(37).numpy()
    d = np.arange(37)[None, :] - np.arange(37)[:, None]
    check(small, d[None, None] * alibi_slopes(heads)[None, :, None, None], 1e-6)
    results["ALiBi bias"] = median_ms(alibi, rounds)

    t5_table = torch.rand(32, heads, generator=gen)

    def t5(n=s):
        # HF T5Attention._relative_position_bucket + compute_bias.
        context = torch.arange(n)[:, None]
        memory = torch.arange(n)[None, :]
        rel = memory - context
        half = 16
        bucket = (rel > 0).long() * half
        rel = rel.abs()
        exact = half // 2
        is_small = rel < exact
        large = exact + (torch.log(rel.float() / exact) / math.log(128 / exact)
                         * (half - exact)).long()
        large = torch.min(large, torch.full_like(large, half - 1))
        bucket = bucket + torch.where(is_small, rel, large)
        values = torch.nn.functional.embedding(bucket, t5_table)  # [q, k, h]
        return values.permute(2, 0, 1).unsqueeze(0)

    small = t5(200).numpy()
    delta = np.arange(200)[None, :] - np.arange(200)[:, None]
    want = t5_table.numpy()[t5_bucket_reference(delta)].transpose(2, 0, 1)[None]
    check(small, want, 1e-6)
    results["T5 bias"] = median_ms(t5, rounds)
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--pejit", default="build/tools/pejit/pejit")
    args = parser.parse_args()
    run = subprocess.run([args.pejit, "bench", "--standalone", f"--repeats={args.rounds}"],
                         capture_output=True, text=True, check=True)
    print(run.stdout)
    import torch

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} threads\n")
    print("| case | torch ms |\n| --- | ---: |")
    for name, ms in torch_cases(args.rounds).items():
        print(f"| {name} | {ms:.3f} |")


if __name__ == "__main__":
    main()
