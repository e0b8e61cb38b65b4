// Packed variable-length batches (segments, docs/shape-classes.md): one
// kernel with `?` lengths runs a packed batch of sequences, each checked
// against the float64 reference of that sequence run alone (its own causal
// offset and default positions), on fresh random inputs with the output
// poisoned (f32: max |out - ref| <= 1e-4 max |ref| over the whole batch).
// The matrix: lengths {1, 5, 64, 300} with keys equal to or longer than the
// queries, causal and not, RoPE under GQA (explicit packed ids too), ALiBi,
// a window and T5; a batch of decode rows at different cache lengths; empty
// sequences. The compile count stays 1 per class, and bad offsets get
// errors that name the input and the index.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

#include <numeric>

using namespace pejit;
using namespace pejit::testing;

namespace {

/// One sequence of a packed batch: its query and key lengths.
struct Sequence {
  int64_t queries, keys;
};

/// The lengths {1, 5, 64, 300}, as prefill (keys = queries) and as
/// chunked prefill over a longer cache.
const std::vector<Sequence> kPrefill = {{1, 1}, {5, 5}, {64, 64}, {300, 300}};
const std::vector<Sequence> kChunked = {{1, 9}, {5, 70}, {64, 65}, {300, 301}};

/// A packed batch and what it was run with.
struct PackedRun {
  AttentionSpec spec; ///< the unpacked spec each sequence's reference uses
  int64_t hq = 4, hkv = 2, d = 64;
  std::vector<Sequence> sequences;
  /// Packed explicit position ids (one entry per packed row); empty: the
  /// per-sequence defaults.
  bool explicitPositions = false;
};

/// Rows [first, first + count) of dim 2.
ref::Tensor rowsOf(const ref::Tensor &t, int64_t first, int64_t count) {
  ref::Tensor part({t.dim(0), t.dim(1), count, t.dim(3)});
  for (int64_t h = 0; h < t.dim(1); ++h)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t c = 0; c < t.dim(3); ++c)
        part.at(0, h, i, c) = t.at(0, h, first + i, c);
  return part;
}

std::vector<int32_t> offsets(const std::vector<Sequence> &sequences, bool keys) {
  std::vector<int32_t> cu{0};
  for (const Sequence &s : sequences)
    cu.push_back(cu.back() + static_cast<int32_t>(keys ? s.keys : s.queries));
  return cu;
}

