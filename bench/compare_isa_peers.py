#!/usr/bin/env python3
"""The peers of `pejit bench --isa`, in the same cases, timed in the same run
(run this right after it, with nothing else busy).

Cases (d = 128, RoPE rotate_half, theta 10000):

- prefill-2048-causal, prefill-4096-causal: b = 1, 16 heads, s = sq = skv.
- decode-2048, decode-32768: one new token, 32 query heads on 8 KV heads,
  over a cache of that many keys.

Peers, as users run them:

- torch, f32 and bf16: HF RoPE (LlamaRotaryEmbedding's cos/sin of
  cat(freqs, freqs), apply_rotary_pos_emb) inside the timed region, then
  `scaled_dot_product_attention` (is_causal for prefill; enable_gqa for
  decode, whose cache holds K already rotated: RoPE on the new query only).
- ONNX Runtime, f32 (its CPU GroupQueryAttention takes float): the
  com.microsoft GroupQueryAttention op with do_rotary = 1, which rotates q
  and k with the cos/sin caches and attends; prefill as a prompt of s
  tokens, decode as one token appended to the cache (past and present share
  one buffer through IO binding).

Each peer path is checked first against a float64 numpy reference at a small
size. Reported: the median of --repeats runs after a warm-up, ms and GFLOP/s
(4 b hq sq skv d, causal halved), as `pejit bench --isa` counts them.

    python bench/compare_isa_peers.py [--threads 2] [--repeats 5]
"""

import argparse

import numpy as np
from bench_timing import median_ms
# GroupQueryAttention with rotary; D = 128 there too.
from compare_decode import gqa_model

D, THETA = 128, 10000.0
CASES = [  # name, heads, kv heads, sq, skv, causal
    ("prefill-2048-causal", 16, 16, 2048, 2048, True),
    ("prefill-4096-causal", 16, 16, 4096, 4096, True),
    ("decode-2048 (32/8 heads)", 32, 8, 1, 2048, False),
    ("decode-32768 (32/8 heads)", 32, 8, 1, 32768, False),
]


def inv_freq():
    return 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float64) / D)


def rope_f64(x, positions):
    """x [h, s, D] rotated at positions [s] (rotate_half), float64."""
    angle = positions[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle), np.sin(angle)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


