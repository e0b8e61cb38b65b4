// `pejit bench --isa`: the forward in every x86 ISA family the host has
// (docs/isa.md), f32 and bf16, with the family's peak measured in the run.
//
// Cases (RoPE half, theta 10000, fused; d = 128): causal prefill at s = 2048
// and 4096 (b = 1, 16 heads), and decode steps (one query, 32 query heads
// on 8 KV heads, RoPE on the query: the cache holds K rotated) over 2048
// and 32768 keys. FLOPs = 4 b hq sq skv d, causal
// halved. Prefill is compute-bound: its fraction is of the family's peak
// (the f32 FMA peak at the family's width; for a kernel with bf16 products,
// the vdpbf16ps peak). Decode reads K and V once: its fraction is of the
// measured read bandwidth. Each time is the median of repeats after a
// warm-up; the peers are timed by bench/compare_isa_peers.py.
#include "bench/AttentionBench.h"
#include "bench/Bandwidth.h"
#include "bench/PeakFma.h"
#include "bench/Timing.h"
#include "pejit/compiler/backends/x86/HostIsa.h"
#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace pejit::bench {

namespace {

struct IsaCase {
  const char *name;
  int64_t heads, kvHeads, sq, skv;
  bool causal;
};

/// The float's bf16 (round to nearest even), as uint16 bits.
uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

} // namespace

int runIsaBench(int argc, char **argv) {
  const int repeats = repeatsOption(argc, argv, 5);
  const int threads = benchThreads();
  const int64_t d = 128;
  const IsaCase cases[] = {{"prefill-2048-causal", 16, 16, 2048, 2048, true},
                           {"prefill-4096-causal", 16, 16, 4096, 4096, true},
                           {"decode-2048 (32/8 heads)", 32, 8, 1, 2048, false},
                           {"decode-32768 (32/8 heads)", 32, 8, 1, 32768, false}};
  std::vector<X86Isa> families;
  for (X86Isa isa : allX86Isas())
    if (x86IsaBuilt(isa) && x86IsaProblemOnHost(isa).empty())
      families.push_back(isa);
  double ymmPeak = measurePeakFmaGflops(threads, FmaIsa::Avx2);
  double zmmPeak = hostHasCpuFeature("avx512f") ? measurePeakFmaGflops(threads, FmaIsa::Avx512) : 0;
  double dotPeak =
      hostHasCpuFeature("avx512bf16") ? measurePeakFmaGflops(threads, FmaIsa::Avx512Bf16) : 0;
  double bandwidth = measureReadBandwidthGBs(threads);
  std::printf("pejit bench --isa: %d threads; peaks measured in the run: f32 FMA %.1f GFLOP/s "
              "(ymm), %.1f (zmm); bf16 dot %.1f (vdpbf16ps); read bandwidth %.1f GB/s; the "
              "host's best family: %s\n\n",
              threads, ymmPeak, zmmPeak, dotPeak, bandwidth,
              x86IsaName(*resolveX86Isa(std::nullopt)));
  std::printf("| family | dtype | products | case | ms | GFLOP/s | GB/s | %% of bound |\n"
              "| --- | --- | --- | --- | ---: | ---: | ---: | ---: |\n");
  std::mt19937 engine(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Runtime runtime;
  for (const IsaCase &c : cases) {
    std::vector<int64_t> qDims{1, c.heads, c.sq, d}, kDims{1, c.kvHeads, c.skv, d};
    std::vector<float> q(c.heads * c.sq * d), k(c.kvHeads * c.skv * d), v(k.size()), o(q.size());
    for (std::vector<float> *t : {&q, &k, &v})
      for (float &x : *t)
        x = dist(engine);
    std::vector<uint16_t> qh(q.size()), kh(k.size()), vh(v.size()), oh(o.size());
    for (size_t n = 0; n < q.size(); ++n)
      qh[n] = toBf16(q[n]);
    for (size_t n = 0; n < k.size(); ++n) {
      kh[n] = toBf16(k[n]);
      vh[n] = toBf16(v[n]);
    }
    const double gflop = 4.0 * c.heads * c.sq * c.skv * d * (c.causal ? 0.5 : 1.0) / 1e9;
    for (DType dtype : {DType::F32, DType::BF16})
      for (X86Isa family : families) {
        // f32 kernels are the same in avx512 and avx512_bf16.
        if (dtype == DType::F32 && family == X86Isa::Avx512Bf16)
          continue;
        AttentionSpec spec;
        spec.rope = ref::RopeConfig{};
        // A decode step reads a cache of K rotated when it was appended
        // (docs/standalone-kernels.md): RoPE on the query only.
        spec.ropeOnKey = c.sq > 1;
        spec.causal = c.causal;
        spec.dtype = dtype;
        X86TileConfig tiles;
        tiles.isa = family;
        Expected<X86Kernel> kernel = runtime.getX86(
            Spec::fromBuilder(spec, Shape{1, c.heads, c.kvHeads, c.sq, c.skv, d, d}), tiles);
        if (!kernel) {
          std::fprintf(stderr, "pejit bench --isa: %s\n", kernel.error().c_str());
          return 1;
        }
        bool half = dtype == DType::BF16;
        std::vector<TensorView> inputs = {
            {half ? static_cast<void *>(qh.data()) : q.data(), dtype, qDims, {}},
            {half ? static_cast<void *>(kh.data()) : k.data(), dtype, kDims, {}},
            {half ? static_cast<void *>(vh.data()) : v.data(), dtype, kDims, {}}};
        TensorView out{half ? static_cast<void *>(oh.data()) : o.data(), dtype, qDims, {}};
        double ms = medianMs(repeats, [&] { (void)kernel->run(inputs, out); });
        Expected<std::string> tiled = kernel->ir("tiled");
        bool bf16Products = tiled && tiled->find("products = \"bf16\"") != std::string::npos;
        double bytes = 2.0 * k.size() * (half ? 2 : 4);
        double gbs = bytes / ms / 1e6;
        double peak = family == X86Isa::Avx2 ? ymmPeak : bf16Products ? dotPeak : zmmPeak;
        double fraction = c.sq == 1 ? gbs / bandwidth : gflop / ms * 1e3 / peak;
        std::printf("| %s | %s | %s | %s | %.2f | %.1f | %.1f | %.0f%% |\n", x86IsaName(family),
                    half ? "bf16" : "f32", bf16Products ? "bf16" : "f32", c.name, ms,
                    gflop / ms * 1e3, gbs, 100 * fraction);
        std::fflush(stdout);
      }
  }
  return 0;
}

} // namespace pejit::bench
