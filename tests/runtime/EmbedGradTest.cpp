// pe.embed_grad kernels (docs/backward.md, "Standalone kernels"): a token
// table's and a learned position table's gradient, rows of dy summed by id.
// Fresh random dy and ids drawn from a small range (every id repeats), the
// output poisoned with NaN; checked against the float64 interpreter on the
// same source (ref::embeddingGradient) at max |out - ref| <= 1e-4 max |ref|
// for an f32 table's gradient whatever dy's type (16-bit dy is read exactly
// and summed in f32), 1e-2 for a bf16 table's (rounded once). Ids [b, s]
// and [s]; a `?` class at lengths 1, 7 and 300 with one compile; bitwise
// identical at 1 and 2 threads; inputs and output against inaccessible
// pages; a bad id is an error naming it, with the output untouched.
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>

using namespace pejit;
using namespace pejit::testing;

namespace {

std::string gradSource(const std::string &grad, const std::string &ids, int64_t rows, int64_t d,
                       double scale, const std::string &outType = "f32") {
  std::string out =
      "tensor<" + std::to_string(rows) + "x" + std::to_string(d) + "x" + outType + ">";
  return "func.func @table_grad(%dy: " + grad + ", %ids: " + ids + ") -> " + out +
         " {\n  %g = pe.embed_grad %dy, %ids {scale = " + std::to_string(scale) +
         " : f64} : " + grad + ", " + ids + " -> " + out + "\n  return %g : " + out + "\n}\n";
}

struct Drawn {
  npy::Array dy;
  ref::Tensor dyRef;
  std::vector<int64_t> ids;
};

Drawn draw(const std::vector<int64_t> &shape, const std::vector<int64_t> &idsShape, int64_t range,
           DType dtype) {
  auto [bytes, x] = randomInput(shape, dtype);
  int64_t count = 1;
  for (int64_t extent : idsShape)
    count *= extent;
  std::uniform_int_distribution<int64_t> id(0, range - 1);
  std::vector<int64_t> ids(count);
  for (int64_t &v : ids)
    v = id(rng(nullptr));
  return {std::move(bytes), std::move(x), std::move(ids)};
}

/// max |kernel - ref| / max |ref| for one call; `error` set on a failure.
double runOnce(const X86Kernel &kernel, const std::string &source, const Drawn &in,
               const std::vector<int64_t> &shape, const std::vector<int64_t> &idsShape, DType dtype,
               int64_t rows, std::vector<float> &out, std::string &error,
               DType outDtype = DType::F32) {
  Expected<ref::Tensor> expected =
      interpretReference(source, {in.dyRef, ref::PositionIds(idsShape, in.ids)});
  if (!expected) {
    error = expected.error();
    return 0;
  }
  npy::Array poisoned = poisonedOutput({rows, shape[2]}, outDtype);
  Status status = kernel.run({{const_cast<uint8_t *>(in.dy.bytes.data()), dtype, shape, {}},
                              {const_cast<int64_t *>(in.ids.data()), DType::I64, idsShape, {}}},
                             {poisoned.bytes.data(), outDtype, {rows, shape[2]}, {}});
  if (!status) {
    error = status.message();
    return 0;
  }
  out = npy::toFloat32(poisoned);
  return maxRelativeError(out, *expected);
}

TEST(EmbedGrad, TokenAndPositionTablesEveryDtypeMatchTheReference) {
  struct Form {
    std::string name;
    std::vector<int64_t> shape, idsShape;
    int64_t rows, range;
    DType dtype;
    double scale;
    bool sameTypeOut = false; // the gradient in dy's type, not f32
  };
  const Form forms[] = {
      {"token table, [b, s] ids, scaled", {3, 40, 64}, {3, 40}, 1000, 50, DType::F32, 27.7128},
      {"position table, [s] ids", {4, 33, 128}, {33}, 512, 20, DType::F32, 1.0},
      {"bf16 rows", {2, 70, 64}, {2, 70}, 300, 10, DType::BF16, 1.0},
      {"f16 rows, wide", {2, 16, 768}, {16}, 64, 5, DType::F16, 0.5},
      // A 16-bit table's gradient in its own type: rounded once (2^-8).
      {"bf16 rows into a bf16 table", {2, 70, 64}, {2, 70}, 300, 10, DType::BF16, 1.0, true},
      // A large table (past the 2^22 elements where other kernels stream).
      {"large token table", {2, 64, 256}, {2, 64}, 20000, 20000, DType::F32, 1.0},
  };
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    DType outDtype = f.sameTypeOut ? f.dtype : DType::F32;
    std::string source =
        gradSource(tensorText(f.shape, elementName(f.dtype)), tensorText(f.idsShape, "i64"), f.rows,
                   f.shape[2], f.scale, elementName(outDtype));
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    Drawn in = draw(f.shape, f.idsShape, f.range, f.dtype);
    std::vector<float> out;
    std::string error;
    double rel =
        runOnce(*kernel, source, in, f.shape, f.idsShape, f.dtype, f.rows, out, error, outDtype);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, outDtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

TEST(EmbedGrad, OneKernelServesEveryLength) {
  std::string source = gradSource("tensor<?x?x64xf32>", "tensor<?xi64>", 400, 64, 1.0);
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (int64_t s : {1, 7, 300}) {
    SCOPED_TRACE("s = " + std::to_string(s));
    Expected<X86Kernel> kernel = suiteKernel(source);
    ASSERT_TRUE(kernel) << kernel.error();
    Drawn in = draw({2, s, 64}, {s}, 400, DType::F32);
    std::vector<float> out;
    std::string error;
    double rel = runOnce(*kernel, source, in, {2, s, 64}, {s}, DType::F32, 400, out, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
}

TEST(EmbedGrad, BitwiseIdenticalAcrossThreadCountsAndWithinGuardPages) {
  const std::vector<int64_t> shape = {4, 500, 128}, idsShape = {4, 500};
  const int64_t rows = 2000;
  std::string source =
      gradSource(tensorText(shape, "f32"), tensorText(idsShape, "i64"), rows, 128, 1.0);
  Drawn in = draw(shape, idsShape, 100, DType::F32); // ~20 entries per reached row
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    Expected<Spec> spec = Spec::fromText(source);
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = runtime.getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    // Each buffer ends against an inaccessible page; the inputs read-only.
    GuardedBuffer dy(in.dy.bytes.size()), ids(in.ids.size() * 8), out(rows * 128 * 4);
    std::memcpy(dy.data(), in.dy.bytes.data(), dy.bytes());
    std::memcpy(ids.data(), in.ids.data(), ids.bytes());
    dy.protectReadOnly();
    ids.protectReadOnly();
    Status status =
        kernel->run({{dy.data(), DType::F32, shape, {}}, {ids.data(), DType::I64, idsShape, {}}},
                    {out.data(), DType::F32, {rows, 128}, {}});
    ASSERT_TRUE(status) << status.message();
    outs.emplace_back(out.as<float>(), out.as<float>() + rows * 128);
  }
  for (size_t r = 1; r < outs.size(); ++r)
    EXPECT_EQ(std::memcmp(outs[r].data(), outs[0].data(), outs[0].size() * 4), 0) << "run " << r;
}

TEST(EmbedGrad, AnIdOutsideTheTableIsAnErrorAndTheOutputIsUntouched) {
  std::string source = gradSource("tensor<?x?x32xf32>", "tensor<?x?xi32>", 16, 32, 1.0);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> dy(2 * 5 * 32, 1.0f), out(16 * 32, 7.0f);
  std::vector<int32_t> ids = {0, 1, 2, 3, 4, 5, 6, 16, 8, 9};
  Status status =
      kernel->run({{dy.data(), DType::F32, {2, 5, 32}, {}}, {ids.data(), DType::I32, {2, 5}, {}}},
                  {out.data(), DType::F32, {16, 32}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("id 16 at [1, 2] is outside the table's 16 rows"),
            std::string::npos)
      << status.message();
  for (float v : out)
    ASSERT_EQ(v, 7.0f);
}

} // namespace
