// NVIDIA standalone kernels (docs/standalone-kernels.md): pe.rope on its own
// (and its adjoint, a standalone RoPE's backward) and pe.embed with its
// absolute embeddings compile to PTX that ptxas
// accepts for sm_80 and sm_90 (no stack frame and no spills in the row
// kernels), and run through NvidiaKernel::run.
//
// Without a GPU, a fake launcher stands in for the launch: it rebuilds the
// call from exactly the dense buffers, lengths and ids the launch is given,
// evaluates the source in float64 on them and writes the kernel's output
// buffer. So the packing of strided inputs, the ids and tokens tables, the
// launch plan (grid, tables) and the write-back into the caller's view (in
// place, or a cache's rows) are checked against the interpreter on the
// user's own inputs (fresh random values, the output poisoned with NaN).
// With a GPU the kernels themselves are checked the same way (f32 1e-4,
// 16-bit 1e-2).
#include "pejit/core/KernelMeta.h"
#include "tests/cli/NvidiaStandaloneHarness.h"

#include "gtest/gtest.h"

using namespace pejit;

namespace {

using namespace pejit::nvidiatest;

const char *kKvAppend =
    "func.func @kv_append(%k: tensor<?x8x?x128xf32>, %pos: tensor<?xi64>) -> "
    "tensor<?x8x?x128xf32> {\n"
    "  %r = pe.rope %k, %pos <layout = half, theta = 500000.0, scaling = #pe.llama3<factor = 8.0, "
    "low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>> : "
    "tensor<?x8x?x128xf32>, tensor<?xi64>\n  return %r : tensor<?x8x?x128xf32>\n}\n";

const char *kMrope =
    "func.func @mrope(%x: tensor<1x4x40x128xbf16>, %pos: tensor<3x40xi64>) -> "
    "tensor<1x4x40x128xbf16> {\n"
    "  %r = pe.rope %x, %pos <layout = half, theta = 1000000.0, sections = [16, 24, 24]> : "
    "tensor<1x4x40x128xbf16>, tensor<3x40xi64>\n  return %r : tensor<1x4x40x128xbf16>\n}\n";

const char *kPartialPerRow =
    "func.func @partial(%x: tensor<2x3x50x64xf16>, %pos: tensor<2x50xi64>) -> "
    "tensor<2x3x50x64xf16> {\n"
    "  %r = pe.rope %x, %pos <layout = interleaved, theta = 10000.0, rotary_dim = 32> : "
    "tensor<2x3x50x64xf16>, tensor<2x50xi64>\n  return %r : tensor<2x3x50x64xf16>\n}\n";

// The backward of a standalone pe.rope (docs/backward.md): its adjoint,
// the rotation transposed, on a bf16 gradient.
const char *kRopeAdjoint =
    "func.func @rope_backward(%dy: tensor<?x8x?x128xbf16>, %pos: tensor<?xi64>) -> "
    "tensor<?x8x?x128xbf16> {\n"
    "  %r = pe.rope adjoint %dy, %pos <layout = half, theta = 500000.0> : "
    "tensor<?x8x?x128xbf16>, tensor<?xi64>\n  return %r : tensor<?x8x?x128xbf16>\n}\n";

const char *kBert =
    "func.func @bert(%tokens: tensor<?x?xi64>, %words: tensor<100x64xbf16>, %pos: tensor<?xi64>, "
    "%table: tensor<32x64xbf16>) -> tensor<?x?x64xbf16> {\n"
    "  %t = pe.embed %tokens, %words : tensor<?x?xi64>, tensor<100x64xbf16> -> "
    "tensor<?x?x64xbf16>\n"
    "  %x = pe.learned %t, %pos, %table <max_positions = 32> : tensor<?x?x64xbf16>, "
    "tensor<?xi64>, tensor<32x64xbf16>\n  return %x : tensor<?x?x64xbf16>\n}\n";

const char *kTransformer =
    "func.func @transformer(%tokens: tensor<2x9xi64>, %words: tensor<50x512xf32>, %pos: "
    "tensor<9xi64>) -> tensor<2x9x512xf32> {\n"
    "  %t = pe.embed %tokens, %words {scale = 22.627416997969522 : f64} : tensor<2x9xi64>, "
    "tensor<50x512xf32> -> tensor<2x9x512xf32>\n"
    "  %x = pe.sinusoidal %t, %pos <base = 10000.0> : tensor<2x9x512xf32>, tensor<9xi64>\n"
    "  return %x : tensor<2x9x512xf32>\n}\n";

Expected<NvidiaKernel> compileFor(Runtime &runtime, const std::string &source,
                                  const std::string &arch) {
  Expected<Spec> spec = Spec::fromText(source);
  if (!spec)
    return Expected<NvidiaKernel>::error(spec.error());
  return runtime.getNvidia(*spec, arch);
}

TEST(NvidiaStandalone, EveryKernelGivesPtxThatPtxasAcceptsWithoutSpills) {
  PEJIT_REQUIRE_LIBDEVICE();
  struct Source {
    const char *text, *entry;
    std::vector<int64_t> grid; // static kernels: [ceil(s / R), h, b]
  };
  const Source sources[] = {{kKvAppend, "pejit_transform", {}},
                            {kMrope, "pejit_transform", {2, 4, 1}},
                            {kPartialPerRow, "pejit_transform", {1, 3, 2}},
                            {kRopeAdjoint, "pejit_transform", {}},
                            {kBert, "pejit_embed", {}},
                            {kTransformer, "pejit_embed", {2, 1, 2}}};
  Runtime runtime;
  for (const Source &source : sources)
    for (const char *arch : {"sm_80", "sm_90"}) {
      SCOPED_TRACE(std::string(source.text).substr(0, 40) + " " + arch);
      Expected<NvidiaKernel> kernel = compileFor(runtime, source.text, arch);
      ASSERT_TRUE(kernel) << kernel.error();
      EXPECT_NE(kernel->ptx().find(".entry " + std::string(source.entry)), std::string::npos);
      EXPECT_EQ(kernel->ptx().find(".entry pejit_attention"), std::string::npos);
      EXPECT_EQ(kernel->grid(), source.grid);
      // The meta names the entry, and reads back as it was written.
      EXPECT_NE(kernel->launchMeta().find("kernel " + std::string(source.entry)), std::string::npos)
          << kernel->launchMeta();
      NvidiaLaunch launch;
      KernelDescription description;
      Status read = readNvidiaMeta(kernel->launchMeta(), launch, description);
      ASSERT_TRUE(read) << read.message();
      EXPECT_EQ(launch.kernel, source.entry);
      const std::string &log = kernel->ptxasLog();
      if (log.empty())
        continue; // no ptxas: PTX only
      EXPECT_EQ(ptxasProperties(log, source.entry),
                "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads")
          << log;
      EXPECT_NE(ptxasProperties(log, "pejit_prologue")
                    .find("0 bytes spill stores, 0 bytes spill "
                          "loads"),
                std::string::npos)
          << log;
    }
  // A meta naming an unknown entry is an error naming the line.
  NvidiaLaunch launch;
  KernelDescription description;
  Status bad = readNvidiaMeta("arch sm_90\nkernel pejit_other\n", launch, description);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("malformed 'kernel' line"), std::string::npos) << bad.message();
}

