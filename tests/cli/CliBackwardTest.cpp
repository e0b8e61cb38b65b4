// pejit run --backward (docs/backward.md) as a user runs it: the forward's
// gradients from .npy inputs and dO, written to a directory, with --check
// (each gradient's directional derivative against the float64 reference
// interpreter's central difference). Fresh random inputs; the written
// gradients are also compared with the float64 reference gradients
// (pejit/reference/AttentionGrad.h) at 1e-4, and errors name the flag.
#include "tests/cli/CliTestSupport.h"

#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/ScoreBiasGrad.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::clitest;

namespace {

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

ref::Tensor readTensor(const std::string &path) {
  npy::Expected<npy::Array> array = npy::readNpy(path);
  EXPECT_TRUE(array) << path << ": " << array.error;
  if (!array)
    return {};
  std::vector<float> values = npy::toFloat32(*array);
  return ref::Tensor(array->shape, std::vector<double>(values.begin(), values.end()));
}

double relativeError(const ref::Tensor &got, const ref::Tensor &want) {
  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < want.data.size() && n < got.data.size(); ++n) {
    maxRef = std::max(maxRef, std::fabs(want.data[n]));
    maxErr = std::max(maxErr,
                      std::isnan(got.data[n]) ? INFINITY : std::fabs(got.data[n] - want.data[n]));
  }
  return got.data.size() != want.data.size() ? INFINITY : maxErr / std::max(maxRef, 1e-300);
}

TEST(PejitRunBackward, RopeAndAlibiGradientsWrittenAndChecked) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  ref::Tensor q = randomTensor({1, 4, 48, 64}), k = randomTensor({1, 2, 64, 64}),
              v = randomTensor({1, 2, 64, 64}), dO = randomTensor({1, 4, 48, 64});
  ref::PositionIds qIds = consecutiveIds(1016, 48), kIds = consecutiveIds(1000, 64);
  writeText(dir.file("attn.mlir"), kRopeAlibiSource);
  writeTensor(dir.file("q.npy"), q);
  writeTensor(dir.file("k.npy"), k);
  writeTensor(dir.file("v.npy"), v);
  writeTensor(dir.file("do.npy"), dO);
  writeIds(dir.file("qpos.npy"), qIds, npy::DType::I32);
  writeIds(dir.file("kpos.npy"), kIds, npy::DType::I64);
  Result r = runPejit(dir, {"run", dir.file("attn.mlir"), "--input=@" + dir.file("q.npy"),
                            "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"),
                            "--input=@" + dir.file("qpos.npy"), "--input=@" + dir.file("kpos.npy"),
                            "--backward", "--grad-output=@" + dir.file("do.npy"),
                            "--grads=" + dir.path(), "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  for (const char *name : {"dq", "dk", "dv"})
    EXPECT_TRUE(contains(r.out, std::string(name) + ": directional derivative")) << r.out;
  EXPECT_TRUE(contains(r.out, "check seed")) << r.out;

  // The written gradients against the float64 reference gradients.
  ref::RopeConfig rope;
  int64_t seqLen = ref::maxPositionPlusOne(qIds, kIds);
  ref::Tensor qr = ref::applyRope(rope, q, qIds, seqLen),
              kr = ref::applyRope(rope, k, kIds, seqLen);
  ref::Tensor bias = ref::alibiBias(4, 0, 4, ref::AlibiForm::Causal, 48, 64);
  ref::AttentionOptions options;
  options.causal = true;
  options.bias = &bias;
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dO, options);
  EXPECT_LE(relativeError(readTensor(dir.file("dq.npy")),
                          ref::applyRopeBackward(rope, q, want.dq, qIds, seqLen).dx),
            1e-4);
  EXPECT_LE(relativeError(readTensor(dir.file("dk.npy")),
                          ref::applyRopeBackward(rope, k, want.dk, kIds, seqLen).dx),
            1e-4);
  EXPECT_LE(relativeError(readTensor(dir.file("dv.npy")), want.dv), 1e-4);
}

