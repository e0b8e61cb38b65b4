#!/usr/bin/env python3
"""The varlen prefill of `pejit bench --varlen`, run by the peers a user
would pick, in the same run as pejit's.

8 sequences of lengths 640, 128, 1024, 320, 768, 256, 512, 448 (4096
tokens), 32 query heads on 8 KV heads, d = 128, causal, RoPE theta 500000
(rotate_half) on Q and K, f32. Neither peer has a packed-batch API on the
CPU, so each runs the sequences one by one, as a user would:

- pejit: `pejit bench --varlen` (run first, as a subprocess; its table is
  printed as it is): one packed call, 8 calls, and a padded batch.
- torch: per sequence, HF-style RoPE of q and k (cos/sin from fp32
  positions times inv_freq, rotate_half), then
  scaled_dot_product_attention(is_causal=True, enable_gqa=True).
- ONNX Runtime: per sequence, com.microsoft.GroupQueryAttention with
  do_rotary = 1 on the CPU execution provider, as a first prompt (no past
  cache): the op rotates q and k and attends causally.

Then a chat server's decode step: 16 users, one new token each, over
caches of 1 .. 4096 keys (21159 in all), 32/8 heads, d = 128, f32:

- pejit: the packed decode rows over pre-rotated caches (RoPE on Q only),
  one call, and 16 calls (`pejit bench --varlen`'s second table);
- torch: per user, HF RoPE of the new q and k, k and v written into the
  user's cache, SDPA over it (GQA through enable_gqa);
- ONNX Runtime: one GroupQueryAttention call over the batch of 16, past
  caches padded to 4096 (past and present one buffer through IO binding),
  seqlens_k giving each user's length: the op rotates the new q and k,
  appends k and v and attends.

Each peer is checked against a float64 numpy reference (two sequences, two
users) before timing. Reported: the median over rounds of the whole batch
(prefill) or step (decode).

    bench/.venv/bin/python bench/compare_varlen.py [--threads 2] [--pejit build/tools/pejit/pejit]
"""

import argparse
import statistics
import subprocess
import sys
import time

import numpy as np

# One new token, float64 (q [HQ, D], k/v [HKV, t, D]); the GQA decode model.
from compare_decode import attention_f64, gqa_model

HQ, HKV, D, THETA = 32, 8, 128, 500000.0
LENGTHS = [640, 128, 1024, 320, 768, 256, 512, 448]


def inv_freq():
    return 1.0 / THETA ** (np.arange(0, D, 2, dtype=np.float64) / D)


def rope_f64(x, positions):
    """x [h, s, D] rotated at positions [s] (rotate_half), float64."""
    angle = positions[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle), np.sin(angle)
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return np.concatenate((x1 * cos - x2 * sin, x2 * cos + x1 * sin), axis=-1)