/// A RoPE call's arguments from its launch: x [b, h, s, d] and the ids
/// (the source's ids shape, its last dim the call's length).
Rebuild ropeRebuild(int64_t heads, int64_t dim, DType dtype, std::vector<int64_t> idsShape) {
  return [=](const cuda::AttentionKernelImage &image, const cuda::AttentionBuffers &buffers) {
    std::vector<int64_t> shape{image.batch, heads, image.querySeq, dim};
    std::vector<ReferenceArgument> args;
    if (buffers.queryBytes != static_cast<size_t>(product(shape) * dtypeBytes(dtype)))
      return args; // the interpreter then names the missing arguments
    args.push_back(fromDense(buffers.query, dtype, shape));
    args.push_back(launchIds(buffers, idsShape, image.querySeq));
    return args;
  };
}

/// One kernel of a `?` class serves every (b, s): each launch gets the
/// call's rows packed dense, its ids, grid [ceil(s / 32), h, b] and tables
/// of 128 floats per position; the output lands in the caller's view
/// (a fresh tensor, x itself, or rows [t, t + s) of a cache).
TEST(NvidiaStandalone, RopeCallsGiveEachLaunchItsRowsIdsAndPlan) {
  PEJIT_REQUIRE_LIBDEVICE();
  SCOPED_TRACE(clitest::seedTrace());
  Runtime runtime;
  Expected<NvidiaKernel> kernel = compileFor(runtime, kKvAppend, "sm_90");
  ASSERT_TRUE(kernel) << kernel.error();
  FakeLaunches fake(kKvAppend, DType::F32, ropeRebuild(8, 128, DType::F32, {0}));
  for (auto [b, s] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 7}, {1, 64}, {3, 65}, {1, 300}}) {
    SCOPED_TRACE("b=" + std::to_string(b) + " s=" + std::to_string(s));
    Call call;
    call.addFloats({b, 8, s, 128}, DType::F32);
    call.addInts({s}, 0, 100000);
    call.setOutput({b, 8, s, 128}, DType::F32);
    Status status = kernel->run(call.inputs, call.outView());
    ASSERT_TRUE(status) << status.message();
    const cuda::AttentionKernelImage &image = fake.seen.back();
    EXPECT_EQ(image.kernel, "pejit_transform");
    EXPECT_EQ(image.grid, (std::vector<int64_t>{(s + 31) / 32, 8, b}));
    EXPECT_EQ(image.scratchFloats, 128 * s);
    Expected<ref::Tensor> expected = interpretReference(kKvAppend, call.reference);
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(call.output(), *expected), 1e-6);
  }
  // In place: the output is x itself.
  Call inPlace;
  inPlace.addFloats({2, 8, 20, 128}, DType::F32);
  inPlace.addInts({20}, 0, 5000);
  Status status = kernel->run(inPlace.inputs, inPlace.inputs[0]);
  ASSERT_TRUE(status) << status.message();
  Expected<ref::Tensor> expected = interpretReference(kKvAppend, inPlace.reference);
  ASSERT_TRUE(expected) << expected.error();
  EXPECT_LE(relativeError(npy::toFloat32(inPlace.floats[0].bytes), *expected), 1e-6);
  // A KV-append: rows [10, 15) of a [1, 8, 64, 128] cache, the rest of it
  // untouched.
  Call append;
  append.addFloats({1, 8, 5, 128}, DType::F32);
  append.addInts({5}, 10, 14);
  std::vector<float> cache(8 * 64 * 128, -5.0f);
  TensorView rows{
      cache.data() + 10 * 128, DType::F32, {1, 8, 5, 128}, {8 * 64 * 128, 64 * 128, 128, 1}};
  status = kernel->run(append.inputs, rows);
  ASSERT_TRUE(status) << status.message();
  expected = interpretReference(kKvAppend, append.reference);
  ASSERT_TRUE(expected) << expected.error();
  std::vector<float> written;
  for (int64_t h = 0; h < 8; ++h)
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t c = 0; c < 128; ++c) {
        float v = cache[(h * 64 + r) * 128 + c];
        if (r >= 10 && r < 15)
          written.push_back(v);
        else
          ASSERT_EQ(v, -5.0f) << "head " << h << " row " << r;
      }
  EXPECT_LE(relativeError(written, *expected), 1e-6);
}

