// The backward of a standalone pe.rope (docs/backward.md, "Standalone
// kernels"): Runtime::getX86Backward of the forward derives pe.rope adjoint
// and compiles it as a standalone kernel, dx = R(theta)^T dy. Checked two
// ways, on fresh random dy, x and ids with the output poisoned:
//  - elementwise against the float64 interpreter on the derived source
//    (ref::applyRopeBackward): f32 max |dx - ref| <= 1e-4 max |ref|, 16-bit
//    1e-2 against the reference on the rounded inputs;
//  - the adjoint identity against the forward's own float64 reference,
//    independent of the backward's code: sum(y_ref . dy) = sum(x . dx),
//    y_ref = pe.rope(x) in float64, to 1e-5 of sum |y_ref . dy|.
// Every scaling (dynamic_ntk and longrope at lengths on both sides of their
// switch), layouts, partial rotary, M-RoPE, per-row ids, a runtime scale;
// one compile serves every length of a `?` class; in place.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

struct Derived {
  std::string source;
  X86Kernel kernel;
};

/// The backward of `forward`, its source and its kernel.
std::optional<Derived> backwardOf(const std::string &forward, std::string &error) {
  Expected<Spec> spec = Spec::fromText(forward);
  if (!spec) {
    error = spec.error();
    return std::nullopt;
  }
  Expected<Spec> derived = Spec::backwardOf(*spec);
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*spec);
  if (!derived || !kernel) {
    error = derived ? kernel.error() : derived.error();
    return std::nullopt;
  }
  return Derived{derived->source(), *kernel};
}

TEST(StandaloneRopeBackward, EveryScalingMatchesTheReferenceAtEveryLengthWithOneCompile) {
  for (const RopeCase &c : ropeScalingCases()) {
    SCOPED_TRACE(c.name);
    std::string x = "?x4x?x" + std::to_string(c.headDim) + "xf32";
    std::string error;
    int64_t compilesBefore = suiteRuntime().stats().compiles;
    std::optional<Derived> backward = backwardOf(ropeSource(c.rope, x, "?xi64"), error);
    ASSERT_TRUE(backward) << error;
    for (int64_t s : {1, 7, 64, 65, 300}) {
      SCOPED_TRACE("s = " + std::to_string(s));
      double rel =
          runAndCompare(backward->kernel, backward->source, {s == 1 ? 3 : 1, 4, s, c.headDim}, {s},
                        DType::F32, c.maxPosition, false, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-4);
    }
    EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
  }
}

TEST(StandaloneRopeBackward, PerRowAndMropeIdsSixteenBitAndInPlace) {
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
      {"axial",
       "layout = half, theta = 100.0, axial = true",
       "1x2x40x64xf32",
       "2x40xi64",
       {1, 2, 40, 64},
       {2, 40},
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
  };
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    std::string error;
    std::optional<Derived> backward = backwardOf(ropeSource(f.rope, f.x, f.ids), error);
    ASSERT_TRUE(backward) << error;
    double rel = runAndCompare(backward->kernel, backward->source, f.shape, f.idsShape, f.dtype,
                               9000, f.inPlace, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, f.dtype == DType::F32 ? 1e-4 : 1e-2);
  }
}

