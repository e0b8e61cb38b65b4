"""The Python call overhead of pejit.attention on a warm cache, for a
decode-sized call (issue 18's target: 20 us or less over the C++ call).

    flock /tmp/pejit-bench.lock $(scripts/python.sh) bench/python_overhead.py

Times, as medians of many calls on the same buffers: the kernel's run()
from C++ (no Python in the loop), Kernel.run from Python, pejit.attention
on NumPy arrays and on torch tensors, and torch.ops.pejit.attention.
"""
import os
import platform
import statistics
import time

import numpy as np

import pejit
from pejit._tensors import buffer

try:
    import torch
    import pejit.torch as pejit_torch
except ImportError:
    torch = None

REPEATS = int(os.environ.get("REPEATS", "2000"))


def median_us(fn, repeats=REPEATS):
    for _ in range(50):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        fn()
        times.append((time.perf_counter_ns() - start) / 1e3)
    return statistics.median(times)


def main():
    # A small decode step, so that the kernel's own time (and its jitter)
    # does not hide the microseconds around it.
    b, hq, hkv, skv, d = 1, 8, 2, int(os.environ.get("SKV", "64")), 64
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, hq, 1, d)).astype(np.float32)
    k = rng.standard_normal((b, hkv, skv, d)).astype(np.float32)
    v = rng.standard_normal((b, hkv, skv, d)).astype(np.float32)
    out = np.empty((b, hq, 1, d), np.float32)
    # ROPE=0: causal attention alone, whose kernel takes a few microseconds,
    # so the overhead is measured against less jitter.
    rope = os.environ.get("ROPE", "1") == "1"
    options = dict(rope={"rope_theta": 500000.0} if rope else None, causal=True)
    pejit.attention(q, k, v, out=out, **options)  # compile (or load) once
    kernel = next(iter(pejit._attention._kernels.values()))
    views = [buffer(x, "x")[0] for x in (q, k, v)]
    rows = [("C++ run() loop (no Python)",
             kernel._native.time_run(views, out, [False] * 4, REPEATS))]
    rows.append(("Kernel.run (Python, NumPy)", median_us(lambda: kernel.run(q, k, v, out=out))))
    rows.append(("pejit.attention (NumPy, out=)",
                 median_us(lambda: pejit.attention(q, k, v, out=out, **options))))
    rows.append(("pejit.attention (NumPy, allocates)",
                 median_us(lambda: pejit.attention(q, k, v, **options))))
    if torch is not None:
        tq, tk, tv, tout = (torch.from_numpy(x) for x in (q, k, v, out))
        rows.append(("pejit.attention (torch, out=)",
                     median_us(lambda: pejit.attention(tq, tk, tv, out=tout, **options))))
        layer = pejit_torch.Attention(**options)
        rows.append(("torch.ops.pejit.attention", median_us(lambda: layer(tq, tk, tv))))
    else:
        print("torch is not installed: torch rows skipped")
    base = rows[0][1]
    print(f"decode call b={b} hq={hq} hkv={hkv} sq=1 skv={skv} d={d}, "
          f"{'RoPE + ' if rope else ''}causal, f32; "
          f"{platform.processor() or platform.machine()}, median of {REPEATS}")
    print("| call | median us | over C++ us |")
    print("| --- | --- | --- |")
    for name, us in rows:
        print(f"| {name} | {us:.1f} | {us - base:+.1f} |")


if __name__ == "__main__":
    main()
