// The x86 backward kernel (attn.attention_backward, docs/backward.md) against
// the float64 reference gradients (pejit/reference/AttentionGrad.h, checked
// by finite differences in tests/unit): fresh random q, k, v and dO, o from
// the float64 forward, every gradient poisoned with NaN before the run,
// max |grad - ref| <= 1e-4 max |ref| (f32). Also: bitwise-identical
// gradients across runs and thread counts, and the run's errors.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

struct BackwardCase {
  int64_t batch = 1, heads = 2, kvHeads = 1, sq = 7, skv = 7, d = 16, dv = 16;
  bool causal = false;
  std::optional<int64_t> window, right;
  std::optional<double> softcap;
  bool shapeClass = false; ///< `?` lengths: one kernel for every length

  std::string str() const {
    return "b " + std::to_string(batch) + " hq " + std::to_string(heads) + " hkv " +
           std::to_string(kvHeads) + " sq " + std::to_string(sq) + " skv " + std::to_string(skv) +
           " d " + std::to_string(d) + " dv " + std::to_string(dv) + (causal ? " causal" : "") +
           (window ? " window " + std::to_string(*window) : "") +
           (right ? " right " + std::to_string(*right) : "") + (softcap ? " softcap" : "") +
           (shapeClass ? " (shape class)" : "");
  }
};

std::string tensorType(int64_t a, int64_t b, const std::string &c, int64_t d) {
  return "tensor<" + std::to_string(a) + "x" + std::to_string(b) + "x" + c + "x" +
         std::to_string(d) + "xf32>";
}

/// The backward of one attention as a user writes it.
std::string backwardSource(const BackwardCase &c) {
  std::string sq = c.shapeClass ? "?" : std::to_string(c.sq);
  std::string skv = c.shapeClass ? "?" : std::to_string(c.skv);
  std::string q = tensorType(c.batch, c.heads, sq, c.d),
              k = tensorType(c.batch, c.kvHeads, skv, c.d),
              v = tensorType(c.batch, c.kvHeads, skv, c.dv),
              o = tensorType(c.batch, c.heads, sq, c.dv);
  std::string attrs = std::string(c.causal ? " causal" : "") +
                      (c.window ? " window(" + std::to_string(*c.window) + ")" : "") +
                      (c.right ? " window_right(" + std::to_string(*c.right) + ")" : "") +
                      (c.softcap ? " softcap(" + std::to_string(*c.softcap) + ")" : "");
  return "func.func @backward(%q: " + q + ", %k: " + k + ", %v: " + v + ", %o: " + o +
         ", %do: " + o + ") -> (" + q + ", " + k + ", " + v +
         ") {\n  %dq, %dk, %dv = attn.attention_backward %q, %k, %v, %o, %do" + attrs + " : " + q +
         ", " + k + ", " + v + ", " + o + ", " + o + " -> " + q + ", " + k + ", " + v +
         "\n  return %dq, %dk, %dv : " + q + ", " + k + ", " + v + "\n}\n";
}

struct Gradients {
  std::vector<float> dq, dk, dv;
};

struct Problem {
  ref::Tensor q, k, v, o, dOut;
  std::vector<float> qf, kf, vf, of, dOf;
  ref::AttentionOptions options;
};

Problem drawProblem(const BackwardCase &c, std::mt19937 &engine) {
  Problem p;
  p.q = randomTensor({c.batch, c.heads, c.sq, c.d}, engine);
  p.k = randomTensor({c.batch, c.kvHeads, c.skv, c.d}, engine);
  p.v = randomTensor({c.batch, c.kvHeads, c.skv, c.dv}, engine);
  p.dOut = randomTensor({c.batch, c.heads, c.sq, c.dv}, engine);
  p.options.causal = c.causal;
  p.options.window = c.window;
  p.options.windowRight = c.right;
  p.options.softcap = c.softcap;
  // The forward's output as the training forward hands it over: f32.
  p.o = ref::attention(p.q, p.k, p.v, p.options);
  for (double &x : p.o.data)
    x = static_cast<float>(x);
  p.qf = toFloat(p.q), p.kf = toFloat(p.k), p.vf = toFloat(p.v), p.of = toFloat(p.o);
  p.dOf = toFloat(p.dOut);
  return p;
}