/// Static kernels: M-RoPE with [3, s] ids in bf16, and a partial
/// interleaved RoPE with ids per batch row in f16.
TEST(NvidiaStandalone, MropeAndPerRowIdsReachTheLaunchAsTheSourceWroteThem) {
  PEJIT_REQUIRE_LIBDEVICE();
  SCOPED_TRACE(clitest::seedTrace());
  struct Case {
    const char *source;
    std::vector<int64_t> shape, idsShape;
    DType dtype;
  };
  const Case cases[] = {{kMrope, {1, 4, 40, 128}, {3, 40}, DType::BF16},
                        {kPartialPerRow, {2, 3, 50, 64}, {2, 50}, DType::F16}};
  Runtime runtime;
  for (const Case &c : cases) {
    SCOPED_TRACE(std::string(c.source).substr(0, 40));
    Expected<NvidiaKernel> kernel = compileFor(runtime, c.source, "sm_80");
    ASSERT_TRUE(kernel) << kernel.error();
    FakeLaunches fake(c.source, c.dtype, ropeRebuild(c.shape[1], c.shape[3], c.dtype, c.idsShape));
    Call call;
    call.addFloats(c.shape, c.dtype);
    call.addInts(c.idsShape, 0, 30000);
    call.setOutput(c.shape, c.dtype);
    Status status = kernel->run(call.inputs, call.outView());
    ASSERT_TRUE(status) << status.message();
    ASSERT_EQ(fake.seen.size(), 1u);
    EXPECT_EQ(fake.seen[0].grid, kernel->grid());
    Expected<ref::Tensor> expected = interpretReference(c.source, call.reference);
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(call.output(), *expected), 1e-2);
  }
}

