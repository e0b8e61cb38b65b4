// What a kernel template hands to the positional-encoding hooks when
// attn-instantiate-{x86,nvidia}-template expand its hook ops (attn.qk_prologue,
// attn.qk_transform, attn.score_mod). The hooks emit IR at the builder's
// insertion point; they know the encoding, the template knows the loops.
#ifndef PEJIT_DIALECTS_PE_KERNELHOOKS_H
#define PEJIT_DIALECTS_PE_KERNELHOOKS_H

#include "mlir/IR/Value.h"
#include <cstdint>

namespace pejit::pe {

/// Static facts of the attention being compiled (all dims static).
struct AttentionShape {
  int64_t batch = 0, queryHeads = 0, kvHeads = 0;
  int64_t querySeq = 0, keySeq = 0, headDim = 0, valueDim = 0;
  /// Batch rows of the i64 position ids the kernel receives: 1 (shared) or batch.
  int64_t queryPositionRows = 1, keyPositionRows = 1;
  /// f32 lanes of the target's vectors (8 for AVX2).
  int64_t vectorWidth = 8;
};

/// attn.qk_prologue: runs once per call. Positions are memref<rows x s x i64>;
/// scratch is memref<?xf32> of getScratchFloats() entries.
struct QKPrologueArgs {
  mlir::Value queryPositions, keyPositions, scratch;
  /// Null: all position rows. Else only flattened rows rowBegin + k rowStep
  /// (a GPU thread's share, or an x86 worker's part of the prologue).
  mlir::Value rowBegin = {}, rowStep = {};
};

/// attn.qk_transform: rows [0, rows) of tile (memref<R x d x T>, T = f32,
/// f16 or bf16; the rotation runs in f32) are
/// sequence indices seqStart + r of batch `batch`, of Q or (isKey) K.
/// With a source (memref<? x d x S>), the rows are read from it (widened to
/// f32) and written, transformed, to tile; without one the tile is
/// transformed in place.
struct QKTileArgs {
  mlir::Value tile, rows, seqStart, batch, scratch;
  bool isKey = false;
  mlir::Value source = {};
};

/// attn.score_mod: scores is St (memref<BN x BM x f32>), St[jr, ir] the score
/// of query row queryStart + ir and key row keyStart + jr, for query `head`.
struct ScoreTileArgs {
  mlir::Value scores, head, queryStart, keyStart;
};

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_KERNELHOOKS_H
