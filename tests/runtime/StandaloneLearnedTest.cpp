// Standalone pe.learned kernels (docs/standalone-kernels.md): x + rows of
// a learned [max_positions, d] table (BERT's position embeddings), checked
// against the float64 interpreter on the same source (fresh random inputs,
// table and ids each run, the output poisoned with NaN; f32: max |out -
// ref| <= 1e-4 max |ref|, f16/bf16 1e-2 against the reference on the
// rounded inputs). A position outside the table is an error at run that
// names it and the table's rows, and the output is left untouched.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

/// A one-op source: x of type `x` plus rows of a [rows, d] table at ids of
/// type `idsType`.
std::string learnedSource(const std::string &x, const std::string &idsType, int64_t rows,
                          const std::string &table) {
  return "func.func @embed(%x: tensor<" + x + ">, %pos: tensor<" + idsType + ">, %t: tensor<" +
         table + ">) -> tensor<" + x +
         "> {\n  %e = pe.learned %x, %pos, %t <max_positions = " + std::to_string(rows) +
         "> : tensor<" + x + ">, tensor<" + idsType + ">, tensor<" + table +
         ">\n  return %e : tensor<" + x + ">\n}\n";
}

TEST(StandaloneLearned, OneKernelMatchesTheReferenceAtEveryLength) {
  std::string source = learnedSource("?x?x64xf32", "?xi64", 512, "512x64xf32");
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (int64_t s : {1, 7, 64, 65, 300}) {
    SCOPED_TRACE("s = " + std::to_string(s));
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel = runAndCompare(*kernel, source, {s == 1 ? 3 : 2, s, 64}, {s}, DType::F32, 512,
                               false, error, {512, 64});
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
}

TEST(StandaloneLearned, PerRowIdsBertWidthSixteenBitAndInPlace) {
  struct Form {
    std::string name, x, ids, table;
    int64_t rows;
    std::vector<int64_t> shape, idsShape, tableShape;
    DType dtype;
    bool inPlace;
  };
  const Form forms[] = {
      {"per-row ids",
       "2x33x64xf32",
       "2x33xi32",
       "40x64xf32",
       40,
       {2, 33, 64},
       {2, 33},
       {40, 64},
       DType::F32,
       false},
      {"BERT-base: 512 x 768",
       "1x?x768xf32",
       "?xi64",
       "512x768xf32",
       512,
       {1, 40, 768},
       {40},
       {512, 768},
       DType::F32,
       false},
      {"f16",
       "?x?x128xf16",
       "?xi64",
       "100x128xf16",
       100,
       {2, 50, 128},
       {50},
       {100, 128},
       DType::F16,
       false},
      {"bf16",
       "1x?x64xbf16",
       "?xi64",
       "70x64xbf16",
       70,
       {1, 70, 64},
       {70},
       {70, 64},
       DType::BF16,
       false},
      {"in place",
       "1x?x128xf32",
       "?xi64",
       "300x128xf32",
       300,
       {1, 300, 128},
       {300},
       {300, 128},
       DType::F32,
       true},
  };
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    std::string source = learnedSource(f.x, f.ids, f.rows, f.table);
    Expected<Spec> spec = Spec::fromText(source);
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel = runAndCompare(*kernel, source, f.shape, f.idsShape, f.dtype, f.rows, f.inPlace,
                               error, f.tableShape);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, f.dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

TEST(StandaloneLearned, PositionsOutsideTheTableAreErrorsThatNameThem) {
  std::string source = learnedSource("?x?x64xf32", "?x?xi64", 16, "16x64xf32");
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_FALSE(kernel); // per-row ids with a `?` batch are refused at compile
  source = learnedSource("2x?x64xf32", "2x?xi64", 16, "16x64xf32");
  spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> x(2 * 5 * 64, 1.0f), table(16 * 64, 0.5f), out(x.size(), -7.0f);
  struct Bad {
    std::string name;
    std::vector<int64_t> ids;
    std::string message;
  };
  const Bad cases[] = {
      {"one past the last row",
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 16},
       "position 16 at [1, 4] is outside the table's 16 rows [0, 16)"},
      {"negative",
       {0, -1, 2, 3, 4, 5, 6, 7, 8, 9},
       "position -1 at [0, 1] is outside the table's 16 rows"},
      {"far past", {0, 1, 2, 3, 4, 5, 6, 7, 1000000, 9}, "position 1000000 at [1, 3]"},
  };
  for (const Bad &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<int64_t> badIds = c.ids;
    Status status = kernel->run({{x.data(), DType::F32, {2, 5, 64}, {}},
                                 {badIds.data(), DType::I64, {2, 5}, {}},
                                 {table.data(), DType::F32, {16, 64}, {}}},
                                {out.data(), DType::F32, {2, 5, 64}, {}});
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find(c.message), std::string::npos) << status.message();
    for (float v : out)
      ASSERT_EQ(v, -7.0f);
  }
  // A table of the wrong rows is named as the learned table.
  std::vector<int64_t> ids(10, 3);
  Status status = kernel->run({{x.data(), DType::F32, {2, 5, 64}, {}},
                               {ids.data(), DType::I64, {2, 5}, {}},
                               {table.data(), DType::F32, {15, 64}, {}}},
                              {out.data(), DType::F32, {2, 5, 64}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("learned_table"), std::string::npos) << status.message();
}

} // namespace
