// The float64 interpreter of source IR against direct ref:: calls, and the
// unfused source against its fused form (hand-written and the compiler's).
#include "tests/cli/CliTestSupport.h"

#include "pejit/interpreter/ReferenceInterpreter.h"
#include "pejit/reference/Absolute.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::clitest;

namespace {

constexpr double kExact = 1e-12;

ref::Tensor interpret(const std::string &source, const std::vector<ReferenceArgument> &args) {
  Expected<ref::Tensor> result = interpretReference(source, args);
  EXPECT_TRUE(result) << result.error();
  return result ? *result : ref::Tensor();
}

double relativeError(const ref::Tensor &out, const ref::Tensor &expected) {
  EXPECT_EQ(out.shape, expected.shape);
  return clitest::relativeError(out.data, expected);
}

struct RopeAlibiInputs {
  ref::Tensor q = randomTensor({1, 4, 48, 64}), k = randomTensor({1, 2, 64, 64}),
              v = randomTensor({1, 2, 64, 64});
  ref::PositionIds qIds = consecutiveIds(77, 48), kIds = consecutiveIds(40, 64);
};

TEST(ReferenceInterpreter, SourceAndFusedFormAgree) {
  SCOPED_TRACE(seedTrace());
  RopeAlibiInputs in;
  ref::Tensor expected = ropeAlibiReference(in.q, in.k, in.v, in.qIds, in.kIds);
  ref::Tensor source = interpret(kRopeAlibiSource, {in.q, in.k, in.v, in.qIds, in.kIds});
  ref::Tensor fused = interpret(kRopeAlibiFused, {in.q, in.k, in.v, in.qIds, in.kIds});
  EXPECT_LE(relativeError(source, expected), kExact);
  EXPECT_LE(relativeError(fused, source), kExact);
  // Position ids matter: other ids give another result.
  ref::Tensor shifted =
      interpret(kRopeAlibiSource, {in.q, in.k, in.v, consecutiveIds(82, 48), in.kIds});
  EXPECT_GT(relativeError(shifted, source), 1e-3);
}

TEST(ReferenceInterpreter, CompilersFusedStageAgrees) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  std::string mlir = dir.file("attn.mlir");
  writeText(mlir, kRopeAlibiSource);
  Result fused = runPejit(dir, {"compile", mlir, "--emit=fused"});
  ASSERT_EQ(fused.exitCode, 0) << fused.err;
  ASSERT_NE(fused.out.find("encodings("), std::string::npos) << fused.out;
  RopeAlibiInputs in;
  ref::Tensor source = interpret(kRopeAlibiSource, {in.q, in.k, in.v, in.qIds, in.kIds});
  EXPECT_LE(relativeError(interpret(fused.out, {in.q, in.k, in.v, in.qIds, in.kIds}), source),
            kExact);
  // Omitted position ids: docs/semantics.md defaults, in both forms.
  ref::Tensor defaults =
      ropeAlibiReference(in.q, in.k, in.v, consecutiveIds(16, 48), consecutiveIds(0, 64));
  EXPECT_LE(relativeError(interpret(kRopeAlibiSource, {in.q, in.k, in.v}), defaults), kExact);
  EXPECT_LE(relativeError(interpret(fused.out, {in.q, in.k, in.v}), defaults), kExact);
  EXPECT_LE(relativeError(interpret(kRopeAlibiFused, {in.q, in.k, in.v, in.qIds}),
                          ropeAlibiReference(in.q, in.k, in.v, in.qIds, consecutiveIds(0, 64))),
            kExact);
}

