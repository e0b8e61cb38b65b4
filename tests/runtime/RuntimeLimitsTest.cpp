// Reproducers of the hardening campaign (issue 13) through the runtime API:
// each is an error value naming what is wrong, never a crash or a kernel.
#include "pejit/runtime/Pejit.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <limits>
#include <vector>

using namespace pejit;

namespace {

Spec plainSpec(Shape shape, bool rope = false) {
  AttentionSpec spec;
  if (rope) {
    spec.rope = ref::RopeConfig{};
    spec.queryPositions = spec.keyPositions = true;
  }
  return Spec::fromBuilder(spec, shape);
}

void expectError(const Expected<X86Kernel> &kernel, const std::string &fragment) {
  ASSERT_FALSE(kernel) << "compiled, expected an error containing: " << fragment;
  EXPECT_NE(kernel.error().find(fragment), std::string::npos) << kernel.error();
}

TEST(RuntimeLimits, ZeroSizeDimensionsAreNamed) {
  Runtime runtime({1, ""});
  expectError(runtime.getX86(plainSpec({1, 2, 2, 0, 8, 64, 64})),
              "query sq (dim 2) is 0: every dimension must be at least 1");
  expectError(runtime.getX86(plainSpec({0, 2, 2, 8, 8, 64, 64})),
              "query b (dim 0) is 0: every dimension must be at least 1");
  expectError(runtime.getX86(plainSpec({1, 2, 2, 8, 0, 64, 64})),
              "key skv (dim 2) is 0: every dimension must be at least 1");
  expectError(runtime.getX86(plainSpec({1, 0, 2, 8, 8, 64, 64})),
              "query hq (dim 1) is 0: every dimension must be at least 1");
}

TEST(RuntimeLimits, HugeHeadDimIsAnError) {
  Runtime runtime({1, ""});
  expectError(runtime.getX86(plainSpec({1, 1, 1, 8, 8, int64_t(1) << 20, 64})),
              "query d (dim 3) is 1048576, beyond pejit's limit of 1024");
  expectError(runtime.getX86(plainSpec({1, 1, 1, 8, 8, int64_t(1) << 31, 64})),
              "beyond pejit's limit of 1024");
}

TEST(RuntimeLimits, HugeTilesAreAnErrorNotAStackOverflow) {
  Runtime runtime({1, ""});
  expectError(runtime.getX86(plainSpec({1, 1, 1, 8, 8, 64, 64}), X86TileConfig{48, 99999996}),
              "tile config (48, 99999996) is invalid");
}

TEST(RuntimeLimits, PositionsOutsideInt32RangeAreNamed) {
  Runtime runtime({1, ""});
  Shape shape{1, 1, 1, 4, 4, 64, 64};
  Expected<X86Kernel> kernel = runtime.getX86(plainSpec(shape, /*rope=*/true));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(4 * 64, 0.5f), k(4 * 64, 0.25f), v(4 * 64, 1.0f), out(4 * 64);
  std::vector<int64_t> queryPositions = {0, 1, 2, 3};
  std::vector<int64_t> keyPositions = {0, 1, int64_t(1) << 31, 3};
  std::vector<TensorView> inputs = {{q.data(), DType::F32, {1, 1, 4, 64}, {}},
                                    {k.data(), DType::F32, {1, 1, 4, 64}, {}},
                                    {v.data(), DType::F32, {1, 1, 4, 64}, {}},
                                    {queryPositions.data(), DType::I64, {4}, {}},
                                    {keyPositions.data(), DType::I64, {4}, {}}};
  TensorView outView{out.data(), DType::F32, {1, 1, 4, 64}, {}};
  Status status = kernel->run(inputs, outView);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("position 2147483648 at [2] is outside [-2^31, 2^31)"),
            std::string::npos)
      << status.message();
  keyPositions[2] = std::numeric_limits<int64_t>::min();
  status = kernel->run(inputs, outView);
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("position -9223372036854775808 at [2]"), std::string::npos)
      << status.message();
  // The bounds themselves are positions like any other.
  keyPositions[2] = (int64_t(1) << 31) - 1;
  queryPositions[0] = -(int64_t(1) << 31);
  EXPECT_TRUE(kernel->run(inputs, outView));
}

} // namespace
