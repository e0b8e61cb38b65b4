// bench/gpu_check.sh prepare: compiles every case of GpuCheckCases.h for the
// GPU check machine (sm_90: H200) into a kernel bundle, one file set per
// case: NAME.cubin (when ptxas is here), NAME.ptx, NAME.meta; the source
// cases (GpuSourceCases.h) add their inputs and float64 reference, the
// backward cases (GpuBackwardCases.h) theirs and the float64 gradients. Usage:
//   prepare_gpu_check OUT_DIR [ARCH]
#include "bench/gpu/GpuCheckCases.h"
#include "bench/gpu/PrepareSourceCase.h"
#include "pejit/runtime/Pejit.h"

#include <cstdio>
#include <fstream>
#include <string>

int main(int argc, char **argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: prepare_gpu_check OUT_DIR [ARCH=sm_90]\n");
    return 2;
  }
  std::string out = argv[1], arch = argc > 2 ? argv[2] : "sm_90";
  pejit::Runtime runtime;
  int failures = 0;
  for (const pejit::gpucheck::GpuCase &c : pejit::gpucheck::gpuCases()) {
    pejit::Expected<pejit::Spec> spec = pejit::Spec::fromText(pejit::gpucheck::caseMlir(c), c.name);
    if (!spec) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), spec.error().c_str());
      ++failures;
      continue;
    }
    pejit::Expected<pejit::NvidiaKernel> kernel = runtime.getNvidia(*spec, arch);
    if (!kernel) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), kernel.error().c_str());
      ++failures;
      continue;
    }
    std::ofstream(out + "/" + c.name + ".ptx", std::ios::binary) << kernel->ptx();
    if (!kernel->cubin().empty())
      std::ofstream(out + "/" + c.name + ".cubin", std::ios::binary) << kernel->cubin();
    std::ofstream(out + "/" + c.name + ".meta") << kernel->launchMeta();
    std::printf("%-34s %s  %zu bytes PTX, %zu bytes cubin\n", c.name.c_str(), arch.c_str(),
                kernel->ptx().size(), kernel->cubin().size());
  }
  for (const pejit::gpucheck::GpuSourceCase &c : pejit::gpucheck::gpuSourceCases()) {
    std::string error = pejit::gpucheck::prepareSourceCase(runtime, c, out, arch);
    if (!error.empty()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    std::printf("%-34s %s  kernel, inputs and float64 reference\n", c.name.c_str(), arch.c_str());
  }
  for (const pejit::gpucheck::GpuBackwardCase &c : pejit::gpucheck::gpuBackwardCases()) {
    std::string error = pejit::gpucheck::prepareBackwardCase(runtime, c, out, arch);
    if (!error.empty()) {
      std::fprintf(stderr, "%s: %s\n", c.name.c_str(), error.c_str());
      ++failures;
      continue;
    }
    std::printf("%-34s %s  backward kernel, inputs and float64 gradients\n", c.name.c_str(),
                arch.c_str());
  }
  return failures ? 1 : 0;
}
