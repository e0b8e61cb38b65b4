// The attention benchmark behind `pejit bench` (see AttentionBench.h).
//
// Cases (b = 1, hq = hkv = 16, d = 128, RoPE half with theta 10000, f32):
// prefill s = 512 / 2048 / 4096, causal and not, and decode (sq = 1,
// skv = 4096). FLOPs = 4 * b * hq * sq * skv * d, causal counted as half.
// Every timing is the median of repeats after one warm-up run; the fused
// kernel also reports its fastest run ("best"). Buffers are 64-byte aligned.
#include "bench/AttentionBench.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace pejit::bench {

namespace {

/// 64-byte aligned storage, as a framework's tensors have (PyTorch's CPU
/// allocator aligns to 64): the buffers of both pejit and the peer start on
/// a cache line.
template <typename T> struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <typename U> CacheLineAllocator(const CacheLineAllocator<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t{64}));
  }
  void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const CacheLineAllocator &) const { return true; }
  bool operator!=(const CacheLineAllocator &) const { return false; }
};
using Buffer = std::vector<float, CacheLineAllocator<float>>;

struct BenchCase {
  std::string name;
  int64_t sq, skv;
  bool causal;
};

/// The unfused path's RoPE pass: HF-style rotate_half over a [1, h, s, d]
/// tensor into a new buffer, cos/sin recomputed per call like a model
/// would, rows split over the thread pool.
void ropePass(ThreadPool &pool, const float *x, float *out, int64_t heads, int64_t seq, int64_t d,
              int64_t firstPosition, std::vector<float> &cosTable, std::vector<float> &sinTable) {
  int64_t half = d / 2;
  cosTable.resize(seq * half);
  sinTable.resize(seq * half);
  pool.parallelFor(seq, [&](int64_t s) {
    for (int64_t c = 0; c < half; ++c) {
      double angle = static_cast<double>(firstPosition + s) * std::pow(10000.0, -2.0 * c / d);
      cosTable[s * half + c] = static_cast<float>(std::cos(angle));
      sinTable[s * half + c] = static_cast<float>(std::sin(angle));
    }
  });
  pool.parallelFor(heads * seq, [&](int64_t row) {
    const float *src = x + row * d;
    float *dst = out + row * d;
    const float *cs = &cosTable[(row % seq) * half], *sn = &sinTable[(row % seq) * half];
    for (int64_t c = 0; c < half; ++c) {
      dst[c] = src[c] * cs[c] - src[c + half] * sn[c];
      dst[c + half] = src[c + half] * cs[c] + src[c] * sn[c];
    }
  });
}

/// Naive attention in f32: scores row by row, softmax, then P.V (no tiling).
void naiveAttention(ThreadPool &pool, const float *q, const float *k, const float *v, float *o,
                    int64_t heads, int64_t sq, int64_t skv, int64_t d, bool causal) {
  float scale = 1.0f / std::sqrt(static_cast<float>(d));
  pool.parallelFor(heads * sq, [&](int64_t row) {
    int64_t h = row / sq, i = row % sq;
    std::vector<float> p(skv);
    const float *qi = q + row * d;
    float maxScore = -INFINITY;
    int64_t visible = causal ? std::min(skv, i + (skv - sq) + 1) : skv;
    for (int64_t j = 0; j < visible; ++j) {
      const float *kj = k + (h * skv + j) * d;
      float s = 0;
      for (int64_t c = 0; c < d; ++c)
        s += qi[c] * kj[c];
      p[j] = s * scale;
      maxScore = std::max(maxScore, p[j]);
    }
    float sum = 0;
    for (int64_t j = 0; j < visible; ++j)
      sum += (p[j] = std::exp(p[j] - maxScore));
    float *oi = o + row * d;
    std::fill(oi, oi + d, 0.0f);
    for (int64_t j = 0; j < visible; ++j) {
      const float *vj = v + (h * skv + j) * d;
      for (int64_t c = 0; c < d; ++c)
        oi[c] += p[j] / sum * vj[c];
    }
  });
}

struct Row {
  BenchCase c;
  double gflop = 0;
  double fusedMs = 0, unfusedMs = 0, naiveMs = -1, compileMs = 0, hitUs = 0, diskHitMs = 0;
  double peak = 0;   // median FMA peak sampled between the fused runs
  double bestMs = 0; // fastest fused run
};

} // namespace

