// Builder helpers: one function per encoding that the builder fuses as an
// EncodingSpec (Pejit.h). Each writes its pe attribute's text and the
// shapes of the tensors it reads; nothing else in the runtime knows them.
#ifndef PEJIT_RUNTIME_ENCODINGS_H
#define PEJIT_RUNTIME_ENCODINGS_H

#include "pejit/runtime/Pejit.h"

#include <cstdint>
#include <vector>

namespace pejit::encodings {

/// ALiBi as a fused encoding (AttentionSpec::alibi goes through pe.alibi
/// and fusion instead; both give the same kernel).
EncodingSpec alibi(int64_t numHeads, int64_t headOffset, bool symmetric);
/// ALiBi whose slopes are an input (learned_slopes): run() takes
/// alibi_slopes, f32 [queryHeads], head h's slope at h; the backward gives
/// its gradient.
EncodingSpec alibiLearnedSlopes(int64_t numHeads, int64_t headOffset, bool symmetric,
                                int64_t queryHeads);

/// `spec` (ALiBi, T5 or Shaw) measuring distance by the attention's position
/// ids, key_pos - query_pos, instead of by sequence index (relative_to =
/// position; docs/semantics.md).
EncodingSpec relativeToPosition(EncodingSpec spec);

/// T5's bucketed relative bias; reads a [numBuckets, queryHeads] table.
EncodingSpec t5Bias(int64_t numBuckets, int64_t maxDistance, bool bidirectional, int64_t queryHeads,
                    DType tableDtype = DType::F32);

/// Shaw's relative key term q_i . a^K[clip(j - i) + k]; reads a^K, [2k+1, d]
/// shared by the heads, or [queryHeads, 2k+1, d] when queryHeads > 0.
EncodingSpec shawKey(int64_t clip, int64_t headDim, DType tableDtype = DType::F32,
                     int64_t queryHeads = 0);

/// Shaw's relative value term sum_j p_ij a^V[clip(j - i) + k]; reads a^V,
/// [2k+1, dv] shared, or [queryHeads, 2k+1, dv] when queryHeads > 0.
EncodingSpec shawValue(int64_t clip, int64_t valueDim, DType tableDtype = DType::F32,
                       int64_t queryHeads = 0);

/// A bias or mask tensor read by the kernel (the general fallback):
/// [batch or 1, heads or 1, querySeq, keySeq]; -inf masks a key.
EncodingSpec biasTensor(std::vector<int64_t> shape, DType dtype = DType::F32);

} // namespace pejit::encodings

#endif // PEJIT_RUNTIME_ENCODINGS_H
