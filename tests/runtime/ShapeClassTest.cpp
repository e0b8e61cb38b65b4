// One kernel per shape class (docs/shape-classes.md): a source with `?`
// lengths compiles once, and that kernel runs at every (sq, skv), each run
// checked against the float64 reference on fresh random inputs with the
// output poisoned (f32: max |out - ref| <= 1e-4 max |ref|). Plain, causal,
// RoPE (llama3 scaling, GQA, the key cache on and off) and ALiBi; the
// compile count stays 1 per class, the disk cache holds one entry, and bad
// lengths get errors that name the tensor and the dim.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <tuple>
#include <unistd.h>

using namespace pejit;
using namespace pejit::testing;
namespace fs = std::filesystem;

namespace {

/// (sq, skv) pairs over the lengths {1, 7, 64, 65, 300, 1000}:
/// decode (sq = 1), prefill (sq = skv), chunked prefill (sq < skv) and a
/// query longer than the keys.
const std::vector<std::pair<int64_t, int64_t>> kLengths = {
    {1, 1},   {1, 7},     {1, 1000}, {7, 7},      {7, 300},     {64, 64}, {65, 65},
    {64, 65}, {300, 300}, {65, 300}, {300, 1000}, {1000, 1000}, {300, 65}};

/// A shape class: b, heads and dims fixed, both lengths `?`.
Shape shapeClass(int64_t hq, int64_t hkv, int64_t d) {
  return {1, hq, hkv, kDynamicDim, kDynamicDim, d, d};
}

/// Runs `spec` through one kernel of `cls` at each call's shape (`cls`
/// with its `?` dims set) and checks each run; the runtime compiles the
/// class once.
void expectOneKernelForCalls(const AttentionSpec &spec, const Shape &cls,
                             const std::vector<Shape> &calls) {
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (const Shape &call : calls) {
    SCOPED_TRACE(call.str());
    Case c;
    c.spec = spec;
    c.shapeClass = cls;
    c.shape = call;
    expectMatches(c);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1) << "one shape class, one compile";
}

/// expectOneKernelForCalls at every kLengths pair (the class's batch).
void expectOneKernelAtEveryLength(const AttentionSpec &spec, const Shape &cls) {
  std::vector<Shape> calls;
  for (auto [sq, skv] : kLengths) {
    if (!calls.empty() && !sampledCase()) // at least one length
      continue;
    Shape call = cls;
    call.querySeq = sq;
    call.keySeq = skv;
    calls.push_back(call);
  }
  expectOneKernelForCalls(spec, cls, calls);
}

TEST(ShapeClass, PlainAndCausalAtEveryLength) {
  AttentionSpec spec;
  expectOneKernelAtEveryLength(spec, shapeClass(2, 1, 64));
  spec.causal = true;
  expectOneKernelAtEveryLength(spec, shapeClass(2, 1, 64));
}

// RoPE with llama3 scaling on Q and K, GQA 4/2, d = 128: one Q tile calls
// rotate K per tile, longer ones through the key cache, which the call
// plan sizes by skv.
TEST(ShapeClass, RopeGqaAtEveryLength) {
  AttentionSpec spec;
  ref::RopeConfig rope;
  rope.theta = 500000.0;
  rope.scaling.kind = ref::RopeScaling::Kind::Llama3;
  rope.scaling.factor = 8.0;
  rope.scaling.originalMaxPosition = 64;
  spec.rope = rope;
  spec.causal = true;
  expectOneKernelAtEveryLength(spec, shapeClass(4, 2, 128));
  // Over a pre-rotated K cache: RoPE on Q only, no K tables at all.
  spec.ropeOnKey = false;
  expectOneKernelAtEveryLength(spec, shapeClass(4, 2, 128));
}

// Dynamic NTK picks its frequencies from the call's max(position) + 1:
// below and above original_max_position through one kernel.
TEST(ShapeClass, DynamicNtkFollowsTheCallsLength) {
  AttentionSpec spec;
  ref::RopeConfig rope;
  rope.scaling.kind = ref::RopeScaling::Kind::DynamicNtk;
  rope.scaling.factor = 2.0;
  rope.scaling.originalMaxPosition = 100;
  spec.rope = rope;
  expectOneKernelAtEveryLength(spec, shapeClass(2, 2, 64));
  // Over a pre-rotated K cache the keys were rotated at other lengths: the
  // compile refuses it and says why (vLLM#5093's static "dynamic" NTK).
  spec.ropeOnKey = false;
  Expected<X86Kernel> preRotated =
      suiteRuntime().getX86(Spec::fromBuilder(spec, shapeClass(2, 2, 64)));
  ASSERT_FALSE(preRotated);
  EXPECT_NE(preRotated.error().find("its frequencies follow each call's length"), std::string::npos)
      << preRotated.error();
}

// ALiBi's distance j - (i + skv - sq) takes the call's offset. GQA 4/2:
// decode steps (sq = 1) take the grouped decode item, whose score_mod runs
// per (key, head) with each head's slope.
TEST(ShapeClass, AlibiAtEveryLength) {
  AttentionSpec spec;
  spec.encodings.push_back(encodings::alibi(4, 0, /*symmetric=*/false));
  spec.causal = true;
  expectOneKernelAtEveryLength(spec, shapeClass(4, 2, 64));
  AttentionSpec symmetric;
  symmetric.encodings.push_back(encodings::alibi(4, 0, /*symmetric=*/true));
  symmetric.softcap = 30.0;
  expectOneKernelAtEveryLength(symmetric, shapeClass(4, 2, 64));
}

// T5 falls back to its per-score bucket (its per-tile table is sized by
// skv); a sliding window counts from the call's diagonal.
TEST(ShapeClass, T5AndWindowAtEveryLength) {
  AttentionSpec spec;
  spec.encodings.push_back(encodings::t5Bias(32, 128, /*bidirectional=*/false, 2));
  spec.causal = true;
  expectOneKernelAtEveryLength(spec, shapeClass(2, 2, 64));
  AttentionSpec window;
  window.window = 50;
  window.causal = true;
  expectOneKernelAtEveryLength(window, shapeClass(8, 1, 64)); // grouped decode: 8 heads a lane each
}

// The grouped decode item's P . V runs in blocks of 4 vectors of V's
// columns, then one vector at a time: dv = 48 (8 lanes: a block and 2 more
// vectors) and dv = 96 (16 lanes in the AVX-512 families: a block and 2
// more), GQA 4/2, decode steps over short and long caches.
TEST(ShapeClass, GroupedDecodeAtValueWidthsPastTheColumnBlocks) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  for (int64_t dv : {48, 96}) {
    SCOPED_TRACE("dv = " + std::to_string(dv));
    Shape cls{1, 4, 2, kDynamicDim, kDynamicDim, 64, dv};
    std::vector<Shape> calls;
    for (int64_t skv : {1, 7, 300, 1000})
      calls.push_back({1, 4, 2, 1, skv, 64, dv});
    expectOneKernelForCalls(spec, cls, calls);
  }
}

