#!/usr/bin/env python3
"""The seed's position modules in training (issue 38): forward + backward
of each pejit.torch module against the same module written in plain torch,
in the same run, at the issue's sizes, f32 and bf16, 2 threads:

  rope         RotaryPositionEmbedding on x [1, 32, 4096, 128]
               (torch: HF's rotate_half with cos/sin formed per call)
  learned      LearnablePositionalEmbedding on x [8, 512, 768], 1024 rows
               (torch: x + nn.Embedding(positions))
  sinusoidal   SinusoidalPositionalEncoding on x [8, 512, 768]
               (torch: x + a precomputed table's rows)
  embedding    Embedding (the token gather) [8, 512] of a [32000, 768] table
               (torch: nn.Embedding)

Each row: median ms of forward + backward (loss = sum(y * dy), dy fixed),
and the backward alone (its input's and its parameters' gradients), with
the backward's bytes (the gradient read, each gradient written) per
second against the read bandwidth measured in this run (a large f32 sum).
Through autograd every gradient is a fresh tensor, whose first touch
(page faults) both sides pay; a second table times pejit's backward
kernels alone, writing into preallocated buffers.

    python bench/compare_torch_modules.py [--repeats 10] [--only rope,learned]
"""
import argparse
import platform
import time

import torch

import pejit
import pejit.torch
from bench_timing import median_ms


def read_bandwidth_gbs(repeats=5):
    """GB/s of torch summing 512 MiB of f32 (read once): the read bandwidth."""
    x = torch.ones(128 * 1024 * 1024)
    ms = median_ms(lambda: x.sum(), repeats)
    return x.numel() * 4 / ms / 1e6


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class TorchRope(torch.nn.Module):
    """HF's apply_rotary_pos_emb, cos/sin formed per call (LlamaRotaryEmbedding)."""

    def __init__(self, dim, base=10000.0):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / base ** (torch.arange(0, dim, 2).float() / dim))

    def forward(self, x):
        positions = torch.arange(x.shape[2], dtype=torch.float32)
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        return x * cos + rotate_half(x) * sin


class TorchLearned(torch.nn.Module):
    def __init__(self, d, rows):
        super().__init__()
        self.position_embeddings = torch.nn.Embedding(rows, d)

    def forward(self, x):
        return x + self.position_embeddings(torch.arange(x.shape[1]))


class TorchSinusoidal(torch.nn.Module):
    def __init__(self, d, max_len=5000):
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float32)[:, None]
        div = torch.exp(torch.arange(0, d, 2).float() * (-torch.log(torch.tensor(10000.0)) / d))
        table = torch.zeros(max_len, d)
        table[:, 0::2], table[:, 1::2] = torch.sin(position * div), torch.cos(position * div)
        self.register_buffer("table", table)

    def forward(self, x):
        return x + self.table[: x.shape[1]].to(x.dtype)


def cases(dtype):
    """(name, input maker, pejit module, torch module, backward bytes)."""
    size = lambda *shape: torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
    return [
        ("rope [1, 32, 4096, 128]", lambda: torch.randn(1, 32, 4096, 128).to(dtype),
         pejit.torch.RotaryPositionEmbedding(128), TorchRope(128),
         2 * size(1, 32, 4096, 128)),
        ("learned [8, 512, 768]", lambda: torch.randn(8, 512, 768).to(dtype),
         pejit.torch.LearnablePositionalEmbedding(768, 1024).to(dtype),
         TorchLearned(768, 1024).to(dtype), size(8, 512, 768) + size(1024, 768)),
        ("sinusoidal [8, 512, 768]", lambda: torch.randn(8, 512, 768).to(dtype),
         pejit.torch.SinusoidalPositionalEncoding(768), TorchSinusoidal(768),
         0),
        ("embedding [8, 512] of [32000, 768]", lambda: torch.randint(0, 32000, (8, 512)),
         pejit.torch.Embedding(32000, 768).to(dtype), torch.nn.Embedding(32000, 768).to(dtype),
         size(8, 512, 768) + size(32000, 768)),
    ]


