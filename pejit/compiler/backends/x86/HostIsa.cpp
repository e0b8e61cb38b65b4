// The host's CPU features and the x86 ISA families (HostIsa.h).
#include "pejit/compiler/backends/x86/HostIsa.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <immintrin.h>

namespace pejit {

bool hostHasCpuFeature(const std::string &feature) {
  static const llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto it = features.find(feature);
  return it != features.end() && it->second;
}

std::string x86IsaProblemOnHost(X86Isa isa) {
  std::string missing = x86IsaMissingFlag(isa, hostHasCpuFeature);
  if (missing.empty())
    return "";
  return std::string("the x86 ISA family ") + x86IsaName(isa) + " needs the CPU flag " + missing +
         ", which this host (" + llvm::sys::getHostCPUName().str() + ") lacks";
}

namespace {

// Register-resident chains of f32 FMAs and of bf16 dot products (the
// products 1e-8: no overflow, no denormals), as bench/PeakFma.h times them.
constexpr int kChains = 24;
// Where each timed loop leaves its sum: a side effect, so no compiler can
// move a loop out of its timed region.
volatile float chainSink = 0;

/// Leaves lane 0 of the chains' sum in chainSink.
__attribute__((target("avx512f"))) void keepChains(const __m512 *acc) {
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c)
    sum = _mm512_add_ps(sum, acc[c]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  chainSink = lanes[0];
}

__attribute__((target("avx512f"), noinline)) void fmaChains(int64_t iters) {
  __m512 a = _mm512_set1_ps(0.9999f), b = _mm512_set1_ps(0.0001f), acc[kChains];
  for (int c = 0; c < kChains; ++c)
    acc[c] = _mm512_set1_ps(0.001f * c);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c)
      acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  keepChains(acc);
}

__attribute__((target("avx512f,avx512bf16"), noinline)) void dotChains(int64_t iters) {
  __m512bh x = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-4f), _mm512_set1_ps(1e-4f));
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c)
    acc[c] = _mm512_set1_ps(0.001f * c);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 24
    for (int c = 0; c < kChains; ++c)
      acc[c] = _mm512_dpbf16_ps(acc[c], x, x);
  }
  keepChains(acc);
}

/// The fastest of 5 runs of `iters` iterations, in seconds.
double fastestSeconds(void (*loop)(int64_t), int64_t iters) {
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    auto start = std::chrono::steady_clock::now();
    loop(iters);
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

} // namespace

bool bf16ProductsFasterOnHost() {
  static const bool faster = [] {
    if (!x86IsaMissingFlag(X86Isa::Avx512Bf16, hostHasCpuFeature).empty())
      return false;
    // 0.1-0.4 ms per run here. A dot is 4 FLOPs per lane, an FMA 2: it wins when
    // it issues at more than half the FMA's rate, by a margin noise on a
    // shared machine does not cross.
    const int64_t iters = 20000;
    double fma = fastestSeconds(fmaChains, iters), dot = fastestSeconds(dotChains, iters);
    if (std::getenv("PEJIT_DEBUG_ISA"))
      std::fprintf(stderr, "pejit: 20000 x 24 FMAs %.3f ms, bf16 dots %.3f ms\n", fma * 1e3,
                   dot * 1e3);
    return 2.0 * fma > 1.25 * dot;
  }();
  return faster;
}

Expected<X86Isa> resolveX86Isa(std::optional<X86Isa> requested) {
  if (!requested) {
    const char *env = std::getenv("PEJIT_X86_ISA");
    if (!env || !*env)
      return bestX86Isa(hostHasCpuFeature, bf16ProductsFasterOnHost());
    std::string error;
    requested = parseX86Isa(env, &error);
    if (!requested)
      return Expected<X86Isa>::error("PEJIT_X86_ISA: " + error);
  }
  if (!x86IsaBuilt(*requested))
    return Expected<X86Isa>::error(std::string("the x86 ISA family ") + x86IsaName(*requested) +
                                   " has no kernels yet (docs/status.md)");
  if (std::string problem = x86IsaProblemOnHost(*requested); !problem.empty())
    return Expected<X86Isa>::error(problem);
  return *requested;
}

void applyX86Isa(mlir::ModuleOp source, llvm::Module &module, const llvm::TargetMachine &machine) {
  auto name = source->getAttrOfType<mlir::StringAttr>(kX86IsaAttr);
  std::optional<X86Isa> isa = name ? parseX86Isa(name.getValue().str()) : std::nullopt;
  if (!isa)
    return;
  for (llvm::Function &function : module) {
    if (function.isDeclaration())
      continue;
    if (*isa == X86Isa::Avx2) {
      // The machine's features, then AVX-512 and AMX off (each clears the
      // features that imply it): no instruction past AVX2 on any host.
      std::string features = machine.getTargetFeatureString().str();
      features += std::string(features.empty() ? "" : ",") + "-avx512f,-amx-tile";
      function.addFnAttr("target-features", features);
      continue;
    }
    // Without these, a host tuned to prefer 256-bit vectors (Sapphire
    // Rapids, Zen 4) splits every 16-lane vector into two ymm halves.
    function.addFnAttr("prefer-vector-width", "512");
    function.addFnAttr("min-legal-vector-width", "512");
  }
}

} // namespace pejit
