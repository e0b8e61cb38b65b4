//===- ScoreBiasTest.cpp - ALiBi, T5 bucket/bias and Shaw relative terms --===//

#include "pejit/reference/ScoreBias.h"
#include "tests/unit/RandomInputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace pejit::test {
namespace {

using ref::AlibiForm;

TEST(Alibi, EightHeadSlopesArePowersOfOneHalf) {
  std::vector<double> slopes = ref::alibiSlopes(8);
  ASSERT_EQ(slopes.size(), 8u);
  for (int h = 0; h < 8; ++h)
    EXPECT_EQ(slopes[h], std::ldexp(1.0, -(h + 1))) << "head " << h;
}

// Power-of-two n: geometric with start = ratio = 2^(−8/n). The paper's code
// forms start·ratio^i, which rounds a few ulps away from 2^(−8(i+1)/n).
TEST(Alibi, PowerOfTwoSlopesAreGeometric) {
  for (int64_t n : {1, 2, 4, 16, 32, 64}) {
    std::vector<double> slopes = ref::alibiSlopes(n);
    ASSERT_EQ(int64_t(slopes.size()), n);
    for (int64_t h = 0; h < n; ++h) {
      double exact = std::exp2(-8.0 * double(h + 1) / double(n));
      EXPECT_NEAR(slopes[h], exact, 1e-14 * exact) << "n " << n << " head " << h;
    }
  }
}

// Paper rule for 12 heads: slopes(8) then slopes(16)[0::2][:4].
TEST(Alibi, TwelveHeadsFollowTheNonPowerOfTwoRule) {
  std::vector<double> slopes = ref::alibiSlopes(12);
  ASSERT_EQ(slopes.size(), 12u);
  for (int h = 0; h < 8; ++h)
    EXPECT_EQ(slopes[h], std::ldexp(1.0, -(h + 1))) << "head " << h;
  const double odd[] = {std::pow(2.0, -0.5), std::pow(2.0, -1.5), std::pow(2.0, -2.5),
                        std::pow(2.0, -3.5)};
  for (int h = 0; h < 4; ++h)
    EXPECT_NEAR(slopes[8 + h], odd[h], 1e-14 * odd[h]) << "head " << 8 + h;
}

TEST(Alibi, NonPowerOfTwoCountsInterleaveTheNextPower) {
  for (int64_t n = 3; n <= 40; ++n) {
    int64_t lower = 1;
    while (lower * 2 <= n)
      lower *= 2;
    if (lower == n)
      continue;
    std::vector<double> slopes = ref::alibiSlopes(n);
    std::vector<double> base = ref::alibiSlopes(lower);
    std::vector<double> finer = ref::alibiSlopes(2 * lower);
    ASSERT_EQ(int64_t(slopes.size()), n);
    for (int64_t h = 0; h < n; ++h) {
      double expected = h < lower ? base[h] : finer[2 * (h - lower)];
      EXPECT_EQ(slopes[h], expected) << "n " << n << " head " << h;
    }
  }
}

// A tensor-parallel shard uses the full count's slopes, never its own.
TEST(Alibi, HeadOffsetShardEqualsSliceOfFullBias) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t numHeads = 12, offset = 4, shardHeads = 5;
  const int64_t sq = rng.integer(2, 7), skv = sq + rng.integer(0, 5);
  for (AlibiForm form : {AlibiForm::Causal, AlibiForm::Symmetric}) {
    Tensor full = ref::alibiBias(numHeads, 0, numHeads, form, sq, skv);
    Tensor shard = ref::alibiBias(numHeads, offset, shardHeads, form, sq, skv);
    ASSERT_EQ(shard.shape, (std::vector<int64_t>{1, shardHeads, sq, skv}));
    for (int64_t h = 0; h < shardHeads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j)
          EXPECT_EQ(shard.at(0, h, i, j), full.at(0, offset + h, i, j));
    Tensor ownSlopes = ref::alibiBias(shardHeads, 0, shardHeads, form, sq, skv);
    EXPECT_FALSE(tensorsNear(shard, ownSlopes, 0.0));
  }
}

