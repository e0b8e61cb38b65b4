//===- LinearAttentionGrad.h - float64 gradients of linear attention -------===//
//
// The backward of linearAttention (LinearAttention.h; docs/backward.md,
// "Linear attention"), derived by hand from its definition and computed
// directly, row by row over the visible keys. With q~ / k~ the numerator's
// feature rows and q^ / k^ the denominator's, for a row i that sees keys
// j < u(i) and has den_i = q^_i . sum_j k^_j != 0 (identity: no
// denominator, den_i = 1):
//   g_i    = dO_i / den_i          dden_i = -(g_i . o_i)
//   dq~_i  = sum_j k~_j (g_i . v_j)        dq^_i = dden_i sum_j k^_j
//   dk~_j += q~_i (g_i . v_j)              dk^_j += dden_i q^_i
//   dv_j  += (q~_i . k~_j) g_i
// then through the feature map (elu + 1: 1 for x > 0, else e^x; relu: 1
// for x > 0, else 0, so relu'(0) = 0; identity: 1) and the RoPE's adjoint:
// before the feature map dq = R^T (phi'(R q) * (dq~ + dq^)); on the
// numerator dq = phi'(q) * (R^T dq~ + dq^). GQA sums dk and dv over a
// group's query heads. A row with a zero denominator or no visible key
// gives nothing (no epsilon). softmax_keys differentiates K's per-channel
// softmax over each row's visible keys (q as it is, the rotation before
// it); a carried state is not differentiated (an error says so).
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_REFERENCE_LINEARATTENTIONGRAD_H
#define PEJIT_REFERENCE_LINEARATTENTIONGRAD_H

#include "pejit/reference/LinearAttention.h"

namespace pejit::ref {

struct LinearAttentionGradients {
  Tensor dq, dk, dv;
};

/// phi'(x) of a feature map (elu + 1, relu, identity).
double featureMapDerivative(FeatureMap map, double x);

/// dq, dk, dv of L = sum(dO * linearAttention(q, k, v, options, rotate)).
/// `rotateBack` is `rotate`'s adjoint (the transpose of the rotation at that
/// side's positions), given exactly when `rotate` is.
LinearAttentionGradients
linearAttentionBackward(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dOut,
                        const LinearAttentionOptions &options,
                        const std::function<void(Tensor &, bool isKey)> &rotate,
                        const std::function<void(Tensor &, bool isKey)> &rotateBack);

} // namespace pejit::ref

#endif // PEJIT_REFERENCE_LINEARATTENTIONGRAD_H
