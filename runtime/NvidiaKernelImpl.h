// What an NvidiaKernel holds (NvidiaKernel.cpp builds and runs it).
#ifndef PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
#define PEJIT_RUNTIME_NVIDIAKERNELIMPL_H

#include "runtime/Pejit.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pejit {

class NvidiaKernelImpl {
public:
  /// source -> fused -> tiled (gpu.module) -> unrolled -> PTX, then ptxas
  /// when found. An error names the stage.
  static Expected<std::shared_ptr<const NvidiaKernelImpl>> compile(const Spec &spec,
                                                                   const std::string &arch);
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;

  std::string arch, ptx, cubin, ptxasLog;
  std::map<std::string, std::string> stages;
  std::vector<int64_t> grid, block;
  std::vector<std::string> arguments;
  Shape shape;
  DType dtype = DType::F16, outDtype = DType::F32;
  int64_t scratchFloats = 0, queryPositionRows = 1, keyPositionRows = 1;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
