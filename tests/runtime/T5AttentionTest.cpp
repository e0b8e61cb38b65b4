// T5's bucketed relative bias fused into the x86 kernel, against the float64
// reference (the interpreter, which applies ref::t5Bias through the
// encoding's interface): fresh random inputs and tables per run, the output
// poisoned with NaN. Tolerance (f32 kernel): max |out - ref| <= 1e-4 *
// max |ref|.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

/// A T5 attention (scale 1.0, as T5 models use) with tables scaled so the
/// bias moves the softmax visibly.
Case t5Case(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d,
            bool bidirectional, bool causal, int64_t buckets = 32, int64_t maxDistance = 128) {
  Case c;
  c.shape = {b, hq, hkv, sq, skv, d, d};
  c.spec.encodings = {encodings::t5Bias(buckets, maxDistance, bidirectional, hq)};
  c.spec.causal = causal;
  c.spec.scale = 1.0 / 8.0;
  c.operandScale = 3.0;
  return c;
}

struct Lengths {
  int64_t sq, skv;
};

class T5Lengths : public ::testing::TestWithParam<Lengths> {};

// 1, 7, 65, 300 (past max_distance = 128) and 1000, sq = skv, sq < skv
// (decode with a cache) and sq > skv, causal and bidirectional.
TEST_P(T5Lengths, BidirectionalAndCausalMatchReference) {
  Lengths l = GetParam();
  for (bool bidirectional : {true, false})
    for (bool causal : {false, true}) {
      SCOPED_TRACE(std::string(bidirectional ? "bidirectional" : "one-sided") +
                   (causal ? ", causal" : ""));
      if (sampledCase())
        expectMatches(t5Case(1, 4, 2, l.sq, l.skv, 64, bidirectional, causal));
    }
}

INSTANTIATE_TEST_SUITE_P(Fused, T5Lengths,
                         ::testing::Values(Lengths{1, 1}, Lengths{7, 7}, Lengths{65, 65},
                                           Lengths{300, 300}, Lengths{1000, 1000}, Lengths{1, 300},
                                           Lengths{7, 1000}, Lengths{65, 7}, Lengths{300, 65}));

TEST(T5Attention, BucketCountsAndDistances) {
  // Few buckets (every distance past 2 shares a bucket), T5's 32/128, and
  // many buckets over a short max_distance.
  expectMatches(t5Case(2, 4, 4, 150, 150, 64, true, false, 4, 3));
  expectMatches(t5Case(1, 4, 4, 150, 150, 64, false, true, 2, 2));
  expectMatches(t5Case(1, 4, 1, 200, 200, 64, true, false, 64, 20));
  expectMatches(t5Case(1, 4, 1, 200, 200, 64, true, false, 128, 1000));
}

TEST(T5Attention, WithRopeWindowSoftcapAndTiles) {
  Case c = t5Case(1, 8, 2, 190, 190, 64, true, true);
  c.spec.rope = ref::RopeConfig{};
  expectMatches(c);
  c = t5Case(1, 4, 4, 300, 300, 64, true, false);
  c.spec.window = 40;
  expectMatches(c);
  c.spec.windowRight = 25; // a bidirectional local window, T5's buckets inside it
  expectMatches(c);
  c = t5Case(1, 4, 4, 200, 200, 128, true, false);
  c.spec.softcap = 5.0;
  expectMatches(c);
  c = t5Case(1, 4, 2, 200, 260, 64, true, true);
  for (X86TileConfig tiles : {X86TileConfig{48, 6}, X86TileConfig{96, 48}}) {
    c.tiles = tiles;
    expectMatches(c);
  }
}

TEST(T5Attention, WithAlibiBothBiasesAdd) {
  Case c = t5Case(1, 4, 4, 100, 100, 64, true, true);
  c.spec.alibi = AlibiSpec{4, 0, false};
  expectMatches(c);
}

TEST(T5Attention, TableOfTheWrongShapeIsAnError) {
  Case c = t5Case(1, 4, 4, 16, 16, 64, true, false);
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(c.spec, c.shape));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(4 * 16 * 64), table(16 * 4), out(q.size());
  std::vector<int64_t> qDims{1, 4, 16, 64};
  std::vector<TensorView> inputs = {{q.data(), DType::F32, qDims, {}},
                                    {q.data(), DType::F32, qDims, {}},
                                    {q.data(), DType::F32, qDims, {}},
                                    {table.data(), DType::F32, {16, 4}, {}}};
  Status status = kernel->run(inputs, {out.data(), DType::F32, qDims, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("input 3 (t5_table)"), std::string::npos) << status.message();
  inputs.pop_back();
  status = kernel->run(inputs, {out.data(), DType::F32, qDims, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("t5_table"), std::string::npos) << status.message();
}

} // namespace
