"""Training step of attention on this CPU: forward + backward of causal
attention (b=1, 16 heads, d=128, f32) through pejit's torch op against the
peers a user would pick, each timed in the same run and each in a child
process of its own for its peak memory (RSS high-water mark):

  torch eager   F.scaled_dot_product_attention (torch's CPU flash backward)
  torch.compile the same under torch.compile (inductor)
  pejit         torch.ops.pejit.attention (its backward kernel)
and with T5's learned relative bias (32 buckets):
  torch T5      HF's way: the [h, s, s] bias gathered from the table, SDPA's
                attn_mask, the table's gradient through the gather
  pejit T5      pejit.torch.T5Attention (the table an nn.Parameter)

    python bench/compare_torch_backward.py [--lengths 2048,8192] [--repeats 3]

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
    q, k, v = (torch.randn(1, h, s, d, requires_grad=True) for _ in range(3))
    do = torch.randn(1, h, s, d)
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

    causal = pejit.torch.options(causal=True)
    t5_options = pejit.torch.options(t5={"num_buckets": 32}, causal=True)
    steps = {
        "torch eager": lambda: sdpa(q, k, v, is_causal=True),
        "torch.compile": torch.compile(lambda: sdpa(q, k, v, is_causal=True)),
        "pejit": lambda: torch.ops.pejit.attention(q, k, v, causal),
        "torch T5": lambda: sdpa(q, k, v, attn_mask=t5_bias().masked_fill(
            torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))),
        "pejit T5": lambda: torch.ops.pejit.attention(q, k, v, t5_options, None, None, table),
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
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.repeats)))
        return
    import torch
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; b=1 h=16 d=128 f32 "
          "causal, forward + backward\n")
    print("| s | implementation | fwd + bwd ms | peak RSS MiB |\n| ---: | --- | ---: | ---: |")
    for s in (int(n) for n in args.lengths.split(",")):
        for kind in ("torch eager", "torch.compile", "pejit", "torch T5", "pejit T5"):
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
