// KV-append (docs/standalone-kernels.md): the standalone pe.rope kernel
// writes new K rows, rotated at their positions, into a strided view of a
// [1, hkv, capacity, d] cache (a prefill chunk of 17 rows, then one row per
// decode step); decode runs attention over the pre-rotated cache with RoPE
// on Q only. Each step is checked against the float64 interpreter on the
// recomputation: attention that rotates Q and every raw K row itself
// (fresh random rows each step, the output poisoned; max |out - ref| <=
// 1e-4 max |ref|). Two kernels compile, whatever the number of steps.
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr int64_t kHeads = 8, kKvHeads = 2, kDim = 64, kCapacity = 64;
constexpr const char *kRope = "<layout = half, theta = 10000.0>";

std::string appendSource() {
  return std::string("func.func @append(%k: tensor<1x2x?x64xf32>, %pos: tensor<?xi64>) -> "
                     "tensor<1x2x?x64xf32> {\n"
                     "  %r = pe.rope %k, %pos ") +
         kRope +
         " : tensor<1x2x?x64xf32>, tensor<?xi64>\n"
         "  return %r : tensor<1x2x?x64xf32>\n}\n";
}

/// Attention over a pre-rotated K cache: RoPE on Q only.
std::string decodeSource() {
  return std::string("func.func @decode(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x?x64xf32>, "
                     "%v: tensor<1x2x?x64xf32>, %qp: tensor<1xi64>) -> tensor<1x8x1x64xf32> {\n"
                     "  %qr = pe.rope %q, %qp ") +
         kRope +
         " : tensor<1x8x1x64xf32>, tensor<1xi64>\n"
         "  %o = attn.attention %qr, %k, %v : tensor<1x8x1x64xf32>, tensor<1x2x?x64xf32>, "
         "tensor<1x2x?x64xf32> -> tensor<1x8x1x64xf32>\n"
         "  return %o : tensor<1x8x1x64xf32>\n}\n";
}

/// The recomputation: Q and the raw K rotated by the attention's RoPE.
std::string recomputeSource() {
  return std::string("func.func @full(%q: tensor<1x8x1x64xf32>, %k: tensor<1x2x?x64xf32>, "
                     "%v: tensor<1x2x?x64xf32>, %qp: tensor<1xi64>, %kp: tensor<?xi64>) -> "
                     "tensor<1x8x1x64xf32> {\n"
                     "  %qr = pe.rope %q, %qp ") +
         kRope + " : tensor<1x8x1x64xf32>, tensor<1xi64>\n  %kr = pe.rope %k, %kp " + kRope +
         " : tensor<1x2x?x64xf32>, tensor<?xi64>\n"
         "  %o = attn.attention %qr, %kr, %v : tensor<1x8x1x64xf32>, tensor<1x2x?x64xf32>, "
         "tensor<1x2x?x64xf32> -> tensor<1x8x1x64xf32>\n"
         "  return %o : tensor<1x8x1x64xf32>\n}\n";
}

/// Rows [0, n) of a [1, hkv, capacity, d] cache as a [1, hkv, n, d] tensor.
ref::Tensor cacheRows(const std::vector<float> &cache, int64_t n) {
  ref::Tensor rows({1, kKvHeads, n, kDim});
  for (int64_t h = 0; h < kKvHeads; ++h)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t c = 0; c < kDim; ++c)
        rows.data[(h * n + j) * kDim + c] = cache[(h * kCapacity + j) * kDim + c];
  return rows;
}

TEST(KvAppend, AppendedRotatedCachePlusDecodeEqualsRecomputingEverything) {
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  Expected<X86Kernel> append = suiteRuntime().getX86(*Spec::fromText(appendSource()));
  ASSERT_TRUE(append) << append.error();
  Expected<X86Kernel> decode = suiteRuntime().getX86(*Spec::fromText(decodeSource()));
  ASSERT_TRUE(decode) << decode.error();
  std::mt19937 &engine = rng(nullptr);
  // The caches the kernels write (rotated K, V) and the raw K rows the
  // recomputation rotates itself.
  std::vector<float> keyCache(kKvHeads * kCapacity * kDim, 0.0f), valueCache(keyCache.size(), 0.0f),
      rawKeys(keyCache.size(), 0.0f);
  std::vector<int64_t> cacheStrides = {kKvHeads * kCapacity * kDim, kCapacity * kDim, kDim, 1};
  int64_t length = 0;
  for (int64_t step = 0; step < 40; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    int64_t fresh = step == 0 ? 17 : 1; // a prefill chunk, then decode rows
    ref::Tensor k = randomTensor({1, kKvHeads, fresh, kDim}, engine);
    ref::Tensor v = randomTensor({1, kKvHeads, fresh, kDim}, engine);
    std::vector<float> kf = toFloat(k), vf = toFloat(v);
    std::vector<int64_t> positions;
    for (int64_t r = 0; r < fresh; ++r)
      positions.push_back(length + r);
    // K rotated as it is written into rows [length, length + fresh).
    TensorView rows{
        keyCache.data() + length * kDim, DType::F32, {1, kKvHeads, fresh, kDim}, cacheStrides};
    Status appended = append->run(
        {{kf.data(), DType::F32, k.shape, {}}, {positions.data(), DType::I64, {fresh}, {}}}, rows);
    ASSERT_TRUE(appended) << appended.message();
    for (int64_t h = 0; h < kKvHeads; ++h)
      for (int64_t r = 0; r < fresh; ++r)
        for (int64_t c = 0; c < kDim; ++c) {
          size_t at = (h * kCapacity + length + r) * kDim + c, from = (h * fresh + r) * kDim + c;
          valueCache[at] = vf[from];
          rawKeys[at] = kf[from];
        }
    length += fresh;

    ref::Tensor q = randomTensor({1, kHeads, 1, kDim}, engine);
    std::vector<float> qf = toFloat(q);
    std::vector<int64_t> queryPosition = {length - 1};
    std::vector<float> out(kHeads * kDim, std::numeric_limits<float>::quiet_NaN());
    std::vector<int64_t> cached = {1, kKvHeads, length, kDim};
    Status decoded = decode->run({{qf.data(), DType::F32, q.shape, {}},
                                  {keyCache.data(), DType::F32, cached, cacheStrides},
                                  {valueCache.data(), DType::F32, cached, cacheStrides},
                                  {queryPosition.data(), DType::I64, {1}, {}}},
                                 {out.data(), DType::F32, {1, kHeads, 1, kDim}, {}});
    ASSERT_TRUE(decoded) << decoded.message();

    std::vector<int64_t> keyPositions;
    for (int64_t j = 0; j < length; ++j)
      keyPositions.push_back(j);
    Expected<ref::Tensor> expected = interpretReference(
        recomputeSource(),
        {q, cacheRows(rawKeys, length), cacheRows(valueCache, length),
         ref::PositionIds({1}, queryPosition), ref::PositionIds({length}, keyPositions)});
    ASSERT_TRUE(expected) << expected.error();
    double maxRef = 0, maxErr = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      maxRef = std::max(maxRef, std::fabs(expected->data[e]));
      double err = std::fabs(out[e] - expected->data[e]);
      maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
    }
    EXPECT_LE(maxErr, 1e-4 * maxRef);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 2);
}

} // namespace
