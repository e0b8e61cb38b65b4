// The float64 reference gradients (AttentionGrad.h, ScoreBiasGrad.h,
// applyRopeBackward) against central finite differences of the float64
// forward, for L = Σ dO ∘ O with fresh random inputs and dO. Tolerance:
// max-norm relative error ≤ 1e-6 (five-point differences of step 1e-4 leave
// ~1e-12 absolute).
// Once checked here, these gradients are the oracle for the kernels.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"

#include "FiniteDifferences.h"
#include "RandomInputs.h"

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace pejit::test {
namespace {

using ref::AttentionGradients;
using ref::AttentionOptions;

struct Inputs {
  Tensor q, k, v, dOut;
};

Inputs draw(SeededRng &rng, int64_t batch, int64_t heads, int64_t kvHeads, int64_t sq, int64_t skv,
            int64_t d) {
  return {rng.tensor({batch, heads, sq, d}), rng.tensor({batch, kvHeads, skv, d}),
          rng.tensor({batch, kvHeads, skv, d}), rng.tensor({batch, heads, sq, d})};
}

TEST(AttentionGrad, QueryKeyValueMatchFiniteDifferencesUnderEveryMask) {
  PEJIT_SEEDED_RNG(rng);
  struct Case {
    int64_t sq, skv;
    bool causal;
    std::optional<int64_t> window, windowRight;
    std::optional<double> softcap;
  };
  // sq > skv with causal leaves rows that see no key; windows on both sides.
  const Case cases[] = {{5, 7, false, {}, {}, {}}, {5, 7, true, {}, {}, {}},
                        {7, 4, true, {}, {}, 0.8}, {6, 6, false, 2, 1, {}},
                        {6, 9, true, 3, {}, 0.5},  {1, 7, false, {}, {}, {}}};
  for (const Case &c : cases) {
    SCOPED_TRACE("sq " + std::to_string(c.sq) + " skv " + std::to_string(c.skv));
    Inputs in = draw(rng, 2, 4, 2, c.sq, c.skv, 8);
    AttentionOptions options;
    options.causal = c.causal, options.window = c.window, options.windowRight = c.windowRight;
    options.softcap = c.softcap;
    const AttentionGradients grads = ref::attentionBackward(in.q, in.k, in.v, in.dOut, options);
    auto loss = [&] { return lossOf(ref::attention(in.q, in.k, in.v, options), in.dOut); };
    EXPECT_TRUE(matchesFiniteDifferences(in.q.data, loss, grads.dq.data)) << "dq";
    EXPECT_TRUE(matchesFiniteDifferences(in.k.data, loss, grads.dk.data)) << "dk";
    EXPECT_TRUE(matchesFiniteDifferences(in.v.data, loss, grads.dv.data)) << "dv";
    // A row that sees no key has zero gradients and lse −inf.
    const Tensor lse = ref::attentionLogSumExp(in.q, in.k, options);
    for (int64_t i = 0; i < c.sq; ++i) {
      bool seesAKey = false;
      for (int64_t j = 0; j < c.skv; ++j)
        seesAKey |= ref::keyVisible(options, i, j, c.sq, c.skv);
      if (seesAKey)
        continue;
      EXPECT_EQ(lse.at(1, 3, i), -std::numeric_limits<double>::infinity()) << "row " << i;
      for (int64_t ch = 0; ch < 8; ++ch)
        EXPECT_EQ(grads.dq.at(1, 3, i, ch), 0.0) << "row " << i;
    }
  }
}

TEST(AttentionGrad, LogSumExpNormalizesTheProbabilities) {
  PEJIT_SEEDED_RNG(rng);
  Inputs in = draw(rng, 1, 2, 1, 6, 9, 8);
  AttentionOptions options;
  options.causal = true;
  options.softcap = 2.0;
  const Tensor lse = ref::attentionLogSumExp(in.q, in.k, options);
  const double scale = ref::attentionScale(options, 8);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 6; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < 9; ++j)
        if (ref::keyVisible(options, i, j, 6, 9))
          sum += std::exp(ref::attentionScore(in.q, in.k, options, scale, 0, h, i, j).value -
                          lse.at(0, h, i));
      EXPECT_NEAR(sum, 1.0, 1e-12) << "head " << h << " row " << i;
    }
}

