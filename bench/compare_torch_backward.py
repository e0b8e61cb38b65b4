"""Training step of attention on this CPU: forward + backward of causal
attention (b=1, 16 heads, d=128, f32) through pejit's torch op against the
peers a user would pick, each timed in the same run and each in a child
process of its own for its peak memory (RSS high-water mark):

  torch eager   F.scaled_dot_product_attention (torch's CPU flash backward)
  torch.compile the same under torch.compile (inductor)
  pejit         pejit.torch.attention: the training forward (it also writes
                lse) and the backward kernel that reads it
  pejit recompute  torch.ops.pejit.attention: the backward recomputes lse
with RoPE (theta 10000, half layout, positions 0..s-1):
  torch RoPE    HF's apply_rotary_pos_emb (rotate_half) on q and k, then SDPA
  torch.compile RoPE  the same under torch.compile
  pejit RoPE    torch.ops.pejit.attention with rope (rotation and its adjoint fused)
and with T5's learned relative bias (32 buckets):
  torch T5      HF's way: the [h, s, s] bias gathered from the table, SDPA's
                attn_mask, the table's gradient through the gather
  pejit T5      pejit.torch.T5Attention (the table an nn.Parameter)

    python bench/compare_torch_backward.py [--lengths 2048,8192] [--repeats 3] [--only pejit,...]

Prints a Markdown table: median ms of forward + backward, and peak RSS.
"""
import argparse
import json
import resource
import subprocess
import sys
import time


def child(kind: str, s: int, repeats: int) -> dict:
    import torch
    import pejit.torch  # noqa: F401  (registers torch.ops.pejit)
    torch.manual_seed(0)
    h, d = 16, 128
    # "... bf16": the same step in bfloat16 (pejit computes in f32 and
    # rounds its gradients; torch's SDPA backward runs in bf16).
    dtype = torch.bfloat16 if kind.endswith(" bf16") else torch.float32
    kind = kind.removesuffix(" bf16")
    q, k, v = (torch.randn(1, h, s, d, dtype=dtype, requires_grad=True) for _ in range(3))
    do = torch.randn(1, h, s, d, dtype=dtype)
    table = torch.randn(32, h, requires_grad=True)
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def t5_bias():
        import numpy as np
        rel = torch.arange(s)[None, :] - torch.arange(s)[:, None]
        n = 16
        base = (rel > 0).long() * n
        r = rel.abs()
        exact = n // 2
        large = exact + (torch.log(r.clamp(min=1).double() / exact) / np.log(128 / exact)
                         * (n - exact)).long()
        buckets = base + torch.where(r < exact, r, large.clamp(max=n - 1))
        return table[buckets].permute(2, 0, 1)[None]

    def hf_rope(x):
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, d, 2).float() / d)
        angles = torch.arange(s).float()[:, None] * inv_freq
        emb = torch.cat([angles, angles], dim=-1).to(x.dtype)
        rotated = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
        return x * emb.cos() + rotated * emb.sin()

    def torch_rope():
        return sdpa(hf_rope(q), hf_rope(k), v, is_causal=True)

    rope_options = pejit.torch.options(rope=True, causal=True)
    causal = pejit.torch.options(causal=True)
    t5_options = pejit.torch.options(t5={"num_buckets": 32}, causal=True)
    steps = {
        "torch eager": lambda: sdpa(q, k, v, is_causal=True),
        "torch.compile": torch.compile(lambda: sdpa(q, k, v, is_causal=True)),
        "pejit": lambda: pejit.torch.attention(q, k, v, causal),
        "pejit recompute": lambda: torch.ops.pejit.attention(q, k, v, causal),
        "torch RoPE": torch_rope,
        "torch.compile RoPE": torch.compile(torch_rope),
        "pejit RoPE": lambda: pejit.torch.attention(q, k, v, rope_options),
        "pejit RoPE recompute": lambda: torch.ops.pejit.attention(q, k, v, rope_options),
        "torch T5": lambda: sdpa(q, k, v, attn_mask=t5_bias().masked_fill(
            torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))),
        "pejit T5": lambda: pejit.torch.attention(q, k, v, t5_options, t5_table=table),
    }
    step = steps[kind]
    times = []
    for r in range(repeats + 1):  # the first warms up (and compiles)
        for x in (q, k, v, table):
            x.grad = None
        start = time.perf_counter()
        step().backward(do)
        if r:
            times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return {"ms": times[len(times) // 2],
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", default="2048")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2)
    parser.add_argument("--only", default="", help="comma-separated implementations to time")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.repeats)))
        return
    import torch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; b=1 h=16 d=128 f32 "
          "causal, forward + backward\n")
    print("| s | implementation | fwd + bwd ms | peak RSS MiB |\n| ---: | --- | ---: | ---: |")
    for s in (int(n) for n in args.lengths.split(",")):
        for kind in ("torch eager", "torch.compile", "pejit", "pejit recompute", "torch RoPE",
                     "torch.compile RoPE", "pejit RoPE", "pejit RoPE recompute",
                     "torch RoPE bf16", "pejit RoPE bf16", "torch T5", "pejit T5"):
            if args.only and kind not in args.only.split(","):
                continue
            out = subprocess.run([sys.executable, __file__, "--child", kind, str(s),
                                  "--repeats", str(args.repeats)],
                                 capture_output=True, text=True)
            if out.returncode != 0:
                print(f"| {s} | {kind} | failed: {out.stderr.strip().splitlines()[-1][:80]} | |")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"| {s} | {kind} | {row['ms']:.0f} | {row['rss_mib']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
