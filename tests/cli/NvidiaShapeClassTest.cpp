// NVIDIA shape classes (docs/shape-classes.md): a source with `?` batch and
// lengths compiles to one kernel whose PTX ptxas accepts (sm_80 and sm_90,
// f16 and bf16, no stack frame, no spills), and that one kernel serves every
// call: any lengths, a packed batch (segments), per-row key lengths and a
// paged KV cache, run as one launch per sequence or row.
//
// Without a GPU, a fake launcher stands in for each launch: it computes the
// part's attention in float64 from exactly the dense buffers, lengths and
// launch plan the part is given, so the splitting into parts, the packing,
// the page gathers and the write-back into the caller's output are checked
// against the interpreter's float64 reference of the whole call (fresh
// random inputs, the output poisoned with NaN). With a GPU the kernels
// themselves are checked the same way (tolerance 1e-2, 16-bit inputs).
#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "pejit/core/NvidiaPlan.h"
#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/runtime/NvidiaKernelImpl.h"
#include "pejit/runtime/Pejit.h"
#include "pejit/runtime/cuda/CudaDriver.h"
#include "pejit/runtime/npy/Npy.h"
#include "tests/cli/CliTestSupport.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <optional>

#include <cmath>
#include <limits>
#include <random>

using namespace pejit;

