// pejit run --target=nvidia (RunNvidia.cpp).
#ifndef PEJIT_TOOLS_PEJIT_RUNNVIDIA_H
#define PEJIT_TOOLS_PEJIT_RUNNVIDIA_H

#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/Pejit.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace pejit::cli {

struct NvidiaRunRequest {
  std::string file, arch;
  const Spec &spec;
  const FunctionSignature &signature;
  std::vector<std::string> inputs; ///< .npy paths, in argument order
  std::optional<std::string> output;
  bool check = false;
  /// With check: receives the max relative error (tests read it).
  double *maxRelativeError = nullptr;
};

/// Runs a compiled kernel on views (host buffers); the default is
/// NvidiaKernel::run (CUDA driver). Tests pass a fake to exercise the
/// output handling and the --check comparison without a GPU.
using NvidiaLauncher = std::function<Status(const NvidiaKernel &, const std::vector<TensorView> &,
                                            const TensorView &)>;

/// Compiles for the GPU, runs on the .npy inputs, writes/compares the output.
/// Returns the exit code (kExitOk, kExitError).
int runNvidia(const NvidiaRunRequest &request, const NvidiaLauncher &launch = {});

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_RUNNVIDIA_H
