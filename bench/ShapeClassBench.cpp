// `pejit bench --shape-classes`: what one kernel per shape class costs and
// buys (docs/shape-classes.md). LLaMA-style attention, 32 query heads on 8
// KV heads, d = 128, causal, RoPE theta 500000, f32.
//
// 1. The A/B: the kernel compiled for the exact lengths against the one
//    compiled for `?` lengths, at causal prefill s = 2048 and s = 512 and at
//    decode (sq = 1, skv = 4096). Rounds alternate static and dynamic; the
//    ratio dynamic / static of each round's medians, and their median.
// 2. The decode loop: 256 steps growing from 2048 to 2304 keys through one
//    kernel, its inputs views into a preallocated cache (as a generator
//    keeps it). Over a pre-rotated K cache (RoPE on Q only), alone and
//    with what a generator runs each step before it: the KV-append kernel
//    (docs/standalone-kernels.md) rotating the new K row into the cache,
//    and the new V row copied; and, for comparison, re-rotating all of K
//    every step. In f32 and in bf16 (every tensor). Compile count, compile
//    ms, the median step, and the step against the time to read K and V
//    once at this machine's measured read bandwidth.
#include "bench/AttentionBench.h"
#include "bench/Bandwidth.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

namespace {

constexpr int64_t kHeads = 32, kKvHeads = 8, kDim = 128;

ref::RopeConfig llamaRope() {
  ref::RopeConfig rope;
  rope.theta = 500000.0;
  return rope;
}

AttentionSpec llamaSpec(bool rotateKeys) {
  AttentionSpec spec;
  spec.rope = llamaRope();
  spec.ropeOnKey = rotateKeys;
  spec.causal = true;
  return spec;
}

Shape shapeOf(int64_t sq, int64_t skv) { return {1, kHeads, kKvHeads, sq, skv, kDim, kDim}; }

/// Q, K, V and the output of one call, views into buffers sized for
/// `capacity` keys: K and V rows [0, skv) of a [1, hkv, capacity, d] cache;
/// f32, or bf16 (every tensor, the output too).
struct Buffers {
  int64_t querySeq, capacity;
  DType dtype;
  std::vector<float> q, k, v, o;
  std::vector<uint16_t> q16, k16, v16, o16;
  Buffers(int64_t sq, int64_t cap, DType type = DType::F32)
      : querySeq(sq), capacity(cap), dtype(type) {
    std::mt19937 engine(11);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    q.resize(kHeads * sq * kDim);
    k.resize(kKvHeads * cap * kDim);
    v.resize(k.size());
    o.resize(q.size());
    for (std::vector<float> *t : {&q, &k, &v})
      for (float &x : *t)
        x = dist(engine);
    // bf16: the top half of each f32 (truncated, as the values need not be
    // exact here).
    auto narrow = [](const std::vector<float> &from, std::vector<uint16_t> &to) {
      to.resize(from.size());
      for (size_t i = 0; i < from.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &from[i], 4);
        to[i] = static_cast<uint16_t>(bits >> 16);
      }
    };
    if (dtype == DType::BF16) {
      narrow(q, q16);
      narrow(k, k16);
      narrow(v, v16);
      o16.resize(o.size());
    }
  }
  Status run(const X86Kernel &kernel, int64_t skv) {
    std::vector<int64_t> kvStrides{kKvHeads * capacity * kDim, capacity * kDim, kDim, 1};
    bool half = dtype == DType::BF16;
    auto data = [&](std::vector<float> &f, std::vector<uint16_t> &h) -> void * {
      return half ? static_cast<void *>(h.data()) : f.data();
    };
    return kernel.run({{data(q, q16), dtype, {1, kHeads, querySeq, kDim}, {}},
                       {data(k, k16), dtype, {1, kKvHeads, skv, kDim}, kvStrides},
                       {data(v, v16), dtype, {1, kKvHeads, skv, kDim}, kvStrides}},
                      {data(o, o16), dtype, {1, kHeads, querySeq, kDim}, {}});
  }
  /// A decode step's new K row (fresh[0..hkv d)) rotated by `append` into
  /// cache row `row`, and its V row copied there.
  Status append(const X86Kernel &append, int64_t row) {
    bool half = dtype == DType::BF16;
    int64_t unit = half ? 2 : 4;
    std::vector<int64_t> kvStrides{kKvHeads * capacity * kDim, capacity * kDim, kDim, 1};
    char *keys = half ? reinterpret_cast<char *>(k16.data()) : reinterpret_cast<char *>(k.data());
    char *values = half ? reinterpret_cast<char *>(v16.data()) : reinterpret_cast<char *>(v.data());
    const char *fresh = half ? reinterpret_cast<const char *>(q16.data())
                             : reinterpret_cast<const char *>(q.data());
    for (int64_t h = 0; h < kKvHeads; ++h)
      std::memcpy(values + (h * capacity + row) * kDim * unit, fresh + h * kDim * unit,
                  kDim * unit);
    int64_t position = row;
    return append.run({{const_cast<char *>(fresh), dtype, {1, kKvHeads, 1, kDim}, {}},
                       {&position, DType::I64, {1}, {}}},
                      {keys + row * kDim * unit, dtype, {1, kKvHeads, 1, kDim}, kvStrides});
  }
};