// Dynamic NTK reads seqLen = max(position) + 1 over queries and keys;
// per-batch [b, s] ids, interleaved layout, GQA 4/2.
TEST(ReferenceInterpreter, DynamicNtkSeqLenSpansQueriesAndKeys) {
  SCOPED_TRACE(seedTrace());
  const char *rope = "<layout = interleaved, theta = 10000.0, "
                     "scaling = #pe.dynamic_ntk<factor = 2.0, original_max_position = 32>>";
  std::string source = std::string(R"(
func.func @ntk(%q: tensor<2x4x8x32xf32>, %k: tensor<2x2x16x32xf32>, %v: tensor<2x2x16x32xf32>,
               %qp: tensor<2x8xi64>, %kp: tensor<2x16xi64>) -> tensor<2x4x8x32xf32> {
  %qr = pe.rope %q, %qp )") +
                       rope + R"( : tensor<2x4x8x32xf32>, tensor<2x8xi64>
  %kr = pe.rope %k, %kp )" +
                       rope + R"( : tensor<2x2x16x32xf32>, tensor<2x16xi64>
  %o = attn.attention %qr, %kr, %v causal
      : tensor<2x4x8x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x32xf32> -> tensor<2x4x8x32xf32>
  return %o : tensor<2x4x8x32xf32>
})";
  std::string fused = std::string(R"(
func.func @ntk(%q: tensor<2x4x8x32xf32>, %k: tensor<2x2x16x32xf32>, %v: tensor<2x2x16x32xf32>,
               %qp: tensor<2x8xi64>, %kp: tensor<2x16xi64>) -> tensor<2x4x8x32xf32> {
  %o = attn.attention %q, %k, %v query_positions(%qp : tensor<2x8xi64>)
      key_positions(%kp : tensor<2x16xi64>) causal encodings([#pe.rope)") +
                      rope + R"(])
      : tensor<2x4x8x32xf32>, tensor<2x2x16x32xf32>, tensor<2x2x16x32xf32> -> tensor<2x4x8x32xf32>
  return %o : tensor<2x4x8x32xf32>
})";
  ref::Tensor q = randomTensor({2, 4, 8, 32}), k = randomTensor({2, 2, 16, 32}),
              v = randomTensor({2, 2, 16, 32});
  std::vector<int64_t> qp, kp;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 8; ++i)
      qp.push_back(50 + 9 * b + i); // max 66
    for (int64_t j = 0; j < 16; ++j)
      kp.push_back(40 + 31 * b + j); // max 86: the keys set seqLen = 87
  }
  ref::PositionIds qIds({2, 8}, qp), kIds({2, 16}, kp);
  ref::RopeConfig config;
  config.layout = ref::RopeLayout::Interleaved;
  config.scaling.kind = ref::RopeScaling::Kind::DynamicNtk;
  config.scaling.factor = 2.0;
  config.scaling.originalMaxPosition = 32;
  ref::AttentionOptions options;
  options.causal = true;
  ref::Tensor expected = ref::attention(ref::applyRope(config, q, qIds, 87),
                                        ref::applyRope(config, k, kIds, 87), v, options);
  ref::Tensor fromSource = interpret(source, {q, k, v, qIds, kIds});
  EXPECT_LE(relativeError(fromSource, expected), kExact);
  EXPECT_LE(relativeError(interpret(fused, {q, k, v, qIds, kIds}), expected), kExact);
  ref::Tensor queriesOnly = ref::attention(ref::applyRope(config, q, qIds, 67),
                                           ref::applyRope(config, k, kIds, 67), v, options);
  EXPECT_GT(relativeError(fromSource, queriesOnly), 1e-6) << "seqLen must include the keys";
}

TEST(ReferenceInterpreter, T5AndShawTermsMatchDirectCalls) {
  SCOPED_TRACE(seedTrace());
  const char *source = R"(
func.func @t5(%q: tensor<2x2x8x16xf32>, %k: tensor<2x2x12x16xf32>, %v: tensor<2x2x12x16xf32>,
              %table: tensor<32x2xf32>, %aK: tensor<9x16xf32>, %aV: tensor<9x16xf32>)
    -> tensor<2x2x8x16xf32> {
  %bias = pe.t5_bias %table <num_buckets = 32, max_distance = 128>
      : tensor<32x2xf32> -> tensor<1x2x8x12xf32>
  %kt = pe.relative_key %q, %aK <clip = 4>
      : tensor<2x2x8x16xf32>, tensor<9x16xf32> -> tensor<2x2x8x12xf32>
  %vt = pe.relative_value %aV <clip = 4> : tensor<9x16xf32> -> tensor<8x12x16xf32>
  %o = attn.attention %q, %k, %v bias(%bias : tensor<1x2x8x12xf32>)
      key_term(%kt : tensor<2x2x8x12xf32>) value_term(%vt : tensor<8x12x16xf32>)
      window(3) softcap(2.5) scale(1.0)
      : tensor<2x2x8x16xf32>, tensor<2x2x12x16xf32>, tensor<2x2x12x16xf32>
      -> tensor<2x2x8x16xf32>
  return %o : tensor<2x2x8x16xf32>
})";
  ref::Tensor q = randomTensor({2, 2, 8, 16}), k = randomTensor({2, 2, 12, 16}),
              v = randomTensor({2, 2, 12, 16}), table = randomTensor({32, 2}),
              aK = randomTensor({9, 16}), aV = randomTensor({9, 16});
  ref::Tensor bias = ref::t5Bias(table, true, 32, 128, 8, 12);
  ref::Tensor keyTerm = ref::relativeKeyTerm(q, aK, 4, 12);
  ref::Tensor valueTerm = ref::relativeValueTerm(aV, 4, 8, 12);
  ref::AttentionOptions options;
  options.scale = 1.0;
  options.window = 3;
  options.softcap = 2.5;
  options.bias = &bias;
  options.keyTerm = &keyTerm;
  options.valueTerm = &valueTerm;
  EXPECT_LE(
      relativeError(interpret(source, {q, k, v, table, aK, aV}), ref::attention(q, k, v, options)),
      kExact);
}