// A `?` batch too: one kernel at b in {1, 2, 3} with the lengths; RoPE on
// ids shared by the batch, GQA 4/2 (decode steps grouped per (b, hk)).
TEST(ShapeClass, DynamicBatchAtEveryLength) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  Shape cls{kDynamicDim, 4, 2, kDynamicDim, kDynamicDim, 64, 64};
  std::vector<Shape> calls;
  for (auto [b, sq, skv] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 300},
                            {3, 65, 65},
                            {2, 1, 1000},
                            {2, 300, 300},
                            {3, 7, 64}})
    calls.push_back({b, 4, 2, sq, skv, 64, 64});
  expectOneKernelForCalls(spec, cls, calls);
}

float *data(std::vector<float> &v) { return v.data(); }

TEST(ShapeClass, BadLengthsAndStaticDimsAreErrorsNamingTheTensor) {
  AttentionSpec spec;
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, shapeClass(2, 1, 64)));
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->shape().str(), "b=1 hq=2 hkv=1 sq=? skv=? d=64 dv=64");
  std::vector<float> q(2 * 10 * 64, 0.5f), k(20 * 64, 0.5f), v(20 * 64, 0.5f), o(2 * 10 * 64);
  auto run = [&](std::vector<int64_t> qs, std::vector<int64_t> ks, std::vector<int64_t> os) {
    return kernel->run({{data(q), DType::F32, qs, {}},
                        {data(k), DType::F32, ks, {}},
                        {data(v), DType::F32, ks, {}}},
                       {data(o), DType::F32, os, {}});
  };
  EXPECT_TRUE(run({1, 2, 10, 64}, {1, 1, 20, 64}, {1, 2, 10, 64}));
  Status zero = run({1, 2, 0, 64}, {1, 1, 20, 64}, {1, 2, 0, 64});
  EXPECT_NE(zero.message().find("input 0 (query): sq = 0 (dim 2) is outside"), std::string::npos)
      << zero.message();
  Status heads = run({1, 3, 10, 64}, {1, 1, 20, 64}, {1, 2, 10, 64});
  EXPECT_NE(heads.message().find("input 0 (query): shape [1, 3, 10, 64] does not match the "
                                 "kernel's [1, 2, 10, 64]"),
            std::string::npos)
      << heads.message();
  // V's length must be K's; the output's, Q's.
  Status value = kernel->run({{data(q), DType::F32, {1, 2, 10, 64}, {}},
                              {data(k), DType::F32, {1, 1, 20, 64}, {}},
                              {data(v), DType::F32, {1, 1, 19, 64}, {}}},
                             {data(o), DType::F32, {1, 2, 10, 64}, {}});
  EXPECT_NE(value.message().find("input 2 (value): shape [1, 1, 19, 64]"), std::string::npos)
      << value.message();
  Status out = run({1, 2, 10, 64}, {1, 1, 20, 64}, {1, 2, 9, 64});
  EXPECT_NE(out.message().find("output: shape [1, 2, 9, 64]"), std::string::npos) << out.message();
}