/// Runs the kernel on the problem, every gradient poisoned with NaN first.
Status runKernel(const X86Kernel &kernel, Problem &p, Gradients &g) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  g.dq.assign(p.qf.size(), nan), g.dk.assign(p.kf.size(), nan), g.dv.assign(p.vf.size(), nan);
  std::vector<TensorView> inputs = {{p.qf.data(), DType::F32, p.q.shape, {}},
                                    {p.kf.data(), DType::F32, p.k.shape, {}},
                                    {p.vf.data(), DType::F32, p.v.shape, {}},
                                    {p.of.data(), DType::F32, p.o.shape, {}},
                                    {p.dOf.data(), DType::F32, p.dOut.shape, {}}};
  return kernel.runBackward(inputs, {{g.dq.data(), DType::F32, p.q.shape, {}},
                                     {g.dk.data(), DType::F32, p.k.shape, {}},
                                     {g.dv.data(), DType::F32, p.v.shape, {}}});
}

void expectGradientsMatch(const BackwardCase &c, double tolerance = 1e-4) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.str());
  Expected<Spec> spec = Spec::fromText(backwardSource(c));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  Problem p = drawProblem(c, engine);
  Gradients g;
  Status status = runKernel(*kernel, p, g);
  ASSERT_TRUE(status) << status.message();
  const ref::AttentionGradients want = ref::attentionBackward(p.q, p.k, p.v, p.dOut, p.options);
  EXPECT_LE(gradientError(g.dq, want.dq), tolerance) << "dq";
  EXPECT_LE(gradientError(g.dk, want.dk), tolerance) << "dk";
  EXPECT_LE(gradientError(g.dv, want.dv), tolerance) << "dv";
}

TEST(Backward, PlainAndCausalAtSeveralLengths) {
  for (int64_t length : {1, 7, 65, 300, 1000})
    for (bool causal : {false, true}) {
      BackwardCase c;
      c.sq = c.skv = length;
      c.causal = causal;
      if (sampledCase())
        expectGradientsMatch(c);
    }
}

TEST(Backward, QueriesAndKeysOfDifferentLengths) {
  // sq < skv (bottom-right aligned) and sq > skv (causal: rows that see no
  // key get dq = 0).
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{5, 40}, {40, 5}, {1, 65}})
    for (bool causal : {false, true}) {
      BackwardCase c;
      c.sq = sq, c.skv = skv, c.causal = causal;
      if (sampledCase())
        expectGradientsMatch(c);
    }
}

TEST(Backward, GroupedHeadsSumKeyAndValueGradients) {
  BackwardCase c;
  c.batch = 2, c.heads = 8, c.kvHeads = 2, c.sq = 33, c.skv = 47, c.causal = true;
  expectGradientsMatch(c);
  c.kvHeads = 1; // MQA
  expectGradientsMatch(c);
}

TEST(Backward, WindowsOnBothSidesAndSoftcap) {
  BackwardCase c;
  c.sq = c.skv = 70;
  c.window = 9;
  expectGradientsMatch(c);
  c.right = 4;
  expectGradientsMatch(c);
  c.window.reset();
  expectGradientsMatch(c);
  c.causal = true, c.window = 12, c.right.reset(), c.softcap = 0.7;
  expectGradientsMatch(c);
  c.causal = false, c.window.reset(), c.d = 32, c.dv = 8, c.softcap = 2.0;
  expectGradientsMatch(c);
}

TEST(Backward, LongRow) {
  BackwardCase c;
  c.heads = c.kvHeads = 1, c.sq = c.skv = 1000, c.d = c.dv = 32, c.causal = true;
  if (sampledCase())
    expectGradientsMatch(c);
}

TEST(Backward, ShapeClassAtSeveralLengths) {
  BackwardCase c;
  c.shapeClass = true;
  c.causal = true;
  // One kernel, compiled once, for every length.
  for (auto [sq, skv] : {std::pair<int64_t, int64_t>{1, 1}, {9, 9}, {17, 80}, {130, 130}}) {
    c.sq = sq, c.skv = skv;
    expectGradientsMatch(c);
  }
}

