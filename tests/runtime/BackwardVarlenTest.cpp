// The x86 backward of a packed batch (segments: FlashAttention's varlen)
// and of per-row key lengths (docs/backward.md, docs/shape-classes.md):
// each sequence or row is its own attention, and its gradients are the
// float64 reference's on its own slices (positions defaulting per
// sequence); keys past a row's length, and rows that see no key, get zero
// gradients (exactly); an encoding table's gradient is the sum over the
// sequences. Fresh random inputs, NaN-poisoned gradients, max-norm
// relative error <= 1e-4 (f32); bitwise the same at 1 and 2 threads.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

/// Rows [first, first + count) (dim 2) of batch row `row` of [b, h, s, c].
ref::Tensor rowsOf(const ref::Tensor &x, int64_t row, int64_t first, int64_t count) {
  ref::Tensor out({1, x.shape[1], count, x.shape[3]});
  for (int64_t h = 0; h < x.shape[1]; ++h)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t c = 0; c < x.shape[3]; ++c)
        out.at(0, h, i, c) = x.at(row, h, first + i, c);
  return out;
}

/// The same slice of a kernel's float gradient [b, h, s, c].
std::vector<float> rowsOf(const std::vector<float> &x, const std::vector<int64_t> &shape,
                          int64_t row, int64_t first, int64_t count) {
  std::vector<float> out;
  for (int64_t h = 0; h < shape[1]; ++h)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t c = 0; c < shape[3]; ++c)
        out.push_back(x[((row * shape[1] + h) * shape[2] + first + i) * shape[3] + c]);
  return out;
}

struct PackedRun {
  std::vector<float> dq, dk, dv, dtable;
};

TEST(BackwardVarlen, PackedSequencesWithRopeAndATable) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::vector<int32_t> cu = {0, 5, 22, 23, 63}; // lengths 5, 17, 1, 40
  const int64_t total = cu.back(), heads = 4, kvHeads = 2, d = 16;
  AttentionSpec attention;
  attention.packed = true;
  attention.causal = true;
  attention.rope = ref::RopeConfig{};
  attention.encodings.push_back(encodings::t5Bias(32, 128, false, heads));
  Spec forward =
      Spec::fromBuilder(attention, Shape{1, heads, kvHeads, kDynamicDim, kDynamicDim, d, d});
  ref::Tensor q = randomTensor({1, heads, total, d}, engine),
              k = randomTensor({1, kvHeads, total, d}, engine),
              v = randomTensor({1, kvHeads, total, d}, engine),
              dOut = randomTensor({1, heads, total, d}, engine),
              table = randomTensor({32, heads}, engine, 2.0);
  // The reference, sequence by sequence: each at positions 0 .. n - 1.
  ref::Tensor o({1, heads, total, d});
  std::vector<double> wantDq(q.data.size()), wantDk(k.data.size()), wantDv(v.data.size()),
      wantTable(table.data.size(), 0.0);
  for (size_t n = 0; n + 1 < cu.size(); ++n) {
    int64_t first = cu[n], length = cu[n + 1] - cu[n];
    ref::Tensor qs = rowsOf(q, 0, first, length), ks = rowsOf(k, 0, first, length),
                vs = rowsOf(v, 0, first, length), dOs = rowsOf(dOut, 0, first, length);
    ref::PositionIds ids = ref::defaultKeyPositions(length);
    ref::Tensor qr = ref::applyRope(ref::RopeConfig{}, qs, ids, length),
                kr = ref::applyRope(ref::RopeConfig{}, ks, ids, length);
    ref::Tensor bias = ref::t5Bias(table, false, 32, 128, length, length);
    ref::AttentionOptions options;
    options.causal = true;
    options.bias = &bias;
    ref::Tensor os = ref::attention(qr, kr, vs, options);
    ref::AttentionGradients g = ref::attentionBackward(qr, kr, vs, dOs, options);
    ref::Tensor dq = ref::applyRopeBackward(ref::RopeConfig{}, qs, g.dq, ids, length).dx;
    ref::Tensor dk = ref::applyRopeBackward(ref::RopeConfig{}, ks, g.dk, ids, length).dx;
    ref::Tensor dTable =
        ref::t5TableGradient(g.dScores, false, 32, 128, ref::RelativeDistance{length, length});
    for (size_t e = 0; e < dTable.data.size(); ++e)
      wantTable[e] += dTable.data[e];
    auto place = [&](const ref::Tensor &part, std::vector<double> &whole, int64_t h0) {
      for (int64_t h = 0; h < part.shape[1]; ++h)
        for (int64_t i = 0; i < length; ++i)
          for (int64_t c = 0; c < d; ++c)
            whole[((h0 + h) * total + first + i) * d + c] = part.at(0, h, i, c);
    };
    place(dq, wantDq, 0), place(dk, wantDk, 0), place(g.dv, wantDv, 0);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < length; ++i)
        for (int64_t c = 0; c < d; ++c)
          o.at(0, h, first + i, c) = os.at(0, h, i, c);
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), of = toFloat(o),
                     dOf = toFloat(dOut), tablef = toFloat(table);
  std::vector<int32_t> cuQ = cu, cuK = cu;
  std::vector<int64_t> cuShape{static_cast<int64_t>(cu.size())};
  auto run = [&](Runtime &runtime) {
    Expected<X86Kernel> kernel = runtime.getX86Backward(forward);
    EXPECT_TRUE(kernel) << kernel.error();
    PackedRun r;
    if (!kernel)
      return r;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    r.dq.assign(qf.size(), nan), r.dk.assign(kf.size(), nan), r.dv.assign(vf.size(), nan);
    r.dtable.assign(tablef.size(), nan);
    Status status = kernel->runBackward({{qf.data(), DType::F32, q.shape, {}},
                                         {kf.data(), DType::F32, k.shape, {}},
                                         {vf.data(), DType::F32, v.shape, {}},
                                         {tablef.data(), DType::F32, table.shape, {}},
                                         {cuQ.data(), DType::I32, cuShape, {}},
                                         {cuK.data(), DType::I32, cuShape, {}},
                                         {of.data(), DType::F32, o.shape, {}},
                                         {dOf.data(), DType::F32, dOut.shape, {}}},
                                        {{r.dq.data(), DType::F32, q.shape, {}},
                                         {r.dk.data(), DType::F32, k.shape, {}},
                                         {r.dv.data(), DType::F32, v.shape, {}},
                                         {r.dtable.data(), DType::F32, table.shape, {}}});
    EXPECT_TRUE(status) << status.message();
    return r;
  };
  PackedRun got = run(suiteRuntime());
  ASSERT_EQ(got.dq.size(), qf.size());
  EXPECT_LE(gradientError(got.dq, wantDq), 1e-4) << "dq";
  EXPECT_LE(gradientError(got.dk, wantDk), 1e-4) << "dk";
  EXPECT_LE(gradientError(got.dv, wantDv), 1e-4) << "dv";
  EXPECT_LE(gradientError(got.dtable, wantTable), 1e-4) << "d t5_table";
  // The sequences run in order and the table's sums are f64: the same bits
  // at 1 and 2 threads.
  for (int threads : {1, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    PackedRun again = run(runtime);
    EXPECT_EQ(std::memcmp(again.dtable.data(), got.dtable.data(), got.dtable.size() * 4), 0)
        << threads << " threads";
    EXPECT_EQ(std::memcmp(again.dq.data(), got.dq.data(), got.dq.size() * 4), 0)
        << threads << " threads";
  }
}

