// The gradient of RoPE's runtime position scale in the x86 backward
// (attn.qk_transform_grad, docs/backward.md): dL/ds = sum over Q' and K'
// rows and rotated pairs of pos * inv_freq[c] * (g_b x'_a - g_a x'_b), one
// contribution per written tile, summed in item order. Checked against the
// float64 reference (applyRopeBackward's dPositionScale, itself checked by
// finite differences in tests/unit/AttentionGradTest.cpp), with dq, dk, dv:
// fresh random inputs and scale, NaN-poisoned gradients, max-norm relative
// error <= 1e-4 (f32). Shared [1] and per-row [b] scales, both layouts,
// partial rotary, yarn's attention factor, M-RoPE, GQA; bitwise the same at
// 1 and 2 threads.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/StandaloneHarness.h"
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

struct ScaleCase {
  std::string name, ropeAttr; ///< the #pe.rope parameters, runtime_scale = true among them
  ref::RopeConfig rope;       ///< the same for the reference
  int64_t batch = 2, heads = 4, kvHeads = 2, seq = 37, d = 32;
  bool perRow = false; ///< a [b] scale with [b, s] ids, else [1] with [s]
};

/// The forward: pe.rope with the scale on Q and K, then causal attention;
/// its arguments q, k, v, the scale, the ids (trailing, as the backward
/// keeps them).
std::string forwardSource(const ScaleCase &c) {
  int64_t axes = ref::ropePositionAxes(c.rope);
  std::vector<int64_t> idsShape;
  if (axes > 0)
    idsShape.push_back(axes);
  if (c.perRow)
    idsShape.push_back(c.batch);
  idsShape.push_back(c.seq);
  std::string q = tensorText({c.batch, c.heads, c.seq, c.d}, "f32"),
              k = tensorText({c.batch, c.kvHeads, c.seq, c.d}, "f32"),
              p = tensorText(idsShape, "i64"), sc = tensorText({c.perRow ? c.batch : 1}, "f32");
  auto rope = [&](const std::string &x, const std::string &type) {
    return " = pe.rope " + x + ", %p scale(%s : " + sc + ") <" + c.ropeAttr + "> : " + type + ", " +
           p;
  };
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + k + ", %s: " + sc + ", %p: " + p +
         ") -> " + q + " {\n  %qr" + rope("%q", q) + "\n  %kr" + rope("%k", k) +
         "\n  %o = attn.attention %qr, %kr, %v causal : " + q + ", " + k + ", " + k + " -> " + q +
         "\n  return %o : " + q + "\n}\n";
}

struct Drawn {
  ref::Tensor q, k, v, dOut, o;
  ref::PositionIds ids;
  std::vector<double> scale;
};

Drawn draw(const ScaleCase &c, std::mt19937 &engine) {
  Drawn x;
  x.q = randomTensor({c.batch, c.heads, c.seq, c.d}, engine);
  x.k = randomTensor({c.batch, c.kvHeads, c.seq, c.d}, engine);
  x.v = randomTensor({c.batch, c.kvHeads, c.seq, c.d}, engine);
  x.dOut = randomTensor({c.batch, c.heads, c.seq, c.d}, engine);
  int64_t axes = ref::ropePositionAxes(c.rope), rows = c.perRow ? c.batch : 1;
  std::uniform_int_distribution<int64_t> id(0, 4 * c.seq);
  std::vector<int64_t> shape, data(std::max<int64_t>(axes, 1) * rows * c.seq);
  if (axes > 0)
    shape.push_back(axes);
  if (c.perRow)
    shape.push_back(c.batch);
  shape.push_back(c.seq);
  for (int64_t &n : data)
    n = id(engine);
  x.ids = ref::PositionIds(shape, data);
  std::uniform_real_distribution<double> scale(0.3, 2.0);
  for (int64_t n = 0; n < rows; ++n)
    x.scale.push_back(static_cast<float>(scale(engine)));
  return x;
}

