// Header-only measurement of this machine's fp32 FMA peak (GFLOP/s), the
// roofline ceiling pejit's kernels are judged against. Used by
// bench/peak_fma.cpp and meant for the future `pejit bench` command.
//
// The kernel keeps independent FMA chains entirely in registers: no loads, no
// stores, so only FMA issue throughput limits it. Chains needed = FMA latency x
// FMA pipes (Zen 3: 4 x 2 = 8; Skylake-X: 4 x 2 = 8), so 12 ymm / 24 zmm chains
// leave margin. Both kernels carry target attributes so the header compiles
// without -march flags and picks the ISA at run time.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace pejit::bench {

/// Avx512Bf16: vdpbf16ps, two bf16 products per f32 lane (4 FLOPs per lane
/// per instruction): the ceiling of kernels that multiply in bf16.
enum class FmaIsa { Avx2, Avx512, Avx512Bf16 };

inline const char *fmaIsaName(FmaIsa isa) {
  return isa == FmaIsa::Avx512Bf16 ? "avx512_bf16" : isa == FmaIsa::Avx512 ? "avx512" : "avx2";
}

inline bool hasBf16Dot() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

inline FmaIsa detectFmaIsa() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") ? FmaIsa::Avx512 : FmaIsa::Avx2;
}

// Keeps the accumulators observable so the loop cannot be deleted.
inline volatile float peakFmaSink = 0.0f;

namespace detail {

constexpr int kAvx2Chains = 12;   // of 16 ymm registers, 2 hold the constants
constexpr int kAvx512Chains = 24; // of 32 zmm registers

// acc = acc * a + b converges to b / (1 - a) = 1: no overflow, no denormals
// (which would slow some cores down), whatever the iteration count.
constexpr float kMul = 0.9999f;
constexpr float kAdd = 0.0001f;

__attribute__((target("avx2,fma"), noinline)) inline float fmaLoopAvx2(std::int64_t iters) {
  const __m256 a = _mm256_set1_ps(kMul);
  const __m256 b = _mm256_set1_ps(kAdd);
  __m256 acc[kAvx2Chains];
  for (int c = 0; c < kAvx2Chains; ++c)
    acc[c] = _mm256_set1_ps(0.001f * static_cast<float>(c));
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kAvx2Chains; ++c)
      acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 sum = acc[0];
  for (int c = 1; c < kAvx2Chains; ++c)
    sum = _mm256_add_ps(sum, acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  float total = 0.0f;
  for (float l : lanes)
    total += l;
  return total;
}

// The sum of every lane of the 24 zmm chains. A plain store + scalar sum:
// GCC 12's _mm512_reduce_add_ps trips -Wuninitialized inside its own header.
__attribute__((target("avx512f"))) inline float sumChains512(const __m512 *acc) {
  __m512 sum = acc[0];
  for (int c = 1; c < kAvx512Chains; ++c)
    sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0.0f;
  for (float l : lanes)
    total += l;
  return total;
}

__attribute__((target("avx512f"), noinline)) inline float fmaLoopAvx512(std::int64_t iters) {
  const __m512 a = _mm512_set1_ps(kMul);
  const __m512 b = _mm512_set1_ps(kAdd);
  __m512 acc[kAvx512Chains];
  for (int c = 0; c < kAvx512Chains; ++c)
    acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int c = 0; c < kAvx512Chains; ++c)
      acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  return sumChains512(acc);
}

// acc += a[2l] b[2l] + a[2l+1] b[2l+1]: the products 1e-8 each, so 24
// chains stay far from overflow at any iteration count.
__attribute__((target("avx512f,avx512bf16"), noinline)) inline float
dotLoopAvx512Bf16(std::int64_t iters) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  const __m512bh b = a;
  __m512 acc[kAvx512Chains];
  for (int c = 0; c < kAvx512Chains; ++c)
    acc[c] = _mm512_set1_ps(0.001f * static_cast<float>(c));
  for (std::int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int c = 0; c < kAvx512Chains; ++c)
      acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  return sumChains512(acc);
}

inline float runFmaLoop(FmaIsa isa, std::int64_t iters) {
  if (isa == FmaIsa::Avx512Bf16)
    return dotLoopAvx512Bf16(iters);
  return isa == FmaIsa::Avx512 ? fmaLoopAvx512(iters) : fmaLoopAvx2(iters);
}

// FLOPs of one loop iteration: chains x lanes x 2 (an FMA is a mul and an
// add), x 4 for a bf16 dot (two of each).
inline double flopsPerIter(FmaIsa isa) {
  if (isa == FmaIsa::Avx512Bf16)
    return kAvx512Chains * 16 * 4.0;
  return isa == FmaIsa::Avx512 ? kAvx512Chains * 16 * 2.0 : kAvx2Chains * 8 * 2.0;
}

// Runs the loop on `threads` threads released together; returns wall seconds.
inline double timeThreads(FmaIsa isa, int threads, std::int64_t iters) {
  std::atomic<bool> go{false};
  std::atomic<int> ready{0};
  std::vector<float> sums(static_cast<size_t>(threads), 0.0f);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      sums[static_cast<size_t>(t)] = runFmaLoop(isa, iters);
    });
  }
  // Start the clock only once every thread is spinning, so thread creation
  // is not timed.
  while (ready.load() < threads) {
  }
  auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto &th : pool)
    th.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  float total = 0.0f;
  for (float s : sums)
    total += s;
  peakFmaSink = peakFmaSink + total;
  return seconds;
}

} // namespace detail

// Median GFLOP/s of `repeats` runs of ~`targetSeconds` each, on `threads`
// threads (each running its own chains), for the given ISA.
inline double measurePeakFmaGflops(int threads, FmaIsa isa, int repeats = 5,
                                   double targetSeconds = 0.2) {
  threads = std::max(threads, 1);
  repeats = std::max(repeats, 1);
  // Calibrate the iteration count on one thread; also warms up clocks.
  std::int64_t iters = 1 << 16;
  double seconds = detail::timeThreads(isa, 1, iters);
  while (seconds < 0.02) {
    iters *= 4;
    seconds = detail::timeThreads(isa, 1, iters);
  }
  iters = std::max<std::int64_t>(1, static_cast<std::int64_t>(iters * targetSeconds / seconds));

  std::vector<double> gflops;
  for (int r = 0; r < repeats; ++r) {
    double s = detail::timeThreads(isa, threads, iters);
    gflops.push_back(detail::flopsPerIter(isa) * static_cast<double>(iters) * threads / s * 1e-9);
  }
  std::nth_element(gflops.begin(), gflops.begin() + repeats / 2, gflops.end());
  return gflops[static_cast<size_t>(repeats / 2)];
}

// Peak with the widest ISA this CPU has.
inline double measurePeakFmaGflops(int threads) {
  return measurePeakFmaGflops(threads, detectFmaIsa());
}

} // namespace pejit::bench