TEST(PejitRunBackward, AnEncodingTableGetsItsGradientFile) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  const char *source = R"mlir(
func.func @t5(%q: tensor<1x4x40x32xf32>, %k: tensor<1x4x40x32xf32>, %v: tensor<1x4x40x32xf32>,
              %table: tensor<32x4xf32>) -> tensor<1x4x40x32xf32> {
  %o = attn.attention %q, %k, %v causal
      encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>])
      encoding_operands(%table : tensor<32x4xf32>)
      : tensor<1x4x40x32xf32>, tensor<1x4x40x32xf32>, tensor<1x4x40x32xf32> -> tensor<1x4x40x32xf32>
  return %o : tensor<1x4x40x32xf32>
}
)mlir";
  writeText(dir.file("t5.mlir"), source);
  ref::Tensor q = randomTensor({1, 4, 40, 32}), k = randomTensor({1, 4, 40, 32}),
              v = randomTensor({1, 4, 40, 32}), table = randomTensor({32, 4}),
              dO = randomTensor({1, 4, 40, 32});
  for (auto [name, t] : {std::pair<const char *, ref::Tensor *>{"q", &q},
                         {"k", &k},
                         {"v", &v},
                         {"table", &table},
                         {"do", &dO}})
    writeTensor(dir.file(std::string(name) + ".npy"), *t);
  std::vector<std::string> args = {"run",
                                   dir.file("t5.mlir"),
                                   "--input=@" + dir.file("q.npy"),
                                   "--input=@" + dir.file("k.npy"),
                                   "--input=@" + dir.file("v.npy"),
                                   "--input=@" + dir.file("table.npy"),
                                   "--backward",
                                   "--grad-output=@" + dir.file("do.npy"),
                                   "--grads=" + dir.path(),
                                   "--check"};
  Result r = runPejit(dir, args);
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "d_t5_table: directional derivative")) << r.out;
  ref::Tensor bias = ref::t5Bias(table, false, 32, 128, 40, 40);
  ref::AttentionOptions options;
  options.causal = true;
  options.bias = &bias;
  ref::AttentionGradients want = ref::attentionBackward(q, k, v, dO, options);
  ref::Tensor wantTable =
      ref::t5TableGradient(want.dScores, false, 32, 128, ref::RelativeDistance{40, 40});
  EXPECT_LE(relativeError(readTensor(dir.file("d_t5_table.npy")), wantTable), 1e-4);

  // dO of the wrong shape, and --backward without dO: errors that say so.
  writeTensor(dir.file("bad.npy"), randomTensor({1, 4, 40, 16}));
  args[7] = "--grad-output=@" + dir.file("bad.npy");
  Result wrong = runPejit(dir, args);
  EXPECT_NE(wrong.exitCode, 0);
  EXPECT_TRUE(contains(wrong.err, "is not the output's [1, 4, 40, 32]")) << wrong.err;
  args.erase(args.begin() + 7);
  Result missing = runPejit(dir, args);
  EXPECT_NE(missing.exitCode, 0);
  EXPECT_TRUE(contains(missing.err, "--backward needs --grad-output")) << missing.err;
}

TEST(PejitRunBackward, ATrainingForwardHandsItsLseToTheBackward) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  const char *source = R"mlir(
func.func @train(%q: tensor<1x4x24x32xf32>, %k: tensor<1x2x24x32xf32>, %v: tensor<1x2x24x32xf32>)
    -> (tensor<1x4x24x32xf32>, tensor<1x4x24xf32>) {
  %o, %lse = attn.attention %q, %k, %v causal
      : tensor<1x4x24x32xf32>, tensor<1x2x24x32xf32>, tensor<1x2x24x32xf32>
      -> tensor<1x4x24x32xf32>, tensor<1x4x24xf32>
  return %o, %lse : tensor<1x4x24x32xf32>, tensor<1x4x24xf32>
}
)mlir";
  writeText(dir.file("train.mlir"), source);
  ref::Tensor q = randomTensor({1, 4, 24, 32}), k = randomTensor({1, 2, 24, 32}),
              v = randomTensor({1, 2, 24, 32}), dO = randomTensor({1, 4, 24, 32});
  for (auto [name, t] :
       {std::pair<const char *, ref::Tensor *>{"q", &q}, {"k", &k}, {"v", &v}, {"do", &dO}})
    writeTensor(dir.file(std::string(name) + ".npy"), *t);
  Result r =
      runPejit(dir, {"run", dir.file("train.mlir"), "--input=@" + dir.file("q.npy"),
                     "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"), "--backward",
                     "--grad-output=@" + dir.file("do.npy"), "--grads=" + dir.path(), "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "dq: directional derivative")) << r.out;
  ref::AttentionOptions options;
  options.causal = true;
  ref::AttentionGradients want = ref::attentionBackward(q, k, v, dO, options);
  EXPECT_LE(relativeError(readTensor(dir.file("dq.npy")), want.dq), 1e-4);
  EXPECT_LE(relativeError(readTensor(dir.file("dk.npy")), want.dk), 1e-4);
  EXPECT_LE(relativeError(readTensor(dir.file("dv.npy")), want.dv), 1e-4);
}

