//===- RopeScalingTest.cpp - RoPE scaling variants vs their stated math ---===//
//
// Each scaling is checked against an independent statement of what it should
// do (docs/semantics.md: RoPE), not against stored outputs.
//
//===----------------------------------------------------------------------===//

#include "pejit/reference/Rope.h"
#include "tests/unit/RandomInputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pejit::test {
namespace {

using ref::RopeConfig;
using ref::RopeScaling;
using Kind = RopeScaling::Kind;

constexpr double kPi = 3.14159265358979323846;

RopeConfig scaled(Kind kind, double factor, int64_t original = 0, double theta = 10000.0) {
  RopeConfig config;
  config.theta = theta;
  config.scaling.kind = kind;
  config.scaling.factor = factor;
  config.scaling.originalMaxPosition = original;
  return config;
}

/// 1 / theta^(2c / rd): the unscaled RoFormer frequency.
double plainFrequency(double theta, int64_t c, int64_t rotaryDim) {
  return std::pow(theta, -2.0 * double(c) / double(rotaryDim));
}

void expectFrequenciesNear(const std::vector<double> &got, const std::vector<double> &expected,
                           double relTol = 1e-14) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t c = 0; c < got.size(); ++c)
    EXPECT_NEAR(got[c], expected[c], relTol * expected[c]) << "frequency " << c;
}

// Linear scaling divides positions by the factor: linear at p·factor is plain
// RoPE at p.
TEST(RopeScaling, LinearAtScaledPositionEqualsNone) {
  PEJIT_SEEDED_RNG(rng);
  for (double factor : {4.0, 2.5}) {
    Tensor x = rng.tensor({1, 2, 6, 16});
    PositionIds positions = rng.positions({6}, 0, 20000);
    PositionIds stretched = positions;
    for (int64_t &p : positions.data)
      p *= 2; // even, so p·2.5 stays an integer
    for (size_t n = 0; n < positions.data.size(); ++n)
      stretched.data[n] = int64_t(double(positions.data[n]) * factor);
    Tensor viaLinear = ref::applyRope(scaled(Kind::Linear, factor), x, stretched, 0);
    Tensor viaNone = ref::applyRope(RopeConfig(), x, positions, 0);
    EXPECT_TRUE(tensorsNear(viaLinear, viaNone, 1e-10)) << "factor " << factor;
  }
}

// Static NTK is plain RoPE with theta' = theta·factor^(rd/(rd−2)).
TEST(RopeScaling, NtkEqualsNoneWithStretchedTheta) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 32;
  for (int64_t rotaryDim : {int64_t(32), int64_t(8)}) {
    RopeConfig ntk = scaled(Kind::Ntk, 3.0);
    ntk.rotaryDim = rotaryDim;
    RopeConfig plain;
    plain.rotaryDim = rotaryDim;
    plain.theta = 10000.0 * std::pow(3.0, double(rotaryDim) / (rotaryDim - 2.0));
    expectFrequenciesNear(ref::computeRopeFrequencies(ntk, headDim, 0).invFreq,
                          ref::computeRopeFrequencies(plain, headDim, 0).invFreq);
    Tensor x = rng.tensor({1, 1, 4, headDim});
    PositionIds positions = rng.positions({4}, 0, 100000);
    EXPECT_TRUE(tensorsNear(ref::applyRope(ntk, x, positions, 0),
                            ref::applyRope(plain, x, positions, 0), 1e-9));
  }
}

// Dynamic NTK: unscaled up to the original length; beyond it, plain RoPE with
// theta' = theta·((factor·L/orig) − (factor − 1))^(rd/(rd−2)).
TEST(RopeScaling, DynamicNtkIsUnscaledUntilOriginalThenStretchesTheta) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 64, original = 2048;
  const double factor = 2.0;
  RopeConfig dynamic = scaled(Kind::DynamicNtk, factor, original);
  const std::vector<double> unscaled =
      ref::computeRopeFrequencies(RopeConfig(), headDim, 0).invFreq;
  for (int64_t seqLen : {int64_t(1), rng.integer(2, original - 1), original})
    EXPECT_EQ(ref::computeRopeFrequencies(dynamic, headDim, seqLen).invFreq, unscaled)
        << "seqLen " << seqLen;

  const int64_t seqLen = rng.integer(original + 1, 8 * original);
  RopeConfig plain;
  plain.theta =
      10000.0 * std::pow(factor * seqLen / original - (factor - 1.0), headDim / (headDim - 2.0));
  expectFrequenciesNear(ref::computeRopeFrequencies(dynamic, headDim, seqLen).invFreq,
                        ref::computeRopeFrequencies(plain, headDim, 0).invFreq);

  // Through applyRope: seqLen is max(position) + 1 over queries and keys.
  PositionIds queries = PositionIds::shared({seqLen - 1});
  PositionIds keys = rng.positions({5}, 0, seqLen - 1);
  EXPECT_EQ(ref::maxPositionPlusOne(queries, keys), seqLen);
  Tensor x = rng.tensor({1, 1, 5, headDim});
  EXPECT_TRUE(tensorsNear(ref::applyRope(dynamic, x, keys, ref::maxPositionPlusOne(queries, keys)),
                          ref::applyRope(plain, x, keys, 0), 1e-9));
}