/// The builder's f32 source with every float tensor in bf16.
Spec bf16Spec(const Spec &f32) {
  std::string text = f32.source();
  for (size_t at = text.find("xf32>"); at != std::string::npos; at = text.find("xf32>", at))
    text.replace(at, 5, "xbf16>");
  Expected<Spec> spec = Spec::fromText(text, "<bf16 builder>");
  return spec ? *spec : f32;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

int staticVersusDynamic(Runtime &runtime, int repeats, int rounds) {
  std::printf("### Static lengths against `?` lengths (one kernel per shape class)\n\n"
              "| case | static ms | `?` ms | `?` / static, per round | median |\n"
              "| --- | ---: | ---: | --- | ---: |\n");
  struct Case {
    const char *name;
    int64_t sq, skv;
  };
  for (Case c : {Case{"prefill s=2048", 2048, 2048}, Case{"prefill s=512", 512, 512},
                 Case{"decode sq=1 skv=4096", 1, 4096}}) {
    Expected<X86Kernel> fixed =
        runtime.getX86(Spec::fromBuilder(llamaSpec(true), shapeOf(c.sq, c.skv)));
    Expected<X86Kernel> dynamic =
        runtime.getX86(Spec::fromBuilder(llamaSpec(true), shapeOf(kDynamicDim, kDynamicDim)));
    if (!fixed || !dynamic) {
      std::fprintf(stderr, "%s: %s\n", c.name, (!fixed ? fixed : dynamic).error().c_str());
      return 1;
    }
    Buffers buffers(c.sq, c.skv);
    std::vector<double> ratios, staticMs, dynamicMs;
    std::string perRound;
    for (int round = 0; round < rounds; ++round) {
      double a = medianMs(repeats, [&] { buffers.run(*fixed, c.skv); });
      double b = medianMs(repeats, [&] { buffers.run(*dynamic, c.skv); });
      staticMs.push_back(a);
      dynamicMs.push_back(b);
      ratios.push_back(b / a);
      char text[32];
      std::snprintf(text, sizeof text, "%s%.3f", round ? ", " : "", b / a);
      perRound += text;
    }
    std::printf("| %s | %.3f | %.3f | %s | %.3f |\n", c.name, median(staticMs), median(dynamicMs),
                perRound.c_str(), median(ratios));
  }
  std::printf("\n");
  return 0;
}

int decodeLoop(int threads, int repeats) {
  const int64_t first = 2048, steps = 256, capacity = first + steps;
  double bandwidth = measureReadBandwidthGBs(threads);
  std::printf("### Decode loop: %lld steps, keys %lld -> %lld, b=1 hq=32 hkv=8 d=128 f32\n\n"
              "Read bandwidth at start: %.1f GB/s (%d threads).\n\n"
              "| dtype | K cache | kernels compiled (loaded) | compile (load) ms | median step ms "
              "| K+V read once at median skv, ms | step / read |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |\n",
              (long long)steps, (long long)first, (long long)capacity, bandwidth, threads);
  enum class Cache { PreRotated, Appended, RotatedEveryStep };
  for (auto [dtype, cache] : {std::pair<DType, Cache>{DType::F32, Cache::PreRotated},
                              {DType::F32, Cache::Appended},
                              {DType::F32, Cache::RotatedEveryStep},
                              {DType::BF16, Cache::PreRotated},
                              {DType::BF16, Cache::Appended},
                              {DType::BF16, Cache::RotatedEveryStep}}) {
    bool rotateKeys = cache == Cache::RotatedEveryStep;
    Spec appendSpec = Spec::standaloneRope(llamaRope(), 1, kKvHeads, kDynamicDim, kDim, dtype);
    Runtime runtime({threads});
    Buffers buffers(1, capacity, dtype);
    Spec spec = Spec::fromBuilder(llamaSpec(rotateKeys), shapeOf(kDynamicDim, kDynamicDim));
    if (dtype == DType::BF16)
      spec = bf16Spec(spec);
    double compileMs = 0;
    std::vector<double> stepMs;
    for (int pass = 0; pass < std::max(1, repeats / 2); ++pass)
      for (int64_t step = 0; step < steps; ++step) {
        auto start = Clock::now();
        Expected<X86Kernel> kernel = runtime.getX86(spec); // a memory hit after the first
        if (!kernel) {
          std::fprintf(stderr, "decode: %s\n", kernel.error().c_str());
          return 1;
        }
        if (pass == 0 && step == 0)
          compileMs = kernel->compileMilliseconds();
        if (cache == Cache::Appended) {
          Expected<X86Kernel> append = runtime.getX86(appendSpec);
          Status st =
              append ? buffers.append(*append, first + step) : Status::error(append.error());
          if (!st) {
            std::fprintf(stderr, "decode: %s\n", st.message().c_str());
            return 1;
          }
          if (pass == 0 && step == 0)
            compileMs += append->compileMilliseconds();
        }
        if (Status st = buffers.run(*kernel, first + step + 1); !st) {
          std::fprintf(stderr, "decode: %s\n", st.message().c_str());
          return 1;
        }
        if (step > 0 || pass > 0) // the first step pays the compile
          stepMs.push_back(ms(start, Clock::now()));
      }
    double readBytes = 2.0 * kKvHeads * (first + steps / 2) * kDim * dtypeBytes(dtype);
    double readMs = readBytes / (bandwidth * 1e9) * 1e3;
    double step = median(stepMs);
    RuntimeStats stats = runtime.stats();
    std::printf("| %s | %s | %lld (%lld) | %.0f | %.3f | %.3f | %.2f |\n",
                dtype == DType::BF16 ? "bf16" : "f32",
                cache == Cache::RotatedEveryStep ? "rotated every step (RoPE on Q and K)"
                : cache == Cache::Appended       ? "KV-append of the new row + pre-rotated"
                                                 : "pre-rotated (RoPE on Q only)",
                (long long)stats.compiles, (long long)stats.diskHits, compileMs, step, readMs,
                step / readMs);
  }
  std::printf("\n");
  return 0;
}

} // namespace

int runShapeClassBench(int argc, char **argv) {
  int repeats = 9, rounds = 3;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--repeats=", 0) == 0)
      repeats = std::max(1, std::atoi(arg.c_str() + 10));
    else if (arg.rfind("--rounds=", 0) == 0)
      rounds = std::max(1, std::atoi(arg.c_str() + 9));
  }
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("pejit bench --shape-classes: %d threads, FMA peak %.1f GFLOP/s at start\n\n",
              threads, measurePeakFmaGflops(threads));
  Runtime runtime({threads});
  if (int rc = staticVersusDynamic(runtime, repeats, rounds))
    return rc;
  return decodeLoop(threads, repeats);
}

} // namespace pejit::bench
