// What a kernel template hands to the positional-encoding hooks when
// attn-instantiate-{x86,nvidia}-template expand its hook ops (attn.qk_prologue,
// attn.qk_transform, attn.score_mod). The hooks emit IR at the builder's
// insertion point; they know the encoding, the template knows the loops
// (docs/hooks.md).
#ifndef PEJIT_DIALECTS_PE_KERNELHOOKS_H
#define PEJIT_DIALECTS_PE_KERNELHOOKS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "pejit/reference/Attention.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/reference/Tensor.h"
#include "llvm/ADT/SmallVector.h"
#include <cstdint>
#include <vector>

namespace pejit::pe {

/// Static facts of the attention being compiled. batch, querySeq and keySeq
/// are mlir::ShapedType::kDynamic in a kernel for a shape class with `?`
/// dims (docs/shape-classes.md): the hooks then get the lengths as values
/// (QKTileArgs, ScorePoint) and size nothing by them.
struct AttentionShape {
  int64_t batch = 0, queryHeads = 0, kvHeads = 0;
  int64_t querySeq = 0, keySeq = 0, headDim = 0, valueDim = 0;
  /// Batch rows of the i64 position ids the kernel receives: 1 (shared) or
  /// batch (kDynamic with a dynamic batch).
  int64_t queryPositionRows = 1, keyPositionRows = 1;
  /// Axes of the position ids (M-RoPE sections), 1 without: the kernel's
  /// position memrefs are [axes * rows, s], one block of rows per axis.
  int64_t positionAxes = 1;
  /// f32 lanes of the target's vectors (8 for AVX2).
  int64_t vectorWidth = 8;
  /// Query rows per tile, and whether the template gives each query tile a
  /// scratch of its own (attn.query_tile_prologue; x86 does, NVIDIA not).
  int64_t queryTileRows = 0;
  bool hasQueryTileScratch = false;
  /// The attention's scale (key terms add scale * term to scaled scores).
  double scale = 1.0;
};

/// attn.qk_prologue: runs once per call. Positions are memref<rows x s x i64>
/// (s may be `?`: the call's length); scratch is memref<?xf32> of
/// getScratchFloatsPerPosition() entries per position.
struct QKPrologueArgs {
  mlir::Value queryPositions, keyPositions, scratch;
  /// Null: all position rows. Else only flattened rows rowBegin + k rowStep
  /// (a GPU thread's share, or an x86 worker's part of the prologue).
  mlir::Value rowBegin = {}, rowStep = {};
  /// The encoding's own tensors as memrefs (a learned table), where the
  /// template passes them (attn.qk_prologue operands(...)).
  llvm::SmallVector<mlir::Value> operands = {};
};

/// attn.qk_transform: rows [0, rows) of tile (memref<R x d x T>, T = f32,
/// f16 or bf16; the rotation runs in f32) are
/// sequence indices seqStart + r of batch `batch`, of Q or (isKey) K.
/// With a source (memref<? x d x S>), the rows are read from it (widened to
/// f32) and written, transformed, to tile; without one the tile is
/// transformed in place.
/// querySeq and keySeq (index) are the call's lengths: constants for a
/// static shape.
struct QKTileArgs {
  mlir::Value tile, rows, seqStart, batch, scratch;
  bool isKey = false;
  mlir::Value source = {};
  mlir::Value querySeq = {}, keySeq = {};
};

/// attn.score_mod, the pointwise score hook: one score or a vector of lanes.
/// `score` is f32 or vector<N x f32>; `queryIndex` and `keyIndex` are i32
/// sequence indices of the same shape (lane l is the score of query row
/// queryIndex[l] and key row keyIndex[l]); `batch` and `head` (the query
/// head) are index scalars. `operands` are the encoding's own tensors as
/// memrefs, in the order of its operands on attn.attention.
///
/// With a query-tile scratch (the encoding asked for one through
/// getQueryTileScratchFloats), `tileScratch` is the encoding's part of it
/// (memref<N x f32>, filled by its emitQueryTilePrologue) and `tileStart`
/// the tile's first query row. `queryLanesConsecutive` is the template's
/// statement that queryIndex[l] = queryIndex[0] + l (and keyIndex is one
/// key for all lanes): a hook may then read a table contiguously.
///
/// `queryPosition` and `keyPosition` (i64, the indices' shape) are the
/// attention's position ids of those rows, set only for an encoding whose
/// readsPositions() is true (relative_to = position). `querySeq` and
/// `keySeq` (index) are the call's lengths: constants for a static shape.
struct ScorePoint {
  mlir::Value score, batch, head, queryIndex, keyIndex;
  llvm::SmallVector<mlir::Value> operands = {};
  mlir::Value tileScratch = {}, tileStart = {};
  bool queryLanesConsecutive = false;
  mlir::Value queryPosition = {}, keyPosition = {};
  mlir::Value querySeq = {}, keySeq = {};
};

/// attn.qk_transform_grad: rows [0, rows) of `grad` (the gradient of the
/// transformed rows) and `transformed` (the rows after the transform), both
/// memref<R x d x f32>, are sequence indices seqStart + r of batch `batch`
/// of Q or (isKey) K; `positions` is that side's position memref (as
/// QKPrologueArgs has it), `operands` the encoding's own tensors, and
/// wanted[n] whether the gradient of its operand n is asked for.
struct QKGradArgs {
  mlir::Value grad, transformed, rows, seqStart, batch, positions;
  bool isKey = false;
  llvm::SmallVector<mlir::Value> operands = {};
  llvm::SmallVector<bool> wanted = {};
};

/// One gradient contribution of a score hook's adjoint (docs/backward.md):
/// `value` (f32) is added to element `index` (index type, row-major) of
/// the encoding's own operand `operand` (its index among the encoding's
/// operands). The template owns where and in what order it is added.
struct GradContribution {
  unsigned operand = 0;
  mlir::Value index, value;
};

/// The key − query distance at `point`, pointwise (docs/semantics.md): by
/// sequence index, j − (i + skv − sq), or, byPosition, keyPosition −
/// queryPosition. As i32 (positions' differences saturated to the i32
/// range: every bucketing clips far sooner) or, asFloat, as f32.
mlir::Value relativeDistance(mlir::OpBuilder &b, mlir::Location loc, const AttentionShape &shape,
                             const ScorePoint &point, bool byPosition, bool asFloat = false);

/// attn.query_tile_prologue: once per query tile, before its first key
/// tile. `tileScratch` is the encoding's part of the tile's scratch;
/// query rows [tileStart, tileStart + rows) of `head` in `batch`.
/// `queryTile` (memref<BM x d x f32|f16|bf16>, may be null) holds the
/// tile's Q rows after the QK transform, unscaled. `rowFirst`, `rowStep`
/// (null: all rows): this thread's share of the rows, rowFirst + k rowStep
/// (a GPU block's threads fill one tile together). Only encodings whose
/// table is by query row take scratch where a share is given.
struct QueryTileArgs {
  mlir::Value tileScratch, batch, head, tileStart, rows;
  llvm::SmallVector<mlir::Value> operands = {};
  mlir::Value queryTile = {};
  mlir::Value rowFirst = {}, rowStep = {};
};

/// attn.value_term_row: channels [channel, channel + lanes) of the value
/// term's row `bucket` (index scalars) for query head `head`; `operands`
/// as for ScorePoint.
struct ValueTermRowArgs {
  mlir::Value batch, head, bucket, channel;
  llvm::SmallVector<mlir::Value> operands = {};
  int64_t lanes = 1;
};

/// A constant of `like`'s shape (a splat for vectors), of element type
/// `elementType` (null: like's element type): lets a pointwise hook write
/// one body for scalars and for vectors.
mlir::Value constantLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like, double value,
                         mlir::Type elementType = {});