// Llama 3.1 defaults: high-frequency channels (wavelength < orig/hff) keep
// their frequency, low-frequency ones (wavelength > orig/lff) are divided by
// the factor, and the band between lies in between.
TEST(RopeScaling, Llama3KeepsHighFrequenciesAndDividesLowOnes) {
  const int64_t rotaryDim = 128, original = 8192;
  const double theta = 500000.0, factor = 8.0, lff = 1.0, hff = 4.0;
  RopeConfig config = scaled(Kind::Llama3, factor, original, theta);
  config.scaling.lowFreqFactor = lff;
  config.scaling.highFreqFactor = hff;
  std::vector<double> invFreq = ref::computeRopeFrequencies(config, rotaryDim, 0).invFreq;
  int high = 0, low = 0, medium = 0;
  for (int64_t c = 0; c < rotaryDim / 2; ++c) {
    double plain = plainFrequency(theta, c, rotaryDim);
    double wavelength = 2.0 * kPi / plain;
    if (wavelength < original / hff) {
      EXPECT_NEAR(invFreq[c], plain, 1e-14 * plain) << "high channel " << c;
      ++high;
    } else if (wavelength > original / lff) {
      EXPECT_NEAR(invFreq[c], plain / factor, 1e-14 * plain) << "low channel " << c;
      ++low;
    } else {
      EXPECT_GE(invFreq[c], plain / factor * (1 - 1e-14)) << "channel " << c;
      EXPECT_LE(invFreq[c], plain * (1 + 1e-14)) << "channel " << c;
      ++medium;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
}

// YaRN with no mscale: attention factor 0.1·ln(factor) + 1; the highest
// frequency is extrapolated (unscaled), the lowest interpolated (÷ factor),
// and every channel lies between.
TEST(RopeScaling, YarnAttentionFactorAndFrequencyRamp) {
  const int64_t rotaryDim = 64, original = 4096;
  const double factor = 4.0;
  RopeConfig config = scaled(Kind::Yarn, factor, original);
  ref::RopeFrequencies freqs = ref::computeRopeFrequencies(config, rotaryDim, 0);
  EXPECT_NEAR(freqs.attentionFactor, 0.1 * std::log(factor) + 1.0, 1e-15);
  const int64_t last = rotaryDim / 2 - 1;
  EXPECT_NEAR(freqs.invFreq[0], 1.0, 1e-15);
  double lowest = plainFrequency(10000.0, last, rotaryDim);
  EXPECT_NEAR(freqs.invFreq[last], lowest / factor, 1e-14 * lowest);
  // Frequencies with fewer than beta_fast rotations over the original context
  // (truncated with floor) stay unscaled: c <= floor(rd·ln(orig/(32·2π)) /
  // (2·ln θ)).
  int64_t lastUnscaled = int64_t(
      std::floor(rotaryDim * std::log(original / (32.0 * 2 * kPi)) / (2 * std::log(10000.0))));
  double previousRatio = 1.0;
  for (int64_t c = 0; c <= last; ++c) {
    double ratio = freqs.invFreq[c] / plainFrequency(10000.0, c, rotaryDim);
    if (c <= lastUnscaled) {
      EXPECT_NEAR(ratio, 1.0, 1e-14) << "channel " << c;
    }
    EXPECT_LE(ratio, previousRatio + 1e-14) << "ramp not monotone at " << c;
    EXPECT_GE(ratio, 1.0 / factor - 1e-14) << "channel " << c;
    previousRatio = ratio;
  }
}

TEST(RopeScaling, YarnAttentionFactorSources) {
  RopeConfig config = scaled(Kind::Yarn, 40.0, 4096);
  // DeepSeek-style: get_mscale(s, m) / get_mscale(s, m_all).
  config.scaling.mscale = 0.707;
  config.scaling.mscaleAllDim = 1.0;
  EXPECT_NEAR(ref::computeRopeFrequencies(config, 64, 0).attentionFactor,
              (0.1 * 0.707 * std::log(40.0) + 1) / (0.1 * std::log(40.0) + 1), 1e-15);
  // Only one of the two given: falls back to get_mscale(factor).
  config.scaling.mscaleAllDim.reset();
  EXPECT_NEAR(ref::computeRopeFrequencies(config, 64, 0).attentionFactor, 0.1 * std::log(40.0) + 1,
              1e-15);
  config.scaling.attentionFactor = 0.75;
  EXPECT_EQ(ref::computeRopeFrequencies(config, 64, 0).attentionFactor, 0.75);
  // factor <= 1 means no extension: get_mscale is 1.
  RopeConfig unit = scaled(Kind::Yarn, 1.0, 4096);
  EXPECT_EQ(ref::computeRopeFrequencies(unit, 64, 0).attentionFactor, 1.0);
}

// truncate=false keeps the fractional correction range: the ramp then starts
// strictly inside the channel after floor(low), so fewer channels are exact.
TEST(RopeScaling, YarnTruncateOnlyMovesTheRampEnds) {
  const int64_t rotaryDim = 64;
  RopeConfig truncated = scaled(Kind::Yarn, 4.0, 4096);
  RopeConfig exact = truncated;
  exact.scaling.truncate = false;
  auto a = ref::computeRopeFrequencies(truncated, rotaryDim, 0).invFreq;
  auto b = ref::computeRopeFrequencies(exact, rotaryDim, 0).invFreq;
  EXPECT_EQ(a.front(), b.front());
  EXPECT_EQ(a.back(), b.back());
  EXPECT_NE(a, b);
}

// LongRoPE: short factors while max(position)+1 <= original, long beyond;
// inv_freq[c] = 1 / (ext[c]·theta^(2c/rd)).
TEST(RopeScaling, LongRopeSwitchesFactorsAfterOriginalLength) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 16, original = 4096;
  RopeConfig config = scaled(Kind::LongRope, 16.0, original);
  for (int64_t c = 0; c < headDim / 2; ++c) {
    config.scaling.shortFactor.push_back(rng.uniform(1.0, 2.0));
    config.scaling.longFactor.push_back(rng.uniform(2.0, 40.0));
  }
  for (int64_t seqLen : {int64_t(1), original, original + 1, 10 * original}) {
    const std::vector<double> &ext =
        seqLen > original ? config.scaling.longFactor : config.scaling.shortFactor;
    std::vector<double> expected;
    for (int64_t c = 0; c < headDim / 2; ++c)
      expected.push_back(1.0 / (ext[c] * std::pow(10000.0, 2.0 * c / headDim)));
    ref::RopeFrequencies freqs = ref::computeRopeFrequencies(config, headDim, seqLen);
    expectFrequenciesNear(freqs.invFreq, expected);
    EXPECT_NEAR(freqs.attentionFactor, std::sqrt(1 + std::log(16.0) / std::log(double(original))),
                1e-15);
  }
  // Through applyRope: ids reaching position `original` (seqLen original+1)
  // use the long factors, i.e. differ from ids one short of it.
  Tensor x = rng.tensor({1, 1, 1, headDim});
  PositionIds ids = PositionIds::shared({7});
  Tensor shortRope = ref::applyRope(config, x, ids, original);
  Tensor longRope = ref::applyRope(config, x, ids, original + 1);
  EXPECT_FALSE(tensorsNear(shortRope, longRope, 1e-12));
  config.scaling.attentionFactor = 1.25;
  EXPECT_EQ(ref::computeRopeFrequencies(config, headDim, 1).attentionFactor, 1.25);
  RopeConfig noExtension = scaled(Kind::LongRope, 1.0, original);
  noExtension.scaling.shortFactor = config.scaling.shortFactor;
  noExtension.scaling.longFactor = config.scaling.longFactor;
  EXPECT_EQ(ref::computeRopeFrequencies(noExtension, headDim, 1).attentionFactor, 1.0);
}

} // namespace
} // namespace pejit::test