namespace {

#define PEJIT_REQUIRE_LIBDEVICE()                                                                  \
  if (findCudaToolkit().empty())                                                                   \
  GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here (CUDA_HOME, /usr/local/cuda): "        \
                  "the GPU lowering links libdevice"

std::mt19937 &engine() {
  static std::mt19937 e(std::random_device{}());
  return e;
}

/// A bf16 tensor of random values in [-1, 1]: its bits (what the kernel
/// reads) and the same values exactly (what the reference reads).
struct Bf16Tensor {
  std::vector<uint16_t> bits;
  ref::Tensor exact;
  TensorView view() { return {bits.data(), DType::BF16, exact.shape, {}}; }
};

Bf16Tensor randomBf16(std::vector<int64_t> shape) {
  Bf16Tensor t{{}, ref::Tensor(std::move(shape))};
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  t.bits.resize(t.exact.data.size());
  for (size_t i = 0; i < t.bits.size(); ++i) {
    t.bits[i] = npy::floatToBf16Bits(dist(engine()));
    t.exact.data[i] = npy::bf16BitsToFloat(t.bits[i]);
  }
  return t;
}

/// An i32 input (offsets, lengths, a block table).
struct IntTensor {
  std::vector<int32_t> values;
  std::vector<int64_t> shape;
  TensorView view() { return {values.data(), DType::I32, shape, {}}; }
  ref::PositionIds ids() const {
    return ref::PositionIds(shape, std::vector<int64_t>(values.begin(), values.end()));
  }
};

/// An f32 output poisoned with NaN: a row the run fails to write shows.
struct Output {
  std::vector<float> values;
  std::vector<int64_t> shape;
  explicit Output(std::vector<int64_t> s) : shape(std::move(s)) {
    size_t n = 1;
    for (int64_t d : shape)
      n *= static_cast<size_t>(d);
    values.assign(n, std::numeric_limits<float>::quiet_NaN());
  }
  TensorView view() { return {values.data(), DType::F32, shape, {}}; }
};

/// max |out - expected| / max |expected| (NaN counts as infinite).
double relativeError(const Output &out, const ref::Tensor &expected) {
  double maxRef = 0, maxErr = 0;
  EXPECT_EQ(out.values.size(), expected.data.size());
  for (size_t i = 0; i < expected.data.size() && i < out.values.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    double err = std::fabs(out.values[i] - expected.data[i]);
    maxErr = std::max(maxErr, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return maxErr / std::max(maxRef, 1e-300);
}

/// What one launch was given.
struct PartSeen {
  int64_t batch, querySeq, keySeq, splits;
  std::vector<int64_t> grid;
};

/// Causal GQA attention (no encodings, scale 1/sqrt(d)) in float64 on a
/// part's dense bf16 buffers, into its f32 output: what the kernel computes
/// for the test's plain sources. Checks the buffers' sizes against the
/// part's lengths, and records the launch.
NvidiaPartLauncher fakeCausalAttention(int64_t hq, int64_t hkv, int64_t d,
                                       std::vector<PartSeen> &seen) {
  return [hq, hkv, d, &seen](const cuda::AttentionKernelImage &image,
                             const cuda::AttentionBuffers &buffers) -> cuda::Status {
    int64_t b = image.batch, sq = image.querySeq, skv = image.keySeq;
    seen.push_back({b, sq, skv, image.splits, image.grid});
    if (buffers.queryBytes != static_cast<size_t>(b * hq * sq * d * 2) ||
        buffers.keyBytes != static_cast<size_t>(b * hkv * skv * d * 2) ||
        buffers.valueBytes != static_cast<size_t>(b * hkv * skv * d * 2) ||
        buffers.outputBytes != static_cast<size_t>(b * hq * sq * d * 4))
      return cuda::Error{"a part's buffers do not match its lengths"};
    auto at = [](const void *base, int64_t index) {
      return static_cast<double>(npy::bf16BitsToFloat(static_cast<const uint16_t *>(base)[index]));
    };
    auto *out = static_cast<float *>(buffers.output);
    double scale = 1.0 / std::sqrt(static_cast<double>(d));
    std::vector<double> p(skv);
    for (int64_t n = 0; n < b; ++n)
      for (int64_t h = 0; h < hq; ++h)
        for (int64_t i = 0; i < sq; ++i) {
          int64_t qRow = ((n * hq + h) * sq + i) * d, kHead = (n * hkv + h / (hq / hkv)) * skv;
          int64_t visible = std::min(skv, i + skv - sq + 1);
          double m = -std::numeric_limits<double>::infinity(), l = 0;
          for (int64_t j = 0; j < visible; ++j) {
            double s = 0;
            for (int64_t c = 0; c < d; ++c)
              s += at(buffers.query, qRow + c) * at(buffers.key, (kHead + j) * d + c);
            p[j] = s * scale;
            m = std::max(m, p[j]);
          }
          for (int64_t j = 0; j < visible; ++j)
            l += (p[j] = std::exp(p[j] - m));
          for (int64_t c = 0; c < d; ++c) {
            double o = 0;
            for (int64_t j = 0; j < visible; ++j)
              o += p[j] * at(buffers.value, (kHead + j) * d + c);
            out[qRow + c] = visible > 0 ? static_cast<float>(o / l) : 0.0f;
          }
        }
    return cuda::Status();
  };
}

/// Sets the fake launcher for one scope.
struct FakeLaunches {
  std::vector<PartSeen> seen;
  FakeLaunches(int64_t hq, int64_t hkv, int64_t d) {
    setNvidiaPartLauncherForTesting(fakeCausalAttention(hq, hkv, d, seen));
  }
  ~FakeLaunches() { setNvidiaPartLauncherForTesting(nullptr); }
};

std::string causalClass(const std::string &q, const std::string &kv, const std::string &out,
                        const std::string &encodings = "") {
  return "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv + ") -> " + out +
         " {\n  %o = attn.attention %q, %k, %v causal" + encodings + " : " + q + ", " + kv + ", " +
         kv + " -> " + out + "\n  return %o : " + out + "\n}\n";
}

bool hasGpu() {
  std::string why;
  return cuda::Driver::get(&why) != nullptr;
}

TEST(NvidiaShapeClass, KernelsGivePtxThatPtxasAcceptsWithoutSpills) {
  PEJIT_REQUIRE_LIBDEVICE();
  struct Source {
    const char *name;
    std::string text; // @T@ for the element type
    bool everyTarget; // else bf16 on sm_90 only (the compile takes seconds)
  };
  std::vector<Source> sources = {
      {"rope_gqa_decode_class",
       causalClass("tensor<1x32x?x128x@T@>", "tensor<1x8x?x128x@T@>", "tensor<1x32x?x128xf32>",
                   " encodings([#pe.rope<layout = half, theta = 500000.0>])"),
       true},
      {"alibi_softcap_batch_and_lengths",
       causalClass("tensor<?x12x?x64x@T@>", "tensor<?x12x?x64x@T@>", "tensor<?x12x?x64x@T@>",
                   " softcap(30.0) encodings([#pe.alibi<num_heads = 12, form = causal>])"),
       true},
      {"t5_lengths",
       "func.func @f(%q: tensor<2x4x?x64x@T@>, %k: tensor<2x4x?x64x@T@>, %v: "
       "tensor<2x4x?x64x@T@>, %t: tensor<32x4xf32>) -> tensor<2x4x?x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal scale(1.0) encodings([#pe.t5_bias<num_buckets = "
       "32, max_distance = 128, bidirectional = false>]) encoding_operands(%t : "
       "tensor<32x4xf32>) : tensor<2x4x?x64x@T@>, tensor<2x4x?x64x@T@>, tensor<2x4x?x64x@T@> "
       "-> tensor<2x4x?x64xf32>\n  return %o : tensor<2x4x?x64xf32>\n}\n",
       false},
      {"shaw_key_and_value_lengths",
       "func.func @f(%q: tensor<1x2x?x64x@T@>, %k: tensor<1x2x?x64x@T@>, %v: "
       "tensor<1x2x?x64x@T@>, %aK: tensor<9x64xf32>, %aV: tensor<9x64xf32>) -> "
       "tensor<1x2x?x64xf32> {\n"
       "  %o = attn.attention %q, %k, %v causal encodings([#pe.relative_key<clip = 4>, "
       "#pe.relative_value<clip = 4>]) encoding_operands(%aK, %aV : tensor<9x64xf32>, "
       "tensor<9x64xf32>) : tensor<1x2x?x64x@T@>, tensor<1x2x?x64x@T@>, tensor<1x2x?x64x@T@> "
       "-> tensor<1x2x?x64xf32>\n  return %o : tensor<1x2x?x64xf32>\n}\n",
       false}};
  Runtime runtime; // the suite's own disk cache (scripts/test.sh)
  for (const Source &source : sources)
    for (const char *type : {"f16", "bf16"})
      for (const char *arch : {"sm_80", "sm_90"}) {
        if (!source.everyTarget && (std::string(type) != "bf16" || std::string(arch) != "sm_90"))
          continue;
        SCOPED_TRACE(std::string(source.name) + " " + type + " " + arch);
        std::string text = source.text;
        for (size_t at; (at = text.find("@T@")) != std::string::npos;)
          text.replace(at, 3, type);
        Expected<Spec> spec = Spec::fromText(text);
        ASSERT_TRUE(spec) << spec.error();
        Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, arch);
        ASSERT_TRUE(kernel) << kernel.error();
        // The launch is the call's: no grid, and the split count by rule.
        EXPECT_TRUE(kernel->grid().empty());
        EXPECT_EQ(kernel->splits(), 0);
        EXPECT_TRUE(kernel->shape().hasDynamicDims());
        EXPECT_NE(kernel->ptx().find(".entry pejit_combine"), std::string::npos);
        EXPECT_NE(kernel->ptx().find(std::string(".target ") + arch), std::string::npos);
        const std::string &log = kernel->ptxasLog();
        if (log.empty())
          continue; // no ptxas: PTX only (NvidiaPtxTest checks that case)
        size_t entry = log.find("entry function 'pejit_attention' for '" + std::string(arch));
        ASSERT_NE(entry, std::string::npos) << log;
        size_t props = log.find("bytes stack frame", entry);
        ASSERT_NE(props, std::string::npos) << log;
        std::string line = log.substr(log.rfind('\n', props) + 1,
                                      log.find('\n', props) - log.rfind('\n', props) - 1);
        EXPECT_NE(line.find(" 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads"),
                  std::string::npos)
            << line;
      }
}

/// One kernel of a `?` class runs at every (b, sq, skv): each part's
/// launch gets the call's lengths and the plan NvidiaPlan.h makes of them,
/// and the output equals the float64 reference; one compile in all.
TEST(NvidiaShapeClass, OneKernelRunsAtEveryLength) {
  PEJIT_REQUIRE_LIBDEVICE();
  std::string text =
      causalClass("tensor<?x4x?x64xbf16>", "tensor<?x2x?x64xbf16>", "tensor<?x4x?x64xf32>");
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Runtime runtime;
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(4, 2, 64);
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> calls = {
      {1, 1, 1},   {1, 1, 1000}, {2, 7, 7},     {1, 7, 300},
      {1, 64, 65}, {2, 65, 65},  {1, 300, 300}, {1, 300, 65}};
  for (auto [b, sq, skv] : calls) {
    SCOPED_TRACE("b=" + std::to_string(b) + " sq=" + std::to_string(sq) +
                 " skv=" + std::to_string(skv));
    Bf16Tensor q = randomBf16({b, 4, sq, 64}), k = randomBf16({b, 2, skv, 64}),
               v = randomBf16({b, 2, skv, 64});
    Output out({b, 4, sq, 64});
    size_t before = fake.seen.size();
    Status status = kernel->run({q.view(), k.view(), v.view()}, out.view());
    ASSERT_TRUE(status) << status.message();
    ASSERT_EQ(fake.seen.size(), before + 1); // one launch: no parts
    const PartSeen &part = fake.seen.back();
    EXPECT_EQ(part.batch, b);
    EXPECT_EQ(part.querySeq, sq);
    EXPECT_EQ(part.keySeq, skv);
    KernelDescription rule;
    rule.queryTile = 64;
    rule.keyTile = 64;
    NvidiaCallPlan plan = planNvidiaCall(rule, 0, Shape{b, 4, 2, sq, skv, 64, 64});
    EXPECT_EQ(part.grid, plan.grid);
    EXPECT_EQ(part.splits, plan.splits);
    Expected<ref::Tensor> expected = interpretReference(text, {q.exact, k.exact, v.exact});
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(out, *expected), 1e-6);
  }
  EXPECT_EQ(runtime.stats().compiles, 1);
  // Lengths outside the class are errors naming the tensor and the dim.
  Bf16Tensor q = randomBf16({1, 4, 3, 64}), k = randomBf16({1, 2, 0, 64});
  Output out({1, 4, 3, 64});
  Status empty = kernel->run({q.view(), k.view(), k.view()}, out.view());
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.message().find("skv = 0"), std::string::npos) << empty.message();
}

