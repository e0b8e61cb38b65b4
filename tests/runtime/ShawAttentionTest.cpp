// Shaw's relative key term (a^K) fused into the x86 kernel, against the
// float64 reference: fresh random inputs and tables per run, the output
// poisoned with NaN. Tolerance (f32 kernel): max |out - ref| <= 1e-4 *
// max |ref|.
#include "runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr double kTolerance = 1e-4; // f32 kernels: max |out - ref| <= 1e-4 max |ref|

Case shawCase(int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, int64_t clip) {
  Case c;
  c.shape = {1, hq, hkv, sq, skv, d, d};
  c.spec.encodings = {encodings::shawKey(clip, d)};
  c.operandScale = 2.0;
  return c;
}

// Lengths 1, 7, 65, 300 and 1000, sq < skv and sq > skv, clip 0, 1, 4 and
// 16, causal and not, GQA.
TEST(ShawKey, LengthsAndClipsMatchReference) {
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1},
                         {7, 7},
                         {65, 65},
                         {300, 300},
                         {1000, 1000},
                         {1, 300},
                         {65, 1000},
                         {300, 65}})
    for (bool causal : {false, true}) {
      Case c = shawCase(4, 2, sq, skv, 64, 16);
      c.spec.causal = causal;
      expectMatches(c);
    }
  for (int64_t clip : {0, 1, 4}) {
    Case c = shawCase(4, 4, 150, 150, 128, clip);
    expectMatches(c);
  }
}

// The term sits inside the scale and before the softcap (docs/semantics.md);
// with a two-sided window, tiles, a T5 bias and ALiBi after it.
TEST(ShawKey, WithSoftcapWindowsTilesAndBiases) {
  Case c = shawCase(4, 2, 200, 200, 64, 8);
  c.spec.softcap = 3.0;
  c.spec.scale = 0.3;
  expectMatches(c);
  c = shawCase(4, 4, 300, 300, 64, 16);
  c.spec.window = 40;
  c.spec.windowRight = 20;
  for (X86TileConfig tiles : {X86TileConfig{48, 6}, X86TileConfig{96, 48}}) {
    c.tiles = tiles;
    expectMatches(c);
  }
  c = shawCase(4, 4, 129, 129, 64, 4);
  c.spec.encodings.push_back(encodings::t5Bias(32, 128, true, 4));
  c.spec.alibi = AlibiSpec{4, 0, true};
  expectMatches(c);
}

// As a user writes it: pe.relative_key on Q feeding key_term. The kernel
// (fused by pe-fuse-into-attention) against the interpreter on the same
// source, which evaluates the unfused op (ref::relativeKeyTerm) instead.
TEST(ShawKey, SourceFormFusesAndMatchesTheUnfusedReference) {
  const char *source = R"(
    func.func @shaw(%q: tensor<1x4x90x64xf32>, %k: tensor<1x4x90x64xf32>, %v: tensor<1x4x90x64xf32>, %aK: tensor<9x64xf32>) -> tensor<1x4x90x64xf32> {
      %t = pe.relative_key %q, %aK <clip = 4> : tensor<1x4x90x64xf32>, tensor<9x64xf32> -> tensor<1x4x90x90xf32>
      %o = attn.attention %q, %k, %v key_term(%t : tensor<1x4x90x90xf32>) causal : tensor<1x4x90x64xf32>, tensor<1x4x90x64xf32>, tensor<1x4x90x64xf32> -> tensor<1x4x90x64xf32>
      return %o : tensor<1x4x90x64xf32>
    })";
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(),
            (std::vector<std::string>{"query", "key", "value", "shaw_key_table"}));
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({1, 4, 90, 64}, engine), k = randomTensor({1, 4, 90, 64}, engine),
              v = randomTensor({1, 4, 90, 64}, engine), aK = randomTensor({9, 64}, engine, 2.0);
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), af = toFloat(aK);
  std::vector<float> out(q.data.size(), std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run({{qf.data(), DType::F32, q.shape, {}},
                               {kf.data(), DType::F32, k.shape, {}},
                               {vf.data(), DType::F32, v.shape, {}},
                               {af.data(), DType::F32, aK.shape, {}}},
                              {out.data(), DType::F32, q.shape, {}});
  ASSERT_TRUE(status) << status.message();
  Expected<ref::Tensor> expected = interpretReference(source, {q, k, v, aK});
  ASSERT_TRUE(expected) << expected.error();
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < expected->data.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(expected->data[n]));
    maxErr = std::max(maxErr, std::isnan(out[n]) ? std::numeric_limits<double>::infinity()
                                                 : std::fabs(out[n] - expected->data[n]));
  }
  EXPECT_LE(maxErr, kTolerance * maxRef);
}

} // namespace
