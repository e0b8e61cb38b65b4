// The nvidia backend's stage table (Stages.h):
//   source     the user's IR (pe + attn on tensors)
//   fused      after pe-fuse-into-attention
//   tiled      after attn-instantiate-nvidia-template (a gpu.module)
//   unrolled   its register loops unrolled: the last MLIR stage before NVVM
//   ptx        gpu-lower-to-nvvm-pipeline + NVPTX, libdevice linked
//   cubin      ptxas -v when found (the cubin and its report); no text
// The tiled stage also writes the launch description ("nvidia.meta",
// pejit/core/KernelMeta.h) and the ptxas stage its report ("ptxas-log").
#ifndef PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIABACKEND_H
#define PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIABACKEND_H

#include "pejit/compiler/Stages.h"
#include "pejit/compiler/Target.h"

#include <string>

namespace pejit {

/// The table for `arch` (sm_80, sm_86, sm_89, sm_90) with `tiles`.
StageTable nvidiaStages(const std::string &arch = "sm_80", const NvidiaTileConfig &tiles = {});

/// Whether pejit emits PTX for `arch`; else an error naming the ones it does.
Status checkNvidiaArch(const std::string &arch);

} // namespace pejit

#endif // PEJIT_COMPILER_BACKENDS_NVIDIA_NVIDIABACKEND_H