/// Runs the packed batch through the suite runtime's kernel of its class
/// and returns max |out - ref| / max |ref|; the reference is each
/// sequence's own (zeros for a sequence with no keys).
double runPacked(const PackedRun &run, std::string &error) {
  std::mt19937 &engine = rng(nullptr);
  std::vector<int32_t> cuQ = offsets(run.sequences, false), cuK = offsets(run.sequences, true);
  int64_t totalQ = cuQ.back(), totalK = cuK.back();
  ref::Tensor q = randomTensor({1, run.hq, totalQ, run.d}, engine);
  ref::Tensor k = randomTensor({1, run.hkv, totalK, run.d}, engine);
  ref::Tensor v = randomTensor({1, run.hkv, totalK, run.d}, engine);
  std::vector<ref::Tensor> operands;
  for (const EncodingSpec &encoding : run.spec.encodings)
    for (const std::vector<int64_t> &dims : encoding.operandShapes)
      operands.push_back(randomTensor(dims, engine));
  // Explicit ids: each sequence continues a cache of its own length.
  std::vector<int64_t> qp, kp;
  if (run.explicitPositions)
    for (const Sequence &s : run.sequences) {
      int64_t start = std::uniform_int_distribution<int64_t>(0, 1000)(engine);
      for (int64_t j = 0; j < s.keys; ++j)
        kp.push_back(start + j);
      for (int64_t i = 0; i < s.queries; ++i)
        qp.push_back(start + s.keys - s.queries + i);
    }

  AttentionSpec packed = run.spec;
  packed.packed = true;
  Shape cls{1, run.hq, run.hkv, kDynamicDim, kDynamicDim, run.d, run.d};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(packed, cls));
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  std::vector<std::vector<float>> operandFloats;
  for (const ref::Tensor &operand : operands)
    operandFloats.push_back(toFloat(operand));
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}}};
  for (size_t n = 0; n < operands.size(); ++n)
    inputs.push_back({operandFloats[n].data(), DType::F32, operands[n].shape, {}});
  inputs.push_back({cuQ.data(), DType::I32, {static_cast<int64_t>(cuQ.size())}, {}});
  inputs.push_back({cuK.data(), DType::I32, {static_cast<int64_t>(cuK.size())}, {}});
  bool readsIds = run.spec.rope || readsPositions(run.spec);
  if (run.explicitPositions && readsIds) {
    inputs.push_back({qp.data(), DType::I64, {totalQ}, {}});
    inputs.push_back({kp.data(), DType::I64, {totalK}, {}});
  }
  std::vector<float> out(run.hq * totalQ * run.d, std::numeric_limits<float>::quiet_NaN());
  if (Status st = kernel->run(inputs, {out.data(), DType::F32, {1, run.hq, totalQ, run.d}, {}});
      !st) {
    error = st.message();
    return 0;
  }

  double maxRef = 0, maxErr = 0;
  for (size_t n = 0; n < run.sequences.size(); ++n) {
    const Sequence &s = run.sequences[n];
    if (s.queries == 0)
      continue;
    ref::Tensor expected({1, run.hq, s.queries, run.d}); // no keys: zero rows
    if (s.keys > 0) {
      Case c;
      c.spec = run.spec;
      c.shape = {1, run.hq, run.hkv, s.queries, s.keys, run.d, run.d};
      std::vector<int64_t> sqp, skp;
      if (run.explicitPositions) {
        sqp.assign(qp.begin() + cuQ[n], qp.begin() + cuQ[n + 1]);
        skp.assign(kp.begin() + cuK[n], kp.begin() + cuK[n + 1]);
      }
      expected = referenceOutput(c, rowsOf(q, cuQ[n], s.queries), rowsOf(k, cuK[n], s.keys),
                                 rowsOf(v, cuK[n], s.keys), operands, sqp, skp, error);
      if (!error.empty())
        return 0;
    }
    for (int64_t h = 0; h < run.hq; ++h)
      for (int64_t i = 0; i < s.queries; ++i)
        for (int64_t c = 0; c < run.d; ++c) {
          double want = expected.at(0, h, i, c);
          float got = out[(h * totalQ + cuQ[n] + i) * run.d + c];
          maxRef = std::max(maxRef, std::fabs(want));
          maxErr = std::max(maxErr, std::isnan(got) ? INFINITY : std::fabs(got - want));
        }
  }
  return maxErr / std::max(maxRef, 1e-30);
}

/// Runs each batch through one kernel of the class and checks it; the
/// batches compile `compiles` kernels (1: the class is new to the runtime).
void expectPackedMatch(PackedRun run, const std::vector<std::vector<Sequence>> &batches,
                       int64_t compiles = 1) {
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  for (const std::vector<Sequence> &batch : batches) {
    run.sequences = batch;
    std::string lengths;
    for (const Sequence &s : batch)
      lengths += "(" + std::to_string(s.queries) + "," + std::to_string(s.keys) + ")";
    SCOPED_TRACE("sequences " + lengths);
    std::string error;
    double relativeError = runPacked(run, error);
    ASSERT_EQ(error, "");
    EXPECT_LE(relativeError, 1e-4);
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, compiles)
      << "one shape class, one compile";
}

/// The lengths in a few orders and mixes.
std::vector<std::vector<Sequence>> mixedBatches() {
  std::vector<Sequence> mixed = {kPrefill[3], kChunked[0], kPrefill[1], kChunked[2]};
  return {kPrefill, kChunked, mixed, {kPrefill[2]}, {kChunked[3], kPrefill[0]}};
}

TEST(Varlen, PlainAndCausalPerSequence) {
  PackedRun run;
  expectPackedMatch(run, mixedBatches());
  run.spec.causal = true;
  expectPackedMatch(run, mixedBatches());
}

