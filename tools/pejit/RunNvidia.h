// pejit run --target=nvidia (RunNvidia.cpp).
#ifndef PEJIT_TOOLS_PEJIT_RUNNVIDIA_H
#define PEJIT_TOOLS_PEJIT_RUNNVIDIA_H

#include "runtime/Pejit.h"
#include "runtime/ReferenceInterpreter.h"

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
};

/// Compiles for the GPU, runs on the .npy inputs, writes/compares the output.
int runNvidia(const NvidiaRunRequest &request);

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_RUNNVIDIA_H
