// Running the attention backward on the GPU (templates/nvidia/
// mma_attention_backward.mlir, docs/backward.md "NVIDIA"): upload, the six
// kernels in order, download dq, dk, dv. Light (no LLVM): the GPU check
// runner uses it on a machine without a compiler.
#ifndef PEJIT_RUNTIME_CUDA_BACKWARDLAUNCH_H
#define PEJIT_RUNTIME_CUDA_BACKWARDLAUNCH_H

#include "pejit/core/KernelArtifact.h"
#include "pejit/runtime/cuda/CudaDriver.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pejit::cuda {

/// Host buffers of one backward call, dense: q, k, v (the inputs' type T),
/// o and dO (the forward output's type), lse [b, hq, sq] f32 (a training
/// forward's; null: the rows phase recomputes it), position tables i64
/// [rows, seq] (defaults filled in by the caller), the encoding operands
/// in their slots; dq, dk, dv are written (T), and the gradient of each
/// operand the kernel differentiates (the signature's operand_grads, in
/// that order; f32, the operand's shape).
struct BackwardBuffers {
  std::pair<const void *, size_t> query, key, value, output, outputGrad, lse;
  const std::vector<int64_t> *queryPositions = nullptr, *keyPositions = nullptr;
  std::vector<std::pair<const void *, size_t>> encodingOperands;
  std::pair<void *, size_t> queryGrad, keyGrad, valueGrad;
  std::vector<std::pair<float *, size_t>> operandGrads;
};

/// Where the call's floats go: the tables (the forward's rule), D and lse
/// [2, b, hq, sq], dQ' [b, hq, sq, d] and dK' [b, hkv, skv, d], Shaw's
/// terms [b, hq, sq, TW] (f32).
struct BackwardPlan {
  int64_t tableFloats = 0, rowFloats = 0, queryGradFloats = 0, keyGradFloats = 0;
  /// Shaw's terms per row (QaK, S, dOaV, T): rowScratchFloats - 2 a row.
  int64_t termFloats = 0;
  /// The operand gradients: each one's floats (operand_grads order), their
  /// sum (a warp's slot), and the slots, one per warp of the q blocks
  /// then of the finish blocks (mma_backward_steps.mlir).
  std::vector<int64_t> operandGradFloats;
  int64_t slotFloats = 0, slots = 0;
  /// A bias tensor's gradient (the signature's score_grad): its index in
  /// operandGradFloats (-1: none), outside the slots; the kernel writes dS
  /// [b, hq, sq, skv] (dScoreFloats), which the runtime sums over the
  /// bias's broadcast dims.
  int64_t scoreShapedAt = -1, dScoreFloats = 0;
  /// The bias's dims 0 and 1 at the call: 1, or b and hq.
  int64_t biasBatch = 1, biasHeads = 1;
  /// Blocks of 128 threads: rows and q [ceil(sq / 64), hq, b], kv
  /// [ceil(skv / 64), hkv, b], transform and finish [ceil(max(sq, skv) /
  /// 64), hq + hkv, b].
  std::vector<int64_t> rowsGrid, keysGrid, sidesGrid;
};

/// The plan of a call of shape `call` (every dim known) to a backward
/// kernel described by `kernel`.
BackwardPlan planBackward(const KernelDescription &kernel, const Shape &call);

/// Runs the backward once (then `timedRepeats` more between CUDA events,
/// their times in ms to `timesMs`) and downloads dq, dk, dv; each operand
/// gradient is the sum of its part of every slot, in slot order, in f64
/// (a bias tensor's: dS summed over its broadcast dims, in f64).
Status runAttentionBackward(const std::string &image, const KernelDescription &kernel,
                            const Shape &call, const BackwardBuffers &buffers, int timedRepeats = 0,
                            std::vector<float> *timesMs = nullptr);

} // namespace pejit::cuda

#endif // PEJIT_RUNTIME_CUDA_BACKWARDLAUNCH_H
