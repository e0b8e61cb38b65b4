// The x86 backward on f16 and bf16 tensors (docs/backward.md): q, k, v, o
// and dO are widened to f32 in scratch, the phases run in f32, and dq, dk,
// dv are rounded back to the input's type (nearest even). Checked against
// the float64 reference gradients of the rounded inputs, with o from the
// float64 forward rounded as a 16-bit forward hands it over: max-norm
// relative error <= 2e-2 (a 16-bit gradient alone is off by up to 2^-8
// relative for bf16, 2^-11 for f16). NaN-poisoned outputs; plain, GQA,
// RoPE, a shape class, Shaw's terms with their (f32) tables' gradients, a
// bf16 forward with an f32 result (o and dO read as f32); a dtype mismatch
// is an error naming it.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "pejit/runtime/npy/Npy.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

constexpr double kTolerance = 2e-2;

/// x rounded to `dtype` (in place) and its 16-bit bits.
std::vector<uint16_t> roundTo(DType dtype, ref::Tensor &x) {
  std::vector<uint16_t> bits(x.data.size());
  for (size_t n = 0; n < bits.size(); ++n) {
    float value = static_cast<float>(x.data[n]);
    bits[n] = dtype == DType::BF16 ? npy::floatToBf16Bits(value) : npy::floatToF16Bits(value);
    x.data[n] = dtype == DType::BF16 ? npy::bf16BitsToFloat(bits[n]) : npy::f16BitsToFloat(bits[n]);
  }
  return bits;
}

std::vector<float> widen(DType dtype, const std::vector<uint16_t> &bits) {
  std::vector<float> out(bits.size());
  for (size_t n = 0; n < bits.size(); ++n)
    out[n] = dtype == DType::BF16 ? npy::bf16BitsToFloat(bits[n]) : npy::f16BitsToFloat(bits[n]);
  return out;
}

struct HalfCase {
  DType dtype = DType::BF16;
  int64_t heads = 4, kvHeads = 2, sq = 37, skv = 37, d = 32;
  bool rope = false, shapeClass = false, shaw = false;
};

constexpr int64_t kShawClip = 4;

