//===- RopeTest.cpp - properties of the float64 RoPE reference ------------===//

#include "pejit/reference/Rope.h"
#include "tests/unit/RandomInputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pejit::test {
namespace {

using ref::RopeConfig;
using ref::RopeLayout;

const RopeLayout kLayouts[] = {RopeLayout::Half, RopeLayout::Interleaved};

RopeConfig makeConfig(RopeLayout layout, int64_t rotaryDim = 0, double theta = 10000.0) {
  RopeConfig config;
  config.layout = layout;
  config.rotaryDim = rotaryDim;
  config.theta = theta;
  return config;
}

/// q·k of single vectors q [1,1,1,d] rotated at m and k rotated at n.
double rotatedScore(const RopeConfig &config, const Tensor &q, const Tensor &k, int64_t m,
                    int64_t n) {
  Tensor qr = ref::applyRope(config, q, PositionIds::shared({m}), 0);
  Tensor kr = ref::applyRope(config, k, PositionIds::shared({n}), 0);
  double dot = 0.0;
  for (int64_t c = 0; c < q.shape[3]; ++c)
    dot += qr.at(0, 0, 0, c) * kr.at(0, 0, 0, c);
  return dot;
}

TEST(Rope, RotationKeepsVectorNorms) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 32;
  for (RopeLayout layout : kLayouts)
    for (int64_t rotaryDim : {int64_t(0), int64_t(16), int64_t(2)}) {
      Tensor x = rng.tensor({2, 3, 7, headDim});
      PositionIds positions = rng.positions({2, 7}, 0, 100000);
      Tensor out = ref::applyRope(makeConfig(layout, rotaryDim), x, positions, 0);
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t t = 0; t < 7; ++t) {
            double before = rowNorm(x, b, h, t, 0, headDim);
            EXPECT_NEAR(rowNorm(out, b, h, t, 0, headDim), before, 1e-13 * before)
                << "rotaryDim " << rotaryDim;
          }
    }
}

// Yarn and longrope multiply cos and sin by the attention factor, so with full
// rotary a vector's norm scales by exactly that factor.
TEST(Rope, ScaledNormsGrowByAttentionFactor) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 16;
  RopeConfig yarn = makeConfig(RopeLayout::Half);
  yarn.scaling.kind = ref::RopeScaling::Kind::Yarn;
  yarn.scaling.factor = 4.0;
  yarn.scaling.originalMaxPosition = 4096;
  RopeConfig longrope = makeConfig(RopeLayout::Interleaved);
  longrope.scaling.kind = ref::RopeScaling::Kind::LongRope;
  longrope.scaling.factor = 8.0;
  longrope.scaling.originalMaxPosition = 4096;
  longrope.scaling.shortFactor.assign(headDim / 2, 1.5);
  longrope.scaling.longFactor.assign(headDim / 2, 3.0);
  // YaRN: 0.1·ln(s) + 1; LongRoPE: sqrt(1 + ln(s)/ln(original)).
  const double yarnFactor = 0.1 * std::log(4.0) + 1.0;
  const double longropeFactor = std::sqrt(1.0 + std::log(8.0) / std::log(4096.0));
  for (auto [config, factor] : {std::pair{yarn, yarnFactor}, std::pair{longrope, longropeFactor}}) {
    Tensor x = rng.tensor({1, 2, 5, headDim});
    PositionIds positions = rng.positions({5}, 0, 10000);
    Tensor out = ref::applyRope(config, x, positions, 10001);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < 5; ++t) {
        double expected = factor * rowNorm(x, 0, h, t, 0, headDim);
        EXPECT_NEAR(rowNorm(out, 0, h, t, 0, headDim), expected, 1e-13 * expected);
      }
  }
}