TEST(AttentionGrad, BiasTensorSumsOverBroadcastDimsAndMinusInfinityGetsZero) {
  PEJIT_SEEDED_RNG(rng);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 4, 5, 6}, {2, 1, 5, 6}}) {
    Inputs in = draw(rng, 2, 4, 4, 5, 6, 8);
    Tensor bias = rng.tensor(shape);
    // A −inf entry, and one row whose every entry is −inf.
    bias.at(0, 0, 1, 2) = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < 6; ++j)
      bias.at(0, 0, 3, j) = -std::numeric_limits<double>::infinity();
    AttentionOptions options;
    options.bias = &bias;
    const AttentionGradients grads = ref::attentionBackward(in.q, in.k, in.v, in.dOut, options);
    auto loss = [&] { return lossOf(ref::attention(in.q, in.k, in.v, options), in.dOut); };
    EXPECT_TRUE(matchesFiniteDifferences(bias.data, loss, grads.dBias.data)) << "dBias";
    EXPECT_TRUE(matchesFiniteDifferences(in.q.data, loss, grads.dq.data)) << "dq";
    EXPECT_EQ(grads.dBias.at(0, 0, 1, 2), 0.0);
    EXPECT_EQ(grads.dBias.at(0, 0, 3, 4), 0.0);
  }
}

TEST(AttentionGrad, T5TableMatchesFiniteDifferences) {
  PEJIT_SEEDED_RNG(rng);
  for (bool bidirectional : {true, false}) {
    Inputs in = draw(rng, 2, 3, 3, 6, 11, 8);
    Tensor table = rng.tensor({8, 3});
    const ref::RelativeDistance distance{6, 11};
    AttentionOptions options;
    options.causal = !bidirectional;
    Tensor bias = ref::t5Bias(table, bidirectional, 8, 12, distance);
    options.bias = &bias;
    const AttentionGradients grads = ref::attentionBackward(in.q, in.k, in.v, in.dOut, options);
    const Tensor dTable = ref::t5TableGradient(grads.dScores, bidirectional, 8, 12, distance);
    auto loss = [&] {
      Tensor fresh = ref::t5Bias(table, bidirectional, 8, 12, distance);
      AttentionOptions withTable = options;
      withTable.bias = &fresh;
      return lossOf(ref::attention(in.q, in.k, in.v, withTable), in.dOut);
    };
    EXPECT_TRUE(matchesFiniteDifferences(table.data, loss, dTable.data))
        << "bidirectional " << bidirectional;
  }
}

TEST(AttentionGrad, AlibiSlopesMatchFiniteDifferencesAndBloomEqualsCausal) {
  PEJIT_SEEDED_RNG(rng);
  for (ref::AlibiForm form :
       {ref::AlibiForm::Causal, ref::AlibiForm::Symmetric, ref::AlibiForm::Bloom}) {
    Inputs in = draw(rng, 2, 12, 4, 5, 9, 8);
    std::vector<double> slopes = ref::alibiSlopes(12);
    const ref::RelativeDistance distance{5, 9};
    AttentionOptions options;
    options.causal = form != ref::AlibiForm::Symmetric;
    auto biasOf = [&] { return ref::alibiBias(12, 0, 12, form, distance, slopes); };
    Tensor bias = biasOf();
    options.bias = &bias;
    const AttentionGradients grads = ref::attentionBackward(in.q, in.k, in.v, in.dOut, options);
    const std::vector<double> dSlopes = ref::alibiSlopeGradient(grads.dScores, form, distance);
    auto loss = [&] {
      Tensor fresh = biasOf();
      AttentionOptions withSlopes = options;
      withSlopes.bias = &fresh;
      return lossOf(ref::attention(in.q, in.k, in.v, withSlopes), in.dOut);
    };
    EXPECT_TRUE(matchesFiniteDifferences(slopes, loss, dSlopes)) << "form " << int(form);
    if (form == ref::AlibiForm::Bloom) {
      // CONVENTIONS: BLOOM's slope gradient is the causal form's (the two
      // biases differ by a per-row constant).
      const std::vector<double> causal =
          ref::alibiSlopeGradient(grads.dScores, ref::AlibiForm::Causal, distance);
      for (size_t h = 0; h < causal.size(); ++h)
        EXPECT_NEAR(dSlopes[h], causal[h], 1e-12 * (1 + std::fabs(causal[h]))) << "head " << h;
    }
  }
}