// A decode loop as a generator runs it: steps t = 1 .. 300 through one
// kernel of the class, each with the step's query row (sq = 1) and the
// first t rows of K and V as strided views of the whole cache, its output
// row written in place into a [b, hq, 300, d] buffer. Every row must match
// the float64 reference of causal prefill over the same 300 tokens (RoPE
// on Q and K at the default positions: query t - 1 sits at t - 1), and so
// must the same kernel's prefill. One compile for all 301 runs.
TEST(ShapeClass, DecodeStepsMatchPrefillThroughOneKernel) {
  const int64_t hq = 4, hkv = 2, d = 64, steps = 300;
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  Expected<X86Kernel> kernel =
      suiteRuntime().getX86(Spec::fromBuilder(spec, shapeClass(hq, hkv, d)));
  ASSERT_TRUE(kernel) << kernel.error();
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({1, hq, steps, d}, engine),
              k = randomTensor({1, hkv, steps, d}, engine),
              v = randomTensor({1, hkv, steps, d}, engine);
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> decoded(hq * steps * d, nan), prefilled(hq * steps * d, nan);
  std::vector<int64_t> qStrides{hq * steps * d, steps * d, d, 1};
  std::vector<int64_t> kvStrides{hkv * steps * d, steps * d, d, 1};
  for (int64_t t = 1; t <= steps; ++t) {
    Status status =
        kernel->run({{qf.data() + (t - 1) * d, DType::F32, {1, hq, 1, d}, qStrides},
                     {kf.data(), DType::F32, {1, hkv, t, d}, kvStrides},
                     {vf.data(), DType::F32, {1, hkv, t, d}, kvStrides}},
                    {decoded.data() + (t - 1) * d, DType::F32, {1, hq, 1, d}, qStrides});
    ASSERT_TRUE(status) << "step " << t << ": " << status.message();
  }
  Status status = kernel->run({{qf.data(), DType::F32, {1, hq, steps, d}, {}},
                               {kf.data(), DType::F32, {1, hkv, steps, d}, {}},
                               {vf.data(), DType::F32, {1, hkv, steps, d}, {}}},
                              {prefilled.data(), DType::F32, {1, hq, steps, d}, {}});
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, 1);

  ref::RopeConfig rope;
  ref::Tensor qr = ref::applyRope(rope, q, ref::defaultQueryPositions(steps, steps), steps);
  ref::Tensor kr = ref::applyRope(rope, k, ref::defaultKeyPositions(steps), steps);
  ref::AttentionOptions options;
  options.causal = true;
  ref::Tensor expected = ref::attention(qr, kr, v, options);
  auto relativeError = [&](const std::vector<float> &out) {
    double maxRef = 0, maxErr = 0;
    for (size_t i = 0; i < expected.data.size(); ++i) {
      maxRef = std::max(maxRef, std::fabs(expected.data[i]));
      double err = std::isnan(out[i]) ? std::numeric_limits<double>::infinity()
                                      : std::fabs(out[i] - expected.data[i]);
      maxErr = std::max(maxErr, err);
    }
    return maxErr / maxRef;
  };
  EXPECT_LE(relativeError(decoded), 1e-4);
  EXPECT_LE(relativeError(prefilled), 1e-4);
}

