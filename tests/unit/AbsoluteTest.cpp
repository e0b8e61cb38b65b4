//===- AbsoluteTest.cpp - sinusoidal and learned absolute embeddings ------===//

#include "pejit/reference/Absolute.h"
#include "tests/unit/RandomInputs.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace pejit::test {
namespace {

/// PE(p) alone: the embedding of a zero input.
std::vector<double> sinusoid(int64_t position, int64_t dim, double base = 10000.0) {
  Tensor zeros({1, 1, dim});
  Tensor pe = ref::sinusoidalEmbedding(zeros, PositionIds::shared({position}), base);
  return pe.data;
}

// Vaswani et al. 2017: PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(..).
TEST(Sinusoidal, MatchesTheSinCosDefinition) {
  PEJIT_SEEDED_RNG(rng);
  for (int64_t dim : {int64_t(16), int64_t(7)}) {
    for (int trial = 0; trial < 5; ++trial) {
      int64_t p = rng.integer(0, 5000);
      std::vector<double> pe = sinusoid(p, dim);
      for (int64_t i = 0; 2 * i < dim; ++i) {
        double angle = double(p) / std::pow(10000.0, 2.0 * double(i) / double(dim));
        EXPECT_NEAR(pe[2 * i], std::sin(angle), 1e-12) << "p " << p << " i " << i;
        if (2 * i + 1 < dim) {
          EXPECT_NEAR(pe[2 * i + 1], std::cos(angle), 1e-12) << "p " << p << " i " << i;
        }
      }
    }
  }
  // Position 0: sin 0 = 0 on even channels, cos 0 = 1 on odd ones.
  std::vector<double> origin = sinusoid(0, 8);
  for (int64_t c = 0; c < 8; ++c)
    EXPECT_EQ(origin[c], c % 2 ? 1.0 : 0.0);
}

// sin·sin + cos·cos per frequency is cos(Δ·ω): PE(p)·PE(p+Δ) ignores p.
TEST(Sinusoidal, DotProductDependsOnlyOnOffset) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t dim = 32;
  const int64_t delta = rng.integer(1, 300);
  auto dotAt = [&](int64_t p) {
    std::vector<double> a = sinusoid(p, dim), b = sinusoid(p + delta, dim);
    double dot = 0.0;
    for (int64_t c = 0; c < dim; ++c)
      dot += a[c] * b[c];
    return dot;
  };
  double reference = dotAt(rng.integer(0, 10000));
  for (int trial = 0; trial < 3; ++trial)
    EXPECT_NEAR(dotAt(rng.integer(0, 10000)), reference, 1e-10) << "delta " << delta;
}

TEST(Sinusoidal, AddsToInputAndHonoursPerBatchPositionsAndBase) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t batch = 2, length = 3, dim = 6;
  Tensor x = rng.tensor({batch, length, dim});
  PositionIds positions = rng.positions({batch, length}, 0, 1000);
  const double base = 500.0;
  Tensor out = ref::sinusoidalEmbedding(x, positions, base);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < length; ++t) {
      std::vector<double> pe = sinusoid(positions.data[b * length + t], dim, base);
      for (int64_t c = 0; c < dim; ++c)
        EXPECT_NEAR(out.at(b, t, c), x.at(b, t, c) + pe[c], 1e-15);
    }
}

TEST(Learned, AddsTheTableRowOfEachPosition) {
  PEJIT_SEEDED_RNG(rng);
  const int64_t batch = 2, length = 4, dim = 5, maxPositions = 16;
  Tensor x = rng.tensor({batch, length, dim});
  Tensor table = rng.tensor({maxPositions, dim});
  for (bool perBatch : {false, true}) {
    PositionIds positions = perBatch ? rng.positions({batch, length}, 0, maxPositions - 1)
                                     : rng.positions({length}, 0, maxPositions - 1);
    Tensor out = ref::learnedEmbedding(x, positions, table);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < length; ++t) {
        int64_t p = positions.data[(perBatch ? b * length : 0) + t];
        for (int64_t c = 0; c < dim; ++c)
          EXPECT_EQ(out.at(b, t, c), x.at(b, t, c) + table.at(p, c));
      }
  }
}

} // namespace
} // namespace pejit::test
