// The x86 linear attention backward (templates/x86/linear_attention_backward.mlir,
// docs/backward.md "Linear attention"), derived from a forward source by
// Runtime::getX86Backward, against the float64 reference gradients
// (ref::linearAttentionBackward, itself checked by finite differences in
// tests/unit/LinearAttentionGradTest.cpp). Fresh random inputs, NaN-poisoned
// gradients; max |grad - ref| <= 1e-4 max |ref| in f32, 2e-2 in f16/bf16
// (the reference on the rounded inputs). The matrix: every feature map,
// no RoPE and both placements, causal and not, lengths 1, 7, 64, 150, 1000
// (the matmul forms take chunks of 64 rows or keys, 16 when causal with a
// chunk's own keys masked: 7, 150 and 1000 cross them), GQA, sq < skv and sq > skv, a
// shape class, relu's zero denominators; bitwise determinism across thread
// counts.
#include "pejit/reference/LinearAttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace pejit::testing {
namespace {

struct LinearCase {
  std::string map = "elu_plus_one";
  std::string placement; ///< empty: no RoPE
  bool causal = false;
  int64_t batch = 1, heads = 4, kvHeads = 2, sq = 7, skv = 7, d = 16, dv = 16;
  DType dtype = DType::F32;
  bool shapeClass = false;

  std::string str() const {
    return map + (placement.empty() ? "" : ", " + placement) + (causal ? ", causal" : "") + ", b " +
           std::to_string(batch) + " hq " + std::to_string(heads) + " hkv " +
           std::to_string(kvHeads) + " sq " + std::to_string(sq) + " skv " + std::to_string(skv) +
           " d " + std::to_string(d) + " dv " + std::to_string(dv) + " " + elementName(dtype) +
           (shapeClass ? " (shape class)" : "");
  }
};

/// The forward: attn.linear_attention with the RoPE at given ids.
std::string forwardSource(const LinearCase &c) {
  std::string t = elementName(c.dtype);
  auto dim = [&](int64_t n) { return c.shapeClass ? std::string("?") : std::to_string(n); };
  auto tensor = [&](int64_t h, const std::string &s, int64_t d) {
    return "tensor<" + std::to_string(c.batch) + "x" + std::to_string(h) + "x" + s + "x" +
           std::to_string(d) + "x" + t + ">";
  };
  std::string q = tensor(c.heads, dim(c.sq), c.d), k = tensor(c.kvHeads, dim(c.skv), c.d);
  std::string v = tensor(c.kvHeads, dim(c.skv), c.dv), o = tensor(c.heads, dim(c.sq), c.dv);
  std::string qi = "tensor<" + dim(c.sq) + "xi64>", ki = "tensor<" + dim(c.skv) + "xi64>";
  bool rope = !c.placement.empty();
  std::string ids = rope ? ", %qi: " + qi + ", %ki: " + ki : "";
  std::string positions =
      rope ? " query_positions(%qi : " + qi + ") key_positions(%ki : " + ki + ")" : "";
  std::string encoding = rope ? " encodings([#pe.rope<layout = half, theta = 100.0>]) "
                                "rope_placement(" +
                                    c.placement + ")"
                              : "";
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + v + ids + ") -> " + o +
         " {\n  %o = attn.linear_attention %q, %k, %v feature_map(" + c.map + ")" + positions +
         (c.causal ? " causal" : "") + encoding + " : " + q + ", " + k + ", " + v + " -> " + o +
         "\n  return %o : " + o + "\n}\n";
}

ref::FeatureMap featureMapOf(const std::string &name) {
  if (name == "relu")
    return ref::FeatureMap::Relu;
  if (name == "identity")
    return ref::FeatureMap::Identity;
  if (name == "softmax_keys")
    return ref::FeatureMap::SoftmaxKeys;
  return ref::FeatureMap::EluPlusOne;
}

/// A fresh random tensor of |x| + 0.05 in `dtype`, and its rounded values.
std::pair<npy::Array, ref::Tensor> positiveInput(const std::vector<int64_t> &shape, DType dtype) {
  ref::Tensor x = randomTensor(shape, rng(nullptr));
  for (double &value : x.data)
    value = std::fabs(value) + 0.05;
  npy::Array bytes = npy::fromFloat32(toFloat(x), shape, npyDtype(dtype));
  std::vector<float> rounded = npy::toFloat32(bytes);
  x.data.assign(rounded.begin(), rounded.end());
  return {std::move(bytes), std::move(x)};
}

/// max |got - want| / max(max |want|, floor). The floor: where every row
/// sees one key, dq and dk vanish (a normalized map's out_i = v_0, and a
/// softmax over one key is 1, whatever q and k): the float64 reference is
/// rounding noise of 1e-17 and the kernel's f32 terms cancel to ~1e-7, so
/// there the test bounds the absolute error (floor 0.1: 1e-5 in f32).
double errorOf(const std::vector<float> &got, const ref::Tensor &want, double floor) {
  double maxRef = floor, maxErr = 0;
  for (size_t n = 0; n < want.data.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(want.data[n]));
    maxErr = std::max(maxErr, std::isnan(got[n]) ? INFINITY : std::fabs(got[n] - want.data[n]));
  }
  return maxErr / maxRef;
}

