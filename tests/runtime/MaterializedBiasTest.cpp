// Materialized score biases (docs/standalone-kernels.md "Materialized
// biases"): pe.alibi (every form, head_offset, explicit slopes) and
// pe.t5_bias (both forms, its table an input) compiled on their own, the
// kernel's [b, h, sq, skv] against the float64 interpreter (the output
// poisoned; f32 1e-6 relative: the biases are exact products in f32, 16-bit
// 1e-2). `?` lengths take the output view's.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

/// Runs the source's kernel into an output of `shape` (static sources:
/// the reference sizes itself by the type) and compares.
double runBias(const std::string &source, const std::string &staticSource,
               std::vector<int64_t> shape, DType dtype, const std::vector<int64_t> &tableShape,
               std::string &error) {
  Expected<X86Kernel> kernel = suiteKernel(source);
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::vector<ReferenceArgument> reference;
  std::vector<TensorView> inputs;
  std::optional<std::pair<npy::Array, ref::Tensor>> table;
  if (!tableShape.empty()) {
    table = randomInput(tableShape, DType::F32);
    reference.push_back(table->second);
    inputs.push_back({table->first.bytes.data(), DType::F32, tableShape, {}});
  }
  Expected<ref::Tensor> expected = interpretReference(staticSource, reference);
  if (!expected) {
    error = expected.error();
    return 0;
  }
  npy::Array out = poisonedOutput(shape, dtype);
  if (Status status = kernel->run(inputs, {out.bytes.data(), dtype, shape, {}}); !status) {
    error = status.message();
    return 0;
  }
  return maxRelativeError(npy::toFloat32(out), *expected);
}

std::string alibiSource(const std::string &attr, const std::string &type) {
  return "func.func @bias() -> " + type + " {\n  %b = pe.alibi " + attr + " : " + type +
         "\n  return %b : " + type + "\n}\n";
}

TEST(MaterializedBias, AlibiEveryFormMatchesTheReference) {
  for (std::string form : {"causal", "symmetric", "bloom"})
    for (std::string extra :
         {"", ", head_offset = 2", ", slopes = [0.5, 0.25, 0.125, 0.0625, 0.03125, 1.0]"}) {
      std::string attr = "<num_heads = 6, form = " + form + extra + ">";
      int64_t heads = extra.find("head_offset") != std::string::npos ? 4 : 6;
      std::string type = "tensor<2x" + std::to_string(heads) + "x13x29xf32>";
      SCOPED_TRACE(attr);
      std::string error;
      double rel = runBias(alibiSource(attr, type), alibiSource(attr, type), {2, heads, 13, 29},
                           DType::F32, {}, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-6);
    }
}

TEST(MaterializedBias, AlibiShapeClassAndSixteenBit) {
  std::string attr = "<num_heads = 8, form = bloom>";
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 100}, {37, 37}, {64, 9}}) {
    SCOPED_TRACE(std::to_string(sq) + " x " + std::to_string(skv));
    std::string exact = "tensor<1x8x" + std::to_string(sq) + "x" + std::to_string(skv) + "xf32>";
    std::string error;
    double rel = runBias(alibiSource(attr, "tensor<1x8x?x?xf32>"), alibiSource(attr, exact),
                         {1, 8, sq, skv}, DType::F32, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-6);
  }
  EXPECT_LE(suiteRuntime().stats().compiles - compilesBefore, 1);
  for (DType dtype : {DType::F16, DType::BF16}) {
    std::string t = dtype == DType::F16 ? "f16" : "bf16";
    std::string error;
    double rel =
        runBias(alibiSource(attr, "tensor<1x8x20x20x" + t + ">"),
                alibiSource(attr, "tensor<1x8x20x20x" + t + ">"), {1, 8, 20, 20}, dtype, {}, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-2);
  }
}

TEST(MaterializedBias, T5BothFormsMatchTheReference) {
  for (std::string bidirectional : {"true", "false"}) {
    SCOPED_TRACE(bidirectional);
    std::string type = "tensor<1x4x50x70xf32>";
    std::string source = "func.func @t5(%t: tensor<32x4xf32>) -> " + type +
                         " {\n  %b = pe.t5_bias %t <num_buckets = 32, max_distance = 128, "
                         "bidirectional = " +
                         bidirectional + "> : tensor<32x4xf32> -> " + type +
                         "\n  return %b : " + type + "\n}\n";
    std::string error;
    double rel = runBias(source, source, {1, 4, 50, 70}, DType::F32, {32, 4}, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-6);
  }
}

/// T5 and ALiBi depend on the distance alone: their kernels copy one row
/// of distances per 64-row block and 512-key chunk. Shapes that cross both
/// (a partial block, a partial chunk, fewer queries than keys and more).
TEST(MaterializedBias, DistanceRowsCrossBlocksAndChunks) {
  const std::string t5 = "pe.t5_bias %t <num_buckets = 32, max_distance = 128, bidirectional = ";
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{130, 1100}, {1, 600}, {700, 65}}) {
    for (std::string op : {t5 + "true>", t5 + "false>", std::string("alibi-causal"),
                           std::string("alibi-symmetric")}) {
      SCOPED_TRACE(op + " " + std::to_string(sq) + " x " + std::to_string(skv));
      std::string type = "tensor<1x4x" + std::to_string(sq) + "x" + std::to_string(skv) + "xf32>";
      bool alibi = op.rfind("alibi", 0) == 0;
      std::string source = alibi ? alibiSource("<num_heads = 4, form = " + op.substr(6) + ">", type)
                                 : "func.func @t5(%t: tensor<32x4xf32>) -> " + type +
                                       " {\n  %b = " + op + " : tensor<32x4xf32> -> " + type +
                                       "\n  return %b : " + type + "\n}\n";
      std::string error;
      double rel = runBias(source, source, {1, 4, sq, skv}, DType::F32,
                           alibi ? std::vector<int64_t>{} : std::vector<int64_t>{32, 4}, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-6);
    }
  }
}

TEST(MaterializedBias, BadOutputsAreErrorsThatNameThem) {
  Expected<Spec> spec =
      Spec::fromText(alibiSource("<num_heads = 4, form = causal>", "tensor<1x4x?x?xf32>"));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> out(4 * 8 * 8, -7.0f);
  Status status = kernel->run({}, {out.data(), DType::F32, {1, 3, 8, 8}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("output"), std::string::npos) << status.message();
  for (float v : out)
    ASSERT_EQ(v, -7.0f);
}

} // namespace
