// A bias tensor's gradient in the x86 backward (docs/backward.md): dBias is
// the score gradient dS summed over the bias's broadcast dims. The kv phase
// writes dS once per score into a [b, hq, sq, skv] buffer, and the runtime
// sums it in a fixed order (b, then h, in f64). Checked against the float64
// reference (attentionBackward's dBias, checked by finite differences in
// tests/unit/AttentionGradTest.cpp): fresh random inputs and biases with
// -inf entries (a row hidden whole), NaN-poisoned gradients, max-norm
// relative error <= 1e-4 (f32). Every broadcast form, GQA, causal and not,
// with RoPE beside it; bitwise the same at 1 and 2 threads.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/ForwardBackwardRun.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

struct BiasCase {
  std::string name;
  int64_t biasBatch = 1, biasHeads = 1;
  int64_t heads = 4, kvHeads = 2, sq = 33, skv = 33, d = 16;
  bool causal = true, rope = false;
};

struct BiasRun {
  std::vector<float> dq, dk, dv, dBias;
};

BiasRun runBoth(Runtime &runtime, const BiasCase &c, const std::vector<float> &q,
                const std::vector<float> &k, const std::vector<float> &v,
                const std::vector<float> &dO, const std::vector<float> &bias) {
  std::vector<int64_t> bDims{c.biasBatch, c.biasHeads, c.sq, c.skv};
  AttentionSpec attention;
  attention.causal = c.causal;
  attention.encodings.push_back(encodings::biasTensor(bDims));
  if (c.rope)
    attention.rope = ref::RopeConfig{};
  Spec spec = Spec::fromBuilder(attention, Shape{2, c.heads, c.kvHeads, c.sq, c.skv, c.d, c.d});
  ForwardBackwardRun run =
      runForwardBackward(runtime, spec, {2, c.heads, c.sq, c.d}, {2, c.kvHeads, c.skv, c.d}, q, k,
                         v, dO, {{(void *)bias.data(), DType::F32, bDims, {}}});
  if (run.operandGrads.empty())
    return {};
  return {run.dq, run.dk, run.dv, run.operandGrads[0]};
}

/// A random bias; row 3 of each (batch, head) slice is -inf throughout (it
/// sees no key) and a few other entries are -inf.
ref::Tensor drawBias(const BiasCase &c, std::mt19937 &engine) {
  ref::Tensor bias = randomTensor({c.biasBatch, c.biasHeads, c.sq, c.skv}, engine);
  const double ninf = -std::numeric_limits<double>::infinity();
  for (int64_t slice = 0; slice < c.biasBatch * c.biasHeads; ++slice)
    for (int64_t j = 0; j < c.skv; ++j) {
      if (c.sq > 3)
        bias.data[(slice * c.sq + 3) * c.skv + j] = ninf;
      if (j % 5 == 1)
        bias.data[(slice * c.sq + (j % c.sq)) * c.skv + j] = ninf;
    }
  return bias;
}

void expectBiasGradient(const BiasCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  ref::Tensor q = randomTensor({2, c.heads, c.sq, c.d}, engine);
  ref::Tensor k = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor v = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor dOut = randomTensor({2, c.heads, c.sq, c.d}, engine);
  ref::Tensor bias = drawBias(c, engine);
  ref::Tensor qr = q, kr = k;
  ref::PositionIds queryIds = ref::defaultQueryPositions(c.sq, c.skv),
                   keyIds = ref::defaultKeyPositions(c.skv);
  if (c.rope) {
    qr = ref::applyRope(ref::RopeConfig{}, q, queryIds, c.skv);
    kr = ref::applyRope(ref::RopeConfig{}, k, keyIds, c.skv);
  }
  ref::AttentionOptions options;
  options.causal = c.causal;
  options.bias = &bias;
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor wantDq =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, want.dq, queryIds, c.skv).dx : want.dq;
  ref::Tensor wantDk =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, keyIds, c.skv).dx : want.dk;
  BiasRun run =
      runBoth(suiteRuntime(), c, toFloat(q), toFloat(k), toFloat(v), toFloat(dOut), toFloat(bias));
  ASSERT_EQ(run.dBias.size(), bias.data.size());
  EXPECT_LE(gradientError(run.dq, wantDq), 1e-4) << "dq";
  EXPECT_LE(gradientError(run.dk, wantDk), 1e-4) << "dk";
  EXPECT_LE(gradientError(run.dv, want.dv), 1e-4) << "dv";
  EXPECT_LE(gradientError(run.dBias, want.dBias), 1e-4) << "d bias";
}

TEST(BackwardBias, EveryBroadcastForm) {
  expectBiasGradient({"[1, 1, sq, skv]"});
  expectBiasGradient({"[1, hq, sq, skv]", 1, 4});
  expectBiasGradient({"[b, 1, sq, skv]", 2, 1});
  expectBiasGradient({"[b, hq, sq, skv], bidirectional", 2, 4, 4, 2, 33, 33, 16, false});
}

TEST(BackwardBias, LongerKeysAndRope) {
  expectBiasGradient({"sq < skv", 1, 4, 4, 1, 9, 70});
  expectBiasGradient({"rope", 1, 1, 4, 2, 40, 40, 32, true, true});
  expectBiasGradient({"one row", 1, 1, 4, 2, 1, 1});
}

TEST(BackwardBias, BitwiseIdenticalAcrossThreadCounts) {
  BiasCase c{"[1, 1, sq, skv]"};
  c.sq = c.skv = 80;
  std::mt19937 &engine = rng(nullptr);
  std::vector<float> q = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine)),
                     k = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     v = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     dO = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine)),
                     bias = toFloat(drawBias(c, engine));
  std::vector<BiasRun> runs;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    runs.push_back(runBoth(runtime, c, q, k, v, dO, bias));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].dBias.size(), bias.size());
    EXPECT_EQ(std::memcmp(runs[r].dBias.data(), runs[0].dBias.data(), bias.size() * 4), 0)
        << "d bias of run " << r;
  }
}

} // namespace
} // namespace pejit::testing
