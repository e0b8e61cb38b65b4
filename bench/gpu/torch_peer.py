#!/usr/bin/env python3
"""GPU peer of pejit's fused RoPE + causal attention (bench/gpu_check.sh run).

What a user would run without pejit: HF-style RoPE (rotate_half, cos/sin
from theta = 10000) on Q and K, then torch.nn.functional.scaled_dot_product_attention
(causal), bf16, b=4, h=32, d=128, s = 1024/4096/8192; and FlashAttention's
flash_attn_func after the same RoPE when flash_attn is importable. Times are
CUDA-event medians of 20 runs after warm-up; FLOPs 4*b*h*s*s*d/2 (causal).
"""
import sys

try:
    import torch
except ImportError:
    print("torch_peer: torch is not installed; no peer timing")
    sys.exit(0)

if not torch.cuda.is_available():
    print("torch_peer: no CUDA device; no peer timing")
    sys.exit(0)


def rope(x, pos, theta=10000.0):
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    freqs = torch.outer(pos.float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    half = d // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def median_ms(fn, repeats=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


try:
    from flash_attn import flash_attn_func
except Exception:
    flash_attn_func = None

print("| case | torch RoPE+SDPA ms | TFLOPS | flash-attn RoPE+FA ms | TFLOPS |")
print("| --- | ---: | ---: | ---: | ---: |")
for s in (1024, 4096, 8192):
    b, h, d = 4, 32, 128
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    pos = torch.arange(s, device="cuda")
    flops = 4 * b * h * s * s * d / 2

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(
            rope(q, pos), rope(k, pos), v, is_causal=True)

    t = median_ms(sdpa)
    fa = "-"
    fa_tflops = "-"
    if flash_attn_func is not None:
        def fa_run():
            return flash_attn_func(rope(q, pos).transpose(1, 2), rope(k, pos).transpose(1, 2),
                                   v.transpose(1, 2), causal=True)
        tf = median_ms(fa_run)
        fa, fa_tflops = f"{tf:.3f}", f"{flops / tf / 1e9:.1f}"
    print(f"| timed_rope_causal_bf16_s{s} | {t:.3f} | {flops / t / 1e9:.1f} | {fa} | {fa_tflops} |")