// RoFormer's defining property: q_m·k_n depends only on m − n. Tolerance:
// relative to |q||k|, 1e-9, covering the float64 rounding of angles ~1e6 rad.
TEST(Rope, ScoresDependOnlyOnRelativePosition) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 64;
  for (RopeLayout layout : kLayouts)
    for (int64_t rotaryDim : {int64_t(0), int64_t(32)}) {
      RopeConfig config = makeConfig(layout, rotaryDim);
      Tensor q = rng.tensor({1, 1, 1, headDim});
      Tensor k = rng.tensor({1, 1, 1, headDim});
      double bound = 1e-9 * rowNorm(q, 0, 0, 0, 0, headDim) * rowNorm(k, 0, 0, 0, 0, headDim);
      int64_t m = rng.integer(0, 4096), n = rng.integer(0, 4096);
      double base = rotatedScore(config, q, k, m, n);
      for (int64_t shift : {rng.integer(1, 1000), rng.integer(1000000, 1001000)}) {
        EXPECT_NEAR(rotatedScore(config, q, k, m + shift, n + shift), base, bound)
            << "m " << m << " n " << n << " shift " << shift;
      }
    }
}

// Half pairs (c, c + rd/2), interleaved pairs (2c, 2c+1): moving half-layout
// channel c to 2c and c + rd/2 to 2c+1 turns one into the other.
TEST(Rope, InterleavedEqualsHalfUnderChannelPermutation) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 24;
  for (int64_t rotaryDim : {int64_t(24), int64_t(12)}) {
    const int64_t half = rotaryDim / 2;
    std::vector<int64_t> halfToInterleaved(headDim);
    for (int64_t c = 0; c < headDim; ++c)
      halfToInterleaved[c] = c >= rotaryDim ? c : c < half ? 2 * c : 2 * (c - half) + 1;
    Tensor x = rng.tensor({2, 2, 5, headDim});
    PositionIds positions = rng.positions({2, 5}, 0, 50000);
    Tensor permuted(x.shape);
    for (int64_t n = 0; n < x.numel() / headDim; ++n)
      for (int64_t c = 0; c < headDim; ++c)
        permuted.data[n * headDim + halfToInterleaved[c]] = x.data[n * headDim + c];
    Tensor viaHalf = ref::applyRope(makeConfig(RopeLayout::Half, rotaryDim), x, positions, 0);
    Tensor viaInterleaved =
        ref::applyRope(makeConfig(RopeLayout::Interleaved, rotaryDim), permuted, positions, 0);
    Tensor unpermuted(x.shape);
    for (int64_t n = 0; n < x.numel() / headDim; ++n)
      for (int64_t c = 0; c < headDim; ++c)
        unpermuted.data[n * headDim + c] = viaInterleaved.data[n * headDim + halfToInterleaved[c]];
    EXPECT_TRUE(tensorsNear(unpermuted, viaHalf, 0.0)) << "rotaryDim " << rotaryDim;
  }
}

TEST(Rope, PartialRotaryPassesTrailingChannelsThrough) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t headDim = 33, rotaryDim = 10;
  for (RopeLayout layout : kLayouts) {
    Tensor x = rng.tensor({2, 2, 6, headDim});
    Tensor out = ref::applyRope(makeConfig(layout, rotaryDim), x, rng.positions({6}, 1, 1000), 0);
    bool rotatedSomething = false;
    for (int64_t n = 0; n < x.numel() / headDim; ++n)
      for (int64_t c = 0; c < headDim; ++c) {
        if (c >= rotaryDim)
          EXPECT_EQ(out.data[n * headDim + c], x.data[n * headDim + c]);
        else
          rotatedSomething |= out.data[n * headDim + c] != x.data[n * headDim + c];
      }
    EXPECT_TRUE(rotatedSomething);
  }
}

TEST(Rope, PositionZeroIsIdentity) {
  PEJIT_SEEDED_RNG(rng);
  for (RopeLayout layout : kLayouts) {
    Tensor x = rng.tensor({1, 3, 4, 8});
    Tensor out = ref::applyRope(makeConfig(layout), x, PositionIds::shared({0, 0, 0, 0}), 0);
    EXPECT_TRUE(tensorsNear(out, x, 0.0));
  }
}

