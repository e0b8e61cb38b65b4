// Shaw's relative key and value terms in the x86 backward (docs/backward.md
// "How the x86 backward runs Shaw"): dq, dk, dv and the gradients of the
// a^K and a^V tables, shared or per head, each term alone and both
// together, beside RoPE, with a softcap, a window, GQA and sq < skv.
// Checked against the float64 reference (relativeKeyTermBackward and the
// bucketed value term's dValueRows, themselves checked by finite
// differences in tests/unit/AttentionGradTest.cpp): fresh random inputs and
// tables, NaN-poisoned gradients, max-norm relative error <= 1e-4 (f32).
// Bitwise the same at 1 and 2 threads.
#include "pejit/reference/AttentionGrad.h"
#include "pejit/reference/Rope.h"
#include "pejit/reference/ScoreBiasGrad.h"
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/ForwardBackwardRun.h"
#include "tests/runtime/GradientError.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace pejit::testing {
namespace {

struct ShawCase {
  std::string name;
  bool key = true, value = true, perHead = false;
  int64_t heads = 4, kvHeads = 2, sq = 33, skv = 33, d = 16, clip = 4;
  bool causal = true, rope = false;
  std::optional<double> softcap = std::nullopt;
  std::optional<int64_t> window = std::nullopt;
};

Spec forwardSpec(const ShawCase &c) {
  AttentionSpec attention;
  attention.causal = c.causal;
  attention.softcap = c.softcap;
  attention.window = c.window;
  int64_t heads = c.perHead ? c.heads : 0;
  if (c.key)
    attention.encodings.push_back(encodings::shawKey(c.clip, c.d, DType::F32, heads));
  if (c.value)
    attention.encodings.push_back(encodings::shawValue(c.clip, c.d, DType::F32, heads));
  if (c.rope)
    attention.rope = ref::RopeConfig{};
  return Spec::fromBuilder(attention, Shape{2, c.heads, c.kvHeads, c.sq, c.skv, c.d, c.d});
}

std::vector<int64_t> tableDims(const ShawCase &c) {
  if (c.perHead)
    return {c.heads, 2 * c.clip + 1, c.d};
  return {2 * c.clip + 1, c.d};
}

struct ShawRun {
  std::vector<float> o, dq, dk, dv, dKeyTable, dValueTable;
};

/// The forward, then the backward with the tables' gradients, on one draw.
ShawRun runBoth(Runtime &runtime, const ShawCase &c, const std::vector<float> &q,
                const std::vector<float> &k, const std::vector<float> &v,
                const std::vector<float> &dO, const std::vector<float> &keyTable,
                const std::vector<float> &valueTable) {
  std::vector<TensorView> tables;
  if (c.key)
    tables.push_back({(void *)keyTable.data(), DType::F32, tableDims(c), {}});
  if (c.value)
    tables.push_back({(void *)valueTable.data(), DType::F32, tableDims(c), {}});
  ForwardBackwardRun run = runForwardBackward(runtime, forwardSpec(c), {2, c.heads, c.sq, c.d},
                                              {2, c.kvHeads, c.skv, c.d}, q, k, v, dO, tables);
  if (run.operandGrads.size() != tables.size())
    return {};
  ShawRun shaw{run.o, run.dq, run.dk, run.dv, {}, {}};
  if (c.key)
    shaw.dKeyTable = run.operandGrads.front();
  if (c.value)
    shaw.dValueTable = run.operandGrads.back();
  return shaw;
}

void expectShawGradients(const ShawCase &c) {
  uint32_t seed = 0;
  std::mt19937 &engine = rng(&seed);
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + c.name);
  ref::Tensor q = randomTensor({2, c.heads, c.sq, c.d}, engine);
  ref::Tensor k = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor v = randomTensor({2, c.kvHeads, c.skv, c.d}, engine);
  ref::Tensor dOut = randomTensor({2, c.heads, c.sq, c.d}, engine);
  ref::Tensor keyTable = randomTensor(tableDims(c), engine);
  ref::Tensor valueTable = randomTensor(tableDims(c), engine);
  ref::Tensor qr = q, kr = k;
  ref::PositionIds queryIds = ref::defaultQueryPositions(c.sq, c.skv),
                   keyIds = ref::defaultKeyPositions(c.skv);
  if (c.rope) {
    qr = ref::applyRope(ref::RopeConfig{}, q, queryIds, c.skv);
    kr = ref::applyRope(ref::RopeConfig{}, k, keyIds, c.skv);
  }
  const ref::RelativeDistance distance{c.sq, c.skv};
  ref::AttentionOptions options;
  options.causal = c.causal;
  options.softcap = c.softcap;
  options.window = c.window;
  ref::Tensor keyTerm;
  if (c.key) {
    keyTerm = ref::relativeKeyTerm(qr, keyTable, c.clip, distance);
    options.keyTerm = &keyTerm;
  }
  if (c.value) {
    options.bucketedValueTerm.rows = &valueTable;
    options.bucketedValueTerm.bucket = [&](int64_t, int64_t i, int64_t j) {
      return ref::shawRelativeIndex(i, j, c.clip, c.sq, c.skv) + c.clip;
    };
  }
  ref::Tensor o = ref::attention(qr, kr, v, options);
  ref::AttentionGradients want = ref::attentionBackward(qr, kr, v, dOut, options);
  ref::Tensor dqr = want.dq, dKeyTable;
  if (c.key) { // q reaches the loss through q . k and through q . a^K
    ref::RelativeKeyTermGradients keyGrads =
        ref::relativeKeyTermBackward(qr, keyTable, c.clip, distance, want.dKeyTerm);
    for (size_t n = 0; n < dqr.data.size(); ++n)
      dqr.data[n] += keyGrads.dq.data[n];
    dKeyTable = keyGrads.dKeyTable;
  }
  ref::Tensor wantDq =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, q, dqr, queryIds, c.skv).dx : dqr;
  ref::Tensor wantDk =
      c.rope ? ref::applyRopeBackward(ref::RopeConfig{}, k, want.dk, keyIds, c.skv).dx : want.dk;
  ShawRun run = runBoth(suiteRuntime(), c, toFloat(q), toFloat(k), toFloat(v), toFloat(dOut),
                        toFloat(keyTable), toFloat(valueTable));
  ASSERT_EQ(run.dq.size(), q.data.size());
  EXPECT_LE(gradientError(run.o, o.data), 1e-4) << "forward output";
  EXPECT_LE(gradientError(run.dq, wantDq.data), 1e-4) << "dq";
  EXPECT_LE(gradientError(run.dk, wantDk.data), 1e-4) << "dk";
  EXPECT_LE(gradientError(run.dv, want.dv.data), 1e-4) << "dv";
  if (c.key)
    EXPECT_LE(gradientError(run.dKeyTable, dKeyTable.data), 1e-4) << "d shaw_key_table";
  if (c.value)
    EXPECT_LE(gradientError(run.dValueTable, want.dValueRows.data), 1e-4) << "d shaw_value_table";
}

