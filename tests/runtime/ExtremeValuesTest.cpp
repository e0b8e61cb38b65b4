// Regressions of the hardening campaign (issue 13) that ran and gave wrong
// numbers without an error: scores so large that the online softmax lost the
// row max (whole rows came out zero), and windows so wide that the mask
// arithmetic overflowed. Fresh random inputs, NaN-poisoned outputs, float64
// reference; tolerance max |out - ref| <= 1e-4 * max |ref|.
#include "tests/runtime/FusedAttentionHarness.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <limits>
#include <memory>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr double kTolerance = 1e-4;

std::unique_ptr<Runtime> runtime;

class ExtremeValuesEnvironment : public ::testing::Environment {
public:
  void SetUp() override { runtime = std::make_unique<Runtime>(); }
  void TearDown() override { runtime.reset(); }
};
const auto *environment = ::testing::AddGlobalTestEnvironment(new ExtremeValuesEnvironment);

void expectMatches(const Case &c, const std::string &what) {
  Outcome outcome = runCase(*runtime, c);
  SCOPED_TRACE(what + ", seed " + std::to_string(outcome.seed) + ", " + c.shape.str());
  ASSERT_EQ(outcome.error, "");
  EXPECT_LE(outcome.relativeError, kTolerance);
}

Case shaped(int64_t sq, int64_t skv) {
  Case c;
  c.shape = {1, 2, 1, sq, skv, 64, 64};
  return c;
}

// s = scale q.k up to ~1e9 and ~1e30: P = exp(s - max) must keep the max
// element at exactly 1 (before the fix: rows of zeros, relative error 1).
TEST(ExtremeValues, LargeScaleKeepsTheRowMax) {
  for (double scale : {1.0e9, 1.0e30})
    for (bool causal : {false, true}) {
      Case c = shaped(150, 150); // a full and a partial query tile
      c.spec.scale = scale;
      c.spec.causal = causal;
      expectMatches(c, std::string(scale > 1e10 ? "scale 1e30" : "scale 1e9") +
                           (causal ? " causal" : ""));
    }
}

// |q|, |k| ~ 1e5 at the default scale 1/sqrt(d): scores ~ 1e10.
TEST(ExtremeValues, LargeInputsKeepTheRowMax) {
  for (bool rope : {false, true}) {
    Case c = shaped(100, 130);
    c.inputScale = 1.0e5;
    c.spec.causal = true;
    if (rope)
      c.spec.rope = ref::RopeConfig{};
    expectMatches(c, rope ? "rope" : "plain");
  }
}

// Large scores with ALiBi and a softcap on top (the score hooks run on the
// same tile before the softmax).
TEST(ExtremeValues, LargeScoresWithScoreHooks) {
  Case c = shaped(97, 97);
  c.spec.scale = 1.0e9;
  c.spec.alibi = AlibiSpec{2, 0, false};
  c.spec.causal = true;
  expectMatches(c, "alibi");
  c.spec.alibi.reset();
  c.spec.softcap = 1.0e12; // tanh's linear range: scores stay ~1e9
  expectMatches(c, "softcap");
}

// Windows at and past the lengths, up to INT64_MAX: before the fix the mask
// arithmetic overflowed (relative errors 1.3 to 3.1).
TEST(ExtremeValues, WindowsUpToInt64Max) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  struct Lengths {
    int64_t sq, skv;
  };
  for (Lengths lengths : {Lengths{70, 200}, Lengths{200, 70}, Lengths{150, 150}})
    for (int64_t window :
         {max, max - 1, lengths.skv - 1, lengths.skv, lengths.skv + 1, lengths.sq + lengths.skv})
      for (bool causal : {false, true}) {
        Case c = shaped(lengths.sq, lengths.skv);
        c.spec.window = window;
        c.spec.causal = causal;
        expectMatches(c, "window " + std::to_string(window) + (causal ? " causal" : "") + " sq " +
                             std::to_string(lengths.sq) + " skv " + std::to_string(lengths.skv));
      }
}

} // namespace