/// Runs the backward with the scale's gradient; returns dq, dk, dv, ds.
std::vector<std::vector<float>> runBackward(const X86Kernel &kernel, const ScaleCase &c,
                                            const Drawn &x) {
  std::vector<float> qf = toFloat(x.q), kf = toFloat(x.k), vf = toFloat(x.v), of = toFloat(x.o),
                     dOf = toFloat(x.dOut);
  std::vector<float> scale(x.scale.begin(), x.scale.end());
  std::vector<int64_t> ids = x.ids.data;
  int64_t sizes[] = {static_cast<int64_t>(scale.size())};
  std::vector<TensorView> inputs = {
      {qf.data(), DType::F32, x.q.shape, {}},   {kf.data(), DType::F32, x.k.shape, {}},
      {vf.data(), DType::F32, x.v.shape, {}},   {scale.data(), DType::F32, {sizes[0]}, {}},
      {of.data(), DType::F32, x.o.shape, {}},   {dOf.data(), DType::F32, x.dOut.shape, {}},
      {ids.data(), DType::I64, x.ids.shape, {}}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<std::vector<float>> grads = {
      std::vector<float>(qf.size(), nan), std::vector<float>(kf.size(), nan),
      std::vector<float>(vf.size(), nan), std::vector<float>(scale.size(), nan)};
  Status status = kernel.runBackward(inputs, {{grads[0].data(), DType::F32, x.q.shape, {}},
                                              {grads[1].data(), DType::F32, x.k.shape, {}},
                                              {grads[2].data(), DType::F32, x.v.shape, {}},
                                              {grads[3].data(), DType::F32, {sizes[0]}, {}}});
  EXPECT_TRUE(status) << status.message();
  return grads;
}

/// The sum of the magnitudes of the terms of dL/ds, per scale entry:
/// sum of |pos inv_freq[c]| (|g_b x'_a| + |g_a x'_b|) over the rotated rows
/// and pairs of both sides (g the gradient of the rotated rows x'). dL/ds
/// itself is their signed sum, which cancels: its f32 error is a fraction
/// of this, not of |dL/ds|.
std::vector<double> scaleTermMagnitude(
    const ScaleCase &c, const ref::PositionIds &ids, int64_t seqLen, size_t entries,
    std::initializer_list<std::pair<const ref::Tensor *, const ref::Tensor *>> sides) {
  int64_t rotary = c.rope.rotaryDim ? c.rope.rotaryDim : c.d, half = rotary / 2;
  std::vector<double> invFreq = ref::computeRopeFrequencies(c.rope, c.d, seqLen).invFreq;
  std::vector<int64_t> axisOf = ref::ropeAxisOfFrequency(c.rope, half);
  bool sectioned = ref::ropePositionAxes(c.rope) > 0;
  bool interleaved = c.rope.layout == ref::RopeLayout::Interleaved;
  std::vector<double> magnitude(entries, 0.0);
  for (auto [rotated, grad] : sides)
    for (int64_t b = 0; b < rotated->shape[0]; ++b)
      for (int64_t h = 0; h < rotated->shape[1]; ++h)
        for (int64_t i = 0; i < rotated->shape[2]; ++i)
          for (int64_t k = 0; k < half; ++k) {
            int64_t a = interleaved ? 2 * k : k, bb = interleaved ? 2 * k + 1 : k + half;
            double pos = static_cast<double>(sectioned ? ids.get(axisOf[k], b, i) : ids.get(b, i));
            magnitude[entries == 1 ? 0 : b] +=
                std::fabs(pos * invFreq[k]) *
                (std::fabs(grad->at(b, h, i, bb) * rotated->at(b, h, i, a)) +
                 std::fabs(grad->at(b, h, i, a) * rotated->at(b, h, i, bb)));
          }
  return magnitude;
}

void expectScaleGradient(const ScaleCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  Expected<Spec> spec = Spec::fromText(forwardSource(c));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  Drawn x = draw(c, engine);
  int64_t seqLen = ref::maxPositionPlusOne(x.ids);
  ref::Tensor qr = ref::applyRope(c.rope, x.q, x.ids, seqLen, x.scale);
  ref::Tensor kr = ref::applyRope(c.rope, x.k, x.ids, seqLen, x.scale);
  ref::AttentionOptions options;
  options.causal = true;
  x.o = ref::attention(qr, kr, x.v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, x.v, x.dOut, options);
  ref::RopeGradients fromQuery =
      ref::applyRopeBackward(c.rope, x.q, want.dq, x.ids, seqLen, x.scale);
  ref::RopeGradients fromKey = ref::applyRopeBackward(c.rope, x.k, want.dk, x.ids, seqLen, x.scale);
  std::vector<double> wantScale = fromQuery.dPositionScale;
  for (size_t n = 0; n < wantScale.size(); ++n)
    wantScale[n] += fromKey.dPositionScale[n];

  std::vector<std::vector<float>> got = runBackward(*kernel, c, x);
  ASSERT_EQ(got.size(), 4u);
  EXPECT_LE(gradientError(got[0], fromQuery.dx.data), 1e-4) << "dq";
  EXPECT_LE(gradientError(got[1], fromKey.dx.data), 1e-4) << "dk";
  EXPECT_LE(gradientError(got[2], want.dv.data), 1e-4) << "dv";
  // d s: |got - want| within 1e-5 of the magnitude of its terms (see
  // scaleTermMagnitude: a cancelling sum's f32 error bound), plus 1e-10 for
  // a case whose terms are all 0 (one causal row: its dq' is exactly 0 in
  // float64 and f32 roundoff, ~1e-16, in the kernel).
  std::vector<double> magnitude =
      scaleTermMagnitude(c, x.ids, seqLen, wantScale.size(), {{&qr, &want.dq}, {&kr, &want.dk}});
  for (size_t n = 0; n < wantScale.size(); ++n)
    EXPECT_LE(std::fabs(got[3][n] - wantScale[n]), 1e-5 * magnitude[n] + 1e-10)
        << "d rope_position_scale[" << n << "]: got " << got[3][n] << ", want " << wantScale[n]
        << ", terms' magnitude " << magnitude[n];
}

ref::RopeConfig ropeConfig(ref::RopeLayout layout) {
  ref::RopeConfig config;
  config.layout = layout;
  return config;
}

TEST(BackwardRopeScale, SharedAndPerRowScalesInBothLayouts) {
  ScaleCase c{"half, [1]", "layout = half, theta = 10000.0, runtime_scale = true",
              ropeConfig(ref::RopeLayout::Half)};
  expectScaleGradient(c);
  c.name = "half, [b]";
  c.perRow = true;
  expectScaleGradient(c);
  c = ScaleCase{"interleaved, [b]", "layout = interleaved, theta = 500.0, runtime_scale = true",
                ropeConfig(ref::RopeLayout::Interleaved)};
  c.rope.theta = 500.0;
  c.perRow = true;
  c.seq = 70;
  expectScaleGradient(c);
  c.name = "one row, MQA";
  c.seq = 1, c.kvHeads = 1, c.perRow = false;
  expectScaleGradient(c);
}

TEST(BackwardRopeScale, PartialRotaryYarnAndMultimodal) {
  ScaleCase c{"partial rotary",
              "layout = half, theta = 10000.0, rotary_dim = 16, runtime_scale = true",
              ropeConfig(ref::RopeLayout::Half)};
  c.rope.rotaryDim = 16;
  expectScaleGradient(c);
  c = ScaleCase{"yarn",
                "layout = interleaved, theta = 10000.0, scaling = #pe.yarn<factor = 4.0, "
                "original_max_position = 16>, runtime_scale = true",
                ropeConfig(ref::RopeLayout::Interleaved)};
  c.rope.scaling.kind = ref::RopeScaling::Kind::Yarn;
  c.rope.scaling.factor = 4.0;
  c.rope.scaling.originalMaxPosition = 16;
  expectScaleGradient(c);
  c = ScaleCase{"m-rope",
                "layout = half, theta = 10000.0, sections = [4, 6, 6], runtime_scale = true",
                ropeConfig(ref::RopeLayout::Half)};
  c.rope.sections = {4, 6, 6};
  expectScaleGradient(c);
}

TEST(BackwardRopeScale, BitwiseIdenticalAcrossThreadCounts) {
  ScaleCase c{"half, [b]", "layout = half, theta = 10000.0, runtime_scale = true",
              ropeConfig(ref::RopeLayout::Half)};
  c.perRow = true, c.seq = 90;
  Expected<Spec> spec = Spec::fromText(forwardSource(c));
  ASSERT_TRUE(spec) << spec.error();
  Drawn x = draw(c, rng(nullptr));
  x.o = randomTensor({c.batch, c.heads, c.seq, c.d}, rng(nullptr));
  std::vector<std::vector<std::vector<float>>> runs;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    Expected<X86Kernel> kernel = runtime.getX86Backward(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    runs.push_back(runBackward(*kernel, c, x));
  }
  for (size_t r = 1; r < runs.size(); ++r)
    for (size_t g = 0; g < 4; ++g)
      EXPECT_EQ(std::memcmp(runs[r][g].data(), runs[0][g].data(), runs[0][g].size() * 4), 0)
          << "gradient " << g << " of run " << r;
}

} // namespace
} // namespace pejit::testing