void expectHalfBackward(const HalfCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + (c.dtype == DType::BF16 ? " bf16" : " f16") +
               (c.rope ? " rope" : "") + (c.shapeClass ? " shape class" : "") + " sq " +
               std::to_string(c.sq) + " skv " + std::to_string(c.skv));
  AttentionSpec attention;
  attention.causal = true;
  attention.dtype = c.dtype;
  if (c.rope)
    attention.rope = ref::RopeConfig{};
  if (c.shaw) {
    attention.encodings.push_back(encodings::shawKey(kShawClip, c.d));
    attention.encodings.push_back(encodings::shawValue(kShawClip, c.d));
  }
  Shape shape{2,
              c.heads,
              c.kvHeads,
              c.shapeClass ? kDynamicDim : c.sq,
              c.shapeClass ? kDynamicDim : c.skv,
              c.d,
              c.d};
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(Spec::fromBuilder(attention, shape));
  ASSERT_TRUE(kernel) << kernel.error();
  ref::Tensor q = randomTensor({2, c.heads, c.sq, c.d}, engine),
              k = randomTensor({2, c.kvHeads, c.skv, c.d}, engine),
              v = randomTensor({2, c.kvHeads, c.skv, c.d}, engine),
              dOut = randomTensor({2, c.heads, c.sq, c.d}, engine);
  std::vector<uint16_t> qb = roundTo(c.dtype, q), kb = roundTo(c.dtype, k),
                        vb = roundTo(c.dtype, v), dOb = roundTo(c.dtype, dOut);
  ref::PositionIds queryIds = ref::defaultQueryPositions(c.sq, c.skv),
                   keyIds = ref::defaultKeyPositions(c.skv);
  ref::Tensor qr = c.rope ? ref::applyRope(ref::RopeConfig{}, q, queryIds, c.skv) : q;
  ref::Tensor kr = c.rope ? ref::applyRope(ref::RopeConfig{}, k, keyIds, c.skv) : k;
  ref::AttentionOptions options;
  options.causal = true;
  // Shaw's tables (f32): the key term q_i . a^K[r], the value term by bucket.
  ref::Tensor keyTable = randomTensor({2 * kShawClip + 1, c.d}, engine),
              valueTable = randomTensor({2 * kShawClip + 1, c.d}, engine), keyTerm;
  const ref::RelativeDistance distance{c.sq, c.skv};
  if (c.shaw) {
    keyTerm = ref::relativeKeyTerm(qr, keyTable, kShawClip, distance);
    options.keyTerm = &keyTerm;
    options.bucketedValueTerm.rows = &valueTable;
    options.bucketedValueTerm.bucket = [&](int64_t, int64_t i, int64_t j) {
      return ref::shawRelativeIndex(i, j, kShawClip, c.sq, c.skv) + kShawClip;
    };
  }
  ref::Tensor o = ref::attention(qr, kr, v, options);
  std::vector<uint16_t> ob = roundTo(c.dtype, o);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor dKeyTable;
  if (c.shaw) {
    ref::RelativeKeyTermGradients keyGrads =
        ref::relativeKeyTermBackward(qr, keyTable, kShawClip, distance, want.dKeyTerm);
    for (size_t n = 0; n < want.dq.data.size(); ++n)
      want.dq.data[n] += keyGrads.dq.data[n];
    dKeyTable = keyGrads.dKeyTable;
  }
  ref::Tensor wantDq =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, want.dq, queryIds, c.skv).dx : want.dq;
  ref::Tensor wantDk =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, keyIds, c.skv).dx : want.dk;

  std::vector<float> keyTableF = toFloat(keyTable), valueTableF = toFloat(valueTable);
  std::vector<TensorView> inputs = {{qb.data(), c.dtype, q.shape, {}},
                                    {kb.data(), c.dtype, k.shape, {}},
                                    {vb.data(), c.dtype, v.shape, {}}};
  if (c.shaw) {
    inputs.push_back({keyTableF.data(), DType::F32, keyTable.shape, {}});
    inputs.push_back({valueTableF.data(), DType::F32, valueTable.shape, {}});
  }
  inputs.push_back({ob.data(), c.dtype, o.shape, {}});
  inputs.push_back({dOb.data(), c.dtype, dOut.shape, {}});
  // 0xffff is a NaN in f16 and bf16: a gradient the run does not write fails.
  std::vector<uint16_t> dq(qb.size(), 0xffff), dk(kb.size(), 0xffff), dv(vb.size(), 0xffff);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dKey(keyTableF.size(), nan), dValue(valueTableF.size(), nan);
  std::vector<TensorView> gradients = {{dq.data(), c.dtype, q.shape, {}},
                                       {dk.data(), c.dtype, k.shape, {}},
                                       {dv.data(), c.dtype, v.shape, {}}};
  if (c.shaw) {
    gradients.push_back({dKey.data(), DType::F32, keyTable.shape, {}});
    gradients.push_back({dValue.data(), DType::F32, valueTable.shape, {}});
  }
  Status status = kernel->runBackward(inputs, gradients);
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(widen(c.dtype, dq), wantDq), kTolerance) << "dq";
  EXPECT_LE(gradientError(widen(c.dtype, dk), wantDk), kTolerance) << "dk";
  EXPECT_LE(gradientError(widen(c.dtype, dv), want.dv), kTolerance) << "dv";
  if (c.shaw) {
    EXPECT_LE(gradientError(dKey, dKeyTable), kTolerance) << "d shaw_key_table";
    EXPECT_LE(gradientError(dValue, want.dValueRows), kTolerance) << "d shaw_value_table";
  }

  // f32 gradients for 16-bit inputs: an error naming dq and the dtypes.
  std::vector<float> wide(qb.size());
  gradients[0] = {wide.data(), DType::F32, q.shape, {}};
  Status mismatch = kernel->runBackward(inputs, gradients);
  EXPECT_FALSE(mismatch);
  EXPECT_NE(mismatch.message().find("dq"), std::string::npos) << mismatch.message();
}

TEST(BackwardHalf, Bf16AndF16PlainAndGrouped) {
  for (DType dtype : {DType::BF16, DType::F16}) {
    HalfCase c;
    c.dtype = dtype;
    expectHalfBackward(c);
    c.heads = 8, c.kvHeads = 1, c.sq = 9, c.skv = 70;
    expectHalfBackward(c);
  }
}