TEST(Backward, BitwiseIdenticalAcrossRunsAndThreadCounts) {
  BackwardCase c;
  c.batch = 2, c.heads = 4, c.kvHeads = 2, c.sq = c.skv = 97, c.causal = true, c.softcap = 1.5;
  Expected<Spec> spec = Spec::fromText(backwardSource(c));
  ASSERT_TRUE(spec) << spec.error();
  Problem p = drawProblem(c, rng(nullptr));
  std::vector<Gradients> results;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    Expected<X86Kernel> kernel = runtime.getX86(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    results.emplace_back();
    Status status = runKernel(*kernel, p, results.back());
    ASSERT_TRUE(status) << status.message();
  }
  for (size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(std::memcmp(results[r].dq.data(), results[0].dq.data(), results[0].dq.size() * 4), 0)
        << "dq of run " << r;
    EXPECT_EQ(std::memcmp(results[r].dk.data(), results[0].dk.data(), results[0].dk.size() * 4), 0)
        << "dk of run " << r;
    EXPECT_EQ(std::memcmp(results[r].dv.data(), results[0].dv.data(), results[0].dv.size() * 4), 0)
        << "dv of run " << r;
  }
}

TEST(Backward, DerivedFromTheForwardSpecAfterTheForwardKernel) {
  // What training does: the forward kernel gives o, the backward derived
  // from the same spec gives the gradients.
  BackwardCase c;
  c.batch = 2, c.heads = 4, c.kvHeads = 2, c.sq = c.skv = 50, c.causal = true;
  AttentionSpec attention;
  attention.causal = true;
  Shape shape{c.batch, c.heads, c.kvHeads, c.sq, c.skv, c.d, c.dv};
  Spec forward = Spec::fromBuilder(attention, shape);
  Expected<X86Kernel> forwardKernel = suiteRuntime().getX86(forward);
  ASSERT_TRUE(forwardKernel) << forwardKernel.error();
  Expected<X86Kernel> backwardKernel = suiteRuntime().getX86Backward(forward);
  ASSERT_TRUE(backwardKernel) << backwardKernel.error();
  Problem p = drawProblem(c, rng(nullptr));
  std::vector<TensorView> qkv = {{p.qf.data(), DType::F32, p.q.shape, {}},
                                 {p.kf.data(), DType::F32, p.k.shape, {}},
                                 {p.vf.data(), DType::F32, p.v.shape, {}}};
  std::fill(p.of.begin(), p.of.end(), std::numeric_limits<float>::quiet_NaN());
  Status ran = forwardKernel->run(qkv, {p.of.data(), DType::F32, p.o.shape, {}});
  ASSERT_TRUE(ran) << ran.message();
  Gradients g;
  Status status = runKernel(*backwardKernel, p, g);
  ASSERT_TRUE(status) << status.message();
  const ref::AttentionGradients want = ref::attentionBackward(p.q, p.k, p.v, p.dOut, p.options);
  EXPECT_LE(gradientError(g.dq, want.dq), 1e-4) << "dq";
  EXPECT_LE(gradientError(g.dk, want.dk), 1e-4) << "dk";
  EXPECT_LE(gradientError(g.dv, want.dv), 1e-4) << "dv";
}

/// A fused score bias's backward (dq, dk, dv; its tensor held fixed), from
/// the forward source `forward` whose fourth argument (if any) is the
/// encoding's tensor `operand`; `bias` is its float64 [1|b, h, sq, skv].
void expectScoreBiasBackward(const std::string &forward, const BackwardCase &c,
                             const ref::Tensor *operand, const ref::Tensor &bias) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.str());
  Expected<Spec> spec = Spec::fromText(forward);
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*spec, /*operandGradients=*/false);
  ASSERT_TRUE(kernel) << kernel.error();
  Problem p = drawProblem(c, engine);
  p.options.bias = &bias;
  p.o = ref::attention(p.q, p.k, p.v, p.options);
  p.of = toFloat(p.o);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Gradients g;
  g.dq.assign(p.qf.size(), nan), g.dk.assign(p.kf.size(), nan), g.dv.assign(p.vf.size(), nan);
  std::vector<float> operandFloats = operand ? toFloat(*operand) : std::vector<float>();
  std::vector<TensorView> inputs = {{p.qf.data(), DType::F32, p.q.shape, {}},
                                    {p.kf.data(), DType::F32, p.k.shape, {}},
                                    {p.vf.data(), DType::F32, p.v.shape, {}}};
  if (operand)
    inputs.push_back({operandFloats.data(), DType::F32, operand->shape, {}});
  inputs.push_back({p.of.data(), DType::F32, p.o.shape, {}});
  inputs.push_back({p.dOf.data(), DType::F32, p.dOut.shape, {}});
  Status status = kernel->runBackward(inputs, {{g.dq.data(), DType::F32, p.q.shape, {}},
                                               {g.dk.data(), DType::F32, p.k.shape, {}},
                                               {g.dv.data(), DType::F32, p.v.shape, {}}});
  ASSERT_TRUE(status) << status.message();
  const ref::AttentionGradients want = ref::attentionBackward(p.q, p.k, p.v, p.dOut, p.options);
  EXPECT_LE(gradientError(g.dq, want.dq), 1e-4) << "dq";
  EXPECT_LE(gradientError(g.dk, want.dk), 1e-4) << "dk";
  EXPECT_LE(gradientError(g.dv, want.dv), 1e-4) << "dv";
}

