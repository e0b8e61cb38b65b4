//===- ScoreBiasGrad.h - float64 gradients of the score-side encodings ----===//
//
// The adjoints of ScoreBias.h (CONVENTIONS "Gradients", docs/backward.md).
// Each takes dScores = dL/ds ([b, h, sq, skv], from attentionBackward: the
// gradient of the final score, after scale, softcap and biases) or the key
// term's gradient, and sums it into the encoding's own parameters.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_SCOREBIASGRAD_H
#define PEJIT_RUNTIME_REFERENCE_SCOREBIASGRAD_H

#include "pejit/reference/ScoreBias.h"

#include <cstdint>
#include <vector>

namespace pejit::ref {

/// A bias's gradient: dScores summed over the bias's broadcast dims
/// (biasShape is [1|b, 1|h, sq, skv]).
Tensor biasGradient(const Tensor &dScores, const std::vector<int64_t> &biasShape);

/// T5: d table[n, h] = Σ over (b, i, j) with bucket(distance) = n of
/// dS[b, h, i, j]. Returns [numBuckets, h].
Tensor t5TableGradient(const Tensor &dScores, bool bidirectional, int64_t numBuckets,
                       int64_t maxDistance, const RelativeDistance &distance);

/// ALiBi with learnable slopes: d slope_h = Σ alibiBase(form, ·) · dS[·, h].
/// Returns one entry per head of dScores.
std::vector<double> alibiSlopeGradient(const Tensor &dScores, AlibiForm form,
                                       const RelativeDistance &distance);

/// Shaw's key term E[b, h, i, j] = q_i · a^K[(h,) r], r = clip(distance) + k.
/// Given dE: dq[b, h, i] = Σ_j dE a^K[r] and d a^K[(h,) r] = Σ dE q_i.
struct RelativeKeyTermGradients {
  Tensor dq;        ///< [b, h, sq, d]
  Tensor dKeyTable; ///< keyTable's shape
};
RelativeKeyTermGradients relativeKeyTermBackward(const Tensor &q, const Tensor &keyTable,
                                                 int64_t clip, const RelativeDistance &distance,
                                                 const Tensor &dKeyTerm);

/// Shaw's value term: dValueTerm ([(h,) sq, skv, dv], the gradient of
/// relativeValueTerm's result) summed into a^V's rows: [(h,) 2k+1, dv].
Tensor relativeValueTableGradient(const Tensor &dValueTerm, int64_t clip, int64_t sq, int64_t skv);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_SCOREBIASGRAD_H