/// An embedding call's arguments from its launch: the i64 tokens [b, s],
/// the token table [V, d], the ids [s] and (learned) the position table.
Rebuild embedRebuild(std::vector<int64_t> tableShape, DType dtype, int64_t learnedRows) {
  return [=](const cuda::AttentionKernelImage &image, const cuda::AttentionBuffers &buffers) {
    int64_t b = image.batch, s = image.querySeq;
    std::vector<ReferenceArgument> args;
    if (buffers.queryBytes != static_cast<size_t>(b * s * 8) ||
        buffers.keyBytes != static_cast<size_t>(product(tableShape) * dtypeBytes(dtype)) ||
        buffers.encodingOperands.size() != (learnedRows > 0 ? 1u : 0u))
      return args;
    const auto *tokens = static_cast<const int64_t *>(buffers.query);
    args.push_back(ref::PositionIds({b, s}, std::vector<int64_t>(tokens, tokens + b * s)));
    args.push_back(fromDense(buffers.key, dtype, tableShape));
    args.push_back(launchIds(buffers, {0}, s));
    if (learnedRows > 0)
      args.push_back(
          fromDense(buffers.encodingOperands[0].first, dtype, {learnedRows, tableShape[1]}));
    return args;
  };
}

/// BERT (a learned table, a shape class) and the Transformer (sinusoidal
/// at positions up to 1e6, a scale): the launch gets the tokens as i64 and
/// both tables. A token outside the table, or a position outside the
/// learned one, is an error naming it, before any launch, with the output
/// untouched.
TEST(NvidiaStandalone, EmbeddingsGatherTheirTokensAndBadIdsAreErrors) {
  PEJIT_REQUIRE_LIBDEVICE();
  SCOPED_TRACE(clitest::seedTrace());
  Runtime runtime;
  Expected<NvidiaKernel> bert = compileFor(runtime, kBert, "sm_90");
  ASSERT_TRUE(bert) << bert.error();
  {
    FakeLaunches fake(kBert, DType::BF16, embedRebuild({100, 64}, DType::BF16, 32));
    for (auto [b, s] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 7}, {2, 30}}) {
      SCOPED_TRACE("b=" + std::to_string(b) + " s=" + std::to_string(s));
      Call call;
      call.addInts({b, s}, 0, 99);
      call.addFloats({100, 64}, DType::BF16);
      call.addInts({s}, 0, 31);
      call.addFloats({32, 64}, DType::BF16);
      call.setOutput({b, s, 64}, DType::BF16);
      Status status = bert->run(call.inputs, call.outView());
      ASSERT_TRUE(status) << status.message();
      EXPECT_EQ(fake.seen.back().kernel, "pejit_embed");
      EXPECT_EQ(fake.seen.back().grid, (std::vector<int64_t>{1, 1, b}));
      EXPECT_EQ(fake.seen.back().scratchFloats, 64 * s);
      Expected<ref::Tensor> expected = interpretReference(kBert, call.reference);
      ASSERT_TRUE(expected) << expected.error();
      EXPECT_LE(relativeError(call.output(), *expected), 1e-2);
    }
    struct Bad {
      int64_t token, position;
      const char *message;
    };
    for (const Bad &bad : {Bad{100, 3, "token 100 at [1, 2] is outside the table's 100 rows"},
                           Bad{-1, 3, "token -1 at [1, 2]"}, Bad{5, 32, "position 32"}}) {
      SCOPED_TRACE(bad.message);
      Call call;
      call.addInts({2, 4}, 0, 99);
      call.addFloats({100, 64}, DType::BF16);
      call.addInts({4}, 0, 31);
      call.addFloats({32, 64}, DType::BF16);
      call.ints[0][6] = bad.token;
      call.ints[1][2] = bad.position;
      call.setOutput({2, 4, 64}, DType::BF16);
      size_t launches = fake.seen.size();
      Status status = bert->run(call.inputs, call.outView());
      ASSERT_FALSE(status);
      EXPECT_NE(status.message().find(bad.message), std::string::npos) << status.message();
      EXPECT_EQ(fake.seen.size(), launches);
      for (uint8_t byte : call.out.bytes)
        ASSERT_EQ(byte, 0xff);
    }
  }
  Expected<NvidiaKernel> transformer = compileFor(runtime, kTransformer, "sm_90");
  ASSERT_TRUE(transformer) << transformer.error();
  FakeLaunches fake(kTransformer, DType::F32, embedRebuild({50, 512}, DType::F32, 0));
  Call call;
  call.addInts({2, 9}, 0, 49);
  call.addFloats({50, 512}, DType::F32);
  call.addInts({9}, 0, 1000000);
  call.setOutput({2, 9, 512}, DType::F32);
  Status status = transformer->run(call.inputs, call.outView());
  ASSERT_TRUE(status) << status.message();
  EXPECT_EQ(fake.seen.back().grid, (std::vector<int64_t>{2, 1, 2})); // R = 4096 / 512 = 8 rows
  Expected<ref::Tensor> expected = interpretReference(kTransformer, call.reference);
  ASSERT_TRUE(expected) << expected.error();
  EXPECT_LE(relativeError(call.output(), *expected), 1e-6);
}

