#!/usr/bin/env python3
"""Linear attention in training (issue 38): forward + backward through
torch autograd of pejit's op (torch.ops.pejit.linear_attention, its
backward the derived kernel) against the same attention in plain torch, in
the same run, b = 1, h = 8, d = dv = 64, s = 8192 (and 2048), f32 and bf16,
2 threads:

  seed      the seed's LinearAttentionWithRoPE core: RoPE on q and k, K
            softmaxed over the sequence, two einsums (not causal;
            feature_map softmax_keys); torch: that code
  causal    elu + 1, causal, RoPE on the numerator; torch: the chunked
            form a user writes (bench/compare_linear.py, chunks of 64)

Each row: median ms of forward + backward (loss = sum(o * do), do fixed),
then pejit's backward kernel alone (pejit.linear_attention_backward) with
its GFLOP/s, counting 2 d dv FLOPs per state update or read: per query
head 3 per row (S += k v^T, S g, T += q g^T), per KV head 2 per key (T v,
T^T k), and the fraction of the f32 FMA peak this run measures
(build/bench/pejit-peak-fma, all threads, the host's widest vectors).

    python bench/compare_linear_backward.py [--repeats 3] [--lengths 8192]
"""
import argparse
import platform
import re
import subprocess

import torch

import pejit
import pejit.torch
from bench_timing import median_ms
from compare_linear import linear_attention as torch_chunked
from compare_linear import rope, rope_tables


def fma_peak_gflops(threads):
    """The measured f32 FMA peak at `threads` threads (pejit-peak-fma)."""
    try:
        text = subprocess.run(["build/bench/pejit-peak-fma"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    found = re.search(rf"{threads} threads?\s*:\s*([0-9.]+) GFLOP/s", text)
    return float(found.group(1)) if found else None


def torch_seed(q, k, v, cos, sin):
    k = rope(k, cos, sin).softmax(dim=-2)
    context = torch.einsum("bhnd,bhne->bhde", k, v)
    return torch.einsum("bhnd,bhde->bhne", rope(q, cos, sin), context)


def forms():
    """(name, pejit options, torch function of (q, k, v, cos, sin))."""
    return [("seed (softmax_keys, RoPE before)",
             dict(feature_map="softmax_keys", causal=False, rope=True,
                  rope_placement="rope_before_feature_map"), torch_seed),
            ("causal (elu+1, RoPE on numerator)",
             dict(feature_map="elu_plus_one", causal=True, rope=True,
                  rope_placement="rope_on_numerator"), torch_chunked)]


def fwd_bwd_ms(fn, inputs, do, repeats):
    def step():
        leaves = [x.detach().requires_grad_() for x in inputs]
        out = fn(*leaves)
        (out.float() * do).sum().backward()
    return median_ms(step, repeats)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lengths", default="2048,8192")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    peak = fma_peak_gflops(args.threads)
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{args.threads} threads, f32 FMA peak {peak} GFLOP/s; b=1 h=8 d=dv=64\n")
    print("| form | s | dtype | pejit fwd+bwd ms | torch fwd+bwd ms | pejit bwd kernel ms "
          "| GFLOP/s | % peak |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    b, h, d = 1, 8, 64
    for s in (int(n) for n in args.lengths.split(",")):
        cos, sin = rope_tables(s, d)
        ids = torch.arange(s)
        g = torch.Generator().manual_seed(0)
        for dtype in (torch.float32, torch.bfloat16):
            q, k, v = (torch.randn(b, h, s, d, generator=g).to(dtype) * 0.5 for _ in range(3))
            do = torch.randn(b, h, s, d, generator=g)
            for name, options, reference in forms():
                def ours(q, k, v):
                    return pejit.torch.linear_attention(q, k, v, q_positions=ids,
                                                        k_positions=ids, **options)

                def theirs(q, k, v):
                    return reference(q, k, v, cos.to(q.dtype), sin.to(q.dtype))

                mine = fwd_bwd_ms(ours, (q, k, v), do, args.repeats)
                peer = fwd_bwd_ms(theirs, (q, k, v), do, args.repeats)
                o = pejit.linear_attention(q, k, v, q_positions=ids, k_positions=ids, **options)
                dot = do.to(dtype)
                alone = median_ms(lambda: pejit.linear_attention_backward(
                    q, k, v, o, dot, q_positions=ids, k_positions=ids, **options), args.repeats)
                flops = 2 * d * d * s * (3 * h + 2 * h)
                gflops = flops / alone / 1e6
                share = f"{100 * gflops / peak:.0f}%" if peak else "n/a"
                print(f"| {name} | {s} | {str(dtype).split('.')[-1]} | {mine:.1f} | {peer:.1f} "
                      f"| {alone:.1f} | {gflops:.1f} | {share} |", flush=True)


if __name__ == "__main__":
    main()
