// The x86 backward with RoPE fused (docs/backward.md): the phases read Q'
// and K' (rotated once per call) and hand dQ', dK' rows to RoPE's adjoint
// as they write them. Checked against the float64 reference: q' = R q,
// k' = R k, attentionBackward on q', k', then dq = R^T dQ', dk = R^T dK'
// (applyRopeBackward, itself checked by finite differences in
// tests/unit/AttentionGradTest.cpp). Fresh random inputs, NaN-poisoned
// gradients, max |grad - ref| <= 1e-4 max |ref| (f32). Every layout,
// partial rotary, the scalings with an attention factor, M-RoPE, axial,
// one-sided RoPE, given and default position ids, with causal masks, GQA,
// ALiBi and T5 beside it, a shape class; bitwise determinism.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
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

struct RopeCase {
  std::string name;
  ref::RopeConfig rope;
  int64_t batch = 1, heads = 4, kvHeads = 2, sq = 33, skv = 33, d = 32;
  bool causal = true;
  bool onQuery = true, onKey = true;
  /// Position ids given to the run (random, [s] or [b, s]); else the
  /// defaults (keys from 0, queries from skv - sq).
  bool givenPositions = false, perBatch = false;
  bool shapeClass = false;
  std::optional<AlibiSpec> alibi;

  std::string str() const {
    return name + ": b " + std::to_string(batch) + " hq " + std::to_string(heads) + " hkv " +
           std::to_string(kvHeads) + " sq " + std::to_string(sq) + " skv " + std::to_string(skv) +
           " d " + std::to_string(d) + (causal ? " causal" : "") +
           (givenPositions ? " given ids" : "") + (shapeClass ? " (shape class)" : "");
  }
};

/// Random ids in [0, 3 s) (repeats allowed), per axis and batch row.
ref::PositionIds randomIds(int64_t axes, int64_t rows, int64_t seq, std::mt19937 &engine) {
  std::uniform_int_distribution<int64_t> draw(0, 3 * seq);
  std::vector<int64_t> shape;
  if (axes > 0)
    shape.push_back(axes);
  if (rows > 1)
    shape.push_back(rows);
  shape.push_back(seq);
  std::vector<int64_t> data(std::max<int64_t>(axes, 1) * rows * seq);
  for (int64_t &id : data)
    id = draw(engine);
  return ref::PositionIds(shape, data);
}

