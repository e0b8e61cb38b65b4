// Standalone pe.sinusoidal kernels (docs/standalone-kernels.md): x + the
// Vaswani embedding, checked against the float64 interpreter on the same
// source (fresh random inputs and ids each run, the output poisoned with
// NaN; f32: max |out - ref| <= 1e-4 max |ref|, f16/bf16 1e-2 against the
// reference on the rounded inputs). Positions up to 1e6 (the angles are
// float64), one kernel of a `?` class at s in {1, 7, 64, 65, 300}
// compiling once, per-row ids, a model dim of 768, in place. Bad inputs get
// errors naming them.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

/// A one-op source: x [B, S, D] of element type `t` plus the sinusoidal
/// embedding at ids of type `idsType`.
std::string sinusoidalSource(const std::string &x, const std::string &idsType,
                             const std::string &base = "10000.0") {
  return "func.func @embed(%x: tensor<" + x + ">, %pos: tensor<" + idsType + ">) -> tensor<" + x +
         "> {\n  %e = pe.sinusoidal %x, %pos <base = " + base + "> : tensor<" + x + ">, tensor<" +
         idsType + ">\n  return %e : tensor<" + x + ">\n}\n";
}

TEST(StandaloneSinusoidal, OneKernelMatchesTheReferenceAtEveryLengthUpToPositionOneMillion) {
  std::string source = sinusoidalSource("?x?x64xf32", "?xi64");
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (int64_t s : {1, 7, 64, 65, 300}) {
    SCOPED_TRACE("s = " + std::to_string(s));
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel = runAndCompare(*kernel, source, {s == 1 ? 3 : 2, s, 64}, {s}, DType::F32, 1000000,
                               false, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
}

/// On x = 0 the output is the table itself: within 5e-7 of sin and cos in
/// float64 at positions up to 1e6, at d = 512 (the 8-pair f32 path) and d =
/// 72 (its 4-pair float64 tail as well).
TEST(StandaloneSinusoidal, TheTableIsWithinHalfAMillionthAtPositionsUpToOneMillion) {
  std::mt19937 &engine = rng(nullptr);
  for (int64_t d : {512, 72}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    std::string source = sinusoidalSource("1x?x" + std::to_string(d) + "xf32", "?xi64");
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    const int64_t s = 200;
    std::uniform_int_distribution<int64_t> position(0, 1000000);
    std::vector<int64_t> ids(s);
    for (int64_t &p : ids)
      p = position(engine);
    std::vector<float> x(s * d, 0.0f), out(s * d, std::nanf(""));
    Status status =
        kernel->run({{x.data(), DType::F32, {1, s, d}, {}}, {ids.data(), DType::I64, {s}, {}}},
                    {out.data(), DType::F32, {1, s, d}, {}});
    ASSERT_TRUE(status) << status.message();
    Expected<ref::Tensor> expected =
        interpretReference(source, {ref::Tensor({1, s, d}), ref::PositionIds({s}, ids)});
    ASSERT_TRUE(expected) << expected.error();
    double worst = 0;
    for (size_t e = 0; e < out.size(); ++e)
      worst = std::max(worst, std::fabs(out[e] - expected->data[e]));
    EXPECT_LE(worst, 5e-7);
  }
}

TEST(StandaloneSinusoidal, PerRowIdsWideRowsSixteenBitAndInPlace) {
  struct Form {
    std::string name, x, ids;
    std::vector<int64_t> shape, idsShape;
    DType dtype;
    bool inPlace;
    std::string base = "10000.0";
  };
  const Form forms[] = {
      {"per-row ids", "2x33x64xf32", "2x33xi32", {2, 33, 64}, {2, 33}, DType::F32, false},
      {"BERT-base width, base 500",
       "1x?x768xf32",
       "?xi64",
       {1, 40, 768},
       {40},
       DType::F32,
       false,
       "500.0"},
      {"d = 72 (not a power of two)", "1x?x72xf32", "?xi64", {1, 9, 72}, {9}, DType::F32, false},
      {"f16", "?x?x128xf16", "?xi64", {2, 50, 128}, {50}, DType::F16, false},
      {"bf16", "1x?x64xbf16", "?xi64", {1, 70, 64}, {70}, DType::BF16, false},
      {"in place", "1x?x128xf32", "?xi64", {1, 300, 128}, {300}, DType::F32, true},
  };
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    std::string source = sinusoidalSource(f.x, f.ids, f.base);
    Expected<Spec> spec = Spec::fromText(source);
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel =
        runAndCompare(*kernel, source, f.shape, f.idsShape, f.dtype, 100000, f.inPlace, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, f.dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

TEST(StandaloneSinusoidal, BadInputsAreErrorsThatNameThem) {
  std::string source = sinusoidalSource("?x?x64xf32", "?xi64");
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> x(2 * 10 * 64, 1.0f), out(x.size(), -7.0f);
  std::vector<int64_t> ids(10, 3);
  struct Bad {
    std::string name;
    std::vector<int64_t> xShape, outShape, idsShape;
    std::string message;
  };
  const Bad cases[] = {
      {"a [b, h, s, d] input",
       {2, 1, 10, 64},
       {2, 10, 64},
       {10},
       "input 0 (transform_input): shape [2, 1, 10, 64] does not match the kernel's [2, 10, 64]"},
      {"the output's length", {2, 10, 64}, {2, 9, 64}, {10}, "output"},
      {"the ids' length", {2, 10, 64}, {2, 10, 64}, {9}, "transform_positions"},
  };
  for (const Bad &c : cases) {
    SCOPED_TRACE(c.name);
    Status status = kernel->run(
        {{x.data(), DType::F32, c.xShape, {}}, {ids.data(), DType::I64, c.idsShape, {}}},
        {out.data(), DType::F32, c.outShape, {}});
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
    for (float v : out)
      ASSERT_EQ(v, -7.0f);
  }
}

} // namespace
