//===- AttentionGrad.cpp - float64 attention backward (the oracle) --------===//

#include "pejit/reference/AttentionGrad.h"

#include "pejit/reference/ScoreBiasGrad.h"

#include <cmath>
#include <string>

namespace pejit::ref {

AttentionGradients attentionBackward(const Tensor &q, const Tensor &k, const Tensor &v,
                                     const Tensor &dOut, const AttentionOptions &options) {
  // The forward checks every operand; recompute P and O with it.
  const Tensor out = attention(q, k, v, options);
  const Tensor probabilities = attentionProbabilities(q, k, options);
  PEJIT_REF_CHECK(dOut.shape == out.shape, "dOut must be " + shapeToString(out.shape) + ", got " +
                                               shapeToString(dOut.shape));
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], headDim = q.shape[3],
                group = heads / k.shape[1], skv = k.shape[2], valueDim = v.shape[3];
  const double scale = attentionScale(options, headDim);
  const BucketedValueTerm &bucketed = options.bucketedValueTerm;

  AttentionGradients grads;
  grads.dq = Tensor(q.shape);
  grads.dk = Tensor(k.shape);
  grads.dv = Tensor(v.shape);
  grads.dScores = Tensor({batch, heads, sq, skv});
  if (options.keyTerm)
    grads.dKeyTerm = Tensor(options.keyTerm->shape);
  if (options.valueTerm)
    grads.dValueTerm = Tensor(options.valueTerm->shape);
  if (bucketed)
    grads.dValueRows = Tensor(bucketed.rows->shape);

  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        // D_i = dO_i · O_i (FlashAttention-2): Σ_j P_ij dP_ij.
        double rowDot = 0.0;
        for (int64_t c = 0; c < valueDim; ++c)
          rowDot += dOut.at(b, h, i, c) * out.at(b, h, i, c);
        for (int64_t j = 0; j < skv; ++j) {
          const double p = probabilities.at(b, h, i, j);
          if (p == 0.0)
            continue; // masked, −inf, or a row that sees no key: no gradient
          const int64_t bucket = bucketed ? bucketed.bucket(b, i, j) : 0;
          double dP = 0.0;
          for (int64_t c = 0; c < valueDim; ++c) {
            const double dO = dOut.at(b, h, i, c);
            double value = v.at(b, h / group, j, c);
            grads.dv.at(b, h / group, j, c) += p * dO;
            if (const Tensor *term = options.valueTerm) {
              const bool perHead = term->rank() == 4;
              value += perHead ? term->at(h, i, j, c) : term->at(i, j, c);
              (perHead ? grads.dValueTerm.at(h, i, j, c) : grads.dValueTerm.at(i, j, c)) += p * dO;
            }
            if (bucketed) {
              const bool perHead = bucketed.rows->rank() == 3;
              value += perHead ? bucketed.rows->at(h, bucket, c) : bucketed.rows->at(bucket, c);
              (perHead ? grads.dValueRows.at(h, bucket, c) : grads.dValueRows.at(bucket, c)) +=
                  p * dO;
            }
            dP += dO * value;
          }
          const double dS = p * (dP - rowDot);
          grads.dScores.at(b, h, i, j) = dS;
          // Back through the softcap to scale·(q·k + E).
          double dBeforeSoftcap = dS;
          if (options.softcap) {
            const double t = std::tanh(
                attentionScore(q, k, options, scale, b, h, i, j).beforeSoftcap / *options.softcap);
            dBeforeSoftcap *= 1.0 - t * t;
          }
          const double dE = scale * dBeforeSoftcap;
          if (options.keyTerm)
            grads.dKeyTerm.at(b, h, i, j) = dE;
          for (int64_t c = 0; c < headDim; ++c) {
            grads.dq.at(b, h, i, c) += dE * k.at(b, h / group, j, c);
            grads.dk.at(b, h / group, j, c) += dE * q.at(b, h, i, c);
          }
        }
      }
  if (options.bias)
    grads.dBias = biasGradient(grads.dScores, options.bias->shape);
  return grads;
}

} // namespace pejit::ref
