// RoPE with a runtime position scale (#pe.rope runtime_scale = true;
// docs/semantics.md "RoPE"): angle = (position * s) * inv_freq with s an
// f32 input, [1] or [b] (per batch row, with [b, s] ids). Fused into
// attention and on its own, against the float64 interpreter on the same
// source (fresh inputs, poisoned outputs; f32 1e-4, 16-bit 1e-2). A new s
// compiles nothing, and a scale the kernel ignored would fail the check.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>
#include <random>

using namespace pejit;
using namespace pejit::testing;

namespace {

/// One input: its bytes for the kernel and its value for the reference.
struct Input {
  std::vector<uint8_t> bytes;
  DType dtype;
  std::vector<int64_t> shape;
  ReferenceArgument reference;
};

Input floats(const std::vector<int64_t> &shape, DType dtype) {
  auto [array, tensor] = randomInput(shape, dtype);
  return {std::move(array.bytes), dtype, shape, std::move(tensor)};
}

Input ids(const std::vector<int64_t> &shape, int64_t first, int64_t step) {
  std::vector<int64_t> values;
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(first + step * i);
  std::vector<uint8_t> bytes(count * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return {std::move(bytes), DType::I64, shape, ref::PositionIds(shape, values)};
}

Input scales(const std::vector<float> &values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  ref::Tensor tensor({static_cast<int64_t>(values.size())});
  tensor.data.assign(values.begin(), values.end());
  return {std::move(bytes), DType::F32, {static_cast<int64_t>(values.size())}, std::move(tensor)};
}

/// Runs `kernel` on `inputs` into a poisoned `outShape` and compares with
/// `source` interpreted in float64; the output comes back in `got`.
double runAgainstReference(const X86Kernel &kernel, const std::string &source,
                           const std::vector<Input> &inputs, const std::vector<int64_t> &outShape,
                           DType outDtype, std::string &error, std::vector<float> *got = nullptr) {
  std::vector<ReferenceArgument> reference;
  std::vector<TensorView> views;
  for (const Input &input : inputs) {
    reference.push_back(input.reference);
    views.push_back({const_cast<uint8_t *>(input.bytes.data()), input.dtype, input.shape, {}});
  }
  Expected<ref::Tensor> expected = interpretReference(source, reference);
  if (!expected) {
    error = expected.error();
    return 0;
  }
  npy::Array out = poisonedOutput(outShape, outDtype);
  if (Status status = kernel.run(views, {out.bytes.data(), outDtype, outShape, {}}); !status) {
    error = status.message();
    return 0;
  }
  std::vector<float> values = npy::toFloat32(out);
  if (got)
    *got = values;
  return maxRelativeError(values, *expected);
}

const char *kRope = "layout = half, theta = 10000.0, runtime_scale = true";

/// Attention over Q, K (pe.rope with scale on both) and V [b, h, s, d].
std::string attentionSource(int64_t b, int64_t s, const std::string &ropeAttr,
                            const std::vector<int64_t> &idsShape, int64_t scaleSize,
                            const std::string &t = "f32") {
  std::string x = tensorText({b, 4, s, 64}, t), p = tensorText(idsShape, "i64"),
              sc = tensorText({scaleSize}, "f32");
  std::string rope = " scale(%s : " + sc + ") <" + ropeAttr + "> : " + x + ", " + p;
  return "func.func @f(%q: " + x + ", %k: " + x + ", %v: " + x + ", %p: " + p + ", %s: " + sc +
         ") -> " + x + " {\n  %qr = pe.rope %q, %p" + rope + "\n  %kr = pe.rope %k, %p" + rope +
         "\n  %o = attn.attention %qr, %kr, %v causal : " + x + ", " + x + ", " + x + " -> " + x +
         "\n  return %o : " + x + "\n}\n";
}

TEST(RopeRuntimeScale, FusedScaleChangesPerCallWithoutARecompile) {
  std::string source = attentionSource(2, 50, kRope, {50}, 1);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  std::vector<Input> inputs = {floats({2, 4, 50, 64}, DType::F32),
                               floats({2, 4, 50, 64}, DType::F32),
                               floats({2, 4, 50, 64}, DType::F32), ids({50}, 3, 7), scales({1.0f})};
  std::vector<float> unscaled, scaled;
  for (float s : {1.0f, 0.37f, 2.5f, 16.0f}) {
    SCOPED_TRACE(s);
    inputs[4] = scales({s});
    std::string error;
    std::vector<float> &got = s == 1.0f ? unscaled : scaled;
    double rel =
        runAgainstReference(*kernel, source, inputs, {2, 4, 50, 64}, DType::F32, error, &got);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  // The same kernel served every s, and s changed the output.
  EXPECT_EQ(suiteRuntime().stats().compiles, compilesBefore);
  double differ = 0;
  for (size_t i = 0; i < scaled.size(); ++i)
    differ = std::max(differ, double(std::abs(scaled[i] - unscaled[i])));
  EXPECT_GT(differ, 1e-2);
}

TEST(RopeRuntimeScale, PerBatchScaleWithPerBatchIds) {
  // [b] scales with [b, s] ids: row r rotates by its own scale.
  std::string source = attentionSource(3, 33, kRope, {3, 33}, 3);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<Input> inputs = {
      floats({3, 4, 33, 64}, DType::F32), floats({3, 4, 33, 64}, DType::F32),
      floats({3, 4, 33, 64}, DType::F32), ids({3, 33}, 0, 5), scales({0.5f, 1.0f, 3.25f})};
  std::string error;
  double rel = runAgainstReference(*kernel, source, inputs, {3, 4, 33, 64}, DType::F32, error);
  ASSERT_EQ(error, "");
  EXPECT_LE(rel, 1e-4);
}

TEST(RopeRuntimeScale, WithLengthFreeScalingsAndSixteenBit) {
  for (std::string scaling :
       {", scaling = #pe.linear<factor = 4.0>",
        ", scaling = #pe.yarn<factor = 8.0, original_max_position = 64>",
        ", scaling = #pe.llama3<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, "
        "original_max_position = 32>"}) {
    SCOPED_TRACE(scaling);
    std::string source = attentionSource(1, 40, kRope + scaling, {40}, 1);
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<Input> inputs = {
        floats({1, 4, 40, 64}, DType::F32), floats({1, 4, 40, 64}, DType::F32),
        floats({1, 4, 40, 64}, DType::F32), ids({40}, 100, 9), scales({1.75f})};
    std::string error;
    double rel = runAgainstReference(*kernel, source, inputs, {1, 4, 40, 64}, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  for (DType dtype : {DType::F16, DType::BF16}) {
    std::string t = dtype == DType::F16 ? "f16" : "bf16";
    SCOPED_TRACE(t);
    std::string source = attentionSource(1, 40, kRope, {40}, 1, t);
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<Input> inputs = {floats({1, 4, 40, 64}, dtype), floats({1, 4, 40, 64}, dtype),
                                 floats({1, 4, 40, 64}, dtype), ids({40}, 0, 1), scales({0.8f})};
    std::string error;
    double rel = runAgainstReference(*kernel, source, inputs, {1, 4, 40, 64}, dtype, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-2);
  }
}

TEST(RopeRuntimeScale, StandaloneRopeWithAScale) {
  for (auto [idsShape, scale] : {std::pair<std::vector<int64_t>, std::vector<float>>{{24}, {2.0f}},
                                 {{2, 24}, {0.25f, 5.5f}}}) {
    std::string x = tensorText({2, 3, 24, 64}, "f32"), p = tensorText(idsShape, "i64"),
                sc = tensorText({static_cast<int64_t>(scale.size())}, "f32");
    std::string source = "func.func @r(%x: " + x + ", %p: " + p + ", %s: " + sc + ") -> " + x +
                         " {\n  %r = pe.rope %x, %p scale(%s : " + sc + ") <" + kRope + "> : " + x +
                         ", " + p + "\n  return %r : " + x + "\n}\n";
    SCOPED_TRACE(source);
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<Input> inputs = {floats({2, 3, 24, 64}, DType::F32), ids(idsShape, 1000, 3),
                                 scales(scale)};
    std::string error;
    double rel = runAgainstReference(*kernel, source, inputs, {2, 3, 24, 64}, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

TEST(RopeRuntimeScale, LinearAttentionRopeWithAScale) {
  // Both placements; the scale is the linear attention's encoding operand.
  for (std::string placement : {"rope_before_feature_map", "rope_on_numerator"}) {
    SCOPED_TRACE(placement);
    std::string x = tensorText({2, 4, 30, 16}, "f32"), p = tensorText({30}, "i64");
    std::string source = "func.func @f(%q: " + x + ", %k: " + x + ", %v: " + x + ", %p: " + p +
                         ", %s: tensor<1xf32>) -> " + x +
                         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(elu_plus_one) "
                         "query_positions(%p : " +
                         p + ") key_positions(%p : " + p + ") causal encodings([#pe.rope<" + kRope +
                         ">]) encoding_operands(%s : tensor<1xf32>) rope_placement(" + placement +
                         ") : " + x + ", " + x + ", " + x + " -> " + x + "\n  return %o : " + x +
                         "\n}\n";
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<Input> inputs = {
        floats({2, 4, 30, 16}, DType::F32), floats({2, 4, 30, 16}, DType::F32),
        floats({2, 4, 30, 16}, DType::F32), ids({30}, 7, 3), scales({2.75f})};
    std::string error;
    double rel = runAgainstReference(*kernel, source, inputs, {2, 4, 30, 16}, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

TEST(RopeRuntimeScale, BadScalesAreErrorsThatNameThem) {
  // A length-following scaling takes no runtime scale.
  Expected<X86Kernel> ntk = suiteKernel(attentionSource(
      1, 16,
      std::string(kRope) + ", scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 8>",
      {16}, 1));
  ASSERT_FALSE(ntk);
  EXPECT_NE(ntk.error().find("runtime_scale with #pe.dynamic_ntk"), std::string::npos)
      << ntk.error();
  // [b] scales with ids shared by the batch.
  Expected<X86Kernel> shared = suiteKernel(attentionSource(3, 16, kRope, {16}, 3));
  ASSERT_FALSE(shared);
  EXPECT_NE(shared.error().find("per-batch position ids"), std::string::npos) << shared.error();
  // A scale of neither [1] nor [b].
  Expected<X86Kernel> wrong = suiteKernel(attentionSource(3, 16, kRope, {3, 16}, 2));
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().find("must be [1] or [b = 3]"), std::string::npos) << wrong.error();
  // At run: a scale view of the wrong dtype or shape names the input.
  std::string source = attentionSource(1, 16, kRope, {16}, 1);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(4 * 16 * 64, 0.5f), out(q.size(), -7.0f), s(2, 1.0f);
  std::vector<int64_t> p(16, 0);
  std::vector<int64_t> shape{1, 4, 16, 64};
  Status status = kernel->run({{q.data(), DType::F32, shape, {}},
                               {q.data(), DType::F32, shape, {}},
                               {q.data(), DType::F32, shape, {}},
                               {p.data(), DType::I64, {16}, {}},
                               {s.data(), DType::F32, {2}, {}}},
                              {out.data(), DType::F32, shape, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("rope_position_scale"), std::string::npos) << status.message();
  for (float v : out)
    ASSERT_EQ(v, -7.0f);
}

} // namespace

namespace {

// docs/limits.md: the scale is a finite number and |s| * |position| stays
// below 2^31 (the ids' bound), else an error names the entry and the output
// is untouched; inside the bound, large scaled positions match the
// reference.
TEST(RopeRuntimeScale, NonFiniteOrOversizedScalesAreErrorsAndLargeOnesAreExact) {
  std::string source = attentionSource(1, 16, kRope, {16}, 1);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(4 * 16 * 64, 0.5f), out(q.size(), -7.0f);
  std::vector<int64_t> p(16);
  for (int64_t i = 0; i < 16; ++i)
    p[i] = 3500 + i;
  std::vector<int64_t> shape{1, 4, 16, 64};
  const float inf = std::numeric_limits<float>::infinity();
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 1e30f, 1e6f}) {
    SCOPED_TRACE(bad);
    std::vector<float> s{bad};
    Status status = kernel->run({{q.data(), DType::F32, shape, {}},
                                 {q.data(), DType::F32, shape, {}},
                                 {q.data(), DType::F32, shape, {}},
                                 {p.data(), DType::I64, {16}, {}},
                                 {s.data(), DType::F32, {1}, {}}},
                                {out.data(), DType::F32, shape, {}});
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find("rope_position_scale[0]"), std::string::npos)
        << status.message();
    for (float v : out)
      ASSERT_EQ(v, -7.0f);
  }
  // Scaled positions of 1.4e9 and 2.1e9 (< 2^31): angles of as many rad.
  for (float large : {4e5f, 6e5f}) {
    SCOPED_TRACE(large);
    std::vector<Input> inputs = {floats(shape, DType::F32), floats(shape, DType::F32),
                                 floats(shape, DType::F32), ids({16}, 3500, 1), scales({large})};
    std::string error;
    double rel = runAgainstReference(*kernel, source, inputs, shape, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

} // namespace
