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

/// Whether to run this case of a numerics matrix. PEJIT_TEST_SAMPLE=p (the
/// sanitizer lane, scripts/sanitize.sh: every runtime check the skipped
/// cases reach, the kept and smaller ones reach too) keeps each case with
/// probability p, from a seed printed once per process
/// (PEJIT_TEST_SAMPLE_SEED=N replays it); unset, every case runs.
inline bool sampledCase() {
  static const double fraction = [] {
    const char *text = std::getenv("PEJIT_TEST_SAMPLE");
    return text ? std::atof(text) : 1.0;
  }();
  if (fraction >= 1.0)
    return true;
  static std::mt19937 engine = [] {
    const char *given = std::getenv("PEJIT_TEST_SAMPLE_SEED");
    uint32_t seed =
        given ? static_cast<uint32_t>(std::strtoul(given, nullptr, 10)) : std::random_device{}();
    std::printf("numerics matrices sampled: PEJIT_TEST_SAMPLE=%g, seed %u "
                "(PEJIT_TEST_SAMPLE_SEED replays it)\n",
                fraction, seed);
    return std::mt19937(seed);
  }();
  return std::uniform_real_distribution<double>(0.0, 1.0)(engine) < fraction;
}

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

/// A source program run as a user writes it: compiled through the suite's
/// runtime (fusion included), fed fresh random f32 inputs of the argument
/// shapes (drawn from [-operandScale, operandScale] after the first three,
/// Q, K and V), the output poisoned with NaN; checked against the float64
/// interpreter on the same source, which evaluates the unfused ops. With
/// `arguments`, the kernel's argument labels must be those.
inline void expectSourceMatchesInterpreter(const char *source,
                                           const std::vector<std::string> &arguments = {},
                                           double operandScale = 2.0, double tolerance = 1e-4) {
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  if (!arguments.empty())
    EXPECT_EQ(kernel->arguments(), arguments);
  const KernelSignature &signature = kernel->signature();
  std::mt19937 &engine = rng(nullptr);
  std::vector<ref::Tensor> inputs;
  std::vector<std::vector<float>> floats;
  std::vector<TensorView> views;
  for (const KernelArgument &argument : signature.arguments) {
    inputs.push_back(randomTensor(argument.shape, engine, inputs.size() < 3 ? 1.0 : operandScale));
    floats.push_back(toFloat(inputs.back()));
  }
  for (size_t n = 0; n < inputs.size(); ++n)
    views.push_back({floats[n].data(), DType::F32, inputs[n].shape, {}});
  Expected<ref::Tensor> expected =
      interpretReference(source, std::vector<ReferenceArgument>(inputs.begin(), inputs.end()));
  ASSERT_TRUE(expected) << expected.error();
  std::vector<float> out(expected->data.size(), std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run(views, {out.data(), DType::F32, expected->shape, {}});
  ASSERT_TRUE(status) << status.message();
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < expected->data.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(expected->data[n]));
    maxErr = std::max(maxErr, std::isnan(out[n]) ? std::numeric_limits<double>::infinity()
                                                 : std::fabs(out[n] - expected->data[n]));
  }
  EXPECT_LE(maxErr, tolerance * maxRef);
}

} // namespace pejit::testing

#endif // PEJIT_TESTS_RUNTIME_SUITERUNTIME_H
