// Shaw's terms materialized (docs/standalone-kernels.md "Materialized
// biases"): pe.relative_key's [b, h, sq, skv] = q_i . a^K[clip(j - i') + k]
// and pe.relative_value's [(h,) sq, skv, dv] = a^V[clip(j - i') + k]
// (i' = i + skv - sq), compiled on their own, against the float64
// interpreter: fresh inputs, poisoned outputs, f32 1e-5 (a d-term dot
// product in f32; the value term is a copy, exact) and 16-bit 1e-2.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

/// Compiles `source`, runs it on fresh inputs of `inputShapes` into a
/// poisoned output of `outShape`, and returns the max relative error
/// against `staticSource` interpreted in float64 (error set on failure).
double runTerm(const std::string &source, const std::string &staticSource,
               const std::vector<std::vector<int64_t>> &inputShapes, std::vector<int64_t> outShape,
               DType dtype, std::string &error) {
  Expected<X86Kernel> kernel = suiteKernel(source);
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::vector<npy::Array> bytes;
  std::vector<ReferenceArgument> reference;
  std::vector<TensorView> inputs;
  for (const std::vector<int64_t> &shape : inputShapes) {
    auto [array, tensor] = randomInput(shape, dtype);
    bytes.push_back(std::move(array));
    reference.push_back(std::move(tensor));
  }
  for (size_t i = 0; i < bytes.size(); ++i)
    inputs.push_back({bytes[i].bytes.data(), dtype, inputShapes[i], {}});
  Expected<ref::Tensor> expected = interpretReference(staticSource, reference);
  if (!expected) {
    error = expected.error();
    return 0;
  }
  npy::Array out = poisonedOutput(outShape, dtype);
  if (Status status = kernel->run(inputs, {out.bytes.data(), dtype, outShape, {}}); !status) {
    error = status.message();
    return 0;
  }
  return maxRelativeError(npy::toFloat32(out), *expected);
}

/// pe.relative_key of Q [b, h, sq, d] (type dims `qType`) and a table of
/// `tableShape` into [b, h, sq, skv].
std::string keySource(const std::vector<int64_t> &qType, const std::vector<int64_t> &tableShape,
                      int64_t skv, int64_t clip, const std::string &t) {
  std::string q = tensorText(qType, t), table = tensorText(tableShape, t);
  std::string out = tensorText({qType[0], qType[1], qType[2], skv}, t);
  return "func.func @key(%q: " + q + ", %t: " + table + ") -> " + out +
         " {\n  %r = pe.relative_key %q, %t <clip = " + std::to_string(clip) + "> : " + q + ", " +
         table + " -> " + out + "\n  return %r : " + out + "\n}\n";
}

std::string valueSource(const std::vector<int64_t> &tableShape, const std::vector<int64_t> &outType,
                        int64_t clip, const std::string &t) {
  std::string table = tensorText(tableShape, t), out = tensorText(outType, t);
  return "func.func @value(%t: " + table + ") -> " + out +
         " {\n  %r = pe.relative_value %t <clip = " + std::to_string(clip) + "> : " + table +
         " -> " + out + "\n  return %r : " + out + "\n}\n";
}

TEST(MaterializedShaw, KeyTermSharedAndPerHeadTables) {
  // sq < skv, sq > skv (offsets both ways) and a d that is not 8's multiple
  // of lanes in the key loop (skv 21: a scalar tail).
  struct Case {
    int64_t b, h, sq, skv, d, clip;
    bool perHead;
  };
  for (Case c : {Case{2, 3, 13, 21, 16, 4, false}, Case{1, 4, 30, 7, 64, 2, true},
                 Case{1, 2, 1, 40, 32, 8, false}}) {
    SCOPED_TRACE(std::to_string(c.sq) + "x" + std::to_string(c.skv) +
                 (c.perHead ? " per head" : " shared"));
    std::vector<int64_t> table = {2 * c.clip + 1, c.d};
    if (c.perHead)
      table.insert(table.begin(), c.h);
    std::string source = keySource({c.b, c.h, c.sq, c.d}, table, c.skv, c.clip, "f32");
    std::string error;
    double rel = runTerm(source, source, {{c.b, c.h, c.sq, c.d}, table}, {c.b, c.h, c.sq, c.skv},
                         DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-5);
  }
}