int runAttentionBench(int argc, char **argv) {
  bool json = false, quick = false;
  int repeats = 5;
  std::string only;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json")
      json = true;
    else if (arg == "--quick")
      quick = true;
    else if (arg.rfind("--repeats=", 0) == 0)
      repeats = std::max(1, std::atoi(arg.c_str() + 10));
    else if (arg.rfind("--cases=", 0) == 0)
      only = arg.substr(8);
    else if (arg == "--encodings")
      return runEncodingBench(argc, argv);
    else if (arg == "--shape-classes")
      return runShapeClassBench(argc, argv);
    else if (arg == "--varlen")
      return runVarlenBench(argc, argv);
    else if (arg == "--rope")
      return runRopeBench(argc, argv);
    else if (arg == "--linear")
      return runLinearBench(argc, argv);
    else if (arg == "--standalone")
      return runStandaloneBench(argc, argv);
    else if (arg == "--backward")
      return runBackwardBench(argc, argv);
    else if (arg == "--isa")
      return runIsaBench(argc, argv);
    else {
      std::fprintf(stderr,
                   "pejit bench: unknown argument '%s'\n"
                   "usage: pejit bench [--json] [--repeats=N] [--quick] "
                   "[--cases=prefill-512,prefill-2048-causal,decode-4096,...]\n",
                   arg.c_str());
      return 2;
    }
  }
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t heads = 16, d = 128;
  std::vector<BenchCase> cases;
  for (int64_t s : {512, 2048, 4096})
    for (bool causal : {false, true})
      cases.push_back({"prefill-" + std::to_string(s) + (causal ? "-causal" : ""), s, s, causal});
  cases.push_back({"decode-4096", 1, 4096, false});
  if (quick)
    cases = {cases[0], cases[1], cases.back()};
  if (!only.empty())
    cases.erase(std::remove_if(cases.begin(), cases.end(),
                               [&](const BenchCase &c) {
                                 return ("," + only + ",").find("," + c.name + ",") ==
                                        std::string::npos;
                               }),
                cases.end());

  double peak = measurePeakFmaGflops(threads);
  std::fprintf(stderr, "fp32 FMA peak (%s, %d threads): %.1f GFLOP/s\n", fmaIsaName(detectFmaIsa()),
               threads, peak);
  ThreadPool pool(threads);
  std::mt19937 engine(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<Row> rows;
  for (const BenchCase &c : cases) {
    Row row{c};
    row.gflop = 4.0 * heads * c.sq * c.skv * d * (c.causal ? 0.5 : 1.0) / 1e9;
    Buffer q(heads * c.sq * d), k(heads * c.skv * d), v(k.size()), o(q.size());
    for (Buffer *t : {&q, &k, &v})
      for (float &x : *t)
        x = dist(engine);
    Shape shape{1, heads, heads, c.sq, c.skv, d, d};
    std::vector<int64_t> qDims{1, heads, c.sq, d}, kDims{1, heads, c.skv, d};
    auto views = [&](float *qp, float *kp) {
      return std::vector<TensorView>{{qp, DType::F32, qDims, {}},
                                     {kp, DType::F32, kDims, {}},
                                     {v.data(), DType::F32, kDims, {}}};
    };
    TensorView out{o.data(), DType::F32, qDims, {}};

    // Fused: RoPE inside the kernel. A fresh Runtime measures a cold compile.
    AttentionSpec fusedSpec;
    fusedSpec.rope = ref::RopeConfig{};
    fusedSpec.causal = c.causal;
    // Cold compile: median of 3 fresh runtimes, each with an empty disk cache
    // of its own (this VM's timings wander); then a disk hit: a fresh
    // Runtime on the last of those caches, as a second process would see.
    std::vector<double> compiles;
    std::string coldDir;
    std::vector<std::string> coldDirs;
    for (int i = 0; i < 3; ++i) {
      char dirTemplate[] = "/tmp/pejit-bench-cache-XXXXXX";
      coldDir = mkdtemp(dirTemplate) ? dirTemplate : "";
      coldDirs.push_back(coldDir);
      Runtime cold({1, coldDir});
      auto t0 = Clock::now();
      Expected<X86Kernel> kernel = cold.getX86(Spec::fromBuilder(fusedSpec, shape));
      compiles.push_back(ms(t0, Clock::now()));
      if (!kernel) {
        std::fprintf(stderr, "%s: %s\n", c.name.c_str(), kernel.error().c_str());
        return 1;
      }
    }
    std::sort(compiles.begin(), compiles.end());
    row.compileMs = compiles[1];
    {
      Runtime fromDisk({1, coldDir});
      auto t0 = Clock::now();
      Expected<X86Kernel> kernel = fromDisk.getX86(Spec::fromBuilder(fusedSpec, shape));
      row.diskHitMs = ms(t0, Clock::now());
      if (!kernel || !kernel->loadedFromDisk())
        row.diskHitMs = -1; // the disk cache is off (PEJIT_DISABLE_CACHE)
    }
    for (const std::string &dir : coldDirs) {
      std::error_code ignored;
      if (!dir.empty())
        std::filesystem::remove_all(dir, ignored);
    }
    Runtime runtime({threads});
    Expected<X86Kernel> fused = runtime.getX86(Spec::fromBuilder(fusedSpec, shape));
    if (!fused) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), fused.error().c_str());
      return 1;
    }
    // Cache hit: building the spec and looking it up, as a caller would.
    auto start = Clock::now();
    for (int i = 0; i < 100; ++i)
      (void)runtime.getX86(Spec::fromBuilder(fusedSpec, shape));
    row.hitUs = ms(start, Clock::now()) * 10.0;
    int reps = c.sq * c.skv >= 2048 * 2048 ? repeats : 3 * repeats;
    Interleaved fusedRuns =
        medianWithPeak(reps, threads, [&] { (void)fused->run(views(q.data(), k.data()), out); });
    row.fusedMs = fusedRuns.kernelMs;
    row.peak = fusedRuns.peakGflops;
    row.bestMs = fusedRuns.bestMs;

    // Unfused: a RoPE pass writes rotated Q and K, then attention without RoPE.
    AttentionSpec plainSpec;
    plainSpec.causal = c.causal;
    Expected<X86Kernel> plain = runtime.getX86(Spec::fromBuilder(plainSpec, shape));
    Buffer qr(q.size()), kr(k.size());
    std::vector<float> cs, sn;
    row.unfusedMs = medianMs(reps, [&] {
      ropePass(pool, q.data(), qr.data(), heads, c.sq, d, c.skv - c.sq, cs, sn);
      ropePass(pool, k.data(), kr.data(), heads, c.skv, d, 0, cs, sn);
      (void)plain->run(views(qr.data(), kr.data()), out);
    });

    // Naive (untiled f32 loops), where it finishes in seconds.
    if (c.sq * c.skv <= 2048 * 2048)
      row.naiveMs = medianMs(1, [&] {
        ropePass(pool, q.data(), qr.data(), heads, c.sq, d, c.skv - c.sq, cs, sn);
        ropePass(pool, k.data(), kr.data(), heads, c.skv, d, 0, cs, sn);
        naiveAttention(pool, qr.data(), kr.data(), v.data(), o.data(), heads, c.sq, c.skv, d,
                       c.causal);
      });
    rows.push_back(row);
    std::fprintf(stderr, "  %s done\n", c.name.c_str());
  }

  if (json) {
    for (const Row &r : rows)
      std::printf("{\"case\": \"%s\", \"sq\": %lld, \"skv\": %lld, \"causal\": %s, "
                  "\"threads\": %d, \"peak_gflops\": %.1f, \"fused_ms\": %.3f, "
                  "\"fused_gflops\": %.1f, \"fused_peak_fraction\": %.3f, "
                  "\"fused_best_ms\": %.3f, \"fused_best_peak_fraction\": %.3f, "
                  "\"unfused_ms\": %.3f, \"naive_ms\": %.3f, \"compile_ms\": %.1f, "
                  "\"cache_hit_us\": %.1f, \"disk_hit_ms\": %.2f}\n",
                  r.c.name.c_str(), (long long)r.c.sq, (long long)r.c.skv,
                  r.c.causal ? "true" : "false", threads, r.peak, r.fusedMs,
                  r.gflop / r.fusedMs * 1e3, r.gflop / r.fusedMs * 1e3 / r.peak, r.bestMs,
                  r.gflop / r.bestMs * 1e3 / r.peak, r.unfusedMs, r.naiveMs, r.compileMs, r.hitUs,
                  r.diskHitMs);
    return 0;
  }
  std::printf("pejit bench: b=1 hq=hkv=16 d=128 f32, RoPE half, %d threads, "
              "peak %.1f GFLOP/s at start;\n%% of peak divides the median fused run by the "
              "median peak sampled between the fused runs (column \"peak\"); \"best\" "
              "divides the fastest run by that peak\n\n",
              threads, peak);
  std::printf("| case | fused ms | GFLOP/s | peak | %% of peak | best | unfused ms | "
              "fused speedup | naive ms | cold compile ms | disk hit ms | memory hit us |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: |\n");
  for (const Row &r : rows) {
    char naive[32] = "-";
    if (r.naiveMs >= 0)
      std::snprintf(naive, sizeof(naive), "%.1f", r.naiveMs);
    std::printf("| %s | %.2f | %.1f | %.0f | %.0f%% | %.0f%% | %.2f | %.2fx | %s | %.0f | %.1f | "
                "%.1f |\n",
                r.c.name.c_str(), r.fusedMs, r.gflop / r.fusedMs * 1e3, r.peak,
                100.0 * r.gflop / r.fusedMs * 1e3 / r.peak,
                100.0 * r.gflop / r.bestMs * 1e3 / r.peak, r.unfusedMs, r.unfusedMs / r.fusedMs,
                naive, r.compileMs, r.diskHitMs, r.hitUs);
  }
  return 0;
}

} // namespace pejit::bench