/// A packed batch (cu_seqlens) runs one launch per sequence, each with its
/// own lengths and causal offset; a sequence without keys gets zero rows,
/// one without queries no launch. Bad offsets are errors naming the index.
TEST(NvidiaShapeClass, PackedBatchRunsOneLaunchPerSequence) {
  PEJIT_REQUIRE_LIBDEVICE();
  const std::string q = "tensor<1x4x?x64xbf16>", kv = "tensor<1x2x?x64xbf16>",
                    o = "tensor<1x4x?x64xf32>";
  std::string text = "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv +
                     ", %cu_q: tensor<?xi32>, %cu_k: tensor<?xi32>) -> " + o +
                     " {\n  %o = attn.attention %q, %k, %v segments(%cu_q, %cu_k : "
                     "tensor<?xi32>, tensor<?xi32>) causal : " +
                     q + ", " + kv + ", " + kv + " -> " + o + "\n  return %o : " + o + "\n}\n";
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Runtime runtime;
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(4, 2, 64);
  // Sequences (queries, keys): (1, 1), (5, 7), (64, 64), (0, 3), (3, 0),
  // (300, 300): a decode row, a chunk, a prefill, no queries, no keys.
  IntTensor cuQ{{0, 1, 6, 70, 70, 73, 373}, {7}}, cuK{{0, 1, 8, 72, 75, 75, 375}, {7}};
  Bf16Tensor qs = randomBf16({1, 4, 373, 64}), ks = randomBf16({1, 2, 375, 64}),
             vs = randomBf16({1, 2, 375, 64});
  Output out({1, 4, 373, 64});
  Status status =
      kernel->run({qs.view(), ks.view(), vs.view(), cuQ.view(), cuK.view()}, out.view());
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(fake.seen.size(), 4u); // no launch for the empty sides
  EXPECT_EQ(fake.seen[1].querySeq, 5);
  EXPECT_EQ(fake.seen[1].keySeq, 7);
  EXPECT_EQ(fake.seen[3].querySeq, 300);
  Expected<ref::Tensor> expected =
      interpretReference(text, {qs.exact, ks.exact, vs.exact, cuQ.ids(), cuK.ids()});
  ASSERT_TRUE(expected) << expected.error();
  EXPECT_LE(relativeError(out, *expected), 1e-6);
  EXPECT_EQ(runtime.stats().compiles, 1);
  IntTensor bad{{0, 1, 8, 5, 75, 75, 375}, {7}};
  Status refused =
      kernel->run({qs.view(), ks.view(), vs.view(), cuQ.view(), bad.view()}, out.view());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("entry 3"), std::string::npos) << refused.message();
}

