//===- AttentionTest.cpp - properties of the naive float64 attention ------===//

#include "pejit/reference/Attention.h"
#include "tests/unit/RandomInputs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace pejit::test {
namespace {

using ref::AttentionOptions;

/// The mask as docs/semantics.md states it, written out independently.
bool visibleByConvention(bool causal, std::optional<int64_t> window, int64_t i, int64_t j,
                         int64_t sq, int64_t skv) {
  int64_t aligned = i + (skv - sq);
  return (!causal || j <= aligned) && (!window || j >= aligned - *window);
}

struct Inputs {
  Tensor q, k, v;
};

Inputs randomInputs(SeededRng &rng, int64_t batch, int64_t heads, int64_t kvHeads, int64_t sq,
                    int64_t skv, int64_t d, int64_t dv, double range = 1.0) {
  return {rng.tensor({batch, heads, sq, d}, -range, range),
          rng.tensor({batch, kvHeads, skv, d}, -range, range),
          rng.tensor({batch, kvHeads, skv, dv})};
}

TEST(Attention, ProbabilityRowsSumToOneAndMaskedKeysGetZero) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t sq = rng.integer(1, 9), skv = rng.integer(1, 12);
  Inputs in = randomInputs(rng, 2, 2, 2, sq, skv, 8, 8);
  for (int variant = 0; variant < 4; ++variant) {
    AttentionOptions options;
    options.causal = variant == 1 || variant == 3;
    if (variant >= 2)
      options.window = rng.integer(0, 4);
    Tensor p = ref::attentionProbabilities(in.q, in.k, options);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          double sum = 0.0;
          int64_t visible = 0;
          for (int64_t j = 0; j < skv; ++j) {
            if (visibleByConvention(options.causal, options.window, i, j, sq, skv)) {
              EXPECT_GT(p.at(b, h, i, j), 0.0);
              ++visible;
            } else {
              EXPECT_EQ(p.at(b, h, i, j), 0.0) << "masked key " << j;
            }
            sum += p.at(b, h, i, j);
          }
          EXPECT_NEAR(sum, visible ? 1.0 : 0.0, 1e-13) << "variant " << variant << " row " << i;
        }
  }
}

// Bottom-right alignment: with sq < skv, row i sees exactly the first
// i + skv − sq + 1 keys; with a window w, at most w + 1 of them.
TEST(Attention, CausalIsBottomRightAligned) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t sq = rng.integer(1, 6), skv = sq + rng.integer(1, 8);
  Inputs in = randomInputs(rng, 1, 1, 1, sq, skv, 4, 4);
  AttentionOptions options;
  options.causal = true;
  Tensor p = ref::attentionProbabilities(in.q, in.k, options);
  const int64_t w = rng.integer(0, 3);
  options.window = w;
  Tensor windowed = ref::attentionProbabilities(in.q, in.k, options);
  for (int64_t i = 0; i < sq; ++i) {
    int64_t seen = 0, seenInWindow = 0, firstInWindow = skv;
    for (int64_t j = 0; j < skv; ++j) {
      seen += p.at(0, 0, i, j) > 0.0;
      if (windowed.at(0, 0, i, j) > 0.0) {
        ++seenInWindow;
        firstInWindow = std::min(firstInWindow, j);
      }
    }
    EXPECT_EQ(seen, i + skv - sq + 1) << "row " << i;
    for (int64_t j = i + skv - sq + 1; j < skv; ++j)
      EXPECT_EQ(p.at(0, 0, i, j), 0.0);
    EXPECT_EQ(seenInWindow, std::min(w, i + skv - sq) + 1) << "row " << i;
    EXPECT_EQ(firstInWindow, std::max<int64_t>(0, i + skv - sq - w));
  }
}

// Causal with sq > skv: the first sq − skv rows see no key and output zeros,
// never NaN and never a uniform average.
TEST(Attention, RowsThatSeeNoKeyOutputZeros) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t skv = rng.integer(1, 5), sq = skv + rng.integer(1, 5), dv = 3;
  Inputs in = randomInputs(rng, 1, 2, 1, sq, skv, 4, dv);
  AttentionOptions options;
  options.causal = true;
  Tensor out = ref::attention(in.q, in.k, in.v, options);
  for (double value : out.data)
    EXPECT_FALSE(std::isnan(value));
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < sq; ++i) {
      bool blind = i < sq - skv;
      bool allZero = true;
      for (int64_t c = 0; c < dv; ++c)
        allZero &= out.at(0, h, i, c) == 0.0;
      EXPECT_EQ(allZero, blind) << "row " << i;
    }
}