TEST(BackwardShaw, KeyAndValueTermsAloneAndTogether) {
  expectShawGradients({"key alone", true, false});
  expectShawGradients({"value alone", false, true});
  expectShawGradients({"both"});
}

TEST(BackwardShaw, PerHeadTablesWithGqaAndLongerKeys) {
  expectShawGradients({"per head, sq < skv", true, true, true, 4, 2, 9, 70});
  expectShawGradients({"per head, bidirectional", true, true, true, 4, 4, 40, 40, 16, 4,
                       /*causal=*/false});
}

TEST(BackwardShaw, SoftcapWindowAndRope) {
  ShawCase softcap{"softcap, window", true, true, false, 4, 2, 65, 65, 16, 4};
  softcap.softcap = 2.0;
  softcap.window = 20;
  expectShawGradients(softcap);
  expectShawGradients({"rope, k = 16", true, true, true, 4, 2, 48, 48, 32, 16, true, true});
}

TEST(BackwardShaw, LengthsOneSevenAndThreeHundred) {
  expectShawGradients({"one row", true, true, false, 4, 2, 1, 1});
  expectShawGradients({"seven, decode-like", true, true, false, 4, 2, 1, 7});
  expectShawGradients({"seven", true, true, true, 4, 2, 7, 7, 16, 4, /*causal=*/false});
  expectShawGradients({"300, k = 8", true, true, false, 2, 1, 300, 300, 16, 8});
}

TEST(BackwardShaw, BitwiseIdenticalAcrossThreadCounts) {
  ShawCase c{"both, per head", true, true, true};
  c.sq = c.skv = 80;
  std::mt19937 &engine = rng(nullptr);
  std::vector<float> q = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine)),
                     k = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     v = toFloat(randomTensor({2, c.kvHeads, c.skv, c.d}, engine)),
                     dO = toFloat(randomTensor({2, c.heads, c.sq, c.d}, engine)),
                     keyTable = toFloat(randomTensor(tableDims(c), engine)),
                     valueTable = toFloat(randomTensor(tableDims(c), engine));
  std::vector<ShawRun> runs;
  for (int threads : {1, 2, 2}) {
    RuntimeOptions options;
    options.threads = threads;
    Runtime runtime(options);
    runs.push_back(runBoth(runtime, c, q, k, v, dO, keyTable, valueTable));
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].dKeyTable.size(), keyTable.size());
    EXPECT_EQ(std::memcmp(runs[r].dKeyTable.data(), runs[0].dKeyTable.data(), keyTable.size() * 4),
              0)
        << "d shaw_key_table of run " << r;
    EXPECT_EQ(
        std::memcmp(runs[r].dValueTable.data(), runs[0].dValueTable.data(), valueTable.size() * 4),
        0)
        << "d shaw_value_table of run " << r;
    EXPECT_EQ(std::memcmp(runs[r].dq.data(), runs[0].dq.data(), q.size() * 4), 0)
        << "dq of run " << r;
  }
}

} // namespace
} // namespace pejit::testing
