// Numerics of the fused x86 kernels against the float64 reference, fresh
// random inputs per run. Tolerance (f32 kernel): max |out - ref| <= 1e-4 *
// max |ref|.
#include "tests/runtime/FusedAttentionHarness.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr double kTolerance = 1e-4;

// One runtime for the suite (kernels are cached across tests), destroyed by
// the gtest environment before static destruction: JIT engines must not
// outlive LLVM's own globals.
std::unique_ptr<Runtime> suiteRuntime;

class RuntimeEnvironment : public ::testing::Environment {
public:
  void SetUp() override { suiteRuntime = std::make_unique<Runtime>(); }
  void TearDown() override { suiteRuntime.reset(); }
};
const auto *environment = ::testing::AddGlobalTestEnvironment(new RuntimeEnvironment);

Runtime &sharedRuntime() { return *suiteRuntime; }

void expectMatches(const Case &c) {
  Outcome outcome = runCase(sharedRuntime(), c);
  SCOPED_TRACE("seed " + std::to_string(outcome.seed) + ", " + c.shape.str());
  ASSERT_EQ(outcome.error, "");
  EXPECT_LE(outcome.relativeError, kTolerance);
  ::testing::Test::RecordProperty("relative_error", std::to_string(outcome.relativeError));
  if (std::getenv("PEJIT_TEST_VERBOSE"))
    std::printf("  relative error %.3g (%s)\n", outcome.relativeError, c.shape.str().c_str());
}

ref::RopeConfig halfRope(double theta = 10000.0) {
  ref::RopeConfig rope;
  rope.layout = ref::RopeLayout::Half;
  rope.theta = theta;
  return rope;
}

TEST(FusedAttention, PlainAttentionSmall) {
  Case c;
  c.shape = {1, 2, 2, 37, 45, 64, 64};
  expectMatches(c);
}

TEST(FusedAttention, RopeCausal) {
  Case c;
  c.shape = {1, 4, 4, 100, 100, 64, 64};
  c.spec.rope = halfRope();
  c.spec.causal = true;
  expectMatches(c);
}

TEST(FusedAttention, RopeAlibiGqa) {
  Case c;
  c.shape = {2, 4, 2, 65, 130, 64, 64};
  c.spec.rope = halfRope();
  c.spec.alibi = AlibiSpec{4, 0, false};
  c.spec.causal = true;
  expectMatches(c);
}

} // namespace