// RoPE under GQA 8/2, d = 128: defaults per sequence (keys from 0, queries
// from len_k - len_q), then explicit packed ids continuing other caches.
TEST(Varlen, RopeGqaDefaultAndPackedPositions) {
  PackedRun run;
  run.hq = 8;
  run.d = 128;
  run.spec.rope = ref::RopeConfig{};
  run.spec.causal = true;
  expectPackedMatch(run, mixedBatches());
  // The ids are optional inputs of the same kernel: nothing compiles.
  run.explicitPositions = true;
  expectPackedMatch(run, mixedBatches(), /*compiles=*/0);
}

// ALiBi's distance and the window's diagonal come from each sequence's own
// offset; T5 reads its table for every sequence.
TEST(Varlen, AlibiWindowAndT5PerSequence) {
  PackedRun alibi;
  alibi.spec.encodings.push_back(encodings::alibi(4, 0, /*symmetric=*/false));
  alibi.spec.causal = true;
  expectPackedMatch(alibi, mixedBatches());
  PackedRun window;
  window.spec.window = 40;
  window.spec.causal = true;
  expectPackedMatch(window, mixedBatches());
  PackedRun t5;
  t5.spec.encodings.push_back(encodings::t5Bias(32, 128, /*bidirectional=*/true, 4));
  expectPackedMatch(t5, mixedBatches());
}

// A chat server's decode step: one query row per user, each over a cache of
// its own length (the long ones split over the cores).
TEST(Varlen, DecodeRowsAtDifferentCacheLengths) {
  PackedRun run;
  run.hq = 8;
  run.d = 128;
  run.spec.rope = ref::RopeConfig{};
  run.spec.ropeOnKey = false; // a pre-rotated cache
  expectPackedMatch(run, {{{1, 1}, {1, 300}, {1, 4000}, {1, 64}, {1, 1000}}, {{1, 7}}});
}

// A sequence with no queries writes nothing; one with queries but no keys
// gets zero rows, as every fully-masked row does.
TEST(Varlen, EmptySequences) {
  PackedRun run;
  run.hq = run.hkv = 1;
  run.spec.causal = true;
  expectPackedMatch(run, {{{0, 5}, {5, 5}, {3, 0}, {0, 0}, {64, 64}}});
}

// The interpreter (pejit run --check's oracle) runs the packed source per
// sequence too: it agrees with each sequence's own reference. RoPE, and
// ALiBi through a materialized pe.alibi bias of `?` lengths (sized by the
// attention it feeds, per sequence).
void expectInterpreterAgrees(AttentionSpec spec) {
  spec.packed = true;
  std::mt19937 &engine = rng(nullptr);
  std::vector<Sequence> sequences = {{5, 5}, {1, 9}, {64, 65}};
  std::vector<int32_t> cuQ = offsets(sequences, false), cuK = offsets(sequences, true);
  ref::Tensor q = randomTensor({1, 4, cuQ.back(), 64}, engine);
  ref::Tensor k = randomTensor({1, 2, cuK.back(), 64}, engine);
  ref::Tensor v = randomTensor({1, 2, cuK.back(), 64}, engine);
  auto ids = [](const std::vector<int32_t> &cu) {
    return ref::PositionIds::shared(std::vector<int64_t>(cu.begin(), cu.end()));
  };
  Shape cls{1, 4, 2, kDynamicDim, kDynamicDim, 64, 64};
  Expected<ref::Tensor> packed =
      interpretReference(Spec::fromBuilder(spec, cls).source(), {q, k, v, ids(cuQ), ids(cuK)});
  ASSERT_TRUE(packed) << packed.error();
  spec.packed = false;
  double maxErr = 0;
  for (size_t n = 0; n < sequences.size(); ++n) {
    Case c;
    c.spec = spec;
    c.shape = {1, 4, 2, sequences[n].queries, sequences[n].keys, 64, 64};
    std::string error;
    ref::Tensor expected = referenceOutput(c, rowsOf(q, cuQ[n], sequences[n].queries),
                                           rowsOf(k, cuK[n], sequences[n].keys),
                                           rowsOf(v, cuK[n], sequences[n].keys), {}, {}, {}, error);
    ASSERT_EQ(error, "");
    ref::Tensor got = rowsOf(*packed, cuQ[n], sequences[n].queries);
    for (size_t i = 0; i < got.data.size(); ++i)
      maxErr = std::max(maxErr, std::fabs(got.data[i] - expected.data[i]));
  }
  EXPECT_LE(maxErr, 1e-12);
  // Its offsets are checked as the kernel's are.
  spec.packed = true;
  std::vector<int32_t> bad = cuK;
  bad[1] = bad[2] + 1;
  Expected<ref::Tensor> refused =
      interpretReference(Spec::fromBuilder(spec, cls).source(), {q, k, v, ids(cuQ), ids(bad)});
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("entry 2 (" + std::to_string(bad[2]) + ") is less than entry 1"),
            std::string::npos)
      << refused.error();
}

