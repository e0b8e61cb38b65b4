// One Runtime for all suites of a test binary (kernels are cached across
// tests), created and destroyed by a gtest environment: JIT engines must not
// outlive LLVM's own globals. And the numerics check every suite uses.
#ifndef PEJIT_TESTS_RUNTIME_SUITERUNTIME_H
#define PEJIT_TESTS_RUNTIME_SUITERUNTIME_H

#include "tests/runtime/FusedAttentionHarness.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace pejit::testing {

inline std::unique_ptr<Runtime> &suiteRuntimeSlot() {
  static std::unique_ptr<Runtime> runtime;
  return runtime;
}

inline Runtime &suiteRuntime() { return *suiteRuntimeSlot(); }

class SuiteRuntimeEnvironment : public ::testing::Environment {
public:
  void SetUp() override { suiteRuntimeSlot() = std::make_unique<Runtime>(); }
  void TearDown() override { suiteRuntimeSlot().reset(); }
};

// An inline variable: registered once per binary, whichever files include it.
inline const bool kSuiteRuntimeRegistered =
    (::testing::AddGlobalTestEnvironment(new SuiteRuntimeEnvironment), true);

/// Runs `c` on the suite's runtime and checks max |out - ref| <= tolerance *
/// max |ref| (f32 kernels: 1e-4).
inline void expectMatches(const Case &c, double tolerance = 1e-4) {
  Outcome outcome = runCase(suiteRuntime(), c);
  SCOPED_TRACE("seed " + std::to_string(outcome.seed) + ", " + c.shape.str());
  ASSERT_EQ(outcome.error, "");
  EXPECT_LE(outcome.relativeError, tolerance);
  if (std::getenv("PEJIT_TEST_VERBOSE"))
    std::printf("  relative error %.3g (%s)\n", outcome.relativeError, c.shape.str().c_str());
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_SUITERUNTIME_H