def time_module(module, make_input, repeats):
    x = make_input()
    floating = x.is_floating_point()
    if floating:
        x.requires_grad_()
    y = module(x)
    dy = torch.randn(y.shape).to(y.dtype)

    def step():
        module.zero_grad(set_to_none=True)
        if floating:
            x.grad = None
        module(x).backward(dy)

    def backward_only():
        module.zero_grad(set_to_none=True)
        if floating:
            x.grad = None
        out = module(x)
        start = time.perf_counter()
        out.backward(dy)
        return (time.perf_counter() - start) * 1e3

    total = median_ms(step, repeats)
    backward_only()
    backward = sorted(backward_only() for _ in range(repeats))[repeats // 2]
    return total, backward


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    torch.set_num_threads(2)
    bandwidth = read_bandwidth_gbs()
    print(f"CPU: {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"2 threads, read bandwidth {bandwidth:.1f} GB/s (torch f32 sum of 512 MiB)\n")
    print("| module | dtype | pejit fwd+bwd ms | torch fwd+bwd ms | pejit bwd ms | torch bwd ms "
          "| pejit bwd GB/s (% of read bw) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for dtype in (torch.float32, torch.bfloat16):
        for name, make_input, ours, theirs, nbytes in cases(dtype):
            if args.only and name.split()[0] not in args.only.split(","):
                continue
            p_total, p_backward = time_module(ours, make_input, args.repeats)
            t_total, t_backward = time_module(theirs, make_input, args.repeats)
            rate = (f"{nbytes / p_backward / 1e6:.1f} ({100 * nbytes / p_backward / 1e6 / bandwidth:.0f}%)"
                    if nbytes else "pass-through")
            print(f"| {name} | {str(dtype).split('.')[-1]} | {p_total:.2f} | {t_total:.2f} | "
                  f"{p_backward:.2f} | {t_backward:.2f} | {rate} |", flush=True)
    kernels_alone(bandwidth, args.repeats)


def kernels_alone(bandwidth, repeats):
    """pejit's backward kernels writing into preallocated buffers."""
    print("\n| backward kernel, preallocated output | dtype | ms | GB/s (% of read bw) |")
    print("| --- | --- | --- | --- |")
    for dtype in (torch.float32, torch.bfloat16):
        size = torch.empty((), dtype=dtype).element_size()
        x = torch.randn(1, 32, 4096, 128).to(dtype)
        out = torch.empty_like(x)
        positions = torch.arange(4096)
        grad = torch.randn(8, 512, 768).to(dtype)
        tokens = torch.randint(0, 32000, (8, 512))
        tables = {1024: torch.empty(1024, 768, dtype=dtype), 32000: torch.empty(32000, 768, dtype=dtype)}
        rows = [("pejit.rope_backward [1, 32, 4096, 128]",
                 lambda: pejit.rope_backward(x, positions, True, out=out), 2 * x.numel() * size),
                ("pejit.embedding_backward [8, 512, 768] by position, 1024 rows",
                 lambda: pejit.embedding_backward(grad, torch.arange(512), 1024, out=tables[1024]),
                 (grad.numel() + 1024 * 768) * size),
                ("pejit.embedding_backward [8, 512, 768] by token, 32000 rows",
                 lambda: pejit.embedding_backward(grad, tokens, 32000, out=tables[32000]),
                 (grad.numel() + 32000 * 768) * size)]
        for name, fn, nbytes in rows:
            ms = median_ms(fn, repeats)
            gbs = nbytes / ms / 1e6
            print(f"| {name} | {str(dtype).split('.')[-1]} | {ms:.2f} | {gbs:.1f} "
                  f"({100 * gbs / bandwidth:.0f}%) |", flush=True)


if __name__ == "__main__":
    main()
