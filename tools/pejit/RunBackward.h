// pejit run --backward (RunBackward.cpp): a forward source's gradients on
// .npy inputs, written to a directory, with a float64 check.
#ifndef PEJIT_TOOLS_PEJIT_RUNBACKWARD_H
#define PEJIT_TOOLS_PEJIT_RUNBACKWARD_H

#include "tools/pejit/TensorIO.h"

#include "pejit/runtime/Pejit.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pejit::cli {

struct BackwardRunOptions {
  std::string file;
  std::string gradOutput; ///< dO, float32 of the output's shape
  std::string gradsDir;   ///< where dq.npy, dk.npy, ... go ("" : not saved)
  int threads = 0;
  bool check = false;
  uint32_t seed = 0; ///< --check's directions
};

/// Runs the forward `spec`, then its backward, on `inputs` (the forward's, in
/// argument order); an exit code, with messages on stderr.
int runBackward(const BackwardRunOptions &options, const Spec &spec,
                std::vector<HostTensor> &inputs);

} // namespace pejit::cli

#endif // PEJIT_TOOLS_PEJIT_RUNBACKWARD_H