/// Runs the case once on `runtime`'s kernel; the gradients (as f32) into
/// `got` for the determinism test, the errors against the reference out.
void runCase(const LinearCase &c, Runtime &runtime, std::vector<std::vector<float>> *got,
             double tolerance) {
  uint32_t seed = 0;
  rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.str());
  Expected<Spec> forward = Spec::fromText(forwardSource(c));
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> kernel = runtime.getX86Backward(*forward);
  ASSERT_TRUE(kernel) << kernel.error();
  // relu: |x| + 0.05, so that no denominator is near 0 (where the
  // gradient, 1 / den, is as large as its rounding); its zero rows and
  // kinks: ReluZeroDenominatorRowsGetZeroGradients.
  const bool relu = c.map == "relu";
  auto [q, qRef] = relu ? positiveInput({c.batch, c.heads, c.sq, c.d}, c.dtype)
                        : randomInput({c.batch, c.heads, c.sq, c.d}, c.dtype);
  auto [k, kRef] = relu ? positiveInput({c.batch, c.kvHeads, c.skv, c.d}, c.dtype)
                        : randomInput({c.batch, c.kvHeads, c.skv, c.d}, c.dtype);
  auto [v, vRef] = randomInput({c.batch, c.kvHeads, c.skv, c.dv}, c.dtype);
  auto [dO, dORef] = randomInput({c.batch, c.heads, c.sq, c.dv}, c.dtype);
  std::mt19937 &engine = rng(nullptr);
  std::uniform_int_distribution<int64_t> draw(0, 60);
  std::vector<int64_t> qIds(c.sq), kIds(c.skv);
  for (int64_t &id : qIds)
    id = draw(engine);
  for (int64_t &id : kIds)
    id = draw(engine);
  ref::PositionIds queryIds({c.sq}, qIds), keyIds({c.skv}, kIds);
  ref::RopeConfig rope;
  rope.theta = 100.0;
  std::function<void(ref::Tensor &, bool)> rotate, rotateBack;
  if (!c.placement.empty()) {
    rotate = [&](ref::Tensor &x, bool isKey) {
      x = ref::applyRope(rope, x, isKey ? keyIds : queryIds, 61);
    };
    rotateBack = [&](ref::Tensor &g, bool isKey) {
      g = ref::applyRopeBackward(rope, g, g, isKey ? keyIds : queryIds, 61).dx;
    };
  }
  ref::LinearAttentionOptions options;
  options.map = featureMapOf(c.map);
  options.causal = c.causal;
  options.ropeOnNumerator = c.placement == "rope_on_numerator";
  options.algorithm = ref::LinearAttentionOptions::Algorithm::Direct;
  ref::Tensor o = ref::linearAttention(qRef, kRef, vRef, options, rotate);
  ref::LinearAttentionGradients want =
      ref::linearAttentionBackward(qRef, kRef, vRef, dORef, options, rotate, rotateBack);
  npy::Array oBytes = npy::fromFloat32(toFloat(o), o.shape, npyDtype(c.dtype));
  std::vector<TensorView> inputs = {{q.bytes.data(), c.dtype, qRef.shape, {}},
                                    {k.bytes.data(), c.dtype, kRef.shape, {}},
                                    {v.bytes.data(), c.dtype, vRef.shape, {}},
                                    {oBytes.bytes.data(), c.dtype, o.shape, {}},
                                    {dO.bytes.data(), c.dtype, dORef.shape, {}}};
  if (!c.placement.empty()) {
    inputs.push_back({qIds.data(), DType::I64, {c.sq}, {}});
    inputs.push_back({kIds.data(), DType::I64, {c.skv}, {}});
  }
  npy::Array dq = poisonedOutput(qRef.shape, c.dtype), dk = poisonedOutput(kRef.shape, c.dtype),
             dv = poisonedOutput(vRef.shape, c.dtype);
  Status status = kernel->runBackward(inputs, {{dq.bytes.data(), c.dtype, qRef.shape, {}},
                                               {dk.bytes.data(), c.dtype, kRef.shape, {}},
                                               {dv.bytes.data(), c.dtype, vRef.shape, {}}});
  ASSERT_TRUE(status) << status.message();
  const double floor = c.sq == 1 && c.skv == 1 ? 0.1 : 1e-3;
  std::vector<float> dqf = npy::toFloat32(dq), dkf = npy::toFloat32(dk), dvf = npy::toFloat32(dv);
  EXPECT_LE(errorOf(dqf, want.dq, floor), tolerance) << "dq";
  EXPECT_LE(errorOf(dkf, want.dk, floor), tolerance) << "dk";
  EXPECT_LE(errorOf(dvf, want.dv, floor), tolerance) << "dv";
  if (got)
    *got = {dqf, dkf, dvf};
}