// docs/semantics.md, a row whose every bias entry is -inf outputs zeros, not NaN;
// the other rows are untouched by it.
TEST(Attention, RowsWhoseBiasIsAllMinusInfinityOutputZeros) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t sq = rng.integer(2, 6), skv = rng.integer(1, 6), dv = 3;
  Inputs in = randomInputs(rng, 1, 2, 2, sq, skv, 4, dv);
  const int64_t masked = rng.integer(0, sq - 1);
  Tensor bias({1, 1, sq, skv});
  for (int64_t j = 0; j < skv; ++j)
    bias.at({0, 0, masked, j}) = -std::numeric_limits<double>::infinity();
  AttentionOptions options;
  options.bias = &bias;
  Tensor out = ref::attention(in.q, in.k, in.v, options);
  Tensor plain = ref::attention(in.q, in.k, in.v, AttentionOptions{});
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t c = 0; c < dv; ++c) {
        double expected = i == masked ? 0.0 : plain.at(0, h, i, c);
        EXPECT_EQ(out.at(0, h, i, c), expected) << "row " << i << " of " << sq;
      }
}

// GQA/MQA: q head h reads kv head h / (hq / hkv), i.e. the same as MHA with
// each kv head repeated hq / hkv times.
TEST(Attention, GroupedQueryEqualsRepeatedKeyValueHeads) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t heads = 6, sq = 5, skv = 7, d = 4, dv = 3;
  for (int64_t kvHeads : {int64_t(1), int64_t(2), int64_t(3)}) {
    Inputs in = randomInputs(rng, 2, heads, kvHeads, sq, skv, d, dv);
    Tensor kRepeated({2, heads, skv, d}), vRepeated({2, heads, skv, dv});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t j = 0; j < skv; ++j) {
          int64_t source = h / (heads / kvHeads);
          for (int64_t c = 0; c < d; ++c)
            kRepeated.at(b, h, j, c) = in.k.at(b, source, j, c);
          for (int64_t c = 0; c < dv; ++c)
            vRepeated.at(b, h, j, c) = in.v.at(b, source, j, c);
        }
    AttentionOptions options;
    options.causal = true;
    EXPECT_TRUE(tensorsNear(ref::attention(in.q, in.k, in.v, options),
                            ref::attention(in.q, kRepeated, vRepeated, options), 0.0))
        << "kvHeads " << kvHeads;
  }
}

TEST(Attention, OutputIsProbabilitiesTimesValues) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t heads = 4, kvHeads = 2, sq = 3, skv = 6, dv = 5;
  Inputs in = randomInputs(rng, 1, heads, kvHeads, sq, skv, 4, dv);
  AttentionOptions options;
  options.window = 2;
  Tensor p = ref::attentionProbabilities(in.q, in.k, options);
  Tensor out = ref::attention(in.q, in.k, in.v, options);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t c = 0; c < dv; ++c) {
        double expected = 0.0;
        for (int64_t j = 0; j < skv; ++j)
          expected += p.at(0, h, i, j) * in.v.at(0, h / 2, j, c);
        EXPECT_NEAR(out.at(0, h, i, c), expected, 1e-14);
      }
}

// scale = 0 makes every visible key equally likely: a plain average.
TEST(Attention, ZeroScaleAveragesVisibleKeysAndDefaultIsInverseSqrtD) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t sq = 4, skv = 6, d = 9;
  Inputs in = randomInputs(rng, 1, 1, 1, sq, skv, d, 2);
  AttentionOptions options;
  options.causal = true;
  options.scale = 0.0;
  Tensor p = ref::attentionProbabilities(in.q, in.k, options);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j <= i + skv - sq; ++j)
      EXPECT_NEAR(p.at(0, 0, i, j), 1.0 / double(i + skv - sq + 1), 1e-15);
  AttentionOptions byDefault, explicitScale;
  explicitScale.scale = 1.0 / 3.0;
  EXPECT_TRUE(tensorsNear(ref::attention(in.q, in.k, in.v, byDefault),
                          ref::attention(in.q, in.k, in.v, explicitScale), 1e-15));
}

// Softcap keeps scores in (−c, c), so within a row p_max/p_min <= e^(2c), and
// P is softmax(c·tanh(scale·q·k / c)).
TEST(Attention, SoftcapBoundsScores) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t sq = 4, skv = 7, d = 8;
  const double cap = 2.0, scale = 1.0 / std::sqrt(double(d));
  Inputs in = randomInputs(rng, 1, 1, 1, sq, skv, d, 2, /*range=*/30.0);
  AttentionOptions options;
  options.softcap = cap;
  Tensor p = ref::attentionProbabilities(in.q, in.k, options);
  for (int64_t i = 0; i < sq; ++i) {
    std::vector<double> capped(skv);
    double normalizer = 0.0;
    for (int64_t j = 0; j < skv; ++j) {
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c)
        dot += in.q.at(0, 0, i, c) * in.k.at(0, 0, j, c);
      capped[j] = std::exp(cap * std::tanh(scale * dot / cap));
      normalizer += capped[j];
    }
    double largest = 0.0, smallest = 1.0;
    for (int64_t j = 0; j < skv; ++j) {
      EXPECT_NEAR(p.at(0, 0, i, j), capped[j] / normalizer, 1e-14);
      largest = std::max(largest, p.at(0, 0, i, j));
      smallest = std::min(smallest, p.at(0, 0, i, j));
    }
    EXPECT_LE(largest / smallest, std::exp(2 * cap) * (1 + 1e-12));
  }
}

