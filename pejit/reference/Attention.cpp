//===- Attention.cpp - naive float64 attention (the unfused semantics) -----===//

#include "pejit/reference/Attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace pejit::ref {

namespace {

void checkQueryKey(const Tensor &q, const Tensor &k, const AttentionOptions &options) {
  PEJIT_REF_CHECK(q.rank() == 4, "q must be [b, hq, sq, d], got " + shapeToString(q.shape));
  PEJIT_REF_CHECK(k.rank() == 4, "k must be [b, hkv, skv, d], got " + shapeToString(k.shape));
  PEJIT_REF_CHECK(k.shape[0] == q.shape[0] && k.shape[3] == q.shape[3],
                  "k " + shapeToString(k.shape) + " must match q's batch and head dim, q is " +
                      shapeToString(q.shape));
  PEJIT_REF_CHECK(k.shape[1] > 0 && q.shape[1] % k.shape[1] == 0,
                  "q heads " + std::to_string(q.shape[1]) + " must be a multiple of k heads " +
                      std::to_string(k.shape[1]));
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], skv = k.shape[2];
  if (options.window)
    PEJIT_REF_CHECK(*options.window >= 0, "window must be >= 0");
  if (options.windowRight)
    PEJIT_REF_CHECK(*options.windowRight >= 0, "windowRight must be >= 0");
  if (options.softcap)
    PEJIT_REF_CHECK(*options.softcap > 0.0, "softcap must be > 0");
  if (const Tensor *bias = options.bias)
    PEJIT_REF_CHECK(bias->rank() == 4 && (bias->shape[0] == 1 || bias->shape[0] == batch) &&
                        (bias->shape[1] == 1 || bias->shape[1] == heads) && bias->shape[2] == sq &&
                        bias->shape[3] == skv,
                    "bias must be [1|b, 1|hq, sq, skv], got " + shapeToString(bias->shape));
  if (const Tensor *keyTerm = options.keyTerm)
    PEJIT_REF_CHECK(keyTerm->shape == std::vector<int64_t>({batch, heads, sq, skv}),
                    "keyTerm must be [b, hq, sq, skv], got " + shapeToString(keyTerm->shape));
}

} // namespace

bool keyVisible(const AttentionOptions &options, int64_t i, int64_t j, int64_t sq, int64_t skv) {
  // docs/semantics.md, masks use sequence indices, bottom-right aligned.
  const int64_t aligned = i + (skv - sq);
  if (options.causal && j > aligned)
    return false;
  // j < aligned - window, as a distance (|aligned - j| <= sq + skv): no
  // overflow at any window, INT64_MAX included.
  if (options.window && aligned - j > *options.window)
    return false;
  if (options.windowRight && j - aligned > *options.windowRight)
    return false;
  return true;
}

double attentionScale(const AttentionOptions &options, int64_t headDim) {
  return options.scale ? *options.scale : 1.0 / std::sqrt(double(headDim));
}

AttentionScore attentionScore(const Tensor &q, const Tensor &k, const AttentionOptions &options,
                              double scale, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t group = q.shape[1] / k.shape[1];
  double dot = 0.0;
  for (int64_t c = 0; c < q.shape[3]; ++c)
    dot += q.at(b, h, i, c) * k.at(b, h / group, j, c);
  if (options.keyTerm)
    dot += options.keyTerm->at(b, h, i, j);
  AttentionScore score;
  score.beforeSoftcap = scale * dot;
  score.value = options.softcap
                    ? *options.softcap * std::tanh(score.beforeSoftcap / *options.softcap)
                    : score.beforeSoftcap;
  if (const Tensor *bias = options.bias)
    score.value += bias->at(bias->shape[0] == 1 ? 0 : b, bias->shape[1] == 1 ? 0 : h, i, j);
  return score;
}

Tensor attentionLogSumExp(const Tensor &q, const Tensor &k, const AttentionOptions &options) {
  checkQueryKey(q, k, options);
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], skv = k.shape[2];
  const double scale = attentionScale(options, q.shape[3]);
  const double minusInf = -std::numeric_limits<double>::infinity();
  Tensor lse({batch, heads, sq});
  std::vector<double> scores(static_cast<size_t>(skv));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        double rowMax = minusInf;
        for (int64_t j = 0; j < skv; ++j) {
          scores[j] = keyVisible(options, i, j, sq, skv)
                          ? attentionScore(q, k, options, scale, b, h, i, j).value
                          : minusInf;
          rowMax = std::max(rowMax, scores[j]);
        }
        // lse = max + log Σ exp(s − max); −inf for a row that sees no key
        // (or whose every visible score is −inf).
        double sum = 0.0;
        if (rowMax != minusInf)
          for (int64_t j = 0; j < skv; ++j)
            sum += std::exp(scores[j] - rowMax);
        lse.at(b, h, i) = rowMax == minusInf ? minusInf : rowMax + std::log(sum);
      }
  return lse;
}