void expectCase(const LinearCase &c) {
  runCase(c, suiteRuntime(), nullptr, c.dtype == DType::F32 ? 1e-4 : 2e-2);
}

const char *kMaps[] = {"elu_plus_one", "relu", "identity", "softmax_keys"};

TEST(LinearAttentionBackward, EveryMapPlacementAndMaskAcrossTileBoundaries) {
  const std::string placements[] = {"", "rope_before_feature_map", "rope_on_numerator"};
  for (size_t m = 0; m < std::size(kMaps); ++m)
    for (size_t p = 0; p < std::size(placements); ++p)
      for (bool causal : {false, true})
        for (int64_t length : {1, 7, 64, 150, 1000}) {
          if (std::string(kMaps[m]) == "softmax_keys" && p == 2)
            continue; // no denominator to keep unrotated (the verifier refuses it)
          // Length 1000 (the float64 reference is O(n^2) per head): causal,
          // one placement per map, turn by turn.
          if (length == 1000 && (!causal || p != m % 3))
            continue;
          LinearCase c;
          c.map = kMaps[m];
          c.placement = placements[p];
          c.causal = causal;
          c.sq = c.skv = length;
          if (sampledCase())
            expectCase(c);
        }
}

TEST(LinearAttentionBackward, UnequalLengthsGqaAndWideHeads) {
  for (const char *map : kMaps)
    for (bool causal : {false, true}) {
      LinearCase c;
      c.map = map;
      c.causal = causal;
      c.placement = "rope_before_feature_map";
      c.sq = 20, c.skv = 45; // causal: rows see skv - sq + i + 1 keys
      expectCase(c);
      c.sq = 45, c.skv = 20; // causal: the first 25 rows see no key
      expectCase(c);
      c.heads = 8, c.kvHeads = 1, c.batch = 2, c.sq = c.skv = 33, c.d = 64, c.dv = 32;
      expectCase(c);
    }
}

