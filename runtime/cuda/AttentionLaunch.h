// Running one pejit attention kernel (the nvidia template's pejit_prologue +
// pejit_attention) on the GPU: upload, launch, time, download. Light (no
// LLVM): used by NvidiaKernel::run and by the GPU check runner, which loads
// kernels from a bundle on a machine without a compiler.
#ifndef PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H
#define PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H

#include "runtime/core/KernelArtifact.h"
#include "runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pejit::cuda {

/// What the launch needs to know of a compiled kernel.
struct AttentionKernelImage {
  std::string image;                ///< cubin bytes, or PTX text
  std::vector<int64_t> grid, block; ///< of pejit_attention
  int64_t scratchFloats = 0;        ///< 0: no QK transform, no prologue
  /// Split-KV (splits > 1): pejit_attention leaves partial O [.., dv] and
  /// row max / row sum per split; pejit_combine (combineGrid) merges them.
  int64_t splits = 1, partialOutputFloats = 0, partialRowFloats = 0;
  std::vector<int64_t> combineGrid;
};

/// The image of a kernel with launch description `launch` (KernelMeta.h).
inline AttentionKernelImage kernelImage(const NvidiaLaunch &launch, int64_t scratchFloats,
                                        std::string image) {
  return {std::move(image),        launch.grid,       launch.block,
          scratchFloats,           launch.splits,     launch.partialOutputFloats,
          launch.partialRowFloats, launch.combineGrid};
}

/// Host buffers of one call; positions are i64 [rows, seq] (already
/// defaulted by the caller).
struct AttentionBuffers {
  const void *query = nullptr, *key = nullptr, *value = nullptr;
  size_t queryBytes = 0, keyBytes = 0, valueBytes = 0;
  const std::vector<int64_t> *queryPositions = nullptr, *keyPositions = nullptr;
  void *output = nullptr;
  size_t outputBytes = 0;
  /// The encoding operands (contiguous), passed after the fixed arguments.
  std::vector<std::pair<const void *, size_t>> encodingOperands;
};

/// Uploads, runs the prologue (when the kernel has tables) and the kernel
/// once, then `timedRepeats` more times between CUDA events (their GPU
/// times, in ms, go to `timesMs`), and downloads the output.
Status runAttention(const AttentionKernelImage &kernel, const AttentionBuffers &buffers,
                    int timedRepeats = 0, std::vector<float> *timesMs = nullptr);

} // namespace pejit::cuda

#endif // PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H
