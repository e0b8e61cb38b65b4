// What an NvidiaKernel holds (NvidiaKernel.cpp): the artifact the nvidia
// stage table produced (or the disk cache gave back) and its launch
// description, read from the artifact's nvidia.meta.
#ifndef PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
#define PEJIT_RUNTIME_NVIDIAKERNELIMPL_H

#include "pejit/core/KernelArtifact.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cuda/AttentionLaunch.h"

#include <functional>
#include <memory>
#include <string>

namespace pejit {

class NvidiaKernelImpl : public KernelDescription {
public:
  /// Runs the nvidia stage table (pejit/compiler/backends/nvidia/NvidiaBackend.h).
  /// An error names the stage.
  static Expected<std::shared_ptr<const NvidiaKernelImpl>>
  compile(const Spec &spec, const std::string &arch, const NvidiaTileConfig &tiles);
  /// From an artifact (a fresh compile's, or a disk cache entry); an error
  /// when it is not an nvidia kernel or its nvidia.meta is damaged.
  static Expected<std::shared_ptr<const NvidiaKernelImpl>> fromArtifact(KernelArtifact artifact);

  Status run(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// run for a standalone kernel (launch.kernel pejit_transform or
  /// pejit_embed): one launch over the call's rows.
  Status runStandalone(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// run for linear attention (launch.kernel pejit_linear): one launch, the
  /// carried state read and written back.
  Status runLinear(const std::vector<TensorView> &inputs, const TensorView &out) const;
  /// The attention backward's run (launch.kernel pejit_backward,
  /// NvidiaBackward.cpp): dq, dk, dv and the operand gradients.
  Status runBackward(const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &gradients) const;
  Expected<std::string> stage(const std::string &name) const;

  KernelArtifact artifact; ///< what the disk cache stores
  NvidiaLaunch launch;
  const std::string &ptx() const { return artifact.stages.at("ptx"); }
  const std::string &cubin() const { return artifact.objects.at(0); }
  const std::string &ptxasLog() const { return artifact.stages.at("ptxas-log"); }
};

/// Launches one part of a call (NvidiaCall.cpp): cuda::runAttention.
using NvidiaPartLauncher =
    std::function<cuda::Status(const cuda::AttentionKernelImage &, const cuda::AttentionBuffers &)>;

/// Replaces every part's launch, and the driver check before them, until
/// reset with null: lets a machine without a GPU check what each part is
/// given (its dense buffers, lengths and launch plan). Tests only; not
/// thread-safe against concurrent runs.
void setNvidiaPartLauncherForTesting(NvidiaPartLauncher launcher);

} // namespace pejit

#endif // PEJIT_RUNTIME_NVIDIAKERNELIMPL_H