std::string fusedSource(const BackwardCase &c, const std::string &attrs,
                        const std::string &operandType) {
  std::string q = tensorType(c.batch, c.heads, std::to_string(c.sq), c.d),
              k = tensorType(c.batch, c.kvHeads, std::to_string(c.skv), c.d),
              v = tensorType(c.batch, c.kvHeads, std::to_string(c.skv), c.dv),
              o = tensorType(c.batch, c.heads, std::to_string(c.sq), c.dv);
  std::string operand = operandType.empty() ? "" : ", %e: " + operandType;
  std::string operands = operandType.empty() ? "" : " encoding_operands(%e : " + operandType + ")";
  return "func.func @f(%q: " + q + ", %k: " + k + ", %v: " + v + operand + ") -> " + o +
         " {\n  %o = attn.attention %q, %k, %v" + attrs + operands + " : " + q + ", " + k + ", " +
         v + " -> " + o + "\n  return %o : " + o + "\n}\n";
}

TEST(Backward, ScoreBiasesByIndexPassTheScoreGradientThrough) {
  BackwardCase c;
  c.batch = 2, c.heads = 4, c.kvHeads = 2, c.sq = 40, c.skv = 56, c.causal = true;
  // ALiBi, causal and symmetric forms (slopes of 8 heads, this shard 4..7).
  for (auto [form, name] :
       {std::pair{ref::AlibiForm::Causal, "causal"}, {ref::AlibiForm::Symmetric, "symmetric"}}) {
    ref::Tensor bias = ref::alibiBias(8, 4, 4, form, c.sq, c.skv);
    expectScoreBiasBackward(
        fusedSource(c,
                    std::string(" causal encodings([#pe.alibi<num_heads = 8, head_offset = 4, "
                                "form = ") +
                        name + ">])",
                    ""),
        c, nullptr, bias);
  }
  // T5, bidirectional, without the causal mask, and with softcap.
  c.causal = false, c.softcap = 1.5;
  ref::Tensor table = randomTensor({32, 4}, rng(nullptr), 2.0);
  ref::Tensor t5 = ref::t5Bias(table, true, 32, 128, c.sq, c.skv);
  expectScoreBiasBackward(
      fusedSource(c,
                  " softcap(1.5) encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, "
                  "bidirectional = true>])",
                  "tensor<32x4xf32>"),
      c, &table, t5);
  // A bias tensor [1, hq, sq, skv] with a -inf entry.
  c.softcap.reset();
  ref::Tensor user = randomTensor({1, 4, c.sq, c.skv}, rng(nullptr), 2.0);
  user.at(0, 1, 3, 7) = -std::numeric_limits<double>::infinity();
  expectScoreBiasBackward(fusedSource(c, " encodings([#pe.bias_tensor])", "tensor<1x4x40x56xf32>"),
                          c, &user, user);
}

