// The x86 backward of score biases that measure distance by position id
// (relative_to = position: left-padded or packed batches, HF position_ids):
// the score hook and its adjoint read the attention's ids. ALiBi and T5
// (with its table's gradient), ids per batch row with gaps and repeats,
// beside RoPE at the same ids. Against the float64 reference with the same
// ids; fresh random inputs, NaN-poisoned gradients, max-norm relative
// error <= 1e-4 (f32).
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

/// Ids per batch row: row n starts at 3 n (a left pad) and steps by 1 or 2.
ref::PositionIds steppedIds(int64_t batch, int64_t seq, std::mt19937 &engine) {
  std::uniform_int_distribution<int64_t> step(1, 2);
  std::vector<int64_t> ids;
  for (int64_t n = 0; n < batch; ++n) {
    int64_t id = 3 * n;
    for (int64_t i = 0; i < seq; ++i, id += step(engine))
      ids.push_back(id);
  }
  return ref::PositionIds({batch, seq}, ids);
}

void expectByPosition(bool t5, bool rope) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + (t5 ? ", t5" : ", alibi") +
               (rope ? " + rope" : ""));
  const int64_t b = 2, heads = 4, kvHeads = 2, s = 45, d = 16;
  AttentionSpec attention;
  attention.causal = true;
  attention.queryPositions = attention.keyPositions = attention.positionsPerBatch = true;
  attention.encodings.push_back(encodings::relativeToPosition(
      t5 ? encodings::t5Bias(32, 64, false, heads) : encodings::alibi(heads, 0, false)));
  if (rope)
    attention.rope = ref::RopeConfig{};
  Spec forward = Spec::fromBuilder(attention, Shape{b, heads, kvHeads, s, s, d, d});
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(forward);
  ASSERT_TRUE(kernel) << kernel.error();

  ref::Tensor q = randomTensor({b, heads, s, d}, engine),
              k = randomTensor({b, kvHeads, s, d}, engine),
              v = randomTensor({b, kvHeads, s, d}, engine),
              dOut = randomTensor({b, heads, s, d}, engine),
              table = randomTensor({32, heads}, engine, 2.0);
  ref::PositionIds ids = steppedIds(b, s, engine);
  ref::RelativeDistance distance{s, s};
  distance.queryPositions = &ids;
  distance.keyPositions = &ids;
  ref::Tensor bias = t5 ? ref::t5Bias(table, false, 32, 64, distance)
                        : ref::alibiBias(heads, 0, heads, ref::AlibiForm::Causal, distance, {});
  int64_t seqLen = ref::maxPositionPlusOne(ids);
  ref::Tensor qr = rope ? ref::applyRope(ref::RopeConfig{}, q, ids, seqLen) : q;
  ref::Tensor kr = rope ? ref::applyRope(ref::RopeConfig{}, k, ids, seqLen) : k;
  ref::AttentionOptions options;
  options.causal = true;
  options.bias = &bias;
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor wantDq =
      rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, want.dq, ids, seqLen).dx : want.dq;
  ref::Tensor wantDk =
      rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, ids, seqLen).dx : want.dk;

  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), of = toFloat(o),
                     dOf = toFloat(dOut), tablef = toFloat(table);
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}}};
  if (t5)
    inputs.push_back({tablef.data(), DType::F32, table.shape, {}});
  inputs.push_back({of.data(), DType::F32, o.shape, {}});
  inputs.push_back({dOf.data(), DType::F32, dOut.shape, {}});
  inputs.push_back({ids.data.data(), DType::I64, ids.shape, {}});
  inputs.push_back({ids.data.data(), DType::I64, ids.shape, {}});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan),
      dtable(tablef.size(), nan);
  std::vector<TensorView> grads = {{dq.data(), DType::F32, q.shape, {}},
                                   {dk.data(), DType::F32, k.shape, {}},
                                   {dv.data(), DType::F32, v.shape, {}}};
  if (t5)
    grads.push_back({dtable.data(), DType::F32, table.shape, {}});
  Status status = kernel->runBackward(inputs, grads);
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(dq, wantDq.data), 1e-4) << "dq";
  EXPECT_LE(gradientError(dk, wantDk.data), 1e-4) << "dk";
  EXPECT_LE(gradientError(dv, want.dv.data), 1e-4) << "dv";
  if (t5)
    EXPECT_LE(
        gradientError(dtable, ref::t5TableGradient(want.dScores, false, 32, 64, distance).data),
        1e-4)
        << "d t5_table";
}

TEST(BackwardByPosition, AlibiAndT5ReadTheIds) {
  expectByPosition(/*t5=*/false, /*rope=*/false);
  expectByPosition(/*t5=*/true, /*rope=*/false);
}

TEST(BackwardByPosition, BesideRopeAtTheSameIds) {
  expectByPosition(/*t5=*/false, /*rope=*/true);
  expectByPosition(/*t5=*/true, /*rope=*/true);
}

} // namespace
} // namespace pejit::testing