TEST(PejitCompileBackward, EveryStageOfTheDerivedBackwardAndItsFusedStageCompilesAgain) {
  TempDir dir;
  std::string mlir = dir.file("attn.mlir");
  writeText(mlir, kRopeAlibiSource);
  Result all = runPejit(dir, {"compile", mlir, "--backward", "--emit=all"});
  ASSERT_EQ(all.exitCode, 0) << all.err;
  for (const char *stage : {"source", "fused", "tiled", "llvm", "llvm-ir", "asm"})
    EXPECT_TRUE(contains(all.out, std::string("// ----- stage: ") + stage + " -----")) << stage;
  EXPECT_TRUE(contains(all.out, "attn.attention_backward")) << "the derived source";
  EXPECT_TRUE(contains(all.out, "func.func @pejit_backward_kv")) << "the tiled stage";
  EXPECT_TRUE(contains(all.out, "define ")) << "llvm-ir holds LLVM IR functions";
  // The fused stage's text is a source of its own: it compiles again.
  Result fused = runPejit(dir, {"compile", mlir, "--backward", "--emit=fused"});
  ASSERT_EQ(fused.exitCode, 0) << fused.err;
  std::string again = dir.file("backward.mlir");
  writeText(again, fused.out);
  Result tiled = runPejit(dir, {"compile", again, "--emit=tiled"});
  ASSERT_EQ(tiled.exitCode, 0) << tiled.err;
  EXPECT_TRUE(contains(tiled.out, "func.func @pejit_backward_q")) << tiled.out;
  // NVIDIA: f16/bf16 inputs only, an error that names the type; the bf16
  // form of the same source (ids given) reaches the backward's gpu.module.
  Result f32 = runPejit(dir, {"compile", mlir, "--backward", "--target=nvidia", "--emit=tiled"});
  EXPECT_EQ(f32.exitCode, 1);
  EXPECT_TRUE(contains(f32.err, "element type 'f32' is not supported by the nvidia backward"))
      << f32.err;
  std::string half = dir.file("half.mlir");
  std::string source = kRopeAlibiSource;
  for (size_t at = source.find("xf32>"); at != std::string::npos; at = source.find("xf32>"))
    source.replace(at, 5, "xbf16>");
  writeText(half, source);
  Result nvidia = runPejit(dir, {"compile", half, "--backward", "--target=nvidia", "--emit=tiled"});
  ASSERT_EQ(nvidia.exitCode, 0) << nvidia.err;
  EXPECT_TRUE(contains(nvidia.out, "gpu.func @pejit_backward_kv")) << nvidia.out;
  EXPECT_TRUE(contains(nvidia.out, "kernel = \"pejit_backward\"")) << nvidia.out;
}

