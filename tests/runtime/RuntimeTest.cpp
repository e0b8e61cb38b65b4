// The runtime's contract: per-shape cache (hits, misses, one compile under
// concurrency), IR of every stage, and errors as values for bad input.
#include "pejit/runtime/Pejit.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <random>
#include <thread>
#include <vector>

using namespace pejit;

namespace {

Spec ropeSpec(Shape shape, bool causal = true) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = causal;
  return Spec::fromBuilder(spec, shape);
}

const Shape kShape{1, 2, 2, 40, 40, 64, 64};

// Each test owns its Runtime: counts start at zero, and the JIT engines die
// before main returns.
TEST(Runtime, CacheHitReturnsTheSameKernel) {
  Runtime runtime;
  Expected<X86Kernel> first = runtime.getX86(ropeSpec(kShape));
  ASSERT_TRUE(first) << first.error();
  Expected<X86Kernel> second = runtime.getX86(ropeSpec(kShape));
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(first->id(), second->id());
  EXPECT_EQ(runtime.compileCount(), 1);
}

TEST(Runtime, NewShapeOrTileConfigCompilesAnew) {
  Runtime runtime;
  Expected<X86Kernel> base = runtime.getX86(ropeSpec(kShape));
  Shape longer = kShape;
  longer.keySeq = 41;
  Expected<X86Kernel> otherShape = runtime.getX86(ropeSpec(longer));
  Expected<X86Kernel> otherTiles = runtime.getX86(ropeSpec(kShape), X86TileConfig{48, 48});
  Expected<X86Kernel> otherMask = runtime.getX86(ropeSpec(kShape, /*causal=*/false));
  ASSERT_TRUE(base && otherShape && otherTiles && otherMask);
  EXPECT_NE(base->id(), otherShape->id());
  EXPECT_NE(base->id(), otherTiles->id());
  EXPECT_NE(base->id(), otherMask->id());
  EXPECT_EQ(runtime.compileCount(), 4);
  EXPECT_EQ(otherShape->shape().keySeq, 41);
}

TEST(Runtime, EightThreadsAskingForOneKeyCompileOnce) {
  Runtime runtime;
  Spec spec = ropeSpec(kShape);
  std::vector<const void *> ids(8, nullptr);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < 8) {
      } // start together
      Expected<X86Kernel> kernel = runtime.getX86(spec);
      if (kernel)
        ids[t] = kernel->id();
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(runtime.compileCount(), 1);
  for (const void *id : ids) {
    EXPECT_NE(id, nullptr);
    EXPECT_EQ(id, ids[0]);
  }
}

