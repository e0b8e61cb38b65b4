//===- LinearAttention.h - naive float64 linear attention ------------------===//
//
// The semantics of attn.linear_attention (docs/semantics.md "Linear
// attention"), computed directly in O(sq skv d dv): no running state, so it
// checks the kernels' recurrences rather than repeating them (past 2^22
// (query, key) pairs, by float64 prefix sums instead: Algorithm). A carried
// state (earlier calls' keys) enters as its definition: S0 and z0 added to
// every row's sums, softmax_keys' m0 rescaled to the row's max.
//   phi: elu_plus_one, relu, identity; out_i = sum_j (phi(q_i).phi(k_j)) v_j
//   / sum_j phi(q_i).phi(k_j) over visible j (identity: no denominator; a
//   zero denominator or no visible key: a zero row). softmax_keys: out_i =
//   sum_c q_ic sum_j softmax_j(k_jc) v_j over visible j.
//   RoPE before the feature map: phi(Rq), phi(Rk); on the numerator: the
//   numerator with R phi(q), R phi(k), the denominator without.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_REFERENCE_LINEARATTENTION_H
#define PEJIT_REFERENCE_LINEARATTENTION_H

#include "pejit/reference/Tensor.h"

#include <functional>

namespace pejit::ref {

enum class FeatureMap { EluPlusOne, Relu, Identity, SoftmaxKeys };

struct LinearAttentionOptions {
  FeatureMap map = FeatureMap::EluPlusOne;
  /// Bottom-right aligned: row i sees key j iff j <= i + (skv - sq).
  bool causal = false;
  /// Where `rotate` applies (when given): false before the feature map,
  /// true on the numerator only.
  bool ropeOnNumerator = false;
  /// The keys of earlier calls, per query head: [b, hq, d, dv + 2] = S, z
  /// and (softmax_keys) m, as attn.linear_attention's `state` defines them.
  /// Every row sees them before its visible keys. Null: none.
  const Tensor *state = nullptr;
  /// Direct: each row's sums over its keys, O(sq skv d dv). PrefixSums (not
  /// for softmax_keys): the sums S = sum_j phi(k_j) v_j^T and z = sum_j
  /// phi(k_j) grown key by key in float64 and read by each row, O((sq +
  /// skv) d dv), so long sequences (pejit run --check) stay checkable.
  /// Auto: PrefixSums past 2^22 (query, key) pairs, else Direct.
  enum class Algorithm { Auto, Direct, PrefixSums } algorithm = Algorithm::Auto;
};

/// The feature map of one value (identity for softmax_keys: its keys are
/// weighted by the softmax instead).
double featureMap(FeatureMap map, double x);

/// q [b, hq, sq, d], k [b, hkv, skv, d], v [b, hkv, skv, dv] -> [b, hq, sq,
/// dv]. `rotate` (may be empty) rotates a [b, h, s, d] tensor of Q
/// (isKey false) or K in place: the fused RoPE at that side's positions.
Tensor linearAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       const LinearAttentionOptions &options,
                       const std::function<void(Tensor &, bool isKey)> &rotate);

} // namespace pejit::ref

#endif // PEJIT_REFERENCE_LINEARATTENTION_H