// A decode step reads f32 K rows in place when they lie D floats apart
// (a contiguous head, a cache's rows), else through the copy into a tile.
// A [b, s, hkv, d] cache (rows hkv * d apart) goes the copy's way: both
// layouts of the same values give the same output, equal to float64.
TEST(ShapeClass, DecodeOverABshdCacheMatchesTheContiguousOne) {
  const int64_t hq = 4, hkv = 2, d = 64, keys = 500;
  AttentionSpec spec;
  Expected<X86Kernel> kernel =
      suiteRuntime().getX86(Spec::fromBuilder(spec, shapeClass(hq, hkv, d)));
  ASSERT_TRUE(kernel) << kernel.error();
  std::mt19937 &engine = rng(nullptr);
  ref::Tensor q = randomTensor({1, hq, 1, d}, engine), k = randomTensor({1, hkv, keys, d}, engine),
              v = randomTensor({1, hkv, keys, d}, engine);
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  // The same values as [1, keys, hkv, d] buffers.
  std::vector<float> kb(kf.size()), vb(vf.size());
  for (int64_t h = 0; h < hkv; ++h)
    for (int64_t j = 0; j < keys; ++j)
      for (int64_t c = 0; c < d; ++c) {
        kb[(j * hkv + h) * d + c] = kf[(h * keys + j) * d + c];
        vb[(j * hkv + h) * d + c] = vf[(h * keys + j) * d + c];
      }
  std::vector<int64_t> bshd{keys * hkv * d, d, hkv * d, 1};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> dense(hq * d, nan), strided(hq * d, nan);
  ASSERT_TRUE(kernel->run({{qf.data(), DType::F32, {1, hq, 1, d}, {}},
                           {kf.data(), DType::F32, {1, hkv, keys, d}, {}},
                           {vf.data(), DType::F32, {1, hkv, keys, d}, {}}},
                          {dense.data(), DType::F32, {1, hq, 1, d}, {}}));
  ASSERT_TRUE(kernel->run({{qf.data(), DType::F32, {1, hq, 1, d}, {}},
                           {kb.data(), DType::F32, {1, hkv, keys, d}, bshd},
                           {vb.data(), DType::F32, {1, hkv, keys, d}, bshd}},
                          {strided.data(), DType::F32, {1, hq, 1, d}, {}}));
  ref::Tensor expected = ref::attention(q, k, v, ref::AttentionOptions{});
  double maxRef = 0, denseErr = 0, stridedErr = 0;
  for (size_t i = 0; i < expected.data.size(); ++i) {
    maxRef = std::max(maxRef, std::fabs(expected.data[i]));
    denseErr = std::max(denseErr,
                        std::isnan(dense[i]) ? INFINITY : std::fabs(dense[i] - expected.data[i]));
    stridedErr = std::max(
        stridedErr, std::isnan(strided[i]) ? INFINITY : std::fabs(strided[i] - expected.data[i]));
  }
  EXPECT_LE(denseErr / maxRef, 1e-4);
  EXPECT_LE(stridedErr / maxRef, 1e-4);
}

