// The kernel reads its encoding operands in the fused op's order
// (encoding_operands), which need not be the function's argument order: the
// runtime binds each argument to the slot the signature records. Every pair
// of encoding operands, declared in both orders, against the float64
// interpreter; each input ends at an inaccessible page, so a table read as
// another (larger) one faults instead of passing unnoticed. Fresh random
// inputs, output poisoned with NaN; f32 tolerance max |out - ref| <= 1e-4
// max |ref|.
#include "tests/runtime/GuardPages.h"
#include "tests/runtime/StandaloneHarness.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cstring>
#include <numeric>

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr double kTolerance = 1e-4;
constexpr int64_t kHeads = 4, kQuerySeq = 40, kKeySeq = 45, kDim = 16;

/// One encoding with one tensor operand; its place in kOperands is its
/// place in the fused op's encodings (the kernel's read order).
struct Operand {
  const char *name;
  const char *encoding;
  std::vector<int64_t> shape;
};

const Operand kOperands[] = {
    {"rope_scale", "#pe.rope<layout = half, theta = 10000.0, runtime_scale = true>", {1}},
    {"t5", "#pe.t5_bias<num_buckets = 32, max_distance = 128>", {32, kHeads}},
    {"bias", "#pe.bias_tensor", {1, kHeads, kQuerySeq, kKeySeq}},
    {"shaw_key", "#pe.relative_key<clip = 2>", {5, kDim}},
    {"shaw_value", "#pe.relative_value<clip = 2>", {kHeads, 5, kDim}},
};

std::string tensorType(const std::vector<int64_t> &shape) {
  std::string text = "tensor<";
  for (int64_t dim : shape)
    text += std::to_string(dim) + "x";
  return text + "f32>";
}

/// A fused attention reading the operands `used` (indices into kOperands,
/// ascending: the encodings' order), declared as arguments in `order`.
std::string fusedSource(const std::vector<size_t> &used, const std::vector<size_t> &order) {
  std::string q = tensorType({1, kHeads, kQuerySeq, kDim});
  std::string kv = tensorType({1, kHeads, kKeySeq, kDim});
  std::string args = "%q: " + q + ", %k: " + kv + ", %v: " + kv;
  for (size_t n : order)
    args += ", %" + std::string(kOperands[n].name) + ": " + tensorType(kOperands[n].shape);
  std::string encodings, names, types;
  for (size_t n : used) {
    encodings += (encodings.empty() ? "" : ", ") + std::string(kOperands[n].encoding);
    names += (names.empty() ? "%" : ", %") + std::string(kOperands[n].name);
    types += (types.empty() ? "" : ", ") + tensorType(kOperands[n].shape);
  }
  return "func.func @f(" + args + ") -> " + q +
         " {\n  %o = attn.attention %q, %k, %v scale(0.25) " + "encodings([" + encodings +
         "]) encoding_operands(" + names + " : " + types + ") : " + q + ", " + kv + ", " + kv +
         " -> " + q + "\n  return %o : " + q + "\n}\n";
}

/// Runs `source` with every input in a guarded buffer; returns the error
/// against the interpreter (or fails the test).
void expectGuardedRunMatches(const std::string &source) {
  SCOPED_TRACE(source);
  Expected<X86Kernel> kernel = suiteKernel(source);
  ASSERT_TRUE(kernel) << kernel.error();
  std::mt19937 &engine = rng(nullptr);
  std::vector<ref::Tensor> inputs;
  std::vector<GuardedBuffer> buffers;
  std::vector<TensorView> views;
  for (const KernelArgument &argument : kernel->signature().arguments) {
    inputs.push_back(randomTensor(argument.shape, engine, inputs.size() < 3 ? 1.0 : 0.5));
    buffers.emplace_back(inputs.back().data.size() * sizeof(float));
    float *data = buffers.back().as<float>();
    for (size_t i = 0; i < inputs.back().data.size(); ++i)
      data[i] = static_cast<float>(inputs.back().data[i]);
  }
  for (size_t n = 0; n < inputs.size(); ++n)
    views.push_back({buffers[n].data(), DType::F32, inputs[n].shape, {}});
  Expected<ref::Tensor> expected =
      interpretReference(source, std::vector<ReferenceArgument>(inputs.begin(), inputs.end()));
  ASSERT_TRUE(expected) << expected.error();
  GuardedBuffer out(expected->data.size() * sizeof(float));
  std::fill_n(out.as<float>(), expected->data.size(), std::numeric_limits<float>::quiet_NaN());
  Status status = kernel->run(views, {out.data(), DType::F32, expected->shape, {}});
  ASSERT_TRUE(status) << status.message();
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < expected->data.size(); ++n) {
    double got = out.as<float>()[n];
    maxRef = std::max(maxRef, std::fabs(expected->data[n]));
    maxErr = std::max(maxErr, std::isnan(got) ? std::numeric_limits<double>::infinity()
                                              : std::fabs(got - expected->data[n]));
  }
  EXPECT_LE(maxErr, kTolerance * maxRef);
}

