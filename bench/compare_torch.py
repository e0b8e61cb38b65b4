#!/usr/bin/env python3
"""PyTorch CPU peer for pejit's attention benchmark.

What a user would write without pejit: HF transformers-style RoPE
(LlamaRotaryEmbedding + apply_rotary_pos_emb, rotate_half layout) on Q and K,
then torch.nn.functional.scaled_dot_product_attention. fp32, b=1, hq=hkv=16,
d=128, theta=10000.

Each case is timed twice: RoPE + SDPA (cos/sin table included, as one HF layer
forward computes it) and SDPA alone on the already-rotated Q/K. Warm-up runs are
excluded; the reported time is the median of the repeats.

FLOPs = 4*b*hq*sq*skv*d (QK^T and PV, 2 FLOPs per multiply-add), halved for
causal prefill. GFLOP/s ("gflops") is computed from the RoPE + SDPA time, the
work pejit's fused kernel does.

Run bench/setup_torch_venv.sh first, then:
    bench/.venv/bin/python bench/compare_torch.py [--threads 2] [--json]
        [--cases prefill-s512,decode] [--repeats N]
"""

import argparse
import fnmatch
import json
import statistics
import sys
import time

import numpy as np
import torch

B, HEADS, HEAD_DIM, THETA = 1, 16, 128, 10000.0


# --- HF-style RoPE (transformers LlamaRotaryEmbedding + apply_rotary_pos_emb) --

