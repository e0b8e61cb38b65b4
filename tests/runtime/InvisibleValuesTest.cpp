// docs/semantics.md: the softmax runs over the keys a row sees, so a NaN or
// inf in a row of V that a query cannot see (causal, a window, past the
// keys) never reaches that query's output (P is 0 there, and 0 * inf is
// NaN: the kernels must not multiply it in). Rows that do see the poisoned
// key are not finite, as in float64. Each case: fresh random Q, K, V,
// poisoned V rows, the output poisoned with NaN; the rows that see no
// poisoned key match the float64 reference (on V with those rows zeroed,
// which they do not read) within 1e-4 of max |ref|.
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace pejit;
using namespace pejit::testing;

namespace {

struct Poisoned {
  AttentionSpec spec;
  Shape shape;
  std::optional<Shape> shapeClass;
  std::vector<int64_t> keys; ///< V rows set to `value` (every batch and head)
  float value;
};

void expectUnseenPoisonStaysOut(const Poisoned &c) {
  const Shape &s = c.shape;
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({s.batch, s.queryHeads, s.querySeq, s.headDim}, engine);
  ref::Tensor k = randomTensor({s.batch, s.kvHeads, s.keySeq, s.headDim}, engine);
  ref::Tensor v = randomTensor({s.batch, s.kvHeads, s.keySeq, s.valueDim}, engine);
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  for (int64_t key : c.keys)
    for (int64_t n = 0; n < s.batch * s.kvHeads; ++n) {
      for (int64_t e = 0; e < s.valueDim; ++e) {
        vf[(n * s.keySeq + key) * s.valueDim + e] = c.value;
        v.data[(n * s.keySeq + key) * s.valueDim + e] = 0.0; // unread by the rows checked
      }
    }
  Expected<X86Kernel> kernel =
      suiteRuntime().getX86(Spec::fromBuilder(c.spec, c.shapeClass.value_or(s)));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> out(s.batch * s.queryHeads * s.querySeq * s.valueDim,
                         std::numeric_limits<float>::quiet_NaN());
  Status status =
      kernel->run({{qf.data(), DType::F32, q.shape, {}},
                   {kf.data(), DType::F32, k.shape, {}},
                   {vf.data(), DType::F32, v.shape, {}}},
                  {out.data(), DType::F32, {s.batch, s.queryHeads, s.querySeq, s.valueDim}, {}});
  ASSERT_TRUE(status) << status.message();
  ref::AttentionOptions options;
  options.causal = c.spec.causal;
  options.window = c.spec.window;
  options.windowRight = c.spec.windowRight;
  ref::Tensor expected = ref::attention(q, k, v, options);
  double maxRef = 0, maxErr = 0;
  int64_t clean = 0, poisoned = 0;
  for (int64_t n = 0; n < s.batch * s.queryHeads; ++n)
    for (int64_t i = 0; i < s.querySeq; ++i) {
      bool sees = false;
      for (int64_t key : c.keys)
        sees |= ref::keyVisible(options, i, key, s.querySeq, s.keySeq);
      for (int64_t e = 0; e < s.valueDim; ++e) {
        size_t at = (n * s.querySeq + i) * s.valueDim + e;
        if (sees) {
          poisoned += !std::isfinite(out[at]);
          continue;
        }
        maxRef = std::max(maxRef, std::fabs(expected.data[at]));
        maxErr = std::max(maxErr, std::isfinite(out[at]) ? std::fabs(out[at] - expected.data[at])
                                                         : std::numeric_limits<double>::infinity());
        ++clean;
      }
    }
  EXPECT_GT(clean, 0);
  EXPECT_LE(maxErr, 1e-4 * maxRef) << clean << " elements of rows that see no poisoned key";
  (void)poisoned; // rows that see one: NaN or inf, or (inf - inf) NaN; not checked further
}

TEST(InvisibleValues, NaNAndInfInUnseenValueRowsNeverReachARow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<Poisoned> cases;
  auto add = [&](Shape shape, bool causal, std::optional<int64_t> window,
                 std::optional<int64_t> right, std::vector<int64_t> keys, float value) {
    Poisoned c;
    c.shape = shape;
    c.spec.causal = causal;
    c.spec.window = window;
    c.spec.windowRight = right;
    c.keys = std::move(keys);
    c.value = value;
    cases.push_back(c);
  };
  // The report's cases: causal with NaN in V[39]; window 8 with inf in V[0].
  add({1, 2, 2, 64, 64, 64, 64}, true, std::nullopt, std::nullopt, {39}, nan);
  add({1, 2, 2, 64, 64, 64, 64}, true, 8, std::nullopt, {0}, inf);
  // Across tiles, the diagonal at every offset of a 6-row block, sq < skv.
  add({1, 2, 1, 300, 300, 64, 64}, true, std::nullopt, std::nullopt, {7, 100, 101, 150, 299}, nan);
  add({2, 2, 2, 70, 200, 64, 64}, true, std::nullopt, std::nullopt, {131, 135, 199}, -inf);
  // Windows on both sides, and a left window with causal.
  add({1, 2, 2, 200, 200, 64, 64}, false, 5, 3, {0, 50, 51, 52, 199}, nan);
  add({1, 2, 2, 200, 200, 64, 64}, true, 20, std::nullopt, {3, 60, 61, 190}, inf);
  // One query row in the last Q tile (145 = 144 + 1) and decode steps:
  // plain, and GQA (the grouped decode item) with a window.
  add({1, 2, 2, 145, 145, 64, 64}, true, std::nullopt, std::nullopt, {144, 143, 10}, nan);
  add({1, 8, 2, 1, 300, 64, 64}, true, 30, std::nullopt, {0, 200, 268}, nan);
  add({1, 4, 4, 1, 100, 64, 64}, false, 10, std::nullopt, {0, 88}, inf);
  for (const Poisoned &c : cases) {
    SCOPED_TRACE(c.shape.str() + (c.spec.causal ? " causal" : "") +
                 (c.spec.window ? " window " + std::to_string(*c.spec.window) : "") +
                 (c.spec.windowRight ? " right " + std::to_string(*c.spec.windowRight) : ""));
    expectUnseenPoisonStaysOut(c);
  }
}

} // namespace
