#!/usr/bin/env python3
"""The decode loop of `pejit bench --shape-classes`, run by the peers a user
would pick, in the same run as pejit's.

One decode loop: 256 steps, the KV cache growing from 2048 to 2304 keys,
b = 1, 32 query heads on 8 KV heads, d = 128, f32 (and torch in bf16 too,
as pejit's bf16 rows; ONNX Runtime's CPU GroupQueryAttention is f32 here),
RoPE theta 500000 (plain rotate_half). What each step does, as users run
it:

- pejit: `pejit bench --shape-classes` (run first, as a subprocess; its
  decode table is printed as it is). Attention over a pre-rotated K cache,
  RoPE on Q only, through one kernel of the `?`-length shape class; its
  "KV-append" rows add what the peers do each step: the new K row rotated
  into the cache by the KV-append kernel (docs/standalone-kernels.md) and
  the new V row copied.
- torch: HF-style RoPE of the new token's q and k (LlamaRotaryEmbedding +
  apply_rotary_pos_emb), the rotated k and v written into a preallocated
  cache, then scaled_dot_product_attention over the cache's first t rows
  (GQA through enable_gqa).
- ONNX Runtime: com.microsoft.GroupQueryAttention with do_rotary = 1 on the
  CPU execution provider: the op rotates q and k with the cos/sin caches,
  appends k and v to the past cache (past and present share one buffer
  through IO binding) and attends, seqlens_k telling it the length.

Each peer is checked once against a float64 numpy reference of the same
step before timing. Reported: the median step over the 256 steps (after a
warm-up loop), per peer.

    bench/.venv/bin/python bench/compare_decode.py [--threads 2] [--pejit build/tools/pejit/pejit]
"""

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

HQ, HKV, D, THETA = 32, 8, 128, 500000.0
FIRST, STEPS = 2048, 256
CAPACITY = FIRST + STEPS


def inv_freq():
    return 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float64) / D)


def rope_f64(x, pos):
    """x [..., D] rotated at integer position pos (rotate_half), float64."""
    x = x.astype(np.float64)
    angle = pos * inv_freq()
    cos, sin = np.cos(angle), np.sin(angle)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


