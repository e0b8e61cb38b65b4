// Running one pejit attention kernel (the nvidia template's pejit_prologue +
// pejit_attention) on the GPU: upload, launch, time, download. Light (no
// LLVM): used by NvidiaKernel::run and by the GPU check runner, which loads
// kernels from a bundle on a machine without a compiler.
#ifndef PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H
#define PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H

#include "pejit/core/KernelArtifact.h"
#include "pejit/core/NvidiaPlan.h"
#include "pejit/runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pejit::cuda {

/// What the launch needs to know of a compiled kernel, for one call.
struct AttentionKernelImage {
  std::string image; ///< cubin bytes, or PTX text
  /// The entry (NvidiaLaunch::kernel): pejit_attention, or a standalone
  /// kernel's pejit_transform or pejit_embed.
  std::string kernel = "pejit_attention";
  std::vector<int64_t> grid, block; ///< of pejit_attention
  int64_t scratchFloats = 0;        ///< 0: no QK transform, no prologue
  /// Split-KV (splits > 1): pejit_attention leaves partial O [.., dv] and
  /// row max / row sum per split; pejit_combine (combineGrid) merges them.
  int64_t splits = 1, partialOutputFloats = 0, partialRowFloats = 0;
  std::vector<int64_t> combineGrid;
  /// The call's b, sq and skv: every kernel's length arguments (a static
  /// kernel ignores them; a shape class's reads them).
  int64_t batch = 1, querySeq = 1, keySeq = 1;
};

/// The image of a call of shape `call` (every dim known) to a kernel with
/// launch description `launch`: a static kernel's launch as compiled, a
/// shape class's planned from the call's lengths (NvidiaPlan.h).
inline AttentionKernelImage kernelImage(const NvidiaLaunch &launch, const KernelDescription &kernel,
                                        const Shape &call, std::string image) {
  AttentionKernelImage out;
  out.image = std::move(image);
  out.block = launch.block;
  out.batch = call.batch;
  out.querySeq = call.querySeq;
  out.keySeq = call.keySeq;
  out.kernel = launch.kernel;
  auto idRows = [&](int64_t positionRows) { return positionRows == 1 ? 1 : call.batch; };
  if (launch.kernel == "pejit_linear") {
    // Linear attention: a block per (b, hq); the RoPE's tables for the Q
    // and K ids (templates/nvidia/linear_attention.mlir).
    out.grid = {1, call.queryHeads, call.batch};
    out.scratchFloats =
        kernel.tableFloatsPerQueryPosition * idRows(kernel.queryPositionRows) * call.querySeq +
        kernel.tableFloatsPerKeyPosition * idRows(kernel.keyPositionRows) * call.keySeq;
    return out;
  }
  if (!launch.attention()) {
    // A standalone kernel: a block per queryTile rows of a head, tables
    // for Q's ids only (templates/nvidia/transform.mlir).
    out.grid = {(call.querySeq + kernel.queryTile - 1) / kernel.queryTile, call.queryHeads,
                call.batch};
    out.scratchFloats =
        kernel.tableFloatsPerQueryPosition * idRows(kernel.queryPositionRows) * call.querySeq;
    return out;
  }
  if (!kernel.shape.hasDynamicDims()) {
    out.grid = launch.grid;
    out.scratchFloats = kernel.scratchFloats;
    out.splits = launch.splits;
    out.partialOutputFloats = launch.partialOutputFloats;
    out.partialRowFloats = launch.partialRowFloats;
    out.combineGrid = launch.combineGrid;
    return out;
  }
  NvidiaCallPlan plan = planNvidiaCall(kernel, launch.splits, call);
  out.grid = plan.grid;
  out.scratchFloats = plan.tableFloats;
  out.splits = plan.splits;
  out.partialOutputFloats = plan.partialOutputFloats;
  out.partialRowFloats = plan.partialRowFloats;
  out.combineGrid = plan.combineGrid;
  return out;
}

/// Host buffers of one call; positions are i64 [rows, seq] (already
/// defaulted by the caller). A standalone kernel's: query is its rows (x),
/// or an embedding's i64 tokens [b, s] with key its token table; the ids
/// are queryPositions (keyPositions empty), the pe ops' own table the one
/// encoding operand.
struct AttentionBuffers {
  const void *query = nullptr, *key = nullptr, *value = nullptr;
  size_t queryBytes = 0, keyBytes = 0, valueBytes = 0;
  const std::vector<int64_t> *queryPositions = nullptr, *keyPositions = nullptr;
  void *output = nullptr;
  size_t outputBytes = 0;
  /// The encoding operands (contiguous), passed after the fixed arguments.
  std::vector<std::pair<const void *, size_t>> encodingOperands;
  /// Linear attention's carried state (f32 [b, hq, d, dv + 2], dense):
  /// read, and written back after the call; null without one.
  void *state = nullptr;
  size_t stateBytes = 0;
};

/// Uploads, runs the prologue (when the kernel has tables) and the kernel
/// (kernel.kernel: attention, or a standalone kernel) once, then `timedRepeats` more times between
/// CUDA events (their GPU times, in ms, go to `timesMs`), and downloads the output.
Status runAttention(const AttentionKernelImage &kernel, const AttentionBuffers &buffers,
                    int timedRepeats = 0, std::vector<float> *timesMs = nullptr);

} // namespace pejit::cuda

#endif // PEJIT_RUNTIME_CUDA_ATTENTIONLAUNCH_H
