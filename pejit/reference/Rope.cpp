//===- Rope.cpp - float64 rotary position embedding (RoPE) reference ------===//

#include "pejit/reference/Rope.h"

#include <cmath>
#include <limits>
#include <string>

namespace pejit::ref {

namespace {

constexpr double kPi = 3.14159265358979323846;
using Kind = RopeScaling::Kind;

// RoFormer (Su et al. 2021), HF `_compute_default_rope_parameters`:
// inv_freq[c] = 1 / base^(2c / rd).
std::vector<double> unscaledInverseFrequencies(double base, int64_t rotaryDim) {
  std::vector<double> invFreq(static_cast<size_t>(rotaryDim / 2));
  for (int64_t c = 0; c < rotaryDim / 2; ++c)
    invFreq[c] = 1.0 / std::pow(base, static_cast<double>(2 * c) / static_cast<double>(rotaryDim));
  return invFreq;
}

// YaRN (Peng et al. 2023), HF `_compute_yarn_parameters` get_mscale:
// 1 if s <= 1 else 0.1·m·ln(s) + 1.
double yarnGetMscale(double scale, double mscale = 1.0) {
  if (scale <= 1.0)
    return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies yarnFrequencies(const RopeConfig &config, int64_t rotaryDim) {
  const RopeScaling &s = config.scaling;
  const double base = config.theta;
  const double rd = static_cast<double>(rotaryDim);
  RopeFrequencies result;

  // HF `_compute_yarn_parameters`: attention_factor, else the mscale ratio
  // when both mscale and mscale_all_dim are given (non-zero), else
  // get_mscale(factor).
  if (s.attentionFactor)
    result.attentionFactor = *s.attentionFactor;
  else if (s.mscale && s.mscaleAllDim && *s.mscale != 0.0 && *s.mscaleAllDim != 0.0)
    result.attentionFactor =
        yarnGetMscale(s.factor, *s.mscale) / yarnGetMscale(s.factor, *s.mscaleAllDim);
  else
    result.attentionFactor = yarnGetMscale(s.factor);

  // HF find_correction_dim: rd·ln(orig / (num_rot·2π)) / (2·ln(base)).
  auto correctionDim = [&](double numRotations) {
    return rd * std::log(static_cast<double>(s.originalMaxPosition) / (numRotations * 2.0 * kPi)) /
           (2.0 * std::log(base));
  };
  // HF find_correction_range: floor/ceil when truncating, clamp to [0, rd-1].
  double low = correctionDim(s.betaFast);
  double high = correctionDim(s.betaSlow);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, rd - 1.0);
  // HF linear_ramp_factor: avoid a zero-width ramp.
  if (low == high)
    high += 0.001;

  std::vector<double> extrapolation = unscaledInverseFrequencies(base, rotaryDim);
  result.invFreq.resize(extrapolation.size());
  for (size_t c = 0; c < extrapolation.size(); ++c) {
    // HF linear_ramp_factor: clamp((i - low) / (high - low), 0, 1).
    double ramp = std::clamp((static_cast<double>(c) - low) / (high - low), 0.0, 1.0);
    double extrapolationFactor = 1.0 - ramp;
    double interpolation = extrapolation[c] / s.factor;
    // HF: inv_freq = interp·(1 − ef) + extrap·ef.
    result.invFreq[c] =
        interpolation * (1.0 - extrapolationFactor) + extrapolation[c] * extrapolationFactor;
  }
  return result;
}

// HF `_compute_llama3_parameters`.
std::vector<double> llama3Frequencies(const RopeConfig &config, int64_t rotaryDim) {
  const RopeScaling &s = config.scaling;
  const double orig = static_cast<double>(s.originalMaxPosition);
  const double lowFreqWavelen = orig / s.lowFreqFactor;
  const double highFreqWavelen = orig / s.highFreqFactor;
  std::vector<double> invFreq = unscaledInverseFrequencies(config.theta, rotaryDim);
  for (double &f : invFreq) {
    double wavelen = 2.0 * kPi / f;
    if (wavelen > lowFreqWavelen) {
      f = f / s.factor; // low frequency: interpolate fully
    } else if (wavelen < highFreqWavelen) {
      // high frequency: unchanged
    } else {
      // HF smooth_factor = (orig/wavelen − low) / (high − low).
      double smooth = (orig / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return invFreq;
}

void checkScaling(const RopeConfig &config, int64_t rotaryDim) {
  const RopeScaling &s = config.scaling;
  PEJIT_REF_CHECK(config.theta > 0.0, "theta must be > 0");
  if (config.axial) {
    PEJIT_REF_CHECK(rotaryDim % 4 == 0,
                    "axial RoPE needs rotaryDim % 4 == 0, got " + std::to_string(rotaryDim));
    PEJIT_REF_CHECK(s.kind == Kind::None && config.sections.empty(),
                    "axial RoPE takes no scaling and no sections");
  }
  if (s.kind == Kind::None)
    return;
  PEJIT_REF_CHECK(s.factor > 0.0, "scaling factor must be > 0");
  if (s.kind == Kind::Ntk || s.kind == Kind::DynamicNtk)
    PEJIT_REF_CHECK(rotaryDim > 2, "ntk scalings need rotaryDim > 2 "
                                   "(exponent rd/(rd-2))");
  if (s.kind == Kind::DynamicNtk || s.kind == Kind::Yarn || s.kind == Kind::Llama3 ||
      s.kind == Kind::LongRope)
    PEJIT_REF_CHECK(s.originalMaxPosition > 0, "originalMaxPosition must be > 0 for this scaling");
  if (s.kind == Kind::Llama3)
    PEJIT_REF_CHECK(s.highFreqFactor > s.lowFreqFactor && s.lowFreqFactor > 0,
                    "llama3 needs highFreqFactor > lowFreqFactor > 0");
  if (s.kind == Kind::LongRope) {
    size_t half = static_cast<size_t>(rotaryDim / 2);
    PEJIT_REF_CHECK(s.shortFactor.size() == half && s.longFactor.size() == half,
                    "longrope shortFactor and longFactor need rotaryDim/2 = " +
                        std::to_string(half) + " entries");
  }
}

} // namespace

int64_t resolveRotaryDim(const RopeConfig &config, int64_t headDim) {
  PEJIT_REF_CHECK(headDim > 0, "headDim must be > 0");
  int64_t rotaryDim = config.rotaryDim == 0 ? headDim : config.rotaryDim;
  PEJIT_REF_CHECK(rotaryDim > 0 && rotaryDim <= headDim && rotaryDim % 2 == 0,
                  "rotaryDim " + std::to_string(rotaryDim) +
                      " must be even and in (0, headDim = " + std::to_string(headDim) + "]");
  return rotaryDim;
}

RopeFrequencies computeRopeFrequencies(const RopeConfig &config, int64_t headDim, int64_t seqLen) {
  const int64_t rotaryDim = resolveRotaryDim(config, headDim);
  checkScaling(config, rotaryDim);
  const RopeScaling &s = config.scaling;
  const double rd = static_cast<double>(rotaryDim);
  RopeFrequencies result;

  switch (s.kind) {
  case Kind::None:
    result.invFreq = unscaledInverseFrequencies(config.theta, rotaryDim);
    if (config.axial) {
      // SAM 2 compute_axial_cis: 1 / theta^(4i / rd) for i < rd/4, per axis.
      const int64_t quarter = rotaryDim / 4;
      for (int64_t c = 0; c < 2 * quarter; ++c)
        result.invFreq[c] =
            1.0 / std::pow(config.theta, static_cast<double>(4 * (c % quarter)) / rd);
    }
    break;
  case Kind::Linear:
    // HF `_compute_linear_scaling_rope_parameters`: inv_freq / factor.
    result.invFreq = unscaledInverseFrequencies(config.theta, rotaryDim);
    for (double &f : result.invFreq)
      f /= s.factor;
    break;
  case Kind::Ntk:
    // NTK-aware scaling (bloc97, 2023): base = theta·factor^(rd/(rd−2)).
    result.invFreq =
        unscaledInverseFrequencies(config.theta * std::pow(s.factor, rd / (rd - 2.0)), rotaryDim);
    break;
  case Kind::DynamicNtk: {
    // HF `_compute_dynamic_ntk_parameters`, stateless: seq_len is clamped to
    // at least original, so seq_len <= original leaves the base unchanged.
    double base = config.theta;
    if (seqLen > s.originalMaxPosition) {
      double ratio =
          s.factor * static_cast<double>(seqLen) / static_cast<double>(s.originalMaxPosition) -
          (s.factor - 1.0);
      base = config.theta * std::pow(ratio, rd / (rd - 2.0));
    }
    result.invFreq = unscaledInverseFrequencies(base, rotaryDim);
    break;
  }
  case Kind::Yarn:
    result = yarnFrequencies(config, rotaryDim);
    break;
  case Kind::Llama3:
    result.invFreq = llama3Frequencies(config, rotaryDim);
    break;
  case Kind::LongRope: {
    // HF `_compute_longrope_parameters`: long factors iff seq_len > original;
    // inv_freq[c] = 1 / (ext[c]·theta^(2c/rd)).
    const std::vector<double> &ext = seqLen > s.originalMaxPosition ? s.longFactor : s.shortFactor;
    result.invFreq = unscaledInverseFrequencies(config.theta, rotaryDim);
    for (size_t c = 0; c < ext.size(); ++c)
      result.invFreq[c] /= ext[c];
    // HF `_compute_longrope_parameters` (LongRoPE paper):
    // sqrt(1 + ln(factor)/ln(original)) unless given; 1 when factor <= 1.
    if (s.attentionFactor)
      result.attentionFactor = *s.attentionFactor;
    else if (s.factor <= 1.0)
      result.attentionFactor = 1.0;
    else
      result.attentionFactor = std::sqrt(
          1.0 + std::log(s.factor) / std::log(static_cast<double>(s.originalMaxPosition)));
    break;
  }
  }
  return result;
}

int64_t ropePositionAxes(const RopeConfig &config) {
  return config.axial ? 2 : static_cast<int64_t>(config.sections.size());
}

std::vector<int64_t> ropeAxisOfFrequency(const RopeConfig &config, int64_t half) {
  std::vector<int64_t> axis(static_cast<size_t>(half), 0);
  if (config.axial) {
    for (int64_t c = half / 2; c < half; ++c)
      axis[c] = 1;
    return axis;
  }
  if (config.sections.empty())
    return axis;
  int64_t total = 0;
  for (int64_t section : config.sections) {
    PEJIT_REF_CHECK(section >= 0, "sections must be >= 0");
    total += section;
  }
  PEJIT_REF_CHECK(total == half, "sections sum to " + std::to_string(total) +
                                     " but rotaryDim/2 = " + std::to_string(half));
  if (config.interleavedSections) {
    // Qwen3-VL apply_interleaved_mrope: T H W T H W ... while H and W last.
    PEJIT_REF_CHECK(config.sections.size() == 3, "interleaved sections need 3 sections (t, h, w)");
    for (int64_t c = 0; c < half; ++c) {
      if (c % 3 == 1 && c < 3 * config.sections[1])
        axis[c] = 1;
      else if (c % 3 == 2 && c < 3 * config.sections[2])
        axis[c] = 2;
    }
    return axis;
  }
  // Qwen2-VL apply_multimodal_rotary_pos_emb: consecutive sections.
  int64_t c = 0;
  for (size_t a = 0; a < config.sections.size(); ++a)
    for (int64_t n = 0; n < config.sections[a]; ++n)
      axis[c++] = static_cast<int64_t>(a);
  return axis;
}

namespace {

/// One call's rotation, checked once: the angle of every (batch row, token,
/// frequency) and the channels each frequency rotates. applyRope and its
/// adjoint walk the same rotations.
struct RopeWalk {
  const RopeConfig &config;
  const PositionIds &positions;
  RopeFrequencies freqs;
  int64_t batch, heads, length, half, positionRows;
  bool sectioned;
  std::vector<int64_t> axisOfFrequency;
  const std::vector<double> &positionScale;

  RopeWalk(const RopeConfig &config, const Tensor &x, const PositionIds &positions, int64_t seqLen,
           const std::vector<double> &positionScale, const RopeFrequencies *frequencies)
      : config(config), positions(positions), positionScale(positionScale) {
    PEJIT_REF_CHECK(x.rank() == 4, "x must be [b, h, s, d], got " + shapeToString(x.shape));
    batch = x.shape[0], heads = x.shape[1], length = x.shape[2];
    const int64_t headDim = x.shape[3];
    freqs = computeRopeFrequencies(config, headDim, seqLen);
    if (frequencies) {
      PEJIT_REF_CHECK(frequencies->invFreq.size() == freqs.invFreq.size(),
                      "inv_freq must have rotary_dim/2 = " + std::to_string(freqs.invFreq.size()) +
                          " entries, got " + std::to_string(frequencies->invFreq.size()));
      freqs = *frequencies;
    }
    half = static_cast<int64_t>(freqs.invFreq.size());
    const int64_t axes = ropePositionAxes(config);
    sectioned = axes > 0;
    // M-RoPE and axial RoPE: frequency index c takes its angle from its axis.
    axisOfFrequency = ropeAxisOfFrequency(config, half);
    if (sectioned)
      PEJIT_REF_CHECK(positions.rank() >= 2 && positions.shape[0] == axes,
                      "positions with axes must be [A, s] or [A, b, s] with A = " +
                          std::to_string(axes) + ", got " + shapeToString(positions.shape));
    positionRows = positions.batchRows(sectioned);
    PEJIT_REF_CHECK(positions.length() == length, "positions " + shapeToString(positions.shape) +
                                                      " do not match sequence length " +
                                                      std::to_string(length));
    PEJIT_REF_CHECK(positionRows == 1 || positionRows == batch,
                    "positions " + shapeToString(positions.shape) + " do not match batch " +
                        std::to_string(batch));
    PEJIT_REF_CHECK(positionScale.empty() || positionScale.size() == 1 ||
                        static_cast<int64_t>(positionScale.size()) == batch,
                    "the position scale must have 1 or b = " + std::to_string(batch) +
                        " entries, got " + std::to_string(positionScale.size()));
  }

  double scaleOf(int64_t b) const {
    return positionScale.empty()       ? 1.0
           : positionScale.size() == 1 ? positionScale[0]
                                       : positionScale[b];
  }
  double position(int64_t b, int64_t t, int64_t c) const {
    const int64_t row = positionRows == 1 ? 0 : b;
    return static_cast<double>(sectioned ? positions.get(axisOfFrequency[c], row, t)
                                         : positions.get(row, t));
  }
  int64_t first(int64_t c) const { return config.layout == RopeLayout::Half ? c : 2 * c; }
  int64_t second(int64_t c) const {
    return config.layout == RopeLayout::Half ? c + half : 2 * c + 1;
  }
};

} // namespace

Tensor applyRope(const RopeConfig &config, const Tensor &x, const PositionIds &positions,
                 int64_t seqLen, const std::vector<double> &positionScale,
                 const RopeFrequencies *frequencies) {
  const RopeWalk walk(config, x, positions, seqLen, positionScale, frequencies);
  Tensor out = x;
  for (int64_t b = 0; b < walk.batch; ++b)
    for (int64_t t = 0; t < walk.length; ++t)
      for (int64_t c = 0; c < walk.half; ++c) {
        // RoFormer: angle = position × inv_freq, in float64 (docs/semantics.md);
        // a runtime scale multiplies the position first.
        double angle = walk.position(b, t, c) * walk.scaleOf(b) * walk.freqs.invFreq[c];
        double cosine = std::cos(angle) * walk.freqs.attentionFactor;
        double sine = std::sin(angle) * walk.freqs.attentionFactor;
        const int64_t first = walk.first(c), second = walk.second(c);
        for (int64_t h = 0; h < walk.heads; ++h) {
          double xa = x.at(b, h, t, first), xb = x.at(b, h, t, second);
          // RoFormer rotation: (a, b) -> (a cos − b sin, b cos + a sin).
          out.at(b, h, t, first) = xa * cosine - xb * sine;
          out.at(b, h, t, second) = xb * cosine + xa * sine;
        }
      }
  return out;
}

RopeGradients applyRopeBackward(const RopeConfig &config, const Tensor &x, const Tensor &dOut,
                                const PositionIds &positions, int64_t seqLen,
                                const std::vector<double> &positionScale,
                                const RopeFrequencies *frequencies) {
  const RopeWalk walk(config, x, positions, seqLen, positionScale, frequencies);
  PEJIT_REF_CHECK(dOut.shape == x.shape, "the rotated output's gradient must be " +
                                             shapeToString(x.shape) + ", got " +
                                             shapeToString(dOut.shape));
  RopeGradients grads;
  grads.dx = dOut; // channels past rotary_dim pass through
  grads.dInvFreq.assign(static_cast<size_t>(walk.half), 0.0);
  grads.dPositionScale.assign(positionScale.size(), 0.0);
  for (int64_t b = 0; b < walk.batch; ++b)
    for (int64_t t = 0; t < walk.length; ++t)
      for (int64_t c = 0; c < walk.half; ++c) {
        const double position = walk.position(b, t, c), scale = walk.scaleOf(b);
        const double invFreq = walk.freqs.invFreq[c];
        const double angle = position * scale * invFreq;
        const double cosine = std::cos(angle) * walk.freqs.attentionFactor;
        const double sine = std::sin(angle) * walk.freqs.attentionFactor;
        const int64_t first = walk.first(c), second = walk.second(c);
        // dL/dangle, summed over heads: with x' = R(angle) x,
        // dx'_a/dangle = −x'_b and dx'_b/dangle = x'_a, so dL/dangle =
        // g_b x'_a − g_a x'_b. The inverse rotation is the transpose.
        double dAngle = 0.0;
        for (int64_t h = 0; h < walk.heads; ++h) {
          const double xa = x.at(b, h, t, first), xb = x.at(b, h, t, second);
          const double ga = dOut.at(b, h, t, first), gb = dOut.at(b, h, t, second);
          const double rotatedA = xa * cosine - xb * sine, rotatedB = xb * cosine + xa * sine;
          dAngle += gb * rotatedA - ga * rotatedB;
          grads.dx.at(b, h, t, first) = ga * cosine + gb * sine;
          grads.dx.at(b, h, t, second) = gb * cosine - ga * sine;
        }
        // angle = (position · scale) · inv_freq.
        grads.dInvFreq[c] += dAngle * position * scale;
        if (!positionScale.empty())
          grads.dPositionScale[positionScale.size() == 1 ? 0 : b] += dAngle * position * invFreq;
      }
  return grads;
}

int64_t maxPositionPlusOne(const PositionIds &positions) {
  if (positions.data.empty())
    return 0;
  int64_t largest = std::numeric_limits<int64_t>::min();
  for (int64_t p : positions.data)
    largest = std::max(largest, p);
  return largest + 1;
}

} // namespace pejit::ref
