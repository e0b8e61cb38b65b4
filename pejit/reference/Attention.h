//===- Attention.h - naive float64 attention (the unfused semantics) -------===//
//
// Mirrors the tensor-level IR step by step, in docs/semantics.md's order:
//   s = scale·(q·k [+ keyTerm]); if softcap: s = softcap·tanh(s/softcap);
//   s += bias; mask (causal / window, bottom-right aligned); softmax;
//   out = P·V [+ Σ_j p_ij valueTerm[i, j, :]].
// A row that sees no key outputs zeros.
//
//===----------------------------------------------------------------------===//
#ifndef PEJIT_RUNTIME_REFERENCE_ATTENTION_H
#define PEJIT_RUNTIME_REFERENCE_ATTENTION_H

#include "pejit/reference/Tensor.h"

#include <cstdint>
#include <functional>
#include <optional>

namespace pejit::ref {

/// A value term by buckets (Shaw's a^V): output row i of head h in batch b
/// gains Σ_j p_ij·rows[(h,) bucket(b, i, j), :]; rows is [B, dv] shared by
/// the heads or [hq, B, dv] per head. Never materialised as [sq, skv, dv].
struct BucketedValueTerm {
  const Tensor *rows = nullptr;
  std::function<int64_t(int64_t b, int64_t i, int64_t j)> bucket;
  explicit operator bool() const { return rows != nullptr; }
};

struct AttentionOptions {
  /// Default 1/sqrt(d).
  std::optional<double> scale;
  /// Bottom-right aligned: row i sees key j iff j <= i + (skv − sq).
  bool causal = false;
  /// Left window w: additionally j >= i + (skv − sq) − w (also without causal).
  std::optional<int64_t> window;
  /// Right window r: additionally j <= i + (skv − sq) + r (a bidirectional
  /// local window together with `window`; causal makes it moot).
  std::optional<int64_t> windowRight;
  /// s = softcap·tanh(s/softcap).
  std::optional<double> softcap;
  /// [1|b, 1|hq, sq, skv], added after scale and softcap.
  const Tensor *bias = nullptr;
  /// [b, hq, sq, skv], added to q·k before the scale (Shaw key term).
  const Tensor *keyTerm = nullptr;
  /// [sq, skv, dv] or [hq, sq, skv, dv]; output += Σ_j p_ij·valueTerm[(h,)
  /// i, j, :] (Shaw value term).
  const Tensor *valueTerm = nullptr;
  /// The same, by buckets (a fused value term's reference).
  BucketedValueTerm bucketedValueTerm;
};

/// Whether query row i sees key j under the options' causal/window mask.
bool keyVisible(const AttentionOptions &options, int64_t i, int64_t j, int64_t sq, int64_t skv);

/// q [b, hq, sq, d], k [b, hkv, skv, d], v [b, hkv, skv, dv]; hq % hkv == 0
/// (GQA/MQA: q head h uses kv head h / (hq/hkv)). Returns [b, hq, sq, dv].
Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const AttentionOptions &options);

/// 1/sqrt(headDim) unless options.scale is set.
double attentionScale(const AttentionOptions &options, int64_t headDim);

/// Score (b, h, i, j) before the mask, in docs/semantics.md's order:
/// value = softcap(beforeSoftcap) + bias, beforeSoftcap = scale·(q·k + E).
struct AttentionScore {
  double value = 0.0;
  double beforeSoftcap = 0.0;
};
AttentionScore attentionScore(const Tensor &q, const Tensor &k, const AttentionOptions &options,
                              double scale, int64_t b, int64_t h, int64_t i, int64_t j);

/// The training forward's row log-sum-exp [b, hq, sq]: log Σ_j exp(s_ij)
/// over the visible keys, natural log; −inf for a row that sees no key.
Tensor attentionLogSumExp(const Tensor &q, const Tensor &k, const AttentionOptions &options);

/// Softmax probabilities P [b, hq, sq, skv] before multiplying V; rows that
/// see no key are all zeros.
Tensor attentionProbabilities(const Tensor &q, const Tensor &k, const AttentionOptions &options);

} // namespace pejit::ref

#endif // PEJIT_RUNTIME_REFERENCE_ATTENTION_H