// Both forms are −slope·distance for keys at or before the aligned query; the
// symmetric form mirrors it for later keys.
TEST(Alibi, CausalAndSymmetricAgreeOnTheCausalPart) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t heads = 6, sq = rng.integer(1, 8), skv = sq + rng.integer(0, 8);
  Tensor causal = ref::alibiBias(heads, 0, heads, AlibiForm::Causal, sq, skv);
  Tensor symmetric = ref::alibiBias(heads, 0, heads, AlibiForm::Symmetric, sq, skv);
  std::vector<double> slopes = ref::alibiSlopes(heads);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j) {
        int64_t aligned = i + skv - sq;
        EXPECT_DOUBLE_EQ(causal.at(0, h, i, j), -slopes[h] * double(aligned - j));
        if (j <= aligned) {
          EXPECT_EQ(symmetric.at(0, h, i, j), causal.at(0, h, i, j));
        } else {
          EXPECT_EQ(symmetric.at(0, h, i, j), -causal.at(0, h, i, j));
        }
      }
}

// BLOOM's form is +slope·j: the causal form plus slope·(i + skv − sq), one
// constant per query row (what makes softmax attention the same).
TEST(Alibi, BloomIsTheCausalFormPlusAConstantPerRow) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t heads = 5, sq = rng.integer(1, 8), skv = sq + rng.integer(0, 8);
  Tensor causal = ref::alibiBias(heads, 0, heads, AlibiForm::Causal, sq, skv);
  Tensor bloom = ref::alibiBias(heads, 0, heads, AlibiForm::Bloom, sq, skv);
  std::vector<double> slopes = ref::alibiSlopes(heads);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t j = 0; j < skv; ++j) {
        EXPECT_DOUBLE_EQ(bloom.at(0, h, i, j), slopes[h] * double(j));
        EXPECT_NEAR(bloom.at(0, h, i, j) - causal.at(0, h, i, j), slopes[h] * double(i + skv - sq),
                    1e-12);
      }
}

TEST(Alibi, ExplicitSlopesReplaceTheComputedOnes) {
  PEJIT_SEEDED_RNG(rng);
  std::vector<double> slopes = {rng.uniform(0, 1), rng.uniform(0, 1), rng.uniform(0, 1),
                                rng.uniform(0, 1)};
  Tensor bias = ref::alibiBias(4, 1, 2, AlibiForm::Causal, 3, 5, slopes);
  for (int64_t h = 0; h < 2; ++h)
    EXPECT_DOUBLE_EQ(bias.at(0, h, 0, 0), -slopes[1 + h] * (0 + 5 - 3 - 0));
}

// Values worked by hand from T5's formula (bidirectional: 16 buckets per sign,
// 8 exact; log buckets 8 + floor(ln(r/8)/ln(16)·8)).
TEST(T5Bias, BidirectionalBucketsAtKnownDistances) {
  auto bucket = [](int64_t rel) { return ref::t5RelativePositionBucket(rel, true, 32, 128); };
  EXPECT_EQ(bucket(0), 0);
  EXPECT_EQ(bucket(-1), 1);
  EXPECT_EQ(bucket(1), 17);
  EXPECT_EQ(bucket(-7), 7);
  EXPECT_EQ(bucket(-8), 8);
  EXPECT_EQ(bucket(-16), 10);
  EXPECT_EQ(bucket(-127), 15);
  EXPECT_EQ(bucket(-128), 15);
  EXPECT_EQ(bucket(-100000), 15);
  EXPECT_EQ(bucket(200), 31);
}

// Causal: future keys all map to bucket 0; 16 exact; log buckets up to 31.
TEST(T5Bias, CausalBucketsAtKnownDistances) {
  auto bucket = [](int64_t rel) { return ref::t5RelativePositionBucket(rel, false, 32, 128); };
  EXPECT_EQ(bucket(1), 0);
  EXPECT_EQ(bucket(500), 0);
  EXPECT_EQ(bucket(0), 0);
  EXPECT_EQ(bucket(-1), 1);
  EXPECT_EQ(bucket(-15), 15);
  EXPECT_EQ(bucket(-16), 16);
  EXPECT_EQ(bucket(-128), 31);
  EXPECT_EQ(bucket(-1000000), 31);
}