/// key_lengths: one launch per batch row over its first lens[n] keys of the
/// cache (a strided view: the row's keys in place of a longer capacity).
TEST(NvidiaShapeClass, KeyLengthsRunOneLaunchPerRow) {
  PEJIT_REQUIRE_LIBDEVICE();
  const std::string q = "tensor<?x4x2x64xbf16>", kv = "tensor<?x2x?x64xbf16>",
                    o = "tensor<?x4x2x64xf32>";
  std::string text = "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv +
                     ", %lens: tensor<?xi32>) -> " + o +
                     " {\n  %o = attn.attention %q, %k, %v key_lengths(%lens : tensor<?xi32>) "
                     "causal : " +
                     q + ", " + kv + ", " + kv + " -> " + o + "\n  return %o : " + o + "\n}\n";
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Runtime runtime;
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(4, 2, 64);
  IntTensor lens{{100, 37, 0, 2}, {4}};
  Bf16Tensor qs = randomBf16({4, 4, 2, 64}), ks = randomBf16({4, 2, 100, 64}),
             vs = randomBf16({4, 2, 100, 64});
  Output out({4, 4, 2, 64});
  Status status = kernel->run({qs.view(), ks.view(), vs.view(), lens.view()}, out.view());
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(fake.seen.size(), 3u); // row 2 has no keys: zero rows, no launch
  EXPECT_EQ(fake.seen[1].batch, 1);
  EXPECT_EQ(fake.seen[1].keySeq, 37);
  Expected<ref::Tensor> expected =
      interpretReference(text, {qs.exact, ks.exact, vs.exact, lens.ids()});
  ASSERT_TRUE(expected) << expected.error();
  EXPECT_LE(relativeError(out, *expected), 1e-6);
  IntTensor tooLong{{101, 37, 0, 2}, {4}};
  Status refused = kernel->run({qs.view(), ks.view(), vs.view(), tooLong.view()}, out.view());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("key_lengths"), std::string::npos) << refused.message();
}