/// `value` (a scalar) broadcast to `like`'s shape; itself for scalars.
mlir::Value broadcastLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value like,
                          mlir::Value value);

/// `like`'s shape with element type `elementType` (the vector type, or the
/// scalar type itself).
mlir::Type typeLike(mlir::Value like, mlir::Type elementType);

/// The most floats one encoding's query-tile scratch may take: it lives on
/// the x86 item's stack (docs/limits.md). Larger tables fall back or refuse.
inline constexpr int64_t kMaxQueryTileScratchFloats = int64_t(1) << 16;

/// One element per lane of `offsets` (a vector of i32 or i64): base[indices]
/// advanced by offsets[l] elements in memory order (base contiguous), in
/// base's element type.
mlir::Value gatherLanes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                        mlir::ValueRange indices, mlir::Value offsets);

/// gatherLanes as f32 (16-bit tables are widened).
mlir::Value gatherLanesAsF32(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                             mlir::ValueRange indices, mlir::Value offsets);

/// What a score bias's float64 reference sees of the attention: its sizes
/// and the encoding's own operands (as float64 tensors, in order).
struct ReferenceAttention {
  int64_t batch = 0, queryHeads = 0, querySeq = 0, keySeq = 0;
  std::vector<const ref::Tensor *> operands;
  /// Q [b, hq, sq, d] after the QK transform (for key terms).
  const ref::Tensor *query = nullptr;
  /// The attention's position ids (defaults filled in), for relative_to =
  /// position.
  const ref::PositionIds *queryPositions = nullptr, *keyPositions = nullptr;

  /// Key - query distances by index, or byPosition by the position ids.
  ref::RelativeDistance distance(bool byPosition) const {
    ref::RelativeDistance d{querySeq, keySeq};
    if (byPosition) {
      d.queryPositions = queryPositions;
      d.keyPositions = keyPositions;
    }
    return d;
  }
};

/// What an unfused pe op's float64 reference sees (evaluateReference): per
/// operand, in order, its tensor (float operands) or its position ids
/// (integer operands, with the defaults filled in; idsOmitted says the
/// caller gave none), RoPE's seqLen (max(position) + 1 over the call), and
/// the result's dims: its type's, with `?` lengths filled in by the caller
/// from the attention the result feeds (a materialized term sizes itself by
/// them, not by its type).
struct ReferenceOpArgs {
  std::vector<const ref::Tensor *> tensors;
  std::vector<const ref::PositionIds *> ids;
  bool idsOmitted = false;
  int64_t seqLen = 0;
  std::vector<int64_t> resultShape;
};

} // namespace pejit::pe

#endif // PEJIT_DIALECTS_PE_KERNELHOOKS_H