TEST(Varlen, InterpreterAgreesWithPerSequenceReference) {
  AttentionSpec rope;
  rope.rope = ref::RopeConfig{};
  rope.causal = true;
  expectInterpreterAgrees(rope);
  AttentionSpec alibi;
  alibi.alibi = AlibiSpec{4, 0, false};
  alibi.causal = true;
  expectInterpreterAgrees(alibi);
}

// Bad offsets are errors that name the input and the index, never a read
// out of bounds.
TEST(Varlen, BadOffsetsAreErrorsNamingTheIndex) {
  AttentionSpec spec;
  spec.packed = true;
  Shape cls{1, 2, 2, kDynamicDim, kDynamicDim, 64, 64};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, cls));
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(),
            (std::vector<std::string>{"query", "key", "value", "query_segments", "key_segments"}));
  std::vector<float> q(2 * 10 * 64, 1.0f), k(2 * 12 * 64, 1.0f), out(2 * 10 * 64);
  auto runWith = [&](std::vector<int32_t> cuQ, std::vector<int32_t> cuK, DType dtype = DType::I32) {
    std::vector<int64_t> wide(cuK.begin(), cuK.end());
    std::vector<TensorView> inputs = {
        {q.data(), DType::F32, {1, 2, 10, 64}, {}},
        {k.data(), DType::F32, {1, 2, 12, 64}, {}},
        {k.data(), DType::F32, {1, 2, 12, 64}, {}},
        {cuQ.data(), DType::I32, {static_cast<int64_t>(cuQ.size())}, {}},
        {dtype == DType::I64 ? static_cast<void *>(wide.data()) : cuK.data(),
         dtype,
         {static_cast<int64_t>(cuK.size())},
         {}}};
    Status st = kernel->run(inputs, {out.data(), DType::F32, {1, 2, 10, 64}, {}});
    return st ? std::string("ok") : st.message();
  };
  EXPECT_EQ(runWith({0, 4, 10}, {0, 5, 12}), "ok");
  auto expectError = [&](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  expectError(runWith({1, 4, 10}, {0, 5, 12}),
              "query_segments (cu_seqlens_q): entry 0 is 1; the offsets start at 0");
  expectError(runWith({0, 4, 10}, {0, 7, 5, 12}),
              "key_segments (cu_seqlens_k): entry 2 (5) is less than entry 1 (7)");
  expectError(runWith({0, 4, 9}, {0, 5, 12}),
              "the last entry (9, index 2) must equal the packed query length sq = 10");
  expectError(runWith({0, 4, 10}, {0, 5, 13}),
              "the last entry (13, index 2) must equal the packed key length skv = 12");
  expectError(runWith({0, 4, 10}, {0, 2, 5, 12}),
              "query_segments has 3 entries but key_segments 4");
  EXPECT_EQ(runWith({0, 4, 10}, {0, 5, 12}, DType::I64), "ok"); // i64, as ids may be
  expectError(runWith({0, 4, 10}, {0, 5, 12}, DType::F32), "key_segments");
  expectError(runWith({0}, {0}), "is not [n + 1] with n >= 1 sequences");
}

} // namespace