// <R x, dy> = <x, R^T dy>: the kernel's dx against the forward's float64
// reference, with a runtime position scale ([1] and per batch row [b]).
TEST(StandaloneRopeBackward, AdjointIdentityHoldsAgainstTheForwardsReference) {
  struct Form {
    std::string name, rope;
    std::vector<int64_t> idsShape;
    std::vector<float> scale; // empty: no runtime scale
  };
  const Form forms[] = {
      {"plain", "layout = half, theta = 10000.0", {48}, {}},
      {"yarn",
       "layout = interleaved, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, "
       "original_max_position = 64>",
       {48},
       {}},
      {"scale [1]", "layout = half, theta = 10000.0, runtime_scale = true", {48}, {0.75f}},
      {"scale [b]", "layout = half, theta = 10000.0, runtime_scale = true", {2, 48}, {1.5f, 0.3f}},
  };
  std::mt19937 &engine = rng(nullptr);
  const std::vector<int64_t> shape = {2, 3, 48, 64};
  for (const Form &f : forms) {
    SCOPED_TRACE(f.name);
    std::string scaleType = f.scale.empty() ? "" : std::to_string(f.scale.size()) + "xf32";
    std::string forward = ropeSource(f.rope, "2x3x48x64xf32",
                                     f.idsShape.size() == 1 ? "48xi64" : "2x48xi64", scaleType);
    std::string error;
    std::optional<Derived> backward = backwardOf(forward, error);
    ASSERT_TRUE(backward) << error;
    ref::Tensor x = randomTensor(shape, engine), dy = randomTensor(shape, engine);
    std::vector<int64_t> ids(f.idsShape.size() == 1 ? 48 : 96);
    std::uniform_int_distribution<int64_t> position(0, 3000);
    for (int64_t &p : ids)
      p = position(engine);
    std::vector<ReferenceArgument> referenceInputs = {x, ref::PositionIds(f.idsShape, ids)};
    if (!f.scale.empty())
      referenceInputs.push_back(ref::Tensor({static_cast<int64_t>(f.scale.size())},
                                            std::vector<double>(f.scale.begin(), f.scale.end())));
    Expected<ref::Tensor> y = interpretReference(forward, referenceInputs);
    ASSERT_TRUE(y) << y.error();
    std::vector<float> dyFloats = toFloat(dy);
    std::vector<float> dx(dy.data.size(), std::numeric_limits<float>::quiet_NaN());
    std::vector<TensorView> inputs = {{dyFloats.data(), DType::F32, shape, {}},
                                      {ids.data(), DType::I64, f.idsShape, {}}};
    std::vector<float> scale = f.scale;
    if (!scale.empty())
      inputs.push_back({scale.data(), DType::F32, {static_cast<int64_t>(scale.size())}, {}});
    Status status = backward->kernel.run(inputs, {dx.data(), DType::F32, shape, {}});
    ASSERT_TRUE(status) << status.message();
    double forwardSide = 0, backwardSide = 0, magnitude = 0;
    for (size_t e = 0; e < dx.size(); ++e) {
      forwardSide += y->data[e] * double(dyFloats[e]);
      magnitude += std::fabs(y->data[e] * double(dyFloats[e]));
      backwardSide += x.data[e] * double(dx[e]);
    }
    EXPECT_LE(std::fabs(forwardSide - backwardSide), 1e-5 * magnitude)
        << "<R x, dy> = " << forwardSide << ", <x, R^T dy> = " << backwardSide;
  }
}

TEST(StandaloneRopeBackward, AdditiveEmbeddingsAloneHaveNoBackwardKernelAndSaySo) {
  std::string source =
      "func.func @e(%x: tensor<?x?x64xf32>, %p: tensor<?xi64>) -> tensor<?x?x64xf32> {\n"
      "  %e = pe.sinusoidal %x, %p <base = 10000.0> : tensor<?x?x64xf32>, tensor<?xi64>\n"
      "  return %e : tensor<?x?x64xf32>\n}\n";
  Expected<Spec> spec = Spec::fromText(source);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*spec);
  ASSERT_FALSE(kernel);
  EXPECT_NE(kernel.error().find("their input gradient is the output gradient"), std::string::npos)
      << kernel.error();
}

} // namespace

