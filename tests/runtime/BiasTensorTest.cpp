// The general fallback: a user's bias or mask tensor read by the fused x86
// kernel (#pe.bias_tensor), against the float64 reference, fresh random
// inputs per run and the output poisoned with NaN. Tolerance (f32 kernel):
// max |out - ref| <= 1e-4 * max |ref|.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr double kTolerance = 1e-4; // f32 kernels: max |out - ref| <= 1e-4 max |ref|

Case biasCase(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, bool perBatch,
              bool perHead) {
  Case c;
  c.shape = {b, hq, hkv, sq, skv, 64, 64};
  c.spec.encodings = {encodings::biasTensor({perBatch ? b : 1, perHead ? hq : 1, sq, skv})};
  c.operandScale = 4.0;
  return c;
}

// Shared and per-batch / per-head biases, lengths past a tile, sq < skv and
// sq > skv, causal, windows, GQA, tiles, with RoPE and with T5.
TEST(BiasTensor, SharedAndPerBatchHeadBiasesMatchReference) {
  for (bool perBatch : {false, true})
    for (bool perHead : {false, true}) {
      SCOPED_TRACE(std::string(perBatch ? "per batch" : "shared") +
                   (perHead ? ", per head" : ", heads shared"));
      expectMatches(biasCase(2, 4, 2, 150, 150, perBatch, perHead));
    }
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 300}, {7, 7}, {300, 65}, {65, 1000}}) {
    Case c = biasCase(1, 4, 4, sq, skv, false, true);
    c.spec.causal = true;
    expectMatches(c);
  }
  Case c = biasCase(1, 4, 1, 200, 200, false, true);
  c.spec.window = 30;
  c.spec.windowRight = 30;
  c.tiles = X86TileConfig{48, 6};
  expectMatches(c);
  c = biasCase(1, 4, 4, 129, 129, true, true);
  c.spec.rope = ref::RopeConfig{};
  c.spec.encodings.push_back(encodings::t5Bias(32, 128, true, 4));
  expectMatches(c);
}

// A -inf mask: masked keys get no weight, and a row that sees no key is
// zeros (docs/semantics.md), against ref::attention with the same mask.
TEST(BiasTensor, MinusInfinityMasksKeysAndEmptyRowsAreZeros) {
  const int64_t heads = 2, sq = 50, skv = 70, d = 64;
  Case c = biasCase(1, heads, heads, sq, skv, false, false);
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(c.spec, c.shape));
  ASSERT_TRUE(kernel) << kernel.error();
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({1, heads, sq, d}, engine),
              k = randomTensor({1, heads, skv, d}, engine),
              v = randomTensor({1, heads, skv, d}, engine);
  ref::Tensor mask = randomTensor({1, 1, sq, skv}, engine);
  std::bernoulli_distribution hidden(0.5);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j)
      if (i % 7 == 3 || hidden(engine)) // every 7th row sees nothing
        mask.at(0, 0, i, j) = -std::numeric_limits<double>::infinity();
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), mf = toFloat(mask);
  std::vector<float> out(heads * sq * d, std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run({{qf.data(), DType::F32, q.shape, {}},
                               {kf.data(), DType::F32, k.shape, {}},
                               {vf.data(), DType::F32, v.shape, {}},
                               {mf.data(), DType::F32, mask.shape, {}}},
                              {out.data(), DType::F32, {1, heads, sq, d}, {}});
  ASSERT_TRUE(status) << status.message();
  ref::AttentionOptions options;
  options.bias = &mask;
  ref::Tensor expected = ref::attention(q, k, v, options);
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < expected.data.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(expected.data[n]));
    maxErr = std::max(maxErr, std::isnan(out[n]) ? std::numeric_limits<double>::infinity()
                                                 : std::fabs(out[n] - expected.data[n]));
  }
  EXPECT_LE(maxErr, kTolerance * maxRef);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t c0 = 0; c0 < d; ++c0)
      EXPECT_EQ(out[(h * sq + 3) * d + c0], 0.0f); // row 3 sees no key
}

// From source, as a user writes it: bias(%b) on a function argument; the
// fusion pass makes it the kernel's encoding operand.
TEST(BiasTensor, SourceBiasArgumentRunsFused) {
  Expected<Spec> spec = Spec::fromText(R"(
    func.func @masked(%q: tensor<1x2x40x64xf32>, %k: tensor<1x2x40x64xf32>, %v: tensor<1x2x40x64xf32>, %b: tensor<1x2x40x40xf32>) -> tensor<1x2x40x64xf32> {
      %o = attn.attention %q, %k, %v bias(%b : tensor<1x2x40x40xf32>) : tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32>, tensor<1x2x40x64xf32> -> tensor<1x2x40x64xf32>
      return %o : tensor<1x2x40x64xf32>
    })");
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(), (std::vector<std::string>{"query", "key", "value", "bias"}));
}

} // namespace