// A RoPE prefill with several Q tiles rotates K once per call into its
// scratch (the key cache): concurrent runs of one kernel must each use
// their own. Each thread's output must equal, bit for bit, what a run alone
// gave for its inputs.
TEST(Runtime, ConcurrentRunsOfOneKernelKeepTheirScratchApart) {
  Runtime runtime;
  Shape shape{1, 2, 2, 300, 300, 64, 64};
  // 144 x 96 tiles: K's 300 rows are 4 key tiles per head, 8 jobs.
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec(shape), X86TileConfig{});
  ASSERT_TRUE(kernel) << kernel.error();
  ASSERT_NE(kernel->ir("tiled")->find("prepare_jobs = 8 : i64"), std::string::npos);
  size_t n = 2 * 300 * 64;
  std::vector<int64_t> dims{1, 2, 300, 64};
  constexpr int kThreads = 4;
  std::vector<std::vector<float>> inputs(kThreads), alone(kThreads), together(kThreads);
  std::mt19937 engine(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto run = [&](int t, std::vector<float> &out) {
    const float *base = inputs[t].data();
    out.assign(n, std::numeric_limits<float>::quiet_NaN());
    return kernel->run({{const_cast<float *>(base), DType::F32, dims, {}},
                        {const_cast<float *>(base + n), DType::F32, dims, {}},
                        {const_cast<float *>(base + 2 * n), DType::F32, dims, {}}},
                       {out.data(), DType::F32, dims, {}});
  };
  for (int t = 0; t < kThreads; ++t) {
    inputs[t].resize(3 * n);
    for (float &x : inputs[t])
      x = dist(engine);
    ASSERT_TRUE(run(t, alone[t]));
  }
  std::atomic<int> ready{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready.load() < kThreads) {
      }
      for (int repeat = 0; repeat < 3; ++repeat)
        if (!run(t, together[t]) || together[t] != alone[t])
          ++failures;
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Runtime, EveryStageHasItsIR) {
  Runtime runtime;
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.alibi = AlibiSpec{2, 0, false};
  Expected<X86Kernel> kernel = runtime.getX86(Spec::fromBuilder(spec, kShape));
  ASSERT_TRUE(kernel) << kernel.error();
  auto stage = [&](const char *name) {
    Expected<std::string> text = kernel->ir(name);
    EXPECT_TRUE(text) << name << ": " << text.error();
    return text ? *text : std::string();
  };
  EXPECT_NE(stage("source").find("pe.rope"), std::string::npos);
  EXPECT_NE(stage("source").find("pe.alibi"), std::string::npos);
  std::string fused = stage("fused");
  EXPECT_EQ(fused.find("= pe.rope"), std::string::npos); // the op is gone, its attribute fused
  EXPECT_NE(fused.find("encodings([#pe.rope"), std::string::npos);
  EXPECT_NE(fused.find("#pe.alibi"), std::string::npos);
  std::string tiled = stage("tiled");
  EXPECT_NE(tiled.find("func.func @pejit_item"), std::string::npos);
  EXPECT_EQ(tiled.find("attn.qk_transform"), std::string::npos) // hooks expanded
      << tiled.substr(0, 600);
  EXPECT_NE(stage("llvm").find("llvm.func @pejit_item"), std::string::npos);
  EXPECT_NE(stage("llvm-ir").find("define"), std::string::npos);
  std::string assembly = stage("asm");
  EXPECT_NE(assembly.find("vfmadd"), std::string::npos);
  // The code that runs, part by part: the item's part, and the prologue's.
  size_t item = assembly.find("pejit_item:"), prologue = assembly.find("pejit_prologue:");
  ASSERT_NE(item, std::string::npos);
  ASSERT_NE(prologue, std::string::npos);
  EXPECT_NE(assembly.rfind("# ---- codegen part", item),
            assembly.rfind("# ---- codegen part", prologue));
  Expected<std::string> unknown = kernel->ir("ptx");
  EXPECT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("unknown stage 'ptx'"), std::string::npos);
}

TEST(Runtime, BadSourcesAreErrorValues) {
  Runtime runtime;
  Expected<Spec> noAttention = Spec::fromText("func.func @f() { return }");
  EXPECT_FALSE(noAttention);
  Expected<Spec> bad = Spec::fromText(R"(
    func.func @f(%q: tensor<1x12x8x64xf32>, %k: tensor<1x5x8x64xf32>, %v: tensor<1x5x8x64xf32>) -> tensor<1x12x8x64xf32> {
      %o = attn.attention %q, %k, %v : tensor<1x12x8x64xf32>, tensor<1x5x8x64xf32>, tensor<1x5x8x64xf32> -> tensor<1x12x8x64xf32>
      return %o : tensor<1x12x8x64xf32>
    })",
                                      "gqa.mlir");
  ASSERT_TRUE(bad);
  Expected<X86Kernel> kernel = runtime.getX86(*bad);
  ASSERT_FALSE(kernel);
  EXPECT_NE(kernel.error().find("hq (12) is not a multiple of hkv (5)"), std::string::npos)
      << kernel.error();
  Expected<Spec> missing = Spec::fromFile("/nonexistent/x.mlir");
  EXPECT_FALSE(missing);
  EXPECT_NE(missing.error().find("cannot open"), std::string::npos);
}

TEST(Runtime, UnfusableEncodingIsNamed) {
  Runtime runtime;
  Expected<Spec> spec = Spec::fromText(R"(
    func.func @shaw(%q: tensor<1x2x8x64xf32>, %k: tensor<1x2x8x64xf32>, %v: tensor<1x2x8x64xf32>, %p: tensor<8xi32>, %t: tensor<9x64xf32>) -> tensor<1x2x8x64xf32> {
      %b = pe.relative_key %q, %t <clip = 4> : tensor<1x2x8x64xf32>, tensor<9x64xf32> -> tensor<1x2x8x8xf32>
      %qr = pe.rope %q, %p <layout = half, theta = 10000.0> : tensor<1x2x8x64xf32>, tensor<8xi32>
      %kr = pe.rope %k, %p <layout = half, theta = 10000.0> : tensor<1x2x8x64xf32>, tensor<8xi32>
      %o = attn.attention %qr, %kr, %v key_term(%b : tensor<1x2x8x8xf32>) : tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32>, tensor<1x2x8x64xf32> -> tensor<1x2x8x64xf32>
      return %o : tensor<1x2x8x64xf32>
    })");
  ASSERT_TRUE(spec);
  Expected<X86Kernel> kernel = runtime.getX86(*spec);
  ASSERT_FALSE(kernel);
  EXPECT_NE(kernel.error().find("'pe.relative_key' cannot be compiled"), std::string::npos)
      << kernel.error();
}

