// pejit-peak-fma: this machine's fp32 FMA peak on 1 thread and on N threads.
//
//   pejit-peak-fma [N] [--json] [--isa=avx2|avx512|avx512_bf16] [--repeats=R]
//
// N defaults to the number of hardware threads. --isa=avx2 forces the 256-bit
// kernel on an AVX-512 machine (to see what a ymm-only kernel can reach).
#include "PeakFma.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

int usage(const char *argv0) {
  std::fprintf(stderr, "usage: %s [N] [--json] [--isa=avx2|avx512|avx512_bf16] [--repeats=R]\n",
               argv0);
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  using namespace pejit::bench;
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1)
    threads = 1;
  bool json = false;
  int repeats = 5;
  FmaIsa isa = detectFmaIsa();

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--isa=avx2") {
      isa = FmaIsa::Avx2;
    } else if (arg == "--isa=avx512") {
      if (detectFmaIsa() != FmaIsa::Avx512) {
        std::fprintf(stderr, "this CPU has no AVX-512F\n");
        return 1;
      }
      isa = FmaIsa::Avx512;
    } else if (arg == "--isa=avx512_bf16") {
      if (!hasBf16Dot()) {
        std::fprintf(stderr, "this CPU has no AVX-512-BF16\n");
        return 1;
      }
      isa = FmaIsa::Avx512Bf16;
    } else if (arg.rfind("--repeats=", 0) == 0) {
      repeats = std::atoi(arg.c_str() + std::strlen("--repeats="));
      if (repeats < 1)
        return usage(argv[0]);
    } else if (arg == "-h" || arg == "--help") {
      return usage(argv[0]);
    } else {
      char *end = nullptr;
      long n = std::strtol(arg.c_str(), &end, 10);
      if (*end != '\0' || n < 1 || n > 4096)
        return usage(argv[0]);
      threads = static_cast<int>(n);
    }
  }

  double one = measurePeakFmaGflops(1, isa, repeats);
  double many = measurePeakFmaGflops(threads, isa, repeats);

  if (json) {
    std::printf("{\"isa\": \"%s\", \"threads\": %d, \"gflops_1thread\": %.2f, "
                "\"gflops_nthreads\": %.2f}\n",
                fmaIsaName(isa), threads, one, many);
  } else {
    std::printf("fp32 FMA peak (%s, register-resident, median of %d)\n", fmaIsaName(isa), repeats);
    std::printf("  %3d thread : %9.2f GFLOP/s\n", 1, one);
    std::printf("  %3d threads: %9.2f GFLOP/s (%.2f per thread)\n", threads, many, many / threads);
  }
  return 0;
}
