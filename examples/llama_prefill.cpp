// LLaMA-3-style prefill through pejit's C++ API: RoPE (rotate_half, theta
// 500000) fused into causal grouped-query attention (32 query heads over 8
// KV heads, head dim 128). Prints compile time, run time and GFLOP/s, and
// checks the last query rows of head 0 against the float64 reference.
//
//   llama_prefill [seq_len = 2048] [repeats = 5]
#include "pejit/reference/Attention.h"
#include "pejit/reference/Rope.h"
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  int64_t seq = argc > 1 ? std::atoll(argv[1]) : 2048;
  int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  pejit::Shape shape{/*batch=*/1,     /*queryHeads=*/32, /*kvHeads=*/8, seq, seq,
                     /*headDim=*/128, /*valueDim=*/128};
  pejit::AttentionSpec spec;
  spec.rope = pejit::ref::RopeConfig{};
  spec.rope->theta = 500000.0;
  spec.causal = true;

  pejit::Runtime runtime;
  auto start = Clock::now();
  pejit::Expected<pejit::X86Kernel> kernel = runtime.getX86(pejit::Spec::fromBuilder(spec, shape));
  double compileMs = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!kernel) {
    std::fprintf(stderr, "compile failed: %s\n", kernel.error().c_str());
    return 1;
  }

  std::mt19937 engine(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(32 * seq * 128), k(8 * seq * 128), v(8 * seq * 128), o(q.size());
  for (std::vector<float> *t : {&q, &k, &v})
    for (float &x : *t)
      x = dist(engine);
  std::vector<pejit::TensorView> inputs = {{q.data(), pejit::DType::F32, {1, 32, seq, 128}, {}},
                                           {k.data(), pejit::DType::F32, {1, 8, seq, 128}, {}},
                                           {v.data(), pejit::DType::F32, {1, 8, seq, 128}, {}}};
  pejit::TensorView out{o.data(), pejit::DType::F32, {1, 32, seq, 128}, {}};
  std::vector<double> times;
  for (int r = 0; r <= repeats; ++r) {
    auto t0 = Clock::now();
    pejit::Status status = kernel->run(inputs, out);
    if (!status) {
      std::fprintf(stderr, "run failed: %s\n", status.message().c_str());
      return 1;
    }
    if (r > 0) // the first run is a warm-up
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  double runMs = times[times.size() / 2];
  double gflop = 4.0 * 32 * seq * seq * 128 * 0.5 / 1e9; // causal: half

  // Float64 check of the last 16 query rows of head 0 (kv head 0).
  int64_t rows = std::min<int64_t>(16, seq);
  pejit::ref::Tensor q0({1, 1, rows, 128}), k0({1, 1, seq, 128}), v0({1, 1, seq, 128});
  for (int64_t i = 0; i < rows * 128; ++i)
    q0.data[i] = q[(seq - rows) * 128 + i];
  for (int64_t i = 0; i < seq * 128; ++i) {
    k0.data[i] = k[i];
    v0.data[i] = v[i];
  }
  std::vector<int64_t> qPos(rows), kPos(seq);
  for (int64_t i = 0; i < rows; ++i)
    qPos[i] = seq - rows + i;
  for (int64_t j = 0; j < seq; ++j)
    kPos[j] = j;
  pejit::ref::Tensor qr =
      pejit::ref::applyRope(*spec.rope, q0, pejit::ref::PositionIds({rows}, qPos), seq);
  pejit::ref::Tensor kr =
      pejit::ref::applyRope(*spec.rope, k0, pejit::ref::PositionIds({seq}, kPos), seq);
  pejit::ref::AttentionOptions options;
  options.causal = true;
  pejit::ref::Tensor expected = pejit::ref::attention(qr, kr, v0, options);
  double maxErr = 0, maxRef = 0;
  for (int64_t i = 0; i < rows * 128; ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    maxErr = std::max(maxErr, std::fabs(expected.data[i] - o[(seq - rows) * 128 + i]));
  }

  std::printf("LLaMA prefill: RoPE(theta=500000) + causal GQA 32/8, d=128, seq=%lld, f32\n",
              (long long)seq);
  // A second run finds the kernel in the disk cache (PEJIT_CACHE_DIR).
  std::printf(kernel->loadedFromDisk() ? "  disk cache hit   %8.1f ms\n"
                                       : "  JIT compile      %8.1f ms\n",
              compileMs);
  std::printf("  run (median %d)  %8.2f ms   %.1f GFLOP/s\n", repeats, runMs, gflop / runMs * 1e3);
  std::printf("  max rel. error vs float64 reference (last %lld rows, head 0): %.2e\n",
              (long long)rows, maxErr / maxRef);
  return maxErr / maxRef <= 1e-4 ? 0 : 1;
}
