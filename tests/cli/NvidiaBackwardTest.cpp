// The NVIDIA attention backward through the runtime (docs/backward.md,
// "NVIDIA"): Runtime::getNvidia compiles a backward spec, and
// NvidiaKernel::runBackward checks every view before it needs a device:
// the gradients' count, dtypes and shapes, q's dtype, o's (the forward's
// output type), each error naming the tensor; run() says to call
// runBackward. With valid views it needs a CUDA driver: without one, an
// error that says so and nothing written; with one, the gradients are
// written and finite (their numbers against float64 are the GPU check's,
// bench/gpu_check.sh).
#include "pejit/compiler/backends/nvidia/NvidiaLowering.h"
#include "tests/cli/NvidiaStandaloneHarness.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

using namespace pejit;

namespace {

using namespace pejit::nvidiatest;

constexpr const char *kSource =
    "func.func @rope_t5(%q: tensor<1x4x70x64xbf16>, %k: tensor<1x2x70x64xbf16>, "
    "%v: tensor<1x2x70x64xbf16>, %t: tensor<32x4xf32>) -> tensor<1x4x70x64xf32> {\n"
    "  %o = attn.attention %q, %k, %v causal encodings([#pe.rope<layout = half, theta = "
    "10000.0>, #pe.t5_bias<num_buckets = 32, max_distance = 64, bidirectional = false>]) "
    "encoding_operands(%t : tensor<32x4xf32>) : tensor<1x4x70x64xbf16>, tensor<1x2x70x64xbf16>, "
    "tensor<1x2x70x64xbf16> -> tensor<1x4x70x64xf32>\n"
    "  return %o : tensor<1x4x70x64xf32>\n}\n";

TEST(NvidiaBackward, RunBackwardChecksEveryViewThenNeedsADevice) {
  if (findCudaToolkit().empty())
    GTEST_SKIP() << "no CUDA toolkit with nvvm/libdevice here: the GPU lowering links libdevice";
  Expected<Spec> forward = Spec::fromText(kSource);
  ASSERT_TRUE(forward) << forward.error();
  Expected<Spec> backward = Spec::backwardOf(*forward);
  ASSERT_TRUE(backward) << backward.error();
  Runtime runtime(RuntimeOptions{1});
  Expected<NvidiaKernel> kernel = runtime.getNvidia(*backward, "sm_80");
  ASSERT_TRUE(kernel) << kernel.error();
  ASSERT_EQ(kernel->signature().operandGradients.size(), 1u) << "the T5 table's";

  std::vector<uint16_t> q(4 * 70 * 64, 0x3f80), k(2 * 70 * 64, 0x3f80), v(2 * 70 * 64, 0x3f80);
  std::vector<float> table(32 * 4, 0.5f), o(4 * 70 * 64, 1.0f), dO(4 * 70 * 64, 1.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<uint16_t> dq(q.size(), 0x7fc0), dk(k.size(), 0x7fc0), dv(v.size(), 0x7fc0);
  std::vector<float> dtable(table.size(), nan);
  std::vector<TensorView> inputs = {
      {q.data(), DType::BF16, {1, 4, 70, 64}, {}}, {k.data(), DType::BF16, {1, 2, 70, 64}, {}},
      {v.data(), DType::BF16, {1, 2, 70, 64}, {}}, {table.data(), DType::F32, {32, 4}, {}},
      {o.data(), DType::F32, {1, 4, 70, 64}, {}},  {dO.data(), DType::F32, {1, 4, 70, 64}, {}}};
  std::vector<TensorView> gradients = {{dq.data(), DType::BF16, {1, 4, 70, 64}, {}},
                                       {dk.data(), DType::BF16, {1, 2, 70, 64}, {}},
                                       {dv.data(), DType::BF16, {1, 2, 70, 64}, {}},
                                       {dtable.data(), DType::F32, {32, 4}, {}}};
  auto expectError = [&](const std::vector<TensorView> &in, const std::vector<TensorView> &grads,
                         const std::string &names) {
    Status status = kernel->runBackward(in, grads);
    ASSERT_FALSE(status) << "expected an error naming " << names;
    EXPECT_NE(status.message().find(names), std::string::npos) << status.message();
    EXPECT_TRUE(std::isnan(dtable[0])) << "nothing written";
  };
  // Three gradients where four are asked for.
  expectError(inputs, {gradients.begin(), gradients.begin() + 3}, "expected 4 gradients");
  // dq in f32 where the kernel writes bf16.
  std::vector<TensorView> wrongDq = gradients;
  std::vector<float> wide(dq.size());
  wrongDq[0] = {wide.data(), DType::F32, {1, 4, 70, 64}, {}};
  expectError(inputs, wrongDq, "dq");
  // o in bf16 where the forward's output (and so the kernel's o) is f32.
  std::vector<TensorView> wrongO = inputs;
  wrongO[4] = {q.data(), DType::BF16, {1, 4, 70, 64}, {}};
  expectError(wrongO, gradients, "output");
  // A table gradient of the wrong shape.
  std::vector<TensorView> wrongTable = gradients;
  wrongTable[3] = {dtable.data(), DType::F32, {32, 2}, {}};
  expectError(inputs, wrongTable, "operand gradient 0");
  // run() is the forward's.
  Status run = kernel->run(inputs, gradients[0]);
  ASSERT_FALSE(run);
  EXPECT_NE(run.message().find("runBackward"), std::string::npos) << run.message();

  Status status = kernel->runBackward(inputs, gradients);
  if (!hasGpu()) {
    ASSERT_FALSE(status);
    EXPECT_NE(status.message().find("driver"), std::string::npos) << status.message();
    EXPECT_TRUE(std::isnan(dtable[0])) << "nothing written";
    return;
  }
  ASSERT_TRUE(status) << status.message();
  for (float x : dtable)
    EXPECT_TRUE(std::isfinite(x));
}

} // namespace