// [b, s] positions give each batch row its own ids; [s] shares them.
TEST(Rope, PerBatchPositionsMatchSharedPositionsPerRow) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t batch = 3, heads = 2, length = 5, headDim = 8;
  Tensor x = rng.tensor({batch, heads, length, headDim});
  PositionIds perBatch = rng.positions({batch, length}, 0, 100000);
  RopeConfig config = makeConfig(RopeLayout::Half);
  Tensor all = ref::applyRope(config, x, perBatch, 0);
  const int64_t rowSize = heads * length * headDim;
  for (int64_t b = 0; b < batch; ++b) {
    Tensor row(
        {1, heads, length, headDim},
        std::vector<double>(x.data.begin() + b * rowSize, x.data.begin() + (b + 1) * rowSize));
    std::vector<int64_t> ids(perBatch.data.begin() + b * length,
                             perBatch.data.begin() + (b + 1) * length);
    Tensor expected = ref::applyRope(config, row, PositionIds::shared(ids), 0);
    Tensor got(
        {1, heads, length, headDim},
        std::vector<double>(all.data.begin() + b * rowSize, all.data.begin() + (b + 1) * rowSize));
    EXPECT_TRUE(tensorsNear(got, expected, 0.0)) << "batch row " << b;
  }
}

// M-RoPE with every axis carrying the same ids is plain 1-D RoPE.
TEST(Rope, SectionsWithIdenticalAxesEqualOneDimensionalRope) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t batch = 2, length = 6, headDim = 20;
  for (RopeLayout layout : kLayouts) {
    RopeConfig plain = makeConfig(layout, 16);
    RopeConfig sectioned = plain;
    sectioned.sections = {2, 3, 3};
    Tensor x = rng.tensor({batch, 2, length, headDim});
    PositionIds ids = rng.positions({batch, length}, 0, 30000);
    std::vector<int64_t> stacked;
    for (int axis = 0; axis < 3; ++axis)
      stacked.insert(stacked.end(), ids.data.begin(), ids.data.end());
    PositionIds axes({3, batch, length}, stacked);
    EXPECT_TRUE(
        tensorsNear(ref::applyRope(sectioned, x, axes, 0), ref::applyRope(plain, x, ids, 0), 0.0));
  }
}

// Changing one axis's ids only changes the channels of that axis's section.
TEST(Rope, SectionAxisOnlyMovesItsOwnFrequencies) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t length = 4, headDim = 16, half = 8;
  RopeConfig config = makeConfig(RopeLayout::Half);
  config.sections = {2, 3, 3}; // frequencies [0,2) [2,5) [5,8)
  Tensor x = rng.tensor({1, 1, length, headDim});
  PositionIds axes = rng.positions({3, length}, 0, 1000);
  PositionIds moved = axes;
  for (int64_t t = 0; t < length; ++t)
    moved.data[1 * length + t] += rng.integer(1, 500); // axis 1 only
  Tensor a = ref::applyRope(config, x, axes, 0);
  Tensor b = ref::applyRope(config, x, moved, 0);
  for (int64_t t = 0; t < length; ++t)
    for (int64_t c = 0; c < headDim; ++c) {
      int64_t frequency = c % half;
      bool inAxis1 = frequency >= 2 && frequency < 5;
      if (inAxis1) {
        EXPECT_NE(a.at(0, 0, t, c), b.at(0, 0, t, c)) << "channel " << c;
      } else {
        EXPECT_EQ(a.at(0, 0, t, c), b.at(0, 0, t, c)) << "channel " << c;
      }
    }
}