def attention_f64(q, k, v):
    """q [HQ, D], k/v [HKV, t, D] -> [HQ, D], GQA, no mask (one new token)."""
    group = HQ // HKV
    out = np.empty((HQ, D))
    for h in range(HQ):
        s = k[h // group] @ q[h] / np.sqrt(D)
        p = np.exp(s - s.max())
        out[h] = (p / p.sum()) @ v[h // group]
    return out


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def median_step(step, repeats):
    for t in range(min(STEPS, 16)):  # warm-up
        step(t)
    times = []
    for _ in range(repeats):
        for t in range(STEPS):
            start = time.perf_counter()
            step(t)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def torch_decode(rng, repeats, dtype_name="float32"):
    import torch

    dtype = getattr(torch, dtype_name)

    def draw(shape):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to(dtype)

    k_cache = draw((1, HKV, CAPACITY, D))
    v_cache = draw((1, HKV, CAPACITY, D))
    q_new = draw((1, HQ, 1, D))
    k_new = draw((1, HKV, 1, D))
    v_new = draw((1, HKV, 1, D))
    freq = torch.from_numpy(inv_freq().astype(np.float32))

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def step(t):
        pos = FIRST + t  # the new token's position; the cache holds 0 .. pos - 1
        angle = pos * freq  # HF: fp32 position times fp32 inv_freq
        emb = torch.cat((angle, angle))
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        qr = q_new * cos + rotate_half(q_new) * sin
        kr = k_new * cos + rotate_half(k_new) * sin
        k_cache[:, :, pos : pos + 1] = kr
        v_cache[:, :, pos : pos + 1] = v_new
        return torch.nn.functional.scaled_dot_product_attention(
            qr, k_cache[:, :, : pos + 1], v_cache[:, :, : pos + 1], enable_gqa=True)

    with torch.inference_mode():
        got = step(0)[0, :, 0].float().numpy()
        want = attention_f64(rope_f64(q_new[0, :, 0].float().numpy(), FIRST),
                             k_cache[0, :, : FIRST + 1].float().numpy(),
                             v_cache[0, :, : FIRST + 1].float().numpy())
        err = relative_error(got, want)
        if not err < (1e-4 if dtype_name == "float32" else 3e-2):
            raise SystemExit(f"torch {dtype_name} decode step differs from float64: {err:.3g}")
        return median_step(step, repeats), err


def gqa_model(onnx, helper, batch=1, capacity=CAPACITY, heads=HQ, kv_heads=HKV, tokens=1):
    """GroupQueryAttention with rotary (`tokens` new ones per batch row, 1
    for decode), past and present caches of `capacity` keys, as a
    serialized model."""
    T = onnx.TensorProto
    node = helper.make_node(
        "GroupQueryAttention",
        ["query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
         "cos_cache", "sin_cache"],
        ["output", "present_key", "present_value"],
        domain="com.microsoft", num_heads=heads, kv_num_heads=kv_heads, do_rotary=1,
        rotary_interleaved=0, scale=1.0 / np.sqrt(D))
    info = helper.make_tensor_value_info
    cache = [batch, kv_heads, capacity, D]
    inputs = [
        info("query", T.FLOAT, [batch, tokens, heads * D]),
        info("key", T.FLOAT, [batch, tokens, kv_heads * D]),
        info("value", T.FLOAT, [batch, tokens, kv_heads * D]),
        info("past_key", T.FLOAT, cache),
        info("past_value", T.FLOAT, cache),
        info("seqlens_k", T.INT32, [batch]),
        info("total_sequence_length", T.INT32, []),
        info("cos_cache", T.FLOAT, [capacity, D // 2]),
        info("sin_cache", T.FLOAT, [capacity, D // 2]),
    ]
    outputs = [
        info("output", T.FLOAT, [batch, tokens, heads * D]),
        info("present_key", T.FLOAT, cache),
        info("present_value", T.FLOAT, cache),
    ]
    graph = helper.make_graph([node], "gqa", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


def ort_decode(rng, repeats, threads):
    import onnx
    import onnxruntime as ort
    from onnx import helper

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(gqa_model(onnx, helper), options,
                                   providers=["CPUExecutionProvider"])
    cache_k = rng.standard_normal((1, HKV, CAPACITY, D), dtype=np.float32)
    cache_v = rng.standard_normal((1, HKV, CAPACITY, D), dtype=np.float32)
    q = rng.standard_normal((1, 1, HQ * D), dtype=np.float32)
    k = rng.standard_normal((1, 1, HKV * D), dtype=np.float32)
    v = rng.standard_normal((1, 1, HKV * D), dtype=np.float32)
    angle = np.arange(CAPACITY)[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    # past and present share the cache buffers: the op appends in place.
    past_k = ort.OrtValue.ortvalue_from_numpy(cache_k)
    past_v = ort.OrtValue.ortvalue_from_numpy(cache_v)
    out = ort.OrtValue.ortvalue_from_numpy(np.empty((1, 1, HQ * D), dtype=np.float32))
    binding = session.io_binding()
    for name, value in (("query", q), ("key", k), ("value", v), ("cos_cache", cos),
                        ("sin_cache", sin)):
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_input("past_key", past_k)
    binding.bind_ortvalue_input("past_value", past_v)
    binding.bind_ortvalue_output("output", out)
    binding.bind_ortvalue_output("present_key", past_k)
    binding.bind_ortvalue_output("present_value", past_v)

    def step(t):
        total = FIRST + t + 1
        binding.bind_cpu_input("seqlens_k", np.array([total - 1], dtype=np.int32))
        binding.bind_cpu_input("total_sequence_length", np.array(total, dtype=np.int32))
        session.run_with_iobinding(binding)

    before_k = cache_k[0, :, :FIRST].astype(np.float64)
    before_v = cache_v[0, :, :FIRST].astype(np.float64)
    step(0)
    got = out.numpy()[0, 0].reshape(HQ, D)
    k_rot = rope_f64(k[0, 0].reshape(HKV, D), FIRST)
    keys = np.concatenate((before_k, k_rot[:, None]), axis=1)
    values = np.concatenate((before_v, v[0, 0].reshape(HKV, D)[:, None]), axis=1)
    want = attention_f64(rope_f64(q[0, 0].reshape(HQ, D), FIRST), keys, values)
    err = relative_error(got, want)
    if not err < 1e-4:
        raise SystemExit(f"onnxruntime GQA decode step differs from float64: {err:.3g}")
    return median_step(step, repeats), err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="passes over the 256 steps")
    parser.add_argument("--pejit", default="build/tools/pejit/pejit")
    parser.add_argument("--peers-only", action="store_true", help="skip the pejit bench")
    args = parser.parse_args()

    if not args.peers_only:
        print("## pejit (`pejit bench --shape-classes`)\n", flush=True)
        subprocess.run([args.pejit, "bench", "--shape-classes", "--repeats=7", "--rounds=3"],
                       check=True)

    import torch
    import onnxruntime

    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(5)
    torch_ms, torch_err = torch_decode(rng, args.repeats)
    torch16_ms, torch16_err = torch_decode(rng, args.repeats, "bfloat16")
    ort_ms, ort_err = ort_decode(rng, args.repeats, args.threads)
    print("## Peers, same run: decode loop, 256 steps, keys 2048 -> 2304, b=1 hq=32 hkv=8 "
          "d=128 f32\n")
    print("| peer | median step ms | float64 check (rel. error) |")
    print("| --- | ---: | ---: |")
    print(f"| torch {torch.__version__}: HF RoPE of the new q, k + SDPA over the cache "
          f"| {torch_ms:.3f} | {torch_err:.1e} |")
    print(f"| onnxruntime {onnxruntime.__version__}: GroupQueryAttention do_rotary=1, CPU EP "
          f"| {ort_ms:.3f} | {ort_err:.1e} |")
    print(f"| torch {torch.__version__}, bf16 caches and tokens: the same step "
          f"| {torch16_ms:.3f} | {torch16_err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