TEST(BackwardVarlen, KeyLengthsLeaveUnusedKeysAtZero) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t b = 3, heads = 2, sq = 6, capacity = 40, d = 16;
  const std::vector<int32_t> lengths = {40, 13, 0}; // the last row sees no key
  AttentionSpec attention;
  attention.keyLengths = true;
  Spec forward = Spec::fromBuilder(attention, Shape{b, heads, heads, sq, kDynamicDim, d, d});
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(forward);
  ASSERT_TRUE(kernel) << kernel.error();
  ref::Tensor q = randomTensor({b, heads, sq, d}, engine),
              k = randomTensor({b, heads, capacity, d}, engine),
              v = randomTensor({b, heads, capacity, d}, engine),
              dOut = randomTensor({b, heads, sq, d}, engine);
  ref::Tensor o({b, heads, sq, d});
  std::vector<ref::AttentionGradients> want;
  for (int64_t n = 0; n < b; ++n) {
    int64_t length = lengths[n];
    ref::AttentionOptions options;
    ref::Tensor qs = rowsOf(q, n, 0, sq), dOs = rowsOf(dOut, n, 0, sq);
    if (length == 0) {
      want.push_back({});
      continue;
    }
    ref::Tensor ks = rowsOf(k, n, 0, length), vs = rowsOf(v, n, 0, length);
    ref::Tensor os = ref::attention(qs, ks, vs, options);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < sq; ++i)
        for (int64_t c = 0; c < d; ++c)
          o.at(n, h, i, c) = os.at(0, h, i, c);
    want.push_back(ref::attentionBackward(qs, ks, vs, dOs, options));
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), of = toFloat(o),
                     dOf = toFloat(dOut);
  std::vector<int32_t> lens = lengths;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan);
  Status status = kernel->runBackward({{qf.data(), DType::F32, q.shape, {}},
                                       {kf.data(), DType::F32, k.shape, {}},
                                       {vf.data(), DType::F32, v.shape, {}},
                                       {lens.data(), DType::I32, {b}, {}},
                                       {of.data(), DType::F32, o.shape, {}},
                                       {dOf.data(), DType::F32, dOut.shape, {}}},
                                      {{dq.data(), DType::F32, q.shape, {}},
                                       {dk.data(), DType::F32, k.shape, {}},
                                       {dv.data(), DType::F32, v.shape, {}}});
  ASSERT_TRUE(status) << status.message();
  for (int64_t n = 0; n < b; ++n) {
    SCOPED_TRACE("row " + std::to_string(n) + ", key length " + std::to_string(lengths[n]));
    int64_t length = lengths[n];
    std::vector<float> dqRow = rowsOf(dq, q.shape, n, 0, sq);
    std::vector<float> unusedK = rowsOf(dk, k.shape, n, length, capacity - length);
    std::vector<float> unusedV = rowsOf(dv, v.shape, n, length, capacity - length);
    EXPECT_TRUE(std::all_of(unusedK.begin(), unusedK.end(), [](float x) { return x == 0.0f; }))
        << "dk past the key length";
    EXPECT_TRUE(std::all_of(unusedV.begin(), unusedV.end(), [](float x) { return x == 0.0f; }))
        << "dv past the key length";
    if (length == 0) {
      EXPECT_TRUE(std::all_of(dqRow.begin(), dqRow.end(), [](float x) { return x == 0.0f; }))
          << "dq of a row that sees no key";
      continue;
    }
    EXPECT_LE(gradientError(dqRow, want[n].dq.data), 1e-4) << "dq";
    EXPECT_LE(gradientError(rowsOf(dk, k.shape, n, 0, length), want[n].dk.data), 1e-4) << "dk";
    EXPECT_LE(gradientError(rowsOf(dv, v.shape, n, 0, length), want[n].dv.data), 1e-4) << "dv";
  }
}

} // namespace
} // namespace pejit::testing
