// M-RoPE and axial RoPE on Q alone, K read as it is (a pre-rotated KV
// cache, e.g. a Qwen2-VL decode step): the kernel has no key ids argument,
// so the key side takes the default positions on every axis; the output
// matches the float64 interpreter. Fresh random inputs and ids, output
// poisoned with NaN; f32 tolerance max |out - ref| <= 1e-4 max |ref|.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

void expectQueryOnlyRopeMatches(const std::string &ropeAttr, int64_t axes, int64_t sq, int64_t skv,
                                bool causal) {
  std::string q = "tensor<1x4x" + std::to_string(sq) + "x64xf32>";
  std::string kv = "tensor<1x4x" + std::to_string(skv) + "x64xf32>";
  std::string ids = "tensor<" + std::to_string(axes) + "x" + std::to_string(sq) + "xi64>";
  std::string source = "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv + ", %p: " + ids +
                       ") -> " + q + " {\n  %qr = pe.rope %q, %p <" + ropeAttr + "> : " + q + ", " +
                       ids + "\n  %o = attn.attention %qr, %k, %v " + (causal ? "causal " : "") +
                       ": " + q + ", " + kv + ", " + kv + " -> " + q + "\n  return %o : " + q +
                       "\n}\n";
  SCOPED_TRACE(source);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor tq = randomTensor({1, 4, sq, 64}, engine), tk = randomTensor({1, 4, skv, 64}, engine),
              tv = randomTensor({1, 4, skv, 64}, engine);
  std::uniform_int_distribution<int64_t> position(0, 5000);
  std::vector<int64_t> positions(axes * sq);
  for (int64_t &p : positions)
    p = position(engine);
  std::vector<float> fq = toFloat(tq), fk = toFloat(tk), fv = toFloat(tv);
  Expected<ref::Tensor> expected =
      interpretReference(source, {tq, tk, tv, ref::PositionIds({axes, sq}, positions)});
  ASSERT_TRUE(expected) << expected.error();
  std::vector<float> out(expected->data.size(), std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run({{fq.data(), DType::F32, tq.shape, {}},
                               {fk.data(), DType::F32, tk.shape, {}},
                               {fv.data(), DType::F32, tv.shape, {}},
                               {positions.data(), DType::I64, {axes, sq}, {}}},
                              {out.data(), DType::F32, expected->shape, {}});
  ASSERT_TRUE(status) << status.message();
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < out.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(expected->data[n]));
    maxErr = std::max(maxErr, std::isnan(out[n]) ? std::numeric_limits<double>::infinity()
                                                 : std::fabs(out[n] - expected->data[n]));
  }
  EXPECT_LE(maxErr, 1e-4 * maxRef);
}

TEST(OneSidedRope, MropeOnTheQueryOverAPreRotatedCache) {
  const char *mrope = "layout = half, theta = 1000000.0, sections = [8, 12, 12]";
  expectQueryOnlyRopeMatches(mrope, 3, 1, 40, true);   // a decode step
  expectQueryOnlyRopeMatches(mrope, 3, 17, 100, true); // a chunk of a prefill
  expectQueryOnlyRopeMatches(mrope, 3, 9, 9, false);
}

TEST(OneSidedRope, AxialOnTheQueryOverAPreRotatedCache) {
  const char *axial = "layout = interleaved, theta = 100.0, axial = true";
  expectQueryOnlyRopeMatches(axial, 2, 1, 40, false);
  expectQueryOnlyRopeMatches(axial, 2, 30, 64, false);
}

} // namespace