TEST(OperandOrder, EveryPairOfEncodingOperandsInBothOrders) {
  const size_t count = std::size(kOperands);
  for (size_t a = 0; a < count; ++a)
    for (size_t b = a + 1; b < count; ++b) {
      SCOPED_TRACE(std::string(kOperands[a].name) + " and " + kOperands[b].name);
      expectGuardedRunMatches(fusedSource({a, b}, {a, b}));
      expectGuardedRunMatches(fusedSource({a, b}, {b, a}));
    }
}

// Four operands (the kernel's most), each four-of-five in a shuffled order.
TEST(OperandOrder, FourOperandsInShuffledOrders) {
  const size_t count = std::size(kOperands);
  for (size_t left = 0; left < count; ++left) {
    std::vector<size_t> used;
    for (size_t n = 0; n < count; ++n)
      if (n != left)
        used.push_back(n);
    std::vector<size_t> order = used;
    std::shuffle(order.begin(), order.end(), rng(nullptr));
    if (order == used)
      std::reverse(order.begin(), order.end());
    expectGuardedRunMatches(fusedSource(used, order));
  }
}

// The report's program: a user bias and a Shaw key table, the table
// declared first; pe-fuse-into-attention puts the bias first.
TEST(OperandOrder, UnfusedBiasAndKeyTermDeclaredInTheOtherOrder) {
  std::string q = tensorType({1, 1, kQuerySeq, kDim});
  std::string kv = tensorType({1, 1, kKeySeq, kDim});
  std::string bias = tensorType({1, 1, kQuerySeq, kKeySeq});
  std::string source =
      "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv +
      ", %ak: tensor<5x16xf32>, %ub: " + bias + ") -> " + q +
      " {\n  %t = pe.relative_key %q, %ak <clip = 2> : " + q + ", tensor<5x16xf32> -> " + bias +
      "\n  %o = attn.attention %q, %k, %v bias(%ub : " + bias + ") key_term(%t : " + bias +
      ") : " + q + ", " + kv + ", " + kv + " -> " + q + "\n  return %o : " + q + "\n}\n";
  expectGuardedRunMatches(source);
}

// One table read by two encodings fills both slots.
TEST(OperandOrder, OneArgumentFillingTwoSlots) {
  std::string q = tensorType({1, kHeads, kQuerySeq, kDim});
  std::string kv = tensorType({1, kHeads, kKeySeq, kDim});
  std::string source = "func.func @f(%q: " + q + ", %k: " + kv + ", %v: " + kv +
                       ", %a: tensor<5x16xf32>) -> " + q +
                       " {\n  %o = attn.attention %q, %k, %v encodings([#pe.relative_key<clip = "
                       "2>, #pe.relative_value<clip = 2>]) encoding_operands(%a, %a : "
                       "tensor<5x16xf32>, tensor<5x16xf32>) : " +
                       q + ", " + kv + ", " + kv + " -> " + q + "\n  return %o : " + q + "\n}\n";
  expectGuardedRunMatches(source);
}

TEST(OperandOrder, SignatureTextKeepsSlotsAndRejectsGaps) {
  Expected<KernelSignature> parsed = KernelSignature::parse(
      "query:f32:1x4x8x16 key:f32:1x4x8x16 value:f32:1x4x8x16 encoding_operand=shaw_key_table@1:"
      "f32:5x16 encoding_operand=bias@0:f32:1x4x8x8");
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->arguments[3].slots, std::vector<unsigned>{1});
  EXPECT_EQ(parsed->arguments[4].slots, std::vector<unsigned>{0});
  EXPECT_EQ(KernelSignature::parse(parsed->str())->str(), parsed->str());
  // In order: no slots written, and the old text reads as before.
  Expected<KernelSignature> plain =
      KernelSignature::parse("query:f32:1x4x8x16 encoding_operand=t5_table:f32:32x4 "
                             "encoding_operand=bias:f32:1x4x8x8");
  ASSERT_TRUE(plain) << plain.error();
  EXPECT_EQ(plain->arguments[2].slots, std::vector<unsigned>{1});
  EXPECT_EQ(plain->str().find('@'), std::string::npos);
  Expected<KernelSignature> gap =
      KernelSignature::parse("query:f32:1x4x8x16 encoding_operand=t5_table@2:f32:32x4");
  ASSERT_FALSE(gap);
  EXPECT_NE(gap.error().find("slot 0"), std::string::npos) << gap.error();
  EXPECT_FALSE(KernelSignature::parse("query:f32:4 encoding_operand=a@0:f32:4 "
                                      "encoding_operand=b@0:f32:4"));
  EXPECT_FALSE(KernelSignature::parse("query:f32:4 encoding_operand=a@x:f32:4"));
}

} // namespace
