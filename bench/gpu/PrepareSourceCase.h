// The prepare half of the GPU check's source and backward cases
// (GpuSourceCases.h, GpuBackwardCases.h).
#ifndef PEJIT_BENCH_GPU_PREPARESOURCECASE_H
#define PEJIT_BENCH_GPU_PREPARESOURCECASE_H

#include "bench/gpu/GpuBackwardCases.h"
#include "bench/gpu/GpuSourceCases.h"
#include "pejit/runtime/Pejit.h"

#include <string>

namespace pejit::gpucheck {

/// Compiles `c` for `arch` and writes its kernel, fresh random inputs, the
/// kernel's position tables and the float64 reference into `dir`. Returns
/// "" or the error.
std::string prepareSourceCase(Runtime &runtime, const GpuSourceCase &c, const std::string &dir,
                              const std::string &arch);

/// The same for a backward case (GpuBackwardCases.h): the backward's
/// kernel, the inputs, O and dO, and the float64 dq, dk, dv.
std::string prepareBackwardCase(Runtime &runtime, const GpuBackwardCase &c, const std::string &dir,
                                const std::string &arch);

} // namespace pejit::gpucheck

#endif // PEJIT_BENCH_GPU_PREPARESOURCECASE_H
