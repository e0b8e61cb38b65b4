// linearAttentionBackward (LinearAttentionGrad.h): the feature rows as the
// forward forms them, then each row's gradients over its visible keys,
// then the chain through the feature map and the rotation.
#include "pejit/reference/LinearAttentionGrad.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pejit::ref {

double featureMapDerivative(FeatureMap map, double x) {
  switch (map) {
  case FeatureMap::EluPlusOne:
    return x > 0 ? 1.0 : std::exp(x);
  case FeatureMap::Relu:
    return x > 0 ? 1.0 : 0.0;
  case FeatureMap::Identity:
  case FeatureMap::SoftmaxKeys:
    return 1.0;
  }
  return 1.0;
}

namespace {

Tensor mapped(Tensor t, FeatureMap map) {
  for (double &x : t.data)
    x = featureMap(map, x);
  return t;
}

/// One side's feature rows: the numerator's (tilde), the denominator's
/// (hat), and the values the feature map was applied to (for phi').
struct Features {
  Tensor tilde, hat, preMap;
};

Features features(const Tensor &x, bool isKey, const LinearAttentionOptions &options,
                  const std::function<void(Tensor &, bool)> &rotate) {
  Features f;
  if (rotate && options.ropeOnNumerator) {
    f.preMap = x;
    f.hat = mapped(x, options.map);
    f.tilde = f.hat;
    rotate(f.tilde, isKey);
  } else {
    f.preMap = x;
    if (rotate)
      rotate(f.preMap, isKey);
    f.hat = f.tilde = mapped(f.preMap, options.map);
  }
  return f;
}

/// dx from the feature rows' gradients (dtilde, dhat), by the chain rule
/// through the placement's rotation and the feature map.
Tensor chain(const Features &f, Tensor dTilde, const Tensor &dHat, bool isKey,
             const LinearAttentionOptions &options,
             const std::function<void(Tensor &, bool)> &rotateBack) {
  bool onNumerator = rotateBack && options.ropeOnNumerator;
  if (onNumerator)
    rotateBack(dTilde, isKey); // d phi(x) from the rotated numerator rows
  Tensor dx = dTilde;
  for (size_t n = 0; n < dx.data.size(); ++n)
    dx.data[n] =
        (dTilde.data[n] + dHat.data[n]) * featureMapDerivative(options.map, f.preMap.data[n]);
  if (rotateBack && !onNumerator)
    rotateBack(dx, isKey); // the rotation came before the feature map
  return dx;
}

/// softmax_keys: out_i = sum_c q_ic sum_j w_jc v_j with w_jc = e_jc / Z_c,
/// e_jc = exp(k_jc - max_j k_jc) over row i's visible keys (R applied to q
/// and k first when rotating). With dw_jc = q_ic (v_j . dO_i):
///   dq_ic = sum_j w_jc (v_j . dO_i)
///   dk_jc += w_jc (dw_jc - sum_j' w_j'c dw_j'c)   (the softmax's backward)
///   dv_j  += (sum_c q_ic w_jc) dO_i
LinearAttentionGradients
softmaxKeysBackward(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dOut,
                    const LinearAttentionOptions &options,
                    const std::function<void(Tensor &, bool)> &rotate,
                    const std::function<void(Tensor &, bool)> &rotateBack) {
  const int64_t batch = q.dim(0), hq = q.dim(1), sq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k.dim(1), skv = k.dim(2), dv = v.dim(3);
  Tensor rq = q, rk = k;
  if (rotate) {
    rotate(rq, false);
    rotate(rk, true);
  }
  Tensor dq(q.shape), dk(k.shape), dvOut(v.shape);
  std::vector<double> weight(skv), vdo(skv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t visible =
            options.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
        for (int64_t j = 0; j < visible; ++j) {
          vdo[j] = 0;
          for (int64_t e = 0; e < dv; ++e)
            vdo[j] += v.at(b, kh, j, e) * dOut.at(b, h, i, e);
        }
        for (int64_t c = 0; c < d && visible > 0; ++c) {
          double top = -INFINITY, z = 0, mean = 0; // mean: sum_j w_jc (v_j . dO_i)
          for (int64_t j = 0; j < visible; ++j)
            top = std::max(top, rk.at(b, kh, j, c));
          for (int64_t j = 0; j < visible; ++j)
            z += weight[j] = std::exp(rk.at(b, kh, j, c) - top);
          for (int64_t j = 0; j < visible; ++j) {
            weight[j] /= z;
            mean += weight[j] * vdo[j];
          }
          const double qc = rq.at(b, h, i, c);
          dq.at(b, h, i, c) = mean;
          for (int64_t j = 0; j < visible; ++j) {
            dk.at(b, kh, j, c) += weight[j] * qc * (vdo[j] - mean);
            for (int64_t e = 0; e < dv; ++e)
              dvOut.at(b, kh, j, e) += qc * weight[j] * dOut.at(b, h, i, e);
          }
        }
      }
    }
  if (rotateBack) {
    rotateBack(dq, false);
    rotateBack(dk, true);
  }
  return {dq, dk, dvOut};
}

} // namespace

