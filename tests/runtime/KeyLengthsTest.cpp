// Per-row key lengths (key_lengths, docs/shape-classes.md): a batch of
// rows over a KV cache of capacity skv, row n attending to its first
// lens[n] keys, each row checked against the float64 reference of that row
// run alone over K and V truncated to lens[n] keys (its own causal offset
// lens[n] - sq and default positions), on fresh random inputs with the
// output poisoned (f32: max |out - ref| <= 1e-4 max |ref|). Decode rows
// (sq = 1) and chunks (sq = 5) at lengths {0, 1, 5, 37, 300} of a 300-key
// cache; plain, RoPE on Q only (a pre-rotated cache) and on both, ALiBi, a
// window; GQA. The compile count stays 1 per class, and bad lengths get
// errors naming the index.
#include "pejit/runtime/Encodings.h"
#include "tests/runtime/SuiteRuntime.h"

#include "gtest/gtest.h"

using namespace pejit;
using namespace pejit::testing;

namespace {

constexpr int64_t kCapacity = 300, kHeads = 8, kKvHeads = 2, kDim = 64;

/// Runs a batch of rows with `lengths` through the class's kernel (batch
/// `?` or static) and returns max |out - ref| / max |ref|.
double runRows(const AttentionSpec &spec, const std::vector<int64_t> &lengths, int64_t sq,
               bool dynamicBatch, bool explicitIds, std::string &error) {
  std::mt19937 &engine = rng(nullptr);
  int64_t b = static_cast<int64_t>(lengths.size());
  ref::Tensor q = randomTensor({b, kHeads, sq, kDim}, engine);
  ref::Tensor k = randomTensor({b, kKvHeads, kCapacity, kDim}, engine);
  ref::Tensor v = randomTensor({b, kKvHeads, kCapacity, kDim}, engine);
  // Shared ids: the query rows continue at 400 + the keys' end.
  std::vector<int64_t> qp, kp;
  for (int64_t j = 0; j < kCapacity; ++j)
    kp.push_back(3 * j);
  for (int64_t i = 0; i < sq; ++i)
    qp.push_back(3 * kCapacity + 400 + i);
  AttentionSpec kernelSpec = spec;
  kernelSpec.keyLengths = true;
  Shape cls{dynamicBatch ? kDynamicDim : b, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(kernelSpec, cls));
  if (!kernel) {
    error = kernel.error();
    return 0;
  }
  std::vector<float> qf = toFloat(q), kf = toFloat(k), vf = toFloat(v);
  std::vector<int32_t> lens(lengths.begin(), lengths.end());
  std::vector<TensorView> inputs = {{qf.data(), DType::F32, q.shape, {}},
                                    {kf.data(), DType::F32, k.shape, {}},
                                    {vf.data(), DType::F32, v.shape, {}},
                                    {lens.data(), DType::I32, {b}, {}}};
  bool readsIds = spec.rope || readsPositions(spec);
  if (explicitIds && readsIds) {
    inputs.push_back({qp.data(), DType::I64, {sq}, {}});
    inputs.push_back({kp.data(), DType::I64, {kCapacity}, {}});
  }
  std::vector<float> out(b * kHeads * sq * kDim, std::numeric_limits<float>::quiet_NaN());
  if (Status st = kernel->run(inputs, {out.data(), DType::F32, {b, kHeads, sq, kDim}, {}}); !st) {
    error = st.message();
    return 0;
  }
  double maxRef = 0, maxErr = 0;
  for (int64_t n = 0; n < b; ++n) {
    ref::Tensor expected({1, kHeads, sq, kDim}); // no keys: zero rows
    if (lengths[n] > 0) {
      Case c;
      c.spec = spec;
      c.shape = {1, kHeads, kKvHeads, sq, lengths[n], kDim, kDim};
      std::vector<int64_t> rowKeys;
      if (explicitIds)
        rowKeys.assign(kp.begin(), kp.begin() + lengths[n]);
      expected = referenceOutput(c, rowPrefix(q, n, sq), rowPrefix(k, n, lengths[n]),
                                 rowPrefix(v, n, lengths[n]), {},
                                 explicitIds ? qp : std::vector<int64_t>{}, rowKeys, error);
      if (!error.empty())
        return 0;
    }
    for (size_t i = 0; i < expected.data.size(); ++i) {
      float got = out[n * kHeads * sq * kDim + i];
      maxRef = std::max(maxRef, std::fabs(expected.data[i]));
      maxErr = std::max(maxErr, std::isnan(got) ? INFINITY : std::fabs(got - expected.data[i]));
    }
  }
  return maxErr / std::max(maxRef, 1e-30);
}

/// Decode rows and chunks at the lengths, through one kernel of the class.
void expectRowsMatch(const AttentionSpec &spec, bool dynamicBatch, bool explicitIds = false,
                     int64_t compiles = 1) {
  int64_t compilesBefore = suiteRuntime().stats().compiles;
  const std::vector<std::vector<int64_t>> batches = {{1, 37, 300}, {300, 0, 5}, {37, 1, 300}};
  for (int64_t sq : {1, 5})
    for (const std::vector<int64_t> &lengths : batches) {
      if (!dynamicBatch && lengths.size() != 3)
        continue;
      SCOPED_TRACE("sq " + std::to_string(sq) + ", lengths " + std::to_string(lengths[0]) + ", " +
                   std::to_string(lengths[1]) + ", " + std::to_string(lengths[2]));
      std::string error;
      double relative = runRows(spec, lengths, sq, dynamicBatch, explicitIds, error);
      ASSERT_EQ(error, "");
      EXPECT_LE(relative, 1e-4);
    }
  if (dynamicBatch) { // one row, then five: the same kernel
    std::string error;
    EXPECT_LE(runRows(spec, {64}, 1, true, explicitIds, error), 1e-4);
    EXPECT_LE(runRows(spec, {5, 300, 1, 0, 200}, 1, true, explicitIds, error), 1e-4);
    EXPECT_EQ(error, "");
  }
  EXPECT_EQ(suiteRuntime().stats().compiles - compilesBefore, compiles)
      << "one shape class, one compile";
}

TEST(KeyLengths, PlainAndCausalRows) {
  AttentionSpec spec;
  expectRowsMatch(spec, /*dynamicBatch=*/true);
  spec.causal = true;
  expectRowsMatch(spec, /*dynamicBatch=*/false);
}

// RoPE over a pre-rotated cache (Q only) and rotating both, the defaults
// per row (the query at lens[n] - sq ..), then shared explicit ids.
TEST(KeyLengths, RopeRows) {
  AttentionSpec spec;
  spec.rope = ref::RopeConfig{};
  spec.causal = true;
  spec.ropeOnKey = false;
  expectRowsMatch(spec, true);
  spec.ropeOnKey = true;
  expectRowsMatch(spec, true);
  expectRowsMatch(spec, true, /*explicitIds=*/true, /*compiles=*/0);
}

TEST(KeyLengths, AlibiAndWindowRows) {
  AttentionSpec alibi;
  alibi.encodings.push_back(encodings::alibi(kHeads, 0, /*symmetric=*/false));
  alibi.causal = true;
  expectRowsMatch(alibi, true);
  AttentionSpec window;
  window.window = 20;
  window.causal = true;
  expectRowsMatch(window, true);
}

// The interpreter (pejit run --check) runs each row alone too, a
// materialized pe.alibi sized per row.
TEST(KeyLengths, InterpreterAgreesWithPerRowReference) {
  AttentionSpec spec;
  spec.alibi = AlibiSpec{kHeads, 0, false};
  spec.causal = true;
  spec.keyLengths = true;
  std::mt19937 &engine = rng(nullptr);
  std::vector<int64_t> lengths = {37, 0, 300};
  ref::Tensor q = randomTensor({3, kHeads, 5, kDim}, engine);
  ref::Tensor k = randomTensor({3, kKvHeads, kCapacity, kDim}, engine);
  ref::Tensor v = randomTensor({3, kKvHeads, kCapacity, kDim}, engine);
  Shape cls{kDynamicDim, kHeads, kKvHeads, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<ref::Tensor> got = interpretReference(Spec::fromBuilder(spec, cls).source(),
                                                 {q, k, v, ref::PositionIds::shared(lengths)});
  ASSERT_TRUE(got) << got.error();
  spec.keyLengths = false;
  double maxErr = 0;
  for (int64_t n = 0; n < 3; ++n) {
    ref::Tensor expected({1, kHeads, 5, kDim});
    if (lengths[n] > 0) {
      Case c;
      c.spec = spec;
      c.shape = {1, kHeads, kKvHeads, 5, lengths[n], kDim, kDim};
      std::string error;
      expected = referenceOutput(c, rowPrefix(q, n, 5), rowPrefix(k, n, lengths[n]),
                                 rowPrefix(v, n, lengths[n]), {}, {}, {}, error);
      ASSERT_EQ(error, "");
    }
    ref::Tensor row = rowPrefix(*got, n, 5);
    for (size_t i = 0; i < row.data.size(); ++i)
      maxErr = std::max(maxErr, std::fabs(row.data[i] - expected.data[i]));
  }
  EXPECT_LE(maxErr, 1e-12);
}

TEST(KeyLengths, BadLengthsAreErrorsNamingTheIndex) {
  AttentionSpec spec;
  spec.keyLengths = true;
  Shape cls{kDynamicDim, 2, 2, kDynamicDim, kDynamicDim, kDim, kDim};
  Expected<X86Kernel> kernel = suiteRuntime().getX86(Spec::fromBuilder(spec, cls));
  ASSERT_TRUE(kernel) << kernel.error();
  EXPECT_EQ(kernel->arguments(),
            (std::vector<std::string>{"query", "key", "value", "key_lengths"}));
  std::vector<float> q(2 * 2 * 1 * kDim, 1.0f), k(2 * 2 * 10 * kDim, 1.0f), out(q.size());
  auto runWith = [&](std::vector<int32_t> lens) {
    Status st = kernel->run({{q.data(), DType::F32, {2, 2, 1, kDim}, {}},
                             {k.data(), DType::F32, {2, 2, 10, kDim}, {}},
                             {k.data(), DType::F32, {2, 2, 10, kDim}, {}},
                             {lens.data(), DType::I32, {static_cast<int64_t>(lens.size())}, {}}},
                            {out.data(), DType::F32, {2, 2, 1, kDim}, {}});
    return st ? std::string("ok") : st.message();
  };
  EXPECT_EQ(runWith({10, 3}), "ok");
  auto expectError = [](const std::string &message, const std::string &part) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  };
  expectError(runWith({11, 3}), "key_lengths: entry 0 is 11, outside [0, skv = 10]");
  expectError(runWith({4, -1}), "key_lengths: entry 1 is -1, outside [0, skv = 10]");
  expectError(runWith({4, 4, 4}), "key_lengths");
}

} // namespace
