// Standalone pe.rope kernels (docs/standalone-kernels.md): a tensor
// rotated on its own, checked against the float64 interpreter on the same
// source (fresh random inputs and ids each run, the output poisoned with
// NaN; f32: max |out - ref| <= 1e-4 max |ref|, f16/bf16 1e-2 against the
// reference on the rounded inputs). Every scaling, interleaved and partial
// rotary dims, M-RoPE ids, per-row ids; one kernel of a `?` class run at
// s in {1, 7, 64, 65, 300} compiles once. In place, into a strided view of
// a KV cache (KV-append), and KV-append + decode over the pre-rotated
// cache equal to attention that rotates Q and K itself. Bad inputs get
// errors naming them.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

TEST(StandaloneRope, EveryScalingMatchesTheReferenceAtEveryLengthWithOneCompile) {
  for (const RopeCase &c : ropeScalingCases()) {
    SCOPED_TRACE(c.name);
    std::string x = "?x4x?x" + std::to_string(c.headDim) + "xf32";
    std::string source = ropeSource(c.rope, x, "?xi64");
    Expected<Spec> spec = Spec::fromText(source);
    ASSERT_TRUE(spec) << spec.error();
    int64_t compilesBefore = suiteRuntime().stats().compiles;
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    for (int64_t s : {1, 7, 64, 65, 300}) {
      SCOPED_TRACE("s = " + std::to_string(s));
      Expected<X86Kernel> again = suiteRuntime().getX86(*spec);
      ASSERT_TRUE(again) << again.error();
      std::string error;
      double rel = runAndCompare(*again, source, {s == 1 ? 3 : 1, 4, s, c.headDim}, {s}, DType::F32,
                                 c.maxPosition, false, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-4);
    }
    EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
  }
}

// Angles past 2^31 pi/2 (~3.4e9 rad): their quadrant count k no longer
// fits an i32. Positions up to 2^31 - 1 with inverse frequencies up to 4
// (#pe.linear<factor = 0.25>) or 32 (factor = 1/32, the limit) reach 8.6e9
// and 6.9e10 rad; docs/limits.md promises them up to 2^36. Both the f32
// table (d = 128) and the float64 one (d = 8, one vector of frequencies).
TEST(StandaloneRope, AnglesPastTwoToTheThirtyOneQuadrantsMatchTheReference) {
  for (const char *factor : {"0.25", "0.03125"})
    for (int64_t d : {128, 8}) {
      SCOPED_TRACE(std::string("factor ") + factor + ", d = " + std::to_string(d));
      std::string x = "1x2x?x" + std::to_string(d) + "xf32";
      std::string source =
          ropeSource(std::string("layout = half, theta = 10000.0, scaling = #pe.linear<factor = ") +
                         factor + ">",
                     x, "?xi64");
      Expected<X86Kernel> kernel = suiteKernel(source);
      ASSERT_TRUE(kernel) << kernel.error();
      std::string error;
      double rel = runAndCompare(*kernel, source, {1, 2, 300, d}, {300}, DType::F32,
                                 (int64_t(1) << 31) - 1, false, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-4);
    }
}

