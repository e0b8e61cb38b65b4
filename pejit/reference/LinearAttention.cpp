// linearAttention (LinearAttention.h): directly from the definition, one
// query row at a time over its visible keys.
#include "pejit/reference/LinearAttention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pejit::ref {

double featureMap(FeatureMap map, double x) {
  switch (map) {
  case FeatureMap::EluPlusOne:
    return x > 0 ? x + 1 : std::exp(x);
  case FeatureMap::Relu:
    return std::max(x, 0.0);
  case FeatureMap::Identity:
  case FeatureMap::SoftmaxKeys:
    return x;
  }
  return x;
}

namespace {

Tensor mapped(Tensor t, FeatureMap map) {
  for (double &x : t.data)
    x = featureMap(map, x);
  return t;
}

} // namespace

Tensor linearAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                       const LinearAttentionOptions &options,
                       const std::function<void(Tensor &, bool isKey)> &rotate) {
  PEJIT_REF_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "q, k, v must be rank 4");
  const int64_t batch = q.dim(0), hq = q.dim(1), sq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k.dim(1), skv = k.dim(2), dv = v.dim(3);
  PEJIT_REF_CHECK(hkv > 0 && hq % hkv == 0, "hq must be a multiple of hkv");
  // Numerator sides (nq, nk) and denominator sides (dq, dk).
  Tensor nq, nk, dq, dk;
  if (rotate && options.ropeOnNumerator) {
    dq = mapped(q, options.map);
    dk = mapped(k, options.map);
    nq = dq;
    nk = dk;
    rotate(nq, false);
    rotate(nk, true);
  } else {
    Tensor rq = q, rk = k;
    if (rotate) {
      rotate(rq, false);
      rotate(rk, true);
    }
    nq = dq = mapped(rq, options.map);
    nk = dk = mapped(rk, options.map);
  }
  const bool normalized =
      options.map != FeatureMap::Identity && options.map != FeatureMap::SoftmaxKeys;
  const Tensor *state = options.state;
  if (state)
    PEJIT_REF_CHECK(state->rank() == 4 && state->dim(0) == batch && state->dim(1) == hq &&
                        state->dim(2) == d && state->dim(3) == dv + 2,
                    "the state must be [b, hq, d, dv + 2], got " + shapeToString(state->shape));
  Tensor out({batch, hq, sq, dv});
  bool prefix = options.map != FeatureMap::SoftmaxKeys &&
                (options.algorithm == LinearAttentionOptions::Algorithm::PrefixSums ||
                 (options.algorithm == LinearAttentionOptions::Algorithm::Auto &&
                  static_cast<double>(sq) * static_cast<double>(skv) > double(1 << 22)));
  if (prefix) {
    // Rows in order see a growing prefix of the keys (all of them without
    // causal): S and z (from the state, if any) grow to each row's prefix.
    std::vector<double> sums(d * dv), z(d);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t kh = h / (hq / hkv);
        for (int64_t c = 0; c < d; ++c) {
          z[c] = state ? state->at(b, h, c, dv) : 0.0;
          for (int64_t e = 0; e < dv; ++e)
            sums[c * dv + e] = state ? state->at(b, h, c, e) : 0.0;
        }
        int64_t added = 0;
        for (int64_t i = 0; i < sq; ++i) {
          int64_t visible = options.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
          for (; added < visible; ++added)
            for (int64_t c = 0; c < d; ++c) {
              z[c] += dk.at(b, kh, added, c);
              for (int64_t e = 0; e < dv; ++e)
                sums[c * dv + e] += nk.at(b, kh, added, c) * v.at(b, kh, added, e);
            }
          if (visible == 0 && !state)
            continue; // a row that sees no key: zeros
          double den = 0;
          for (int64_t c = 0; c < d; ++c)
            den += dq.at(b, h, i, c) * z[c];
          if (normalized && den == 0)
            continue; // a zero denominator: a zero row, no epsilon
          for (int64_t e = 0; e < dv; ++e) {
            double num = 0;
            for (int64_t c = 0; c < d; ++c)
              num += nq.at(b, h, i, c) * sums[c * dv + e];
            out.at(b, h, i, e) = normalized ? num / den : num;
          }
        }
      }
    return out;
  }
  std::vector<double> num(dv), weight(skv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        int64_t visible = options.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
        if (visible == 0 && !state)
          continue; // a row that sees no key: zeros
        std::fill(num.begin(), num.end(), 0.0);
        if (options.map == FeatureMap::SoftmaxKeys) {
          // Per channel c: softmax over the state's keys (z0 of them at max
          // m0, when z0 > 0) and the visible keys of k_jc, weighting v_j.
          for (int64_t c = 0; c < d; ++c) {
            double top = -std::numeric_limits<double>::infinity(), sum = 0;
            double z0 = state ? state->at(b, h, c, dv) : 0.0;
            double m0 = state ? state->at(b, h, c, dv + 1) : 0.0;
            if (z0 != 0)
              top = m0;
            for (int64_t j = 0; j < visible; ++j)
              top = std::max(top, nk.at(b, kh, j, c));
            double carried = z0 != 0 ? std::exp(m0 - top) : 0.0;
            sum = z0 * carried;
            for (int64_t j = 0; j < visible; ++j)
              sum += weight[j] = std::exp(nk.at(b, kh, j, c) - top);
            if (sum == 0)
              continue; // a channel that has seen no key adds nothing
            for (int64_t e = 0; e < dv; ++e) {
              double s0 = state ? state->at(b, h, c, e) * carried : 0.0;
              num[e] += nq.at(b, h, i, c) * s0 / sum;
            }
            for (int64_t j = 0; j < visible; ++j)
              for (int64_t e = 0; e < dv; ++e)
                num[e] += nq.at(b, h, i, c) * weight[j] / sum * v.at(b, kh, j, e);
          }
        } else {
          // The state's keys: S0 in the numerator, z0 in the denominator.
          double den = 0;
          if (state)
            for (int64_t c = 0; c < d; ++c) {
              den += dq.at(b, h, i, c) * state->at(b, h, c, dv);
              for (int64_t e = 0; e < dv; ++e)
                num[e] += nq.at(b, h, i, c) * state->at(b, h, c, e);
            }
          for (int64_t j = 0; j < visible; ++j) {
            double score = 0, norm = 0;
            for (int64_t c = 0; c < d; ++c) {
              score += nq.at(b, h, i, c) * nk.at(b, kh, j, c);
              norm += dq.at(b, h, i, c) * dk.at(b, kh, j, c);
            }
            den += norm;
            for (int64_t e = 0; e < dv; ++e)
              num[e] += score * v.at(b, kh, j, e);
          }
          if (normalized) {
            if (den == 0)
              continue; // a zero denominator: a zero row, no epsilon
            for (double &x : num)
              x /= den;
          }
        }
        for (int64_t e = 0; e < dv; ++e)
          out.at(b, h, i, e) = num[e];
      }
    }
  return out;
}

} // namespace pejit::ref
