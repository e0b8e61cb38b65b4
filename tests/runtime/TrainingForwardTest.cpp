// The training forward (docs/backward.md): attn.attention with an lse
// result, AttentionSpec::training. X86Kernel::runTraining writes o and each
// row's log-sum-exp; the backward derived from the same spec reads that lse
// instead of recomputing it. Checked against the float64 reference
// (attentionLogSumExp, attentionBackward): fresh random inputs, NaN-poisoned
// outputs, max-norm relative error <= 1e-4 (f32); a row that sees no key has
// lse = -inf exactly. Causal GQA with RoPE and a T5 table, a shape class at
// several lengths, key lengths with an empty row, bf16 tensors; a kernel
// without lse refuses runTraining by name.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBias.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

constexpr double kTolerance = 1e-4;

struct TrainingCase {
  std::string name;
  int64_t heads = 4, kvHeads = 2, sq = 37, skv = 37, d = 16;
  bool rope = false, t5 = false, shapeClass = false;
};

/// Max |got - want| / max |want| over the finite entries; infinite entries
/// must match exactly (a row that sees no key).
double lseError(const std::vector<float> &got, const std::vector<double> &want) {
  double worst = 0, largest = 0;
  for (size_t n = 0; n < want.size(); ++n) {
    if (std::isinf(want[n])) {
      if (got[n] != want[n])
        return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::fabs(got[n] - want[n]));
    largest = std::max(largest, std::fabs(want[n]));
  }
  return largest > 0 ? worst / largest : worst;
}

void expectTrainingForwardAndBackward(const TrainingCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  const int64_t buckets = 32;
  AttentionSpec attention;
  attention.causal = true;
  attention.training = true;
  if (c.rope)
    attention.rope = ref::RopeConfig{};
  if (c.t5)
    attention.encodings.push_back(encodings::t5Bias(buckets, 128, false, c.heads));
  Shape shape{2,
              c.heads,
              c.kvHeads,
              c.shapeClass ? kDynamicDim : c.sq,
              c.shapeClass ? kDynamicDim : c.skv,
              c.d,
              c.d};
  Spec spec = Spec::fromBuilder(attention, shape);
  Expected<X86Kernel> forward = suiteRuntime().getX86(spec);
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> backward = suiteRuntime().getX86Backward(spec);
  ASSERT_TRUE(backward) << backward.error();

  ref::Tensor q = randomTensor({2, c.heads, c.sq, c.d}, engine),
              k = randomTensor({2, c.kvHeads, c.skv, c.d}, engine),
              v = randomTensor({2, c.kvHeads, c.skv, c.d}, engine),
              dOut = randomTensor({2, c.heads, c.sq, c.d}, engine),
              table = randomTensor({buckets, c.heads}, engine);
  ref::PositionIds queryIds = ref::defaultQueryPositions(c.sq, c.skv),
                   keyIds = ref::defaultKeyPositions(c.skv);
  ref::Tensor qr = c.rope ? ref::applyRope(ref::RopeConfig{}, q, queryIds, c.skv) : q;
  ref::Tensor kr = c.rope ? ref::applyRope(ref::RopeConfig{}, k, keyIds, c.skv) : k;
  ref::AttentionOptions options;
  options.causal = true;
  ref::Tensor bias;
  if (c.t5) {
    bias = ref::t5Bias(table, false, buckets, 128, ref::RelativeDistance{c.sq, c.skv});
    options.bias = &bias;
  }
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::Tensor lse = ref::attentionLogSumExp(qr, kr, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor wantDq =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, want.dq, queryIds, c.skv).dx : want.dq;
  ref::Tensor wantDk =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, keyIds, c.skv).dx : want.dk;

  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), dOf = toFloat(dOut),
                     tablef = toFloat(table);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> of(qf.size(), nan), lsef(lse.data.size(), nan);
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}}};
  if (c.t5)
    inputs.push_back({tablef.data(), DType::F32, table.shape, {}});
  Status ran = forward->runTraining(inputs, {of.data(), DType::F32, o.shape, {}},
                                    {lsef.data(), DType::F32, lse.shape, {}});
  ASSERT_TRUE(ran) << ran.message();
  EXPECT_LE(gradientError(of, o), kTolerance) << "o";
  EXPECT_LE(lseError(lsef, lse.data), kTolerance) << "lse";

  // The backward reads o, dO and that lse.
  inputs.push_back({of.data(), DType::F32, o.shape, {}});
  inputs.push_back({dOf.data(), DType::F32, o.shape, {}});
  inputs.push_back({lsef.data(), DType::F32, lse.shape, {}});
  std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan),
      dTable(tablef.size(), nan);
  std::vector<TensorView> gradients = {{dq.data(), DType::F32, q.shape, {}},
                                       {dk.data(), DType::F32, k.shape, {}},
                                       {dv.data(), DType::F32, v.shape, {}}};
  if (c.t5)
    gradients.push_back({dTable.data(), DType::F32, table.shape, {}});
  Status status = backward->runBackward(inputs, gradients);
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(dq, wantDq), kTolerance) << "dq";
  EXPECT_LE(gradientError(dk, wantDk), kTolerance) << "dk";
  EXPECT_LE(gradientError(dv, want.dv), kTolerance) << "dv";
  if (c.t5)
    EXPECT_LE(gradientError(dTable, ref::t5TableGradient(want.dScores, false, buckets, 128,
                                                         ref::RelativeDistance{c.sq, c.skv})),
              kTolerance)
        << "d t5_table";
}