/// The kernels themselves, on a GPU: every source above on fresh inputs
/// against float64 (f32 outputs 1e-4, 16-bit 1e-2).
TEST(NvidiaStandalone, KernelsMatchTheReferenceOnTheGpu) {
  PEJIT_REQUIRE_LIBDEVICE();
  if (!hasGpu())
    GTEST_SKIP() << "no CUDA driver and GPU here: the fake-launch tests check the runtime's side, "
                    "the GPU check the kernels";
  SCOPED_TRACE(clitest::seedTrace());
  std::string arch = cuda::Driver::get(nullptr)->device().arch();
  Runtime runtime;
  auto check = [&](const char *source, Call &call, double tolerance) {
    Expected<NvidiaKernel> kernel = compileFor(runtime, source, arch);
    ASSERT_TRUE(kernel) << kernel.error();
    Status status = kernel->run(call.inputs, call.outView());
    ASSERT_TRUE(status) << status.message();
    Expected<ref::Tensor> expected = interpretReference(source, call.reference);
    ASSERT_TRUE(expected) << expected.error();
    EXPECT_LE(relativeError(call.output(), *expected), tolerance);
  };
  for (int64_t s : {1, 7, 64, 65, 1000}) {
    SCOPED_TRACE("kv_append s=" + std::to_string(s));
    Call call;
    call.addFloats({2, 8, s, 128}, DType::F32);
    call.addInts({s}, 0, 100000);
    call.setOutput({2, 8, s, 128}, DType::F32);
    check(kKvAppend, call, 1e-4);
  }
  for (int64_t s : {1, 300}) {
    SCOPED_TRACE("rope adjoint s=" + std::to_string(s));
    Call call;
    call.addFloats({2, 8, s, 128}, DType::BF16);
    call.addInts({s}, 0, 100000);
    call.setOutput({2, 8, s, 128}, DType::BF16);
    check(kRopeAdjoint, call, 1e-2);
  }
  Call mrope, partial, bertCall, transformerCall;
  mrope.addFloats({1, 4, 40, 128}, DType::BF16);
  mrope.addInts({3, 40}, 0, 30000);
  mrope.setOutput({1, 4, 40, 128}, DType::BF16);
  check(kMrope, mrope, 1e-2);
  partial.addFloats({2, 3, 50, 64}, DType::F16);
  partial.addInts({2, 50}, 0, 30000);
  partial.setOutput({2, 3, 50, 64}, DType::F16);
  check(kPartialPerRow, partial, 1e-2);
  bertCall.addInts({2, 30}, 0, 99);
  bertCall.addFloats({100, 64}, DType::BF16);
  bertCall.addInts({30}, 0, 31);
  bertCall.addFloats({32, 64}, DType::BF16);
  bertCall.setOutput({2, 30, 64}, DType::BF16);
  check(kBert, bertCall, 1e-2);
  transformerCall.addInts({2, 9}, 0, 49);
  transformerCall.addFloats({50, 512}, DType::F32);
  transformerCall.addInts({9}, 0, 1000000);
  transformerCall.setOutput({2, 9, 512}, DType::F32);
  check(kTransformer, transformerCall, 1e-4);
}

} // namespace
