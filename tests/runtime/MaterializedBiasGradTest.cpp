// The backward of a materialized pe.t5_bias (pe.score_bias_grad, derived by
// Runtime::getX86Backward from the bias's own source; docs/backward.md):
// the table's gradient from dBias, against the float64 reference
// (ref::t5TableGradient, itself checked by finite differences in
// tests/unit/AttentionGradTest.cpp). Fresh random dBias, a NaN-poisoned
// output, max |got - ref| <= 1e-4 max |ref| (f32 dBias; 1e-2 for bf16,
// whose reference sums the rounded values). Both T5 forms, shapes that
// cross the kernel's 64-row items and 512-key chunks (fewer queries than
// keys and more), a batch of dBias rows, a `?` shape class, bitwise
// determinism across thread counts, and an error that names a bad dBias.
#include "pejit/reference/ScoreBiasGrad.h"
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>

namespace pejit::testing {
namespace {

struct BiasGradCase {
  bool bidirectional = true;
  int64_t batch = 1, heads = 4, sq = 50, skv = 70;
  DType dtype = DType::F32;
  bool shapeClass = false;
};

std::string t5Source(const BiasGradCase &c) {
  auto dim = [&](int64_t n) { return c.shapeClass ? std::string("?") : std::to_string(n); };
  std::string type = "tensor<" + std::to_string(c.batch) + "x" + std::to_string(c.heads) + "x" +
                     dim(c.sq) + "x" + dim(c.skv) + "x" + elementName(c.dtype) + ">";
  std::string table = "tensor<32x" + std::to_string(c.heads) + "x" + elementName(c.dtype) + ">";
  return "func.func @t5(%t: " + table + ") -> " + type +
         " {\n  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128, bidirectional = " +
         (c.bidirectional ? "true" : "false") + "> : " + table + " -> " + type +
         "\n  return %b : " + type + "\n}\n";
}

/// Runs the derived backward on `runtime` with a fresh dBias; the gradient
/// into `got`, its error against the reference returned.
double runCase(const BiasGradCase &c, Runtime &runtime, std::vector<float> &got,
               std::string &error) {
  Expected<Spec> forward = Spec::fromText(t5Source(c));
  if (!forward) {
    error = forward.error();
    return 0;
  }
  Expected<X86Kernel> kernel = runtime.getX86Backward(*forward);
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  auto [table, tableRef] = randomInput({32, c.heads}, c.dtype);
  auto [dbias, dbiasRef] = randomInput({c.batch, c.heads, c.sq, c.skv}, c.dtype);
  got.assign(32 * c.heads, std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run({{table.bytes.data(), c.dtype, {32, c.heads}, {}},
                               {dbias.bytes.data(), c.dtype, dbiasRef.shape, {}}},
                              {got.data(), DType::F32, {32, c.heads}, {}});
  if (!status) {
    error = status.message();
    return 0;
  }
  ref::Tensor want =
      ref::t5TableGradient(dbiasRef, c.bidirectional, 32, 128, ref::RelativeDistance{c.sq, c.skv});
  return maxRelativeError(got, want);
}

void expectCase(const BiasGradCase &c) {
  SCOPED_TRACE(t5Source(c) + " at " + std::to_string(c.sq) + " x " + std::to_string(c.skv));
  std::vector<float> got;
  std::string error;
  double rel = runCase(c, suiteRuntime(), got, error);
  ASSERT_EQ(error, "");
  EXPECT_LE(rel, c.dtype == DType::F32 ? 1e-4 : 1e-2);
}

TEST(MaterializedBiasGrad, T5TableGradientInBothFormsAcrossItemsAndChunks) {
  for (bool bidirectional : {true, false})
    for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1},
                           {7, 7},
                           {50, 70},
                           {130, 1100},
                           {700, 65},
                           {300, 300}}) {
      BiasGradCase c;
      c.bidirectional = bidirectional;
      c.sq = sq, c.skv = skv;
      expectCase(c);
    }
}

TEST(MaterializedBiasGrad, BatchRowsHalfDbiasAndAShapeClass) {
  BiasGradCase c;
  c.batch = 3;
  expectCase(c);
  c.batch = 1;
  c.dtype = DType::BF16;
  expectCase(c);
  c.dtype = DType::F32;
  c.shapeClass = true;
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 9}, {200, 140}}) {
    c.sq = sq, c.skv = skv;
    expectCase(c);
  }
}

TEST(MaterializedBiasGrad, BitwiseIdenticalAcrossThreadCounts) {
  BiasGradCase c;
  c.sq = 400, c.skv = 600;
  std::vector<float> one, two;
  std::string error;
  RuntimeOptions options;
  options.threads = 1;
  Runtime single(options);
  options.threads = 2;
  Runtime pair(options);
  const std::mt19937 saved = rng(nullptr);
  runCase(c, single, one, error);
  ASSERT_EQ(error, "");
  rng(nullptr) = saved;
  runCase(c, pair, two, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

// dBias and the table (read-only) and the gradient end right before an
// inaccessible page: the kernel touches nothing past them; bf16 dBias rows
// of a length that ends mid-vector.
TEST(MaterializedBiasGrad, StaysWithinEveryTensorAgainstGuardPages) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    BiasGradCase c;
    c.dtype = dtype;
    c.sq = 67, c.skv = 77;
    Expected<Spec> forward = Spec::fromText(t5Source(c));
    ASSERT_TRUE(forward) << forward.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
    ASSERT_TRUE(kernel) << kernel.error();
    auto [table, tableRef] = randomInput({32, 4}, dtype);
    auto [dbias, dbiasRef] = randomInput({1, 4, 67, 77}, dtype);
    GuardedBuffer t(table.bytes.size()), db(dbias.bytes.size()), out(32 * 4 * 4);
    std::memcpy(t.data(), table.bytes.data(), table.bytes.size());
    std::memcpy(db.data(), dbias.bytes.data(), dbias.bytes.size());
    t.protectReadOnly();
    db.protectReadOnly();
    Status status =
        kernel->run({{t.data(), dtype, {32, 4}, {}}, {db.data(), dtype, {1, 4, 67, 77}, {}}},
                    {out.data(), DType::F32, {32, 4}, {}});
    ASSERT_TRUE(status) << status.message();
    std::vector<float> got(out.as<float>(), out.as<float>() + 32 * 4);
    ref::Tensor want = ref::t5TableGradient(dbiasRef, true, 32, 128, ref::RelativeDistance{67, 77});
    EXPECT_LE(maxRelativeError(got, want), dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

TEST(MaterializedBiasGrad, ADbiasOfTheWrongShapeIsAnErrorNamingIt) {
  BiasGradCase c;
  Expected<Spec> forward = Spec::fromText(t5Source(c));
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> table(32 * 4), dbias(4 * 50 * 69), out(32 * 4, 7.0f);
  Status status = kernel->run(
      {{table.data(), DType::F32, {32, 4}, {}}, {dbias.data(), DType::F32, {1, 4, 50, 69}, {}}},
      {out.data(), DType::F32, {32, 4}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("output_grad"), std::string::npos) << status.message();
  EXPECT_EQ(out[0], 7.0f); // nothing written
}

} // namespace
} // namespace pejit::testing