namespace pejit::testing {
namespace {

/// Fused RoPE with learned inverse frequencies (learned_inv_freq = true),
/// with or without a runtime scale, over ids [s]: q, k, v, [scale], w, ids.
std::string learnedSource(bool withScale, const std::string &layout, int64_t s, int64_t d,
                          int64_t half) {
  std::string q = tensorText({2, 4, s, d}, "f32"), k = tensorText({2, 2, s, d}, "f32"),
              ids = tensorText({s}, "i64"), w = tensorText({half}, "f32"),
              sc = tensorText({1}, "f32");
  std::string attr = "#pe.rope<layout = " + layout + ", theta = 10000.0" +
                     (half * 2 != d ? ", rotary_dim = " + std::to_string(half * 2) : "") +
                     (withScale ? ", runtime_scale = true" : "") + ", learned_inv_freq = true>";
  std::string operands = withScale ? "%s, %w : " + sc + ", " + w : "%w : " + w;
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + k + (withScale ? ", %s: " + sc : "") +
         ", %w: " + w + ", %p: " + ids + ") -> " + q +
         " {\n  %o = attn.attention %q, %k, %v query_positions(%p : " + ids +
         ") key_positions(%p : " + ids + ") causal encodings([" + attr + "]) encoding_operands(" +
         operands + ") : " + q + ", " + k + ", " + k + " -> " + q + "\n  return %o : " + q +
         "\n}\n";
}

void expectLearnedFrequencies(bool withScale, ref::RopeLayout layout, int64_t rotary) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  const int64_t s = 33, d = 32, half = rotary / 2;
  SCOPED_TRACE("seed " + std::to_string(seed) + (withScale ? ", with scale" : "") + ", rotary " +
               std::to_string(rotary));
  Expected<Spec> spec = Spec::fromText(learnedSource(
      withScale, layout == ref::RopeLayout::Half ? "half" : "interleaved", s, d, half));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> forward = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> backward = suiteRuntime().getX86Backward(*spec);
  ASSERT_TRUE(backward) << backward.error();
  ref::RopeConfig config;
  config.layout = layout;
  config.rotaryDim = rotary;
  ref::Tensor q = randomTensor({2, 4, s, d}, engine), k = randomTensor({2, 2, s, d}, engine),
              v = randomTensor({2, 2, s, d}, engine), dOut = randomTensor({2, 4, s, d}, engine);
  // Frequencies a training run has moved away from theta's.
  ref::RopeFrequencies frequencies = ref::computeRopeFrequencies(config, d, 0);
  std::uniform_real_distribution<double> jitter(0.7, 1.3);
  for (double &f : frequencies.invFreq)
    f = static_cast<float>(f * jitter(engine));
  std::vector<double> scale;
  if (withScale)
    scale.push_back(static_cast<float>(jitter(engine)));
  std::vector<int64_t> idData(s);
  std::uniform_int_distribution<int64_t> id(0, 3 * s);
  for (int64_t &n : idData)
    n = id(engine);
  ref::PositionIds ids = ref::PositionIds::shared(idData);
  int64_t seqLen = ref::maxPositionPlusOne(ids);
  ref::Tensor qr = ref::applyRope(config, q, ids, seqLen, scale, &frequencies),
              kr = ref::applyRope(config, k, ids, seqLen, scale, &frequencies);
  ref::AttentionOptions options;
  options.causal = true;
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::RopeGradients fromQ =
      ref::applyRopeBackward(config, q, want.dq, ids, seqLen, scale, &frequencies);
  ref::RopeGradients fromK =
      ref::applyRopeBackward(config, k, want.dk, ids, seqLen, scale, &frequencies);
  std::vector<double> wantFreq = fromQ.dInvFreq, wantScale;
  for (size_t c = 0; c < wantFreq.size(); ++c)
    wantFreq[c] += fromK.dInvFreq[c];
  if (withScale)
    wantScale = {fromQ.dPositionScale[0] + fromK.dPositionScale[0]};

  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), dOf = toFloat(dOut),
                     wf(frequencies.invFreq.begin(), frequencies.invFreq.end()),
                     sf(scale.begin(), scale.end());
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> out(qf.size(), nan);
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}}};
  if (withScale)
    inputs.push_back({sf.data(), DType::F32, {1}, {}});
  inputs.push_back({wf.data(), DType::F32, {half}, {}});
  std::vector<TensorView> forwardInputs = inputs;
  forwardInputs.push_back({idData.data(), DType::I64, {s}, {}});
  Status ran = forward->run(forwardInputs, {out.data(), DType::F32, q.shape, {}});
  ASSERT_TRUE(ran) << ran.message();
  EXPECT_LE(gradientError(out, o.data), 1e-4) << "forward output";
  inputs.push_back({out.data(), DType::F32, q.shape, {}});
  inputs.push_back({dOf.data(), DType::F32, dOut.shape, {}});
  inputs.push_back({idData.data(), DType::I64, {s}, {}});
  std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan), dscale(1, nan),
      dfreq(half, nan);
  std::vector<TensorView> grads = {{dq.data(), DType::F32, q.shape, {}},
                                   {dk.data(), DType::F32, k.shape, {}},
                                   {dv.data(), DType::F32, v.shape, {}}};
  if (withScale)
    grads.push_back({dscale.data(), DType::F32, {1}, {}});
  grads.push_back({dfreq.data(), DType::F32, {half}, {}});
  Status status = backward->runBackward(inputs, grads);
  ASSERT_TRUE(status) << status.message();
  EXPECT_LE(gradientError(dq, fromQ.dx.data), 1e-4) << "dq";
  EXPECT_LE(gradientError(dk, fromK.dx.data), 1e-4) << "dk";
  EXPECT_LE(gradientError(dv, want.dv.data), 1e-4) << "dv";
  EXPECT_LE(gradientError(dfreq, wantFreq), 1e-4) << "d rope_inv_freq";
  // The scale's gradient is the sum of the q and k sides', which nearly
  // cancel (a score depends on the distance i - j only): its error is
  // measured against the larger side, the size of what the kernel sums.
  if (withScale) {
    double sides = std::max(std::fabs(fromQ.dPositionScale[0]), std::fabs(fromK.dPositionScale[0]));
    EXPECT_LE(std::fabs(dscale[0] - wantScale[0]) / std::max(sides, std::fabs(wantScale[0])), 1e-4)
        << "d rope_position_scale " << dscale[0] << " against " << wantScale[0] << " (sides "
        << fromQ.dPositionScale[0] << ", " << fromK.dPositionScale[0] << ")";
  }
}

TEST(BackwardRopeInvFreq, LearnedFrequenciesAloneAndWithAScale) {
  expectLearnedFrequencies(false, ref::RopeLayout::Half, 32);
  expectLearnedFrequencies(true, ref::RopeLayout::Interleaved, 32);
  expectLearnedFrequencies(true, ref::RopeLayout::Half, 16); // partial rotary
}

} // namespace
} // namespace pejit::testing
