#!/usr/bin/env python3
"""The standalone RoPE of `pejit bench --rope`, run by PyTorch in the same
run as pejit's.

LLaMA-3's RoPE (theta 500000, rotate_half), d = 128, 2 threads:

- pejit: `pejit bench --rope` (run first, as a subprocess; its table is
  printed as it is): Q [1, 32, 4096, 128] rotated out of place (f32,
  bf16) and in place (f32), and a decode step's KV-append of one K row
  [1, 8, 1, 128] into row t of a [1, 8, 4096, 128] cache.
- torch, HF's apply_rotary_pos_emb: q * cos + rotate_half(q) * sin.
  Timed two ways: with cos/sin given (computed once, outside the timing;
  the best case for torch), and as HF's model runs it, cos/sin formed per
  call from the positions (LlamaRotaryEmbedding.forward: fp32 positions x
  inv_freq, cat, cos, sin, cast to x's dtype). KV-append: the rotated row
  written into the cache slice, k_cache[:, :, t:t+1] = rotated.

Each torch result is checked against a float64 numpy reference first.
Reported: median ms over rounds, and the bytes moved (x read once, the
result written once) per second.

    bench/.venv/bin/python bench/compare_rope.py [--threads 2] [--pejit build/tools/pejit/pejit]
"""

import argparse
import subprocess

import numpy as np

from bench_timing import median_ms

THETA, D, HQ, HKV, S = 500000.0, 128, 32, 8, 4096


def inv_freq():
    return 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float64) / D)


def reference(x, positions):
    """float64 rotate_half RoPE of x [b, h, s, d] at positions [s]."""
    angles = positions.astype(np.float64)[:, None] * inv_freq()[None, :]
    cos = np.concatenate([np.cos(angles)] * 2, axis=-1)
    sin = np.concatenate([np.sin(angles)] * 2, axis=-1)
    x = x.astype(np.float64)
    rotated = np.concatenate([-x[..., D // 2:], x[..., : D // 2]], axis=-1)
    return x * cos + rotated * sin


def torch_cases(rounds):
    import torch

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    freq = torch.tensor(inv_freq(), dtype=torch.float32)

    def cos_sin(positions, dtype):  # LlamaRotaryEmbedding.forward
        freqs = positions.float()[:, None] * freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    rows = []
    rng = np.random.default_rng(7)
    for name, dtype, heads, seq, append in [
        ("prefill Q", torch.float32, HQ, S, False),
        ("prefill Q", torch.bfloat16, HQ, S, False),
        ("KV-append (decode row)", torch.float32, HKV, 1, True),
        ("KV-append (decode row)", torch.bfloat16, HKV, 1, True),
    ]:
        x64 = rng.uniform(-1, 1, (1, heads, seq, D))
        x = torch.tensor(x64, dtype=torch.float32).to(dtype)
        positions = torch.arange(S - 1, S) if append else torch.arange(seq)
        cos, sin = cos_sin(positions, dtype)
        cache = torch.zeros(1, HKV, S, D, dtype=dtype)
        t = S - 1

        def given():
            out = x * cos + rotate_half(x) * sin
            if append:
                cache[:, :, t:t + 1] = out
            return out

        def hf():
            c, s_ = cos_sin(positions, dtype)
            out = x * c + rotate_half(x) * s_
            if append:
                cache[:, :, t:t + 1] = out
            return out

        expected = reference(x.float().numpy(), positions.numpy())
        got = hf().float().numpy()
        err = np.abs(got - expected).max() / np.abs(expected).max()
        # f32 angles: position x inv_freq rounded in f32 (about 2e-4 at
        # position 4095), the error pejit's float64 angles avoid.
        if err > (1e-3 if dtype == torch.float32 else 2e-2):
            raise SystemExit(f"torch {name} differs from float64: {err:.3g}")
        unit = 4 if dtype == torch.float32 else 2
        moved = 2.0 * heads * seq * D * unit
        for how, fn in [("cos/sin given", given), ("HF, cos/sin per call", hf)]:
            ms = median_ms(fn, rounds * (50 if append else 1))
            rows.append((name, "f32" if dtype == torch.float32 else "bf16", how, ms,
                         moved / (ms * 1e-3) / 1e9, err))
    return torch.__version__, rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--pejit", default="build/tools/pejit/pejit")
    parser.add_argument("--peers-only", action="store_true", help="skip the pejit bench")
    args = parser.parse_args()
    if not args.peers_only:
        print("## pejit (`pejit bench --rope`)\n", flush=True)
        subprocess.run([args.pejit, "bench", "--rope", f"--repeats={args.rounds}"], check=True)
    import torch

    torch.set_num_threads(args.threads)
    version, rows = torch_cases(args.rounds)
    print(f"## torch {version}, same run: HF apply_rotary_pos_emb (rotate_half)\n")
    print("| case | dtype | cos/sin | median ms | GB/s moved | float64 check (rel. error) |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for name, dtype, how, ms, gbs, err in rows:
        print(f"| {name} | {dtype} | {how} | {ms:.4f} | {gbs:.1f} | {err:.1e} |")


if __name__ == "__main__":
    main()