TEST(ReferenceInterpreter, AbsoluteEmbeddingsMatchDirectCalls) {
  SCOPED_TRACE(seedTrace());
  const char *source = R"(
func.func @emb(%x: tensor<2x16x64xf32>, %pos: tensor<2x16xi64>, %table: tensor<512x64xf32>)
    -> tensor<2x16x64xf32> {
  %s = pe.sinusoidal %x, %pos <base = 10000.0> : tensor<2x16x64xf32>, tensor<2x16xi64>
  %e = pe.learned %s, %pos, %table <max_positions = 512>
      : tensor<2x16x64xf32>, tensor<2x16xi64>, tensor<512x64xf32>
  return %e : tensor<2x16x64xf32>
})";
  ref::Tensor x = randomTensor({2, 16, 64}), table = randomTensor({512, 64});
  std::vector<int64_t> ids(32);
  for (int64_t i = 0; i < 32; ++i)
    ids[i] = (i * 37) % 512;
  ref::PositionIds pos({2, 16}, ids);
  ref::Tensor expected = ref::learnedEmbedding(ref::sinusoidalEmbedding(x, pos), pos, table);
  EXPECT_LE(relativeError(interpret(source, {x, pos, table}), expected), kExact);

  ids[5] = 512;
  Expected<ref::Tensor> outside =
      interpretReference(source, {x, ref::PositionIds({2, 16}, ids), table});
  ASSERT_FALSE(outside);
  EXPECT_NE(outside.error().find("position 512 is outside the table's [0, 512)"), std::string::npos)
      << outside.error();
}

TEST(ReferenceInterpreter, ErrorsAreMessages) {
  RopeAlibiInputs in;
  auto error = [](const std::string &source, const std::vector<ReferenceArgument> &args) {
    Expected<ref::Tensor> result = interpretReference(source, args);
    EXPECT_FALSE(result);
    return result ? std::string() : result.error();
  };
  const char *constant = R"(
func.func @f(%k: tensor<1x1x4x8xf32>, %v: tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32> {
  %q = arith.constant dense<0.5> : tensor<1x1x4x8xf32>
  %o = attn.attention %q, %k, %v
      : tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32> -> tensor<1x1x4x8xf32>
  return %o : tensor<1x1x4x8xf32>
})";
  ref::Tensor small = randomTensor({1, 1, 4, 8});
  std::string unsupported = error(constant, {small, small});
  EXPECT_NE(unsupported.find("'arith.constant'"), std::string::npos) << unsupported;
  EXPECT_NE(unsupported.find("not supported"), std::string::npos) << unsupported;

  std::string count = error(kRopeAlibiSource, {in.q, in.k});
  EXPECT_NE(count.find("@attn takes 3 to 5 arguments, got 2"), std::string::npos) << count;
  std::string shape = error(kRopeAlibiSource, {in.q, in.q, in.v});
  EXPECT_NE(shape.find("argument 1 (key, tensor<1x2x64x64xf32>) was given a float tensor "
                       "[1, 4, 48, 64]"),
            std::string::npos)
      << shape;
  std::string kind = error(kRopeAlibiSource, {in.q, in.k, in.v, in.q});
  EXPECT_NE(kind.find("argument 3 (query_positions"), std::string::npos) << kind;
  std::string parse = error("func.func @f( {", {});
  EXPECT_NE(parse.find("<source>"), std::string::npos) << parse;
}

} // namespace