TEST(TrainingForward, LseAndTheBackwardThatReadsIt) {
  expectTrainingForwardAndBackward({"plain"});
  expectTrainingForwardAndBackward({"rope + t5, sq < skv", 4, 2, 20, 70, 32, true, true});
  expectTrainingForwardAndBackward({"one row", 4, 4, 1, 1});
}

TEST(TrainingForward, ShapeClassAtSeveralLengths) {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 9}, {65, 65}, {30, 100}})
    expectTrainingForwardAndBackward(
        {"shape class " + std::to_string(sq) + "x" + std::to_string(skv), 4, 2, sq, skv, 16, false,
         false, /*shapeClass=*/true});
}

TEST(TrainingForward, KeyLengthsLeaveAnEmptyRowAtMinusInfinity) {
  AttentionSpec attention;
  attention.training = true;
  attention.keyLengths = true;
  Shape shape{2, 2, 2, 5, kDynamicDim, 16, 16};
  Expected<X86Kernel> forward = suiteRuntime().getX86(Spec::fromBuilder(attention, shape));
  ASSERT_TRUE(forward) << forward.error();
  std::mt19937 &engine = rng(nullptr);
  std::vector<float> q = toFloat(randomTensor({2, 2, 5, 16}, engine)),
                     k = toFloat(randomTensor({2, 2, 8, 16}, engine)), v = k;
  std::vector<int32_t> lengths = {0, 6};
  std::vector<float> o(q.size(), std::nanf("")), lse(2 * 2 * 5, std::nanf(""));
  Status ran = forward->runTraining({{q.data(), DType::F32, {2, 2, 5, 16}, {}},
                                     {k.data(), DType::F32, {2, 2, 8, 16}, {}},
                                     {v.data(), DType::F32, {2, 2, 8, 16}, {}},
                                     {lengths.data(), DType::I32, {2}, {}}},
                                    {o.data(), DType::F32, {2, 2, 5, 16}, {}},
                                    {lse.data(), DType::F32, {2, 2, 5}, {}});
  ASSERT_TRUE(ran) << ran.message();
  for (int64_t n = 0; n < 10; ++n)
    EXPECT_EQ(lse[n], -std::numeric_limits<float>::infinity()) << "row " << n << " of batch 0";
  for (int64_t n = 10; n < 20; ++n)
    EXPECT_TRUE(std::isfinite(lse[n])) << "row " << n - 10 << " of batch 1";
}

TEST(TrainingForward, ErrorsNameTheLse) {
  Shape shape{1, 2, 2, 8, 8, 16, 16};
  AttentionSpec inference;
  Expected<X86Kernel> plain = suiteRuntime().getX86(Spec::fromBuilder(inference, shape));
  ASSERT_TRUE(plain) << plain.error();
  std::vector<float> q(2 * 8 * 16, 0.5f), o(q.size()), lse(16);
  std::vector<TensorView> inputs = {{q.data(), DType::F32, {1, 2, 8, 16}, {}},
                                    {q.data(), DType::F32, {1, 2, 8, 16}, {}},
                                    {q.data(), DType::F32, {1, 2, 8, 16}, {}}};
  Status refused = plain->runTraining(inputs, {o.data(), DType::F32, {1, 2, 8, 16}, {}},
                                      {lse.data(), DType::F32, {1, 2, 8}, {}});
  EXPECT_FALSE(refused);
  EXPECT_NE(refused.message().find("lse: this kernel does not write it"), std::string::npos)
      << refused.message();
  AttentionSpec training;
  training.training = true;
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(training, shape));
  ASSERT_TRUE(kernel) << kernel.error();
  Status wrongShape = kernel->runTraining(inputs, {o.data(), DType::F32, {1, 2, 8, 16}, {}},
                                          {lse.data(), DType::F32, {1, 2, 7}, {}});
  EXPECT_FALSE(wrongShape);
  EXPECT_NE(wrongShape.message().find("lse"), std::string::npos) << wrongShape.message();
  // The training kernel also runs as an inference forward (no lse asked).
  EXPECT_TRUE(kernel->run(inputs, {o.data(), DType::F32, {1, 2, 8, 16}, {}}));
}

} // namespace
} // namespace pejit::testing
