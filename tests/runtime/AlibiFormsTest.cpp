// BLOOM's ALiBi form (+slope·j, docs/semantics.md "ALiBi") fused into
// attention: the kernel against the float64 interpreter on the same source
// (fresh random inputs, output poisoned; f32 1e-4 relative), with and
// without a causal mask, by index and by position ids. Its bias differs
// from the causal form's by a constant per row, so the two attentions must
// agree, through the kernels, under any mask.
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

std::string bloomSource(const std::string &form, const std::string &mask,
                        const std::string &relativeTo = "") {
  std::string t = "tensor<1x4x70x64xf32>";
  return "func.func @bloom(%q: " + t + ", %k: " + t + ", %v: " + t + ", %p: tensor<70xi64>) -> " +
         t +
         " {\n  %o = attn.attention %q, %k, %v query_positions(%p : "
         "tensor<70xi64>) key_positions(%p : tensor<70xi64>) " +
         mask + " encodings([#pe.alibi<num_heads = 4, form = " + form + relativeTo + ">]) : " + t +
         ", " + t + ", " + t + " -> " + t + "\n  return %o : " + t + "\n}\n";
}

/// Runs `source` on fresh q, k, v [1, 4, 70, 64] and ids 5 + 2 i (positions
/// that are not the indices); returns max |out - ref| / max |ref|.
double runAgainstReference(const std::string &source, std::string &error) {
  Expected<X86Kernel> kernel = suiteKernel(source);
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::mt19937 &engine = rng(nullptr);
  std::vector<int64_t> dims{1, 4, 70, 64};
  ref::Tensor q = randomTensor(dims, engine), k = randomTensor(dims, engine);
  ref::Tensor v = randomTensor(dims, engine);
  std::vector<int64_t> p(70);
  for (int64_t i = 0; i < 70; ++i)
    p[i] = 5 + 2 * i;
  Expected<ref::Tensor> expected = interpretReference(source, {q, k, v, ref::PositionIds({70}, p)});
  if (!expected) {
    error = expected.error();
    return 0;
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), out(qf.size(), NAN);
  Status status = kernel->run({{qf.data(), DType::F32, dims, {}},
                               {kf.data(), DType::F32, dims, {}},
                               {vf.data(), DType::F32, dims, {}},
                               {p.data(), DType::I64, {70}, {}}},
                              {out.data(), DType::F32, dims, {}});
  if (!status) {
    error = status.message();
    return 0;
  }
  return maxRelativeError(out, *expected);
}

TEST(AlibiForms, BloomMatchesTheReferenceUnderEveryMask) {
  for (const char *mask : {"", "causal", "window(9)"})
    for (const char *relativeTo : {"", ", relative_to = position"}) {
      SCOPED_TRACE(std::string(mask) + relativeTo);
      std::string error;
      double rel = runAgainstReference(bloomSource("bloom", mask, relativeTo), error);
      ASSERT_EQ(error, "");
      EXPECT_LE(rel, 1e-4);
    }
}

TEST(AlibiForms, BloomAndCausalFormsGiveTheSameAttention) {
  for (const char *mask : {"", "causal"}) {
    SCOPED_TRACE(mask);
    Expected<Spec> bloom = Spec::fromText(bloomSource("bloom", mask));
    Expected<Spec> causal = Spec::fromText(bloomSource("causal", mask));
    ASSERT_TRUE(bloom && causal);
    Expected<X86Kernel> kb = suiteRuntime().getX86(*bloom);
    Expected<X86Kernel> kc = suiteRuntime().getX86(*causal);
    ASSERT_TRUE(kb && kc);
    std::mt19937 &engine = rng(nullptr);
    std::vector<float> q = toFloat(randomTensor({1, 4, 70, 64}, engine));
    std::vector<float> k = toFloat(randomTensor({1, 4, 70, 64}, engine));
    std::vector<float> v = toFloat(randomTensor({1, 4, 70, 64}, engine));
    std::vector<int64_t> p(70);
    for (int64_t i = 0; i < 70; ++i)
      p[i] = i;
    std::vector<int64_t> dims{1, 4, 70, 64};
    std::vector<float> ob(q.size(), NAN), oc(q.size(), NAN);
    std::vector<TensorView> inputs = {{q.data(), DType::F32, dims, {}},
                                      {k.data(), DType::F32, dims, {}},
                                      {v.data(), DType::F32, dims, {}},
                                      {p.data(), DType::I64, {70}, {}}};
    ASSERT_TRUE(kb->run(inputs, {ob.data(), DType::F32, dims, {}}));
    ASSERT_TRUE(kc->run(inputs, {oc.data(), DType::F32, dims, {}}));
    double maxErr = 0, maxRef = 0;
    for (size_t i = 0; i < ob.size(); ++i) {
      maxRef = std::max(maxRef, double(std::fabs(oc[i])));
      maxErr = std::max(maxErr, std::isnan(ob[i]) ? INFINITY : double(std::fabs(ob[i] - oc[i])));
    }
    EXPECT_LE(maxErr, 1e-4 * maxRef);
  }
}

} // namespace