def causal_attention_f64(q, k, v):
    """q [HQ, s, D], k/v [HKV, s, D] -> [HQ, s, D], RoPE'd inputs, GQA."""
    group, s = HQ // HKV, q.shape[1]
    mask = np.triu(np.ones((s, s), dtype=bool), 1)
    out = np.empty_like(q)
    for h in range(HQ):
        scores = q[h] @ k[h // group].T / np.sqrt(D)
        scores[mask] = -np.inf
        p = np.exp(scores - scores.max(axis=1, keepdims=True))
        out[h] = (p / p.sum(axis=1, keepdims=True)) @ v[h // group]
    return out


def reference(q, k, v):
    """q [HQ, s, D], k/v [HKV, s, D] f32 -> float64 RoPE + causal attention."""
    pos = np.arange(q.shape[1], dtype=np.float64)
    q64, k64 = (rope_f64(x.astype(np.float64), pos) for x in (q, k))
    return causal_attention_f64(q64, k64, v.astype(np.float64))


def relative_error(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def median_batch(run_batch, rounds):
    run_batch()  # warm-up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run_batch()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def sequences(rng):
    return [(rng.standard_normal((HQ, s, D), dtype=np.float32),
             rng.standard_normal((HKV, s, D), dtype=np.float32),
             rng.standard_normal((HKV, s, D), dtype=np.float32)) for s in LENGTHS]


def torch_varlen(batch, rounds):
    import torch

    freq = torch.from_numpy(inv_freq().astype(np.float32))
    tensors = [tuple(torch.from_numpy(x)[None] for x in seq) for seq in batch]

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def one(q, k, v):
        s = q.shape[2]
        angle = torch.arange(s, dtype=torch.float32)[:, None] * freq[None]
        emb = torch.cat((angle, angle), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        qr = q * cos + rotate_half(q) * sin
        kr = k * cos + rotate_half(k) * sin
        return torch.nn.functional.scaled_dot_product_attention(qr, kr, v, is_causal=True,
                                                                enable_gqa=True)

    with torch.inference_mode():
        err = max(relative_error(one(*tensors[i])[0].numpy(), reference(*batch[i]))
                  for i in (1, 3))
        if not err < 1e-4:
            raise SystemExit(f"torch varlen differs from float64: {err:.3g}")
        return median_batch(lambda: [one(*t) for t in tensors], rounds), err


def gqa_prompt_model(onnx, helper, max_len):
    T = onnx.TensorProto
    node = helper.make_node(
        "GroupQueryAttention",
        ["query", "key", "value", "", "", "seqlens_k", "total_sequence_length", "cos_cache",
         "sin_cache"],
        ["output"],
        domain="com.microsoft", num_heads=HQ, kv_num_heads=HKV, do_rotary=1,
        rotary_interleaved=0, scale=1.0 / np.sqrt(D))
    inputs = [
        helper.make_tensor_value_info("query", T.FLOAT, [1, "s", HQ * D]),
        helper.make_tensor_value_info("key", T.FLOAT, [1, "s", HKV * D]),
        helper.make_tensor_value_info("value", T.FLOAT, [1, "s", HKV * D]),
        helper.make_tensor_value_info("seqlens_k", T.INT32, [1]),
        helper.make_tensor_value_info("total_sequence_length", T.INT32, []),
        helper.make_tensor_value_info("cos_cache", T.FLOAT, [max_len, D // 2]),
        helper.make_tensor_value_info("sin_cache", T.FLOAT, [max_len, D // 2]),
    ]
    outputs = [helper.make_tensor_value_info("output", T.FLOAT, [1, "s", HQ * D])]
    graph = helper.make_graph([node], "gqa_prompt", inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


def ort_varlen(batch, rounds, threads):
    import onnx
    import onnxruntime as ort
    from onnx import helper

    max_len = max(LENGTHS)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(gqa_prompt_model(onnx, helper, max_len), options,
                                   providers=["CPUExecutionProvider"])
    angle = np.arange(max_len)[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    # [h, s, D] -> [1, s, h * D], the layout the op takes.
    feeds = []
    for q, k, v in batch:
        s = q.shape[1]
        feeds.append({
            "query": np.ascontiguousarray(q.transpose(1, 0, 2).reshape(1, s, HQ * D)),
            "key": np.ascontiguousarray(k.transpose(1, 0, 2).reshape(1, s, HKV * D)),
            "value": np.ascontiguousarray(v.transpose(1, 0, 2).reshape(1, s, HKV * D)),
            "seqlens_k": np.array([s - 1], dtype=np.int32),
            "total_sequence_length": np.array(s, dtype=np.int32),
            "cos_cache": cos, "sin_cache": sin})

    def one(i):
        return session.run(["output"], feeds[i])[0]

    err = 0.0
    for i in (1, 3):
        s = LENGTHS[i]
        got = one(i)[0].reshape(s, HQ, D).transpose(1, 0, 2)
        err = max(err, relative_error(got, reference(*batch[i])))
    if not err < 1e-4:
        raise SystemExit(f"onnxruntime GQA prompt differs from float64: {err:.3g}")
    return median_batch(lambda: [one(i) for i in range(len(batch))], rounds), err


DECODE_KEYS = [3000, 150, 1200, 40, 2200, 700, 90, 4096, 512, 1800, 260, 3500, 60, 950, 2600, 1]


def decode_users(rng):
    """Per user: its cache before the step (t - 1 rotated keys, values) and
    the new token's q, k, v."""
    return [(rng.standard_normal((HKV, t - 1, D), dtype=np.float32),
             rng.standard_normal((HKV, t - 1, D), dtype=np.float32),
             rng.standard_normal((HQ, D), dtype=np.float32),
             rng.standard_normal((HKV, D), dtype=np.float32),
             rng.standard_normal((HKV, D), dtype=np.float32)) for t in DECODE_KEYS]


def decode_reference(user, t):
    k_cache, v_cache, q, k, v = user
    pos = np.array([t - 1], dtype=np.float64)
    keys = np.concatenate((k_cache, rope_f64(k[:, None].astype(np.float64), pos)), axis=1)
    values = np.concatenate((v_cache, v[:, None]), axis=1)
    return attention_f64(rope_f64(q[:, None].astype(np.float64), pos)[:, 0], keys, values)


def torch_decode(users, rounds):
    import torch

    freq = torch.from_numpy(inv_freq().astype(np.float32))
    state = []
    for (k_cache, v_cache, q, k, v), t in zip(users, DECODE_KEYS):
        kc = torch.zeros((1, HKV, t, D))
        vc = torch.zeros((1, HKV, t, D))
        kc[0, :, : t - 1] = torch.from_numpy(k_cache)
        vc[0, :, : t - 1] = torch.from_numpy(v_cache)
        state.append((kc, vc, torch.from_numpy(q)[None, :, None], torch.from_numpy(k)[None, :, None],
                      torch.from_numpy(v)[None, :, None], t))

    def rotate_half(x):
        return torch.cat((-x[..., D // 2:], x[..., : D // 2]), dim=-1)

    def one(kc, vc, q, k, v, t):
        angle = (t - 1) * freq
        emb = torch.cat((angle, angle))
        cos, sin = emb.cos(), emb.sin()
        qr = q * cos + rotate_half(q) * sin
        kc[:, :, t - 1 : t] = k * cos + rotate_half(k) * sin
        vc[:, :, t - 1 : t] = v
        return torch.nn.functional.scaled_dot_product_attention(qr, kc, vc, enable_gqa=True)

    with torch.inference_mode():
        err = max(relative_error(one(*state[i])[0, :, 0].numpy(),
                                 decode_reference(users[i], DECODE_KEYS[i])) for i in (0, 7))
        if not err < 1e-4:
            raise SystemExit(f"torch batched decode differs from float64: {err:.3g}")
        return median_batch(lambda: [one(*s) for s in state], rounds * 4), err


def ort_decode(users, rounds, threads):
    import onnx
    import onnxruntime as ort
    from onnx import helper

    batch, capacity = len(users), max(DECODE_KEYS)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(gqa_model(onnx, helper, batch, capacity), options,
                                   providers=["CPUExecutionProvider"])
    cache_k = np.zeros((batch, HKV, capacity, D), dtype=np.float32)
    cache_v = np.zeros_like(cache_k)
    for n, ((k_cache, v_cache, _, _, _), t) in enumerate(zip(users, DECODE_KEYS)):
        cache_k[n, :, : t - 1] = k_cache
        cache_v[n, :, : t - 1] = v_cache
    q = np.stack([u[2].reshape(HQ * D) for u in users])[:, None]
    k = np.stack([u[3].reshape(HKV * D) for u in users])[:, None]
    v = np.stack([u[4].reshape(HKV * D) for u in users])[:, None]
    angle = np.arange(capacity)[:, None] * inv_freq()[None]
    cos, sin = np.cos(angle).astype(np.float32), np.sin(angle).astype(np.float32)
    past_k = ort.OrtValue.ortvalue_from_numpy(cache_k)
    past_v = ort.OrtValue.ortvalue_from_numpy(cache_v)
    out = ort.OrtValue.ortvalue_from_numpy(np.empty((batch, 1, HQ * D), dtype=np.float32))
    binding = session.io_binding()
    for name, value in (("query", q), ("key", k), ("value", v), ("cos_cache", cos),
                        ("sin_cache", sin),
                        ("seqlens_k", np.array([t - 1 for t in DECODE_KEYS], dtype=np.int32)),
                        ("total_sequence_length", np.array(capacity, dtype=np.int32))):
        binding.bind_cpu_input(name, value)
    binding.bind_ortvalue_input("past_key", past_k)
    binding.bind_ortvalue_input("past_value", past_v)
    binding.bind_ortvalue_output("output", out)
    binding.bind_ortvalue_output("present_key", past_k)
    binding.bind_ortvalue_output("present_value", past_v)

    def step():
        session.run_with_iobinding(binding)

    step()
    got = out.numpy()[:, 0].reshape(batch, HQ, D)
    err = max(relative_error(got[i], decode_reference(users[i], DECODE_KEYS[i])) for i in (0, 7))
    if not err < 1e-4:
        raise SystemExit(f"onnxruntime GQA batched decode differs from float64: {err:.3g}")
    return median_batch(step, rounds * 4), err


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pejit", default="build/tools/pejit/pejit")
    parser.add_argument("--peers-only", action="store_true", help="skip the pejit bench")
    args = parser.parse_args()

    if not args.peers_only:
        print("## pejit (`pejit bench --varlen`)\n", flush=True)
        subprocess.run([args.pejit, "bench", "--varlen", f"--repeats={args.rounds}"], check=True)

    import torch
    import onnxruntime

    torch.set_num_threads(args.threads)
    batch = sequences(np.random.default_rng(3))
    useful = sum(4.0 * HQ * D * s * (s + 1) / 2 for s in LENGTHS)
    torch_ms, torch_err = torch_varlen(batch, args.rounds)
    ort_ms, ort_err = ort_varlen(batch, args.rounds, args.threads)
    print("## Peers, same run: varlen prefill, 8 sequences (4096 tokens), hq=32 hkv=8 d=128, "
          "causal, RoPE, f32\n")
    print("| peer | median ms | useful GFLOP/s | float64 check (rel. error) |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| torch {torch.__version__}: HF RoPE + SDPA per sequence | {torch_ms:.2f} "
          f"| {useful / (torch_ms * 1e6):.1f} | {torch_err:.1e} |")
    print(f"| onnxruntime {onnxruntime.__version__}: GroupQueryAttention do_rotary=1 per "
          f"sequence, CPU EP | {ort_ms:.2f} | {useful / (ort_ms * 1e6):.1f} | {ort_err:.1e} |")
    users = decode_users(np.random.default_rng(4))
    torch_ms, torch_err = torch_decode(users, args.rounds)
    ort_ms, ort_err = ort_decode(users, args.rounds, args.threads)
    print(f"\n## Peers, same run: batched decode, 16 users, {sum(DECODE_KEYS)} keys in all, "
          "hq=32 hkv=8 d=128 f32\n")
    print("| peer | median step ms | float64 check (rel. error) |")
    print("| --- | ---: | ---: |")
    print(f"| torch {torch.__version__}: per user HF RoPE of the new q, k, cache write, SDPA "
          f"| {torch_ms:.3f} | {torch_err:.1e} |")
    print(f"| onnxruntime {onnxruntime.__version__}: GroupQueryAttention do_rotary=1, batch of 16 "
          f"padded to 4096, seqlens_k, CPU EP | {ort_ms:.3f} | {ort_err:.1e} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