void expectRopeBackward(const RopeCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.str());
  AttentionSpec attention;
  attention.rope = c.rope;
  attention.ropeOnQuery = c.onQuery;
  attention.ropeOnKey = c.onKey;
  attention.causal = c.causal;
  attention.alibi = c.alibi;
  int64_t axes = ref::ropePositionAxes(c.rope);
  bool given = c.givenPositions || axes > 0;
  attention.queryPositions = given && c.onQuery;
  attention.keyPositions = given && c.onKey;
  attention.positionsPerBatch = c.perBatch;
  Shape shape{c.batch,
              c.heads,
              c.kvHeads,
              c.shapeClass ? kDynamicDim : c.sq,
              c.shapeClass ? kDynamicDim : c.skv,
              c.d,
              c.d};
  Spec forward = Spec::fromBuilder(attention, shape);
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(forward);
  ASSERT_TRUE(kernel) << kernel.error();

  ref::Tensor q = randomTensor({c.batch, c.heads, c.sq, c.d}, engine);
  ref::Tensor k = randomTensor({c.batch, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor v = randomTensor({c.batch, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor dOut = randomTensor({c.batch, c.heads, c.sq, c.d}, engine);
  int64_t rows = c.perBatch ? c.batch : 1;
  ref::PositionIds queryIds =
      given ? randomIds(axes, rows, c.sq, engine) : ref::defaultQueryPositions(c.sq, c.skv);
  ref::PositionIds keyIds =
      given ? randomIds(axes, rows, c.skv, engine) : ref::defaultKeyPositions(c.skv);
  int64_t seqLen = ref::maxPositionPlusOne(queryIds, keyIds);
  // The reference: rotate, attend, differentiate, rotate the gradients back.
  ref::Tensor qr = c.onQuery ? ref::applyRope(c.rope, q, queryIds, seqLen) : q;
  ref::Tensor kr = c.onKey ? ref::applyRope(c.rope, k, keyIds, seqLen) : k;
  ref::AttentionOptions options;
  options.causal = c.causal;
  ref::Tensor bias;
  if (c.alibi) {
    bias = ref::alibiBias(c.alibi->numHeads, c.alibi->headOffset, c.heads,
                          c.alibi->symmetric ? ref::AlibiForm::Symmetric : ref::AlibiForm::Causal,
                          c.sq, c.skv);
    options.bias = &bias;
  }
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor wantDq =
      c.onQuery ? ref::applyRopeBackward(c.rope, q, want.dq, queryIds, seqLen).dx : want.dq;
  ref::Tensor wantDk =
      c.onKey ? ref::applyRopeBackward(c.rope, k, want.dk, keyIds, seqLen).dx : want.dk;

  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), of = toFloat(o),
                     dOf = toFloat(dOut);
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}},
                                    {of.data(), DType::F32, o.shape, {}},
                                    {dOf.data(), DType::F32, dOut.shape, {}}};
  // The position ids trail, as in the forward (o and dO come before them).
  if (attention.queryPositions)
    inputs.push_back({queryIds.data.data(), DType::I64, queryIds.shape, {}});
  if (attention.keyPositions)
    inputs.push_back({keyIds.data.data(), DType::I64, keyIds.shape, {}});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan);
  Status status = kernel->runBackward(inputs, {{dq.data(), DType::F32, q.shape, {}},
                                               {dk.data(), DType::F32, k.shape, {}},
                                               {dv.data(), DType::F32, v.shape, {}}});
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(dq, wantDq), 1e-4) << "dq";
  EXPECT_LE(gradientError(dk, wantDk), 1e-4) << "dk";
  EXPECT_LE(gradientError(dv, want.dv), 1e-4) << "dv";
}

ref::RopeConfig half() { return ref::RopeConfig{}; }

TEST(BackwardRope, LayoutsAndPartialRotaryAtSeveralLengths) {
  for (int64_t length : {1, 7, 65, 300}) {
    RopeCase c{"half", half()};
    c.sq = c.skv = length;
    if (sampledCase())
      expectRopeBackward(c);
    c.name = "interleaved";
    c.rope.layout = ref::RopeLayout::Interleaved;
    if (sampledCase())
      expectRopeBackward(c);
  }
  // Partial rotary: the channels past rotary_dim pass through, and a rotary
  // width of 12 (not a multiple of 8) takes the scalar path.
  for (auto layout : {ref::RopeLayout::Half, ref::RopeLayout::Interleaved})
    for (int64_t rotary : {16, 12}) {
      RopeCase c{"partial rotary " + std::to_string(rotary), half()};
      c.rope.layout = layout;
      c.rope.rotaryDim = rotary;
      c.sq = 20, c.skv = 45;
      expectRopeBackward(c);
    }
}

TEST(BackwardRope, ScalingsWithAttentionFactor) {
  RopeCase c{"llama3", half()};
  c.rope.theta = 500000.0;
  c.rope.scaling.kind = ref::RopeScaling::Kind::Llama3;
  c.rope.scaling.factor = 8.0;
  c.rope.scaling.originalMaxPosition = 32;
  c.givenPositions = true;
  expectRopeBackward(c);
  c.name = "yarn (attention factor)";
  c.rope = half();
  c.rope.layout = ref::RopeLayout::Interleaved;
  c.rope.scaling.kind = ref::RopeScaling::Kind::Yarn;
  c.rope.scaling.factor = 4.0;
  c.rope.scaling.originalMaxPosition = 16;
  expectRopeBackward(c);
  c.name = "dynamic ntk";
  c.rope = half();
  c.rope.scaling.kind = ref::RopeScaling::Kind::DynamicNtk;
  c.rope.scaling.factor = 2.0;
  c.rope.scaling.originalMaxPosition = 16;
  expectRopeBackward(c);
}