TEST(AttentionGrad, ShawKeyTableAndQueryMatchFiniteDifferences) {
  PEJIT_SEEDED_RNG(rng);
  for (bool perHead : {false, true}) {
    Inputs in = draw(rng, 2, 3, 3, 6, 8, 8);
    const int64_t clip = 4;
    Tensor keyTable = perHead ? rng.tensor({3, 2 * clip + 1, 8}) : rng.tensor({2 * clip + 1, 8});
    const ref::RelativeDistance distance{6, 8};
    AttentionOptions options;
    options.causal = true;
    options.softcap = 1.5;
    auto loss = [&] {
      Tensor term = ref::relativeKeyTerm(in.q, keyTable, clip, distance);
      AttentionOptions withTerm = options;
      withTerm.keyTerm = &term;
      return lossOf(ref::attention(in.q, in.k, in.v, withTerm), in.dOut);
    };
    Tensor term = ref::relativeKeyTerm(in.q, keyTable, clip, distance);
    options.keyTerm = &term;
    const AttentionGradients grads = ref::attentionBackward(in.q, in.k, in.v, in.dOut, options);
    const ref::RelativeKeyTermGradients keyGrads =
        ref::relativeKeyTermBackward(in.q, keyTable, clip, distance, grads.dKeyTerm);
    Tensor dq = grads.dq; // q reaches the loss through q·k and through the key term
    for (size_t n = 0; n < dq.data.size(); ++n)
      dq.data[n] += keyGrads.dq.data[n];
    options.keyTerm = nullptr;
    EXPECT_TRUE(matchesFiniteDifferences(keyTable.data, loss, keyGrads.dKeyTable.data))
        << "d a^K, per head " << perHead;
    EXPECT_TRUE(matchesFiniteDifferences(in.q.data, loss, dq.data)) << "dq, per head " << perHead;
    EXPECT_TRUE(matchesFiniteDifferences(in.k.data, loss, grads.dk.data)) << "dk";
  }
}

TEST(AttentionGrad, ShawValueTableMatchesFiniteDifferencesBothForms) {
  PEJIT_SEEDED_RNG(rng);
  for (bool perHead : {false, true}) {
    Inputs in = draw(rng, 1, 3, 3, 5, 7, 8);
    const int64_t clip = 4;
    Tensor valueTable = perHead ? rng.tensor({3, 2 * clip + 1, 8}) : rng.tensor({2 * clip + 1, 8});
    AttentionOptions options;
    options.window = 3;
    // The materialized [(h,) sq, skv, dv] term.
    auto loss = [&] {
      Tensor term = ref::relativeValueTerm(valueTable, clip, 5, 7);
      AttentionOptions withTerm = options;
      withTerm.valueTerm = &term;
      return lossOf(ref::attention(in.q, in.k, in.v, withTerm), in.dOut);
    };
    Tensor term = ref::relativeValueTerm(valueTable, clip, 5, 7);
    AttentionOptions materialized = options;
    materialized.valueTerm = &term;
    const AttentionGradients grads =
        ref::attentionBackward(in.q, in.k, in.v, in.dOut, materialized);
    const Tensor dTable = ref::relativeValueTableGradient(grads.dValueTerm, clip, 5, 7);
    EXPECT_TRUE(matchesFiniteDifferences(valueTable.data, loss, dTable.data))
        << "materialized, per head " << perHead;
    EXPECT_TRUE(matchesFiniteDifferences(in.q.data, loss, grads.dq.data)) << "dq";
    // The fused form's reference: the same rows by bucket.
    AttentionOptions bucketed = options;
    bucketed.bucketedValueTerm.rows = &valueTable;
    bucketed.bucketedValueTerm.bucket = [&](int64_t, int64_t i, int64_t j) {
      return ref::shawRelativeIndex(i, j, clip, 5, 7) + clip;
    };
    const AttentionGradients byBucket = ref::attentionBackward(in.q, in.k, in.v, in.dOut, bucketed);
    auto bucketLoss = [&] { return lossOf(ref::attention(in.q, in.k, in.v, bucketed), in.dOut); };
    EXPECT_TRUE(matchesFiniteDifferences(valueTable.data, bucketLoss, byBucket.dValueRows.data))
        << "bucketed, per head " << perHead;
  }
}

struct RopeCase {
  const char *name;
  ref::RopeConfig config;
  int64_t axes; // position axes (0: plain ids)
};