/// A paged cache: each row's pages gathered (shuffled pages, partial last
/// pages, page size 16), one launch per row; an entry outside the pool is
/// an error naming the row and index, before any launch.
TEST(NvidiaShapeClass, PagedCacheRunsOneLaunchPerRow) {
  PEJIT_REQUIRE_LIBDEVICE();
  const std::string q = "tensor<?x4x1x64xbf16>", pages = "tensor<?x16x2x64xbf16>",
                    kv = "tensor<?x2x?x64xbf16>", o = "tensor<?x4x1x64xf32>";
  std::string text =
      "func.func @f(%q: " + q + ", %kp: " + pages + ", %vp: " + pages +
      ", %table: tensor<?x?xi32>, %lens: tensor<?xi32>) -> " + o + " {\n" +
      "  %k = attn.paged_kv %kp, %table : " + pages + ", tensor<?x?xi32> -> " + kv + "\n" +
      "  %v = attn.paged_kv %vp, %table : " + pages + ", tensor<?x?xi32> -> " + kv + "\n" +
      "  %o = attn.attention %q, %k, %v key_lengths(%lens : tensor<?xi32>) causal : " + q + ", " +
      kv + ", " + kv + " -> " + o + "\n  return %o : " + o + "\n}\n";
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Runtime runtime;
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*spec, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(4, 2, 64);
  // 3 rows of up to 7 pages out of 20, shuffled; lengths 100, 17, 64.
  IntTensor table{{13, 2, 19, 7, 0, 11, 5, 4, 16, 1, 1, 1, 1, 1, 8, 3, 10, 6, 1, 1, 1}, {3, 7}};
  IntTensor lens{{100, 17, 64}, {3}};
  Bf16Tensor qs = randomBf16({3, 4, 1, 64}), kp = randomBf16({20, 16, 2, 64}),
             vp = randomBf16({20, 16, 2, 64});
  Output out({3, 4, 1, 64});
  Status status =
      kernel->run({qs.view(), kp.view(), vp.view(), table.view(), lens.view()}, out.view());
  ASSERT_TRUE(status) << status.message();
  ASSERT_EQ(fake.seen.size(), 3u);
  EXPECT_EQ(fake.seen[0].keySeq, 100);
  Expected<ref::Tensor> expected =
      interpretReference(text, {qs.exact, kp.exact, vp.exact, table.ids(), lens.ids()});
  ASSERT_TRUE(expected) << expected.error();
  EXPECT_LE(relativeError(out, *expected), 1e-6);
  table.values[8] = 20; // row 1, index 1: read (17 keys span 2 pages)
  fake.seen.clear();
  Status refused =
      kernel->run({qs.view(), kp.view(), vp.view(), table.view(), lens.view()}, out.view());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.message().find("entry [1, 1] is 20"), std::string::npos) << refused.message();
  EXPECT_TRUE(fake.seen.empty());
}