TEST(LinearAttentionBackward, HalfInputsAndAShapeClass) {
  for (DType dtype : {DType::F16, DType::BF16})
    for (const char *map : {"elu_plus_one", "softmax_keys"}) {
      LinearCase c;
      c.map = map;
      c.dtype = dtype;
      c.causal = true;
      c.placement = "rope_before_feature_map";
      c.sq = c.skv = 40;
      expectCase(c);
    }
  // One kernel per `?` class, causal (the sweeps) and not (the matmuls).
  for (bool causal : {true, false}) {
    LinearCase c;
    c.shapeClass = true;
    c.causal = causal;
    c.placement = "rope_on_numerator";
    for (int64_t length : {5, 70, 130}) {
      c.sq = c.skv = length;
      expectCase(c);
    }
  }
}

// relu: a row whose features all vanish (q <= 0) has a zero denominator,
// so a zero output and zero gradient, as a row that sees no key (causal,
// sq > skv); both kinds beside ordinary rows, causal and not.
TEST(LinearAttentionBackward, ReluZeroDenominatorRowsGetZeroGradients) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    Expected<Spec> forward = Spec::fromText(forwardSource([&] {
      LinearCase c;
      c.map = "relu", c.causal = causal, c.heads = c.kvHeads = 1, c.sq = 6, c.skv = 4;
      return c;
    }()));
    ASSERT_TRUE(forward) << forward.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
    ASSERT_TRUE(kernel) << kernel.error();
    std::mt19937 &engine = rng(nullptr);
    ref::Tensor q = randomTensor({1, 1, 6, 16}, engine), k = randomTensor({1, 1, 4, 16}, engine),
                v = randomTensor({1, 1, 4, 16}, engine), dO = randomTensor({1, 1, 6, 16}, engine);
    for (int64_t ch = 0; ch < 16; ++ch)
      q.at(0, 0, 5, ch) = -0.5 - 0.01 * ch; // relu(q_5) = 0: a zero denominator
    for (int64_t i = 0; i < 5; ++i)
      q.at(0, 0, i, 0) = 0.5; // the other rows see keys through channel 0
    for (int64_t j = 0; j < 4; ++j)
      k.at(0, 0, j, 0) = 0.5;
    ref::LinearAttentionOptions options;
    options.map = ref::FeatureMap::Relu;
    options.causal = causal; // causal: rows 0 and 1 see no key (sq - skv = 2)
    options.algorithm = ref::LinearAttentionOptions::Algorithm::Direct;
    ref::Tensor o = ref::linearAttention(q, k, v, options, nullptr);
    ref::LinearAttentionGradients want =
        ref::linearAttentionBackward(q, k, v, dO, options, nullptr, nullptr);
    std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v), of = toFloat(o),
                       dOf = toFloat(dO);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> dq(qf.size(), nan), dk(kf.size(), nan), dv(vf.size(), nan);
    Status status = kernel->runBackward({{qf.data(), DType::F32, q.shape, {}},
                                         {kf.data(), DType::F32, k.shape, {}},
                                         {vf.data(), DType::F32, v.shape, {}},
                                         {of.data(), DType::F32, o.shape, {}},
                                         {dOf.data(), DType::F32, dO.shape, {}}},
                                        {{dq.data(), DType::F32, q.shape, {}},
                                         {dk.data(), DType::F32, k.shape, {}},
                                         {dv.data(), DType::F32, v.shape, {}}});
    ASSERT_TRUE(status) << status.message();
    for (int64_t ch = 0; ch < 16; ++ch)
      EXPECT_EQ(dq[5 * 16 + ch], 0.0f) << "the zero-denominator row, channel " << ch;
    EXPECT_LE(errorOf(dq, want.dq, 1e-3), 1e-4) << "dq";
    EXPECT_LE(errorOf(dk, want.dk, 1e-3), 1e-4) << "dk";
    EXPECT_LE(errorOf(dv, want.dv, 1e-3), 1e-4) << "dv";
  }
}