LinearAttentionGradients
linearAttentionBackward(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor &dOut,
                        const LinearAttentionOptions &options,
                        const std::function<void(Tensor &, bool isKey)> &rotate,
                        const std::function<void(Tensor &, bool isKey)> &rotateBack) {
  PEJIT_REF_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, "q, k, v must be rank 4");
  PEJIT_REF_CHECK(!(options.map == FeatureMap::SoftmaxKeys && options.ropeOnNumerator),
                  "softmax_keys takes rope_before_feature_map only");
  PEJIT_REF_CHECK(!options.state, "the backward of a carried state is not built");
  PEJIT_REF_CHECK(static_cast<bool>(rotate) == static_cast<bool>(rotateBack),
                  "rotate and rotateBack come together");
  const int64_t batch = q.dim(0), hq = q.dim(1), sq = q.dim(2), d = q.dim(3);
  const int64_t hkv = k.dim(1), skv = k.dim(2), dv = v.dim(3);
  PEJIT_REF_CHECK(hkv > 0 && hq % hkv == 0, "hq must be a multiple of hkv");
  PEJIT_REF_CHECK(dOut.shape == std::vector<int64_t>({batch, hq, sq, dv}),
                  "dOut must be [b, hq, sq, dv], got " + shapeToString(dOut.shape));
  if (options.map == FeatureMap::SoftmaxKeys)
    return softmaxKeysBackward(q, k, v, dOut, options, rotate, rotateBack);
  const bool normalized = options.map != FeatureMap::Identity;
  const Features fq = features(q, false, options, rotate), fk = features(k, true, options, rotate);
  Tensor dqTilde(q.shape), dqHat(q.shape), dkTilde(k.shape), dkHat(k.shape), dvOut(v.shape);
  std::vector<double> num(dv), g(dv);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < hq; ++h) {
      const int64_t kh = h / (hq / hkv);
      for (int64_t i = 0; i < sq; ++i) {
        const int64_t visible =
            options.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
        if (visible == 0)
          continue;
        double den = 0;
        std::fill(num.begin(), num.end(), 0.0);
        for (int64_t j = 0; j < visible; ++j) {
          double score = 0, denScore = 0;
          for (int64_t c = 0; c < d; ++c) {
            score += fq.tilde.at(b, h, i, c) * fk.tilde.at(b, kh, j, c);
            denScore += fq.hat.at(b, h, i, c) * fk.hat.at(b, kh, j, c);
          }
          den += denScore;
          for (int64_t e = 0; e < dv; ++e)
            num[e] += score * v.at(b, kh, j, e);
        }
        if (normalized && den == 0)
          continue; // a zero row, and no gradient through it
        const double scale = normalized ? 1.0 / den : 1.0;
        double dDen = 0;
        for (int64_t e = 0; e < dv; ++e) {
          g[e] = dOut.at(b, h, i, e) * scale;
          dDen -= g[e] * num[e] * scale; // -(g . o), o = num / den
        }
        if (!normalized)
          dDen = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double gv = 0, score = 0;
          for (int64_t e = 0; e < dv; ++e)
            gv += g[e] * v.at(b, kh, j, e);
          for (int64_t c = 0; c < d; ++c) {
            score += fq.tilde.at(b, h, i, c) * fk.tilde.at(b, kh, j, c);
            dqTilde.at(b, h, i, c) += fk.tilde.at(b, kh, j, c) * gv;
            dqHat.at(b, h, i, c) += dDen * fk.hat.at(b, kh, j, c);
            dkTilde.at(b, kh, j, c) += fq.tilde.at(b, h, i, c) * gv;
            dkHat.at(b, kh, j, c) += dDen * fq.hat.at(b, h, i, c);
          }
          for (int64_t e = 0; e < dv; ++e)
            dvOut.at(b, kh, j, e) += score * g[e];
        }
      }
    }
  LinearAttentionGradients out;
  out.dq = chain(fq, dqTilde, dqHat, false, options, rotateBack);
  out.dk = chain(fk, dkTilde, dkHat, true, options, rotateBack);
  out.dv = dvOut;
  return out;
}

} // namespace pejit::ref