namespace {

// pe.rope_scale_grad: the runtime position scale's gradient of a standalone
// pe.rope, against the float64 reference (ref::applyRopeBackward's, checked
// by finite differences in tests/unit/AttentionGradTest.cpp). The sum
// cancels (terms pos * inv_freq * g y), so |got - want| is bounded by 1e-5
// of the terms' magnitude, as for the fused backward's scale gradient
// (BackwardRopeScale). Shared [1] and per-row [b] scales, half and
// interleaved layouts, f32 and bf16, a `?` class at three lengths with one
// compile.
struct ScaleGradCase {
  std::string name, layout;
  std::vector<float> scale;
  DType dtype;
};

std::string scaleGradSource(const ScaleGradCase &c, int64_t batch, const std::string &ids) {
  std::string x = tensorText({batch, 3, -1, 64}, elementName(c.dtype)),
              s = tensorText({static_cast<int64_t>(c.scale.size())}, "f32");
  return "func.func @sg(%dy: " + x + ", %x: " + x + ", %pos: " + ids + ", %s: " + s + ") -> " + s +
         " {\n  %g = pe.rope_scale_grad %dy, %x, %pos scale(%s : " + s + ") <layout = " + c.layout +
         ", theta = 10000.0, runtime_scale = true> : " + x + ", " + ids + " -> " + s +
         "\n  return %g : " + s + "\n}\n";
}

TEST(StandaloneRopeBackward, PositionScaleGradientMatchesTheReference) {
  const ScaleGradCase cases[] = {
      {"[1], half, f32", "half", {0.75f}, DType::F32},
      {"[b], interleaved, f32", "interleaved", {1.5f, 0.4f}, DType::F32},
      {"[1], half, bf16", "half", {1.25f}, DType::BF16},
  };
  std::mt19937 &engine = rng(nullptr);
  const int64_t batch = 2;
  for (const ScaleGradCase &c : cases) {
    SCOPED_TRACE(c.name);
    bool perRow = c.scale.size() > 1;
    std::string source = scaleGradSource(c, batch, perRow ? "tensor<2x?xi64>" : "tensor<?xi64>");
    int64_t compilesBefore = suiteRuntime().stats().compiles;
    for (int64_t s : {1, 37, 300}) {
      SCOPED_TRACE("s = " + std::to_string(s));
      Expected<X86Kernel> kernel = suiteKernel(source);
      ASSERT_TRUE(kernel) << kernel.error();
      std::vector<int64_t> shape = {batch, 3, s, 64};
      auto [dyBytes, dy] = randomInput(shape, c.dtype);
      auto [xBytes, x] = randomInput(shape, c.dtype);
      std::vector<int64_t> idsShape =
          perRow ? std::vector<int64_t>{batch, s} : std::vector<int64_t>{s};
      std::vector<int64_t> ids(perRow ? batch * s : s);
      std::uniform_int_distribution<int64_t> position(0, 2000);
      for (int64_t &p : ids)
        p = position(engine);
      ref::Tensor scale({static_cast<int64_t>(c.scale.size())},
                        std::vector<double>(c.scale.begin(), c.scale.end()));
      Expected<ref::Tensor> want =
          interpretReference(source, {dy, x, ref::PositionIds(idsShape, ids), scale});
      ASSERT_TRUE(want) << want.error();
      std::vector<float> scaleCopy = c.scale;
      std::vector<float> got(c.scale.size(), std::numeric_limits<float>::quiet_NaN());
      Status status =
          kernel->run({{dyBytes.bytes.data(), c.dtype, shape, {}},
                       {xBytes.bytes.data(), c.dtype, shape, {}},
                       {ids.data(), DType::I64, idsShape, {}},
                       {scaleCopy.data(), DType::F32, {static_cast<int64_t>(c.scale.size())}, {}}},
                      {got.data(), DType::F32, {static_cast<int64_t>(got.size())}, {}});
      ASSERT_TRUE(status) << status.message();
      // The terms' magnitude: sum of |pos s inv_freq| (|g_b y_a| + |g_a y_b|)
      // over y = R x, bounded here by |pos inv_freq| |g| |x| per pair (|y|
      // <= |x| pair by pair); 1e-5 of it.
      double magnitude[2] = {0, 0};
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t h = 0; h < 3; ++h)
          for (int64_t i = 0; i < s; ++i) {
            double pos = static_cast<double>(ids[perRow ? b * s + i : i]);
            for (int64_t k = 0; k < 32; ++k) {
              double invFreq = std::pow(10000.0, -2.0 * k / 64);
              double g2 = 0, x2 = 0;
              for (int64_t e :
                   {c.layout == "half" ? k : 2 * k, c.layout == "half" ? k + 32 : 2 * k + 1}) {
                g2 += dy.at(b, h, i, e) * dy.at(b, h, i, e);
                x2 += x.at(b, h, i, e) * x.at(b, h, i, e);
              }
              magnitude[perRow ? b : 0] += std::fabs(pos * invFreq) * 2 * std::sqrt(g2 * x2);
            }
          }
      for (size_t n = 0; n < got.size(); ++n)
        EXPECT_LE(std::fabs(got[n] - want->data[n]), 1e-5 * magnitude[n] + 1e-10)
            << "d scale[" << n << "]: got " << got[n] << ", want " << want->data[n]
            << ", terms' magnitude " << magnitude[n];
    }
    EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);
  }
}

} // namespace