// Every input (read-only) and every gradient ends right before an
// inaccessible page: a kernel that reads or writes one element past a
// tensor faults (AddressSanitizer does not see JIT code). Both forms, 16-bit
// rows, lengths that end mid-chunk.
TEST(LinearAttentionBackward, StaysWithinEveryTensorAgainstGuardPages) {
  for (bool causal : {false, true})
    for (DType dtype : {DType::F32, DType::BF16}) {
      LinearCase c;
      c.causal = causal;
      c.dtype = dtype;
      c.map = causal ? "elu_plus_one" : "softmax_keys";
      c.placement = causal ? "rope_on_numerator" : "rope_before_feature_map";
      c.sq = c.skv = 37;
      SCOPED_TRACE(c.str());
      Expected<Spec> forward = Spec::fromText(forwardSource(c));
      ASSERT_TRUE(forward) << forward.error();
      Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*forward);
      ASSERT_TRUE(kernel) << kernel.error();
      const size_t element = dtype == DType::F32 ? 4 : 2;
      const std::vector<int64_t> qShape{1, c.heads, c.sq, c.d}, kShape{1, c.kvHeads, c.skv, c.d};
      std::vector<std::pair<npy::Array, ref::Tensor>> drawn;
      for (const std::vector<int64_t> &shape : {qShape, kShape, kShape, qShape, qShape})
        drawn.push_back(randomInput(shape, dtype));
      std::vector<GuardedBuffer> inputs;
      std::vector<TensorView> views;
      for (auto &[bytes, values] : drawn) {
        inputs.emplace_back(bytes.bytes.size());
        std::memcpy(inputs.back().data(), bytes.bytes.data(), bytes.bytes.size());
        inputs.back().protectReadOnly();
        views.push_back({inputs.back().data(), dtype, values.shape, {}});
      }
      std::vector<int64_t> ids(37);
      for (int64_t n = 0; n < 37; ++n)
        ids[n] = 3 * n;
      GuardedBuffer qIds(37 * 8), kIds(37 * 8);
      std::memcpy(qIds.data(), ids.data(), 37 * 8);
      std::memcpy(kIds.data(), ids.data(), 37 * 8);
      qIds.protectReadOnly();
      kIds.protectReadOnly();
      views.push_back({qIds.data(), DType::I64, {37}, {}});
      views.push_back({kIds.data(), DType::I64, {37}, {}});
      GuardedBuffer dq(37 * c.heads * c.d * element), dk(37 * c.kvHeads * c.d * element),
          dv(37 * c.kvHeads * c.d * element);
      Status status = kernel->runBackward(views, {{dq.data(), dtype, qShape, {}},
                                                  {dk.data(), dtype, kShape, {}},
                                                  {dv.data(), dtype, kShape, {}}});
      ASSERT_TRUE(status) << status.message();
      // The gradients are finite (every element written, none past the end).
      npy::Array dkBytes{npyDtype(dtype), kShape,
                         std::vector<uint8_t>(dk.as<uint8_t>(), dk.as<uint8_t>() + dk.bytes())};
      for (float x : npy::toFloat32(dkBytes))
        ASSERT_TRUE(std::isfinite(x));
    }
}

// Each item sums its own rows in a fixed order: 1 and 2 threads give the
// same bits.
TEST(LinearAttentionBackward, GradientsAreBitwiseIdenticalAcrossThreadCounts) {
  for (bool causal : {true, false}) {
    LinearCase c;
    c.causal = causal;
    c.placement = "rope_on_numerator";
    c.batch = 2, c.sq = c.skv = 100;
    std::vector<std::vector<float>> one, two;
    RuntimeOptions options;
    options.threads = 1;
    Runtime single(options);
    options.threads = 2;
    Runtime pair(options);
    // The same random inputs on both: the engine's state replayed.
    const std::mt19937 saved = rng(nullptr);
    runCase(c, single, &one, 1e-4);
    rng(nullptr) = saved;
    runCase(c, pair, &two, 1e-4);
    ASSERT_EQ(one.size(), 3u);
    for (size_t n = 0; n < 3; ++n)
      EXPECT_EQ(std::memcmp(one[n].data(), two[n].data(), one[n].size() * sizeof(float)), 0)
          << "gradient " << n << (causal ? " (causal)" : "");
  }
}

} // namespace
} // namespace pejit::testing