TEST(MaterializedShaw, KeyTermShapeClassAndSixteenBit) {
  // `?` b and sq: the query's; skv static. One compile for three shapes.
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  std::string source = keySource({-1, 2, -1, 32}, {11, 32}, 50, 5, "f32");
  for (auto [b, sq] : {std::pair<int64_t, int64_t>{1, 1}, {2, 50}, {3, 77}}) {
    SCOPED_TRACE(std::to_string(b) + " x " + std::to_string(sq));
    std::string error;
    double rel = runTerm(source, keySource({b, 2, sq, 32}, {11, 32}, 50, 5, "f32"),
                         {{b, 2, sq, 32}, {11, 32}}, {b, 2, sq, 50}, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-5);
  }
  EXPECT_LE(suiteRuntime().stats().compiles - compilesBefore, 1);
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(elementName(dtype));
    std::string s = keySource({1, 4, 20, 64}, {4, 9, 64}, 20, 4, elementName(dtype));
    std::string error;
    double rel = runTerm(s, s, {{1, 4, 20, 64}, {4, 9, 64}}, {1, 4, 20, 20}, dtype, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-2);
  }
}

TEST(MaterializedShaw, ValueTermSharedAndPerHeadTables) {
  // dv 12 (a scalar tail after 8 lanes), 16, 128; sq < skv and sq > skv.
  for (DType dtype : {DType::F32, DType::F16, DType::BF16})
    for (auto [sq, skv, dv, clip] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{13, 21, 12, 4},
                                     {40, 9, 16, 3},
                                     {5, 5, 128, 16}}) {
      std::string t = elementName(dtype);
      SCOPED_TRACE(t + " " + std::to_string(sq) + "x" + std::to_string(skv) + " dv " +
                   std::to_string(dv));
      double tolerance = dtype == DType::F32 ? 1e-6 : 1e-2;
      std::string error;
      std::string shared = valueSource({2 * clip + 1, dv}, {sq, skv, dv}, clip, t);
      double rel = runTerm(shared, shared, {{2 * clip + 1, dv}}, {sq, skv, dv}, dtype, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, tolerance);
      std::string perHead = valueSource({3, 2 * clip + 1, dv}, {3, sq, skv, dv}, clip, t);
      rel = runTerm(perHead, perHead, {{3, 2 * clip + 1, dv}}, {3, sq, skv, dv}, dtype, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, tolerance);
    }
}

TEST(MaterializedShaw, ValueTermLengthsFromTheOutput) {
  std::string source = valueSource({9, 16}, {-1, -1, 16}, 4, "f32");
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 30}, {17, 17}, {64, 3}}) {
    SCOPED_TRACE(std::to_string(sq) + " x " + std::to_string(skv));
    std::string error;
    double rel = runTerm(source, valueSource({9, 16}, {sq, skv, 16}, 4, "f32"), {{9, 16}},
                         {sq, skv, 16}, DType::F32, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-6);
  }
}

TEST(MaterializedShaw, BadViewsAreErrorsThatNameThem) {
  Expected<X86Kernel> kernel = suiteKernel(keySource({1, 2, 8, 16}, {9, 16}, 8, 4, "f32"));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(1 * 2 * 8 * 16, 1.0f), table(9 * 16, 1.0f), out(2 * 8 * 8, -7.0f);
  // A query of the wrong head dim.
  Status status = kernel->run(
      {{q.data(), DType::F32, {1, 2, 8, 8}, {}}, {table.data(), DType::F32, {9, 16}, {}}},
      {out.data(), DType::F32, {1, 2, 8, 8}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("query"), std::string::npos) << status.message();
  // An output of the wrong key length.
  status = kernel->run(
      {{q.data(), DType::F32, {1, 2, 8, 16}, {}}, {table.data(), DType::F32, {9, 16}, {}}},
      {out.data(), DType::F32, {1, 2, 8, 7}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("output"), std::string::npos) << status.message();
  for (float v : out)
    ASSERT_EQ(v, -7.0f);
}

} // namespace
