//===- AttentionGrad.h - float64 attention backward (the oracle) ----------===//
//
// The gradients of ref::attention for L = Σ dO ∘ O (CONVENTIONS "Gradients",
// docs/backward.md), derived by hand from Attention.h's formulas:
//   D_i = Σ_c dO_ic O_ic;  dP_ij = dO_i · (v_j + a^V_ij);
//   dS_ij = P_ij (dP_ij − D_i)            (the final score's gradient)
//   dE_ij = scale · softcap′ · dS_ij       (softcap′ = 1 − tanh²(s′/c))
//   dq_i = Σ_j dE_ij k_j,  dk_j = Σ_i dE_ij q_i,  dv_j = Σ_i P_ij dO_i.
// GQA sums dk, dv over the group's query heads. Masked keys, −inf biases
// and rows that see no key get zero gradients, never NaN.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_ATTENTIONGRAD_H
#define PEJIT_RUNTIME_REFERENCE_ATTENTIONGRAD_H

#include "pejit/reference/Attention.h"

namespace pejit::ref {

struct AttentionGradients {
  Tensor dq, dk, dv;
  /// dS [b, hq, sq, skv]: the gradient of the final score (after scale,
  /// softcap and biases); the score-side encodings' adjoints
  /// (ScoreBiasGrad.h) sum it into their parameters.
  Tensor dScores;
  /// options.bias's shape: dS summed over its broadcast dims.
  Tensor dBias;
  /// dE [b, hq, sq, skv] when options.keyTerm is set.
  Tensor dKeyTerm;
  /// options.valueTerm's shape: Σ P_ij dO_i per (i, j).
  Tensor dValueTerm;
  /// options.bucketedValueTerm.rows' shape.
  Tensor dValueRows;
};

/// q [b, hq, sq, d], k [b, hkv, skv, d], v [b, hkv, skv, dv], dOut
/// [b, hq, sq, dv]; the same options as the forward.
AttentionGradients attentionBackward(const Tensor &q, const Tensor &k, const Tensor &v,
                                     const Tensor &dOut, const AttentionOptions &options);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_ATTENTIONGRAD_H
