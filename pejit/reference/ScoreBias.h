//===- ScoreBias.h - float64 ALiBi, T5 and Shaw relative-position terms ---===//
//
// Score-side positional encodings. By default they use sequence indices
// aligned bottom-right: query row i sits at key index i + (skv − sq)
// (docs/semantics.md, Indices and masks); with relative_to = position, the
// distance is key position − query position (RelativeDistance).
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_SCOREBIAS_H
#define PEJIT_RUNTIME_REFERENCE_SCOREBIAS_H

#include "pejit/reference/Tensor.h"

#include <cstdint>
#include <vector>

namespace pejit::ref {

/// The key − query distance of score (b, i, j): j − (i + skv − sq) by
/// sequence index, or, with both position tensors set (relative_to =
/// position), keyPositions[b][j] − queryPositions[b][i].
struct RelativeDistance {
  int64_t sq = 0, skv = 0;
  const PositionIds *queryPositions = nullptr, *keyPositions = nullptr;

  int64_t operator()(int64_t b, int64_t i, int64_t j) const;
  /// Batch rows the distances differ over: 1 unless per-batch positions.
  int64_t batchRows() const;
};

/// `bias` ([1 or b, h, sq, skv]) as [rows, h, sq, skv], its batch row
/// repeated when it has one: a standalone bias op's [b, h, sq, skv] result.
Tensor repeatBatchRows(const Tensor &bias, int64_t rows);

/// The ALiBi paper's get_slopes(n) for the total head count n, including the
/// non-power-of-two rule.
std::vector<double> alibiSlopes(int64_t numHeads);

enum class AlibiForm {
  Causal,    ///< −slope·((i + skv − sq) − j)
  Symmetric, ///< −slope·|i + skv − sq − j| (FlashAttention's alibi)
  /// +slope·j, or +slope·key_pos[j] by positions (BLOOM's
  /// build_alibi_tensor): the causal form plus slope·(i + skv − sq), a
  /// constant per row, so softmax attention is the same under any mask.
  Bloom,
};

/// The bias per unit slope of score (b, i, j): −(query − key) (causal),
/// −|query − key| (symmetric) or the key's index or position (BLOOM).
double alibiBase(AlibiForm form, const RelativeDistance &distance, int64_t b, int64_t i, int64_t j);

/// [1, heads, sq, skv] for the shard heads [headOffset, headOffset + heads) of
/// numHeads. Slopes are slopes[headOffset + h] of alibiSlopes(numHeads), or of
/// explicitSlopes when non-empty (then it must hold all numHeads slopes).
Tensor alibiBias(int64_t numHeads, int64_t headOffset, int64_t heads, AlibiForm form, int64_t sq,
                 int64_t skv, const std::vector<double> &explicitSlopes = {});
/// The same at any distances: [distance.batchRows(), heads, sq, skv], with
/// −distance in place of (i + skv − sq) − j.
Tensor alibiBias(int64_t numHeads, int64_t headOffset, int64_t heads, AlibiForm form,
                 const RelativeDistance &distance, const std::vector<double> &explicitSlopes);

/// T5's `_relative_position_bucket` (relative = key index − query index).
int64_t t5RelativePositionBucket(int64_t relativePosition, bool bidirectional, int64_t numBuckets,
                                 int64_t maxDistance);

/// table: [numBuckets, heads]. Returns [1, heads, sq, skv] with
/// table[bucket(j − (i + skv − sq)), h].
Tensor t5Bias(const Tensor &table, bool bidirectional, int64_t numBuckets, int64_t maxDistance,
              int64_t sq, int64_t skv);
/// The same at any distances: [distance.batchRows(), heads, sq, skv].
Tensor t5Bias(const Tensor &table, bool bidirectional, int64_t numBuckets, int64_t maxDistance,
              const RelativeDistance &distance);

/// Shaw et al. 2018 clipped relative index: clip(j − (i + skv − sq), −k, k).
int64_t shawRelativeIndex(int64_t i, int64_t j, int64_t clip, int64_t sq, int64_t skv);

/// q: [b, h, sq, d]; keyTable aK: [2k+1, d] shared by the heads, or
/// [h, 2k+1, d] per head. Returns [b, h, sq, skv] with q_i · aK[(h,) rel +
/// k]; attention adds it to q·k before the scale.
Tensor relativeKeyTerm(const Tensor &q, const Tensor &keyTable, int64_t clip, int64_t skv);
/// The same at any distances (clip(distance, −k, k) in place of the index).
Tensor relativeKeyTerm(const Tensor &q, const Tensor &keyTable, int64_t clip,
                       const RelativeDistance &distance);

/// valueTable aV: [2k+1, dv] shared, or [h, 2k+1, dv] per head. Returns
/// [sq, skv, dv] (or [h, sq, skv, dv]) with aV[(h,) rel + k]; attention adds
/// Σ_j p_ij · term[(h,) i, j, :] to the output.
Tensor relativeValueTerm(const Tensor &valueTable, int64_t clip, int64_t sq, int64_t skv);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_SCOREBIAS_H