/// `pejit run --target=nvidia` on one `?` source with inputs of two
/// lengths: both accepted (checked up to the launch; without a driver the
/// run stops there, saying so), one compiled kernel, one disk-cache entry.
TEST(NvidiaShapeClass, CliRunsOneSourceAtTwoLengthsWithOneCacheEntry) {
  PEJIT_REQUIRE_LIBDEVICE();
  using namespace clitest;
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  writeText(dir.file("class.mlir"),
            causalClass("tensor<1x4x?x64xbf16>", "tensor<1x2x?x64xbf16>", "tensor<1x4x?x64xf32>",
                        " encodings([#pe.rope<layout = half, theta = 10000.0>])"));
  std::optional<std::string> saved;
  if (const char *value = std::getenv("PEJIT_CACHE_DIR"))
    saved = value;
  setenv("PEJIT_CACHE_DIR", dir.file("cache").c_str(), 1);
  bool gpu = hasGpu();
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 40}, {64, 300}}) {
    std::string tag = std::to_string(sq);
    writeTensor(dir.file("q" + tag + ".npy"), randomTensor({1, 4, sq, 64}), npy::DType::BF16);
    writeTensor(dir.file("k" + tag + ".npy"), randomTensor({1, 2, skv, 64}), npy::DType::BF16);
    writeTensor(dir.file("v" + tag + ".npy"), randomTensor({1, 2, skv, 64}), npy::DType::BF16);
    Result run = runPejit(dir, {"run", dir.file("class.mlir"), "--target=nvidia:sm_90",
                                "--input=@" + dir.file("q" + tag + ".npy"),
                                "--input=@" + dir.file("k" + tag + ".npy"),
                                "--input=@" + dir.file("v" + tag + ".npy"), "--check"});
    if (gpu) {
      EXPECT_EQ(run.exitCode, 0) << run.err;
    } else {
      EXPECT_EQ(run.exitCode, 1);
      EXPECT_NE(run.err.find("CUDA driver"), std::string::npos) << run.err;
    }
  }
  Result ls = runPejit(dir, {"cache", "ls"});
  EXPECT_NE(ls.out.find(": 1 entries"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("?"), std::string::npos) << ls.out; // the class's signature
  // A key of another head count names the tensor and the dim.
  writeTensor(dir.file("k3.npy"), randomTensor({1, 3, 40, 64}), npy::DType::BF16);
  Result bad = runPejit(dir, {"run", dir.file("class.mlir"), "--target=nvidia:sm_90",
                              "--input=@" + dir.file("q5.npy"), "--input=@" + dir.file("k3.npy"),
                              "--input=@" + dir.file("v5.npy")});
  EXPECT_EQ(bad.exitCode, 1);
  EXPECT_NE(bad.err.find("k3.npy: shape (1, 3, 40, 64) does not match argument 1 (key)"),
            std::string::npos)
      << bad.err;
  EXPECT_NE(bad.err.find("expected (1, 2, ?, 64)"), std::string::npos) << bad.err;
  if (saved)
    setenv("PEJIT_CACHE_DIR", saved->c_str(), 1);
  else
    unsetenv("PEJIT_CACHE_DIR");
}