TEST(StandaloneRope, PerRowAndMropeIdsSixteenBitAndInPlace) {
  struct Form {
    std::string name, rope, x, ids;
    std::vector<int64_t> shape, idsShape;
    DType dtype;
    bool inPlace;
  };
  const Form forms[] = {
      {"per-row ids",
       "layout = half, theta = 10000.0",
       "2x4x33x64xf32",
       "2x33xi32",
       {2, 4, 33, 64},
       {2, 33},
       DType::F32,
       false},
      {"mrope",
       "layout = half, theta = 10000.0, sections = [8, 12, 12]",
       "1x4x40x64xf32",
       "3x40xi64",
       {1, 4, 40, 64},
       {3, 40},
       DType::F32,
       false},
      {"f16",
       "layout = half, theta = 10000.0",
       "1x4x?x128xf16",
       "?xi64",
       {1, 4, 50, 128},
       {50},
       DType::F16,
       false},
      {"bf16 interleaved",
       "layout = interleaved, theta = 10000.0",
       "1x4x?x64xbf16",
       "?xi64",
       {1, 4, 70, 64},
       {70},
       DType::BF16,
       false},
      {"in place",
       "layout = half, theta = 10000.0",
       "1x8x?x128xf32",
       "?xi64",
       {1, 8, 300, 128},
       {300},
       DType::F32,
       true},
      // Over 2^22 elements (kX86StreamMinElements): out of place, the
      // stores are non-temporal; in place they stay plain.
      {"large, out of place (non-temporal stores)",
       "layout = half, theta = 500000.0",
       "1x4x?x128xf32",
       "?xi64",
       {1, 4, 8200, 128},
       {8200},
       DType::F32,
       false},
      {"large bf16, out of place (non-temporal stores)",
       "layout = half, theta = 500000.0",
       "1x4x?x128xbf16",
       "?xi64",
       {1, 4, 8200, 128},
       {8200},
       DType::BF16,
       false},
      {"large, in place",
       "layout = half, theta = 500000.0",
       "1x4x?x128xf32",
       "?xi64",
       {1, 4, 8200, 128},
       {8200},
       DType::F32,
       true},
  };
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    std::string source = ropeSource(f.rope, f.x, f.ids);
    Expected<Spec> spec = Spec::fromText(source);
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::string error;
    double rel =
        runAndCompare(*kernel, source, f.shape, f.idsShape, f.dtype, 9000, f.inPlace, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, f.dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

// bf16 results are narrowed by the template's own rounding
// (x86NarrowBody): at position 0 (cos 1, sin 0) a finite pair comes out
// bit for bit, and a pair holding a NaN comes out NaN in both lanes (the
// NaN times sin 0 reaches its partner), never inf or a number.
TEST(StandaloneRope, Bf16NaNsStayNaNAndPositionZeroIsExact) {
  const int64_t s = 40, d = 64, half = d / 2;
  std::vector<int64_t> shape = {1, 2, s, d};
  std::string source = ropeSource("layout = half, theta = 10000.0", "1x2x?x64xbf16", "?xi64");
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  auto [bytes, unused] = randomInput(shape, DType::BF16);
  auto *x = reinterpret_cast<uint16_t *>(bytes.bytes.data());
  const uint16_t nans[] = {0x7fc0, 0xffff, 0x7f81, 0xff80 | 0x1};
  std::mt19937 &engine = rng(nullptr);
  std::uniform_int_distribution<int64_t> element(0, 2 * s * d - 1);
  for (int n = 0; n < 24; ++n)
    x[element(engine)] = nans[n % 4];
  std::vector<int64_t> ids(s, 0);
  npy::Array out = poisonedOutput(shape, DType::BF16);
  Status status = kernel->run({{x, DType::BF16, shape, {}}, {ids.data(), DType::I64, {s}, {}}},
                              {out.bytes.data(), DType::BF16, shape, {}});
  ASSERT_TRUE(status) << status.message();
  auto *o = reinterpret_cast<const uint16_t *>(out.bytes.data());
  auto isNan = [](uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; };
  int nanPairs = 0;
  for (int64_t row = 0; row < 2 * s; ++row)
    for (int64_t c = 0; c < half; ++c) {
      int64_t a = row * d + c, b = a + half;
      if (isNan(x[a]) || isNan(x[b])) {
        ++nanPairs;
        EXPECT_TRUE(isNan(o[a]) && isNan(o[b]))
            << "row " << row << " channel " << c << ": " << o[a] << ", " << o[b];
      } else {
        EXPECT_EQ(o[a], x[a]) << "row " << row << " channel " << c;
        EXPECT_EQ(o[b], x[b]) << "row " << row << " channel " << c + half;
      }
    }
  EXPECT_GT(nanPairs, 0);
}

TEST(StandaloneRope, BadInputsAreErrorsThatNameThem) {
  std::string source = ropeSource("layout = half, theta = 10000.0", "1x2x?x64xf32", "?xi64");
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*Spec::fromText(source));
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(),
            (std::vector<std::string>{"transform_input", "transform_positions"}));
  std::vector<float> x(2 * 8 * 64, 1.0f), out(2 * 8 * 64);
  std::vector<int64_t> ids(8, 0);
  TensorView xv{x.data(), DType::F32, {1, 2, 8, 64}, {}},
      ov{out.data(), DType::F32, {1, 2, 8, 64}, {}};
  // The ids are required: a tensor alone has no default positions.
  Status missing = kernel->run({xv}, ov);
  EXPECT_NE(missing.message().find("expected 2 inputs"), std::string::npos) << missing.message();
  Status shortIds = kernel->run({xv, {ids.data(), DType::I64, {7}, {}}}, ov);
  EXPECT_NE(shortIds.message().find("input 1 (transform_positions)"), std::string::npos)
      << shortIds.message();
  ids[5] = int64_t(1) << 40;
  Status farId = kernel->run({xv, {ids.data(), DType::I64, {8}, {}}}, ov);
  EXPECT_NE(farId.message().find("[5]"), std::string::npos) << farId.message();
  ids[5] = 0;
  Status wrongOut = kernel->run({xv, {ids.data(), DType::I64, {8}, {}}},
                                {out.data(), DType::F32, {1, 2, 7, 64}, {}});
  EXPECT_NE(wrongOut.message().find("output"), std::string::npos) << wrongOut.message();
  // A materialized term does not chain with a transform: an error that
  // names the op.
  Expected<X86Kernel> shaw = suiteRuntime().getX86(*Spec::fromText(
      "func.func @f(%x: tensor<1x2x8x16xf32>, %p: tensor<8xi64>, %t: tensor<9x16xf32>)"
      " -> tensor<1x2x8x8xf32> {\n"
      "  %r = pe.rope %x, %p <layout = half, theta = 10000.0> : tensor<1x2x8x16xf32>, "
      "tensor<8xi64>\n"
      "  %b = pe.relative_key %r, %t <clip = 4> : tensor<1x2x8x16xf32>, tensor<9x16xf32> -> "
      "tensor<1x2x8x8xf32>\n  return %b : tensor<1x2x8x8xf32>\n}\n"));
  ASSERT_FALSE(shaw);
  EXPECT_NE(shaw.error().find("'pe.relative_key' does not chain with other pe ops"),
            std::string::npos)
      << shaw.error();
}

} // namespace
