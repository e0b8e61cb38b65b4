// ALiBi with learned slopes (#pe.alibi learned_slopes = true,
// docs/backward.md): the forward reads the slopes from the operand
// alibi_slopes [hq], and the backward gives d slope_h = sum over the
// scores of head h of dS times the form's distance (the score hook's
// adjoint, per-item partials summed in item order). Checked against the
// float64 reference (alibiSlopeGradient, checked by finite differences in
// tests/unit/AttentionGradTest.cpp): fresh random inputs and slopes,
// NaN-poisoned gradients, max-norm relative error <= 1e-4 (f32). Causal,
// symmetric and BLOOM forms, 12 heads, GQA, sq < skv, with RoPE beside it;
// the forward against the reference too; bitwise the same at 1 and 2
// threads.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/ForwardBackwardRun.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

struct SlopeCase {
  std::string name, form = "causal";
  ref::AlibiForm referenceForm = ref::AlibiForm::Causal;
  int64_t heads = 12, kvHeads = 4, sq = 33, skv = 33, d = 16;
  bool causal = true, rope = false;
};

Spec forwardSpec(const SlopeCase &c) {
  AttentionSpec attention;
  attention.causal = c.causal;
  EncodingSpec alibi = encodings::alibiLearnedSlopes(c.heads, 0, c.form == "symmetric", c.heads);
  if (c.form == "bloom") // the builder writes causal or symmetric; BLOOM's form by hand
    alibi.attribute = "#pe.alibi<num_heads = " + std::to_string(c.heads) +
                      ", form = bloom, learned_slopes = true>";
  attention.encodings.push_back(alibi);
  if (c.rope)
    attention.rope = ref::RopeConfig{};
  return Spec::fromBuilder(attention, Shape{2, c.heads, c.kvHeads, c.sq, c.skv, c.d, c.d});
}

struct SlopeRun {
  std::vector<float> o, dq, dk, dv, dslopes;
};

/// The forward, then the backward with the slopes' gradient, on one draw.
SlopeRun runBoth(Runtime &runtime, const SlopeCase &c, const std::vector<float> &q,
                 const std::vector<float> &k, const std::vector<float> &v,
                 const std::vector<float> &dO, const std::vector<float> &slopes) {
  ForwardBackwardRun run = runForwardBackward(runtime, forwardSpec(c), {2, c.heads, c.sq, c.d},
                                              {2, c.kvHeads, c.skv, c.d}, q, k, v, dO,
                                              {{(void *)slopes.data(), DType::F32, {c.heads}, {}}});
  if (run.operandGrads.empty())
    return {};
  return {run.o, run.dq, run.dk, run.dv, run.operandGrads[0]};
}

void expectSlopeGradient(const SlopeCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  ref::Tensor q = randomTensor({2, c.heads, c.sq, c.d}, engine);
  ref::Tensor k = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor v = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor dOut = randomTensor({2, c.heads, c.sq, c.d}, engine);
  // Slopes near the paper's, perturbed: what training moves them to.
  std::vector<double> slopes = ref::alibiSlopes(c.heads);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  for (double &slope : slopes)
    slope = static_cast<float>(slope * jitter(engine));
  ref::Tensor qr = q, kr = k;
  ref::PositionIds queryIds = ref::defaultQueryPositions(c.sq, c.skv),
                   keyIds = ref::defaultKeyPositions(c.skv);
  if (c.rope) {
    qr = ref::applyRope(ref::RopeConfig{}, q, queryIds, c.skv);
    kr = ref::applyRope(ref::RopeConfig{}, k, keyIds, c.skv);
  }
  ref::Tensor bias = ref::alibiBias(c.heads, 0, c.heads, c.referenceForm, c.sq, c.skv, slopes);
  ref::AttentionOptions options;
  options.causal = c.causal;
  options.bias = &bias;
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  std::vector<double> wantSlopes =
      ref::alibiSlopeGradient(want.dScores, c.referenceForm, ref::RelativeDistance{c.sq, c.skv});
  ref::Tensor wantDq =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, want.dq, queryIds, c.skv).dx : want.dq;
  ref::Tensor wantDk =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, keyIds, c.skv).dx : want.dk;
  std::vector<float> slopesF(slopes.begin(), slopes.end());
  SlopeRun run =
      runBoth(suiteRuntime(), c, toFloat(q), toFloat(k), toFloat(v), toFloat(dOut), slopesF);
  ASSERT_EQ(run.dslopes.size(), slopes.size());
  EXPECT_LE(gradientError(run.o, o.data), 1e-4) << "forward output";
  EXPECT_LE(gradientError(run.dq, wantDq.data), 1e-4) << "dq";
  EXPECT_LE(gradientError(run.dk, wantDk.data), 1e-4) << "dk";
  EXPECT_LE(gradientError(run.dv, want.dv.data), 1e-4) << "dv";
  EXPECT_LE(gradientError(run.dslopes, wantSlopes), 1e-4) << "d alibi_slopes";
}

TEST(BackwardAlibiSlopes, EveryFormWithTwelveHeads) {
  expectSlopeGradient({"causal"});
  expectSlopeGradient({"symmetric, bidirectional", "symmetric", ref::AlibiForm::Symmetric, 12, 4,
                       33, 33, 16, /*causal=*/false});
  expectSlopeGradient({"bloom", "bloom", ref::AlibiForm::Bloom});
  expectSlopeGradient({"causal, sq < skv", "causal", ref::AlibiForm::Causal, 12, 12, 9, 70});
}

TEST(BackwardAlibiSlopes, BesideRope) {
  expectSlopeGradient({"causal + rope", "causal", ref::AlibiForm::Causal, 12, 4, 40, 40, 32,
                       /*causal=*/true, /*rope=*/true});
}

TEST(BackwardAlibiSlopes, BitwiseIdenticalAcrossThreadCounts) {
  SlopeCase c{"causal"};
  c.sq = c.skv = 80;
  std::mt19937 &engine = rng(nullptr);
  std::vector<float> q = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine)),
                     k = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     v = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     dO = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine));
  std::vector<double> paper = ref::alibiSlopes(c.heads);
  std::vector<float> slopes(paper.begin(), paper.end());
  std::vector<SlopeRun> runs;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    runs.push_back(runBoth(runtime, c, q, k, v, dO, slopes));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    EXPECT_EQ(std::memcmp(runs[r].dslopes.data(), runs[0].dslopes.data(), slopes.size() * 4), 0)
        << "d alibi_slopes of run " << r;
    EXPECT_EQ(std::memcmp(runs[r].dq.data(), runs[0].dq.data(), q.size() * 4), 0)
        << "dq of run " << r;
  }
}

} // namespace
} // namespace pejit::testing