def attention_f64(q, k, v, causal):
    """q [hq, sq, D], k, v [hkv, skv, D]: softmax(q k^T / sqrt(D)) v, GQA,
    causal aligned bottom-right."""
    hq, sq, skv = q.shape[0], q.shape[1], k.shape[1]
    group = hq // k.shape[0]
    out = np.empty((hq, sq, D))
    for h in range(hq):
        s = q[h] @ k[h // group].T / np.sqrt(D)
        if causal:
            s = np.where(np.arange(skv)[None] <= np.arange(sq)[:, None] + skv - sq, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ v[h // group]
    return out


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def torch_case(torch, heads, kv_heads, sq, skv, causal, dtype):
    """The torch run of one case and its inputs (float32 numpy copies)."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-1, 1, (1, heads, sq, D)).astype(np.float32)
    k = rng.uniform(-1, 1, (1, kv_heads, skv, D)).astype(np.float32)
    v = rng.uniform(-1, 1, (1, kv_heads, skv, D)).astype(np.float32)
    tq, tk, tv = (torch.from_numpy(x).to(dtype) for x in (q, k, v))
    freq = torch.from_numpy(inv_freq().astype(np.float32))
    decode = sq == 1

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def run():
        positions = torch.arange(skv - sq, skv, dtype=torch.float32)
        angle = positions[:, None] * freq[None]
        emb = torch.cat((angle, angle), dim=-1)
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        qr = tq * cos + rotate_half(tq) * sin
        if decode:  # the cache holds K rotated
            return torch.nn.functional.scaled_dot_product_attention(qr, tk, tv, enable_gqa=True)
        kr = tk * cos + rotate_half(tk) * sin
        return torch.nn.functional.scaled_dot_product_attention(qr, kr, tv, is_causal=causal)

    def reference():
        qr = rope_f64(q[0].astype(np.float64), np.arange(skv - sq, skv, dtype=np.float64))
        kr = k[0].astype(np.float64)
        if not decode:
            kr = rope_f64(kr, np.arange(skv, dtype=np.float64))
        return attention_f64(qr, kr, v[0].astype(np.float64), causal)

    return run, reference


def ort_case(ort, onnx, helper, threads, heads, kv_heads, sq, skv, causal):
    """ONNX Runtime's run of one case: sq new tokens after skv - sq cached
    ones (always causal, as GroupQueryAttention is)."""
    rng = np.random.default_rng(2)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(gqa_model(onnx, helper, capacity=skv, heads=heads,
                                             kv_heads=kv_heads, tokens=sq), options,
                                   providers=["CPUExecutionProvider"])
    past = skv - sq
    cache_k = np.zeros((1, kv_heads, skv, D), dtype=np.float32)
    cache_v = np.zeros((1, kv_heads, skv, D), dtype=np.float32)
    cache_k[:, :, :past] = rng.uniform(-1, 1, (1, kv_heads, past, D))  # K rotated when appended
    cache_v[:, :, :past] = rng.uniform(-1, 1, (1, kv_heads, past, D))
    q = rng.uniform(-1, 1, (1, sq, heads * D)).astype(np.float32)
    k = rng.uniform(-1, 1, (1, sq, kv_heads * D)).astype(np.float32)
    v = rng.uniform(-1, 1, (1, sq, kv_heads * D)).astype(np.float32)
    angle = np.arange(skv)[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    past_k = ort.OrtValue.ortvalue_from_numpy(cache_k)
    past_v = ort.OrtValue.ortvalue_from_numpy(cache_v)
    out = ort.OrtValue.ortvalue_from_numpy(np.empty((1, sq, heads * D), dtype=np.float32))
    binding = session.io_binding()
    for name, value in (("query", q), ("key", k), ("value", v), ("cos_cache", cos),
                        ("sin_cache", sin), ("seqlens_k", np.array([skv - 1], dtype=np.int32)),
                        ("total_sequence_length", np.array(skv, dtype=np.int32))):
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_input("past_key", past_k)
    binding.bind_ortvalue_input("past_value", past_v)
    binding.bind_ortvalue_output("output", out)
    binding.bind_ortvalue_output("present_key", past_k)
    binding.bind_ortvalue_output("present_value", past_v)

    def run():
        session.run_with_iobinding(binding)

    def reference():
        positions = np.arange(past, skv, dtype=np.float64)
        qr = rope_f64(q[0].reshape(sq, heads, D).transpose(1, 0, 2).astype(np.float64), positions)
        kn = rope_f64(k[0].reshape(sq, kv_heads, D).transpose(1, 0, 2).astype(np.float64),
                      positions)
        kk = np.concatenate((cache_k[0, :, :past].astype(np.float64), kn), axis=1)
        vv = np.concatenate((cache_v[0, :, :past].astype(np.float64),
                             v[0].reshape(sq, kv_heads, D).transpose(1, 0, 2)), axis=1)
        return attention_f64(qr, kk, vv, True)

    def output():
        return out.numpy()[0].reshape(sq, heads, D).transpose(1, 0, 2)

    return run, reference, output


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import onnx
    import onnxruntime as ort
    import torch
    from onnx import helper

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, ONNX Runtime {ort.__version__}, {args.threads} threads\n")
    print("| peer | dtype | case | ms | GFLOP/s | check (rel. err.) |")
    print("| --- | --- | --- | ---: | ---: | ---: |")
    for name, heads, kv_heads, sq, skv, causal in CASES:
        gflop = 4.0 * heads * sq * skv * D * (0.5 if causal else 1.0) / 1e9
        small = (min(sq, 64), min(skv, 64)) if sq > 1 else (1, 64)
        for dtype_name in ("float32", "bfloat16"):
            dtype = getattr(torch, dtype_name)
            with torch.inference_mode():
                check, reference = torch_case(torch, heads, kv_heads, *small, causal, dtype)
                err = relative_error(check()[0].float().numpy(), reference())
                if not err < (1e-4 if dtype_name == "float32" else 3e-2):
                    raise SystemExit(f"torch {dtype_name} {name} differs from float64: {err:.3g}")
                run, _ = torch_case(torch, heads, kv_heads, sq, skv, causal, dtype)
                ms = median_ms(run, args.repeats)
            short = "f32" if dtype_name == "float32" else "bf16"
            print(f"| torch SDPA + HF RoPE | {short} | {name} | {ms:.2f} | {gflop / ms * 1e3:.1f} "
                  f"| {err:.1e} |", flush=True)
        run, reference, output = ort_case(ort, onnx, helper, args.threads, heads, kv_heads,
                                          *small, causal)
        run()
        err = relative_error(output(), reference())
        if not err < 1e-4:
            raise SystemExit(f"ONNX Runtime {name} differs from float64: {err:.3g}")
        run, _, _ = ort_case(ort, onnx, helper, args.threads, heads, kv_heads, sq, skv, causal)
        ms = median_ms(run, args.repeats)
        print(f"| ONNX Runtime GQA do_rotary | f32 | {name} | {ms:.2f} | {gflop / ms * 1e3:.1f} "
              f"| {err:.1e} |", flush=True)


if __name__ == "__main__":
    main()