// A standalone pe.rope's backward (its adjoint): dO in x's place, dx
// written, and --check's directional derivative against the float64
// reference of the forward.
TEST(PejitRunBackward, AStandaloneRopeWritesAndChecksItsInputsGradient) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("rope.mlir"),
            "func.func @rotate(%x: tensor<1x4x24x64xf32>, %pos: tensor<24xi64>) -> "
            "tensor<1x4x24x64xf32> {\n  %r = pe.rope %x, %pos <layout = interleaved, theta = "
            "10000.0, scaling = #pe.yarn<factor = 4.0, original_max_position = 16>> : "
            "tensor<1x4x24x64xf32>, tensor<24xi64>\n  return %r : tensor<1x4x24x64xf32>\n}\n");
  writeTensor(dir.file("x.npy"), randomTensor({1, 4, 24, 64}));
  writeIds(dir.file("pos.npy"), consecutiveIds(100, 24), npy::DType::I64);
  writeTensor(dir.file("dy.npy"), randomTensor({1, 4, 24, 64}));
  std::string grads = dir.path();
  Result r = runPejit(dir, {"run", dir.file("rope.mlir"), "--input=@" + dir.file("x.npy"),
                            "--input=@" + dir.file("pos.npy"), "--backward",
                            "--grad-output=@" + dir.file("dy.npy"), "--grads=" + grads, "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "dx: directional derivative")) << r.out;
  EXPECT_EQ(readTensor(grads + "/dx.npy").shape, (std::vector<int64_t>{1, 4, 24, 64}));
}

// Linear attention (softmax_keys, causal, RoPE): its derived backward writes
// dq, dk, dv, each checked by a directional derivative of the interpreter.
TEST(PejitRunBackward, ALinearAttentionWritesAndChecksItsGradients) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  const std::string t = "tensor<1x2x40x16xf32>";
  writeText(dir.file("lin.mlir"),
            "func.func @lin(%q: " + t + ", %k: " + t + ", %v: " + t +
                ", %ids: tensor<40xi64>) -> " + t +
                " {\n  %o = attn.linear_attention %q, %k, %v feature_map(softmax_keys) "
                "query_positions(%ids : tensor<40xi64>) key_positions(%ids : tensor<40xi64>) "
                "causal encodings([#pe.rope<layout = half, theta = 10000.0>]) "
                "rope_placement(rope_before_feature_map) : " +
                t + ", " + t + ", " + t + " -> " + t + "\n  return %o : " + t + "\n}\n");
  for (const char *name : {"q", "k", "v", "do"})
    writeTensor(dir.file(std::string(name) + ".npy"), randomTensor({1, 2, 40, 16}));
  writeIds(dir.file("ids.npy"), consecutiveIds(0, 40), npy::DType::I64);
  std::string grads = dir.path();
  Result r = runPejit(dir, {"run", dir.file("lin.mlir"), "--input=@" + dir.file("q.npy"),
                            "--input=@" + dir.file("k.npy"), "--input=@" + dir.file("v.npy"),
                            "--input=@" + dir.file("ids.npy"), "--backward",
                            "--grad-output=@" + dir.file("do.npy"), "--grads=" + grads, "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  for (const char *name : {"dq", "dk", "dv"}) {
    EXPECT_TRUE(contains(r.out, std::string(name) + ": directional derivative")) << r.out;
    EXPECT_EQ(readTensor(grads + "/" + name + ".npy").shape, (std::vector<int64_t>{1, 2, 40, 16}));
  }
}

// A table's gradient (pe.embed_grad) runs and checks like any kernel: its
// [rows, d] output against the float64 interpreter; a bad id is named.
TEST(PejitRunBackward, ATableGradientRunsAndChecks) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("grad.mlir"),
            "func.func @table_grad(%dy: tensor<2x16x64xf32>, %ids: tensor<16xi64>) -> "
            "tensor<32x64xf32> {\n  %g = pe.embed_grad %dy, %ids {scale = 2.0} : "
            "tensor<2x16x64xf32>, tensor<16xi64> -> tensor<32x64xf32>\n  return %g : "
            "tensor<32x64xf32>\n}\n");
  writeTensor(dir.file("dy.npy"), randomTensor({2, 16, 64}));
  ref::PositionIds ids({16}, std::vector<int64_t>{3, 3, 0, 31, 7, 7, 7, 1, 2, 3, 4, 5, 6, 7, 8, 3});
  writeIds(dir.file("ids.npy"), ids, npy::DType::I64);
  Result r = runPejit(dir, {"run", dir.file("grad.mlir"), "--input=@" + dir.file("dy.npy"),
                            "--input=@" + dir.file("ids.npy"), "--check",
                            "--output=@" + dir.file("g.npy")});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_EQ(readTensor(dir.file("g.npy")).shape, (std::vector<int64_t>{32, 64}));
  writeIds(dir.file("bad.npy"), ref::PositionIds({16}, std::vector<int64_t>(16, 32)),
           npy::DType::I64);
  Result bad = runPejit(dir, {"run", dir.file("grad.mlir"), "--input=@" + dir.file("dy.npy"),
                              "--input=@" + dir.file("bad.npy")});
  EXPECT_NE(bad.exitCode, 0);
  EXPECT_TRUE(contains(bad.err, "id 32 at [0] is outside the table's 32 rows")) << bad.err;
}