/// The same on the GPU, with RoPE fused (one kernel, every length).
TEST(NvidiaShapeClass, OneKernelMatchesTheReferenceOnTheGpuAtEveryLength) {
  PEJIT_REQUIRE_LIBDEVICE();
  if (!hasGpu())
    GTEST_SKIP() << "no CUDA driver and GPU here: the fake-launch tests check the runtime's "
                    "side, the GPU check the kernels";
  std::string text =
      causalClass("tensor<?x4x?x64xbf16>", "tensor<?x2x?x64xbf16>", "tensor<?x4x?x64xf32>",
                  " encodings([#pe.rope<layout = half, theta = 500000.0>])");
  Expected<Spec> spec = Spec::fromText(text);
  ASSERT_TRUE(spec) << spec.error();
  Runtime runtime;
  Expected<NvidiaKernel> kernel =
      runtime.getNvidia(*spec, cuda::Driver::get(nullptr)->device().arch());
  ASSERT_TRUE(kernel) << kernel.error();
  for (auto [b, sq, skv] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {1, 1, 1000}, {2, 7, 7}, {1, 64, 65}, {1, 300, 300}, {1, 1000, 1000}}) {
    SCOPED_TRACE("b=" + std::to_string(b) + " sq=" + std::to_string(sq) +
                 " skv=" + std::to_string(skv));
    Bf16Tensor q = randomBf16({b, 4, sq, 64}), k = randomBf16({b, 2, skv, 64}),
               v = randomBf16({b, 2, skv, 64});
    Output out({b, 4, sq, 64});
    Status status = kernel->run({q.view(), k.view(), v.view()}, out.view());
    ASSERT_TRUE(status) << status.message();
    Expected<ref::Tensor> expected = interpretReference(text, {q.exact, k.exact, v.exact});
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(out, *expected), 1e-2);
  }
  EXPECT_EQ(runtime.stats().compiles, 1);
}

} // namespace