def hf_rope_cos_sin(positions, dim=HEAD_DIM, theta=THETA):
    """positions: int64 [b, s]. Returns cos, sin: fp32 [b, s, dim]."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    inv_freq_expanded = inv_freq[None, :, None].expand(positions.shape[0], -1, 1)
    position_ids_expanded = positions[:, None, :].float()
    freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(x, cos, sin):
    """x: [b, h, s, d]; cos/sin: [b, s, d] (HF's unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * cos) + (rotate_half(x) * sin)


def rope_reference_f64(x, positions, dim=HEAD_DIM, theta=THETA):
    """float64 numpy rotate_half RoPE: channel c pairs with c + d/2."""
    x = x.astype(np.float64)
    half = dim // 2
    inv_freq = 1.0 / theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    angle = positions[..., None].astype(np.float64) * inv_freq  # [b, s, d/2]
    cos, sin = np.cos(angle)[:, None], np.sin(angle)[:, None]  # [b, 1, s, d/2]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


def check_rope():
    """The peer must do the same math as pejit: compare with float64 numpy."""
    gen = torch.Generator().manual_seed(1)
    s = 64
    x = torch.randn(B, 2, s, HEAD_DIM, generator=gen)
    positions = torch.arange(s)[None]
    cos, sin = hf_rope_cos_sin(positions)
    got = apply_rotary_pos_emb(x, cos, sin).numpy()
    want = rope_reference_f64(x.numpy(), positions.numpy())
    err = float(np.max(np.abs(got - want)))
    # fp32 angle pos*inv_freq (pos < 64) and fp32 products: ~1e-5 at most.
    if not err < 1e-4:
        raise SystemExit(f"HF-style RoPE differs from the float64 reference: max |err| = {err:.3g}")
    return err


# --- cases ---------------------------------------------------------------

def make_cases():
    cases = []
    for s in (512, 2048, 4096):
        for causal in (False, True):
            name = f"prefill-s{s}" + ("-causal" if causal else "")
            cases.append(dict(name=name, kind="prefill", sq=s, skv=s, causal=causal))
    # One new query at position 4095 against 4096 keys: causal masks nothing.
    cases.append(dict(name="decode-skv4096", kind="decode", sq=1, skv=4096, causal=False))
    return cases


def case_flops(c):
    flops = 4.0 * B * HEADS * c["sq"] * c["skv"] * HEAD_DIM
    return flops / 2 if c["causal"] else flops


def median_ms(fn, repeats, budget_s):
    """Median wall ms of fn after one warm-up run. repeats=0: as many as fit
    in budget_s, between 3 and 10."""
    start = time.perf_counter()
    fn()
    warm_s = time.perf_counter() - start
    if repeats <= 0:
        repeats = max(3, min(10, int(budget_s / max(warm_s, 1e-6))))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3, repeats


def run_case(c, repeats, budget_s):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(B, HEADS, c["sq"], HEAD_DIM, generator=gen)
    k = torch.randn(B, HEADS, c["skv"], HEAD_DIM, generator=gen)
    v = torch.randn(B, HEADS, c["skv"], HEAD_DIM, generator=gen)
    kv_pos = torch.arange(c["skv"])[None]
    q_pos = kv_pos[:, c["skv"] - c["sq"]:]  # decode: the last position
    causal = c["causal"]

    def rope_sdpa():
        # Prefill shares one table for q and k (as HF does); decode needs two.
        k_cos, k_sin = hf_rope_cos_sin(kv_pos)
        if c["sq"] == c["skv"]:
            q_cos, q_sin = k_cos, k_sin
        else:
            q_cos, q_sin = hf_rope_cos_sin(q_pos)
        qr = apply_rotary_pos_emb(q, q_cos, q_sin)
        kr = apply_rotary_pos_emb(k, k_cos, k_sin)
        return torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=causal)

    k_cos, k_sin = hf_rope_cos_sin(kv_pos)
    q_cos, q_sin = hf_rope_cos_sin(q_pos)
    qr = apply_rotary_pos_emb(q, q_cos, q_sin)
    kr = apply_rotary_pos_emb(k, k_cos, k_sin)

    def sdpa():
        return torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=causal)

    ms_all, n_all = median_ms(rope_sdpa, repeats, budget_s)
    ms_sdpa, _ = median_ms(sdpa, repeats, budget_s)
    flops = case_flops(c)
    return dict(ms_rope_sdpa=ms_all, ms_sdpa=ms_sdpa, repeats=n_all,
                gflops=flops / (ms_all * 1e-3) * 1e-9,
                gflops_sdpa=flops / (ms_sdpa * 1e-3) * 1e-9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    parser.add_argument("--json", action="store_true", help="one JSON object per case on stdout")
    parser.add_argument("--cases", default="*",
                        help="comma-separated case names, globs or kinds (prefill-s512, 'prefill-*-causal', decode); "
                             "default all; --list shows them")
    parser.add_argument("--repeats", type=int, default=0,
                        help="timed runs per measurement; default: as many as fit ~3 s, 3..10")
    parser.add_argument("--list", action="store_true", help="list the case names and exit")
    args = parser.parse_args()

    cases = make_cases()
    if args.list:
        print("\n".join(c["name"] for c in cases))
        return 0
    patterns = [p.strip() for p in args.cases.split(",") if p.strip()]
    # A pattern is a case name, a glob over names, or a kind (prefill, decode).
    selected = [c for c in cases
                if any(fnmatch.fnmatch(c["name"], p) or c["kind"] == p for p in patterns)]
    if not selected:
        parser.error(f"no case matches {args.cases!r}; --list shows them")

    torch.set_num_threads(args.threads)
    log = sys.stderr if args.json else sys.stdout
    err = check_rope()
    print(f"# torch {torch.__version__}, {args.threads} threads, fp32; "
          f"HF RoPE vs float64 numpy: max |err| = {err:.2g}", file=log)

    if not args.json:
        print(f"{'case':<22}{'ms rope+sdpa':>14}{'ms sdpa':>10}{'GFLOP/s':>10}{'(sdpa)':>9}{'reps':>6}")
    with torch.inference_mode():
        for c in selected:
            r = run_case(c, args.repeats, budget_s=3.0)
            if args.json:
                print(json.dumps({
                    "case": c["kind"], "s": c["skv"], "causal": c["causal"],
                    "threads": args.threads,
                    "ms_rope_sdpa": round(r["ms_rope_sdpa"], 3),
                    "ms_sdpa": round(r["ms_sdpa"], 3),
                    "gflops": round(r["gflops"], 2),
                    "gflops_sdpa": round(r["gflops_sdpa"], 2),
                    "torch": torch.__version__,
                }), flush=True)
            else:
                print(f"{c['name']:<22}{r['ms_rope_sdpa']:>14.2f}{r['ms_sdpa']:>10.2f}"
                      f"{r['gflops']:>10.1f}{r['gflops_sdpa']:>9.1f}{r['repeats']:>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