Tensor attentionProbabilities(const Tensor &q, const Tensor &k, const AttentionOptions &options) {
  checkQueryKey(q, k, options);
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], skv = k.shape[2];
  const double scale = attentionScale(options, q.shape[3]);

  Tensor probabilities({batch, heads, sq, skv});
  std::vector<double> scores(static_cast<size_t>(skv));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i) {
        double rowMax = -std::numeric_limits<double>::infinity();
        bool anyVisible = false;
        for (int64_t j = 0; j < skv; ++j) {
          if (!keyVisible(options, i, j, sq, skv))
            continue;
          const double s = attentionScore(q, k, options, scale, b, h, i, j).value;
          scores[j] = s;
          rowMax = std::max(rowMax, s);
          anyVisible = true;
        }
        // FlashAttention: a row that sees no key stays all zeros, and so
        // does one whose every visible score is -inf (a user's -inf bias).
        if (!anyVisible || rowMax == -std::numeric_limits<double>::infinity())
          continue;
        // Stable softmax: subtract the row max before exp.
        double sum = 0.0;
        for (int64_t j = 0; j < skv; ++j) {
          if (!keyVisible(options, i, j, sq, skv))
            continue;
          double e = std::exp(scores[j] - rowMax);
          probabilities.at(b, h, i, j) = e;
          sum += e;
        }
        for (int64_t j = 0; j < skv; ++j)
          probabilities.at(b, h, i, j) /= sum;
      }
  return probabilities;
}

Tensor attention(const Tensor &q, const Tensor &k, const Tensor &v,
                 const AttentionOptions &options) {
  checkQueryKey(q, k, options);
  PEJIT_REF_CHECK(v.rank() == 4 && v.shape[0] == k.shape[0] && v.shape[1] == k.shape[1] &&
                      v.shape[2] == k.shape[2],
                  "v must be [b, hkv, skv, dv] matching k " + shapeToString(k.shape) + ", got " +
                      shapeToString(v.shape));
  const int64_t batch = q.shape[0], heads = q.shape[1], sq = q.shape[2], kvHeads = k.shape[1],
                skv = k.shape[2], valueDim = v.shape[3];
  const int64_t group = heads / kvHeads;
  if (const Tensor *valueTerm = options.valueTerm)
    PEJIT_REF_CHECK(valueTerm->shape == std::vector<int64_t>({sq, skv, valueDim}) ||
                        valueTerm->shape == std::vector<int64_t>({heads, sq, skv, valueDim}),
                    "valueTerm must be [(hq,) sq, skv, dv], got " +
                        shapeToString(valueTerm->shape));

  const BucketedValueTerm &bucketed = options.bucketedValueTerm;
  if (bucketed)
    PEJIT_REF_CHECK((bucketed.rows->rank() == 2 ||
                     (bucketed.rows->rank() == 3 && bucketed.rows->shape[0] == heads)) &&
                        bucketed.rows->shape.back() == valueDim,
                    "bucketed value term rows must be [B, dv] or [hq, B, dv], got " +
                        shapeToString(bucketed.rows->shape));
  const Tensor probabilities = attentionProbabilities(q, k, options);
  Tensor out({batch, heads, sq, valueDim});
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) {
          double p = probabilities.at(b, h, i, j);
          if (p == 0.0)
            continue; // masked (or underflowed) keys contribute nothing
          int64_t bucket = bucketed ? bucketed.bucket(b, i, j) : 0;
          for (int64_t c = 0; c < valueDim; ++c) {
            // Shaw et al. 2018, eq. (3): z_i = Σ_j p_ij (v_j + a^V_ij).
            double value = v.at(b, h / group, j, c);
            if (const Tensor *term = options.valueTerm)
              value += term->rank() == 3 ? term->at(i, j, c) : term->at(h, i, j, c);
            if (bucketed)
              value += bucketed.rows->rank() == 2 ? bucketed.rows->at(bucket, c)
                                                  : bucketed.rows->at(h, bucket, c);
            out.at(b, h, i, c) += p * value;
          }
        }
  return out;
}

} // namespace pejit::ref