TEST(Backward, T5TableGradientSummedInItemOrder) {
  // d table[n, h] = sum of dS over the scores in bucket n: each kv item
  // adds into a partial table of its own; the run sums them in item order.
  for (bool bidirectional : {true, false}) {
    BackwardCase c;
    c.batch = 2, c.heads = 4, c.kvHeads = 2, c.sq = 45, c.skv = 70, c.causal = !bidirectional;
    SCOPED_TRACE(c.str());
    std::string attr = std::string(c.causal ? " causal" : "") +
                       " encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, "
                       "bidirectional = " +
                       (bidirectional ? "true" : "false") + ">])";
    Expected<Spec> spec = Spec::fromText(fusedSource(c, attr, "tensor<32x4xf32>"));
    ASSERT_TRUE(spec) << spec.error();
    Expected<X86Kernel> kernel = suiteRuntime().getX86Backward(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    Problem p = drawProblem(c, rng(nullptr));
    ref::Tensor table = randomTensor({32, 4}, rng(nullptr), 2.0);
    ref::Tensor bias = ref::t5Bias(table, bidirectional, 32, 128, c.sq, c.skv);
    p.options.bias = &bias;
    p.o = ref::attention(p.q, p.k, p.v, p.options);
    p.of = toFloat(p.o);
    std::vector<float> tablef = toFloat(table);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> dq(p.qf.size(), nan), dk(p.kf.size(), nan), dv(p.vf.size(), nan),
        dtable(tablef.size(), nan);
    std::vector<TensorView> inputs = {
        {p.qf.data(), DType::F32, p.q.shape, {}}, {p.kf.data(), DType::F32, p.k.shape, {}},
        {p.vf.data(), DType::F32, p.v.shape, {}}, {tablef.data(), DType::F32, table.shape, {}},
        {p.of.data(), DType::F32, p.o.shape, {}}, {p.dOf.data(), DType::F32, p.dOut.shape, {}}};
    std::vector<TensorView> grads = {{dq.data(), DType::F32, p.q.shape, {}},
                                     {dk.data(), DType::F32, p.k.shape, {}},
                                     {dv.data(), DType::F32, p.v.shape, {}},
                                     {dtable.data(), DType::F32, table.shape, {}}};
    Status status = kernel->runBackward(inputs, grads);
    ASSERT_TRUE(status) << status.message();
    const ref::AttentionGradients want = ref::attentionBackward(p.q, p.k, p.v, p.dOut, p.options);
    const ref::Tensor wantTable = ref::t5TableGradient(want.dScores, bidirectional, 32, 128,
                                                       ref::RelativeDistance{c.sq, c.skv});
    EXPECT_LE(gradientError(dq, want.dq), 1e-4) << "dq";
    EXPECT_LE(gradientError(dk, want.dk), 1e-4) << "dk";
    EXPECT_LE(gradientError(dv, want.dv), 1e-4) << "dv";
    EXPECT_LE(gradientError(dtable, wantTable), 1e-4) << "d t5_table";
    // Three gradients where four are due: an error naming the table's.
    grads.pop_back();
    Status missing = kernel->runBackward(inputs, grads);
    EXPECT_NE(missing.message().find("(dq, dk, dv, d t5_table)"), std::string::npos)
        << missing.message();
  }
}

TEST(Backward, T5TableGradientBitwiseIdenticalAcrossThreadCounts) {
  // The partial tables are summed in item order: the same bits at 1 and 2
  // threads, and run after run.
  BackwardCase c;
  c.batch = 2, c.heads = 4, c.kvHeads = 2, c.sq = c.skv = 90, c.causal = true;
  Expected<Spec> spec = Spec::fromText(
      fusedSource(c,
                  " causal encodings([#pe.t5_bias<num_buckets = 32, max_distance = 128, "
                  "bidirectional = false>])",
                  "tensor<32x4xf32>"));
  ASSERT_TRUE(spec) << spec.error();
  Problem p = drawProblem(c, rng(nullptr));
  std::vector<float> table = toFloat(randomTensor({32, 4}, rng(nullptr), 2.0));
  std::vector<std::vector<float>> tables;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    Expected<X86Kernel> kernel = runtime.getX86Backward(*spec);
    ASSERT_TRUE(kernel) << kernel.error();
    std::vector<float> dq(p.qf.size()), dk(p.kf.size()), dv(p.vf.size()), dtable(table.size());
    Status status = kernel->runBackward({{p.qf.data(), DType::F32, p.q.shape, {}},
                                         {p.kf.data(), DType::F32, p.k.shape, {}},
                                         {p.vf.data(), DType::F32, p.v.shape, {}},
                                         {table.data(), DType::F32, {32, 4}, {}},
                                         {p.of.data(), DType::F32, p.o.shape, {}},
                                         {p.dOf.data(), DType::F32, p.dOut.shape, {}}},
                                        {{dq.data(), DType::F32, p.q.shape, {}},
                                         {dk.data(), DType::F32, p.k.shape, {}},
                                         {dv.data(), DType::F32, p.v.shape, {}},
                                         {dtable.data(), DType::F32, {32, 4}, {}}});
    ASSERT_TRUE(status) << status.message();
    tables.push_back(dtable);
  }
  for (size_t r = 1; r < tables.size(); ++r)
    EXPECT_EQ(std::memcmp(tables[r].data(), tables[0].data(), tables[0].size() * 4), 0)
        << "d t5_table of run " << r;
}