std::vector<RopeCase> ropeCases() {
  std::vector<RopeCase> cases;
  cases.push_back({"half", {}, 0});
  ref::RopeConfig interleaved;
  interleaved.layout = ref::RopeLayout::Interleaved;
  cases.push_back({"interleaved", interleaved, 0});
  ref::RopeConfig partial;
  partial.rotaryDim = 4;
  cases.push_back({"partial rotary", partial, 0});
  ref::RopeConfig yarn;
  yarn.scaling.kind = ref::RopeScaling::Kind::Yarn;
  yarn.scaling.factor = 4.0;
  yarn.scaling.originalMaxPosition = 8;
  cases.push_back({"yarn (attention factor)", yarn, 0});
  ref::RopeConfig llama3;
  llama3.scaling.kind = ref::RopeScaling::Kind::Llama3;
  llama3.scaling.factor = 8.0;
  llama3.scaling.originalMaxPosition = 16;
  cases.push_back({"llama3", llama3, 0});
  ref::RopeConfig mrope;
  mrope.sections = {2, 1, 1};
  cases.push_back({"M-RoPE", mrope, 3});
  ref::RopeConfig axial;
  axial.axial = true;
  cases.push_back({"axial", axial, 2});
  return cases;
}

TEST(AttentionGrad, RopeInverseRotationFrequenciesAndPositionScaleMatchFiniteDifferences) {
  PEJIT_SEEDED_RNG(rng);
  for (const RopeCase &c : ropeCases()) {
    for (size_t scales : {size_t(1), size_t(2)}) {
      SCOPED_TRACE(std::string(c.name) + ", position scale entries " + std::to_string(scales));
      Inputs in = draw(rng, 2, 4, 2, 5, 7, 8);
      const std::vector<int64_t> queryShape =
          c.axes ? std::vector<int64_t>{c.axes, 5} : std::vector<int64_t>{5};
      const std::vector<int64_t> keyShape =
          c.axes ? std::vector<int64_t>{c.axes, 7} : std::vector<int64_t>{7};
      const PositionIds queryPositions = rng.positions(queryShape, 0, 12);
      const PositionIds keyPositions = rng.positions(keyShape, 0, 12);
      const int64_t seqLen = ref::maxPositionPlusOne(queryPositions, keyPositions);
      std::vector<double> scale(scales);
      for (double &s : scale)
        s = rng.uniform(0.5, 1.5);
      ref::RopeFrequencies freqs = ref::computeRopeFrequencies(c.config, 8, seqLen);
      AttentionOptions options;
      options.causal = true;
      auto rotate = [&](const Tensor &x, const PositionIds &positions) {
        return ref::applyRope(c.config, x, positions, seqLen, scale, &freqs);
      };
      auto loss = [&] {
        return lossOf(
            ref::attention(rotate(in.q, queryPositions), rotate(in.k, keyPositions), in.v, options),
            in.dOut);
      };
      const AttentionGradients grads = ref::attentionBackward(
          rotate(in.q, queryPositions), rotate(in.k, keyPositions), in.v, in.dOut, options);
      const ref::RopeGradients queryGrads =
          ref::applyRopeBackward(c.config, in.q, grads.dq, queryPositions, seqLen, scale, &freqs);
      const ref::RopeGradients keyGrads =
          ref::applyRopeBackward(c.config, in.k, grads.dk, keyPositions, seqLen, scale, &freqs);
      std::vector<double> dInvFreq = queryGrads.dInvFreq, dScale = queryGrads.dPositionScale;
      for (size_t n = 0; n < dInvFreq.size(); ++n)
        dInvFreq[n] += keyGrads.dInvFreq[n];
      for (size_t n = 0; n < dScale.size(); ++n)
        dScale[n] += keyGrads.dPositionScale[n];
      EXPECT_TRUE(matchesFiniteDifferences(in.q.data, loss, queryGrads.dx.data)) << "dq";
      EXPECT_TRUE(matchesFiniteDifferences(in.k.data, loss, keyGrads.dx.data)) << "dk";
      EXPECT_TRUE(matchesFiniteDifferences(freqs.invFreq, loss, dInvFreq)) << "d inv_freq";
      EXPECT_TRUE(matchesFiniteDifferences(scale, loss, dScale)) << "d position scale";
    }
  }
}

} // namespace
} // namespace pejit::test