TEST(BackwardRope, MultimodalAndAxialPositions) {
  RopeCase c{"m-rope", half()};
  c.rope.sections = {4, 6, 6};
  c.batch = 2, c.sq = c.skv = 40;
  expectRopeBackward(c);
  c.name = "m-rope per batch row";
  c.perBatch = true;
  expectRopeBackward(c);
  c.name = "axial";
  c.rope = half();
  c.rope.layout = ref::RopeLayout::Interleaved;
  c.rope.axial = true;
  c.rope.theta = 100.0;
  c.perBatch = false;
  expectRopeBackward(c);
}

TEST(BackwardRope, OneSidedGivenIdsAndGroupedHeads) {
  RopeCase c{"query only", half()};
  c.onKey = false;
  c.sq = 9, c.skv = 50;
  expectRopeBackward(c);
  c.name = "key only";
  c.onQuery = false, c.onKey = true;
  expectRopeBackward(c);
  c.name = "given ids per batch row, MQA";
  c.onQuery = true;
  c.batch = 2, c.heads = 4, c.kvHeads = 1;
  c.givenPositions = c.perBatch = true;
  c.causal = false;
  expectRopeBackward(c);
}

TEST(BackwardRope, WithAlibiAndAShapeClass) {
  RopeCase c{"rope + alibi", half()};
  c.alibi = AlibiSpec{};
  c.alibi->numHeads = 4;
  c.sq = c.skv = 70;
  expectRopeBackward(c);
  c.name = "shape class";
  c.alibi.reset();
  c.shapeClass = true;
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1}, {17, 80}, {130, 130}}) {
    c.sq = sq, c.skv = skv;
    expectRopeBackward(c);
  }
}

TEST(BackwardRope, BitwiseIdenticalAcrossRunsAndThreadCounts) {
  AttentionSpec attention;
  attention.rope = half();
  attention.causal = true;
  Shape shape{2, 4, 2, 97, 97, 32, 32};
  Spec forward = Spec::fromBuilder(attention, shape);
  std::mt19937 &engine = rng(nullptr);
  std::vector<std::vector<float>> tensors;
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{2, 4, 97, 32}, {2, 2, 97, 32}, {2, 2, 97, 32}, {2, 4, 97, 32}})
    tensors.push_back(toFloat(randomTensor(dims, engine)));
  std::vector<float> o = toFloat(randomTensor({2, 4, 97, 32}, engine));
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    Expected<X86Kernel> kernel = runtime.getX86Backward(forward);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<float> dq(tensors[0].size()), dk(tensors[1].size()), dv(tensors[2].size());
    Status status = kernel->runBackward({{tensors[0].data(), DType::F32, {2, 4, 97, 32}, {}},
                                         {tensors[1].data(), DType::F32, {2, 2, 97, 32}, {}},
                                         {tensors[2].data(), DType::F32, {2, 2, 97, 32}, {}},
                                         {o.data(), DType::F32, {2, 4, 97, 32}, {}},
                                         {tensors[3].data(), DType::F32, {2, 4, 97, 32}, {}}},
                                        {{dq.data(), DType::F32, {2, 4, 97, 32}, {}},
                                         {dk.data(), DType::F32, {2, 2, 97, 32}, {}},
                                         {dv.data(), DType::F32, {2, 2, 97, 32}, {}}});
    ASSERT_TRUE(status) << status.message();
    dq.insert(dq.end(), dk.begin(), dk.end());
    dq.insert(dq.end(), dv.begin(), dv.end());
    results.push_back(dq);
  }
  for (size_t r = 1; r < results.size(); ++r)
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), results[0].size() * 4), 0)
        << "run " << r;
}

} // namespace
} // namespace pejit::testing
