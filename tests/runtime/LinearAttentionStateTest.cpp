// attn.linear_attention's carried state (`state(%st)`, [b, hq, d, dv + 2]
// f32; docs/linear-attention.md "Carried state"): decode steps and chunked
// prefills that hand the state from call to call must equal one causal
// call over the whole sequence, computed in float64 by the interpreter;
// and one call from a random state must equal the reference's definition
// with that state. Fresh inputs, poisoned outputs, f32 tolerance 1e-4 of
// max |ref| (100 steps of f32 accumulation).
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <random>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 16, kValueDim = 16;

struct Form {
  std::string map = "elu_plus_one";
  std::string placement; ///< empty: no RoPE
  bool causal = true;
};

/// The op over [1, h, s, d] tensors with ids; `s` a length or "?", and
/// with a state argument when `state`.
std::string source(const Form &f, const std::string &sq, const std::string &skv, bool state) {
  auto tensor = [](int64_t h, const std::string &s, int64_t d) {
    return "tensor<1x" + std::to_string(h) + "x" + s + "x" + std::to_string(d) + "xf32>";
  };
  std::string q = tensor(kHeads, sq, kDim), k = tensor(kKvHeads, skv, kDim);
  std::string v = tensor(kKvHeads, skv, kValueDim), o = tensor(kHeads, sq, kValueDim);
  std::string qp = "tensor<" + sq + "xi64>", kp = "tensor<" + skv + "xi64>";
  std::string st = "tensor<1x" + std::to_string(kHeads) + "x" + std::to_string(kDim) + "x" +
                   std::to_string(kValueDim + 2) + "xf32>";
  std::string rope = f.placement.empty() ? ""
                                         : " encodings([#pe.rope<layout = half, theta = 100.0>]) "
                                           "rope_placement(" +
                                               f.placement + ")";
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + v + ", %qp: " + qp + ", %kp: " + kp +
         (state ? ", %st: " + st : "") + ") -> " + o +
         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(" + f.map +
         ") query_positions(%qp : " + qp + ") key_positions(%kp : " + kp + ")" +
         (f.causal ? " causal" : "") + (state ? " state(%st : " + st + ")" : "") + rope + " : " +
         q + ", " + k + ", " + v + " -> " + o + "\n  return %o : " + o + "\n}\n";
}

std::vector<Form> everyForm() {
  std::vector<Form> forms;
  for (std::string map : {"elu_plus_one", "relu", "identity", "softmax_keys"})
    for (std::string placement : {"", "rope_before_feature_map", "rope_on_numerator"})
      if (!(map == "softmax_keys" && placement == "rope_on_numerator"))
        forms.push_back({map, placement, true});
  return forms;
}

/// Rows [first, first + n) of x [1, h, total, w] as a strided view.
TensorView rows(std::vector<float> &x, int64_t h, int64_t total, int64_t w, int64_t first,
                int64_t n) {
  return {x.data() + first * w, DType::F32, {1, h, n, w}, {h * total * w, total * w, w, 1}};
}

/// Runs the sequence of length `total` in calls of `chunks` rows each (Q,
/// K and V rows alike), the state carried; returns max |row - ref| / max
/// |ref| against one causal call over everything in float64.
double chunkedAgainstFull(const Form &f, int64_t total, const std::vector<int64_t> &chunks,
                          std::string &error) {
  Expected<X86Kernel> kernel = suiteKernel(source(f, "?", "?", true));
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({1, kHeads, total, kDim}, engine);
  ref::Tensor k = randomTensor({1, kKvHeads, total, kDim}, engine);
  ref::Tensor v = randomTensor({1, kKvHeads, total, kValueDim}, engine);
  std::vector<int64_t> ids(total);
  for (int64_t t = 0; t < total; ++t)
    ids[t] = 3 + t;
  std::string n = std::to_string(total);
  Expected<ref::Tensor> expected =
      interpretReference(source(f, n, n, false),
                         {q, k, v, ref::PositionIds({total}, ids), ref::PositionIds({total}, ids)});
  if (!expected) {
    error = expected.error();
    return 0;
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  std::vector<float> state(kHeads * kDim * (kValueDim + 2), 0.0f); // no keys yet
  std::vector<float> got(kHeads * total * kValueDim, std::numeric_limits<float>::quiet_NaN());
  int64_t first = 0;
  for (int64_t chunk : chunks) {
    TensorView out = rows(got, kHeads, total, kValueDim, first, chunk);
    Status status = kernel->run({rows(qf, kHeads, total, kDim, first, chunk),
                                 rows(kf, kKvHeads, total, kDim, first, chunk),
                                 rows(vf, kKvHeads, total, kValueDim, first, chunk),
                                 {ids.data() + first, DType::I64, {chunk}, {}},
                                 {ids.data() + first, DType::I64, {chunk}, {}},
                                 {state.data(), DType::F32, {1, kHeads, kDim, kValueDim + 2}, {}}},
                                out);
    if (!status) {
      error = status.message();
      return 0;
    }
    first += chunk;
  }
  return maxRelativeError(got, *expected);
}

TEST(LinearAttentionState, HundredDecodeStepsEqualOneCausalCall) {
  for (const Form &f : everyForm()) {
    SCOPED_TRACE(f.map + " " + f.placement);
    std::string error;
    double rel = chunkedAgainstFull(f, 100, std::vector<int64_t>(100, 1), error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

TEST(LinearAttentionState, ChunkedPrefillThenDecodeEqualsOneCausalCall) {
  // Chunks that cross the kernel's 16-row tiles, a one-row step between.
  for (const Form &f : everyForm()) {
    SCOPED_TRACE(f.map + " " + f.placement);
    std::string error;
    double rel = chunkedAgainstFull(f, 90, {7, 16, 1, 40, 3, 1, 1, 21}, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(rel, 1e-4);
  }
}

TEST(LinearAttentionState, OneCallFromAGivenStateMatchesTheDefinition) {
  // A state of earlier keys (S and z from positive feature values, m a
  // running max), then one call, causal and not, against the reference
  // with that state.
  for (Form f : everyForm())
    for (bool causal : {true, false}) {
      f.causal = causal;
      SCOPED_TRACE(f.map + " " + f.placement + (causal ? " causal" : ""));
      std::string text = source(f, "9", "12", true);
      Expected<X86Kernel> kernel = suiteKernel(text);
      ASSERT_TRUE(kernel) << kernel.error();
      std::mt19937 &engine = rng(nullptr);
      ref::Tensor q = randomTensor({1, kHeads, 9, kDim}, engine);
      ref::Tensor k = randomTensor({1, kKvHeads, 12, kDim}, engine);
      ref::Tensor v = randomTensor({1, kKvHeads, 12, kValueDim}, engine);
      ref::Tensor st = randomTensor({1, kHeads, kDim, kValueDim + 2}, engine);
      for (int64_t h = 0; h < kHeads; ++h)
        for (int64_t c = 0; c < kDim; ++c)
          st.at(0, h, c, kValueDim) = 2.0 + std::fabs(st.at(0, h, c, kValueDim)); // z > 0
      std::vector<float> stf = toFloat(st);
      std::vector<int64_t> qp(9), kp(12);
      for (int64_t i = 0; i < 12; ++i)
        kp[i] = 50 + i;
      for (int64_t i = 0; i < 9; ++i)
        qp[i] = 53 + i;
      Expected<ref::Tensor> expected = interpretReference(
          text, {q, k, v, ref::PositionIds({9}, qp), ref::PositionIds({12}, kp), st});
      ASSERT_TRUE(expected) << expected.error();
      std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
      std::vector<float> out(kHeads * 9 * kValueDim, std::numeric_limits<float>::quiet_NaN());
      Status status = kernel->run({{qf.data(), DType::F32, {1, kHeads, 9, kDim}, {}},
                                   {kf.data(), DType::F32, {1, kKvHeads, 12, kDim}, {}},
                                   {vf.data(), DType::F32, {1, kKvHeads, 12, kValueDim}, {}},
                                   {qp.data(), DType::I64, {9}, {}},
                                   {kp.data(), DType::I64, {12}, {}},
                                   {stf.data(), DType::F32, {1, kHeads, kDim, kValueDim + 2}, {}}},
                                  {out.data(), DType::F32, {1, kHeads, 9, kValueDim}, {}});
      ASSERT_TRUE(status) << status.message();
      EXPECT_LE(maxRelativeError(out, *expected), 1e-4);
    }
}

TEST(LinearAttentionState, AWrongStateIsAnErrorThatNamesIt) {
  Form f;
  Expected<X86Kernel> kernel = suiteKernel(source(f, "?", "?", true));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> x(kHeads * 5 * kDim, 1.0f), out(kHeads * 5 * kValueDim, -7.0f);
  std::vector<float> state(kHeads * kDim * kValueDim, 0.0f);
  std::vector<int64_t> ids(5, 0);
  Status status = kernel->run({{x.data(), DType::F32, {1, kHeads, 5, kDim}, {}},
                               {x.data(), DType::F32, {1, kKvHeads, 5, kDim}, {}},
                               {x.data(), DType::F32, {1, kKvHeads, 5, kValueDim}, {}},
                               {ids.data(), DType::I64, {5}, {}},
                               {ids.data(), DType::I64, {5}, {}},
                               {state.data(), DType::F32, {1, kHeads, kDim, kValueDim}, {}}},
                              {out.data(), DType::F32, {1, kHeads, 5, kValueDim}, {}});
  ASSERT_FALSE(status);
  EXPECT_NE(status.message().find("linear_state"), std::string::npos) << status.message();
  for (float value : out)
    ASSERT_EQ(value, -7.0f);
}

} // namespace