// A materialized T5 bias's table gradient (pe.score_bias_grad): run on
// its own, checked by the reference interpreter (T5's reference adjoint).
TEST(PejitRunBackward, AMaterializedBiasTableGradientRunsAndChecks) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("grad.mlir"),
            "func.func @t5_grad(%t: tensor<32x4xf32>, %db: tensor<1x4x?x?xf32>) -> "
            "tensor<32x4xf32> {\n  %g = pe.score_bias_grad %db operands(%t : tensor<32x4xf32>) "
            "encoding(#pe.t5_bias<num_buckets = 32, max_distance = 128, bidirectional = false>) "
            ": tensor<1x4x?x?xf32> -> tensor<32x4xf32>\n  return %g : tensor<32x4xf32>\n}\n");
  writeTensor(dir.file("t.npy"), randomTensor({32, 4}));
  writeTensor(dir.file("db.npy"), randomTensor({1, 4, 70, 90}));
  Result r = runPejit(dir, {"run", dir.file("grad.mlir"), "--input=@" + dir.file("t.npy"),
                            "--input=@" + dir.file("db.npy"), "--check",
                            "--output=@" + dir.file("g.npy")});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.err + r.out, "max relative error")) << r.err << r.out;
  EXPECT_EQ(readTensor(dir.file("g.npy")).shape, (std::vector<int64_t>{32, 4}));
}

// A materialized Shaw key term's backward (pe.relative_term_grad): dq and
// the table's gradient written, each checked by its directional derivative
// against the float64 reference of the term.
TEST(PejitRunBackward, AMaterializedShawKeyTermWritesAndChecksItsGradients) {
  SCOPED_TRACE(seedTrace());
  TempDir dir;
  writeText(dir.file("term.mlir"),
            "func.func @key(%q: tensor<1x4x30x32xf32>, %t: tensor<9x32xf32>) -> "
            "tensor<1x4x30x50xf32> {\n  %e = pe.relative_key %q, %t <clip = 4> : "
            "tensor<1x4x30x32xf32>, tensor<9x32xf32> -> tensor<1x4x30x50xf32>\n"
            "  return %e : tensor<1x4x30x50xf32>\n}\n");
  writeTensor(dir.file("q.npy"), randomTensor({1, 4, 30, 32}));
  writeTensor(dir.file("t.npy"), randomTensor({9, 32}));
  writeTensor(dir.file("de.npy"), randomTensor({1, 4, 30, 50}));
  Result r =
      runPejit(dir, {"run", dir.file("term.mlir"), "--input=@" + dir.file("q.npy"),
                     "--input=@" + dir.file("t.npy"), "--backward",
                     "--grad-output=@" + dir.file("de.npy"), "--grads=" + dir.path(), "--check"});
  ASSERT_EQ(r.exitCode, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "dq: directional derivative")) << r.out;
  EXPECT_TRUE(contains(r.out, "d_shaw_key_table: directional derivative")) << r.out;
  EXPECT_EQ(readTensor(dir.file("dq.npy")).shape, (std::vector<int64_t>{1, 4, 30, 32}));
  EXPECT_EQ(readTensor(dir.file("d_shaw_key_table.npy")).shape, (std::vector<int64_t>{9, 32}));
}

} // namespace