TEST(T5Bias, BucketsAreMonotoneAndSignSplit) {
  for (int64_t r = 1; r < 2000; ++r) {
    int64_t before = ref::t5RelativePositionBucket(-r, true, 32, 128);
    EXPECT_EQ(ref::t5RelativePositionBucket(r, true, 32, 128), before + 16);
    EXPECT_GE(ref::t5RelativePositionBucket(-(r + 1), true, 32, 128), before);
    EXPECT_GE(ref::t5RelativePositionBucket(-(r + 1), false, 32, 128),
              ref::t5RelativePositionBucket(-r, false, 32, 128));
  }
}

TEST(T5Bias, BiasLooksUpTableByAlignedRelativePosition) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t buckets = 32, heads = 3;
  Tensor table = rng.tensor({buckets, heads});
  for (bool bidirectional : {true, false}) {
    const int64_t sq = rng.integer(1, 6), skv = sq + rng.integer(0, 40);
    Tensor bias = ref::t5Bias(table, bidirectional, buckets, 128, sq, skv);
    ASSERT_EQ(bias.shape, (std::vector<int64_t>{1, heads, sq, skv}));
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) {
          int64_t bucket =
              ref::t5RelativePositionBucket(j - (i + skv - sq), bidirectional, buckets, 128);
          EXPECT_EQ(bias.at(0, h, i, j), table.at(bucket, h));
        }
  }
}

// Shaw: beyond ±k every key reuses the table's edge row.
TEST(Shaw, TermsAreConstantBeyondClip) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t clip = 2, sq = 4, skv = 12, d = 5, dv = 3;
  Tensor q = rng.tensor({1, 2, sq, d});
  Tensor keyTable = rng.tensor({2 * clip + 1, d});
  Tensor valueTable = rng.tensor({2 * clip + 1, dv});
  Tensor keyTerm = ref::relativeKeyTerm(q, keyTable, clip, skv);
  Tensor valueTerm = ref::relativeValueTerm(valueTable, clip, sq, skv);
  for (int64_t i = 0; i < sq; ++i) {
    const int64_t aligned = i + skv - sq;
    for (int64_t j = 0; j < skv; ++j) {
      int64_t rel = j - aligned;
      if (std::abs(rel) <= clip)
        continue;
      int64_t edge = aligned + (rel > 0 ? clip : -clip);
      if (edge < 0 || edge >= skv)
        continue;
      for (int64_t h = 0; h < 2; ++h)
        EXPECT_EQ(keyTerm.at(0, h, i, j), keyTerm.at(0, h, i, edge));
      for (int64_t c = 0; c < dv; ++c)
        EXPECT_EQ(valueTerm.at(i, j, c), valueTerm.at(i, edge, c));
    }
  }
}

TEST(Shaw, KeyTermIsDotWithClippedTableRow) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t clip = 3, batch = 2, heads = 2, sq = 5, skv = 9, d = 6;
  Tensor q = rng.tensor({batch, heads, sq, d});
  Tensor keyTable = rng.tensor({2 * clip + 1, d});
  Tensor term = ref::relativeKeyTerm(q, keyTable, clip, skv);
  ASSERT_EQ(term.shape, (std::vector<int64_t>{batch, heads, sq, skv}));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t j = 0; j < skv; ++j) {
          int64_t rel = std::clamp<int64_t>(j - (i + skv - sq), -clip, clip);
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c)
            dot += q.at(b, h, i, c) * keyTable.at(rel + clip, c);
          EXPECT_NEAR(term.at(b, h, i, j), dot, 1e-14);
        }
}

TEST(Shaw, ValueTermCopiesClippedTableRow) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t clip = 1, sq = 3, skv = 6, dv = 4;
  Tensor valueTable = rng.tensor({2 * clip + 1, dv});
  Tensor term = ref::relativeValueTerm(valueTable, clip, sq, skv);
  ASSERT_EQ(term.shape, (std::vector<int64_t>{sq, skv, dv}));
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j) {
      int64_t rel = std::clamp<int64_t>(j - (i + skv - sq), -clip, clip);
      for (int64_t c = 0; c < dv; ++c)
        EXPECT_EQ(term.at(i, j, c), valueTable.at(rel + clip, c));
    }
}

} // namespace
} // namespace pejit::test