TEST(Runtime, BadBuffersAreErrorValues) {
  Runtime runtime;
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec(kShape));
  ASSERT_TRUE(kernel) << kernel.error();
  std::vector<float> q(2 * 40 * 64), k(q.size()), v(q.size());
  std::vector<float> out(q.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<int64_t> dims{1, 2, 40, 64};
  TensorView qv{q.data(), DType::F32, dims, {}}, kv{k.data(), DType::F32, dims, {}},
      vv{v.data(), DType::F32, dims, {}}, ov{out.data(), DType::F32, dims, {}};
  auto expectError = [&](std::vector<TensorView> inputs, TensorView output, const char *phrase) {
    Status status = kernel->run(inputs, output);
    ASSERT_FALSE(status) << "expected an error containing: " << phrase;
    EXPECT_NE(status.message().find(phrase), std::string::npos) << status.message();
  };
  expectError({qv, kv}, ov, "expected 3 to 5 inputs");
  TensorView nullKey = kv;
  nullKey.data = nullptr;
  expectError({qv, nullKey, vv}, ov, "input 1 (key): data pointer is null");
  TensorView halfValue = vv;
  halfValue.dtype = DType::F16;
  expectError({qv, kv, halfValue}, ov, "input 2 (value): dtype float16 is not supported");
  TensorView wrongShape = qv;
  wrongShape.shape = {1, 2, 41, 64};
  expectError({wrongShape, kv, vv}, ov,
              "input 0 (query): shape [1, 2, 41, 64] does not match the kernel's [1, 2, 40, 64]");
  TensorView strided = qv;
  strided.strides = {5120, 2560, 64, 2};
  expectError({strided, kv, vv}, ov, "the last dimension must be contiguous");
  std::vector<int64_t> positions(41);
  TensorView badPositions{positions.data(), DType::I64, {41}, {}};
  expectError({qv, kv, vv, badPositions}, ov, "input 3 (query_positions): shape [41]");
  TensorView floatPositions{q.data(), DType::F32, {40}, {}};
  expectError({qv, kv, vv, floatPositions}, ov,
              "dtype float32 is not supported here (expected int64 or int32)");
  // Nothing was written on any failure.
  for (float x : out)
    ASSERT_TRUE(std::isnan(x));
}

TEST(Runtime, StridedViewsMatchContiguousOnes) {
  // Q stored inside a wider buffer ([b, h, s, 2d] with the head in the first
  // half): strides are honoured, not assumed.
  Runtime runtime;
  Expected<X86Kernel> kernel = runtime.getX86(ropeSpec(kShape));
  ASSERT_TRUE(kernel) << kernel.error();
  size_t n = 2 * 40 * 64;
  std::vector<float> q(n), k(n), v(n), wide(2 * n, 7.0f), out1(n), out2(n);
  for (size_t i = 0; i < n; ++i) {
    q[i] = std::sin(0.37f * i);
    k[i] = std::cos(0.11f * i);
    v[i] = std::sin(0.05f * i + 1.0f);
    wide[(i / 64) * 128 + i % 64] = q[i];
  }
  std::vector<int64_t> dims{1, 2, 40, 64};
  TensorView kv{k.data(), DType::F32, dims, {}}, vv{v.data(), DType::F32, dims, {}};
  ASSERT_TRUE(
      kernel->run({{q.data(), DType::F32, dims, {}}, kv, vv}, {out1.data(), DType::F32, dims, {}}));
  ASSERT_TRUE(kernel->run({{wide.data(), DType::F32, dims, {10240, 5120, 128, 1}}, kv, vv},
                          {out2.data(), DType::F32, dims, {}}));
  EXPECT_EQ(out1, out2);
}

} // namespace
