// What an NvidiaKernel holds (NvidiaKernel.cpp builds and runs it).
#ifndef PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
#define PEJIT_RUNTIME_NVIDIAKERNELIMPL_H

#include "runtime/X86KernelImpl.h"
#include "runtime/Pejit.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace pejit {

class NvidiaKernelImpl : public KernelDescription {
public:
  /// source -> fused -> tiled (gpu.module) -> unrolled -> PTX, then ptxas
  /// when found. An error names the stage.
  static Expected<std::shared_ptr<const NvidiaKernelImpl>>
  compile(const Spec &spec, const std::string &arch, const NvidiaTileConfig &tiles);
  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;

  /// As a disk cache entry: the cubin is the object, the PTX, the ptxas
  /// report and the launch description ("nvidia.meta") are stages.
  KernelArtifact toArtifact() const;
  /// Back from a disk cache entry; an error when it is not an nvidia kernel.
  static Expected<std::shared_ptr<const NvidiaKernelImpl>> fromArtifact(const KernelArtifact &a);

  std::string arch, ptx, cubin, ptxasLog;
  std::map<std::string, std::string> stages;
  std::vector<int64_t> grid, block;
  int64_t splits = 1, partialOutputFloats = 0, partialRowFloats = 0;
  std::vector<int64_t> combineGrid;
};

} // namespace pejit

#endif // PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