TEST(BackwardHalf, Bf16WithRopeAndAShapeClass) {
  HalfCase c;
  c.rope = true;
  c.sq = c.skv = 65;
  expectHalfBackward(c);
  c.rope = false;
  c.shapeClass = true;
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1}, {20, 90}}) {
    c.sq = sq, c.skv = skv;
    expectHalfBackward(c);
  }
}

TEST(BackwardHalf, Bf16AndF16WithShawTerms) {
  for (DType dtype : {DType::BF16, DType::F16}) {
    HalfCase c;
    c.dtype = dtype;
    c.shaw = true;
    expectHalfBackward(c);
  }
}

// A bf16 forward whose result is f32: its backward takes o and dO in f32
// (read as they are, not rounded) and gives bf16 dq, dk, dv.
TEST(BackwardHalf, Bf16InputsWithAnF32Result) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const char *source =
      "func.func @f32_result(%q: tensor<1x4x37x32xbf16>, %k: tensor<1x2x45x32xbf16>, "
      "%v: tensor<1x2x45x32xbf16>) -> tensor<1x4x37x32xf32> {\n"
      "  %o = attn.attention %q, %k, %v causal : tensor<1x4x37x32xbf16>, tensor<1x2x45x32xbf16>, "
      "tensor<1x2x45x32xbf16> -> tensor<1x4x37x32xf32>\n"
      "  return %o : tensor<1x4x37x32xf32>\n}\n";
  Expected<Spec> forward = Spec::fromText(source);
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->outputDtype(), DType::F32);
  ref::Tensor q = randomTensor({1, 4, 37, 32}, engine), k = randomTensor({1, 2, 45, 32}, engine),
              v = randomTensor({1, 2, 45, 32}, engine), dOut = randomTensor({1, 4, 37, 32}, engine);
  std::vector<uint16_t> qb = roundTo(DType::BF16, q), kb = roundTo(DType::BF16, k),
                        vb = roundTo(DType::BF16, v);
  ref::AttentionOptions options;
  options.causal = true;
  ref::Tensor o = ref::attention(q, k, v, options);
  ref::AttentionGradients want = ref::attentionBackward(q, k, v, dOut, options);
  std::vector<float> of = toFloat(o), dOf = toFloat(dOut);
  std::vector<uint16_t> dq(qb.size(), 0xffff), dk(kb.size(), 0xffff), dv(vb.size(), 0xffff);
  Status status = kernel->runBackward({{qb.data(), DType::BF16, q.shape, {}},
                                       {kb.data(), DType::BF16, k.shape, {}},
                                       {vb.data(), DType::BF16, v.shape, {}},
                                       {of.data(), DType::F32, o.shape, {}},
                                       {dOf.data(), DType::F32, dOut.shape, {}}},
                                      {{dq.data(), DType::BF16, q.shape, {}},
                                       {dk.data(), DType::BF16, k.shape, {}},
                                       {dv.data(), DType::BF16, v.shape, {}}});
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(widen(DType::BF16, dq), want.dq), kTolerance) << "dq";
  EXPECT_LE(gradientError(widen(DType::BF16, dk), want.dk), kTolerance) << "dk";
  EXPECT_LE(gradientError(widen(DType::BF16, dv), want.dv), kTolerance) << "dv";
  // o in bf16 where the kernel reads f32: an error naming it.
  std::vector<uint16_t> ob = roundTo(DType::BF16, o);
  Status mismatch = kernel->runBackward({{qb.data(), DType::BF16, q.shape, {}},
                                         {kb.data(), DType::BF16, k.shape, {}},
                                         {vb.data(), DType::BF16, v.shape, {}},
                                         {ob.data(), DType::BF16, o.shape, {}},
                                         {dOf.data(), DType::F32, dOut.shape, {}}},
                                        {{dq.data(), DType::BF16, q.shape, {}},
                                         {dk.data(), DType::BF16, k.shape, {}},
                                         {dv.data(), DType::BF16, v.shape, {}}});
  EXPECT_FALSE(mismatch);
  EXPECT_NE(mismatch.message().find("output"), std::string::npos) << mismatch.message();
}

} // namespace
} // namespace pejit::testing