TEST(Backward, ShawKeyTermWithoutItsTableGradient) {
  BackwardCase c;
  c.sq = c.skv = 16;
  // Shaw's key term without its table's gradient: a backward of dq, dk, dv
  // (BackwardShawTest.cpp checks its numbers).
  Expected<Spec> shaw = Spec::fromText(
      fusedSource(c, " encodings([#pe.relative_key<clip = 4>])", "tensor<9x16xf32>"));
  ASSERT_TRUE(shaw) << shaw.error();
  Expected<X86Kernel> shawKernel = suiteRuntime().getX86Backward(*shaw, /*operandGradients=*/false);
  ASSERT_TRUE(shawKernel) << shawKernel.error();
}

TEST(Backward, RunErrorsNameTheProblem) {
  BackwardCase c;
  Expected<Spec> spec = Spec::fromText(backwardSource(c));
  ASSERT_TRUE(spec) << spec.error();
  Expected<X86Kernel> kernel = suiteRuntime().getX86(*spec);
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(),
            (std::vector<std::string>{"query", "key", "value", "output", "output_grad"}));
  Problem p = drawProblem(c, rng(nullptr));
  std::vector<TensorView> inputs = {{p.qf.data(), DType::F32, p.q.shape, {}},
                                    {p.kf.data(), DType::F32, p.k.shape, {}},
                                    {p.vf.data(), DType::F32, p.v.shape, {}},
                                    {p.of.data(), DType::F32, p.o.shape, {}},
                                    {p.dOf.data(), DType::F32, p.dOut.shape, {}}};
  std::vector<float> dq(p.qf.size()), dk(p.kf.size()), dv(p.vf.size());
  TensorView dqView{dq.data(), DType::F32, p.q.shape, {}},
      dkView{dk.data(), DType::F32, p.k.shape, {}}, dvView{dv.data(), DType::F32, p.v.shape, {}};
  // A backward is not run with one output.
  Status single = kernel->run(inputs, dqView);
  EXPECT_NE(single.message().find("call runBackward"), std::string::npos) << single.message();
  // Two gradients, or one of the wrong shape.
  Status two = kernel->runBackward(inputs, {dqView, dkView});
  EXPECT_NE(two.message().find("expected 3 gradients"), std::string::npos) << two.message();
  Status shape = kernel->runBackward(inputs, {dqView, dqView, dvView});
  EXPECT_NE(shape.message().find("dk"), std::string::npos) << shape.message();
  // dv written over dO, which the run still reads.
  TensorView overDo{p.dOf.data(), DType::F32, p.v.shape, {}};
  Status overlap = kernel->runBackward(inputs, {dqView, dkView, overDo});
  EXPECT_NE(overlap.message().find("dv overlaps input 4 (output_grad)"), std::string::npos)
      << overlap.message();
  // A forward kernel has no backward run.
  Expected<Spec> forward = Spec::fromText(
      "func.func @f(%q: tensor<1x2x7x16xf32>, %k: tensor<1x1x7x16xf32>, %v: tensor<1x1x7x16xf32>) "
      "-> tensor<1x2x7x16xf32> {\n  %o = attn.attention %q, %k, %v : tensor<1x2x7x16xf32>, "
      "tensor<1x1x7x16xf32>, tensor<1x1x7x16xf32> -> tensor<1x2x7x16xf32>\n  return %o : "
      "tensor<1x2x7x16xf32>\n}\n");
  ASSERT_TRUE(forward) << forward.error();
  Expected<X86Kernel> forwardKernel = suiteRuntime().getX86(*forward);
  ASSERT_TRUE(forwardKernel) << forwardKernel.error();
  Status noBackward = forwardKernel->runBackward(inputs, {dqView, dkView, dvView});
  EXPECT_NE(noBackward.message().find("this one is a forward"), std::string::npos)
      << noBackward.message();
}

} // namespace
} // namespace pejit::testing