// A bias B multiplies each probability by exp(B) before renormalizing, and a
// Shaw key term t equals the bias scale·t (both land before the mask).
TEST(Attention, BiasAndKeyTermShiftScores) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t batch = 2, heads = 2, sq = 3, skv = 5, d = 4;
  Inputs in = randomInputs(rng, batch, heads, heads, sq, skv, d, 3);
  AttentionOptions plain;
  plain.causal = true;
  Tensor p = ref::attentionProbabilities(in.q, in.k, plain);
  for (std::vector<int64_t> biasShape :
       {std::vector<int64_t>{1, 1, sq, skv}, std::vector<int64_t>{batch, heads, sq, skv}}) {
    Tensor bias = rng.tensor(biasShape, -3.0, 3.0);
    AttentionOptions biased = plain;
    biased.bias = &bias;
    Tensor pb = ref::attentionProbabilities(in.q, in.k, biased);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          auto biasAt = [&](int64_t j) {
            return bias.at(biasShape[0] == 1 ? 0 : b, biasShape[1] == 1 ? 0 : h, i, j);
          };
          double normalizer = 0.0;
          for (int64_t j = 0; j < skv; ++j)
            normalizer += p.at(b, h, i, j) * std::exp(biasAt(j));
          for (int64_t j = 0; j < skv; ++j)
            EXPECT_NEAR(pb.at(b, h, i, j), p.at(b, h, i, j) * std::exp(biasAt(j)) / normalizer,
                        1e-14);
        }
  }
  Tensor keyTerm = rng.tensor({batch, heads, sq, skv});
  Tensor scaledKeyTerm = keyTerm;
  for (double &value : scaledKeyTerm.data)
    value *= 1.0 / std::sqrt(double(d));
  AttentionOptions withKeyTerm = plain, withBias = plain;
  withKeyTerm.keyTerm = &keyTerm;
  withBias.bias = &scaledKeyTerm;
  EXPECT_TRUE(tensorsNear(ref::attentionProbabilities(in.q, in.k, withKeyTerm),
                          ref::attentionProbabilities(in.q, in.k, withBias), 1e-14));
}

// Shaw value term: a zero table changes nothing; a table whose rows all equal u
// adds u to every row that sees a key (probabilities sum to one).
TEST(Attention, ShawValueTermAddsWeightedTableRows) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t skv = 4, sq = skv + 2, dv = 3;
  Inputs in = randomInputs(rng, 1, 2, 2, sq, skv, 4, dv);
  AttentionOptions options;
  options.causal = true;
  Tensor plain = ref::attention(in.q, in.k, in.v, options);
  Tensor zero({sq, skv, dv});
  options.valueTerm = &zero;
  EXPECT_TRUE(tensorsNear(ref::attention(in.q, in.k, in.v, options), plain, 0.0));
  std::vector<double> u = {rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-1, 1)};
  Tensor constant({sq, skv, dv});
  for (int64_t n = 0; n < constant.numel(); ++n)
    constant.data[n] = u[n % dv];
  options.valueTerm = &constant;
  Tensor shifted = ref::attention(in.q, in.k, in.v, options);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t c = 0; c < dv; ++c) {
        double expected = plain.at(0, h, i, c) + (i >= sq - skv ? u[c] : 0.0);
        EXPECT_NEAR(shifted.at(0, h, i, c), expected, 1e-14) << "row " << i;
      }
}

// Scores far beyond exp's range still give a proper distribution.
TEST(Attention, SoftmaxIsStableForHugeScores) {
  PEJIT_SEEDED_RNG(rng);
  Inputs in = randomInputs(rng, 1, 1, 1, 3, 8, 16, 2, /*range=*/100.0);
  Tensor p = ref::attentionProbabilities(in.q, in.k, AttentionOptions());
  for (int64_t i = 0; i < 3; ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_TRUE(std::isfinite(p.at(0, 0, i, j)));
      sum += p.at(0, 0, i, j);
    }
    EXPECT_NEAR(sum, 1.0, 1e-13);
  }
}

// Bad shapes are programmer errors: the oracle names the argument and aborts.
TEST(AttentionDeathTest, ShapeMismatchNamesTheArgument) {
  Tensor q({1, 4, 2, 8}), k({1, 3, 5, 8}), v({1, 3, 5, 8});
  EXPECT_DEATH(ref::attention(q, k, v, AttentionOptions()),
               "q heads 4 must be a multiple of k heads 3");
  Tensor k2({1, 2, 5, 8}), v2({1, 2, 4, 8});
  EXPECT_DEATH(ref::attention(q, k2, v2, AttentionOptions()), "v must be");
}

} // namespace
} // namespace pejit::test