// Split-KV decode: under MQA (one KV head) a decode step has one (b, hk)
// item, so the call plan splits the keys into parts (on 4 threads: up to
// 8, each at least 4 key tiles), and pejit_decode_combine merges them.
// Long caches, a window that leaves the first parts empty, ALiBi and a
// softcap, each against float64.
TEST(ShapeClass, SplitDecodeUnderMqaMatchesReference) {
  Runtime runtime(RuntimeOptions{4});
  for (bool alibi : {false, true})
    for (std::optional<int64_t> window : {std::optional<int64_t>{}, std::optional<int64_t>{700}}) {
      AttentionSpec spec;
      spec.causal = true;
      spec.window = window;
      if (alibi) {
        spec.encodings.push_back(encodings::alibi(4, 0, /*symmetric=*/false));
        spec.softcap = 20.0;
      }
      for (int64_t skv : {1, 385, 2000, 4321}) {
        SCOPED_TRACE("skv " + std::to_string(skv) + (alibi ? " alibi" : "") +
                     (window ? " window" : ""));
        Case c;
        c.spec = spec;
        c.shapeClass = shapeClass(4, 1, 64);
        c.shape = *c.shapeClass;
        c.shape.querySeq = 1;
        c.shape.keySeq = skv;
        Outcome outcome = runCase(runtime, c);
        ASSERT_EQ(outcome.error, "");
        EXPECT_LE(outcome.relativeError, 1e-4) << "seed " << outcome.seed;
      }
    }
  EXPECT_EQ(runtime.stats().compiles + runtime.stats().diskHits, 4);
}

// Runs at two lengths in a fresh runtime with a disk cache: one compile,
// one entry; a second runtime loads that entry and runs a third length.
TEST(ShapeClass, OneDiskCacheEntryServesEveryLength) {
  unsetenv("PEJIT_DISABLE_CACHE");
  fs::path dir = fs::temp_directory_path() / ("pejit-shape-class-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  RuntimeOptions options;
  options.cacheDir = dir.string();
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  Spec source = Spec::fromBuilder(spec, shapeClass(2, 1, 64));
  auto runAt = [&](const X86Kernel &kernel, int64_t sq, int64_t skv) {
    std::vector<float> q(2 * sq * 64, 0.25f), k(skv * 64, 0.5f), v(skv * 64, 1.0f),
        o(2 * sq * 64, std::numeric_limits<float>::quiet_NaN());
    Status status = kernel.run({{data(q), DType::F32, {1, 2, sq, 64}, {}},
                                {data(k), DType::F32, {1, 1, skv, 64}, {}},
                                {data(v), DType::F32, {1, 1, skv, 64}, {}}},
                               {data(o), DType::F32, {1, 2, sq, 64}, {}});
    EXPECT_TRUE(status) << status.message();
    // V is all ones: every row that sees a key averages to exactly 1.
    EXPECT_NEAR(o.back(), 1.0f, 1e-5f);
  };
  {
    Runtime first(options);
    for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 9}, {300, 400}}) {
      Expected<X86Kernel> kernel = first.getX86(source);
      ASSERT_TRUE(kernel) << kernel.error();
      runAt(*kernel, sq, skv);
    }
    EXPECT_EQ(first.stats().compiles, 1);
  }
  int entries = 0;
  for (const auto &item : fs::directory_iterator(dir))
    entries += item.is_directory() && item.path().filename().string().size() == 16;
  EXPECT_EQ(entries, 1);
  Runtime second(options);
  Expected<X86Kernel> loaded = second.getX86(source);
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_TRUE(loaded->loadedFromDisk());
  runAt(*loaded, 1, 1000);
  EXPECT_EQ(second.stats().compiles, 0);
  setenv("PEJIT_DISABLE_CACHE", "1", 1);
  fs::remove_all(dir);
}

} // namespace