// SAM 2 compute_axial_cis, written out: pair c < rd/4 rotates by x at
// theta^(-4c/rd), pair rd/4 + c by y at the same frequency.
TEST(Rope, AxialRotatesEachQuarterByItsAxis) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t length = 5, headDim = 16, quarter = 4;
  for (RopeLayout layout : kLayouts) {
    RopeConfig config = makeConfig(layout);
    config.theta = 100.0;
    config.axial = true;
    EXPECT_EQ(ref::ropePositionAxes(config), 2);
    Tensor x = rng.tensor({1, 2, length, headDim});
    PositionIds xy = rng.positions({2, length}, 0, 64);
    Tensor out = ref::applyRope(config, x, xy, 0);
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < length; ++t)
        for (int64_t c = 0; c < 2 * quarter; ++c) {
          int64_t axis = c < quarter ? 0 : 1;
          double angle = static_cast<double>(xy.get(axis, 0, t)) /
                         std::pow(100.0, 4.0 * static_cast<double>(c % quarter) / headDim);
          int64_t a = layout == RopeLayout::Half ? c : 2 * c;
          int64_t b = layout == RopeLayout::Half ? c + 2 * quarter : 2 * c + 1;
          double xa = x.at(0, h, t, a), xb = x.at(0, h, t, b);
          EXPECT_NEAR(out.at(0, h, t, a), xa * std::cos(angle) - xb * std::sin(angle), 1e-12);
          EXPECT_NEAR(out.at(0, h, t, b), xb * std::cos(angle) + xa * std::sin(angle), 1e-12);
        }
  }
}

// Qwen3-VL apply_interleaved_mrope with mrope_section [24, 20, 20]: T H W
// round robin while H and W last (c < 60), then T.
TEST(Rope, InterleavedSectionsFollowQwen3VL) {
  RopeConfig config = makeConfig(RopeLayout::Half);
  config.sections = {24, 20, 20};
  config.interleavedSections = true;
  std::vector<int64_t> axis = ref::ropeAxisOfFrequency(config, 64);
  for (int64_t c = 0; c < 64; ++c) {
    int64_t expected = (c % 3 == 1 && c < 60) ? 1 : (c % 3 == 2 && c < 60) ? 2 : 0;
    EXPECT_EQ(axis[c], expected) << "frequency " << c;
  }
  config.interleavedSections = false;
  axis = ref::ropeAxisOfFrequency(config, 64);
  EXPECT_EQ(axis[23], 0);
  EXPECT_EQ(axis[24], 1);
  EXPECT_EQ(axis[44], 2);
}

TEST(Rope, DefaultPositionsAreBottomRightAligned) {
  EXPECT_EQ(ref::defaultKeyPositions(4).data, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(ref::defaultQueryPositions(3, 10).data, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(ref::defaultQueryPositions(1, 10).data, (std::vector<int64_t>{9}));
}

TEST(Rope, MaxPositionPlusOneSpansQueriesAndKeys) {
  PEJIT_SEEDED_RNG(rng);
  PositionIds queries = rng.positions({2, 3}, 0, 5000);
  PositionIds keys = rng.positions({7}, 0, 5000);
  int64_t largest = 0;
  for (int64_t p : queries.data)
    largest = std::max(largest, p);
  for (int64_t p : keys.data)
    largest = std::max(largest, p);
  EXPECT_EQ(ref::maxPositionPlusOne(queries, keys), largest + 1);
}

TEST(RopeDeathTest, BadConfigNamesTheRuleBroken) {
  Tensor x({1, 1, 2, 8});
  RopeConfig odd = makeConfig(RopeLayout::Half, 5);
  EXPECT_DEATH(ref::applyRope(odd, x, PositionIds::shared({0, 1}), 0), "rotaryDim 5 must be even");
  RopeConfig sectioned = makeConfig(RopeLayout::Half);
  sectioned.sections = {1, 1};
  EXPECT_DEATH(ref::applyRope(sectioned, x, PositionIds({2, 2}, {0, 1, 0, 1}), 0),
               "sections sum to 2");
}

} // namespace
} // namespace pejit::test
